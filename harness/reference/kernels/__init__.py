"""Compiled kernels (numba and hand-written LLVM IR, each checked against the numpy path on
first use), BLAS threading and the kept heap: speed for the reference, same bits.
"""
