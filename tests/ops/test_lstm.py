"""LSTM, UNIDIRECTIONAL_SEQUENCE_LSTM, BIDIRECTIONAL_SEQUENCE_LSTM, QUANTIZED_16BIT_LSTM,
QUANTIZED_LSTM: hand-checked examples, signature validation, run-time checks, the int16
fixed-point helpers, AOSP vectors."""

import dataclasses

import numpy as np
import pytest
from helpers import assert_rejected, check_example, vector_cases, vectors_missing_reason

from nnconform.errors import OpFailure
from nnconform.ir import Lifetime, Model
from nnconform.ir import OperandType as T
from nnconform.reference.arith import fixedpoint16 as q16
from nnconform.reference.executor import execute
from nnconform.reference.ops import quantized_lstm as qlstm
from nnconform.reference.ops.registry import OpView, get_op
from nnconform.suites.examples.lstm import EXAMPLES

MY_OPS = {
    "LSTM",
    "UNIDIRECTIONAL_SEQUENCE_LSTM",
    "BIDIRECTIONAL_SEQUENCE_LSTM",
    "QUANTIZED_16BIT_LSTM",
    "QUANTIZED_LSTM",
}


# (a) hand-checked examples -------------------------------------------------------------


@pytest.mark.parametrize("ex", EXAMPLES, ids=lambda e: e.name)
def test_example(ex):
    check_example(ex)


# (b) validation --------------------------------------------------------------------------


def _example(name) -> Model:
    return next(e.model for e in EXAMPLES if e.name == name)


def _with_input(model: Model, k: int, **changes) -> Model:
    """``model`` with operation 0's input ``k`` operand changed (dims, type, value, ...)."""
    sg = model.main
    idx = sg.operations[0].inputs[k]
    ops = list(sg.operands)
    op = ops[idx]
    new = dataclasses.replace(op, **{key: v for key, v in changes.items() if key != "value"})
    if changes.get("value") is not None:
        v = np.asarray(changes["value"], dtype=new.info.dtype).reshape(() if new.info.is_scalar else new.dimensions)
        v.setflags(write=False)
        new = dataclasses.replace(new, value=v)
    elif "value" in changes:
        new = dataclasses.replace(new, value=None)
    ops[idx] = new
    return dataclasses.replace(model, main=dataclasses.replace(sg, operands=tuple(ops)))


def _omit(model: Model, k: int) -> Model:
    return _with_input(model, k, lifetime=Lifetime.NO_VALUE, value=None)


def _inputs(model: Model, keep: int) -> Model:
    sg = model.main
    op = dataclasses.replace(sg.operations[0], inputs=sg.operations[0].inputs[:keep])
    return dataclasses.replace(model, main=dataclasses.replace(sg, operations=(op,)))


PLAIN, CIFG = _example("lstm_plain_fp32"), _example("lstm_cifg_peephole_projection_clip_fp32")
LN = _example("lstm_layer_norm_fp32")
UNI, BI = _example("unidirectional_sequence_lstm_time_major_fp32"), _example("bidirectional_sequence_lstm_fp32")
BI_MERGE = _example("bidirectional_sequence_lstm_merge_outputs_fp16")
Q16M, QL = _example("quantized_16bit_lstm_bias_only"), _example("quantized_lstm_cifg_no_layer_norm")

BAD = [
    ("lstm_input_count", _inputs(PLAIN, 22), ["23 or 27 inputs"]),
    ("lstm_int32_input", _with_input(PLAIN, 0, type=T.TENSOR_INT32), ["input 0"]),
    ("lstm_fp16_clip_for_fp32", _with_input(PLAIN, 21, type=T.FLOAT16, value=0.0), ["input 21", "FLOAT32"]),
    ("lstm_activation_relu1", _with_input(PLAIN, 20, value=2), ["input 20", "activation"]),
    ("lstm_negative_cell_clip", _with_input(PLAIN, 21, value=-1.0), ["input 21", ">= 0"]),
    ("lstm_input_rank3", _with_input(PLAIN, 0, dimensions=(1, 1, 1)), ["input 0", "rank"]),
    ("lstm_half_cifg", _omit(PLAIN, 5), ["input 5", "CIFG"]),
    ("lstm_missing_forget_bias", _omit(PLAIN, 13), ["input 13", "required"]),
    ("lstm_projection_bias_alone", _omit(CIFG, 16), ["input 17", "projection"]),
    ("lstm_weight_shape", _with_input(PLAIN, 3, dimensions=(1, 2), value=[1.0, 2.0]), ["input 3", "shape"]),
    (
        "lstm_input_gate_bias_with_cifg",
        _with_input(CIFG, 12, lifetime=Lifetime.CONSTANT_COPY, value=[0.0]),
        ["input 12", "CIFG"],
    ),
    ("lstm_partial_peephole", _omit(CIFG, 10), ["input 11", "peephole"]),
    ("lstm_partial_layer_norm", _omit(LN, 24), ["input 26", "layer-norm"]),
    ("uni_input_count", _inputs(UNI, 27), ["28 inputs"]),
    ("uni_time_major_int", _with_input(UNI, 23, type=T.INT32, value=1), ["input 23", "BOOL"]),
    ("uni_rank2", _with_input(UNI, 0, dimensions=(2, 1)), ["input 0", "rank"]),
    (
        "bi_aux_weights_without_aux",
        _with_input(
            _with_input(BI, 41, lifetime=Lifetime.CONSTANT_COPY, value=[[0.0]]),
            45,
            lifetime=Lifetime.CONSTANT_COPY,
            value=[[0.0]],
        ),
        ["input 39", "aux"],
    ),
    ("bi_merge_with_two_outputs", _with_input(BI, 51, value=True), ["input 51", "merge_outputs"]),
    ("bi_fp16_clip_type", _with_input(BI_MERGE, 49, type=T.FLOAT32, value=0.0), ["input 49", "FLOAT16"]),
    ("q16_input_scale", _with_input(Q16M, 0, scale=0.01), ["input 0", "0.0078125", "scale"]),
    ("q16_weight_scale", _with_input(Q16M, 2, scale=0.5), ["input 2", "scale"]),
    ("q16_bias_scale", _with_input(Q16M, 9, scale=0.001), ["input 9", "bias"]),
    ("q16_cell_scale", _with_input(Q16M, 13, scale=2**-10), ["input 13", "2^-11"]),
    ("q16_input_type", _with_input(Q16M, 0, type=T.TENSOR_QUANT8_ASYMM_SIGNED), ["input 0"]),
    ("qlstm_cell_scale", _with_input(QL, 19, scale=2**-8), ["input 19", "2^-9"]),
    ("qlstm_missing_forget_weights", _omit(QL, 2), ["input 2", "required"]),
    ("qlstm_input_type", _with_input(QL, 0, type=T.TENSOR_QUANT8_ASYMM, zero_point=128), ["input 0"]),
    (
        "qlstm_input_gate_bias_with_cifg",
        _with_input(QL, 12, lifetime=Lifetime.CONSTANT_COPY, value=[0]),
        ["input 12", "CIFG"],
    ),
]


@pytest.mark.parametrize("model,fragments", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_validateassert_rejected(model, fragments):
    assert_rejected(model, *fragments)


def test_validate_accepts_examples():
    for e in EXAMPLES:
        get_op(e.model.main.operations[0].type).validate(OpView(e.model, e.model.main, 0))


# run-time checks (OP_FAILED) ----------------------------------------------------------------


def test_lstm_state_shape_checked_at_run_time():
    m = _with_input(PLAIN, 18, dimensions=(1, 0))  # unknown output-state width in the model
    with pytest.raises(OpFailure, match="output state in"):
        execute(m, [np.ones((1, 1), np.float32), np.ones((1, 2), np.float32), np.ones((1, 1), np.float32)])


def test_unidirectional_zero_steps_gives_empty_output():
    m = _with_input(UNI, 0, dimensions=(0, 1, 1))
    m = dataclasses.replace(
        m,
        main=dataclasses.replace(
            m.main,
            operands=tuple(
                dataclasses.replace(o, dimensions=(0, 1, 1)) if i == m.main.output_indexes[0] else o
                for i, o in enumerate(m.main.operands)
            ),
        ),
    )
    (y,) = execute(m, [np.zeros((0, 1, 1), np.float32), np.zeros((1, 1), np.float32), np.zeros((1, 1), np.float32)])
    assert y.shape == (0, 1, 1)


def test_activation_none_uses_cell_gate_as_the_reference_does():
    """Activation 0: the output multiplies o by the cell gate g (not c_new), see lstm_cell.py."""
    m = _with_input(PLAIN, 20, value=0)
    ex = next(e for e in EXAMPLES if e.name == "lstm_plain_fp32")
    _, h, c, out = execute(m, list(ex.inputs))
    # no activation: g = 0.5 (the raw cell pre-activation), c = 0.5 * 1 + 0.5 * 0.5, h = o * g
    np.testing.assert_allclose(c, [[0.75]], rtol=1e-6)
    np.testing.assert_allclose(out, [[0.25]], rtol=1e-6)


# int16 fixed-point helpers -----------------------------------------------------------------


def test_int16_fixed_point_tracks_float():
    q3 = np.arange(-32768, 32768, 7, dtype=np.int64)  # the whole Q3.12 range
    x = q3 / 4096.0
    np.testing.assert_allclose(q16.logistic16(q3, 3) / 32768, 1 / (1 + np.exp(-x)), atol=3e-4)
    # tanh's Newton division runs in Q2.13, so its result moves in steps of 4 raw units
    np.testing.assert_allclose(q16.tanh16(q3, 3) / 32768, np.tanh(x), atol=5e-4)
    for bits in (0, 4, 6):
        np.testing.assert_allclose(q16.tanh16(q3, bits) / 32768, np.tanh(q3 / 2.0 ** (15 - bits)), atol=5e-4)
    assert int(q16.logistic16(np.array([0]), 3)[0]) == 16384
    assert int(q16.tanh16(np.array([0]), 3)[0]) == 0


def test_inv_sqrt_multiplier():
    x = np.array([2, 3, 100, 12345, 1 << 20, (1 << 29) + 5, (1 << 31) - 1], np.int64)
    m, s = qlstm._inv_sqrt(x, -1)
    approx = m / 2.0**31 * 2.0**s  # s <= 0 after reverse_shift = -1
    np.testing.assert_allclose(approx, 1 / np.sqrt(x), rtol=1e-5)
    m, s = qlstm._inv_sqrt(np.array([0, 1]), -1)
    assert list(m) == [2**31 - 1] * 2 and list(s) == [0, 0]


# (c) AOSP vectors ----------------------------------------------------------------------------
# The lifetime variations wrap the op in dummy ADDs; those cases are included too.

_CASES = vector_cases(MY_OPS, also={"ADD"})


@pytest.mark.skipif(not _CASES, reason=vectors_missing_reason())
@pytest.mark.parametrize("case", _CASES, ids=lambda c: c.test_id)
def test_aosp_vector(case):
    from nnconform.cases.vectors import check_case

    status, message = check_case(case)
    assert status == "pass", message
