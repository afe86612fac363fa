"""The reference's speed paths of issue 16 item 5 against the formulations they replace
(kept here as the oracles), on random shapes and parameters drawn by Hypothesis with a fixed
seed: every path must give the same bits.  Each example prints its numpy seed."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from nnconform.ir import OperandType as T
from nnconform.reference.ops import conv_common as cc

Q8, Q8S = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


def _rng(s):
    print("numpy seed", s)
    return np.random.default_rng(s)


# ---------------------------------------------------------------------------------------
# MAX_POOL_2D / AVERAGE_POOL_2D without the padded copy when no window reaches the padding
# ---------------------------------------------------------------------------------------


def _old_pool_float(x, pads, strides, filt, act, kind):
    """The formulation before the change: always a padded copy (-inf or 0 filled), the
    windows in (ky, kx) order, then the activation; NHWC float32."""
    from nnconform.reference.arith.activation import apply_float

    pl, pr, pt, pb = pads
    sw, sh = strides
    fw, fh = filt
    n, h, w, c = x.shape
    oh = (h - fh + pt + pb) // sh + 1
    ow = (w - fw + pl + pr) // sw + 1
    need_h, need_w = (oh - 1) * sh + fh, (ow - 1) * sw + fw
    fill = -np.inf if kind == "max" else 0.0
    padded = np.full((n, max(need_h, pt + h), max(need_w, pl + w), c), fill, np.float32)
    padded[:, pt : pt + h, pl : pl + w] = x
    if kind == "max":
        acc = np.full((n, oh, ow, c), -np.inf, np.float32)
    else:
        acc = np.zeros((n, oh, ow, c), np.float64)
        cy = np.minimum(np.arange(oh) * sh - pt + fh, h) - np.maximum(np.arange(oh) * sh - pt, 0)
        cx = np.minimum(np.arange(ow) * sw - pl + fw, w) - np.maximum(np.arange(ow) * sw - pl, 0)
        count = (cy[:, None] * cx[None, :])[:, :, None].astype(np.int64)
    for ky, kx in ((ky, kx) for ky in range(fh) for kx in range(fw)):
        with np.errstate(invalid="ignore"):  # inf + -inf in the average: NaN, as in the op
            win = padded[:, ky : ky + (oh - 1) * sh + 1 : sh, kx : kx + (ow - 1) * sw + 1 : sw]
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
    from nnconform.ir import ModelBuilder
    from nnconform.ir import OperationType as Op
    from nnconform.reference.executor import execute

    rng = _rng(s)
    fw, fh = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    sw, sh = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    n, h, w, c = int(rng.integers(1, 3)), int(rng.integers(fh, 9)), int(rng.integers(fw, 9)), int(rng.integers(1, 5))
    # no padding half of the time (the path without the copy), else some
    pads = (0, 0, 0, 0) if rng.random() < 0.5 else tuple(int(rng.integers(0, f)) for f in (fw, fw, fh, fh))
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
            t = tmp[: b1 - b0, : r1 - r0]
            if zero_start:
                acc[...] = 0
            for i in range(fh):
                top = r0 * sh + i * dh
                for j in range(fw):
                    left = j * dw
                    view = xp[b0:b1, top : top + (r1 - r0 - 1) * sh + 1 : sh, left : left + (ow - 1) * sw + 1 : sw]
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
    from nnconform.reference.ops import depthwise_conv_2d as dw

    rng = _rng(s)
    fh, fw = int(rng.integers(1, 6)), int(rng.integers(1, 6))
    sh, sw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    dh, dwl = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 9))
    oh, ow = int(rng.integers(1, 9)), int(rng.integers(1, 9))
    hp, wp = (
        (oh - 1) * sh + (fh - 1) * dh + 1 + int(rng.integers(0, 3)),
        (ow - 1) * sw + (fw - 1) * dwl + 1 + int(rng.integers(0, 3)),
    )
    dtype = np.float32 if rng.random() < 0.7 else np.float64
    xp = rng.uniform(-3, 3, (n, hp, wp, c)).astype(dtype)
    pick = rng.random(xp.shape)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype)
    xp[pick < 0.1] = specials[rng.integers(0, 5, int((pick < 0.1).sum()))]
    w = rng.uniform(-3, 3, (fh, fw, c)).astype(dtype)
    w[rng.random(w.shape) < 0.1] = -0.0
    bias = None if rng.random() < 0.3 else rng.uniform(-1, 1, c).astype(dtype)
    if bias is not None and rng.random() < 0.3:
        bias[0] = -0.0  # the "0 +" start
    p = cc.ConvParams(0, 0, 0, 0, sh, sw, dh, dwl, 0, False, (1,))
    block = int(rng.choice([16, 256, 1 << 16]))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dw, "_BLOCK", block)
        with np.errstate(invalid="ignore", over="ignore"):
            actual = dw._depthwise(xp, w, oh, ow, p, bias=bias)
            expected = _old_depthwise(xp, w, oh, ow, p, bias=bias, block=block)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    np.testing.assert_array_equal(actual.view(np.uint8), expected.view(np.uint8))


# ---------------------------------------------------------------------------------------
# quantised SOFTMAX: the one-row path (scalar reciprocal) against the many-row path
# ---------------------------------------------------------------------------------------


@seed(16009)
@SETTINGS
@given(st.integers(0, 2**32 - 1))
def test_softmax_one_row_matches_many_rows(s):
    """A row of 256 or more codes alone (Python-int reciprocal, 256 codes from scalars) gives
    the bits the same row gets among others (per-row arrays, the formulation before), and
    the float path the bits it gets without the copy-free astype."""
    from nnconform.ir import ModelBuilder
    from nnconform.ir import OperationType as Op
    from nnconform.reference.executor import execute

    rng = _rng(s)
    t = Q8 if rng.random() < 0.5 else Q8S
    lo, hi = (0, 255) if t == Q8 else (-128, 127)
    n = int(rng.integers(256, 1200))
    beta = float(2.0 ** rng.uniform(-4, 2))
    scale = float(2.0 ** rng.uniform(-8, 1))
    row = rng.integers(lo, hi + 1, size=(1, n))
    if rng.random() < 0.3:
        row = np.clip(row, lo, lo + int(rng.integers(1, 20)))  # many equal codes, the max repeated
    many = np.concatenate([row, rng.integers(lo, hi + 1, size=(int(rng.integers(1, 4)), n))])

    def run(vals):
        b = ModelBuilder()
        x = b.input(t, vals.shape, scale=scale, zero_point=(lo + hi + 1) // 2)
        y = b.output(t, vals.shape, scale=1 / 256, zero_point=0 if t == Q8 else -128)
        b.operation(Op.SOFTMAX, [x, b.f32(beta)], [y])
        return execute(b.build(), [vals.astype(np.uint8 if t == Q8 else np.int8)])[0]

    try:
        alone = run(row)
    except Exception as e:  # beta * scale too small for the kernel: both paths refuse
        assert "too small" in str(e)
        return
    np.testing.assert_array_equal(alone[0], run(many)[0])


@seed(16010)
@SETTINGS
@given(st.integers(0, 2**32 - 1))
def test_float_softmax_one_row_matches_many_rows(s):
    """A float row alone (the one-row path: scalar reductions over every axis) gives the bits
    it gets among other rows (the general path), for any beta, rank and length, contiguous
    or a strided view, with logits spread from a few units (every term counts) to thousands
    (most terms underflow to 0)."""
    from nnconform.reference.ops import softmax

    rng = _rng(s)
    n = int(rng.integers(1, 3000))
    spread = float(2.0 ** rng.uniform(-2, 12))
    beta = float(2.0 ** rng.uniform(-4, 2)) if rng.random() < 0.7 else 1.0
    row = (rng.standard_normal(n) * spread).astype(np.float32)
    lead = (1,) * int(rng.integers(0, 4))
    others = rng.standard_normal((int(rng.integers(1, 4)), n)).astype(np.float32) * spread
    strided = rng.random() < 0.3  # a view of every other value of a longer row
    alone_in = np.repeat(row, 2)[::2] if strided else row
    assert n == 1 or alone_in.flags.c_contiguous != strided  # (one value is contiguous at any stride)
    alone = softmax._softmax_float(alone_in.reshape(lead + (n,)), beta, len(lead))
    among = softmax._softmax_float(np.concatenate([row[None], others]), beta, 1)
    assert alone.shape == lead + (n,) and alone.dtype == np.float32
    np.testing.assert_array_equal(alone.reshape(-1).view(np.uint32), among[0].view(np.uint32))


# ---------------------------------------------------------------------------------------
# A convolution's float bias added over rows of pixels (the bias tiled), not per pixel
# ---------------------------------------------------------------------------------------


@seed(16011)
@SETTINGS
@given(st.integers(0, 2**32 - 1), st.booleans())
def test_tiled_bias_gives_the_broadcast_bits(s, strided):
    """``cc.add_bias_row`` with ``cc.bias_row``'s row of k pixels gives the bits of
    ``y + bias`` broadcast per pixel, for pixel counts with few divisors (primes) and many,
    any channel count, signed zeros, infinities and NaN, and on a strided ``y`` (per pixel)."""
    rng = _rng(s)
    c = int(rng.choice([1, 3, 8, 16, 24, 32, 100, 1023, 1024, 2000]))
    pixels = int(rng.choice([1, 7, 97, 1021, 4096, 9216, int(rng.integers(1, 20000))]))
    whole = rng.standard_normal((1, pixels, 2 if strided else 1, c)).astype(np.float32)
    bias = rng.standard_normal(c).astype(np.float32)
    for a in (whole.reshape(-1), bias):
        a[rng.integers(0, a.size, max(1, a.size // 20))] = rng.choice(
            np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32), max(1, a.size // 20)
        )
    y = whole[:, :, :1]  # every other pixel of ``whole`` when strided
    assert y.flags.c_contiguous != (strided and y.size > c)
    row = cc.bias_row(bias, y.size)
    assert (row is None) == (y.size < cc._BIAS_TILED_FROM or c >= cc._BIAS_ROW)
    if row is not None:
        assert row.size % c == 0 and pixels % (row.size // c) == 0 and not row.flags.writeable
    with np.errstate(invalid="ignore"):  # inf + -inf: NaN, as the executor allows
        want = y + bias
        cc.add_bias_row(y, bias, row)
    assert np.array_equal(y.view(np.uint32), want.view(np.uint32))
