"""Arithmetic the reference's operations share: NNAPI's fixed-point requantisation, fused
activations, broadcasting, padding, layouts and float16 conversions.
"""
