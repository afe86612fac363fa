"""Quantisation arithmetic shared by every quantised operation, vectorised over int64 arrays.

These follow the gemmlowp/TFLite fixed-point helpers that Android's CPU reference uses, so
results match it bit for bit: a real multiplier becomes an int32 mantissa and a power-of-two
shift; products round with "saturating rounding doubling high multiply" and shifts round half
away from zero ("rounding divide by power of two").
"""

from __future__ import annotations

import math

import numpy as np

from nnconform.ir import Operand, OperandType

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
    """std::round, vectorised and exact for every finite input.

    floor(|x| + 0.5) is wrong just below 0.5 (0.49999997f + 0.5 rounds up to 1.0 in float32);
    splitting off the integer part avoids any rounding: x - trunc(x) is exact."""
    x = np.asarray(x)
    t = np.trunc(x)
    return t + np.where(np.abs(x - t) >= 0.5, np.sign(x), 0).astype(x.dtype)


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


_LOW31 = (1 << 31) - 1


def saturating_rounding_doubling_high_mul(a, b) -> np.ndarray:
    """gemmlowp SaturatingRoundingDoublingHighMul on int32 values held in int64.

    (a*b + nudge) / 2**31 truncated toward zero, where nudge is 2**30 for a non-negative
    product and 1 - 2**30 for a negative one.  Branch-free: ``x >> 63`` is 0 or -1, so
    masking with it selects the negative-side corrections without np.where (this runs on
    every quantised tensor element, so it must stay cheap)."""
    a = np.asarray(a, dtype=np.int64)
    ab = a * np.int64(b) if np.isscalar(b) else a * np.asarray(b, dtype=np.int64)
    neg = ab >> 63  # sign of the product: 0 or -1
    neg &= 1 - (1 << 31)  # negative products: nudge 1 - 2**30, not 2**30
    ab += neg
    ab += 1 << 30
    ab += (ab >> 63) & _LOW31  # C++ division truncates toward zero
    ab >>= 31
    if np.isscalar(b) and b != INT32_MIN:
        return ab  # the only overflow needs both at INT32_MIN
    overflow = (a == INT32_MIN) & (np.asarray(b) == INT32_MIN)
    return np.where(overflow, INT32_MAX, ab)


def rounding_divide_by_pot(x, exponent) -> np.ndarray:
    """gemmlowp RoundingDivideByPOT: x / 2**exponent rounded to nearest, ties away from zero."""
    x = np.asarray(x, dtype=np.int64)
    if np.isscalar(exponent) or np.ndim(exponent) == 0:
        e = int(exponent)
        if e == 0:
            return x
        mask = (1 << e) - 1
        threshold = (mask >> 1) + (x < 0)
        return (x >> e) + ((x & mask) > threshold)
    exponent = np.asarray(exponent, dtype=np.int64)
    mask = (np.int64(1) << exponent) - 1
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + ((x & mask) > threshold)


def multiply_by_quantized_multiplier(x, multiplier, shift) -> np.ndarray:
    """TFLite MultiplyByQuantizedMultiplier: shift > 0 shifts left before the multiply,
    shift < 0 rounds right after it.  ``multiplier``/``shift`` may be arrays (per channel)."""
    x = np.asarray(x, dtype=np.int64)
    if np.ndim(shift) == 0 and np.ndim(multiplier) == 0:  # the common per-tensor case
        shift, multiplier = int(shift), int(multiplier)
        if shift > 0:
            x = x << shift
        return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x, multiplier), max(-shift, 0))
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
