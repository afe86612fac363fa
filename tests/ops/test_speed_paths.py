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


# ---------------------------------------------------------------------------------------
# MAX_POOL_2D / AVERAGE_POOL_2D without the padded copy when no window reaches the padding
# ---------------------------------------------------------------------------------------

def _old_pool_float(x, pads, strides, filt, act, kind):
    """The formulation before the change: always a padded copy (-inf or 0 filled), the
    windows in (ky, kx) order, then the activation; NHWC float32."""
    from nnconform.ops.activation import apply_float
    pl, pr, pt, pb = pads
    sw, sh = strides
    fw, fh = filt
    n, h, w, c = x.shape
    oh = (h - fh + pt + pb) // sh + 1
    ow = (w - fw + pl + pr) // sw + 1
    need_h, need_w = (oh - 1) * sh + fh, (ow - 1) * sw + fw
    fill = -np.inf if kind == "max" else 0.0
    padded = np.full((n, max(need_h, pt + h), max(need_w, pl + w), c), fill, np.float32)
    padded[:, pt:pt + h, pl:pl + w] = x
    if kind == "max":
        acc = np.full((n, oh, ow, c), -np.inf, np.float32)
    else:
        acc = np.zeros((n, oh, ow, c), np.float64)
        cy = np.minimum(np.arange(oh) * sh - pt + fh, h) - np.maximum(np.arange(oh) * sh - pt, 0)
        cx = np.minimum(np.arange(ow) * sw - pl + fw, w) - np.maximum(np.arange(ow) * sw - pl, 0)
        count = (cy[:, None] * cx[None, :])[:, :, None].astype(np.int64)
    for ky, kx in ((ky, kx) for ky in range(fh) for kx in range(fw)):
        with np.errstate(invalid="ignore"):       # inf + -inf in the average: NaN, as in the op
            win = padded[:, ky:ky + (oh - 1) * sh + 1:sh, kx:kx + (ow - 1) * sw + 1:sw]
            if kind == "max":
                np.maximum(acc, win, out=acc)
            else:
                acc += win
    with np.errstate(invalid="ignore"):
        y = acc if kind == "max" else acc / count
    return apply_float(y.astype(np.float32), act)


@seed(16007)
@SETTINGS
@given(st.integers(0, 2**32 - 1))
def test_float_pooling_matches_padded_formulation(s):
    from nnconform.executor import execute
    from nnconform.ir import ModelBuilder, OperationType as Op
    rng = _rng(s)
    fw, fh = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    sw, sh = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    n, h, w, c = int(rng.integers(1, 3)), int(rng.integers(fh, 9)), int(rng.integers(fw, 9)), int(rng.integers(1, 5))
    # no padding half of the time (the path without the copy), else some
    pads = (0, 0, 0, 0) if rng.random() < 0.5 else \
        tuple(int(rng.integers(0, f)) for f in (fw, fw, fh, fh))
    act = int(rng.integers(0, 4))
    x = rng.uniform(-3, 3, (n, h, w, c)).astype(np.float32)
    pick = rng.random(x.shape)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)
    x[pick < 0.15] = specials[rng.integers(0, 5, int((pick < 0.15).sum()))]
    for kind, op in (("max", Op.MAX_POOL_2D), ("avg", Op.AVERAGE_POOL_2D)):
        b = ModelBuilder()
        xi = b.input(T.TENSOR_FLOAT32, x.shape)
        oh = (h - fh + pads[2] + pads[3]) // sh + 1
        ow = (w - fw + pads[0] + pads[1]) // sw + 1
        y = b.output(T.TENSOR_FLOAT32, (n, oh, ow, c))
        b.operation(op, [xi, *(b.i32(v) for v in (*pads, sw, sh, fw, fh, act))], [y])
        actual = execute(b.build(), [x])[0]
        expected = _old_pool_float(x, pads, (sw, sh), (fw, fh), act, kind)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        np.testing.assert_array_equal(actual.view(np.uint32), expected.view(np.uint32))
