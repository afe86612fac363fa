"""The onnxruntime adapter's IF (ONNX If) and WHILE (ONNX Loop): every control-flow example
against the reference, the support rule (an IF/WHILE is supported only with every operation
of its subgraphs), the loop timeout, the deadline and release stopping a running Loop, and the
NoopElimination work-around (drivers/onnxruntime/control_flow.py)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

pytest.importorskip("onnx", reason="onnxruntime driver needs the 'onnx' extra: pip install nnconform[onnx]")
pytest.importorskip("onnxruntime", reason="onnxruntime driver needs the 'onnx' extra: pip install nnconform[onnx]")

from nnconform.driver import DriverError, ErrorStatus
from nnconform.drivers.onnxruntime import OnnxRuntimeDevice
from nnconform.ir import Model, ModelBuilder, Request
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.executor import execute as reference
from nnconform.suites.examples import control_flow as cfx
from nnconform.verdict.runner import PASS, SKIP, run_case


@pytest.fixture(scope="module")
def device() -> OnnxRuntimeDevice:
    return OnnxRuntimeDevice()


# What the adapter leaves unsupported among the examples, and why (both are outside IF/WHILE:
# ONNX has no 16-bit quantised tensor the adapter maps, and its FILL needs a constant value).
UNSUPPORTED_EXAMPLES = {"quant16": "TENSOR_QUANT16", "if_scalar": "(FILL): input 1 (a parameter) is not a constant"}


@pytest.mark.parametrize("example", cfx.EXAMPLES, ids=[e.name for e in cfx.EXAMPLES])
def test_control_flow_example_matches_reference(device, example):
    outcome = run_case(device, example.model, example.inputs, example.outputs, expect_failure=example.expect_failure)
    known = [why for key, why in UNSUPPORTED_EXAMPLES.items() if key in example.name]
    if known:
        assert outcome.outcome == SKIP, outcome.message
        assert any(why in r for r in device.unsupported_reasons(example.model) for why in known)
    else:
        assert outcome.outcome == PASS, outcome.message
        if not example.expect_failure:
            assert device.supported_operations(example.model) == [True] * len(example.model.main.operations)


def _if_with_branch_op(op_in_then) -> "tuple":
    """z = IF(c) then op_in_then(x) else x + 1, x and z float32 [2]."""
    b = ModelBuilder("if_support_rule")
    then = b.subgraph("then")
    tx = then.input(T.TENSOR_FLOAT32, (2,))
    op_in_then(then, tx, then.output(T.TENSOR_FLOAT32, (2,)))
    other = b.subgraph("else")
    ex = other.input(T.TENSOR_FLOAT32, (2,))
    other.operation(
        Op.ADD, [ex, other.const(T.TENSOR_FLOAT32, (1,), [1.0]), other.i32(0)], [other.output(T.TENSOR_FLOAT32, (2,))]
    )
    c = b.input(T.TENSOR_BOOL8, (1,))
    x = b.input(T.TENSOR_FLOAT32, (2,))
    b.operation(Op.IF, [c, b.subgraph_ref(then), b.subgraph_ref(other), x], [b.output(T.TENSOR_FLOAT32, (2,))])
    return b.build()


def _topk(sb, x, y):
    """y = the 2 largest of x [2] (TOPK_V2, which the adapter does not map)."""
    sb.operation(Op.TOPK_V2, [x, sb.i32(2)], [y, sb.temp(T.TENSOR_INT32, (2,))])


def test_if_is_unsupported_when_a_branch_operation_is(device):
    supported = _if_with_branch_op(lambda sb, x, y: sb.operation(Op.ADD, [x, x, sb.i32(0)], [y]))
    assert device.supported_operations(supported) == [True]
    refused = _if_with_branch_op(_topk)
    assert device.supported_operations(refused) == [False]
    (why,) = device.unsupported_reasons(refused)
    assert "'then'" in why and "TOPK_V2" in why, why
    inputs = [np.array([True]), np.array([1.0, 2.0], np.float32)]
    outcome = run_case(device, refused, inputs, reference(refused, inputs), partition=False)
    assert outcome.outcome == SKIP


def _while_counting_to_3(body_op) -> "Model":
    """(i, x) = (0, x); while i < 3: i += 1, x = body_op(x); output x (float32 [2])."""
    b = ModelBuilder("while_support_rule")
    cond = b.subgraph("cond")
    ci, _ = cond.input(T.TENSOR_INT32, (1,)), cond.input(T.TENSOR_FLOAT32, (2,))
    cond.operation(Op.LESS, [ci, cond.const(T.TENSOR_INT32, (1,), [3])], [cond.output(T.TENSOR_BOOL8, (1,))])
    body = b.subgraph("body")
    bi, bx = body.input(T.TENSOR_INT32, (1,)), body.input(T.TENSOR_FLOAT32, (2,))
    body.operation(
        Op.ADD, [bi, body.const(T.TENSOR_INT32, (1,), [1]), body.i32(0)], [body.output(T.TENSOR_INT32, (1,))]
    )
    body_op(body, bx, body.output(T.TENSOR_FLOAT32, (2,)))
    x = b.input(T.TENSOR_FLOAT32, (2,))
    i0 = b.const(T.TENSOR_INT32, (1,), [0])
    out = b.output(T.TENSOR_FLOAT32, (2,))
    b.operation(Op.WHILE, [b.subgraph_ref(cond), b.subgraph_ref(body), i0, x], [b.output(T.TENSOR_INT32, (1,)), out])
    return b.build()


def test_while_is_unsupported_when_a_body_operation_is(device):
    doubling = _while_counting_to_3(lambda sb, x, y: sb.operation(Op.ADD, [x, x, sb.i32(0)], [y]))
    assert device.supported_operations(doubling) == [True]
    inputs = [np.array([1.0, -2.5], np.float32)]
    expected = reference(doubling, inputs)
    np.testing.assert_array_equal(expected[0], [8.0, -20.0])  # outputs in creation order: x, then i
    assert run_case(device, doubling, inputs, expected, partition=False).outcome == PASS
    refused = _while_counting_to_3(_topk)
    assert device.supported_operations(refused) == [False]
    (why,) = device.unsupported_reasons(refused)
    assert "'body'" in why and "TOPK_V2" in why, why


def _infinite_loop(device):
    model = cfx.while_flag_loop()
    assert device.supported_operations(model) == [True]
    return model, device.prepare(model), Request.from_arrays(model, [np.array([True])])


def test_infinite_loop_stops_at_the_loop_timeout(device):
    model, prepared, request = _infinite_loop(device)
    t0 = time.monotonic()
    with pytest.raises(DriverError) as e:
        prepared.execute(request, loop_timeout=0.001)
    elapsed = time.monotonic() - t0
    assert e.value.status == ErrorStatus.MISSED_DEADLINE_TRANSIENT
    assert "loop timeout" in str(e.value)
    assert elapsed < 1.0, elapsed
    # the same prepared model still runs a terminating request: the flag loop's input false
    res = prepared.execute(Request.from_arrays(model, [np.array([False])]))
    np.testing.assert_array_equal(res.outputs[0], reference(model, [np.array([False])])[0])


def test_deadline_stops_a_running_loop(device):
    _, prepared, request = _infinite_loop(device)
    t0 = time.monotonic()
    with pytest.raises(DriverError) as e:
        prepared.execute(request, deadline=time.monotonic() + 0.05, loop_timeout=15.0)
    assert e.value.status == ErrorStatus.MISSED_DEADLINE_TRANSIENT
    assert "deadline" in str(e.value)
    assert time.monotonic() - t0 < 2.0


def test_release_stops_a_running_loop(device):
    _, prepared, request = _infinite_loop(device)
    errors = []

    def run():
        try:
            prepared.execute(request, loop_timeout=15.0)
        except DriverError as e:
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.2)
    prepared.release()
    t.join(5.0)
    assert not t.is_alive(), "release did not stop the running Loop"
    assert errors and errors[0].status == ErrorStatus.GENERAL_FAILURE


def test_fp16_if_after_an_add_of_zero_runs(device):
    """The CTS *_float16_all_inputs_as_internal shape: x + 0 (fp16, computed in float32 between
    two Casts) feeds an IF.  onnxruntime's NoopElimination removed that value from under the If
    ("Missing Input"); the adapter turns that optimiser off for control flow."""
    b = ModelBuilder("if_fp16_internal")
    branches = []
    for name, op in (("then_add", Op.ADD), ("else_sub", Op.SUB)):
        sb = b.subgraph(name)
        y = sb.input(T.TENSOR_FLOAT16, (2,))
        sb.operation(op, [y, sb.const(T.TENSOR_FLOAT16, (1,), [10.0]), sb.i32(0)], [sb.output(T.TENSOR_FLOAT16, (2,))])
        branches.append(sb)
    c = b.input(T.TENSOR_BOOL8, (1,))
    x = b.input(T.TENSOR_FLOAT16, (2,))
    internal = b.temp(T.TENSOR_FLOAT16, (2,))
    b.operation(Op.ADD, [x, b.const(T.TENSOR_FLOAT16, (1,), [0.0]), b.i32(0)], [internal])
    b.operation(
        Op.IF,
        [c, b.subgraph_ref(branches[0]), b.subgraph_ref(branches[1]), internal],
        [b.output(T.TENSOR_FLOAT16, (2,))],
    )
    model = b.build()
    for flag in (True, False):
        inputs = [np.array([flag]), np.array([1.5, -2.0], np.float16)]
        outcome = run_case(device, model, inputs, reference(model, inputs), partition=False)
        assert outcome.outcome == PASS, outcome.message


def test_while_with_a_growing_state_declares_unknown_dims(device):
    model = cfx.while_rnn_accumulate()
    prepared = device.prepare(model)
    graph = prepared.onnx_model.graph
    (loop,) = [n for n in graph.node if n.op_type == "Loop"]
    body = loop.attribute[0].g
    dims = [
        [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]
        for vi in body.input[2:]
    ]
    assert any(None in d for d in dims), dims
