"""CONV_2D, DEPTHWISE_CONV_2D, GROUPED_CONV_2D, TRANSPOSE_CONV_2D, FULLY_CONNECTED:
hand-checked examples, signature validation, bit-exact agreement of the vectorised quantised
paths with direct loops over every output element, and the AOSP golden vectors."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from helpers import check_example

from nnconform.errors import ValidationError
from nnconform.ir import ChannelQuant, ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith.fixedpoint import _rdbp_int, _srdhm_int
from nnconform.reference.arith.quant import multiply_by_quantized_multiplier, quantize_multiplier
from nnconform.reference.executor import execute
from nnconform.reference.ops.registry import OpView, get_op, load_all
from nnconform.suites.examples.conv import EXAMPLES, _model

MY_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "GROUPED_CONV_2D", "TRANSPOSE_CONV_2D", "FULLY_CONNECTED")
F32, F16, I32 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32
Q8, Q8S, QPC = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_QUANT8_SYMM_PER_CHANNEL


# ---------------------------------------------------------------------------------------
# (a) hand-checked examples
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("ex", EXAMPLES, ids=lambda e: e.name)
def test_example(ex):
    check_example(ex)


def test_examples_cover_every_op_and_type():
    seen = {(op, t) for e in EXAMPLES for op in e.operations for t in e.data_types}
    for op in MY_OPS:
        for t in ("fp32", "fp16", "quant8", "quant8_signed"):
            assert (op, t) in seen, f"no example for {op} {t}"
        assert get_op(Op[op]).data_types == (F32, F16, Q8, Q8S)


@pytest.mark.parametrize("op", MY_OPS)
def test_zero_batch(op):
    """A zero-sized batch (only possible for an intermediate tensor in NNAPI) gives a
    zero-sized output of the right shape for every data type."""
    specs = {
        "CONV_2D": ([0, 3, 3, 1], ([2, 2, 2, 1], [1] * 8), 2, [2, 1, 1, 0], [0, 2, 2, 2]),
        "DEPTHWISE_CONV_2D": ([0, 3, 3, 1], ([1, 2, 2, 2], [1] * 8), 2, [1, 1, 1, 2, 0], [0, 3, 3, 2]),
        "GROUPED_CONV_2D": ([0, 3, 3, 2], ([2, 2, 2, 1], [1] * 8), 2, [2, 1, 1, 2, 0, False], [0, 2, 2, 2]),
        "TRANSPOSE_CONV_2D": ([0, 3, 3, 1], ([2, 2, 2, 1], [1] * 8), 2, [0, 0, 0, 0, 1, 1, 0, False], [0, 4, 4, 2]),
        "FULLY_CONNECTED": ([0, 4], ([2, 4], [1] * 8), 2, [0], [0, 2]),
    }
    x_dims, f, n_out, args, out_dims = specs[op]
    for t, dtype in ((F32, np.float32), (F16, np.float16), (Q8, np.uint8), (Q8S, np.int8)):
        q = (
            {}
            if t in (F32, F16)
            else dict(qx=dict(scale=0.5), qf=dict(scale=0.5), qb=dict(scale=0.25), qo=dict(scale=1.0))
        )
        model = _model(Op[op], t, x_dims, f, ([n_out], [0] * n_out), args, out_dims, **q)
        (y,) = execute(model, [np.zeros(x_dims, dtype)])
        assert y.shape == tuple(out_dims) and y.dtype == dtype


# ---------------------------------------------------------------------------------------
# (b) validation
# ---------------------------------------------------------------------------------------


def _conv(
    op=Op.CONV_2D,
    t=F32,
    x_dims=(1, 3, 3, 2),
    f_dims=(2, 2, 2, 2),
    b_dims=(2,),
    args=(2, 1, 1, 0),
    out_dims=(1, 2, 2, 2),
    f_type=None,
    b_type=None,
    qx=None,
    qf=None,
    qb=None,
    qo=None,
    arg_types=None,
):
    b = ModelBuilder()
    x = b.input(t, x_dims, **(qx or {}))
    f = b.const(f_type or t, f_dims, np.zeros(f_dims), **(qf or {}))
    bias = b.const(b_type or (I32 if t in (Q8, Q8S) else t), b_dims, np.zeros(b_dims), **(qb or {}))
    ins = [x, f, bias]
    for k, a in enumerate(args):
        at = (arg_types or {}).get(k)
        if at is not None:
            ins.append(b.const(at, (4,) if at == I32 else (), a))
        elif isinstance(a, bool):
            ins.append(b.bool(a))
        else:
            ins.append(b.i32(a))
    y = b.output(t, out_dims, **(qo or {}))
    b.operation(op, ins, [y])
    return b.build()


Q = dict(
    qx=dict(scale=0.5, zero_point=128),
    qf=dict(scale=0.5, zero_point=128),
    qb=dict(scale=0.25),
    qo=dict(scale=1.0, zero_point=128),
)

BAD = [
    # (id, model, expected input index or None)
    ("conv_input_count", _conv(args=(2, 1, 1, 0, False, 1)), None),
    ("conv_layout_not_bool", _conv(args=(2, 1, 1, 0, 5)), 7),
    ("conv_input_rank", _conv(x_dims=(1, 3, 3)), 0),
    ("conv_filter_type", _conv(f_type=F16), 1),
    ("conv_bias_type", _conv(t=Q8, b_type=Q8, **Q), 2),
    ("conv_bias_scale", _conv(t=Q8, **{**Q, "qb": dict(scale=0.3)}), 2),
    ("conv_padding_scheme", _conv(args=(3, 1, 1, 0)), 3),
    ("conv_stride", _conv(args=(2, 0, 1, 0)), 4),
    ("conv_activation", _conv(args=(2, 1, 1, 4)), 6),
    ("conv_explicit_negative_padding", _conv(args=(-1, 0, 0, 0, 1, 1, 0)), 3),
    ("conv_dilation", _conv(args=(2, 1, 1, 0, False, 0, 1)), 8),
    ("conv_depth_mismatch", _conv(f_dims=(2, 2, 2, 3)), 1),
    (
        "conv_per_channel_dim",
        _conv(t=Q8, f_type=QPC, qx=Q["qx"], qo=Q["qo"], qf=dict(channel_quant=ChannelQuant((0.5, 0.5), 3))),
        1,
    ),
    ("conv_output_type", None, None),
    ("depthwise_filter_dim0", _conv(Op.DEPTHWISE_CONV_2D, f_dims=(2, 2, 2, 2), args=(2, 1, 1, 1, 0)), 1),
    ("depthwise_multiplier_mismatch", _conv(Op.DEPTHWISE_CONV_2D, f_dims=(1, 2, 2, 2), args=(2, 1, 1, 2, 0)), 1),
    ("depthwise_multiplier_zero", _conv(Op.DEPTHWISE_CONV_2D, f_dims=(1, 2, 2, 2), args=(2, 1, 1, 0, 0)), 6),
    (
        "depthwise_per_channel_dim",
        _conv(
            Op.DEPTHWISE_CONV_2D,
            t=Q8S,
            f_dims=(1, 2, 2, 2),
            f_type=QPC,
            args=(2, 1, 1, 1, 0),
            qx=dict(scale=0.5),
            qo=dict(scale=1.0),
            qf=dict(channel_quant=ChannelQuant((0.5,), 0)),
        ),
        1,
    ),
    ("grouped_no_layout", _conv(Op.GROUPED_CONV_2D, f_dims=(2, 2, 2, 1), args=(2, 1, 1, 2, 0)), None),
    (
        "grouped_groups_divide",
        _conv(Op.GROUPED_CONV_2D, f_dims=(3, 2, 2, 1), b_dims=(3,), args=(2, 1, 1, 2, 0, False)),
        1,
    ),
    ("grouped_groups_zero", _conv(Op.GROUPED_CONV_2D, f_dims=(2, 2, 2, 1), args=(2, 1, 1, 0, 0, False)), 6),
    ("transpose_output_shape_type", _conv(Op.TRANSPOSE_CONV_2D, args=(4, 2, 1, 1, 0, False)), 3),
    ("transpose_layout_type", _conv(Op.TRANSPOSE_CONV_2D, args=((1, 4, 4, 2), 2, 1, 1, 0, 1), arg_types={0: I32}), 8),
    (
        "transpose_bias_length",
        _conv(Op.TRANSPOSE_CONV_2D, b_dims=(3,), args=((1, 4, 4, 2), 2, 1, 1, 0, False), arg_types={0: I32}),
        2,
    ),
    (
        "fc_weights_rank",
        _conv(Op.FULLY_CONNECTED, x_dims=(2, 4), f_dims=(2, 2, 2), b_dims=(2,), args=(0,), out_dims=(2, 2)),
        1,
    ),
    (
        "fc_bias_length",
        _conv(Op.FULLY_CONNECTED, x_dims=(2, 4), f_dims=(3, 4), b_dims=(2,), args=(0,), out_dims=(2, 3)),
        2,
    ),
    (
        "fc_input_split",
        _conv(Op.FULLY_CONNECTED, x_dims=(1, 5), f_dims=(3, 2), b_dims=(3,), args=(0,), out_dims=(2, 3)),
        0,
    ),
    (
        "fc_activation",
        _conv(Op.FULLY_CONNECTED, x_dims=(2, 4), f_dims=(3, 4), b_dims=(3,), args=(7,), out_dims=(2, 3)),
        3,
    ),
    (
        "fc_bias_scale",
        _conv(
            Op.FULLY_CONNECTED,
            t=Q8S,
            x_dims=(2, 4),
            f_dims=(3, 4),
            b_dims=(3,),
            args=(0,),
            out_dims=(2, 3),
            qx=dict(scale=0.5),
            qf=dict(scale=0.5),
            qb=dict(scale=0.5),
            qo=dict(scale=1.0),
        ),
        2,
    ),
]


def _output_type_mismatch():
    b = ModelBuilder()
    x = b.input(F32, (1, 3, 3, 2))
    ins = [
        x,
        b.const(F32, (2, 2, 2, 2), np.zeros(16)),
        b.const(F32, (2,), np.zeros(2)),
        b.i32(2),
        b.i32(1),
        b.i32(1),
        b.i32(0),
    ]
    y = b.output(F16, (1, 2, 2, 2))
    b.operation(Op.CONV_2D, ins, [y])
    return b.build()


BAD[[n for n, *_ in BAD].index("conv_output_type")] = ("conv_output_type", _output_type_mismatch(), None)


@pytest.mark.parametrize("name,model,bad_input", BAD, ids=[b[0] for b in BAD])
def test_validate_rejects(name, model, bad_input):
    op = model.main.operations[0]
    with pytest.raises(ValidationError) as info:
        get_op(op.type).validate(OpView(model, model.main, 0))
    msg = str(info.value)
    assert op.name in msg
    if bad_input is not None:
        assert f"input {bad_input}" in msg, msg


def test_validate_accepts_every_signature():
    good = [
        _conv(),  # implicit, 7 inputs
        _conv(args=(2, 1, 1, 0, False)),  # + layout
        _conv(args=(2, 1, 1, 0, False, 1, 1)),  # + dilation
        _conv(args=(0, 0, 0, 0, 1, 1, 0)),  # explicit, 10 inputs
        _conv(args=(0, 0, 0, 0, 1, 1, 0, False, 1, 1)),  # explicit + layout + dilation
        _conv(t=Q8, **Q),
        _conv(t=Q8, f_type=QPC, qx=Q["qx"], qo=Q["qo"], qf=dict(channel_quant=ChannelQuant((0.5, 0.25), 0))),
        _conv(Op.DEPTHWISE_CONV_2D, f_dims=(1, 2, 2, 2), args=(2, 1, 1, 1, 0, False, 1, 1)),
        _conv(Op.GROUPED_CONV_2D, f_dims=(2, 2, 2, 1), args=(0, 0, 0, 0, 1, 1, 2, 0, False)),
        _conv(Op.TRANSPOSE_CONV_2D, args=(0, 0, 0, 0, 1, 1, 0, False), out_dims=(1, 4, 4, 2)),
        _conv(Op.FULLY_CONNECTED, x_dims=(2, 2, 2), f_dims=(3, 4), b_dims=(3,), args=(0,), out_dims=(2, 3)),
    ]
    for m in good:
        get_op(m.main.operations[0].type).validate(OpView(m, m.main, 0))


# ---------------------------------------------------------------------------------------
# (c) bit-exact agreement with direct loops (the reference's own loop structure)
# ---------------------------------------------------------------------------------------


def _multiplier(sx, sf, so):
    # The reference's real multiplier: float32 product of the scales, divided in double.
    return quantize_multiplier(float(np.float32(sx) * np.float32(sf)) / float(np.float32(so)))


def _requant(acc, o_scales, sx, so, zo, t):
    out = np.empty(acc.shape, np.int64)
    for o, sf in enumerate(o_scales):
        m, s = _multiplier(sx, sf, so)
        out[..., o] = multiply_by_quantized_multiplier(acc[..., o], m, s) + zo
    lo, hi = (0, 255) if t == Q8 else (-128, 127)
    return np.clip(out, lo, hi)


def _loop_conv(x, f, b, pads, strides, dil, groups, oh, ow):
    """Direct loops: x [N,H,W,C] offsets, f [O,fh,fw,C/g] offsets."""
    n_, h, w, c = x.shape
    o_, fh, fw, cg = f.shape
    pl, pr, pt, pb = pads
    og = o_ // groups
    acc = np.zeros((n_, oh, ow, o_), np.int64)
    for n, y, xx, o in itertools.product(range(n_), range(oh), range(ow), range(o_)):
        s = int(b[o])
        for i, j, k in itertools.product(range(fh), range(fw), range(cg)):
            iy, ix = y * strides[1] - pt + i * dil[1], xx * strides[0] - pl + j * dil[0]
            if 0 <= iy < h and 0 <= ix < w:
                s += int(x[n, iy, ix, (o // og) * cg + k]) * int(f[o, i, j, k])
        acc[n, y, xx, o] = s
    return acc


def _loop_depthwise(x, f, b, m, pads, strides, dil, oh, ow):
    n_, h, w, c = x.shape
    _, fh, fw, o_ = f.shape
    pl, pr, pt, pb = pads
    acc = np.zeros((n_, oh, ow, o_), np.int64)
    for n, y, xx, ic, mm in itertools.product(range(n_), range(oh), range(ow), range(c), range(m)):
        oc = ic * m + mm
        s = int(b[oc])
        for i, j in itertools.product(range(fh), range(fw)):
            iy, ix = y * strides[1] - pt + i * dil[1], xx * strides[0] - pl + j * dil[0]
            if 0 <= iy < h and 0 <= ix < w:
                s += int(x[n, iy, ix, ic]) * int(f[0, i, j, oc])
        acc[n, y, xx, oc] = s
    return acc


def _loop_transpose(x, f, b, pads, strides, oh, ow):
    n_, h, w, c = x.shape
    o_, fh, fw, _ = f.shape
    pl, pr, pt, pb = pads
    acc = np.zeros((n_, oh, ow, o_), np.int64)
    for n, y, xx, d, i, j, o in itertools.product(
        range(n_), range(h), range(w), range(c), range(fh), range(fw), range(o_)
    ):
        oy, ox = y * strides[1] - pt + i, xx * strides[0] - pl + j
        if 0 <= oy < oh and 0 <= ox < ow:
            acc[n, oy, ox, o] += int(x[n, y, xx, d]) * int(f[o, i, j, d])
    return acc + b.astype(np.int64)


def _random_case(rng, t, per_channel, f_shape, n_out, f_channel_dim):
    lo, hi = (0, 256) if t == Q8 else (-128, 128)
    zx, zo = int(rng.integers(lo, hi)), int(rng.integers(lo, hi))
    zf = 0 if per_channel else int(rng.integers(lo, hi))
    sx, so = 0.5 + rng.random(), 20.0 + 40 * rng.random()
    f_scales = (
        tuple(float(np.float32(0.01 + rng.random())) for _ in range(n_out))
        if per_channel
        else (float(np.float32(0.01 + rng.random())),)
    )
    f_vals = rng.integers(-127 if per_channel else lo, 128 if per_channel else hi, size=f_shape)
    qf = (
        dict(channel_quant=ChannelQuant(f_scales, f_channel_dim))
        if per_channel
        else dict(scale=f_scales[0], zero_point=zf)
    )
    b_scale = 0.0 if per_channel else float(np.float32(sx) * np.float32(f_scales[0]))
    bias = rng.integers(-3000, 3000, size=n_out)
    return dict(
        zx=zx,
        zo=zo,
        zf=zf,
        sx=sx,
        so=so,
        f_scales=f_scales * (n_out if not per_channel else 1),
        f_vals=f_vals,
        qf=qf,
        b_scale=b_scale,
        bias=bias,
        lo=lo,
        hi=hi,
    )


def _run(op, t, per_channel, c, x_vals, x_shape, args, out_shape):
    b = ModelBuilder()
    x = b.input(t, x_shape, scale=c["sx"], zero_point=c["zx"])
    f = b.const(QPC if per_channel else t, c["f_vals"].shape, c["f_vals"], **c["qf"])
    bias = b.const(I32, (len(c["bias"]),), c["bias"], scale=c["b_scale"])
    ins = [x, f, bias] + [b.bool(a) if isinstance(a, bool) else b.i32(a) for a in args]
    y = b.output(t, out_shape, scale=c["so"], zero_point=c["zo"])
    b.operation(op, ins, [y])
    return execute(b.build(), [np.asarray(x_vals).astype(np.uint8 if t == Q8 else np.int8)])[0]


@pytest.mark.parametrize(
    "t,per_channel",
    [(Q8, False), (Q8S, False), (Q8, True), (Q8S, True)],
    ids=["quant8", "quant8_signed", "quant8_per_channel", "quant8_signed_per_channel"],
)
@pytest.mark.parametrize("groups", [1, 2], ids=["conv_2d", "grouped_2"])
def test_conv_matches_direct_loops(t, per_channel, groups):
    rng = np.random.default_rng(7 + groups + 10 * per_channel + (t == Q8S))
    o_, fh, fw, cin = 4, 3, 2, 4
    c = _random_case(rng, t, per_channel, (o_, fh, fw, cin // groups), o_, 0)
    x_vals = rng.integers(c["lo"], c["hi"], size=(2, 5, 6, cin))
    pads, strides, dil = (1, 2, 2, 0), (1, 2), (2, 1)  # (l, r, t, b), (w, h), (w, h)
    oh = (5 - ((fh - 1) * dil[1] + 1) + strides[1] + pads[2] + pads[3]) // strides[1]
    ow = (6 - ((fw - 1) * dil[0] + 1) + strides[0] + pads[0] + pads[1]) // strides[0]
    if groups == 1:
        op, args = Op.CONV_2D, [*pads, *strides, 0, False, *dil]
    else:
        pads, dil = (1, 1, 2, 0), (1, 1)  # no dilation; padding must stay below the filter size
        op, args = Op.GROUPED_CONV_2D, [*pads, *strides, groups, 0, False]
        oh = (5 - fh + strides[1] + pads[2] + pads[3]) // strides[1]
        ow = (6 - fw + strides[0] + pads[0] + pads[1]) // strides[0]
    actual = _run(op, t, per_channel, c, x_vals, x_vals.shape, args, (2, oh, ow, o_))
    acc = _loop_conv(x_vals - c["zx"], c["f_vals"] - c["zf"], c["bias"], pads, strides, dil, groups, oh, ow)
    np.testing.assert_array_equal(actual, _requant(acc, c["f_scales"], c["sx"], c["so"], c["zo"], t))


@pytest.mark.parametrize("t,per_channel", [(Q8, False), (Q8S, True)], ids=["quant8", "quant8_signed_per_channel"])
def test_depthwise_matches_direct_loops(t, per_channel):
    rng = np.random.default_rng(3 + per_channel)
    cin, m, fh, fw = 3, 2, 2, 3
    c = _random_case(rng, t, per_channel, (1, fh, fw, cin * m), cin * m, 3)
    x_vals = rng.integers(c["lo"], c["hi"], size=(2, 5, 6, cin))
    pads, strides, dil = (2, 1, 0, 1), (2, 1), (1, 2)
    oh = (5 - ((fh - 1) * dil[1] + 1) + strides[1] + pads[2] + pads[3]) // strides[1]
    ow = (6 - ((fw - 1) * dil[0] + 1) + strides[0] + pads[0] + pads[1]) // strides[0]
    actual = _run(
        Op.DEPTHWISE_CONV_2D,
        t,
        per_channel,
        c,
        x_vals,
        x_vals.shape,
        [*pads, *strides, m, 0, False, *dil],
        (2, oh, ow, cin * m),
    )
    acc = _loop_depthwise(x_vals - c["zx"], c["f_vals"] - c["zf"], c["bias"], m, pads, strides, dil, oh, ow)
    np.testing.assert_array_equal(actual, _requant(acc, c["f_scales"], c["sx"], c["so"], c["zo"], t))


@pytest.mark.parametrize("t,per_channel", [(Q8S, False), (Q8, True)], ids=["quant8_signed", "quant8_per_channel"])
def test_transpose_matches_direct_loops(t, per_channel):
    rng = np.random.default_rng(11 + per_channel)
    o_, fh, fw, cin = 3, 3, 2, 2
    c = _random_case(rng, t, per_channel, (o_, fh, fw, cin), o_, 0)
    x_vals = rng.integers(c["lo"], c["hi"], size=(2, 3, 4, cin))
    pads, strides = (1, -1, 2, 0), (2, 3)  # a negative right padding widens the output
    oh = 3 * strides[1] + fh - strides[1] - pads[2] - pads[3]
    ow = 4 * strides[0] + fw - strides[0] - pads[0] - pads[1]
    actual = _run(
        Op.TRANSPOSE_CONV_2D, t, per_channel, c, x_vals, x_vals.shape, [*pads, *strides, 0, False], (2, oh, ow, o_)
    )
    acc = _loop_transpose(x_vals - c["zx"], c["f_vals"] - c["zf"], c["bias"], pads, strides, oh, ow)
    np.testing.assert_array_equal(actual, _requant(acc, c["f_scales"], c["sx"], c["so"], c["zo"], t))


@pytest.mark.parametrize("t", [Q8, Q8S], ids=["quant8", "quant8_signed"])
def test_fully_connected_matches_direct_loops(t):
    rng = np.random.default_rng(5)
    c = _random_case(rng, t, False, (5, 12), 5, 0)
    x_vals = rng.integers(c["lo"], c["hi"], size=(3, 2, 6))
    actual = _run(Op.FULLY_CONNECTED, t, False, c, x_vals, x_vals.shape, [0], (3, 5))
    xo, wo = x_vals.reshape(3, 12) - c["zx"], c["f_vals"] - c["zf"]
    acc = np.array(
        [
            [sum(int(xo[r, k]) * int(wo[u, k]) for k in range(12)) + int(c["bias"][u]) for u in range(5)]
            for r in range(3)
        ]
    )
    np.testing.assert_array_equal(actual, _requant(acc, c["f_scales"], c["sx"], c["so"], c["zo"], t))


def test_large_accumulators_stay_exact():
    """K * 127 * 127 far above 2**24 forces the float64 matmul; the result must stay exact."""
    rng = np.random.default_rng(1)
    k = 2000
    c = _random_case(rng, Q8, False, (2, k), 2, 0)
    c["f_vals"] = rng.integers(254, 256, size=(2, k))  # offsets 126 or 127
    c["zf"] = 128
    c["qf"] = dict(scale=c["f_scales"][0], zero_point=128)
    c["zx"], c["so"] = 128, 2.0e5
    x_vals = np.full((1, k), 255)  # offsets 127
    actual = _run(Op.FULLY_CONNECTED, Q8, False, c, x_vals, x_vals.shape, [0], (1, 2))
    acc = (x_vals - 128).astype(np.int64) @ (c["f_vals"] - 128).astype(np.int64).T + c["bias"]
    assert acc.max() > 1 << 24 and (acc % 2).any()  # float32 could not hold these
    expected = _requant(acc, c["f_scales"], c["sx"], c["so"], c["zo"], Q8)
    assert 0 < expected.min() and expected.max() < 255  # not saturated: the test bites
    np.testing.assert_array_equal(actual, expected)


def test_quantised_conv_rounds_twice_as_nnapi_does():
    """NNAPI requantises a convolution's accumulator in two roundings: the high half of a
    31-bit fixed-point product, then a rounding right shift.  A value just below .5 can
    round up (1.4726 gives 2).  LiteRT (XNNPACK) and onnxruntime (MLAS) multiply by a float32
    scale and round once; on the built-in MobileNets they differ from the reference by 1 LSB
    exactly there (docs/benchmark.md).  The reference keeps NNAPI's bits.  The expected codes come
    from the Python-int SRDHM / RDBPOT of nnconform.reference.arith.fixedpoint, not from the vectorised
    requantisers under test."""
    sx, sw, so = 0.5, 0.5, 7.3
    real = float(np.float32(sx) * np.float32(sw)) / float(np.float32(so))
    x = np.arange(256).reshape(1, 1, 256, 1)
    w = 43
    model = _model(
        Op.CONV_2D,
        Q8,
        [1, 1, 256, 1],
        ([1, 1, 1, 1], [w]),
        ([1], [0]),
        [0, 0, 0, 0, 1, 1, 0],
        [1, 1, 256, 1],
        qx=dict(scale=sx),
        qf=dict(scale=sw),
        qb=dict(scale=sx * sw),
        qo=dict(scale=so),
    )
    (y,) = execute(model, [x.astype(np.uint8)])
    acc = [int(v) * w for v in range(256)]
    m, shift = quantize_multiplier(real)
    nnapi = np.array([min(255, _rdbp_int(_srdhm_int(a, m), -shift)) for a in acc])
    np.testing.assert_array_equal(y.reshape(-1), nnapi)
    once = np.array([min(255, math.floor(Fraction(a) * Fraction(real) + Fraction(1, 2))) for a in acc])
    rounded_up = np.flatnonzero(nnapi != once)
    assert y.reshape(-1)[1] == 2 and once[1] == 1  # 43 * 0.034246... = 1.4726
    assert len(rounded_up) > 5 and (nnapi[rounded_up] == once[rounded_up] + 1).all()


# ---------------------------------------------------------------------------------------
# (c2) the fast paths (fused requantisation, blocked depthwise, chunked exact matmul, cached
#      constants, softmax tables) against straightforward slow formulations, random shapes
# ---------------------------------------------------------------------------------------


def _stepwise_requant(acc, bias, mult, shift, out, act):
    from nnconform.reference.arith.activation import quant_bounds

    x = acc.astype(np.int64) + bias.astype(np.int64)
    y = np.stack(
        [multiply_by_quantized_multiplier(x[..., ch], int(mult[ch]), int(shift[ch])) for ch in range(x.shape[-1])],
        axis=-1,
    )
    lo, hi = quant_bounds(act, out)
    return np.clip(y + out.zero_point, lo, hi).astype(out.info.dtype)


@pytest.mark.parametrize("seed", range(6))
def test_fused_requantize_matches_stepwise(seed):
    from nnconform.ir import Operand
    from nnconform.reference.ops.conv_common import requantize

    rng = np.random.default_rng(100 + seed)
    for _ in range(60):
        ch = int(rng.integers(1, 6))
        big = int(rng.choice([1 << 8, 1 << 16, 1 << 24, 1 << 30]))
        acc = rng.integers(-big, big, size=(int(rng.integers(1, 40)), ch))
        if rng.random() < 0.4:
            acc = (acc >> 6) << 6  # many exact rounding ties
        if rng.random() < 0.4:
            acc = acc.astype(np.float64 if big > 1 << 24 else np.float32)
        bias = rng.integers(-1 << 20, 1 << 20, size=ch).astype(np.int32)
        per_channel = rng.random() < 0.5
        k = ch if per_channel else 1
        reals = (
            rng.uniform(0.5, 1.0, k) * 300 / big
            if rng.random() < 0.7
            else rng.uniform(1e-6, 4, k) * 2.0 ** rng.integers(-20, 3, k)
        )
        pairs = [quantize_multiplier(float(r)) for r in reals]
        if rng.random() < 0.1:
            pairs[0] = (0, 0)  # a multiplier flushed to zero
        pairs = pairs if per_channel else pairs * ch
        mult, shift = np.array([m for m, _ in pairs]), np.array([s for _, s in pairs])
        t = Q8 if rng.random() < 0.5 else Q8S
        zp = int(rng.integers(0, 256)) if t == Q8 else int(rng.integers(-128, 128))
        out = Operand(t, (), scale=float(rng.uniform(0.01, 1)), zero_point=zp)
        act = int(rng.integers(0, 4))
        for bound in (None, int(np.abs(acc).max())):
            actual = requantize(acc, bias, mult, shift, out, act, acc_bound=bound)
            expected = _stepwise_requant(acc, bias, mult, shift, out, act)
            assert actual.dtype == expected.dtype
            np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("seed", range(4))
def test_flat_requantize_float_accumulators(seed, monkeypatch):
    """The flat-block path (float accumulators within their exact integer range) against the
    step-by-step formulation: several blocks with a short last one, per-tensor and
    per-channel multipliers with left and right shifts, rounding ties, both 8-bit types."""
    import nnconform.reference.ops.conv_common as cc
    from nnconform.ir import Operand

    monkeypatch.setattr(cc, "_REQUANT_BLOCK", 64)
    rng = np.random.default_rng(300 + seed)
    print("seed", 300 + seed)
    for _ in range(40):
        ch = int(rng.integers(1, 9))
        dt = np.float32 if rng.random() < 0.6 else np.float64
        big = 1 << int(rng.choice([6, 12, 22, 24] if dt == np.float32 else [6, 20, 30, 40]))
        acc = rng.integers(-big, big, size=(int(rng.integers(1, 60)), ch))
        if rng.random() < 0.5:
            acc = (acc >> 5) << 5  # many exact rounding ties
        bias = rng.integers(-min(big, 1 << 20), min(big, 1 << 20), size=ch).astype(np.int32)
        k = ch if rng.random() < 0.5 else 1
        reals = rng.uniform(0.5, 1.0, k) * 300 / big * 2.0 ** rng.integers(-3, 8, k)  # > 1: left shifts
        pairs = [quantize_multiplier(float(r)) for r in reals]
        pairs = pairs if k == ch else pairs * ch
        mult, shift = np.array([m for m, _ in pairs]), np.array([s for _, s in pairs])
        t = Q8 if rng.random() < 0.5 else Q8S
        zp = int(rng.integers(0, 256)) if t == Q8 else int(rng.integers(-128, 128))
        out = Operand(t, (), scale=0.5, zero_point=zp)
        act = int(rng.integers(0, 4))
        bound = int(np.abs(acc).max())
        assert bound + (1 << 20) <= 1 << 53  # the flat path runs (float32 + bias in float64 too)
        actual = cc.requantize(acc.astype(dt), bias, mult, shift, out, act, acc_bound=bound)
        expected = _stepwise_requant(acc, bias, mult, shift, out, act)
        np.testing.assert_array_equal(actual, expected)


def _float_depthwise(x, f, b, m, pads, strides, dil, oh, ow):
    """float64 direct formulation and the sum of |terms| (for a reassociation tolerance)."""
    n_, h, w, c = x.shape
    _, fh, fw, o_ = f.shape
    pl, pr, pt, pb = pads
    xp = np.zeros((n_, h + pt + pb, w + pl + pr, c))
    xp[:, pt : pt + h, pl : pl + w] = x
    xp = np.repeat(xp, m, axis=3)
    acc, mag = np.zeros((n_, oh, ow, o_)) + b, np.zeros((n_, oh, ow, o_)) + np.abs(b)
    for i, j in itertools.product(range(fh), range(fw)):
        v = xp[
            :,
            i * dil[1] : i * dil[1] + (oh - 1) * strides[1] + 1 : strides[1],
            j * dil[0] : j * dil[0] + (ow - 1) * strides[0] + 1 : strides[0],
        ] * f[0, i, j].astype(np.float64)
        acc, mag = acc + v, mag + np.abs(v)
    return acc, mag


@pytest.mark.parametrize("seed", range(8))
def test_depthwise_fast_path_random_shapes(seed):
    """Random small shapes, strides, dilations, multipliers, paddings and both layouts; big
    enough images that the blocked tap loop takes several row blocks (and whole-image
    blocks for the small ones)."""
    import nnconform.reference.ops.depthwise_conv_2d as dw

    rng = np.random.default_rng(200 + seed)
    old_block = dw._BLOCK
    dw._BLOCK = int(rng.choice([64, 256, 1 << 16]))  # exercise both blocking schemes
    try:
        for t in (F32, Q8, Q8S):
            n_, h, w, cin, m = (
                int(v)
                for v in (
                    rng.integers(1, 4),
                    rng.integers(3, 12),
                    rng.integers(3, 12),
                    rng.integers(1, 5),
                    rng.integers(1, 4),
                )
            )
            fh, fw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
            dil = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
            strides = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
            eh, ew = (fh - 1) * dil[1] + 1, (fw - 1) * dil[0] + 1
            if eh > h or ew > w:
                dil = (1, 1)
                eh, ew = fh, fw
            pads = tuple(int(rng.integers(0, e)) for e in (ew, ew, eh, eh))
            oh = (h - eh + strides[1] + pads[2] + pads[3]) // strides[1]
            ow = (w - ew + strides[0] + pads[0] + pads[1]) // strides[0]
            nchw = bool(rng.random() < 0.3)
            o_ = cin * m
            args = [*pads, *strides, m, 0, nchw, *dil]
            if t == F32:
                x_vals = rng.standard_normal((n_, h, w, cin)).astype(np.float32)
                f_vals = rng.standard_normal((1, fh, fw, o_)).astype(np.float32)
                b_vals = rng.standard_normal(o_).astype(np.float32)
                b = ModelBuilder()
                xin = b.input(F32, (n_, cin, h, w) if nchw else (n_, h, w, cin))
                ins = [xin, b.const(F32, f_vals.shape, f_vals), b.const(F32, (o_,), b_vals)]
                ins += [b.bool(a) if isinstance(a, bool) else b.i32(a) for a in args]
                y = b.output(F32, (n_, o_, oh, ow) if nchw else (n_, oh, ow, o_))
                b.operation(Op.DEPTHWISE_CONV_2D, ins, [y])
                feed = x_vals.transpose(0, 3, 1, 2) if nchw else x_vals
                actual = execute(b.build(), [np.ascontiguousarray(feed)])[0]
                if nchw:
                    actual = actual.transpose(0, 2, 3, 1)
                expected, mag = _float_depthwise(x_vals, f_vals, b_vals, m, pads, strides, dil, oh, ow)
                assert np.all(np.abs(actual - expected) <= 1e-5 * mag + 1e-30)
                continue
            per_channel = bool(rng.random() < 0.5)
            c = _random_case(rng, t, per_channel, (1, fh, fw, o_), o_, 3)
            x_vals = rng.integers(c["lo"], c["hi"], size=(n_, h, w, cin))
            feed = x_vals.transpose(0, 3, 1, 2) if nchw else x_vals
            actual = _run(
                Op.DEPTHWISE_CONV_2D,
                t,
                per_channel,
                c,
                feed,
                feed.shape,
                args,
                (n_, o_, oh, ow) if nchw else (n_, oh, ow, o_),
            )
            if nchw:
                actual = actual.transpose(0, 2, 3, 1)
            acc = _loop_depthwise(x_vals - c["zx"], c["f_vals"] - c["zf"], c["bias"], m, pads, strides, dil, oh, ow)
            np.testing.assert_array_equal(actual, _requant(acc, c["f_scales"], c["sx"], c["so"], c["zo"], t))
    finally:
        dw._BLOCK = old_block


@pytest.mark.parametrize("seed", range(4))
def test_conv_fast_path_random_shapes(seed):
    rng = np.random.default_rng(300 + seed)
    for t in (Q8, Q8S):
        groups = int(rng.integers(1, 3))
        cin, o_ = groups * int(rng.integers(1, 4)), groups * int(rng.integers(1, 4))
        fh, fw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        n_, h, w = int(rng.integers(1, 3)), int(rng.integers(fh, 8)), int(rng.integers(fw, 8))
        strides = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
        pads = tuple(int(rng.integers(0, e)) for e in (fw, fw, fh, fh))
        oh = (h - fh + strides[1] + pads[2] + pads[3]) // strides[1]
        ow = (w - fw + strides[0] + pads[0] + pads[1]) // strides[0]
        per_channel = bool(rng.random() < 0.5)
        c = _random_case(rng, t, per_channel, (o_, fh, fw, cin // groups), o_, 0)
        x_vals = rng.integers(c["lo"], c["hi"], size=(n_, h, w, cin))
        if groups == 1:
            op, args = Op.CONV_2D, [*pads, *strides, 0]
        else:
            op, args = Op.GROUPED_CONV_2D, [*pads, *strides, groups, 0, False]
        for _ in range(2):  # the second run reads the cached filter offsets
            actual = _run(op, t, per_channel, c, x_vals, x_vals.shape, args, (n_, oh, ow, o_))
            acc = _loop_conv(x_vals - c["zx"], c["f_vals"] - c["zf"], c["bias"], pads, strides, (1, 1), groups, oh, ow)
            np.testing.assert_array_equal(actual, _requant(acc, c["f_scales"], c["sx"], c["so"], c["zo"], t))


@pytest.mark.parametrize("k", [7, 300, 1031, 4099])
def test_fully_connected_chunked_exact_matmul(k):
    """Offsets up to 255 x 255 over K terms: beyond 2**24 the float32 matmul is split along
    K.  Runs twice on one model (cached weights) and once with the weights as a runtime
    input whose values then change (never cached)."""
    from nnconform.reference.executor import Executor

    rng = np.random.default_rng(k)
    units, batch = 5, 3
    w_vals = rng.choice(np.array([0, 1, 254, 255], np.uint8), size=(units, k))
    bias = rng.integers(-5000, 5000, units).astype(np.int32)
    sx, sw = 0.5, 0.25
    so = float(k) * 255 * 255 * sx * sw / 200
    for const_weights in (True, False):
        b = ModelBuilder()
        x = b.input(Q8, (batch, k), scale=sx, zero_point=0)
        wt = (
            b.const(Q8, (units, k), w_vals, scale=sw, zero_point=0)
            if const_weights
            else b.input(Q8, (units, k), scale=sw, zero_point=0)
        )
        bs = b.const(I32, (units,), bias, scale=float(np.float32(sx) * np.float32(sw)))
        y = b.output(Q8, (batch, units), scale=so, zero_point=100)
        b.operation(Op.FULLY_CONNECTED, [x, wt, bs, b.i32(0)], [y])
        ex = Executor(b.build())
        for run in range(3):
            x_vals = rng.choice(np.array([0, 1, 255], np.uint8), size=(batch, k))
            w_run = w_vals if const_weights else rng.integers(0, 256, (units, k), dtype=np.uint8)
            actual = ex.run([x_vals] if const_weights else [x_vals, w_run])[0]
            acc = x_vals.astype(np.int64) @ w_run.astype(np.int64).T + bias
            np.testing.assert_array_equal(actual, _requant(acc, (sw,) * units, sx, so, 100, Q8))


@pytest.mark.parametrize("k", [1, 258, 259, 1031, 5000])
def test_exact_matmul_is_exact(k):
    """Offsets near +-255 with odd products: any float32 partial sum beyond 2**24 would lose
    low bits, so the result must equal the int64 matmul exactly."""
    from nnconform.reference.ops.conv_common import exact_matmul

    rng = np.random.default_rng(k)
    a = rng.choice(np.array([-255, -253, 253, 255]), size=(4, k))
    b = rng.choice(np.array([-255, 255, 251]), size=(6, k))
    a[0], b[0] = 255, 255  # one row of maximal sums
    actual = exact_matmul(a.astype(np.float32), b.astype(np.float32), 255, 255)
    np.testing.assert_array_equal(actual.astype(np.int64), a @ b.T)
    one = exact_matmul(a[1:2].astype(np.float32), b.astype(np.float32), 255, 255)  # the gemv path
    np.testing.assert_array_equal(one.astype(np.int64), a[1:2] @ b.T)


@pytest.mark.parametrize("rows", [1, 3])
def test_exact_matmul_at_the_float32_limit(rows):
    """K * max|a| * max|b| == 2**24 exactly stays one float32 product: every sum is at most
    2**24 in magnitude, which float32 holds; one more term and it is split."""
    from nnconform.reference.ops.conv_common import exact_matmul

    rng = np.random.default_rng(rows)
    for k in (1024, 1025):
        a = rng.choice(np.array([-128, 127, -127, 128]), size=(rows, k))
        b = rng.choice(np.array([-128, 128, 127]), size=(5, k))
        a[0], b[0] = 128, 128  # a sum of exactly k * 2**14
        b[1] = -128
        actual = exact_matmul(a.astype(np.float32), b.astype(np.float32), 128, 128)
        np.testing.assert_array_equal(actual.astype(np.int64), a @ b.T)


@pytest.mark.parametrize("shape, axis", [((3, 1, 37), -1), ((2, 300), -1), ((20, 257), -1), ((300, 3), 0)])
@pytest.mark.parametrize("t", [Q8, Q8S], ids=["quant8", "quant8_signed"])
def test_softmax_table_matches_direct_fixed_point(t, shape, axis):
    """The quantised SOFTMAX looks its per-element terms up in a table of the 256 possible
    differences (and, for rows of 256 or more, its outputs in a per-row table of them);
    compare with the same gemmlowp steps applied to every element.  Shapes: short rows,
    long rows (few rows: reciprocals on Python ints; 20 rows: in numpy), another axis."""
    from nnconform.reference.arith import fixedpoint as fx
    from nnconform.reference.arith.quant import rounding_divide_by_pot
    from nnconform.reference.arith.quant import saturating_rounding_doubling_high_mul as srdhm

    rng = np.random.default_rng(17)
    lo, hi = (0, 255) if t == Q8 else (-128, 127)
    for beta, scale in ((1.0, 0.1), (0.5, 1 / 256), (2.0, 0.5), (1e-3, 0.02), (1.0, 5.0)):
        x_vals = rng.integers(lo, hi + 1, size=shape).astype(np.uint8 if t == Q8 else np.int8)
        b = ModelBuilder()
        x = b.input(t, x_vals.shape, scale=scale, zero_point=(lo + hi + 1) // 2)
        y = b.output(t, x_vals.shape, scale=1 / 256, zero_point=0 if t == Q8 else -128)
        b.operation(Op.SOFTMAX, [x, b.f32(beta), b.i32(axis)], [y])
        actual = np.moveaxis(execute(b.build(), [x_vals])[0], axis, -1)
        x_vals = np.moveaxis(x_vals, axis, -1)
        real = min(float(np.float32(beta)) * float(np.float32(scale)) * float(1 << 26), float((1 << 31) - 1))
        mult, left = fx.quantize_multiplier_greater_than_one(real)
        diff_min = -fx.calculate_input_radius(5, left)
        q = x_vals.astype(np.int64)
        diff = q - q.max(axis=-1, keepdims=True)
        used = diff >= diff_min
        exps = fx.exp_on_negative_values(srdhm(np.where(used, diff, 0) << left, mult), 5)
        total = fx.wrap32(np.where(used, fx.rescale(exps, 0, 12), 0).sum(axis=-1, keepdims=True)) & 0xFFFFFFFF
        headroom = 32 - np.frexp(total.astype(np.float64))[1].astype(np.int64)
        recip = fx.one_over_one_plus_x_for_x_in_0_1(((total << headroom) & 0xFFFFFFFF) - (1 << 31))
        out = rounding_divide_by_pot(srdhm(recip, exps), 12 - headroom + 31 - 8) - (128 if t == Q8S else 0)
        np.testing.assert_array_equal(actual, np.where(used, np.clip(out, lo, hi), lo))


# ---------------------------------------------------------------------------------------
# (d) AOSP golden vectors
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", MY_OPS)
def test_aosp_vectors(op):
    from nnconform.cases.vectors import check_case, default_root, load_cases

    root = default_root()  # $NNCONFORM_VECTORS, else the bundled copy
    registered = {t.name for t in load_all()}
    cases = load_cases(root, ops=[op], within=registered)
    assert cases, f"no runnable vectors use {op}"
    failures = []
    for case in cases:
        status, msg = check_case(case)
        if status != "pass":
            failures.append(f"{case.test_id}: {status}: {msg}")
    assert not failures, f"{len(failures)} of {len(cases)} failed:\n" + "\n".join(failures[:20])


# ---------------------------------------------------------------------------------------
# parameters parsed once per model (conv_common.planned_params)
# ---------------------------------------------------------------------------------------


def _direct_conv_same(x: np.ndarray, w: np.ndarray, stride: int) -> np.ndarray:
    """SAME-padded NHWC float convolution, one output pixel at a time (the odd padding pixel
    at the end, as NNAPI puts it)."""
    n, h, wd, c = x.shape
    o, fh, fw, _ = w.shape
    oh, ow = -(-h // stride), -(-wd // stride)
    ph = max(0, (oh - 1) * stride + fh - h) // 2
    pw = max(0, (ow - 1) * stride + fw - wd) // 2
    xp = np.zeros((n, h + fh + stride, wd + fw + stride, c), np.float64)
    xp[:, ph : ph + h, pw : pw + wd] = x
    out = np.zeros((n, oh, ow, o))
    for yy in range(oh):
        for xx in range(ow):
            patch = xp[:, yy * stride : yy * stride + fh, xx * stride : xx * stride + fw]
            out[:, yy, xx] = np.einsum("nijc,oijc->no", patch, w)
    return out


def test_conv_parameters_follow_the_actual_input_size_run_after_run():
    # Spatial dimensions left unknown: SAME padding depends on each run's input size, so the
    # parameters parsed once per model must be keyed by it.
    rng = np.random.default_rng(1601)
    w = rng.standard_normal((3, 3, 3, 2)).astype(np.float32)
    b = ModelBuilder()
    x = b.input(F32, [1, 0, 0, 2])
    f = b.const(F32, [3, 3, 3, 2], w)
    bias = b.const(F32, [3], np.zeros(3, np.float32))
    y = b.output(F32, [1, 0, 0, 3])
    b.operation(Op.CONV_2D, [x, f, bias, b.i32(1), b.i32(2), b.i32(2), b.i32(0)], [y])
    from nnconform.reference.executor import Executor

    ex = Executor(b.build())
    for h, wd in [(5, 7), (8, 3), (5, 7), (1, 1)]:
        xv = rng.standard_normal((1, h, wd, 2)).astype(np.float32)
        got = ex.run([xv])[0]
        want = _direct_conv_same(xv.astype(np.float64), w.astype(np.float64), 2)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_conv_parameters_given_at_run_time_are_read_each_run():
    # A stride fed as a model input (not a constant) may change between runs: never cached.
    rng = np.random.default_rng(1602)
    w = rng.standard_normal((2, 3, 3, 1)).astype(np.float32)
    b = ModelBuilder()
    x = b.input(F32, [1, 6, 6, 1])
    stride = b.input(T.INT32)
    f = b.const(F32, [2, 3, 3, 1], w)
    bias = b.const(F32, [2], np.zeros(2, np.float32))
    y = b.output(F32, [1, 0, 0, 2])
    b.operation(Op.CONV_2D, [x, f, bias, b.i32(1), stride, stride, b.i32(0)], [y])
    from nnconform.reference.executor import Executor

    ex = Executor(b.build())
    xv = rng.standard_normal((1, 6, 6, 1)).astype(np.float32)
    for s in (1, 2, 3, 1):
        got = ex.run([xv, np.array(s, np.int32)])[0]
        want = _direct_conv_same(xv.astype(np.float64), w.astype(np.float64), s)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_bound_and_dtype_scans_the_data_only_when_the_type_bound_needs_float64():
    from nnconform.reference.ops import conv_common as cc

    x = np.full((1, 4, 4, 8), 130, np.uint8)
    # 9 taps x 128 x 127 < 2**24: the type's bound, no scan
    assert cc.bound_and_dtype(x, 128, 9, 127) == (128, np.float32)
    # 4,608 terms x 128 x 127 >= 2**24 from the type, but the data (|130 - 128| = 2) keeps float32
    assert cc.bound_and_dtype(x, 128, 4608, 127) == (2, np.float32)
    x[0, 0, 0, 0] = 255
    assert cc.bound_and_dtype(x, 0, 4608, 127) == (255, np.float64)
    s = np.full((2, 3), -100, np.int8)
    assert cc.bound_and_dtype(s, -128, 9, 127) == (255, np.float32)
