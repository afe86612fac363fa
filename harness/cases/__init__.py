"""Case sources: the AOSP golden vectors (loading, index, import, the VTS execution matrix),
.tflite import, the capability probe that decides which cases a driver can run, coverage.
"""
