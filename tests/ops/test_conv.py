"""CONV_2D, DEPTHWISE_CONV_2D, GROUPED_CONV_2D, TRANSPOSE_CONV_2D, FULLY_CONNECTED:
hand-checked examples, signature validation, bit-exact agreement of the vectorised quantised
paths with direct loops over every output element, and the AOSP golden vectors."""
from __future__ import annotations

import itertools
import os
from pathlib import Path

import numpy as np
import pytest

from nnconform.errors import ValidationError
from nnconform.executor import execute
from nnconform.ir import ChannelQuant, ModelBuilder, OperandType as T, OperationType as Op
from nnconform.ops.quant import multiply_by_quantized_multiplier, quantize_multiplier
from nnconform.ops.registry import OpView, get_op, load_all
from nnconform.suites.examples.conv import EXAMPLES, _model

MY_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "GROUPED_CONV_2D", "TRANSPOSE_CONV_2D", "FULLY_CONNECTED")
F32, F16, I32 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32
Q8, Q8S, QPC = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_QUANT8_SYMM_PER_CHANNEL


# ---------------------------------------------------------------------------------------
# (a) hand-checked examples
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("ex", EXAMPLES, ids=lambda e: e.name)
def test_example(ex):
    actual = execute(ex.model, list(ex.inputs))
    assert len(actual) == len(ex.outputs)
    for exp, act in zip(ex.outputs, actual):
        assert act.dtype == exp.dtype and act.shape == exp.shape, (act.dtype, act.shape, exp.shape)
        if exp.dtype.kind in "iub":
            np.testing.assert_array_equal(act, exp)
        else:
            rtol = 1e-3 if exp.dtype == np.float16 else 1e-5
            np.testing.assert_allclose(act.astype(np.float64), exp.astype(np.float64), rtol=rtol, atol=0)


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
        q = {} if t in (F32, F16) else dict(qx=dict(scale=0.5), qf=dict(scale=0.5), qb=dict(scale=0.25),
                                           qo=dict(scale=1.0))
        model = _model(Op[op], t, x_dims, f, ([n_out], [0] * n_out), args, out_dims, **q)
        (y,) = execute(model, [np.zeros(x_dims, dtype)])
        assert y.shape == tuple(out_dims) and y.dtype == dtype


# ---------------------------------------------------------------------------------------
# (b) validation
# ---------------------------------------------------------------------------------------

def _conv(op=Op.CONV_2D, t=F32, x_dims=(1, 3, 3, 2), f_dims=(2, 2, 2, 2), b_dims=(2,), args=(2, 1, 1, 0),
          out_dims=(1, 2, 2, 2), f_type=None, b_type=None, qx=None, qf=None, qb=None, qo=None, arg_types=None):
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


Q = dict(qx=dict(scale=0.5, zero_point=128), qf=dict(scale=0.5, zero_point=128), qb=dict(scale=0.25),
         qo=dict(scale=1.0, zero_point=128))

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
    ("conv_per_channel_dim", _conv(t=Q8, f_type=QPC, qx=Q["qx"], qo=Q["qo"],
                                   qf=dict(channel_quant=ChannelQuant((0.5, 0.5), 3))), 1),
    ("conv_output_type", None, None),
    ("depthwise_filter_dim0", _conv(Op.DEPTHWISE_CONV_2D, f_dims=(2, 2, 2, 2), args=(2, 1, 1, 1, 0)), 1),
    ("depthwise_multiplier_mismatch", _conv(Op.DEPTHWISE_CONV_2D, f_dims=(1, 2, 2, 2), args=(2, 1, 1, 2, 0)), 1),
    ("depthwise_multiplier_zero", _conv(Op.DEPTHWISE_CONV_2D, f_dims=(1, 2, 2, 2), args=(2, 1, 1, 0, 0)), 6),
    ("depthwise_per_channel_dim", _conv(Op.DEPTHWISE_CONV_2D, t=Q8S, f_dims=(1, 2, 2, 2), f_type=QPC,
                                        args=(2, 1, 1, 1, 0), qx=dict(scale=0.5), qo=dict(scale=1.0),
                                        qf=dict(channel_quant=ChannelQuant((0.5,), 0))), 1),
    ("grouped_no_layout", _conv(Op.GROUPED_CONV_2D, f_dims=(2, 2, 2, 1), args=(2, 1, 1, 2, 0)), None),
    ("grouped_groups_divide", _conv(Op.GROUPED_CONV_2D, f_dims=(3, 2, 2, 1), b_dims=(3,),
                                    args=(2, 1, 1, 2, 0, False)), 1),
    ("grouped_groups_zero", _conv(Op.GROUPED_CONV_2D, f_dims=(2, 2, 2, 1), args=(2, 1, 1, 0, 0, False)), 6),
    ("transpose_output_shape_type", _conv(Op.TRANSPOSE_CONV_2D, args=(4, 2, 1, 1, 0, False)), 3),
    ("transpose_layout_type", _conv(Op.TRANSPOSE_CONV_2D, args=((1, 4, 4, 2), 2, 1, 1, 0, 1),
                                    arg_types={0: I32}), 8),
    ("transpose_bias_length", _conv(Op.TRANSPOSE_CONV_2D, b_dims=(3,), args=((1, 4, 4, 2), 2, 1, 1, 0, False),
                                    arg_types={0: I32}), 2),
    ("fc_weights_rank", _conv(Op.FULLY_CONNECTED, x_dims=(2, 4), f_dims=(2, 2, 2), b_dims=(2,), args=(0,),
                              out_dims=(2, 2)), 1),
    ("fc_bias_length", _conv(Op.FULLY_CONNECTED, x_dims=(2, 4), f_dims=(3, 4), b_dims=(2,), args=(0,),
                             out_dims=(2, 3)), 2),
    ("fc_input_split", _conv(Op.FULLY_CONNECTED, x_dims=(1, 5), f_dims=(3, 2), b_dims=(3,), args=(0,),
                             out_dims=(2, 3)), 0),
    ("fc_activation", _conv(Op.FULLY_CONNECTED, x_dims=(2, 4), f_dims=(3, 4), b_dims=(3,), args=(7,),
                            out_dims=(2, 3)), 3),
    ("fc_bias_scale", _conv(Op.FULLY_CONNECTED, t=Q8S, x_dims=(2, 4), f_dims=(3, 4), b_dims=(3,), args=(0,),
                            out_dims=(2, 3), qx=dict(scale=0.5), qf=dict(scale=0.5), qb=dict(scale=0.5),
                            qo=dict(scale=1.0)), 2),
]


def _output_type_mismatch():
    b = ModelBuilder()
    x = b.input(F32, (1, 3, 3, 2))
    ins = [x, b.const(F32, (2, 2, 2, 2), np.zeros(16)), b.const(F32, (2,), np.zeros(2)),
           b.i32(2), b.i32(1), b.i32(1), b.i32(0)]
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
        _conv(),                                                     # implicit, 7 inputs
        _conv(args=(2, 1, 1, 0, False)),                             # + layout
        _conv(args=(2, 1, 1, 0, False, 1, 1)),                       # + dilation
        _conv(args=(0, 0, 0, 0, 1, 1, 0)),                           # explicit, 10 inputs
        _conv(args=(0, 0, 0, 0, 1, 1, 0, False, 1, 1)),              # explicit + layout + dilation
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
    for n, y, xx, d, i, j, o in itertools.product(range(n_), range(h), range(w), range(c), range(fh), range(fw),
                                                   range(o_)):
        oy, ox = y * strides[1] - pt + i, xx * strides[0] - pl + j
        if 0 <= oy < oh and 0 <= ox < ow:
            acc[n, oy, ox, o] += int(x[n, y, xx, d]) * int(f[o, i, j, d])
    return acc + b.astype(np.int64)


def _random_case(rng, t, per_channel, f_shape, n_out, f_channel_dim):
    lo, hi = (0, 256) if t == Q8 else (-128, 128)
    zx, zo = int(rng.integers(lo, hi)), int(rng.integers(lo, hi))
    zf = 0 if per_channel else int(rng.integers(lo, hi))
    sx, so = 0.5 + rng.random(), 20.0 + 40 * rng.random()
    f_scales = tuple(float(np.float32(0.01 + rng.random())) for _ in range(n_out)) if per_channel \
        else (float(np.float32(0.01 + rng.random())),)
    f_vals = rng.integers(-127 if per_channel else lo, 128 if per_channel else hi, size=f_shape)
    qf = dict(channel_quant=ChannelQuant(f_scales, f_channel_dim)) if per_channel else dict(scale=f_scales[0],
                                                                                             zero_point=zf)
    b_scale = 0.0 if per_channel else float(np.float32(sx) * np.float32(f_scales[0]))
    bias = rng.integers(-3000, 3000, size=n_out)
    return dict(zx=zx, zo=zo, zf=zf, sx=sx, so=so, f_scales=f_scales * (n_out if not per_channel else 1),
                f_vals=f_vals, qf=qf, b_scale=b_scale, bias=bias, lo=lo, hi=hi)


def _run(op, t, per_channel, c, x_vals, x_shape, args, out_shape):
    b = ModelBuilder()
    x = b.input(t, x_shape, scale=c["sx"], zero_point=c["zx"])
    f = b.const(QPC if per_channel else t, c["f_vals"].shape, c["f_vals"], **c["qf"])
    bias = b.const(I32, (len(c["bias"]),), c["bias"], scale=c["b_scale"])
    ins = [x, f, bias] + [b.bool(a) if isinstance(a, bool) else b.i32(a) for a in args]
    y = b.output(t, out_shape, scale=c["so"], zero_point=c["zo"])
    b.operation(op, ins, [y])
    return execute(b.build(), [np.asarray(x_vals).astype(np.uint8 if t == Q8 else np.int8)])[0]


@pytest.mark.parametrize("t,per_channel", [(Q8, False), (Q8S, False), (Q8, True), (Q8S, True)],
                         ids=["quant8", "quant8_signed", "quant8_per_channel", "quant8_signed_per_channel"])
@pytest.mark.parametrize("groups", [1, 2], ids=["conv_2d", "grouped_2"])
def test_conv_matches_direct_loops(t, per_channel, groups):
    rng = np.random.default_rng(7 + groups + 10 * per_channel + (t == Q8S))
    o_, fh, fw, cin = 4, 3, 2, 4
    c = _random_case(rng, t, per_channel, (o_, fh, fw, cin // groups), o_, 0)
    x_vals = rng.integers(c["lo"], c["hi"], size=(2, 5, 6, cin))
    pads, strides, dil = (1, 2, 2, 0), (1, 2), (2, 1)   # (l, r, t, b), (w, h), (w, h)
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
    actual = _run(Op.DEPTHWISE_CONV_2D, t, per_channel, c, x_vals, x_vals.shape,
                  [*pads, *strides, m, 0, False, *dil], (2, oh, ow, cin * m))
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
    actual = _run(Op.TRANSPOSE_CONV_2D, t, per_channel, c, x_vals, x_vals.shape,
                  [*pads, *strides, 0, False], (2, oh, ow, o_))
    acc = _loop_transpose(x_vals - c["zx"], c["f_vals"] - c["zf"], c["bias"], pads, strides, oh, ow)
    np.testing.assert_array_equal(actual, _requant(acc, c["f_scales"], c["sx"], c["so"], c["zo"], t))


@pytest.mark.parametrize("t", [Q8, Q8S], ids=["quant8", "quant8_signed"])
def test_fully_connected_matches_direct_loops(t):
    rng = np.random.default_rng(5)
    c = _random_case(rng, t, False, (5, 12), 5, 0)
    x_vals = rng.integers(c["lo"], c["hi"], size=(3, 2, 6))
    actual = _run(Op.FULLY_CONNECTED, t, False, c, x_vals, x_vals.shape, [0], (3, 5))
    xo, wo = x_vals.reshape(3, 12) - c["zx"], c["f_vals"] - c["zf"]
    acc = np.array([[sum(int(xo[r, k]) * int(wo[u, k]) for k in range(12)) + int(c["bias"][u]) for u in range(5)]
                    for r in range(3)])
    np.testing.assert_array_equal(actual, _requant(acc, c["f_scales"], c["sx"], c["so"], c["zo"], t))


def test_large_accumulators_stay_exact():
    """K * 127 * 127 far above 2**24 forces the float64 matmul; the result must stay exact."""
    rng = np.random.default_rng(1)
    k = 2000
    c = _random_case(rng, Q8, False, (2, k), 2, 0)
    c["f_vals"] = rng.integers(254, 256, size=(2, k))          # offsets 126 or 127
    c["zf"] = 128
    c["qf"] = dict(scale=c["f_scales"][0], zero_point=128)
    c["zx"], c["so"] = 128, 2.0e5
    x_vals = np.full((1, k), 255)                               # offsets 127
    actual = _run(Op.FULLY_CONNECTED, Q8, False, c, x_vals, x_vals.shape, [0], (1, 2))
    acc = (x_vals - 128).astype(np.int64) @ (c["f_vals"] - 128).astype(np.int64).T + c["bias"]
    assert acc.max() > 1 << 24 and (acc % 2).any()             # float32 could not hold these
    expected = _requant(acc, c["f_scales"], c["sx"], c["so"], c["zo"], Q8)
    assert 0 < expected.min() and expected.max() < 255          # not saturated: the test bites
    np.testing.assert_array_equal(actual, expected)


# ---------------------------------------------------------------------------------------
# (d) AOSP golden vectors
# ---------------------------------------------------------------------------------------

def _vectors_root() -> Path:
    env = os.environ.get("NNCONFORM_VECTORS")
    return Path(env) if env else Path(__file__).resolve().parents[3] / "shared" / "aosp_vectors"


@pytest.mark.parametrize("op", MY_OPS)
def test_aosp_vectors(op):
    root = _vectors_root()
    if not root.is_dir():
        pytest.skip(f"AOSP vectors not found at {root} (set NNCONFORM_VECTORS)")
    from nnconform.vectors import check_case, load_cases
    registered = {t.name for t in load_all()}
    cases = [c for c in load_cases(root, ops=[op]) if set(c.operations) <= registered]
    assert cases, f"no runnable vectors use {op}"
    failures = []
    for case in cases:
        status, msg = check_case(case)
        if status != "pass":
            failures.append(f"{case.test_id}: {status}: {msg}")
    assert not failures, f"{len(failures)} of {len(cases)} failed:\n" + "\n".join(failures[:20])
