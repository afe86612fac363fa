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


# ---------------------------------------------------------------------------------------
# DEPTHWISE_CONV_2D tap loop with column phases (stride > 1) against the strided views
# ---------------------------------------------------------------------------------------

def _old_depthwise(xp, w, oh, ow, p, bias=None, block=1 << 16):
    """The tap loop before the column phases: every tap a strided view of ``xp``."""
    n, c = xp.shape[0], xp.shape[3]
    fh, fw = w.shape[:2]
    dtype = w.dtype
    wt = np.ascontiguousarray(np.broadcast_to(w[:, :, None, :], (fh, fw, ow, c)))
    bt = None if bias is None else np.ascontiguousarray(np.broadcast_to(bias.astype(dtype), (ow, c)))
    out = np.empty((n, oh, ow, c), dtype=dtype)
    image = oh * ow * c
    if image >= block:
        rows, images = max(1, block // (ow * c)), 1
    else:
        rows, images = oh, max(1, block // image)
    tmp = np.empty((min(images, n), min(rows, oh), ow, c), dtype=dtype)
    zero_start = bias is not None and bool(np.any(np.signbit(bias) & (bias == 0)))
    sh, sw, dh, dw = p.stride_h, p.stride_w, p.dil_h, p.dil_w
    for b0 in range(0, n, images):
        b1 = min(b0 + images, n)
        for r0 in range(0, oh, rows):
            r1 = min(r0 + rows, oh)
            acc = out[b0:b1, r0:r1]
            t = tmp[:b1 - b0, :r1 - r0]
            if zero_start:
                acc[...] = 0
            for i in range(fh):
                top = r0 * sh + i * dh
                for j in range(fw):
                    left = j * dw
                    view = xp[b0:b1, top:top + (r1 - r0 - 1) * sh + 1:sh, left:left + (ow - 1) * sw + 1:sw]
                    if i == j == 0 and not zero_start:
                        np.multiply(view, wt[i, j], out=acc)
                    else:
                        np.multiply(view, wt[i, j], out=t)
                        acc += t
            if bt is not None:
                acc += bt
    return out


@seed(16008)
@SETTINGS
@given(st.integers(0, 2**32 - 1))
def test_depthwise_phases_match_strided_views(s):
    from nnconform.ops import depthwise_conv_2d as dw
    rng = _rng(s)
    fh, fw = int(rng.integers(1, 6)), int(rng.integers(1, 6))
    sh, sw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    dh, dwl = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 9))
    oh, ow = int(rng.integers(1, 9)), int(rng.integers(1, 9))
    hp, wp = (oh - 1) * sh + (fh - 1) * dh + 1 + int(rng.integers(0, 3)), (ow - 1) * sw + (fw - 1) * dwl + 1 + int(rng.integers(0, 3))
    dtype = np.float32 if rng.random() < 0.7 else np.float64
    xp = rng.uniform(-3, 3, (n, hp, wp, c)).astype(dtype)
    pick = rng.random(xp.shape)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype)
    xp[pick < 0.1] = specials[rng.integers(0, 5, int((pick < 0.1).sum()))]
    w = rng.uniform(-3, 3, (fh, fw, c)).astype(dtype)
    w[rng.random(w.shape) < 0.1] = -0.0
    bias = None if rng.random() < 0.3 else rng.uniform(-1, 1, c).astype(dtype)
    if bias is not None and rng.random() < 0.3:
        bias[0] = -0.0                                   # the "0 +" start
    p = cc.ConvParams(0, 0, 0, 0, sh, sw, dh, dwl, 0, False, (1,))
    block = int(rng.choice([16, 256, 1 << 16]))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dw, "_BLOCK", block)
        with np.errstate(invalid="ignore", over="ignore"):
            actual = dw._depthwise(xp, w, oh, ow, p, bias=bias)
            expected = _old_depthwise(xp, w, oh, ow, p, bias=bias, block=block)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    np.testing.assert_array_equal(actual.view(np.uint8), expected.view(np.uint8))
