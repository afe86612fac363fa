"""The TFLite adapter's control flow (drivers/tflite/control_flow.py): NNAPI IF/WHILE as TFLite's
builtin IF/WHILE with the referenced models as extra subgraphs, the support rule, and the loop
timeout (models with a WHILE are invoked in a child that the timeout kills).  Skipped without
the 'tflite' extra."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert", reason="tflite driver needs the 'tflite' extra: pip install nnconform[tflite]")
pytest.importorskip("flatbuffers", reason="tflite driver needs the 'tflite' extra: pip install nnconform[tflite]")

from ai_edge_litert import schema_py_generated as S

from nnconform.driver import DriverError, ErrorStatus
from nnconform.drivers.tflite import TfliteDevice, convert
from nnconform.ir import ModelBuilder, Request
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.suites.examples import control_flow as cfx
from nnconform.verdict.runner import PASS, SKIP, run_case

# Examples whose branch or body TFLite cannot compute exactly: QUANT16 has no TFLite tensor
# type here, and the quant8 "carry" examples CAST between quantised tensors with different
# parameters (convert.conv_cast reports that unsupported).
EXPECTED_UNSUPPORTED = re.compile(r"quant16|^if_carries_quant8_(then|else)$|^while_carry_quant8$")


@pytest.fixture(scope="module")
def device():
    """The adapter in a driver host, as a run uses it.  Models with a WHILE are invoked in a
    forked child (device.invoke_bounded); forked from a pytest worker, that child would copy
    the threads of whatever test ran there before (JAX starts a thread pool, and a fork of a
    multithreaded process can deadlock).  The host is a fresh interpreter with only the adapter."""
    from nnconform.isolation.proxy import IsolatedDevice

    host = IsolatedDevice("tflite")
    try:
        yield host
    finally:
        host.close()
    assert host.incidents == [], host.incidents


@pytest.mark.parametrize("example", cfx.EXAMPLES, ids=[e.name for e in cfx.EXAMPLES])
def test_control_flow_example_matches_reference(example, device):
    outcome = run_case(device, example.model, example.inputs, example.outputs, expect_failure=example.expect_failure)
    if EXPECTED_UNSUPPORTED.search(example.name):
        assert outcome.outcome == SKIP, outcome.message
        assert not all(device.supported_operations(example.model))
    else:
        assert outcome.outcome == PASS, outcome.message


def _subgraphs(model):
    fb, _, _ = convert.to_tflite(model)
    return S.ModelT.InitFromPackedBuf(fb, 0).subgraphs


def test_if_branches_become_subgraphs_named_by_if_options():
    sgs = _subgraphs(cfx.if_add_sub())
    assert len(sgs) == 3  # main, then, else
    (op,) = sgs[0].operators
    assert op.builtinOptionsType == S.BuiltinOptions.IfOptions
    assert {op.builtinOptions.thenSubgraphIndex, op.builtinOptions.elseSubgraphIndex} == {1, 2}


def test_while_body_returns_every_loop_variable():
    # while_with_if: acc, i (input-output/state), n, x (input-only): TFLite's body must return
    # all four, so the two input-only operands are passed through as body outputs.
    model = cfx.while_with_if()
    sgs = _subgraphs(model)
    main_while = [o for o in sgs[0].operators if o.builtinOptionsType == S.BuiltinOptions.WhileOptions]
    assert len(main_while) == 1
    opts = main_while[0].builtinOptions
    body = sgs[opts.bodySubgraphIndex]
    assert len(body.outputs) == len(body.inputs) == len(main_while[0].inputs) == len(main_while[0].outputs)
    assert list(body.outputs[-2:]) == list(body.inputs[-2:])
    assert len(sgs[opts.condSubgraphIndex].outputs) == 1


def _if_with_branch_op(op: Op, extra) -> object:
    b = ModelBuilder("if_unsupported_branch")
    t, dims = T.TENSOR_FLOAT32, (1, 2, 2, 1)
    branches = []
    for name in ("then", "else"):
        sb = b.subgraph(name)
        x = sb.input(t, dims)
        sb.operation(op, [x] + [p(sb) for p in extra], [sb.output(t, dims)])
        branches.append(sb)
    c = b.input(T.TENSOR_BOOL8, (1,))
    x = b.input(t, dims)
    b.operation(Op.IF, [c, b.subgraph_ref(branches[0]), b.subgraph_ref(branches[1]), x], [b.output(t, dims)])
    return b.build()


def test_if_is_unsupported_when_a_branch_operation_is():
    model = _if_with_branch_op(
        Op.INSTANCE_NORMALIZATION,
        [lambda s: s.f32(1.0), lambda s: s.f32(0.0), lambda s: s.f32(1e-5), lambda s: s.bool(False)],
    )
    dev = TfliteDevice()
    assert dev.supported_operations(model) == [False]
    assert "no TFLite mapping for INSTANCE_NORMALIZATION" in dev.unsupported_reasons(model)[0]
    supported = _if_with_branch_op(Op.RELU, [])
    assert dev.supported_operations(supported) == [True]


def test_infinite_while_ends_with_missed_deadline_and_the_model_stays_usable(device):
    model = cfx.while_flag_loop()
    assert device.supported_operations(model) == [True]
    prepared = device.prepare(model)
    try:
        with pytest.raises(DriverError) as e:
            prepared.execute(Request.from_arrays(model, [np.array([True])]), loop_timeout=0.001)
        assert e.value.status == ErrorStatus.MISSED_DEADLINE_TRANSIENT
        # The killed child took nothing with it: the same prepared model still runs.  (Not
        # with 1 ms: the timeout covers the whole invoke, see device.invoke_bounded.)
        got = prepared.execute(Request.from_arrays(model, [np.array([False])]), loop_timeout=2.0)
        np.testing.assert_array_equal(got.outputs[0], np.array([0.0], np.float32))
    finally:
        prepared.release()


def test_finite_while_under_the_loop_timeout_returns_its_result(device):
    model = cfx.while_sum_of_squares()
    prepared = device.prepare(model)
    try:
        got = prepared.execute(Request.from_arrays(model, [np.array([4], np.int32)]), loop_timeout=5.0)
        np.testing.assert_array_equal(got.outputs[0], np.array([0 + 1 + 4 + 9], np.int32))
    finally:
        prepared.release()


def test_runtime_scalar_input_keeps_rank_0(device):
    # A scalar model input must reach TFLite as rank 0 (FILL rejects a rank-1 value).
    b = ModelBuilder()
    v = b.input(T.FLOAT32)
    b.operation(Op.FILL, [b.const(T.TENSOR_INT32, (2,), [2, 2]), v], [b.output(T.TENSOR_FLOAT32, (2, 2))])
    model = b.build()
    prepared = device.prepare(model)
    try:
        got = prepared.execute(Request.from_arrays(model, [np.float32(3.5)]))
    finally:
        prepared.release()
    np.testing.assert_array_equal(got.outputs[0], np.full((2, 2), 3.5, np.float32))


@pytest.mark.parametrize("kind", ["rank", "tile_of_constants"])
def test_if_branch_output_litert_keeps_persistent_is_copied(device, kind):
    # LiteRT computes RANK (always) and TILE of constants at prepare time into a persistent
    # read-only tensor; returned straight from an IF branch it gave garbage and corrupted the
    # heap (abort on release).  The adapter copies such outputs.
    b = ModelBuilder(f"if_{kind}")
    branches = []
    out = (T.INT32, ()) if kind == "rank" else (T.TENSOR_FLOAT32, (2, 4))
    for name in ("then", "else"):
        sb = b.subgraph(name)
        x = sb.input(T.TENSOR_INT32, (3, 4))
        if kind == "rank":
            sb.operation(Op.RANK, [x], [sb.output(*out)])
        else:
            sb.operation(
                Op.TILE,
                [sb.const(T.TENSOR_FLOAT32, (1, 2), [-0.0, 1e-40]), sb.const(T.TENSOR_INT32, (2,), [2, 2])],
                [sb.output(*out)],
            )
        branches.append(sb)
    c, x = b.input(T.TENSOR_BOOL8, (1,)), b.input(T.TENSOR_INT32, (3, 4))
    b.operation(Op.IF, [c, b.subgraph_ref(branches[0]), b.subgraph_ref(branches[1]), x], [b.output(*out)])
    model = b.build()
    want = np.int32(2) if kind == "rank" else np.tile(np.array([[-0.0, 1e-40]], np.float32), (2, 2))
    # In a driver host: a regression aborts the host process, which must not take pytest with it
    # (it becomes a HostCrash here, and the host fixture records the incident).
    for flag in (True, False):
        prepared = device.prepare(model)
        try:
            got = prepared.execute(Request.from_arrays(model, [np.array([flag]), np.ones((3, 4), np.int32)]))
        finally:
            prepared.release()
        # bit for bit: the copy must keep -0.0 and subnormals
        assert np.asarray(got.outputs[0]).tobytes() == np.asarray(want).tobytes(), (flag, got.outputs[0])
