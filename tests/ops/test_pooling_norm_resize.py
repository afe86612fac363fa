"""AVERAGE/MAX/L2_POOL_2D, L2_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION, INSTANCE_NORMALIZATION,
RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR: hand-checked examples, signature validation, and the
AOSP golden vectors that use only these operations."""

import numpy as np
import pytest
from helpers import assert_examples_cover, assert_vector_passes, check_example, vector_params

from nnconform.errors import OpFailure, ValidationError
from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.executor import execute
from nnconform.reference.ops.l2_normalization import inv_sqrt_multiplier
from nnconform.reference.ops.registry import OpView, get_op
from nnconform.suites.examples.pooling_norm_resize import EXAMPLES

OPS = {
    "AVERAGE_POOL_2D",
    "MAX_POOL_2D",
    "L2_POOL_2D",
    "L2_NORMALIZATION",
    "LOCAL_RESPONSE_NORMALIZATION",
    "INSTANCE_NORMALIZATION",
    "RESIZE_BILINEAR",
    "RESIZE_NEAREST_NEIGHBOR",
}
F32, F16, U8, I8 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED


# --- (a) hand-checked examples ---------------------------------------------------------


@pytest.mark.parametrize("ex", EXAMPLES, ids=lambda e: e.name)
def test_example(ex):
    check_example(ex)  # an expect-failure example must be rejected


def test_every_op_and_type_has_an_example():
    assert {name for e in EXAMPLES for name in e.operations} == OPS
    assert_examples_cover(OPS, EXAMPLES)


def test_inv_sqrt_multiplier_is_accurate():
    sums = np.array([2, 3, 25, 100, 12345, 1 << 28, (1 << 31) - 1])
    mult, shift = inv_sqrt_multiplier(sums)
    approx = mult * np.exp2(shift.astype(np.float64) - 31)
    np.testing.assert_allclose(approx * np.sqrt(sums), 1.0, rtol=1e-5)
    # 0 and 1 are both treated as 1 (so an all-zero slice normalises to zero).
    mult, shift = inv_sqrt_multiplier(np.array([0, 1]))
    assert mult.tolist() == [2**31 - 1] * 2 and shift.tolist() == [0, 0]


def test_pool_nchw_matches_nhwc():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 6, 3)).astype(np.float32)
    for op in (Op.AVERAGE_POOL_2D, Op.MAX_POOL_2D, Op.L2_POOL_2D):
        outs = []
        for nchw in (False, True):
            b = ModelBuilder()
            dims = [2, 3, 5, 6] if nchw else [2, 5, 6, 3]
            xi = b.input(F32, dims)
            y = b.output(F32, [0, 0, 0, 0])
            b.operation(op, [xi] + [b.i32(v) for v in (1, 2, 2, 3, 2, 0)] + [b.bool(nchw)], [y])
            got = execute(b.build(), [x.transpose(0, 3, 1, 2) if nchw else x])[0]
            outs.append(got.transpose(0, 2, 3, 1) if nchw else got)
        assert outs[0].shape == (2, 3, 3, 3)
        np.testing.assert_allclose(outs[0], outs[1], rtol=1e-6)


def test_average_pool_matches_brute_force_with_explicit_padding():
    # Independent check: average each window's in-bounds pixels with plain slicing.
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 5, 4, 2)).astype(np.float32)
    pl, pr, pt, pb, sw, sh, fw, fh = 1, 2, 2, 1, 2, 1, 3, 3
    b = ModelBuilder()
    xi = b.input(F32, x.shape)
    b.operation(
        Op.AVERAGE_POOL_2D,
        [xi] + [b.i32(v) for v in (pl, pr, pt, pb, sw, sh, fw, fh, 0)],
        [b.output(F32, [0, 0, 0, 0])],
    )
    got = execute(b.build(), [x])[0]
    out_h, out_w = (5 - fh + sh + pt + pb) // sh, (4 - fw + sw + pl + pr) // sw
    assert got.shape == (1, out_h, out_w, 2)
    for oy in range(out_h):
        for ox in range(out_w):
            y0, x0 = oy * sh - pt, ox * sw - pl
            win = x[0, max(y0, 0) : max(y0 + fh, 0), max(x0, 0) : max(x0 + fw, 0)]
            np.testing.assert_allclose(got[0, oy, ox], win.mean(axis=(0, 1)), rtol=1e-5)


def test_resize_output_shape_from_scale_and_unknown_dims():
    b = ModelBuilder()
    x = b.input(F32, [1, 3, 5, 1])
    y = b.output(F32, [0, 0, 0, 0])
    b.operation(Op.RESIZE_BILINEAR, [x, b.f32(0.5), b.f32(1.4)], [y])
    got = execute(b.build(), [np.zeros((1, 3, 5, 1), np.float32)])[0]
    assert got.shape == (1, 4, 2, 1)  # floor(3 * 1.4) = 4, floor(5 * 0.5) = 2


@pytest.mark.parametrize(
    "op, params, out_dims",
    [
        (Op.AVERAGE_POOL_2D, [2, 1, 1, 2, 2, 0, True], (0, 1, 1, 1)),
        (Op.MAX_POOL_2D, [1, 1, 1, 2, 2, 0, True], (0, 1, 2, 2)),
        (Op.L2_POOL_2D, [2, 1, 1, 1, 1, 0, True], (0, 1, 2, 2)),
        (Op.RESIZE_BILINEAR, [3, 3, True], (0, 1, 3, 3)),
        (Op.RESIZE_NEAREST_NEIGHBOR, [1, 1, True], (0, 1, 1, 1)),
    ],
)
def test_zero_batch(op, params, out_dims):
    # NNAPI allows a zero batch when an earlier operation produces it (request inputs must be
    # fully specified), so this runs on the executor without request validation.
    b = ModelBuilder()
    x = b.input(F32, [0, 1, 2, 2])
    consts = [b.bool(p) if isinstance(p, bool) else b.i32(p) for p in params]
    b.operation(op, [x, *consts], [b.output(F32, [0, 0, 0, 0])])
    got = execute(b.build(), [np.zeros((0, 1, 2, 2), np.float32)])[0]
    assert got.shape == out_dims and got.dtype == np.float32


def test_pool_filter_larger_than_padded_input_fails():
    b = ModelBuilder()
    x = b.input(F32, [1, 2, 2, 1])
    b.operation(Op.MAX_POOL_2D, [x] + [b.i32(v) for v in (2, 1, 1, 3, 3, 0)], [b.output(F32, [0, 0, 0, 0])])
    with pytest.raises(OpFailure, match="MAX_POOL_2D"):
        execute(b.build(), [np.zeros((1, 2, 2, 1), np.float32)])


# --- (b) validation rejects bad uses --------------------------------------------------------


def _reject(model, match, where):
    op = model.main.operations[0]
    with pytest.raises(ValidationError) as info:
        get_op(op.type).validate(OpView(model, model.main, 0))
    msg = str(info.value)
    assert op.name in msg, msg
    assert where in msg, msg
    assert match in msg, msg


def _pool_model(op, t=F32, params=(2, 1, 1, 2, 2, 0), out_scale=None, n_layout=None, scale=0.5, zp=0):
    q = dict(scale=scale, zero_point=zp) if t in (U8, I8) else {}
    qo = dict(q, scale=out_scale) if out_scale is not None else q
    b = ModelBuilder()
    x = b.input(t, [1, 4, 4, 1], **q)
    ins = [x] + [b.i32(v) for v in params]
    if n_layout is not None:
        ins.append(b.bool(n_layout))
    b.operation(op, ins, [b.output(t, [0, 0, 0, 0], **qo)])
    return b.build()


def test_pool_rejects_bad_padding_scheme():
    _reject(_pool_model(Op.AVERAGE_POOL_2D, params=(3, 1, 1, 2, 2, 0)), "padding scheme", "input 1")


def test_pool_rejects_padding_not_smaller_than_filter():
    _reject(_pool_model(Op.MAX_POOL_2D, params=(2, 0, 0, 0, 1, 1, 2, 2, 0)), "filter width", "input 7")


def test_pool_rejects_zero_stride():
    _reject(_pool_model(Op.AVERAGE_POOL_2D, params=(2, 0, 1, 2, 2, 0)), "stride width", "input 2")


def test_pool_rejects_bad_activation():
    _reject(_pool_model(Op.MAX_POOL_2D, params=(2, 1, 1, 2, 2, 4)), "activation", "input 6")


def test_pool_rejects_wrong_input_count():
    _reject(_pool_model(Op.AVERAGE_POOL_2D, params=(0, 0, 0, 0, 1, 1, 2, 2)), "takes 7 or 8 or 10 or 11", "")


def test_l2_pool_rejects_quant8():
    _reject(_pool_model(Op.L2_POOL_2D, t=U8), "TENSOR_FLOAT32 or TENSOR_FLOAT16", "input 0")


def test_pool_rejects_requantising_output():
    _reject(_pool_model(Op.AVERAGE_POOL_2D, t=I8, out_scale=0.25), "scale/zero point", "output 0")


def test_pool_rejects_int_layout_flag():
    m = _pool_model(Op.MAX_POOL_2D, params=(2, 1, 1, 2, 2, 0, 1))
    _reject(m, "must be BOOL", "input 7")


def _l2norm_model(t, out_scale, out_zp, axis=None, dims=(2, 3)):
    b = ModelBuilder()
    x = b.input(t, dims, scale=0.1, zero_point=0)
    ins = [x] if axis is None else [x, b.i32(axis)]
    b.operation(Op.L2_NORMALIZATION, ins, [b.output(t, dims, scale=out_scale, zero_point=out_zp)])
    return b.build()


def test_l2_normalization_rejects_output_quant():
    _reject(_l2norm_model(U8, 1 / 128, 0), "zero point 128", "output 0")
    _reject(_l2norm_model(I8, 1 / 64, 0), "scale 1/128", "output 0")


def test_l2_normalization_rejects_axis_out_of_range():
    _reject(_l2norm_model(I8, 1 / 128, 0, axis=2), "axis", "input 1")


def test_l2_normalization_rejects_rank_5():
    b = ModelBuilder()
    x = b.input(F32, [1, 1, 1, 1, 2])
    b.operation(Op.L2_NORMALIZATION, [x], [b.output(F32, [1, 1, 1, 1, 2])])
    _reject(b.build(), "rank", "input 0")


def _lrn_model(t=F32, scalar=None, axis=None):
    b = ModelBuilder()
    mk = {T.FLOAT32: b.f32, T.FLOAT16: b.f16}[scalar or T.FLOAT32]
    x = b.input(t, [1, 1, 1, 4], scale=0.5 if t == U8 else 0.0)
    ins = [x, b.i32(1), mk(1.0), mk(1.0), mk(0.5)] + ([] if axis is None else [b.i32(axis)])
    b.operation(Op.LOCAL_RESPONSE_NORMALIZATION, ins, [b.output(t, [1, 1, 1, 4], scale=0.5 if t == U8 else 0.0)])
    return b.build()


def test_lrn_rejects_quant8():
    _reject(_lrn_model(t=U8), "must be TENSOR_FLOAT32 or TENSOR_FLOAT16", "input 0")


def test_lrn_rejects_mismatched_scalar_type():
    _reject(_lrn_model(t=F32, scalar=T.FLOAT16), "must be FLOAT32", "input 2")


def test_lrn_rejects_axis_out_of_range():
    _reject(_lrn_model(axis=-5), "axis", "input 5")


def test_instance_normalization_rejects_missing_layout_and_rank():
    b = ModelBuilder()
    x = b.input(F32, [1, 2, 2, 1])
    b.operation(Op.INSTANCE_NORMALIZATION, [x, b.f32(1), b.f32(0), b.f32(1e-5)], [b.output(F32, [1, 2, 2, 1])])
    _reject(b.build(), "takes 5 inputs", "")
    b = ModelBuilder()
    x = b.input(F32, [2, 2, 1])
    b.operation(
        Op.INSTANCE_NORMALIZATION, [x, b.f32(1), b.f32(0), b.f32(1e-5), b.bool(False)], [b.output(F32, [2, 2, 1])]
    )
    _reject(b.build(), "rank", "input 0")


def _resize_model(op, t=F32, size=(T.INT32, 3, 3), flags=(False,), out_zp=0):
    b = ModelBuilder()
    q = dict(scale=0.5, zero_point=0) if t in (U8, I8) else {}
    x = b.input(t, [1, 2, 2, 1], **q)
    st, w, h = size
    size_ops = [b.const(st, (), w), b.const(st, (), h)]
    ins = [x, *size_ops] + [b.bool(f) for f in flags]
    b.operation(op, ins, [b.output(t, [0, 0, 0, 0], **(dict(q, zero_point=out_zp) if q else {}))])
    return b.build()


def test_resize_rejects_align_corners_with_half_pixel():
    _reject(_resize_model(Op.RESIZE_BILINEAR, flags=(False, True, True)), "align_corners", "input 5")


def test_resize_rejects_fp16_scale_for_fp32():
    _reject(_resize_model(Op.RESIZE_BILINEAR, size=(T.FLOAT16, 1.5, 1.5)), "INT32 or FLOAT32", "input 2")


def test_resize_nearest_requires_layout_flag():
    _reject(_resize_model(Op.RESIZE_NEAREST_NEIGHBOR, flags=()), "takes 4 or 5 or 6 inputs", "")


def test_resize_rejects_nonpositive_size():
    _reject(_resize_model(Op.RESIZE_NEAREST_NEIGHBOR, size=(T.INT32, 0, 3)), "output width", "input 1")


def test_resize_rejects_requantising_output():
    _reject(_resize_model(Op.RESIZE_BILINEAR, t=U8, out_zp=3), "scale/zero point", "output 0")


# --- (c) AOSP golden vectors ------------------------------------------------------------------


@pytest.mark.parametrize("case", vector_params(OPS, also={"ADD"}))
def test_aosp_vector(case):
    assert_vector_passes(case)
