"""The fixed-point helpers against hand-worked values."""

import numpy as np
import pytest

from nnconform.reference.arith import quant


@pytest.mark.parametrize(
    "real,expected",
    [
        (0.5, (1 << 30, 0)),  # 0.5 = 2**30 * 2**(0-31)
        (0.25, (1 << 30, -1)),
        (1.0, (1 << 30, 1)),
        (0.0, (0, 0)),
    ],
)
def test_quantize_multiplier(real, expected):
    assert quant.quantize_multiplier(real) == expected


def test_srdhm_rounds_half_away_and_saturates():
    # With multiplier 2**30 the result is x/2 rounded.  gemmlowp's nudge is 2**30 for positive
    # products but 1 - 2**30 for negative ones, so a positive tie goes up (1.5 -> 2) while a
    # negative tie goes toward zero (-1.5 -> -1, -0.5 -> 0).
    x = np.array([3, -3, 5, -5, 1, -1])
    assert quant.saturating_rounding_doubling_high_mul(x, 1 << 30).tolist() == [2, -1, 3, -2, 1, 0]
    assert quant.saturating_rounding_doubling_high_mul(quant.INT32_MIN, quant.INT32_MIN) == quant.INT32_MAX


def test_rounding_divide_by_pot():
    x = np.array([5, -5, 6, -6, 7, -7, 4, -4])
    # /4: 1.25 -> 1, -1.25 -> -1, 1.5 -> 2 (half away), -1.5 -> -2, 1.75 -> 2, -1.75 -> -2, 1, -1
    assert quant.rounding_divide_by_pot(x, 2).tolist() == [1, -1, 2, -2, 2, -2, 1, -1]


def test_multiply_by_quantized_multiplier_matches_real_product():
    rng = np.random.default_rng(0)
    x = rng.integers(-100000, 100000, 1000)
    for real in (0.0123, 0.5, 0.99, 1.7, 13.25):
        m, s = quant.quantize_multiplier(real)
        got = quant.multiply_by_quantized_multiplier(x, m, s)
        assert np.max(np.abs(got - x * real)) <= 1.0


def test_round_half_away():
    assert [quant.round_half_away(v) for v in (0.5, -0.5, 1.5, 2.5, -2.5, 0.49)] == [1, -1, 2, 3, -3, 0]
    assert quant.round_half_away_array(np.array([0.5, -0.5, 2.5])).tolist() == [1, -1, 3]
