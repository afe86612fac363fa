"""IF/WHILE: validation, the reference executor and driver, the loop timeout, the watchdog, and
the control_flow suite against the deliberately broken control-flow drivers."""

import concurrent.futures
import csv
import dataclasses
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from helpers import double, double_module

from nnconform.driver import DriverError, ErrorStatus
from nnconform.drivers.reference import ReferenceDevice
from nnconform.errors import DeadlineMissed, OpFailure, ValidationError
from nnconform.ir import Lifetime, ModelBuilder, Operand, Request
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.ir.validation import validate_model
from nnconform.isolation.watchdog import HangError, call_with_timeout
from nnconform.reference.executor import DEFAULT_LOOP_TIMEOUT, MAX_LOOP_TIMEOUT, Executor, clamp_loop_timeout
from nnconform.reference.ops.control_flow import incompatibility
from nnconform.suites.examples import control_flow as cfx

_broken_control_flow = double_module("broken_control_flow")
ClaimsIfWithoutBranchOp, IgnoresLoopTimeout = (
    _broken_control_flow.ClaimsIfWithoutBranchOp,
    _broken_control_flow.IgnoresLoopTimeout,
)

BY_NAME = {e.name: e for e in cfx.EXAMPLES}


# ---- validation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,where,fragment",
    [
        ("invalid_if_condition_int32", "operations[0] (IF) input 0", "must be TENSOR_BOOL8"),
        ("invalid_if_condition_dims_2", "operations[0] (IF) input 0", "dimensions [1], got [2]"),
        ("invalid_if_condition_omitted", "operations[0] (IF) input 0", "omitted"),
        ("invalid_if_branch_input_type", "operations[0] (IF) input 3", "TENSOR_FLOAT16 differs from TENSOR_FLOAT32"),
        ("invalid_if_branch_output_type", "operations[0] (IF) output 0", "TENSOR_INT32 differs"),
        ("invalid_if_branch_dims", "operations[0] (IF) input 3", "dimension 0 is 4"),
        ("invalid_if_branch_input_count", "operations[0] (IF) input 1", "takes 2 inputs, the IF passes 1"),
        ("invalid_if_branch_output_scale", "operations[0] (IF) output 0", "scale 0.25 differs from 0.5"),
        ("invalid_if_cyclic_subgraph_reference", "referenced[0].operands[2].value", "cyclic subgraph reference"),
        ("invalid_while_two_inputs", "operations[0] (WHILE)", "at least 3 inputs"),
        ("invalid_while_condition_not_bool8", "operations[0] (WHILE) input 0", "output must be TENSOR_BOOL8"),
        ("invalid_while_body_changes_type", "operations[0] (WHILE) output 0", "TENSOR_INT32 differs"),
    ],
)
def test_invalid_control_flow_is_rejected_with_a_path(name, where, fragment):
    with pytest.raises(ValidationError) as e:
        validate_model(BY_NAME[name].model)
    assert e.value.where == where and fragment in e.value.message


def test_every_valid_example_validates():
    for ex in cfx.EXAMPLES:
        if not ex.expect_failure:
            validate_model(ex.model)


def test_compatibility_rules():
    a = Operand(T.TENSOR_QUANT8_ASYMM, (2, 0), 0.5, 3)
    assert incompatibility(a, Operand(T.TENSOR_QUANT8_ASYMM, (2, 7), 0.5, 3)) is None  # 0 matches anything
    assert incompatibility(a, Operand(T.TENSOR_QUANT8_ASYMM, (), 0.5, 3)) is None  # unknown rank
    assert "rank" in incompatibility(a, Operand(T.TENSOR_QUANT8_ASYMM, (2,), 0.5, 3))
    assert "zero point" in incompatibility(a, Operand(T.TENSOR_QUANT8_ASYMM, (2, 7), 0.5, 4))
    assert "type" in incompatibility(a, Operand(T.TENSOR_QUANT8_ASYMM_SIGNED, (2, 7), 0.5, 3))


def test_branch_must_be_a_subgraph_operand():
    model = cfx.if_add_sub()
    main = model.main
    k = main.operations[0].inputs[1]
    bad = list(main.operands)
    bad[k] = Operand(T.INT32, (), lifetime=Lifetime.CONSTANT_COPY, value=np.array(0, np.int32))
    broken = dataclasses.replace(model, main=dataclasses.replace(main, operands=tuple(bad)))
    with pytest.raises(ValidationError, match="then branch must be a SUBGRAPH operand"):
        validate_model(broken)


def test_while_body_with_fewer_inputs_than_outputs_is_rejected():
    b = ModelBuilder()
    cond = b.subgraph("cond")
    cond.operation(Op.CAST, [cond.input(T.TENSOR_BOOL8, (1,))], [cond.output(T.TENSOR_BOOL8, (1,))])
    body = b.subgraph("body")
    x = body.input(T.TENSOR_BOOL8, (1,))
    body.operation(Op.CAST, [x], [body.output(T.TENSOR_BOOL8, (1,))])
    body.operation(Op.CAST, [x], [body.output(T.TENSOR_BOOL8, (1,))])
    go = b.input(T.TENSOR_BOOL8, (1,))
    b.operation(Op.WHILE, [b.subgraph_ref(cond), b.subgraph_ref(body), go], [b.output(T.TENSOR_BOOL8, (1,))])
    with pytest.raises(ValidationError, match="gives 2 outputs but takes only 1 inputs"):
        validate_model(b.build())


# ---- reference executor ------------------------------------------------------------------


def test_if_runs_only_the_chosen_branch():
    model = cfx.if_add_sub()
    seen = []

    def spy(op):
        from nnconform.reference.ops.registry import get_op

        return lambda ctx: (seen.append(op.name), get_op(op).execute(ctx))[1]

    y = np.ones((2, 3), np.float32)
    ex = Executor(model, overrides={Op.ADD: spy(Op.ADD), Op.SUB: spy(Op.SUB)})
    (z,) = ex.run([np.array([False]), y])
    assert seen == ["SUB"] and (z == -9).all()


def test_while_growing_state_and_output_shape():
    (h, seq) = Executor(cfx.while_rnn_accumulate()).run([np.array([[1, 3]], np.float32), np.array([3], np.int32)])
    assert seq.shape == (4, 2) and h.tolist() == [[7, 0]]


def test_loop_timeout_defaults_and_clamp():
    assert clamp_loop_timeout(None) == DEFAULT_LOOP_TIMEOUT == 2.0
    assert clamp_loop_timeout(100.0) == MAX_LOOP_TIMEOUT == 15.0
    assert clamp_loop_timeout(-1) == 0.0
    ex = Executor(cfx.while_flag_loop())
    ex.run([np.array([False])], loop_timeout=1e9)
    assert ex.loop_timeout == MAX_LOOP_TIMEOUT


def test_infinite_loop_stops_at_the_loop_timeout():
    ex = Executor(cfx.while_flag_loop())
    with pytest.raises(DeadlineMissed, match="loop timeout is 1 ms"):
        ex.run([np.array([True])], loop_timeout=0.001)


def test_nested_loop_timeout_reaches_the_inner_loop():
    # n large: the inner loop alone would run ~ n iterations, far beyond 1 ms
    ex = Executor(cfx.while_in_while())
    with pytest.raises(DeadlineMissed):
        ex.run([np.array([1_000_000], np.int32)], loop_timeout=0.001)


def test_runtime_shape_mismatch_in_a_branch_is_an_op_failure():
    # outer input of unknown size, branch declares [3]: a [4] value fails the execution
    b = ModelBuilder()
    t = T.TENSOR_FLOAT32
    subs = []
    for name in ("then", "else"):
        sb = b.subgraph(name)
        sb.operation(Op.CAST, [sb.input(t, (3,))], [sb.output(t, (3,))])
        subs.append(sb)
    c, x = b.input(T.TENSOR_BOOL8, (1,)), b.input(t, (0,))
    b.operation(Op.IF, [c, b.subgraph_ref(subs[0]), b.subgraph_ref(subs[1]), x], [b.output(t, (0,))])
    model = b.build()
    validate_model(model)
    with pytest.raises(OpFailure, match=r"declared \[3\].*shape \[4\]"):
        Executor(model).run([np.array([True]), np.zeros(4, np.float32)])


# ---- reference driver ----------------------------------------------------------------------


def test_reference_driver_maps_loop_timeout_to_missed_deadline_transient():
    pm = ReferenceDevice().prepare(cfx.while_flag_loop())
    req = Request.from_arrays(pm.model, [np.array([True])])
    with pytest.raises(DriverError) as e:
        pm.execute(req, loop_timeout=0.001)
    assert e.value.status == ErrorStatus.MISSED_DEADLINE_TRANSIENT
    fut = pm.execute_async(req, loop_timeout=0.001)
    with pytest.raises(DriverError) as e:
        fut.result(timeout=10)
    assert e.value.status == ErrorStatus.MISSED_DEADLINE_TRANSIENT
    pm.release()


def test_execution_deadline_is_checked_inside_loops():
    pm = ReferenceDevice().prepare(cfx.while_flag_loop())
    req = Request.from_arrays(pm.model, [np.array([True])])
    with pytest.raises(DriverError) as e:
        pm.execute(req, deadline=time.monotonic() + 0.01, loop_timeout=10.0)
    assert e.value.status == ErrorStatus.MISSED_DEADLINE_TRANSIENT


def test_if_unsupported_when_a_branch_operation_is_unimplemented():
    b = ModelBuilder()
    t = T.TENSOR_FLOAT32
    subs = []
    for name in ("then", "else"):
        sb = b.subgraph(name)
        sb.operation(Op.OEM_OPERATION, [sb.input(t, (3,))], [sb.output(t, (3,))])
        subs.append(sb)
    c, x = b.input(T.TENSOR_BOOL8, (1,)), b.input(t, (3,))
    b.operation(Op.IF, [c, b.subgraph_ref(subs[0]), b.subgraph_ref(subs[1]), x], [b.output(t, (3,))])
    assert ReferenceDevice().supported_operations(b.build()) == [False]
    assert ReferenceDevice().supported_operations(cfx.while_with_if()) == [True]


def test_broken_if_support_driver_claims_if_but_not_sub():
    dev = ClaimsIfWithoutBranchOp()
    assert dev.supported_operations(cfx.if_add_sub()) == [True]
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, (2,))
    b.operation(Op.SUB, [x, x, b.i32(0)], [b.output(T.TENSOR_FLOAT32, (2,))])
    assert dev.supported_operations(b.build()) == [False]
    with pytest.raises(DriverError) as e:
        dev.prepare(cfx.if_add_sub())
    assert e.value.status == ErrorStatus.GENERAL_FAILURE


# ---- watchdog ------------------------------------------------------------------------------


def test_call_with_timeout_returns_raises_and_detects_hangs():
    assert call_with_timeout(lambda: 42, 1.0) == 42
    with pytest.raises(ZeroDivisionError):
        call_with_timeout(lambda: 1 / 0, 1.0)
    release = threading.Event()
    t0 = time.monotonic()
    with pytest.raises(HangError, match="HANG: stuck did not return within 0.2 s"):
        call_with_timeout(lambda: release.wait(30), 0.2, "stuck")
    assert time.monotonic() - t0 < 5
    release.set()


def test_hanging_driver_stops_when_released():
    pm = IgnoresLoopTimeout().prepare(cfx.while_flag_loop())
    req = Request.from_arrays(pm.model, [np.array([True])])
    fut = pm.execute_async(req, loop_timeout=0.001)
    with pytest.raises(concurrent.futures.TimeoutError):
        fut.result(timeout=0.3)
    pm.release()
    with pytest.raises(DriverError) as e:
        fut.result(timeout=10)
    assert e.value.status == ErrorStatus.GENERAL_FAILURE


# ---- the suite against the broken drivers --------------------------------------------------


def _run_suite(tmp_path, driver, *extra):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "nnconform",
            "run",
            "--driver",
            driver,
            "--suite",
            "control_flow",
            "--report-dir",
            str(tmp_path),
            "--",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    with open(tmp_path / "results.csv", newline="") as fh:
        return r, list(csv.DictReader(fh))


def test_suite_passes_on_reference(tmp_path):
    r, rows = _run_suite(tmp_path, "reference")
    assert r.returncode == 0, r.stdout[-3000:]
    assert rows and {row["outcome"] for row in rows} == {"PASS"}
    ids = {row["test_id"] for row in rows}
    assert {
        "control_flow/loop_timeout_1ms/sync",
        "control_flow/support_rule/nested_if_in_while",
        "control_flow/nested_while_in_while_n4",
    } <= ids


def test_suite_reports_hang_for_a_driver_ignoring_the_loop_timeout(tmp_path):
    t0 = time.monotonic()
    r, rows = _run_suite(
        tmp_path, double("broken_control_flow", "IgnoresLoopTimeout"), "-k", "loop_timeout_1ms and sync and not async"
    )
    assert time.monotonic() - t0 < 60  # the bound, not the driver's 60 s give-up, ends the case
    assert r.returncode == 1
    (row,) = rows
    assert row["outcome"] == "FAIL" and row["message"].startswith("HANG:") and "loop timeout" in row["message"]


def test_suite_flags_if_support_claimed_without_branch_operation(tmp_path):
    r, rows = _run_suite(tmp_path, double("broken_control_flow", "ClaimsIfWithoutBranchOp"), "-k", "support_rule")
    assert r.returncode == 1
    failed = {row["test_id"]: row["message"] for row in rows if row["outcome"] == "FAIL"}
    assert set(failed) == {"control_flow/support_rule/if_add_sub_fp32", "control_flow/support_rule/nested_if_in_while"}
    assert "does not support SUB in referenced[1] 'else_sub'" in failed["control_flow/support_rule/if_add_sub_fp32"]
