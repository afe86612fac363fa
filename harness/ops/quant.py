"""Quantisation arithmetic shared by every quantised operation, vectorised over int64 arrays.

These follow the gemmlowp/TFLite fixed-point helpers that Android's CPU reference uses, so
results match it bit for bit: a real multiplier becomes an int32 mantissa and a power-of-two
shift; products round with "saturating rounding doubling high multiply" and shifts round half
away from zero ("rounding divide by power of two").
"""
from __future__ import annotations

import math

import numpy as np

from ..ir import Operand, OperandType

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1

# Storage range of each quantised tensor type.
QUANT_RANGE: dict[OperandType, tuple[int, int]] = {
    OperandType.TENSOR_QUANT8_ASYMM: (0, 255),
    OperandType.TENSOR_QUANT8_ASYMM_SIGNED: (-128, 127),
    OperandType.TENSOR_QUANT8_SYMM: (-128, 127),
    OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL: (-128, 127),
    OperandType.TENSOR_QUANT16_SYMM: (-32768, 32767),
    OperandType.TENSOR_QUANT16_ASYMM: (0, 65535),
}


def round_half_away(x: float) -> int:
    """C++ std::round for a scalar (Python's round() is banker's rounding)."""
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


def round_half_away_array(x: np.ndarray) -> np.ndarray:
    """std::round, vectorised."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def quantize_multiplier(real: float) -> tuple[int, int]:
    """real ~= multiplier * 2**(shift - 31), multiplier in [2**30, 2**31).  shift > 0 is a left
    shift.  Matches NNAPI's QuantizeMultiplier (frexp, then std::round of q * 2**31)."""
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    q_fixed = round_half_away(q * (1 << 31))
    if q_fixed == (1 << 31):
        q_fixed //= 2
        shift += 1
    if shift < -31:
        # The reference flushes multipliers too small to represent to exactly zero.
        return 0, 0
    return int(q_fixed), int(shift)


def quantize_multiplier_smaller_than_one(real: float) -> tuple[int, int]:
    """For 0 <= real < 1: returns (multiplier, right_shift) with right_shift >= 0."""
    if not (0.0 <= real < 1.0):
        raise ValueError(f"multiplier {real} is not in [0, 1)")
    m, shift = quantize_multiplier(real)
    return m, -shift


def quantize_multiplier_greater_than_one(real: float) -> tuple[int, int]:
    """For real > 1: returns (multiplier, left_shift) with left_shift >= 0."""
    if not real > 1.0:
        raise ValueError(f"multiplier {real} is not > 1")
    m, shift = quantize_multiplier(real)
    return m, shift


def _trunc_div_pow2(x: np.ndarray, n: int) -> np.ndarray:
    """C++ integer division by 2**n (truncates toward zero)."""
    return np.where(x >= 0, x >> n, -((-x) >> n))


def saturating_rounding_doubling_high_mul(a, b) -> np.ndarray:
    """gemmlowp SaturatingRoundingDoublingHighMul on int32 values held in int64."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    out = _trunc_div_pow2(ab + nudge, 31)
    overflow = (a == INT32_MIN) & (b == INT32_MIN)
    return np.where(overflow, INT32_MAX, out)


def rounding_divide_by_pot(x, exponent) -> np.ndarray:
    """gemmlowp RoundingDivideByPOT: x / 2**exponent rounded half away from zero."""
    x = np.asarray(x, dtype=np.int64)
    exponent = np.asarray(exponent, dtype=np.int64)
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def multiply_by_quantized_multiplier(x, multiplier, shift) -> np.ndarray:
    """TFLite MultiplyByQuantizedMultiplier: shift > 0 shifts left before the multiply,
    shift < 0 rounds right after it.  ``multiplier``/``shift`` may be arrays (per channel)."""
    x = np.asarray(x, dtype=np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x << left, multiplier), right)


def multiply_by_quantized_multiplier_smaller_than_one(x, multiplier, right_shift) -> np.ndarray:
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x, multiplier), right_shift)


def multiply_by_quantized_multiplier_greater_than_one(x, multiplier, left_shift) -> np.ndarray:
    x = np.asarray(x, dtype=np.int64)
    return saturating_rounding_doubling_high_mul(x << np.int64(left_shift), multiplier)


def quant_range(op: Operand) -> tuple[int, int]:
    return QUANT_RANGE[op.type]


def dequantize(values: np.ndarray, op: Operand) -> np.ndarray:
    """Stored integers -> float32 (per-channel aware)."""
    v = values.astype(np.float32)
    if op.channel_quant is not None:
        scales = np.asarray(op.channel_quant.scales, dtype=np.float32)
        shape = [1] * values.ndim
        shape[op.channel_quant.channel_dim] = -1
        return v * scales.reshape(shape)
    return (v - np.float32(op.zero_point)) * np.float32(op.scale)


def quantize(real: np.ndarray, op: Operand) -> np.ndarray:
    """float -> stored integers of ``op``'s type: clamp(round_half_away(x / scale) + zp).
    This is the rounding NNAPI's QUANTIZE and the test generator use."""
    lo, hi = quant_range(op)
    q = round_half_away_array(np.asarray(real, dtype=np.float32) / np.float32(op.scale)) + op.zero_point
    return np.clip(q, lo, hi).astype(op.info.dtype)


def saturate(values: np.ndarray, op: Operand) -> np.ndarray:
    """Clamp int64 results into ``op``'s storage type."""
    lo, hi = quant_range(op)
    return np.clip(values, lo, hi).astype(op.info.dtype)
