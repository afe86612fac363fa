"""Issue 20: value classes drawn on purpose, operations' declared classes, the domain ledger,
the exact verdicts, and the broken drivers of tests/drivers/broken_domains.py caught by the suites."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import double

from nnconform.generators import ledger
from nnconform.generators import values as V
from nnconform.generators.graphs import GraphConfig
from nnconform.generators.signatures import (
    NAN_DEFINED,
    SHAPE_CLASSES,
    SIGNATURES,
    ZERO_SIZED_OPS,
    Reject,
    declared_classes,
)
from nnconform.generators.strategies import sample
from nnconform.ir import ModelBuilder, type_info
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.verdict import criteria as C
from nnconform.verdict.criteria import compare, exact_outputs

TYPES = {
    "float": (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16),
    "int32": (T.TENSOR_INT32,),
    "quant": (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED),
}


@pytest.mark.parametrize("family", ["float", "int32", "quant"])
def test_every_class_is_drawn_and_recognised(family):
    rng = np.random.default_rng(0)
    for t in TYPES[family]:
        for c in V.VALUE_CLASSES[family]:
            vals = V.class_values(t, c, zero_point=7 if family == "quant" else 0, rng=rng)
            assert vals.size, (t, c)
            arr = vals.astype(type_info(t).dtype)
            assert c in V.classify(arr, t, 7), (t.name, c, arr)
        a = V.fill(rng, t, (8, 8), classes=V.VALUE_CLASSES[family], zero_point=3)
        assert set(V.VALUE_CLASSES[family]) <= V.classify(a, t, 3), t.name


def test_a_range_limits_the_classes():
    """LOG's input range (0.1 .. 2) holds neither zeros, subnormals, infinities nor NaN."""
    assert V.class_values(T.TENSOR_FLOAT32, "subnormal", 0.1, 2.0).size == 0
    assert V.class_values(T.TENSOR_FLOAT32, "nan", 0.1, 2.0).size == 0
    assert list(V.class_values(T.TENSOR_FLOAT32, "tie", 0.1, 2.0)) == [0.5, 1.5]
    rng = np.random.default_rng(1)
    a = V.fill(rng, T.TENSOR_FLOAT32, (100,), 0.1, 2.0, edge=True, classes=V.VALUE_CLASSES["float"])
    assert (a >= 0.1).all() and (a <= 2.0).all()


def test_operations_declare_only_defined_classes():
    for op, s in SIGNATURES.items():
        cls = s.value_classes
        assert cls == declared_classes(op)
        assert ("nan" in cls["float"]) == (op in NAN_DEFINED), op.name
        if op in (Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.ABS, Op.NEG, Op.BATCH_MATMUL):
            assert "limit" not in cls["int32"], op.name  # would overflow int32
    assert "inf" in declared_classes(Op.RELU)["float"] and "inf" not in declared_classes(Op.EXP)["float"]


@pytest.mark.parametrize(
    "op,t",
    [
        (Op.DIV, T.TENSOR_INT32),
        (Op.EQUAL, T.TENSOR_FLOAT32),
        (Op.MAXIMUM, T.TENSOR_INT32),
        (Op.ADD, T.TENSOR_QUANT8_ASYMM),
        (Op.RESHAPE, T.TENSOR_FLOAT16),
    ],
)
def test_edge_cases_draw_every_meaningful_class_and_no_nan_results(op, t):
    drawn, meaningful = {}, {}
    for seed in range(30):
        case = sample(GraphConfig(dtype=t, n_ops=1, ops=(op,)), seed, edge=True)
        for k, v in case.domain.items():
            drawn.setdefault(k, set()).update(v)
        for k, v in case.meaningful.items():
            meaningful.setdefault(k, set()).update(v)
        for o in case.model.main.output_indexes:
            val = case.values[o]
            assert not (val.dtype.kind == "f" and np.isnan(val).any())
    value_holes = {k: [c for c in v if c.startswith("value:")] for k, v in ledger.holes(drawn, meaningful).items()}
    assert not any(value_holes.values()), value_holes
    k = ledger.key(op, t)
    assert {"value:" + c for c in SIGNATURES[op].classes_for(t)} <= drawn[k]


# ---------------------------------------------------------------------------------------
# Shape classes (signatures.SHAPE_CLASSES)
# ---------------------------------------------------------------------------------------


def _forced(op, t, cls, seeds=range(12)):
    for seed in seeds:
        try:
            case = sample(GraphConfig(dtype=t, n_ops=1, ops=(op,), force_shape_class=cls), seed)
        except Reject:
            continue
        if "shape:" + cls in case.domain.get(ledger.key(op, t), ()):
            return case
    raise AssertionError(f"{op.name}/{t.name}: shape class {cls} never drawn")


def _main_op(case, op):
    m = case.model.main
    (operation,) = [o for o in m.operations if o.type == op]
    return m, operation


def test_zero_sized_input_comes_from_a_slice_inside_the_model():
    case = _forced(Op.ADD, T.TENSOR_FLOAT32, "zero_sized")
    m, add = _main_op(case, Op.ADD)
    assert any(0 in m.operands[i].dimensions for i in add.inputs[:2])
    assert Op.SLICE in {o.type for o in m.operations}
    # a request cannot carry an empty tensor: every model input is non-empty
    assert all(0 not in m.operands[i].dimensions and v.size for i, v in zip(m.input_indexes, case.inputs))
    assert any(case.values[o].size == 0 for o in m.output_indexes)


def test_broadcast_ranks_max_dim_and_unknown_dims_shapes():
    case = _forced(Op.MUL, T.TENSOR_FLOAT32, "broadcast_ranks")
    m, mul = _main_op(case, Op.MUL)
    assert sorted(len(m.operands[i].dimensions) for i in mul.inputs[:2]) == [1, 4]
    case = _forced(Op.RELU, T.TENSOR_FLOAT16, "max_dim")
    m, relu = _main_op(case, Op.RELU)
    assert 1000 in m.operands[relu.inputs[0]].dimensions
    case = _forced(Op.ABS, T.TENSOR_INT32, "unknown_dims")
    m = case.model.main
    assert all(set(m.operands[i].dimensions) == {0} for i in m.output_indexes)
    assert all(case.values[i].size for i in m.output_indexes)


def test_shape_class_declarations():
    assert SIGNATURES[Op.ADD].shapes_for(T.TENSOR_FLOAT32) == (
        "zero_sized",
        "broadcast_ranks",
        "max_dim",
        "unknown_dims",
    )
    assert "zero_sized" not in SIGNATURES[Op.ABS].shapes_for(T.TENSOR_FLOAT32)  # the reference rejects it
    assert "max_dim" not in SIGNATURES[Op.FILL].shapes_for(T.TENSOR_FLOAT32)
    assert "unknown_dims" not in SIGNATURES[Op.RANK].shapes_for(T.TENSOR_FLOAT32)
    assert all(set(s.shapes_for(t)) <= set(SHAPE_CLASSES) for s in SIGNATURES.values() for t in s.types)


@pytest.mark.parametrize("op", sorted(ZERO_SIZED_OPS, key=lambda o: o.name)[::5], ids=lambda o: o.name)
def test_declared_zero_sized_operations_take_an_empty_input(op):
    """Every fifth operation of ZERO_SIZED_OPS (all of them: scripts in the closing note):
    the reference runs it on a zero-sized input from a SLICE."""
    _forced(op, SIGNATURES[op].types[0], "zero_sized", seeds=range(40))


def test_top_up_fills_the_shape_classes_the_examples_missed():
    from nnconform.suites.test_random import _shape_top_up

    key = ledger.key(Op.ADD, T.TENSOR_FLOAT32)
    meaningful = {key: {"shape:" + c for c in SIGNATURES[Op.ADD].shapes_for(T.TENSOR_FLOAT32)}}
    drawn = {key: {"shape:max_dim"}}
    cases = _shape_top_up(Op.ADD, T.TENSOR_FLOAT32, None, 7, "random/single/ADD/fp32", drawn, meaningful)
    got = set().union(*(c.domain[key] for c in cases))
    assert {"shape:zero_sized", "shape:broadcast_ranks", "shape:unknown_dims"} <= got
    assert len(cases) == 3
    again = _shape_top_up(Op.ADD, T.TENSOR_FLOAT32, None, 7, "random/single/ADD/fp32", drawn, meaningful)

    def sig(cs):
        return [([(o.type, o.dimensions) for o in c.model.main.operands], [v.tobytes() for v in c.inputs]) for c in cs]

    assert sig(again) == sig(cases)  # seeded


def test_ledger_aggregates_rows_and_shows_holes(tmp_path):
    rows = [
        {
            "extra": {
                "domain": {"DIV/int32": ["value:negative"]},
                "domain_meaningful": {"DIV/int32": ["value:negative", "value:zero"]},
            }
        },
        {"extra": {"domain": {"DIV/int32": ["quant:x", "shape:rank2"]}}},
    ]
    drawn, meaningful = ledger.aggregate(rows)
    assert ledger.holes(drawn, meaningful) == {"DIV/int32": ["value:zero"]}
    md = ledger.render_markdown(drawn, meaningful)
    assert "| DIV/int32 | negative | x | rank2 | zero |" in md
    p = tmp_path / "results.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n{torn")
    assert ledger.main([str(tmp_path)]) == 1


# ---------------------------------------------------------------------------------------
# Exact verdicts
# ---------------------------------------------------------------------------------------


def _single(op, in_t, out_t, params=(), dims=(4,), **q):
    b = ModelBuilder()
    x = b.input(in_t, dims, **q)
    y = b.output(
        out_t,
        () if out_t == T.INT32 else dims[:-1] if op in (Op.ARGMAX, Op.ARGMIN) else dims,
        **({} if out_t in (T.TENSOR_INT32, T.TENSOR_BOOL8) else q),
    )
    b.operation(op, [x, *[p(b) for p in params]], [y])
    return b.build()


def test_exactly_defined_outputs():
    assert exact_outputs(_single(Op.ARGMAX, T.TENSOR_FLOAT32, T.TENSOR_INT32, [lambda b: b.i32(0)])) == [True]
    assert exact_outputs(
        _single(Op.ARGMAX, T.TENSOR_QUANT8_ASYMM, T.TENSOR_INT32, [lambda b: b.i32(0)], scale=0.5, zero_point=3)
    ) == [True]
    assert exact_outputs(_single(Op.RELU, T.TENSOR_FLOAT32, T.TENSOR_FLOAT32)) == [True]
    assert exact_outputs(_single(Op.LOGISTIC, T.TENSOR_FLOAT32, T.TENSOR_FLOAT32)) == [False]
    assert exact_outputs(
        _single(Op.RELU, T.TENSOR_FLOAT32, T.TENSOR_FLOAT32).__class__(
            _single(Op.RELU, T.TENSOR_FLOAT32, T.TENSOR_FLOAT32).main, (), True
        )
    ) == [False]  # relaxed


def test_an_index_off_by_one_fails_exactly_and_passes_in_cts_mode():
    m = _single(Op.ARGMAX, T.TENSOR_FLOAT32, T.TENSOR_INT32, [lambda b: b.i32(0)], dims=(4, 3))
    e, a = [np.array([0, 1, 2], np.int32)], [np.array([1, 1, 2], np.int32)]
    c = compare(m, e, a, criteria=C.STRICT)
    assert not c.passed and c.mismatches[0].criterion == "Strict.exact.int32"
    assert compare(m, e, a, criteria=C.STRICT.cts_compatible()).passed


def test_exact_floats_see_flushed_subnormals_and_keep_nan():
    m = _single(Op.RELU, T.TENSOR_FLOAT32, T.TENSOR_FLOAT32)
    e = [np.array([1e-40, 1.0, 0.0, np.inf], np.float32)]
    assert not compare(m, e, [np.array([0.0, 1.0, 0.0, np.inf], np.float32)], criteria=C.MEDIUM).passed
    assert compare(m, e, [e[0].copy()], criteria=C.MEDIUM).passed
    assert compare(m, e, [np.array([0.0, 1.0, 0.0, np.inf], np.float32)], criteria=C.MEDIUM.cts_compatible()).passed


def test_cts_tolerance_environment_switch(monkeypatch):
    m = _single(Op.ARGMAX, T.TENSOR_FLOAT32, T.TENSOR_INT32, [lambda b: b.i32(0)], dims=(4, 3))
    e, a = [np.array([0, 1, 2], np.int32)], [np.array([1, 1, 2], np.int32)]
    monkeypatch.setenv("NNCONFORM_CTS_TOLERANCE", "1")
    assert compare(m, e, a).passed


# ---------------------------------------------------------------------------------------
# Broken drivers, each caught by the default random suite (subprocess runs, seed 7)
# ---------------------------------------------------------------------------------------

BROKEN = double("broken_domains")


def _run(tmp_path: Path, driver: str, *args: str, in_process: bool = False, env: dict | None = None) -> list[dict]:
    import os

    cmd = [
        sys.executable,
        "-m",
        "nnconform",
        "run",
        "--driver",
        driver,
        "--suite",
        "random",
        "--report-dir",
        str(tmp_path / "report"),
        "--seed",
        "7",
        *(["--in-process"] if in_process else []),
        "--",
        *args,
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env={**os.environ, **(env or {})})
    assert r.returncode in (0, 1), r.stdout[-2000:] + r.stderr[-2000:]
    return [json.loads(x) for x in (tmp_path / "report" / "results.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(
    "driver,selection,caught",
    [
        ("IntDivTruncates", "single_operation and DIV-int32", {"random/single/DIV/int32"}),
        (
            "FlushToZero",
            "single_operation and (RESHAPE-fp32 or LESS-fp16)",
            {"random/single/RESHAPE/fp32", "random/single/LESS/fp16"},
        ),
        (
            "Int32ViaFloat32",
            "single_operation and (MAXIMUM-int32 or LESS-int32)",
            {"random/single/MAXIMUM/int32", "random/single/LESS/int32"},
        ),
        ("BitwiseFloatEquality", "single_operation and EQUAL-fp32", {"random/single/EQUAL/fp32"}),
        ("QuantRescaleWraps", "single_operation and ADD-quant8", {"random/single/ADD/quant8"}),
        ("ArgmaxOffByOne", "single_operation and ARGMAX-fp32", {"random/single/ARGMAX/fp32"}),
        # shape classes
        ("EmptyBatchAsOne", "single_operation and RELU-fp32 and not PRELU", {"random/single/RELU/fp32"}),
        ("Rank1AsScalar", "single_operation and MUL-fp32", {"random/single/MUL/fp32"}),
        ("LongDimTiled", "single_operation and RELU-fp16 and not PRELU", {"random/single/RELU/fp16"}),
        ("UnknownDimsUnresolved", "single_operation and ABS-fp32", {"random/single/ABS/fp32"}),
    ],
)
def test_broken_domain_driver_is_caught(tmp_path, driver, selection, caught):
    rows = _run(tmp_path, BROKEN + driver, "-k", selection)
    failed = {r["test_id"] for r in rows if r["outcome"] == "FAIL"}
    assert caught <= failed, [(r["test_id"], r["outcome"], r["message"][:200]) for r in rows]
    for r in rows:
        if r["test_id"] in caught:
            assert r.get("spec_path"), r


def test_if_sized_from_the_then_branch_is_caught(tmp_path):
    rows = _run(tmp_path, BROKEN + "IfSizesFromThenBranch", "-k", "control_flow_if")
    bad = [r for r in rows if r["outcome"] == "FAIL"]
    assert bad and all("IF" in r["operations"] for r in bad), [(r["test_id"], r["message"][:200]) for r in rows]


def test_while_that_cannot_shrink_is_caught(tmp_path):
    rows = _run(tmp_path, BROKEN + "WhileCannotShrink", "-k", "control_flow_while")
    bad = [r for r in rows if r["outcome"] == "FAIL"]
    assert bad, [(r["test_id"], r["outcome"], r["message"][:200]) for r in rows]
    assert all("shape" in r["message"] for r in bad), [r["message"][:300] for r in bad]


def test_random_if_branches_give_different_shapes():
    from nnconform.generators.control_flow import sample_wrapped

    seen = set()
    for seed in range(40):
        case = sample_wrapped("if", T.TENSOR_FLOAT32, seed)
        if "branch-dependent" in case.detail:
            seen.add(case.detail.split(",")[0])
            assert any(0 in case.model.main.operands[i].dimensions for i in case.model.main.output_indexes)
            assert any("shape:if_branch_shapes_differ" in v for v in case.domain.values())
    assert seen == {"condition True", "condition False"}


def test_a_spent_shrink_budget_still_reports_and_dumps_the_best_example(tmp_path):
    """With no shrink budget at all the first failing example is the best one: it is reported,
    dumped and replayable, and the row says the budget ended the shrink."""
    rows = _run(
        tmp_path,
        BROKEN + "IntDivTruncates",
        "-k",
        "single_operation and DIV-int32",
        env={"NNCONFORM_SHRINK_BUDGET_S": "0"},
    )
    (row,) = rows
    assert row["outcome"] == "FAIL" and row["extra"]["shrink_stopped_after_s"] == 0.0, row
    assert row["extra"]["failing_examples_seen"] >= 1 and row["spec_path"] and row["replay"]
    assert Path(row["spec_path"]).is_file()


@pytest.mark.parametrize("in_process", [True, False], ids=["in-process", "driver-host"])
def test_aliased_outputs_are_reported_as_aliasing(tmp_path, in_process):
    """In-process the held arrays change; behind the driver host (the default) the host's
    aliasing watch sees the driver overwrite the arrays it returned."""
    rows = _run(tmp_path, BROKEN + "AliasedOutputs", "-k", "aliased and (fp32 or fp16)", in_process=in_process)
    assert rows and all(r["outcome"] == "FAIL" and r["message"].startswith("aliasing:") for r in rows), rows
    if not in_process:
        assert all("inside the driver host" in r["message"] for r in rows), rows


@pytest.mark.parametrize("in_process", [True, False], ids=["in-process", "driver-host"])
def test_the_reference_is_not_aliased(tmp_path, in_process):
    rows = _run(tmp_path, "reference", "-k", "aliased", in_process=in_process)
    assert len(rows) == 6 and all(r["outcome"] == "PASS" for r in rows), rows


def test_an_output_that_is_a_view_of_a_pooled_input_is_not_aliasing():
    """The harness refills a pooled input's region for the next request: a driver whose
    output was a view of that input did nothing wrong (its values were copied out at once),
    while a driver that overwrites its own returned arrays still is aliasing."""
    from nnconform.ir import ModelBuilder, Request
    from nnconform.ir import OperandType as T
    from nnconform.ir import OperationType as Op
    from nnconform.isolation.proxy import IsolatedDevice

    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, (2, 3))
    shape = b.const(T.TENSOR_INT32, (2,), np.array([3, 2], np.int32))
    y = b.output(T.TENSOR_FLOAT32, (3, 2))
    b.operation(Op.RESHAPE, [x, shape], [y])
    model = b.build()
    for driver, aliased in ((double("broken_domains", "ReshapeAsInputView"), []), (BROKEN + "AliasedOutputs", [0])):
        dev = IsolatedDevice(driver)
        try:
            pm = dev.prepare(model)
            first = pm.execute(Request.from_arrays(model, [np.arange(6, dtype=np.float32).reshape(2, 3)]))
            second = pm.execute(Request.from_arrays(model, [np.full((2, 3), 7, np.float32)]))
            assert first.outputs[0].ravel().tolist() == list(range(6))
            assert second.outputs[0].ravel().tolist() == [7.0] * 6
            assert pm.aliased_outputs == aliased, driver
        finally:
            dev.close()
