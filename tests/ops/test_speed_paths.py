"""The reference's speed paths of issue 16 item 5 against the formulations they replace
(kept here as the oracles), on random shapes and parameters drawn by Hypothesis with a fixed
seed: every path must give the same bits.  Each example prints its numpy seed."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings, strategies as st

from nnconform.ir import Operand, OperandType as T
from nnconform.ops import conv_common as cc, requant_table
from nnconform.ops.activation import quant_bounds
from nnconform.ops.quant import multiply_by_quantized_multiplier, quantize_multiplier

Q8, Q8S = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


def _rng(s):
    print("numpy seed", s)
    return np.random.default_rng(s)


# ---------------------------------------------------------------------------------------
# requantisation by table lookup (requant_table) against the step-by-step int64 formula
# ---------------------------------------------------------------------------------------

def _stepwise_requant(acc, bias, mult, shift, out, act):
    """The plain formulation: (acc + bias) in int64, MultiplyByQuantizedMultiplier per
    channel, + zero point, clamp to the activation range."""
    x = acc.astype(np.int64) + bias.astype(np.int64)
    y = np.stack([multiply_by_quantized_multiplier(x[..., ch], int(mult[ch]), int(shift[ch]))
                  for ch in range(x.shape[-1])], axis=-1)
    lo, hi = quant_bounds(act, out)
    return np.clip(y + out.zero_point, lo, hi).astype(out.info.dtype)


@seed(16005)
@SETTINGS
@given(st.integers(0, 2**32 - 1))
def test_requantize_table_matches_stepwise(monkeypatch_seed):
    rng = _rng(monkeypatch_seed)
    ch = int(rng.integers(1, 9))
    dt = np.float32 if rng.random() < 0.6 else np.float64
    big = 1 << int(rng.choice([4, 10, 16, 20]))
    acc = rng.integers(-big, big, size=(int(rng.integers(1, 300)), ch))
    if rng.random() < 0.5:
        acc = (acc >> 3) << 3                               # many exact rounding ties
    bias = rng.integers(-big, big, size=ch).astype(np.int32)
    k = ch if rng.random() < 0.5 else 1
    # reals from 1/256 (windows of 66k entries) to 8 (left shifts), now and then a zero one
    reals = 2.0 ** rng.uniform(-8, 3, k)
    pairs = [quantize_multiplier(float(r)) for r in reals]
    if rng.random() < 0.1:
        pairs[0] = (0, 0)
    pairs = pairs if k == ch else pairs * ch
    mult, shift = np.array([m for m, _ in pairs]), np.array([s for _, s in pairs])
    t = Q8 if rng.random() < 0.5 else Q8S
    zp = int(rng.integers(0, 256)) if t == Q8 else int(rng.integers(-128, 128))
    out = Operand(t, (), scale=float(rng.uniform(0.01, 2)), zero_point=zp)
    act = int(rng.integers(0, 4))
    lo, hi = quant_bounds(act, out)
    bound = int(np.abs(acc).max())
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(requant_table, "BUILD_ELEMENTS_PER_ENTRY", 0)
        mp.setattr(requant_table, "BLOCK", int(rng.choice([8, 64, 1 << 14])))   # short last blocks
        plan = cc._table_plan(acc.astype(dt), bound, bias, mult, shift, out, lo, hi)
        assert plan is not None                             # the table path is what runs
        actual = cc.requantize(acc.astype(dt), bias, mult, shift, out, act, acc_bound=bound)
    expected = _stepwise_requant(acc, bias, mult, shift, out, act)
    assert actual.dtype == expected.dtype
    np.testing.assert_array_equal(actual, expected)


@seed(16006)
@SETTINGS
@given(st.integers(0, 2**32 - 1))
def test_requant_window_ends_are_constant(s):
    """Below x_lo every code is R(x_lo), above x_hi every code is R(x_hi): checked on the
    exact function far beyond both ends."""
    rng = _rng(s)
    m, sh = quantize_multiplier(float(2.0 ** rng.uniform(-11, 3)))
    zp = int(rng.integers(-128, 256))
    lo = int(rng.integers(-128, 200))
    hi = int(rng.integers(lo, 256))
    x_lo, x_hi = requant_table.window(m, sh, zp, lo, hi)
    assert x_hi - x_lo + 1 <= requant_table.window_size(m, sh, zp, lo, hi)
    span = max(x_hi - x_lo, 1) * 4
    below = np.arange(x_lo - span, x_lo + 1, dtype=np.int64)
    above = np.arange(x_hi, x_hi + span + 1, dtype=np.int64)
    assert (requant_table.stepwise(below, m, sh, zp, lo, hi) == lo).all()
    assert (requant_table.stepwise(above, m, sh, zp, lo, hi) == hi).all()
