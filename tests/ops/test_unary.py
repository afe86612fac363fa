"""LOGISTIC, TANH, SOFTMAX, LOG_SOFTMAX, ABS, NEG, EXP, LOG, SQRT, RSQRT, SIN, FLOOR, ELU,
HARD_SWISH: hand-checked examples, signature validation, fixed-point helpers, AOSP vectors."""

import numpy as np
import pytest
from helpers import assert_rejected, check_example, vector_cases, vectors_missing_reason

from nnconform.errors import OpFailure
from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import fixedpoint as fx
from nnconform.reference.executor import execute
from nnconform.reference.ops.registry import OpView, get_op
from nnconform.suites.examples.unary import EXAMPLES

MY_OPS = {
    "LOGISTIC",
    "TANH",
    "SOFTMAX",
    "LOG_SOFTMAX",
    "ABS",
    "NEG",
    "EXP",
    "LOG",
    "SQRT",
    "RSQRT",
    "SIN",
    "FLOOR",
    "ELU",
    "HARD_SWISH",
}


# (a) hand-checked examples -------------------------------------------------------------


@pytest.mark.parametrize("ex", EXAMPLES, ids=lambda e: e.name)
def test_example(ex):
    check_example(ex)


# (b) validation --------------------------------------------------------------------------


def _model(op, in_t, out_t=None, dims=(2, 2), in_q=(0.0, 0), out_q=None, extra=()):
    b = ModelBuilder()
    x = b.input(in_t, dims, scale=in_q[0], zero_point=in_q[1])
    args = [x] + [mk(b) for mk in extra]
    oq = in_q if out_q is None else out_q
    y = b.output(out_t or in_t, dims, scale=oq[0], zero_point=oq[1])
    b.operation(op, args, [y])
    return b.build()


F32 = lambda v: lambda b: b.f32(v)
F16 = lambda v: lambda b: b.f16(v)
I32 = lambda v: lambda b: b.i32(v)

BAD = [
    ("logistic_int32", _model(Op.LOGISTIC, T.TENSOR_INT32), ["input 0"]),
    ("logistic_rank5", _model(Op.LOGISTIC, T.TENSOR_FLOAT32, dims=(1, 1, 1, 1, 2)), ["input 0", "rank"]),
    (
        "logistic_out_scale",
        _model(Op.LOGISTIC, T.TENSOR_QUANT8_ASYMM, in_q=(0.1, 0), out_q=(0.1, 0)),
        ["output 0", "scale"],
    ),
    (
        "logistic_signed_out_zp",
        _model(Op.LOGISTIC, T.TENSOR_QUANT8_ASYMM_SIGNED, in_q=(0.1, 0), out_q=(1 / 256, 0)),
        ["output 0", "-128"],
    ),
    ("tanh_type_mismatch", _model(Op.TANH, T.TENSOR_FLOAT32, T.TENSOR_FLOAT16), ["output 0"]),
    ("tanh_out_zp", _model(Op.TANH, T.TENSOR_QUANT8_ASYMM, in_q=(0.1, 128), out_q=(1 / 128, 0)), ["output 0", "128"]),
    ("softmax_missing_beta", _model(Op.SOFTMAX, T.TENSOR_FLOAT32), ["inputs"]),
    ("softmax_fp16_beta_fp32", _model(Op.SOFTMAX, T.TENSOR_FLOAT16, extra=[F32(1.0)]), ["input 1", "FLOAT16"]),
    ("softmax_axis_type", _model(Op.SOFTMAX, T.TENSOR_FLOAT32, extra=[F32(1.0), F32(0.0)]), ["input 2"]),
    ("softmax_beta_negative", _model(Op.SOFTMAX, T.TENSOR_FLOAT32, extra=[F32(-1.0)]), ["input 1", "beta"]),
    ("softmax_axis_range", _model(Op.SOFTMAX, T.TENSOR_FLOAT32, extra=[F32(1.0), I32(-3)]), ["input 2", "axis"]),
    ("softmax_int32", _model(Op.SOFTMAX, T.TENSOR_INT32, extra=[F32(1.0)]), ["input 0"]),
    (
        "softmax_quant_out",
        _model(Op.SOFTMAX, T.TENSOR_QUANT8_ASYMM, in_q=(0.1, 0), out_q=(1 / 256, 1), extra=[F32(1.0)]),
        ["output 0"],
    ),
    (
        "log_softmax_quant",
        _model(Op.LOG_SOFTMAX, T.TENSOR_QUANT8_ASYMM, in_q=(0.1, 0), extra=[F32(1.0), I32(0)]),
        ["input 0"],
    ),
    ("log_softmax_no_axis", _model(Op.LOG_SOFTMAX, T.TENSOR_FLOAT32, extra=[F32(1.0)]), ["inputs"]),
    ("log_softmax_axis_range", _model(Op.LOG_SOFTMAX, T.TENSOR_FLOAT32, extra=[F32(1.0), I32(2)]), ["input 2"]),
    ("log_softmax_fp16_beta", _model(Op.LOG_SOFTMAX, T.TENSOR_FLOAT16, extra=[F32(1.0), I32(0)]), ["input 1"]),
    ("abs_quant8", _model(Op.ABS, T.TENSOR_QUANT8_ASYMM, in_q=(0.5, 0)), ["input 0"]),
    ("exp_int32", _model(Op.EXP, T.TENSOR_INT32), ["input 0"]),
    ("neg_type_mismatch", _model(Op.NEG, T.TENSOR_INT32, T.TENSOR_FLOAT32), ["output 0"]),
    ("sqrt_two_inputs", _model(Op.SQRT, T.TENSOR_FLOAT32, extra=[F32(1.0)]), ["inputs"]),
    ("rsqrt_int32", _model(Op.RSQRT, T.TENSOR_INT32), ["input 0"]),
    (
        "rsqrt_quant8_to_signed",
        _model(Op.RSQRT, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, in_q=(0.5, 0)),
        ["output 0"],
    ),
    ("sqrt_quant8", _model(Op.SQRT, T.TENSOR_QUANT8_ASYMM, in_q=(0.5, 0)), ["input 0"]),
    ("floor_rank5", _model(Op.FLOOR, T.TENSOR_FLOAT16, dims=(1, 1, 1, 2, 2)), ["input 0", "rank"]),
    ("elu_alpha_int", _model(Op.ELU, T.TENSOR_FLOAT32, extra=[I32(1)]), ["input 1"]),
    ("elu_fp16_alpha_fp32", _model(Op.ELU, T.TENSOR_FLOAT16, extra=[F32(1.0)]), ["input 1"]),
    ("elu_quant", _model(Op.ELU, T.TENSOR_QUANT8_ASYMM, in_q=(0.5, 0), extra=[F32(1.0)]), ["input 0"]),
    ("hard_swish_int32", _model(Op.HARD_SWISH, T.TENSOR_INT32), ["input 0"]),
    (
        "hard_swish_type_mismatch",
        _model(Op.HARD_SWISH, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, in_q=(0.5, 0)),
        ["output 0"],
    ),
]


@pytest.mark.parametrize("model,fragments", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_validateassert_rejected(model, fragments):
    assert_rejected(model, *fragments)


def test_validate_accepts_valid_signatures():
    good = [
        _model(Op.LOGISTIC, T.TENSOR_QUANT8_ASYMM_SIGNED, in_q=(0.1, 3), out_q=(1 / 256, -128)),
        _model(Op.TANH, T.TENSOR_QUANT8_ASYMM, in_q=(0.1, 3), out_q=(1 / 128, 128)),
        _model(Op.SOFTMAX, T.TENSOR_FLOAT16, extra=[F16(1.0), I32(-2)]),
        _model(Op.LOG_SOFTMAX, T.TENSOR_FLOAT32, extra=[F32(-1.0), I32(1)]),
        _model(Op.ABS, T.TENSOR_INT32),
        _model(Op.NEG, T.TENSOR_INT32),
        # RSQRT of quant8 / quant8_signed (feature level 7): the output has its own scale and zero point
        _model(Op.RSQRT, T.TENSOR_QUANT8_ASYMM, in_q=(0.25, 3), out_q=(0.01, 200)),
        _model(Op.RSQRT, T.TENSOR_QUANT8_ASYMM_SIGNED, in_q=(0.25, -3), out_q=(0.01, -100), dims=(1, 1, 1, 1, 2)),
        _model(Op.ELU, T.TENSOR_FLOAT16, extra=[F16(0.5)]),
        _model(Op.HARD_SWISH, T.TENSOR_QUANT8_ASYMM, in_q=(0.1, 3), out_q=(0.05, 10), dims=(1, 1, 1, 1, 2)),
    ]
    for m in good:
        get_op(m.main.operations[0].type).validate(OpView(m, m.main, 0))


# run-time failures the reference reports as OP_FAILED --------------------------------------


def test_hard_swish_refuses_output_multiplier_at_least_one():
    m = _model(Op.HARD_SWISH, T.TENSOR_QUANT8_ASYMM, dims=(2,), in_q=(1.0, 0), out_q=(1 / 128, 0))
    with pytest.raises(OpFailure, match="HARD_SWISH"):
        execute(m, [np.array([1, 2], np.uint8)])


def test_softmax_runtime_beta_checked():
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, (2,))
    beta = b.input(T.FLOAT32)
    b.operation(Op.SOFTMAX, [x, beta], [b.output(T.TENSOR_FLOAT32, (2,))])
    with pytest.raises(OpFailure, match="beta"):
        execute(b.build(), [np.array([1, 2], np.float32), np.float32(0)])


# zero-sized tensors ----------------------------------------------------------------------
# In NNAPI these only arise as intermediates (e.g. after BOX_WITH_NMS_LIMIT keeps no box);
# the executor accepts them as inputs, which exercises the same operation code path.


@pytest.mark.parametrize(
    "model",
    [
        _model(Op.LOGISTIC, T.TENSOR_QUANT8_ASYMM, dims=(0, 3), in_q=(1 / 16, 128), out_q=(1 / 256, 0)),
        _model(Op.TANH, T.TENSOR_FLOAT32, dims=(0, 3)),
        _model(
            Op.SOFTMAX,
            T.TENSOR_QUANT8_ASYMM_SIGNED,
            dims=(0, 4),
            in_q=(0.25, 0),
            out_q=(1 / 256, -128),
            extra=[F32(1.0)],
        ),
        _model(Op.HARD_SWISH, T.TENSOR_QUANT8_ASYMM, dims=(0,), in_q=(0.078125, 128)),
    ],
    ids=["logistic", "tanh", "softmax", "hard_swish"],
)
def test_zero_sized_allowed(model):
    op = model.main.operands[model.main.input_indexes[0]]
    x = np.zeros(op.dimensions, op.info.dtype)
    (y,) = execute(model, [x])
    assert y.shape == op.dimensions and y.dtype == op.info.dtype


@pytest.mark.parametrize(
    "model",
    [
        _model(Op.LOG_SOFTMAX, T.TENSOR_FLOAT32, dims=(0, 2), extra=[F32(1.0), I32(-1)]),
        _model(Op.EXP, T.TENSOR_FLOAT32, dims=(0,)),
        _model(Op.NEG, T.TENSOR_INT32, dims=(2, 0)),
        _model(Op.ELU, T.TENSOR_FLOAT16, dims=(0, 1), extra=[F16(1.0)]),
    ],
    ids=["log_softmax", "exp", "neg", "elu"],
)
def test_zero_sized_refused(model):
    op = model.main.operands[model.main.input_indexes[0]]
    with pytest.raises(OpFailure, match="zero-sized"):
        execute(model, [np.zeros(op.dimensions, op.info.dtype)])


# fixed-point helpers -----------------------------------------------------------------------


def test_fixed_point_constants():
    assert int(fx.exp_on_negative_values(np.array([0]), 5)[0]) == 2**31 - 1
    assert int(fx.fixed_logistic(np.array([0]), 4)[0]) == 1 << 30
    assert int(fx.fixed_tanh(np.array([0]), 4)[0]) == 0


def test_fixed_point_functions_track_float():
    q4 = np.arange(-(15 << 27), 15 << 27, 1 << 21, dtype=np.int64)  # [-15, 15) in Q4.27
    x = q4 / float(1 << 27)
    np.testing.assert_allclose(fx.fixed_logistic(q4, 4) / 2**31, 1 / (1 + np.exp(-x)), atol=2e-6)
    np.testing.assert_allclose(fx.fixed_tanh(q4, 4) / 2**31, np.tanh(x), atol=2e-6)
    neg = q4[q4 <= 0]
    np.testing.assert_allclose(fx.exp_on_negative_values(neg, 4) / 2**31, np.exp(neg / 2**27), atol=2e-6)
    q0 = np.arange(0, 2**31 - 1, 1 << 24, dtype=np.int64)
    np.testing.assert_allclose(fx.one_over_one_plus_x_for_x_in_0_1(q0) / 2**31, 1 / (1 + q0 / 2**31), atol=2e-6)


@pytest.mark.parametrize(
    "op,t,out_q,f,step",
    [
        (Op.LOGISTIC, T.TENSOR_QUANT8_ASYMM, (1 / 256, 0), lambda x: 1 / (1 + np.exp(-x)), 256),
        (Op.LOGISTIC, T.TENSOR_QUANT8_ASYMM_SIGNED, (1 / 256, -128), lambda x: 1 / (1 + np.exp(-x)), 256),
        (Op.TANH, T.TENSOR_QUANT8_ASYMM, (1 / 128, 128), np.tanh, 128),
        (Op.TANH, T.TENSOR_QUANT8_ASYMM_SIGNED, (1 / 128, 0), np.tanh, 128),
    ],
)
@pytest.mark.parametrize("in_q", [(0.02, 100), (0.1, 7), (0.5, -20)])
def test_quant_activation_all_codes_within_one_step(op, t, out_q, f, step, in_q):
    signed = t == T.TENSOR_QUANT8_ASYMM_SIGNED
    zp = in_q[1] if signed else in_q[1] + 128
    codes = np.arange(-128, 128) if signed else np.arange(256)
    m = _model(op, t, dims=(256,), in_q=(in_q[0], zp), out_q=out_q)
    got = execute(m, [codes.astype(np.int8 if signed else np.uint8)])[0].astype(np.int64)
    ideal = np.clip(np.round(f((codes - zp) * in_q[0]) * step) + out_q[1], codes[0], codes[-1])
    assert np.abs(got - ideal).max() <= 1


@pytest.mark.parametrize("t", [T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED])
@pytest.mark.parametrize("in_q,out_q", [((0.02, 5), (0.01, 0)), ((0.5, 100), (1 / 256, 3)), ((0.1, 0), (0.05, 17))])
def test_quant_rsqrt_every_code_matches_the_float_formula(t, in_q, out_q):
    """Every stored input code against 1/sqrt computed in float64 from the dequantised value:
    equal up to one step where the float32 quotient could fall on the other side of a .5, and
    the saturated codes (zero point: +inf; below it: NaN) at the type's maximum."""
    signed = t == T.TENSOR_QUANT8_ASYMM_SIGNED
    codes = np.arange(-128, 128) if signed else np.arange(256)
    zp_in, zp_out = (in_q[1] - 128, out_q[1] - 128) if signed else (in_q[1], out_q[1])
    m = _model(Op.RSQRT, t, dims=(codes.size,), in_q=(in_q[0], zp_in), out_q=(out_q[0], zp_out))
    got = execute(m, [codes.astype(np.int8 if signed else np.uint8)])[0].astype(np.int64)
    real = (codes - zp_in) * in_q[0]
    pos = real > 0
    ideal = np.clip(np.round(1 / np.sqrt(real[pos]) / out_q[0]) + zp_out, codes[0], codes[-1])
    assert np.abs(got[pos] - ideal).max() <= 1
    assert (got[~pos] == codes[-1]).all()


# (c) AOSP vectors ----------------------------------------------------------------------------

_CASES = vector_cases(MY_OPS)


@pytest.mark.skipif(not _CASES, reason=vectors_missing_reason())
@pytest.mark.parametrize("case", _CASES, ids=lambda c: c.test_id)
def test_aosp_vector(case):
    from nnconform.cases.vectors import check_case

    status, message = check_case(case)
    assert status == "pass", message
