"""ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM, POW, PRELU: hand-checked examples, signature
validation, and the AOSP golden vectors that use only these operations."""

import numpy as np
import pytest
from helpers import assert_vector_passes, check_example, vector_params

from nnconform.errors import OpFailure, ValidationError
from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith.broadcast import broadcast_shape
from nnconform.reference.executor import execute
from nnconform.reference.ops.registry import OpView, get_op
from nnconform.suites.examples.arithmetic import EXAMPLES

OPS = {"ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "POW", "PRELU"}


# --- (a) hand-checked examples ---------------------------------------------------------


@pytest.mark.parametrize("ex", EXAMPLES, ids=lambda e: e.name)
def test_example(ex):
    check_example(ex)  # an expect-failure example must be rejected


def test_examples_cover_every_op():
    assert {name for e in EXAMPLES for name in e.operations} == OPS


# --- broadcasting helper -----------------------------------------------------------------


@pytest.mark.parametrize(
    "a, b, out",
    [
        ((4, 1, 2), (5, 4, 3, 1), (5, 4, 3, 2)),  # NeuralNetworks.h's example
        ((2, 3), (3,), (2, 3)),
        ((0, 2), (1, 2), (0, 2)),  # zero-sized is compatible with 1 ...
        ((0, 2), (0, 1), (0, 2)),  # ... and with 0
        ((2, 3), (2,), None),
        ((0, 2), (3, 2), None),
    ],
)
def test_broadcast_shape(a, b, out):
    assert broadcast_shape(a, b) == out


def test_runtime_broadcast_mismatch_fails():
    # Unknown model dims; the actual shapes do not broadcast.
    b = ModelBuilder()
    x, y = b.input(T.TENSOR_FLOAT32, [0, 0]), b.input(T.TENSOR_FLOAT32, [0])
    b.operation(Op.ADD, [x, y, b.i32(0)], [b.output(T.TENSOR_FLOAT32, [0, 0])])
    with pytest.raises(OpFailure, match="ADD.*broadcast"):
        execute(b.build(), [np.zeros((2, 3), np.float32), np.zeros(2, np.float32)])


def test_zero_sized_batch_skips_computation():
    # Requests may not carry zero-sized inputs (the driver rejects them), so this runs the
    # executor directly.  [0,2] + [1,2] -> [0,2]; the quantised scales here would fail the
    # multiplier check (output ratio >= 1), but the reference skips zero-sized outputs first.
    b = ModelBuilder()
    x = b.input(T.TENSOR_QUANT8_ASYMM, [0, 2], scale=1.0)
    y = b.input(T.TENSOR_QUANT8_ASYMM, [1, 2], scale=1.0)
    b.operation(Op.ADD, [x, y, b.i32(0)], [b.output(T.TENSOR_QUANT8_ASYMM, [0, 2], scale=1e-9)])
    (out,) = execute(b.build(), [np.zeros((0, 2), np.uint8), np.ones((1, 2), np.uint8)])
    assert out.shape == (0, 2) and out.dtype == np.uint8


def test_int32_activation_fails_at_run_time():
    b = ModelBuilder()
    x, y, act = b.input(T.TENSOR_INT32, [2]), b.input(T.TENSOR_INT32, [2]), b.input(T.INT32)
    b.operation(Op.MUL, [x, y, act], [b.output(T.TENSOR_INT32, [2])])
    with pytest.raises(OpFailure, match="MUL.*NONE"):
        execute(b.build(), [np.ones(2, np.int32), np.ones(2, np.int32), np.int32(1)])


# --- (b) validation rejects bad uses --------------------------------------------------------


def _model(op, types, dims, out_type=None, out_dims=None, act=0, scales=None, extra=0):
    b = ModelBuilder()
    scales = scales or [(0.0, 0)] * 3
    ins = [b.input(t, d, scale=s, zero_point=z) for t, d, (s, z) in zip(types, dims, scales)]
    if act is not None:
        ins.append(b.i32(act))
    ins += [b.i32(0) for _ in range(extra)]
    out = b.output(out_type or types[0], out_dims or dims[0], scale=scales[2][0], zero_point=scales[2][1])
    b.operation(op, ins, [out])
    return b.build()


def _reject(model, match):
    m = model
    op = m.main.operations[0]
    with pytest.raises(ValidationError) as info:
        get_op(op.type).validate(OpView(m, m.main, 0))
    msg = str(info.value)
    assert op.name in msg, msg
    assert match in msg, msg


F32, I32, Q8 = T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM


def test_reject_mixed_input_types():
    _reject(_model(Op.ADD, [F32, I32], [[2], [2]]), "input 1")


def test_reject_output_type():
    _reject(_model(Op.SUB, [F32, F32], [[2], [2]], out_type=I32), "output 0")


def test_reject_activation_out_of_range():
    _reject(_model(Op.MUL, [F32, F32], [[2], [2]], act=4), "input 2")


def test_reject_int32_with_activation():
    _reject(_model(Op.ADD, [I32, I32], [[2], [2]], act=1), "input 2")


def test_reject_rank_5():
    _reject(_model(Op.ADD, [F32, F32], [[1, 1, 1, 1, 2], [2]]), "input 0")


def test_reject_incompatible_dims():
    _reject(_model(Op.DIV, [F32, F32], [[2, 3], [2]]), "input 1")


def test_reject_missing_activation():
    _reject(_model(Op.ADD, [F32, F32], [[2], [2]], act=None), "takes 3 inputs")


def test_reject_mul_quant8_output_scale():
    _reject(_model(Op.MUL, [Q8, Q8], [[2], [2]], scales=[(0.5, 0), (0.5, 0), (0.25, 0)]), "output 0")


def test_accept_mul_quant8_signed_any_scale():
    # HAL 1.3's validation has no scale rule for the signed type (execution enforces < 1).
    m = _model(Op.MUL, [T.TENSOR_QUANT8_ASYMM_SIGNED] * 2, [[2], [2]], scales=[(0.5, 0), (0.5, 0), (0.25, 0)])
    get_op(Op.MUL).validate(OpView(m, m.main, 0))
    with pytest.raises(OpFailure, match="MUL"):
        execute(m, [np.ones(2, np.int8), np.ones(2, np.int8)])


def test_reject_quant_div():
    _reject(_model(Op.DIV, [Q8, Q8], [[2], [2]], scales=[(1.0, 0)] * 3), "input 0")


@pytest.mark.parametrize("op", [Op.MAXIMUM, Op.MINIMUM, Op.POW, Op.PRELU])
def test_reject_two_input_ops_with_activation(op):
    _reject(_model(op, [F32, F32], [[2], [2]], act=0), "takes 2 inputs")


@pytest.mark.parametrize("op", [Op.POW, Op.PRELU])
def test_reject_int32_for_float_or_quant_only_ops(op):
    _reject(_model(op, [I32, I32], [[2], [2]], act=None), "input 0")


def test_reject_maximum_mixed_types():
    _reject(_model(Op.MAXIMUM, [F32, T.TENSOR_FLOAT16], [[2], [2]], act=None), "input 1")


# --- (c) AOSP golden vectors -----------------------------------------------------------------


@pytest.mark.parametrize("case", vector_params(OPS))
def test_aosp_vector(case):
    assert_vector_passes(case)


def test_quant_add_whose_rescale_fails_fails_every_run_of_one_executor():
    # The multipliers are worked out once per model step (OpContext.remember); a failing
    # build stores nothing, so the failure is the same on each run, never a stale success.
    from nnconform.errors import OpFailure
    from nnconform.ir import ModelBuilder
    from nnconform.ir import OperandType as T
    from nnconform.ir import OperationType as Op
    from nnconform.reference.executor import Executor

    b = ModelBuilder()
    x = b.input(T.TENSOR_QUANT8_ASYMM, [2, 2], scale=1.0, zero_point=0)
    y = b.input(T.TENSOR_QUANT8_ASYMM, [2, 2], scale=1.0, zero_point=0)
    o = b.output(T.TENSOR_QUANT8_ASYMM, [2, 2], scale=1e-7, zero_point=0)
    b.operation(Op.ADD, [x, y, b.i32(0)], [o])
    ex = Executor(b.build())
    for _ in range(3):
        with pytest.raises(OpFailure, match="output rescale factor .* must be in"):
            ex.run([np.ones((2, 2), np.uint8)] * 2)
