"""The vectors execution matrix (nnconform.cases.variants): selection, the reported-shape check of
run_case, feature-level scope, the reference passing every cell on a small fixed set of golden
vectors, and each deliberately broken driver of tests/drivers/broken_matrix.py failing only
the cells of its own defect."""

import collections
import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from helpers import add_model, double, double_module

from nnconform.cases.variants import (
    PLAIN,
    Variant,
    applicable,
    mutation_eligible,
    mutation_variants,
    parse_mode,
    request_mutation_variants,
    run_variant,
    select,
    select_mutations,
)
from nnconform.cases.vectors import case_from_dict, default_root
from nnconform.driver import DriverError, ErrorStatus, ExecutionResult, OutputShape
from nnconform.drivers.reference import ReferenceDevice, ReferencePreparedModel
from nnconform.errors import ValidationError
from nnconform.ir.validation import validate_model
from nnconform.reference.ops.feature_levels import NEWEST_FEATURE_LEVEL, driver_level
from nnconform.verdict.runner import run_case
from nnconform.vts.checks import verdict
from nnconform.vts.mutations import RANK_CONSTRAINTS, invalid_ranks, operation_input_rank

broken_matrix = double_module("broken_matrix")

# A small fixed set: a float and a quant8 single-operation vector, a CONV_2D, a six-operation
# graph with five outputs (some zero-sized), and the never-ending WHILE loop.
SUBSET = [
    ("V1_0", "add.json", 0),
    ("V1_0", "add_quant8.json", 0),
    ("V1_0", "conv_float.json", 0),
    ("V1_2", "bbox_graph.json", "bbox_graph_zero_sized"),
    ("V1_3", "while_infinite_loop.json", 0),
]


def _raw(folder, file, which) -> dict:
    cases = json.loads((default_root() / folder / file).read_text())
    return cases[which] if isinstance(which, int) else next(d for d in cases if d["name"] == which)


@pytest.fixture(scope="module")
def subset():
    return [(folder, _raw(folder, file, which), str(default_root() / folder / file)) for folder, file, which in SUBSET]


# Model-mutation classes run here (each class is the same code path; operation_operand_type
# alone makes hundreds of models of the six-operation graph, too slow for a unit test).
CHEAP_MUTATIONS = (
    "execution_order",
    "operand_type",
    "remove_operation",
    "add_writer",
    "priority",
    "operation_input_rank",
)


def _cells(d: dict) -> list[Variant]:
    """Every applicable cell, the cheap model-mutation classes, and every request-mutation
    class on every path."""
    return applicable(d) + (
        [v for v in mutation_variants() if v.arg in CHEAP_MUTATIONS] + request_mutation_variants()
        if mutation_eligible(d)
        else []
    )


def _matrix(device, subset) -> dict[str, tuple[str, str]]:
    """{test id: (outcome, message)} for the plain run and every cell, in-process."""
    out = {}
    for folder, d, path in subset:
        case = case_from_dict(d, path)
        plain = run_case(
            device, case.model, case.inputs, case.outputs, ignored=case.ignored, expect_failure=case.expect_failure
        )
        out[case.test_id] = (plain.outcome, plain.message)
        for v in _cells(d):
            o = run_variant(device, case, v, seed=1)
            out[f"{case.test_id}[{v.id}]"] = (o.outcome, o.message)
    return out


# ---- selection --------------------------------------------------------------------------


def test_parse_mode():
    assert parse_mode(None) == "rotate" and parse_mode("all") == "all" and parse_mode("none") == "none"
    assert select([Variant("general", "async")], "none", 1, "x") == []
    assert parse_mode("general, fenced") == frozenset({"general", "fenced"})
    with pytest.raises(ValueError, match="bogus"):
        parse_mode("general,bogus")


def test_applicable_follows_the_vts_rules(subset):
    by = {d["name"]: applicable(d) for _, d, _ in subset}
    add, quant, bbox, loop = (by[n] for n in ("add", "add_quant8", "bbox_graph_zero_sized", "while_infinite_loop"))
    assert {v.kind for v in loop} == {"infinite_loop"} and len(loop) == 8
    assert any(v.kind == "quant_coupling" for v in quant) and not any(v.kind == "quant_coupling" for v in add)
    assert not any(v.kind == "quant_coupling" for v in bbox)  # six operations: not single-op
    assert {
        "dynamic_shape-async-timing",
        "fenced-fenced-timing",
        "memory_domain-fenced",
        "deadline-async-now",
        "priority-low",
        "caching",
        "general-burst",
    } <= {v.id for v in add}
    assert PLAIN not in add  # that one is test_vector
    rank_like = {
        "name": "r",
        "model": {
            "main": {
                "operands": [{"type": "TENSOR_FLOAT32", "dimensions": [2]}, {"type": "INT32", "dimensions": []}],
                "operations": [{"type": "RANK", "inputs": [0], "outputs": [1]}],
                "input_indexes": [0],
                "output_indexes": [1],
            }
        },
    }
    assert applicable(rank_like) and not any(v.kind == "dynamic_shape" for v in applicable(rank_like))


def test_rotate_is_deterministic_and_covers_the_matrix(subset):
    d = subset[0][1]
    cells = applicable(d)
    picks = {select(cells, "rotate", seed, "V1_0/add")[0] for seed in range(300)}
    assert select(cells, "rotate", 7, "V1_0/add") == select(cells, "rotate", 7, "V1_0/add")
    assert len(picks) == len(cells)  # successive seeds reach every cell
    assert select(cells, "all", 7, "x") == cells
    assert {v.kind for v in select(cells, frozenset({"fenced"}), 7, "x")} == {"fenced"}


def test_mutations_are_sampled_per_class():
    eligible = [
        (
            f"V/{i}",
            {
                "n_ops": 1 + i % 3,
                "scalar": i % 2 == 0,
                "per_channel": i % 5 == 0,
                "rank_ops": i % 7 == 0,
                "inputs": i % 4,
                "tensor_inputs": i % 3 > 0,
                "tensor_outputs": i % 6 > 0,
            },
        )
        for i in range(50)
    ]
    rot = select_mutations(eligible, "rotate", 3, per_class=4)
    per_class: dict[str, int] = {}
    for cells in rot.values():
        for v in cells:
            per_class[v.id] = per_class.get(v.id, 0) + 1
    # one count per model-mutation class and per (request class, path)
    assert set(per_class.values()) == {4}
    assert len(per_class) == len(mutation_variants()) + len(request_mutation_variants())
    assert select_mutations(eligible, "rotate", 3, per_class=4) == rot
    assert select_mutations(eligible, frozenset({"general"}), 3) == {}
    requests_only = select_mutations(eligible, frozenset({"request_mutation"}), 3)
    assert {v.kind for cells in requests_only.values() for v in cells} == {"request_mutation"}
    no_input = [vid for vid, f in eligible if f["inputs"] == 0]
    assert all(
        Variant("request_mutation", "burst", "remove_input") not in requests_only.get(vid, []) for vid in no_input
    )
    no_tensor_out = [vid for vid, f in eligible if not f["tensor_outputs"]]
    assert all(
        v.arg not in ("output_wrong_rank", "output_buffer_too_small")
        for vid in no_tensor_out
        for v in requests_only.get(vid, [])
    )
    everything = select_mutations(eligible, "all", 3)
    single = [vid for vid, f in eligible if f["n_ops"] == 1]
    assert all(Variant("mutation", arg="execution_order") not in everything[vid] for vid in single)
    no_scalar = [vid for vid, f in eligible if not f["scalar"]]
    assert all(Variant("mutation", arg="operand_rank") not in everything[vid] for vid in no_scalar)
    no_rank_rule = [vid for vid, f in eligible if not f["rank_ops"]]
    assert all(Variant("mutation", arg="operation_input_rank") not in everything[vid] for vid in no_rank_rule)


# ---- CTS per-operation rank rules -------------------------------------------------------


def test_invalid_ranks_are_the_neighbours_of_the_valid_range():
    assert invalid_ranks(4, 4) == (5, 3)  # CONV_2D: rank 3 and rank 5
    assert invalid_ranks(None, 4) == (5,)  # up to 4
    assert invalid_ranks(2, 4) == (5, 1) and invalid_ranks(1, 1) == (2,)
    assert set(RANK_CONSTRAINTS[next(o for o in RANK_CONSTRAINTS if o.name == "CONV_2D")][0][0]) == {0, 1}


def test_operation_input_rank_mutations_are_rejected_by_the_validator(subset):
    conv = case_from_dict(subset[2][1], subset[2][2])
    validate_model(conv.model)
    made = list(operation_input_rank(conv.model))
    assert {m.name.rsplit("_", 1)[1] for m in made} == {"rank3", "rank5"}
    for m in made:
        ranks = {len(m.model.main.operands[k].dimensions) for k in m.model.main.operations[0].inputs[:2]}
        assert len(ranks) == 1 and ranks < {3, 5}  # input and filter moved together
        with pytest.raises(ValidationError, match="rank"):
            validate_model(m.model)
    add = case_from_dict(subset[0][1], subset[0][2])
    assert {m.name.split("/")[1] for m in operation_input_rank(add.model)} == {
        "operations[0](ADD)_input0_rank5",
        "operations[0](ADD)_input1_rank5",
    }


def test_driver_level_accepts_both_encodings():
    assert driver_level(4) == 4 and driver_level(30) == 4 and driver_level(27) == 1
    assert driver_level(1000007) == 7 and driver_level(NEWEST_FEATURE_LEVEL) == NEWEST_FEATURE_LEVEL
    with pytest.raises(ValueError):
        driver_level(0)
    with pytest.raises(ValueError):
        driver_level("30")


# ---- run_case checks the reported output shapes -----------------------------------------


class _ShapeLiar(ReferencePreparedModel):
    def execute(self, request, **kw):
        r = super().execute(request, **kw)
        return ExecutionResult(
            r.outputs, tuple(OutputShape((*s.dimensions, 1), True) for s in r.output_shapes), r.timing
        )


class _ShapeLiarDevice(ReferenceDevice):
    def prepare(self, model, **kw):
        return _ShapeLiar(super().prepare(model, **kw).model)


def test_run_case_fails_a_wrong_reported_shape():
    model = add_model()
    x = np.ones((2, 2), np.float32)
    assert run_case(ReferenceDevice(), model, [x, x], [x + x]).outcome == "PASS"
    got = run_case(_ShapeLiarDevice(), model, [x, x], [x + x])
    assert got.outcome == "FAIL" and "output_shapes wrong" in got.message and "[2, 2, 1]" in got.message


# ---- a rejected execution reports no output shapes ----------------------------------------


class _ShapesOnRejection(ReferencePreparedModel):
    def execute(self, request, **kw):
        try:
            return super().execute(request, **kw)
        except DriverError as e:  # the defect: a refusal still describes the outputs
            raise DriverError(e.status, str(e), (OutputShape((1,), True),)) from None


class _ShapesOnRejectionDevice(ReferenceDevice):
    def prepare(self, model, **kw):
        return _ShapesOnRejection(super().prepare(model, **kw).model)


def test_a_rejection_must_not_report_output_shapes(subset):
    shapes = (OutputShape((2, 2), True),)
    assert "must be empty" in verdict(
        DriverError(ErrorStatus.INVALID_ARGUMENT, "", shapes), ErrorStatus.INVALID_ARGUMENT, "x"
    )
    assert verdict(DriverError(ErrorStatus.INVALID_ARGUMENT), ErrorStatus.INVALID_ARGUMENT, "x") is None
    assert (
        verdict(
            DriverError(ErrorStatus.OUTPUT_INSUFFICIENT_SIZE, "", shapes), ErrorStatus.OUTPUT_INSUFFICIENT_SIZE, "x"
        )
        is None
    )
    add = case_from_dict(subset[0][1], subset[0][2])
    cell = Variant("request_mutation", "sync", "remove_input")
    assert run_variant(ReferenceDevice(), add, cell).outcome == "PASS"
    got = run_variant(_ShapesOnRejectionDevice(), add, cell)
    assert got.outcome == "FAIL" and "must be empty" in got.message, got.message


# ---- the reference passes, each broken driver fails only its own cells -------------------


def test_reference_passes_every_cell(subset):
    got = _matrix(ReferenceDevice(), subset)
    bad = {k: v for k, v in got.items() if v[0] not in ("PASS", "SKIP")}
    assert not bad, bad
    skipped = {k: v[1] for k, v in got.items() if v[0] == "SKIP"}
    # only a mutation class with nothing to mutate in a model may skip (the suite does not
    # select those cells; the test runs every class on every vector)
    assert all("mutation-" in k and "applies to this model" in m for k, m in skipped.items()), skipped
    assert sum(v[0] == "PASS" for v in got.values()) > 100


OWN = {
    "AsyncWrongResults": lambda v, vid: v.path == "async",
    "BurstIgnoresTiming": lambda v, vid: v.path == "burst" and not v.timing,
    # bbox_graph_zero_sized's model itself leaves output 0's dimension unknown (it is empty)
    "WrongDynamicShapes": lambda v, vid: v.kind == "dynamic_shape" or vid == "V1_2/bbox_graph_zero_sized",
    # a short output buffer on the async path: the dynamic-shape cell and the request mutation
    "AsyncAcceptsInsufficient": lambda v, vid: (
        v.path == "async"
        and (v.kind == "dynamic_shape" or v == Variant("request_mutation", "async", "output_buffer_too_small"))
    ),
    "AsyncIgnoresDeadline": lambda v, vid: v.kind == "deadline" and v.path == "async",
    "RefusesSignedTwin": lambda v, vid: v.kind == "quant_coupling",
    "AcceptsUnorderedBigModels": lambda v, vid: v == Variant("mutation", arg="execution_order"),
    "BurstAcceptsMissingInput": lambda v, vid: v == Variant("request_mutation", "burst", "remove_input"),
    "AcceptsRank5Conv": lambda v, vid: (
        v == Variant("mutation", arg="operation_input_rank") and vid == "V1_0/conv_float"
    ),
}


def _variant_of(test_id: str, subset) -> Variant:
    if "[" not in test_id:
        return PLAIN
    cell = test_id[test_id.index("[") + 1 : -1]
    every = {v.id: v for _, d, _ in subset for v in applicable(d) + mutation_variants() + request_mutation_variants()}
    return every[cell]


@pytest.mark.parametrize("name", sorted(OWN))
def test_broken_driver_fails_only_its_own_cells(name, subset):
    got = _matrix(getattr(broken_matrix, name)(), subset)
    failed = {k: m for k, (o, m) in got.items() if o not in ("PASS", "SKIP")}
    own = OWN[name]
    assert failed, f"{name}: no cell of the matrix caught it"
    stray = {k: m for k, m in failed.items() if not own(_variant_of(k, subset), k.split("[")[0])}
    assert not stray, f"{name} failed cells outside its own defect: {stray}"


# ---- one preparation per vector for the cells that test execution ------------------------


class _CountingPrepared(ReferencePreparedModel):
    def release(self):
        self.calls["release"] += 1
        super().release()


class _Counting(broken_matrix._Device):
    """The reference, counting the calls a shared preparation saves."""

    PREPARED = _CountingPrepared

    def __init__(self):
        super().__init__()
        self.calls = collections.Counter()

    def supported_operations(self, model):
        self.calls["supported_operations"] += 1
        return super().supported_operations(model)

    def prepare(self, model, **kw):
        self.calls["prepare"] += 1
        pm = super().prepare(model, **kw)
        pm.calls = self.calls
        return pm


EXECUTION_CELLS = [Variant("general", p, timing=t) for p in ("sync", "async", "burst") for t in (False, True)] + [
    Variant("fenced", "fenced"),
    Variant("memory_domain", "async"),
    Variant("deadline", "sync", "unlimited"),
    Variant("request_mutation", "fenced", "input_wrong_rank"),
]


def test_the_execution_cells_of_a_vector_share_one_preparation(subset):
    _, add, add_path = subset[0]
    _, conv, conv_path = subset[2]
    dev = _Counting()
    case = case_from_dict(add, add_path)
    for v in EXECUTION_CELLS:
        assert run_variant(dev, case, v, seed=1).outcome == "PASS", v
    assert dev.calls == {"supported_operations": 1, "prepare": 1}, dev.calls
    # dynamic shape prepares its own model once; a cell testing preparation prepares for itself
    for v in (
        Variant("dynamic_shape", "sync"),
        Variant("dynamic_shape", "burst", timing=True),
        Variant("priority", arg="high"),
    ):
        assert run_variant(dev, case, v, seed=1).outcome == "PASS", v
    assert dev.calls == {"supported_operations": 3, "prepare": 3, "release": 1}, dev.calls
    # the next vector releases the previous one's two shared preparations
    assert run_variant(dev, case_from_dict(conv, conv_path), EXECUTION_CELLS[0], seed=1).outcome == "PASS"
    assert dev.calls == {"supported_operations": 4, "prepare": 4, "release": 3}, dev.calls


def test_the_burst_cells_of_a_vector_share_one_burst(subset):
    """As one prepared model, one burst per vector (VTS runs a test's executions and request
    validations through one burst); the next vector releases it before its prepared model."""
    from nnconform.drivers.reference import ReferenceBurst

    class Burst(ReferenceBurst):
        def release(self):
            self._prepared.calls["burst release"] += 1
            super().release()

    class Prepared(_CountingPrepared):
        def configure_burst(self):
            self.calls["configure_burst"] += 1
            return Burst(self)

    _, add, add_path = subset[0]
    _, conv, conv_path = subset[2]
    dev = _Counting()
    dev.PREPARED = Prepared
    case = case_from_dict(add, add_path)
    cells = [Variant("general", "burst"), Variant("general", "burst", timing=True)]
    cells += [Variant("request_mutation", "burst", "input_wrong_rank"), Variant("deadline", "burst", "unlimited")]
    for v in cells:
        assert run_variant(dev, case, v, seed=1).outcome == "PASS", v
    assert dev.calls == {"supported_operations": 1, "prepare": 1, "configure_burst": 1}, dev.calls
    assert run_variant(dev, case_from_dict(conv, conv_path), cells[0], seed=1).outcome == "PASS"
    assert dev.calls["burst release"] == 1 and dev.calls["release"] == 1 and dev.calls["configure_burst"] == 2


def test_a_failing_cell_leaves_no_preparation_for_the_next(subset):
    _, add, add_path = subset[0]
    dev = _Counting()
    dev.PREPARED = type("Wrong", (_CountingPrepared, broken_matrix._AsyncWrongPrepared), {})
    case = case_from_dict(add, add_path)
    got = [run_variant(dev, case, Variant("general", p), seed=1).outcome for p in ("sync", "async", "burst")]
    assert got == ["PASS", "FAIL", "PASS"]
    assert dev.calls == {"supported_operations": 2, "prepare": 2, "release": 1}, dev.calls


def test_a_crash_on_one_path_gives_the_next_cells_a_new_host_and_preparation(subset):
    """Through a driver host: the async cell's abort is its CRASH; the shared preparation died
    with that host, and the burst cell after it prepares on the new host and passes."""
    from nnconform.isolation.proxy import open_isolated

    _, add, add_path = subset[0]
    case = case_from_dict(add, add_path)
    dev = open_isolated(double("broken_matrix", "AsyncAborts"))
    try:
        got = [run_variant(dev, case, Variant("general", p), seed=1) for p in ("sync", "async", "burst", "sync")]
        assert [o.outcome for o in got] == ["PASS", "CRASH", "PASS", "PASS"], [(o.outcome, o.message) for o in got]
        assert dev.hosts_started == 2 and len(dev.incidents) == 1
    finally:
        dev.close()


# ---- end to end: ids, rows, the report table, out-of-scope vectors ------------------------

OLD_DRIVER = """
from nnconform.drivers.reference import ReferenceDevice

class Level1(ReferenceDevice):
    name = "reference-level-1"
    feature_level = 27          # Android 8.1: NNAPI feature level 1
"""


def test_cli_runs_the_matrix_and_reports_it(tmp_path, subset):
    vec = tmp_path / "vectors"
    for folder, d, _ in subset[:2] + subset[4:]:  # add, add_quant8 (V1_0), the loop (V1_3)
        (vec / folder).mkdir(parents=True, exist_ok=True)
        (vec / folder / f"{d['name']}.json").write_text(json.dumps([d]))
    (tmp_path / "old_driver.py").write_text(OLD_DRIVER)
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    out = tmp_path / "report"
    cmd = [
        sys.executable,
        "-m",
        "nnconform",
        "run",
        "--driver",
        "old_driver:Level1",
        "--suite",
        "vectors",
        "--vectors",
        str(vec),
        "--variants",
        "general,infinite_loop,quant_coupling",
        "--seed",
        "3",
        "--report-dir",
        str(out),
        "--in-process",
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    rows = {r["test_id"]: r for r in csv.DictReader(open(out / "results.csv"))}
    assert rows["V1_0/add"]["outcome"] == "PASS"  # the plain id is unchanged
    assert rows["V1_0/add[general-async-timing]"]["outcome"] == "PASS"
    assert rows["V1_0/add_quant8[quant_coupling]"]["outcome"] == "PASS"
    loop = rows["V1_3/while_infinite_loop[infinite_loop-fenced-timing]"]
    assert loop["outcome"] == "SKIP" and "out of scope: feature level 4 > driver's 1" in loop["message"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["variants_mode"] == "general,infinite_loop,quant_coupling"
    assert summary["variants"]["general"]["pairs"] == 13 and summary["variants"]["general"]["variants"] == 6
    assert summary["variants"]["infinite_loop"] == {"pairs": 8, "variants": 8, "SKIP": 8}
    assert summary["out_of_scope"] == 9 and summary["skip_ratio"] == 0
    html = (out / "report.html").read_text()
    assert "Vectors execution matrix" in html and "quant_coupling" in html

    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "nnconform",
            "run",
            "--suite",
            "vectors",
            "--variants",
            "nope",
            "--report-dir",
            str(tmp_path / "r2"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode != 0 and "unknown variant kind(s) nope" in bad.stderr
