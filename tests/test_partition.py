"""Partitioned execution (nnconform.verdict.partition): a case the driver supports in part runs its
supported operations on the driver and the rest on the reference, exactly."""

import json

import numpy as np
import pytest
from helpers import double, double_module

from nnconform.cases.vectors import case_from_dict, default_root, vector_files
from nnconform.drivers.reference import ReferenceDevice
from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.ir.validation import validate_model
from nnconform.reference.executor import execute
from nnconform.verdict.partition import assign, plan, pooled, submodel
from nnconform.verdict.runner import run_case

_broken_partial = double_module("broken_partial")
HalfReferenceEven, HalfReferenceOdd, ReluIgnoresStrides = (
    _broken_partial.HalfReferenceEven,
    _broken_partial.HalfReferenceOdd,
    _broken_partial.ReluIgnoresStrides,
)

F32 = T.TENSOR_FLOAT32


def chain_model():
    """x -> ADD(x, c) -> FLOOR -> MUL(., x) -> RELU -> out; plus an independent ABS(x) -> out2."""
    b = ModelBuilder()
    x = b.input(F32, [2, 3])
    c = b.const(F32, [2, 3], np.linspace(-2, 2, 6))
    t1, t2, t3 = b.temp(F32, [2, 3]), b.temp(F32, [2, 3]), b.temp(F32, [2, 3])
    y, z = b.output(F32, [2, 3]), b.output(F32, [2, 3])
    b.operation(Op.ADD, [x, c, b.i32(0)], [t1])  # code 0: even
    b.operation(Op.FLOOR, [t1], [t2])  # 8: even
    b.operation(Op.MUL, [t2, x, b.i32(0)], [t3])  # 18: even
    b.operation(Op.RELU, [t3], [y])  # 19: odd
    b.operation(Op.ABS, [x], [z])  # 38: even
    return b.build()


def test_plan_groups_maximal_partitions_in_dependency_order():
    m = chain_model()
    parts = plan(m, [True, False, True, False, True])
    # ABS depends only on the input: it joins the first driver partition
    assert [(p.on_driver, p.operations) for p in parts] == [(True, (0, 4)), (False, (1,)), (True, (2,)), (False, (3,))]
    first = parts[0]
    assert first.inputs == (m.main.input_indexes[0],)
    assert set(first.outputs) == {m.main.operations[0].outputs[0], m.main.output_indexes[1]}
    for p in parts:
        sub = submodel(m, p)
        validate_model(sub)  # each partition is a valid model of its own
        assert len(sub.main.operations) == len(p.operations)


def test_partitioned_case_is_exact_and_says_so():
    m = chain_model()
    x = np.array([[0.3, -1.7, 2.2], [5.5, -0.1, 0.0]], np.float32)
    expected = execute(m, [x])
    out = run_case(HalfReferenceEven(), m, [x], expected)
    assert out.outcome == "PASS", out.message
    assert out.message == "partitioned: 4 of 5 operations on the driver"
    assert out.partition["driver_operations"] == [0, 1, 2, 4] and out.partition["partitions"] == 2
    for a, e in zip(out.actual, expected):
        assert np.array_equal(a, e)
    odd = run_case(HalfReferenceOdd(), m, [x], expected)
    assert odd.outcome == "PASS" and odd.message.startswith("partitioned: 1 of 5")
    off = run_case(HalfReferenceEven(), m, [x], expected, partition=False)
    assert off.outcome == "SKIP" and "RELU" in off.message and off.partition is None


def test_nothing_supported_stays_skip():
    b = ModelBuilder()
    x = b.input(F32, [3])
    y = b.output(F32, [3])
    b.operation(Op.RELU, [x], [y])
    m = b.build()
    out = run_case(HalfReferenceEven(), m, [np.ones(3, np.float32)], [np.ones(3, np.float32)])
    assert out.outcome == "SKIP" and out.partition is None


def _if_model(inner_op):
    """IF(cond, then: inner_op(x), else: ABS(x)) followed by an ADD on the main graph."""
    b = ModelBuilder()
    cond = b.input(T.TENSOR_BOOL8, [1])
    x = b.input(F32, [4])
    r = b.temp(F32, [4])
    y = b.output(F32, [4])
    then_, else_ = b.subgraph("then"), b.subgraph("else")
    for g, op in ((then_, inner_op), (else_, Op.ABS)):
        i = g.input(F32, [4])
        o = g.output(F32, [4])
        g.operation(op, [i], [o])
    b.operation(Op.IF, [cond, b.subgraph_ref(then_), b.subgraph_ref(else_), x], [r])
    b.operation(Op.ADD, [r, x, b.i32(0)], [y])
    return b.build()


class _ClaimsIf(ReferenceDevice):
    """Claims IF and ADD in the main graph, and in any model only operations with even codes
    or IF: so a branch with RELU (odd) makes its IF go to the reference."""

    def supported_operations(self, model):
        return [op.type == Op.IF or int(op.type) % 2 == 0 for op in model.main.operations]


@pytest.mark.parametrize("inner,on_driver", [(Op.FLOOR, [True, True]), (Op.RELU, [False, True])])
def test_control_flow_goes_to_driver_only_with_its_subgraphs(inner, on_driver):
    m = _if_model(inner)
    dev = _ClaimsIf()
    assert assign(dev, m, dev.supported_operations(m)) == on_driver
    ins = [np.array([True]), np.array([-1.5, 0.5, 2.5, -3.0], np.float32)]
    out = run_case(dev, m, ins, execute(m, ins), partition=True)
    assert out.outcome == "PASS", out.message
    if not all(on_driver):
        assert out.message.startswith("partitioned: 1 of 2")


def test_boundary_tensors_are_strided_pool_views():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = pooled(a)
    assert np.array_equal(v, a) and not v.flags.c_contiguous
    assert pooled(np.float32(3)).shape == ()


def _vector_subset(step: int, offset: int = 0):
    """Every ``step``-th AOSP vector (a deterministic spread over every folder and operation)."""
    root = default_root()
    if not root.is_dir():
        pytest.skip(f"AOSP vectors not found at {root}")
    k = 0
    for f in vector_files(root):
        for d in json.loads(f.read_text()):
            if k % step == offset:
                yield case_from_dict(d, str(f))
            k += 1


@pytest.mark.parametrize("device_cls", [HalfReferenceEven, HalfReferenceOdd])
def test_half_reference_passes_a_spread_of_vectors(device_cls):
    """Exactness: the reference claiming only half the operations still passes every vector
    (the full run over all 9,374 is `python benchmarks/bench_partition.py exact`)."""
    dev = device_cls()
    tally = {"PASS": 0, "SKIP": 0, "partitioned": 0}
    bad = []
    for case in _vector_subset(211, 5 if device_cls is HalfReferenceOdd else 0):
        ignored = [True] * len(case.outputs) if case.multinomial_tolerance > 0 else case.ignored
        out = run_case(dev, case.model, case.inputs, case.outputs, ignored=ignored, expect_failure=case.expect_failure)
        if out.outcome not in tally:
            bad.append(f"{case.test_id}: {out.outcome} {out.message}")
            continue
        tally[out.outcome] += 1
        tally["partitioned"] += bool(out.partition)
    assert not bad, "\n".join(bad[:10])
    assert tally["partitioned"] >= 8, tally


def test_relu_that_ignores_strides_is_caught_only_partitioned():
    root = default_root()
    if not root.is_dir():
        pytest.skip(f"AOSP vectors not found at {root}")
    dev = ReluIgnoresStrides()
    f = root / "V1_0" / "relu_float_1.json"
    cases = {d["name"]: case_from_dict(d, str(f)) for d in json.loads(f.read_text())}
    alone, internal = cases["relu_float_1"], cases["relu_float_1_all_inputs_as_internal"]
    assert run_case(dev, alone.model, alone.inputs, alone.outputs).outcome == "PASS"
    got = run_case(dev, internal.model, internal.inputs, internal.outputs)
    assert got.outcome == "FAIL" and got.message.startswith("partitioned: 1 of 2"), got.message
    assert run_case(dev, internal.model, internal.inputs, internal.outputs, partition=False).outcome == "SKIP"
    assert run_case(ReferenceDevice(), internal.model, internal.inputs, internal.outputs).outcome == "PASS"


def test_partitioned_failure_is_blamed_on_the_driver_operation():
    from nnconform.verdict.attribution import blame

    root = default_root()
    if not root.is_dir():
        pytest.skip(f"AOSP vectors not found at {root}")
    f = root / "V1_0" / "relu_float_1.json"
    d = next(d for d in json.loads(f.read_text()) if d["name"] == "relu_float_1_all_inputs_as_internal")
    case = case_from_dict(d, str(f))
    dev = ReluIgnoresStrides()
    out = run_case(dev, case.model, case.inputs, case.outputs)
    b = blame(dev, case.model, case.inputs, out)
    assert out.outcome == "FAIL" and b.operation == "RELU" and b.how == "first divergent operation"


def test_rows_of_a_run_say_partitioned(tmp_path):
    import subprocess
    import sys

    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "nnconform",
            "run",
            "--driver",
            double("broken_partial", "HalfReferenceOdd"),
            "--suite",
            "vectors",
            "--report-dir",
            str(tmp_path),
            "--seed",
            "1",
            "--",
            "-k",
            "relu_float_1",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    inner = [x for x in rows if x["test_id"].endswith("relu_float_1_all_inputs_as_internal")]
    assert inner and inner[0]["outcome"] == "PASS"
    assert inner[0]["message"] == "partitioned: 1 of 2 operations on the driver"
    assert inner[0]["extra"]["partitioned"] == "1/2" and inner[0]["extra"]["driver_operations"] == [1]
    run = json.loads((tmp_path / "run.json").read_text())
    assert "on" in json.dumps(run).split("partitioning", 1)[1][:40]
