"""nnapi_params decodes NNAPI parameters the way the reference executor computes them.

The checks run the reference itself: a convolution / pooling / transposed convolution with
implicit padding must compute exactly what the same operation computes with the explicit
padding that conv_params / pool_params / transpose_conv_params decoded; STRIDED_SLICE and
SLICE must keep exactly the elements the reference keeps.  Random data comes from a seed that
Hypothesis draws (and prints with a failing example).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from nnconform.driver.support import ParameterAccess, Rejected, Unsupported
from nnconform.errors import OpFailure
from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.ir import nnapi_params as P
from nnconform.reference.arith.padding import PADDING_SAME, PADDING_VALID
from nnconform.reference.executor import execute

F32, I32 = T.TENSOR_FLOAT32, T.TENSOR_INT32
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


class Ctx(ParameterAccess):
    """The converter-side view nnapi_params reads: the operation's input operands."""

    def __init__(self, model):
        sg = model.main
        self.ins = [sg.operands[i] for i in sg.operations[0].inputs]


def _run(model, *inputs):
    return execute(model, list(inputs))[0]


def _image(rng, n, h, w, c, nchw):
    x = rng.standard_normal((n, h, w, c)).astype(np.float32)
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2)) if nchw else x


def _dims(n, h, w, c, nchw):
    return [n, c, h, w] if nchw else [n, h, w, c]


# ---------------------------------------------------------------------------------------
# Convolutions
# ---------------------------------------------------------------------------------------


def _conv_model(op, x_dims, filt, bias, pads, strides, extra, act, nchw, dilation):
    """``pads``: (scheme,) or (left, right, top, bottom); ``strides`` (w, h); ``dilation``
    (w, h) or None.  The output's size is left unknown (the reference computes it)."""
    b = ModelBuilder()
    ins = [b.input(F32, x_dims), b.const(F32, list(filt.shape), filt), b.const(F32, list(bias.shape), bias)]
    ins += [b.i32(p) for p in pads] + [b.i32(s) for s in strides] + [b.i32(e) for e in extra] + [b.i32(act)]
    if nchw is not None:
        ins.append(b.bool(nchw))
        if dilation is not None:
            ins += [b.i32(d) for d in dilation]
    b.operation(op, ins, [b.output(F32, [0, 0, 0, 0])])
    return b.build()


def _fits(size, stride, filt, dil, scheme):
    return scheme == PADDING_SAME or (filt - 1) * dil + 1 <= size


@SETTINGS
@given(
    h=st.integers(1, 9),
    w=st.integers(1, 9),
    fh=st.integers(1, 4),
    fw=st.integers(1, 4),
    sh=st.integers(1, 3),
    sw=st.integers(1, 3),
    dh=st.integers(1, 3),
    dw=st.integers(1, 3),
    scheme=st.sampled_from([PADDING_SAME, PADDING_VALID]),
    nchw=st.booleans(),
    depthwise=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_conv_implicit_padding_computes_what_the_reference_computes(
    h, w, fh, fw, sh, sw, dh, dw, scheme, nchw, depthwise, seed
):
    """SAME / VALID with odd totals, strides and dilation: the decoded explicit padding gives
    the reference's own result bit for bit, and decoding that explicit form returns it."""
    assume(_fits(h, sh, fh, dh, scheme) and _fits(w, sw, fw, dw, scheme))
    rng = np.random.default_rng(seed)
    c = 2
    if depthwise:
        op, extra, out_c = Op.DEPTHWISE_CONV_2D, (2,), 4
        filt = rng.standard_normal((1, fh, fw, out_c)).astype(np.float32)
    else:
        op, extra, out_c = Op.CONV_2D, (), 3
        filt = rng.standard_normal((out_c, fh, fw, c)).astype(np.float32)
    bias = rng.standard_normal(out_c).astype(np.float32)
    x_dims = _dims(1, h, w, c, nchw)
    implicit = _conv_model(op, x_dims, filt, bias, (scheme,), (sw, sh), extra, 1, nchw, (dw, dh))
    p = P.conv_params(Ctx(implicit), len(extra))
    assert (p.stride_h, p.stride_w, p.dil_h, p.dil_w, p.activation, p.nchw, p.extra) == (sh, sw, dh, dw, 1, nchw, extra)
    if scheme == PADDING_VALID:
        assert (p.pad_top, p.pad_bottom, p.pad_left, p.pad_right) == (0, 0, 0, 0)
    else:  # the odd pixel goes to the tail
        assert 0 <= p.pad_bottom - p.pad_top <= 1 and 0 <= p.pad_right - p.pad_left <= 1
    explicit = _conv_model(
        op, x_dims, filt, bias, (p.pad_left, p.pad_right, p.pad_top, p.pad_bottom), (sw, sh), extra, 1, nchw, (dw, dh)
    )
    assert P.conv_params(Ctx(explicit), len(extra)) == p
    x = _image(rng, 1, h, w, c, nchw)
    np.testing.assert_array_equal(_run(implicit, x), _run(explicit, x))


@pytest.mark.parametrize("nchw", [None, False, True])
def test_conv_optional_tail_defaults(nchw):
    """No layout flag: NHWC; no dilation inputs: factors 1.  The NCHW flag picks H and W."""
    filt, bias = np.ones((1, 3, 2, 2), np.float32), np.zeros(1, np.float32)
    m = _conv_model(Op.CONV_2D, _dims(1, 5, 8, 2, bool(nchw)), filt, bias, (PADDING_SAME,), (1, 1), (), 0, nchw, None)
    p = P.conv_params(Ctx(m))
    assert p.nchw is bool(nchw) and p.dilations == (1, 1)
    # SAME with a 3x2 filter: height pads 1 + 1, width 0 + 1 (odd pixel at the end).
    assert (p.pads_begin, p.pads_end) == ((1, 0), (1, 1))


def test_conv_explicit_padding_is_read_in_nnapi_order():
    filt, bias = np.ones((1, 3, 3, 1), np.float32), np.zeros(1, np.float32)
    m = _conv_model(Op.CONV_2D, [1, 6, 6, 1], filt, bias, (1, 2, 0, 2), (2, 1), (), 3, True, (1, 2))
    p = P.conv_params(Ctx(m))
    assert (p.pad_left, p.pad_right, p.pad_top, p.pad_bottom) == (1, 2, 0, 2)
    assert p.strides == (1, 2) and p.dilations == (2, 1) and p.activation == 3 and p.nchw


def test_conv_non_constant_or_unknown_parameters_are_unsupported():
    b = ModelBuilder()
    ins = [
        b.input(F32, [1, 0, 0, 1]),
        b.const(F32, [1, 1, 1, 1], np.ones((1, 1, 1, 1), np.float32)),
        b.const(F32, [1], np.zeros(1, np.float32)),
        b.i32(PADDING_SAME),
        b.input(T.INT32),
        b.i32(1),
        b.i32(0),
    ]
    b.operation(Op.CONV_2D, ins, [b.output(F32, [0, 0, 0, 0])])
    with pytest.raises(Unsupported, match="not a constant"):
        P.conv_params(Ctx(b.build()))
    m = _conv_model(
        Op.CONV_2D,
        [1, 0, 0, 1],
        np.ones((1, 1, 1, 1), np.float32),
        np.zeros(1, np.float32),
        (PADDING_SAME,),
        (1, 1),
        (),
        0,
        None,
        None,
    )
    with pytest.raises(Unsupported, match="known dimensions"):
        P.conv_params(Ctx(m))
    # The traced shape (JAX) resolves what the model leaves unknown.
    p = P.conv_params(Ctx(m), shape=lambda k: (1, 4, 4, 1) if k == 0 else (1, 1, 1, 1))
    assert p.pads_begin == p.pads_end == (0, 0)


def test_grouped_conv_takes_no_dilation():
    filt, bias = np.ones((2, 1, 1, 1), np.float32), np.zeros(2, np.float32)
    m = _conv_model(Op.GROUPED_CONV_2D, [1, 3, 3, 2], filt, bias, (PADDING_VALID,), (1, 1), (2,), 0, False, (1, 1))
    with pytest.raises(Unsupported, match="signature"):
        P.conv_params(Ctx(m), 1, dilation=False)
    assert P.conv_params(Ctx(m), 1).dilations == (1, 1)


# ---------------------------------------------------------------------------------------
# TRANSPOSE_CONV_2D
# ---------------------------------------------------------------------------------------


def _tconv_model(x_dims, filt, bias, pads_or_shape, strides, act, nchw):
    b = ModelBuilder()
    ins = [b.input(F32, x_dims), b.const(F32, list(filt.shape), filt), b.const(F32, list(bias.shape), bias)]
    if len(pads_or_shape) == 2:  # (output shape, scheme)
        shape, scheme = pads_or_shape
        ins += [b.const(I32, [4], np.asarray(shape, np.int32)), b.i32(scheme)]
    else:
        ins += [b.i32(p) for p in pads_or_shape]
    ins += [b.i32(s) for s in strides] + [b.i32(act), b.bool(nchw)]
    b.operation(Op.TRANSPOSE_CONV_2D, ins, [b.output(F32, [0, 0, 0, 0])])
    return b.build()


@SETTINGS
@given(
    h=st.integers(1, 5),
    w=st.integers(1, 5),
    fh=st.integers(1, 4),
    fw=st.integers(1, 4),
    sh=st.integers(1, 4),
    sw=st.integers(1, 4),
    scheme=st.sampled_from([PADDING_SAME, PADDING_VALID]),
    nchw=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_transpose_conv_implicit_padding_computes_what_the_reference_computes(h, w, fh, fw, sh, sw, scheme, nchw, seed):
    """The padding that the requested output size implies (a negative total all in the tail,
    which grows the output) gives the reference's own result."""
    rng = np.random.default_rng(seed)
    out_h, out_w = h * sh, w * sw  # what SAME asks for in TFLite's and NNAPI's examples
    if scheme == PADDING_VALID:
        out_h, out_w = (h - 1) * sh + fh, (w - 1) * sw + fw
    filt = rng.standard_normal((3, fh, fw, 2)).astype(np.float32)
    bias = rng.standard_normal(3).astype(np.float32)
    x_dims = _dims(1, h, w, 2, nchw)
    implicit = _tconv_model(x_dims, filt, bias, (_dims(1, out_h, out_w, 3, nchw), scheme), (sw, sh), 0, nchw)
    p = P.transpose_conv_params(Ctx(implicit))
    assert p.pad_top >= 0 and p.pad_left >= 0 and p.strides == (sh, sw) and p.nchw is nchw
    explicit = _tconv_model(x_dims, filt, bias, (p.pad_left, p.pad_right, p.pad_top, p.pad_bottom), (sw, sh), 0, nchw)
    assert P.transpose_conv_params(Ctx(explicit)) == p
    x = _image(rng, 1, h, w, 2, nchw)
    y = _run(implicit, x)
    assert y.shape == tuple(_dims(1, out_h, out_w, 3, nchw))
    np.testing.assert_array_equal(y, _run(explicit, x))


def test_transpose_conv_negative_total_goes_to_the_tail():
    """Output 7 from stride 5 and a 1-wide filter: total (2 - 1) * 5 + 1 - 7 = -1, head 0."""
    filt, bias = np.ones((1, 1, 1, 1), np.float32), np.zeros(1, np.float32)
    m = _tconv_model([1, 2, 2, 1], filt, bias, ([1, 7, 7, 1], PADDING_SAME), (5, 5), 0, False)
    p = P.transpose_conv_params(Ctx(m))
    assert (p.pad_top, p.pad_bottom, p.pad_left, p.pad_right) == (0, -1, 0, -1)


# ---------------------------------------------------------------------------------------
# Pooling
# ---------------------------------------------------------------------------------------


def _pool_model(op, x_dims, pads, strides, window, act, nchw):
    b = ModelBuilder()
    ins = [b.input(F32, x_dims)] + [b.i32(v) for v in (*pads, *strides, *window, act)]
    if nchw is not None:
        ins.append(b.bool(nchw))
    b.operation(op, ins, [b.output(F32, [0, 0, 0, 0])])
    return b.build()


@SETTINGS
@given(
    h=st.integers(1, 9),
    w=st.integers(1, 9),
    fh=st.integers(1, 4),
    fw=st.integers(1, 4),
    sh=st.integers(1, 3),
    sw=st.integers(1, 3),
    scheme=st.sampled_from([PADDING_SAME, PADDING_VALID]),
    nchw=st.sampled_from([None, False, True]),
    op=st.sampled_from([Op.AVERAGE_POOL_2D, Op.MAX_POOL_2D]),
    seed=st.integers(0, 2**32 - 1),
)
def test_pool_implicit_padding_computes_what_the_reference_computes(h, w, fh, fw, sh, sw, scheme, nchw, op, seed):
    assume(_fits(h, sh, fh, 1, scheme) and _fits(w, sw, fw, 1, scheme))
    rng = np.random.default_rng(seed)
    x_dims = _dims(2, h, w, 3, bool(nchw))
    implicit = _pool_model(op, x_dims, (scheme,), (sw, sh), (fw, fh), 2, nchw)
    p = P.pool_params(Ctx(implicit))
    assert (p.strides, p.window, p.activation, p.nchw) == ((sh, sw), (fh, fw), 2, bool(nchw))
    explicit = _pool_model(op, x_dims, (p.pad_left, p.pad_right, p.pad_top, p.pad_bottom), (sw, sh), (fw, fh), 2, nchw)
    assert P.pool_params(Ctx(explicit)) == p
    x = _image(rng, 2, h, w, 3, bool(nchw))
    np.testing.assert_array_equal(_run(implicit, x), _run(explicit, x))


# ---------------------------------------------------------------------------------------
# SLICE, STRIDED_SLICE
# ---------------------------------------------------------------------------------------


def _slice_model(op, x, *params):
    b = ModelBuilder()
    ins = [b.input(F32, list(x.shape))]
    for v in params:
        ins.append(b.const(I32, [len(v)], np.asarray(v, np.int32)) if isinstance(v, list) else b.i32(v))
    b.operation(op, ins, [b.output(F32, [])])
    return b.build()


shapes = st.lists(st.integers(1, 5), min_size=1, max_size=4)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(shape=shapes, data=st.data())
def test_strided_slice_keeps_what_the_reference_keeps(shape, data):
    """Masks, negative begin/end/strides, out-of-range indexes and shrunk axes; an
    execution the reference fails is Rejected."""
    r = len(shape)
    ints = st.lists(st.integers(-7, 7), min_size=r, max_size=r)
    begin, end = data.draw(ints), data.draw(ints)
    strides = data.draw(st.lists(st.integers(-3, 3).filter(bool), min_size=r, max_size=r))
    bmask, emask, smask = (data.draw(st.integers(0, 2**r - 1)) for _ in range(3))
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    model = _slice_model(Op.STRIDED_SLICE, x, begin, end, strides, bmask, emask, smask)
    try:
        expected = _run(model, x)
    except OpFailure:
        with pytest.raises(Rejected):
            P.strided_slice(Ctx(model), shape)
        return
    s = P.strided_slice(Ctx(model), shape)
    assert list(expected.shape) == s.out_shape
    sliced = x[tuple(slice(b, e, st_) for b, e, st_ in zip(s.starts, s.stops, s.strides))]
    np.testing.assert_array_equal(sliced.reshape(s.out_shape), expected)
    picked = x[np.ix_(*[s.positions(i) for i in range(r)])]
    np.testing.assert_array_equal(picked.reshape(s.out_shape), expected)
    assert s.shrunk_axes == tuple(i for i in range(r) if smask >> i & 1)


def test_strided_slice_negative_stride_runs_to_the_front():
    """end_mask with a negative stride means "through index 0": the stop is -dim - 1, which a
    slice API does not read as counting from the back."""
    x = np.arange(5, dtype=np.float32)
    s = P.strided_slice(Ctx(_slice_model(Op.STRIDED_SLICE, x, [3], [0], [-1], 0, 1, 0)), x.shape)
    assert (s.starts, s.stops, s.counts) == ((3,), (-6,), (4,))
    np.testing.assert_array_equal(x[s.starts[0] : s.stops[0] : s.strides[0]], [3, 2, 1, 0])


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(shape=shapes, data=st.data())
def test_slice_size_minus_one_runs_to_the_end(shape, data):
    r = len(shape)
    begin = data.draw(st.lists(st.integers(-1, 6), min_size=r, max_size=r))
    size = data.draw(st.lists(st.integers(-1, 6), min_size=r, max_size=r))
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    model = _slice_model(Op.SLICE, x, begin, size)
    try:
        expected = _run(model, x)
    except OpFailure:
        with pytest.raises(Rejected):
            P.slice_bounds(Ctx(model), shape)
        return
    b, e = P.slice_bounds(Ctx(model), shape)
    np.testing.assert_array_equal(x[tuple(slice(i, j) for i, j in zip(b, e))], expected)


# ---------------------------------------------------------------------------------------
# Axes, activation, quantisation parameters
# ---------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(shape=shapes, data=st.data(), keep=st.booleans())
def test_reduce_axes_match_the_reference(shape, data, keep):
    """Negative and repeated axes reduce each dimension once, as the reference's REDUCE_MAX."""
    r = len(shape)
    ax = data.draw(st.lists(st.integers(-r, r - 1), min_size=1, max_size=2 * r))
    x = np.random.default_rng(r).standard_normal(shape).astype(np.float32)
    b = ModelBuilder()
    ins = [b.input(F32, list(shape)), b.const(I32, [len(ax)], np.asarray(ax, np.int32)), b.bool(keep)]
    b.operation(Op.REDUCE_MAX, ins, [b.output(F32, [])])
    m = b.build()
    found, kept = P.reduce_axes(Ctx(m), r)
    assert kept is keep and found == sorted(set(found)) and all(0 <= a < r for a in found)
    expected = np.max(x, axis=tuple(found), keepdims=keep)
    got = _run(m, x)
    np.testing.assert_array_equal(got.reshape(expected.shape), expected)


def test_empty_reduce_axes_are_unsupported():
    b = ModelBuilder()
    ins = [b.input(F32, [2, 2]), b.const(I32, [0], np.zeros(0, np.int32)), b.bool(False)]
    b.operation(Op.REDUCE_MAX, ins, [b.output(F32, [0])])
    with pytest.raises(Unsupported, match="empty axes"):
        P.reduce_axes(Ctx(b.build()), 2)


def test_fused_activation_outside_nnapi_codes_is_unsupported():
    m = _pool_model(Op.MAX_POOL_2D, [1, 2, 2, 1], (PADDING_VALID,), (1, 1), (1, 1), 4, None)
    with pytest.raises(Unsupported, match="fused activation 4"):
        P.pool_params(Ctx(m))


def test_same_quant_compares_scale_as_float32():
    b = ModelBuilder()
    q = T.TENSOR_QUANT8_ASYMM
    a1 = b.input(q, [1], scale=0.1, zero_point=3)
    a2 = b.input(q, [1], scale=float(np.float32(0.1)), zero_point=3)
    a3 = b.input(q, [1], scale=0.1, zero_point=4)
    b.operation(Op.ADD, [a1, a2, b.i32(0)], [b.output(q, [1], scale=0.1, zero_point=3)])
    ops = b.build().main.operands
    assert P.same_quant(ops[a1], ops[a2]) and not P.same_quant(ops[a1], ops[a3])
