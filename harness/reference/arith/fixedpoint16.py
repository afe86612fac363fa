"""gemmlowp ``FixedPoint<int16_t, IntegerBits>`` arithmetic for the quantised LSTMs
(QUANTIZED_16BIT_LSTM, QUANTIZED_LSTM), raw values held in int64 numpy arrays.

The int32 counterparts live in ``fixedpoint.py``; these differ in width (15 fractional bits
for Q0, constants rounded from their int32 forms, int16 wrap-around and saturation).
"""

from __future__ import annotations

import numpy as np

from nnconform.reference.arith.quant import rounding_divide_by_pot

INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1


def wrap16(x) -> np.ndarray:
    """int16 two's-complement wrap-around (gemmlowp's plain int16 Add/Sub/Neg)."""
    x = np.asarray(x, dtype=np.int64)
    return ((x + (1 << 15)) & 0xFFFF) - (1 << 15)


def srdhm16(a, b) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul for int16."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    s = ab + nudge
    out = np.where(s >= 0, s >> 15, -((-s) >> 15))  # C division truncates toward zero
    return np.where((a == INT16_MIN) & (b == INT16_MIN), INT16_MAX, wrap16(out))


def sat_mul_pot16(x, exponent: int) -> np.ndarray:
    """SaturatingRoundingMultiplyByPOT for int16."""
    x = np.asarray(x, dtype=np.int64)
    if exponent == 0:
        return x
    if exponent < 0:
        return rounding_divide_by_pot(x, -exponent)
    threshold = (1 << (15 - exponent)) - 1
    return np.where(x > threshold, INT16_MAX, np.where(x < -threshold, INT16_MIN, x << exponent))


def rescale16(x, src_bits: int, dst_bits: int) -> np.ndarray:
    return sat_mul_pot16(x, src_bits - dst_bits)


def saturating_add16(a, b) -> np.ndarray:
    return np.clip(np.asarray(a, np.int64) + np.asarray(b, np.int64), INT16_MIN, INT16_MAX)


def _c16(raw32: int) -> int:
    """An int32 gemmlowp constant narrowed to int16 (RescaleConstantInitializer)."""
    return int(rounding_divide_by_pot(np.int64(raw32), 16))


_ONE_Q0 = INT16_MAX


def _rounding_half_sum16(a, b) -> np.ndarray:
    s = np.asarray(a, np.int64) + np.asarray(b, np.int64)
    s = s + np.where(s >= 0, 1, -1)
    return wrap16(np.where(s >= 0, s // 2, -((-s) // 2)))


def _exp_quarter16(a) -> np.ndarray:
    """exp(a) for a in [-1/4, 0), Q0.15 in and out (Taylor series around -1/8)."""
    constant_term, one_third = _c16(1895147668), _c16(715827883)
    x = wrap16(a + (1 << 12))
    x2 = srdhm16(x, x)
    x3 = srdhm16(x2, x)
    x4 = srdhm16(x2, x2)
    x4_over_4 = sat_mul_pot16(x4, -2)
    poly = sat_mul_pot16(wrap16(srdhm16(wrap16(x4_over_4 + x3), one_third) + x2), -1)
    return saturating_add16(constant_term, srdhm16(constant_term, wrap16(x + poly)))


_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535), (3, 720401), (4, 242))


def exp_on_negative_values16(a, integer_bits: int) -> np.ndarray:
    a = np.asarray(a, dtype=np.int64)
    frac = 15 - integer_bits
    quarter = 1 << (frac - 2)
    a_mod = wrap16((a & (quarter - 1)) - quarter)
    result = _exp_quarter16(rescale16(a_mod, integer_bits, 0))
    remainder = wrap16(a_mod - a)
    for exponent, multiplier in _EXP_BARREL:
        if integer_bits > exponent:
            bit = np.int64(1) << (frac + exponent)
            result = np.where((remainder & bit) != 0, srdhm16(result, _c16(multiplier)), result)
    if integer_bits > 5:
        clamp = _c16(-(1 << (36 - integer_bits)))
        result = np.where(a < clamp, 0, result)
    return np.where(a == 0, _ONE_Q0, result)


def _newton_half_reciprocal16(a) -> np.ndarray:
    """x ~ 1 / ((1 + a) / 2) in Q2.13 for a in [0, 1] (three Newton-Raphson steps)."""
    half_den = _rounding_half_sum16(a, _ONE_Q0)
    c48_17, cm32_17 = _c16(1515870810), _c16(-1010580540)
    one_q2 = 1 << 13
    x = wrap16(c48_17 + srdhm16(half_den, cm32_17))
    for _ in range(3):
        one_minus = wrap16(one_q2 - srdhm16(half_den, x))
        x = wrap16(x + rescale16(srdhm16(x, one_minus), 4, 2))
    return x


def one_over_one_plus_x16(a) -> np.ndarray:
    return rescale16(_newton_half_reciprocal16(a), 1, 0)


def one_minus_x_over_one_plus_x16(a) -> np.ndarray:
    return rescale16(wrap16(_newton_half_reciprocal16(a) - (1 << 13)), 2, 0)


def logistic16(a, integer_bits: int) -> np.ndarray:
    """gemmlowp logistic: FixedPoint<int16, integer_bits> in, Q0.15 out."""
    a = np.asarray(a, dtype=np.int64)
    positive = a > 0
    abs_a = np.where(positive, a, wrap16(-a))
    if_positive = one_over_one_plus_x16(exp_on_negative_values16(wrap16(-abs_a), integer_bits))
    if_negative = wrap16(_ONE_Q0 - if_positive)
    return np.where(a == 0, _c16(1 << 30), np.where(positive, if_positive, if_negative))


def tanh16(a, integer_bits: int) -> np.ndarray:
    """gemmlowp tanh: FixedPoint<int16, integer_bits> in, Q0.15 out."""
    a = np.asarray(a, dtype=np.int64)
    negative = a < 0
    n = np.where(negative, a, wrap16(-a))
    t = one_minus_x_over_one_plus_x16(exp_on_negative_values16(n, integer_bits + 1))
    return np.where(a == 0, 0, np.where(negative, wrap16(-t), t))
