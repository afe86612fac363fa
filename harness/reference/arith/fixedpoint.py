"""gemmlowp-style fixed-point arithmetic shared by the quantised transcendental kernels
(LOGISTIC, TANH, SOFTMAX, LOG_SOFTMAX).

Values are int64 numpy arrays holding the raw int32 of a ``FixedPoint<int32, IntegerBits>``;
additions that gemmlowp does in plain int32 arithmetic are wrapped to 32 bits with
:func:`wrap32`.  The basic multiply/shift primitives live in ``quant.py``.
"""

from __future__ import annotations

import math

import numpy as np

from nnconform.reference.arith import quant
from nnconform.reference.arith.quant import (
    INT32_MAX,
    INT32_MIN,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
)

_srdhm = saturating_rounding_doubling_high_mul


def wrap32(x) -> np.ndarray:
    """int32 two's-complement wrap-around of an int64 array."""
    x = np.asarray(x, dtype=np.int64)
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def saturating_rounding_mul_by_pot(x, exponent: int) -> np.ndarray:
    """gemmlowp SaturatingRoundingMultiplyByPOT: saturating left shift for exponent > 0,
    rounding right shift for exponent < 0."""
    x = np.asarray(x, dtype=np.int64)
    if exponent == 0:
        return x
    if exponent < 0:
        return rounding_divide_by_pot(x, -exponent)
    threshold = (1 << (31 - exponent)) - 1
    return np.where(x > threshold, INT32_MAX, np.where(x < -threshold, INT32_MIN, x << exponent))


def rescale(x, src_integer_bits: int, dst_integer_bits: int) -> np.ndarray:
    """gemmlowp Rescale<dst>(FixedPoint<int32, src>)."""
    return saturating_rounding_mul_by_pot(x, src_integer_bits - dst_integer_bits)


def rounding_half_sum(a, b) -> np.ndarray:
    """(a + b) / 2 rounded half away from zero (C integer division after adding the sign)."""
    s = np.asarray(a, dtype=np.int64) + np.asarray(b, dtype=np.int64)
    s = s + np.where(s >= 0, 1, -1)
    return np.where(s >= 0, s // 2, -((-s) // 2))


def _exp_on_interval_minus_quarter_to_0(a) -> np.ndarray:
    """exp(a) for a in [-1/4, 0), Q0.31 in and out: Taylor series around -1/8."""
    exp_minus_one_eighth = 1895147668
    one_third = 715827883
    x = wrap32(a + (1 << 28))
    x2 = _srdhm(x, x)
    x3 = _srdhm(x2, x)
    x4 = _srdhm(x2, x2)
    x4_over_4 = saturating_rounding_mul_by_pot(x4, -2)
    poly = saturating_rounding_mul_by_pot(wrap32(_srdhm(wrap32(x4_over_4 + x3), one_third) + x2), -1)
    return wrap32(exp_minus_one_eighth + _srdhm(exp_minus_one_eighth, wrap32(x + poly)))


# exp(-2**k) in Q0.31 for the barrel shifter over the integer part of the argument.
_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535), (3, 720401), (4, 242))


def exp_on_negative_values(a, integer_bits: int) -> np.ndarray:
    """gemmlowp exp_on_negative_values: exp(a) for a <= 0 given in Q(integer_bits); Q0.31 out."""
    a = np.asarray(a, dtype=np.int64)
    frac = 31 - integer_bits
    quarter = 1 << (frac - 2)
    a_mod_quarter_minus_quarter = wrap32((a & (quarter - 1)) - quarter)
    result = _exp_on_interval_minus_quarter_to_0(rescale(a_mod_quarter_minus_quarter, integer_bits, 0))
    remainder = wrap32(a_mod_quarter_minus_quarter - a)
    for exponent, multiplier in _EXP_BARREL:
        if integer_bits > exponent:
            bit = np.int64(1) << (frac + exponent)
            result = np.where((remainder & bit) != 0, _srdhm(result, multiplier), result)
    if integer_bits > 5:
        clamp = -(1 << (36 - integer_bits))  # -32.0: exp underflows to zero below it
        result = np.where(a < clamp, 0, result)
    return np.where(a == 0, INT32_MAX, result)


def _newton_reciprocal_of_half_denominator(half_denominator) -> np.ndarray:
    """Three Newton-Raphson steps for 1 / half_denominator; Q2.29 result."""
    one_q2 = 1 << 29
    x = wrap32(1515870810 + _srdhm(half_denominator, -1010580540))  # 48/17 - 32/17 * d
    for _ in range(3):
        one_minus_dx = wrap32(one_q2 - _srdhm(half_denominator, x))
        x = wrap32(x + rescale(_srdhm(x, one_minus_dx), 4, 2))
    return x


def one_over_one_plus_x_for_x_in_0_1(a) -> np.ndarray:
    """1 / (1 + a) for a in Q0.31 in [0, 1); Q0.31 out."""
    x = _newton_reciprocal_of_half_denominator(rounding_half_sum(a, INT32_MAX))
    return rescale(x, 1, 0)  # x / 2 as Q1 (exact), then back to Q0


# ---- the same functions on Python ints (one value at a time) ---------------------------------
# A handful of values (one SOFTMAX row's sum, say) costs dozens of numpy calls on 1-element
# arrays in the functions above; these give the same bits with plain integer arithmetic.
# Python's ints are unbounded and its >> and & are two's-complement like int64's, so each
# line mirrors its numpy twin (tests/test_fixedpoint_scalar.py checks them against each other).


def _srdhm_int(a: int, b: int) -> int:
    if a == INT32_MIN and b == INT32_MIN:
        return INT32_MAX
    v = a * b + ((1 << 30) if a * b >= 0 else 1 - (1 << 30))
    return v >> 31 if v >= 0 else -((-v) >> 31)


def _wrap32_int(x: int) -> int:
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _rdbp_int(x: int, e: int) -> int:
    if e == 0:
        return x
    mask = (1 << e) - 1
    return (x >> e) + (1 if (x & mask) > (mask >> 1) + (1 if x < 0 else 0) else 0)


def _rescale_int(x: int, src_integer_bits: int, dst_integer_bits: int) -> int:
    e = src_integer_bits - dst_integer_bits
    if e == 0:
        return x
    if e < 0:
        return _rdbp_int(x, -e)
    threshold = (1 << (31 - e)) - 1
    return INT32_MAX if x > threshold else INT32_MIN if x < -threshold else x << e


def one_over_one_plus_x_for_x_in_0_1_int(a: int) -> int:
    """:func:`one_over_one_plus_x_for_x_in_0_1` of one Python int."""
    s = a + INT32_MAX
    s += 1 if s >= 0 else -1
    half_denominator = s // 2 if s >= 0 else -((-s) // 2)
    x = _wrap32_int(1515870810 + _srdhm_int(half_denominator, -1010580540))
    for _ in range(3):
        one_minus_dx = _wrap32_int((1 << 29) - _srdhm_int(half_denominator, x))
        x = _wrap32_int(x + _rescale_int(_srdhm_int(x, one_minus_dx), 4, 2))
    return _rescale_int(x, 1, 0)


def one_minus_x_over_one_plus_x_for_x_in_0_1(a) -> np.ndarray:
    """(1 - a) / (1 + a) for a in Q0.31 in [0, 1); Q0.31 out."""
    x = _newton_reciprocal_of_half_denominator(rounding_half_sum(a, INT32_MAX))
    return rescale(wrap32(x - (1 << 29)), 2, 0)


def fixed_logistic(a, integer_bits: int) -> np.ndarray:
    """gemmlowp logistic: Q(integer_bits) in, Q0.31 out."""
    a = np.asarray(a, dtype=np.int64)
    positive = a > 0
    abs_a = np.where(positive, a, wrap32(-a))
    if_positive = one_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(wrap32(-abs_a), integer_bits))
    if_negative = wrap32(INT32_MAX - if_positive)
    return np.where(a == 0, 1 << 30, np.where(positive, if_positive, if_negative))


def fixed_tanh(a, integer_bits: int) -> np.ndarray:
    """gemmlowp tanh: Q(integer_bits) in, Q0.31 out; via (1 - exp(-2|x|)) / (1 + exp(-2|x|))."""
    a = np.asarray(a, dtype=np.int64)
    negative = a < 0
    n = np.where(negative, a, wrap32(-a))
    # doubling the argument is exact: the same raw value read with one more integer bit
    t = one_minus_x_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(n, integer_bits + 1))
    return np.where(a == 0, 0, np.where(negative, wrap32(-t), t))


def quantize_multiplier_greater_than_one(real: float) -> tuple[int, int] | None:
    """NNAPI QuantizeMultiplierGreaterThanOne; None where the reference refuses (real <= 1)."""
    if not real > 1.0:
        return None
    return quant.quantize_multiplier_greater_than_one(real)


def calculate_input_radius(integer_bits: int, left_shift: int) -> int:
    """Largest centred input whose rescaled value still fits Q(integer_bits)."""
    return int(math.floor(((1 << integer_bits) - 1) * float(1 << (31 - integer_bits)) / float(1 << left_shift)))


def f32(x: float) -> float:
    """A value as the reference holds it: a C float, promoted to double where it is used."""
    return float(np.float32(x))
