"""Issue 51: the exhaustive suite's value sets, domain rules, shards and error measures, the
reference passing it, and the broken drivers of tests/drivers/broken_sweep.py caught by it
with a spec of a few elements."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import double

from nnconform import suites
from nnconform.cases import exhaustive as X
from nnconform.ir import OperationType as Op
from nnconform.ir.spec import load_spec


def test_every_fp16_pattern_once():
    v = X.fp16_all()
    assert v.size == 65536 and np.unique(v.view(np.uint16)).size == 65536
    sub = (v != 0) & (np.abs(v.astype(np.float32)) < np.finfo(np.float16).tiny)
    assert int(sub.sum()) == 2 * 1023  # every subnormal, both signs
    assert np.isposinf(v).sum() == 1 and np.isneginf(v).sum() == 1 and np.isnan(v).sum() == 2046


def test_fp32_sample_has_every_exponent_and_subnormal_binade():
    v = X.fp32_sample()
    bits = v.view(np.uint32)
    exps = (bits >> 23) & 0xFF
    for sign in (0, 1):
        assert set(exps[(bits >> 31) == sign].tolist()) == set(range(256))
    sub = np.abs(v[(exps == 0) & (v != 0)]).astype(np.float64)
    assert set(np.floor(np.log2(sub)).astype(int).tolist()) == set(range(-149, -126))
    assert {0.0, np.inf, -np.inf} <= set(v[~np.isnan(v)].tolist())
    assert np.signbit(v[v == 0]).tolist().count(True) == 1  # -0.0 is there once
    assert np.isnan(v).any()


def test_domain_rules_exclude_by_rule():
    x = np.array([np.nan, -np.inf, -1.0, -0.0, 0.0, 1e-40, 2.0, np.inf], np.float32)
    assert X.domain_mask(Op.LOG, x).tolist() == [False, False, False, False, False, True, True, True]
    assert X.domain_mask(Op.SQRT, x).tolist() == [False, False, False, True, True, True, True, True]
    assert X.domain_mask(Op.SIN, x).tolist() == [False, False, True, True, True, True, True, False]
    assert X.domain_mask(Op.RELU, x).tolist() == [False] + [True] * 7  # infinities are defined
    assert X.domain_mask(Op.HARD_SWISH, x).tolist()[1] is False  # -inf * 0: NaN
    assert not X.domain_mask(Op.HARD_SWISH, np.array([3e38], np.float32))[0]  # the product overflows
    assert X.domain_mask(Op.LESS, x).all()  # comparisons define NaN
    a = np.array([np.inf, np.inf, 0.0, 1.0, -2.0, 0.0], np.float32)
    b = np.array([-np.inf, np.inf, np.inf, 0.0, 0.5, -1.0], np.float32)
    assert X.pair_mask(Op.ADD, a, b).tolist() == [False, True, True, True, True, True]
    assert X.pair_mask(Op.SUB, a, b).tolist() == [True, False, True, True, True, True]
    assert X.pair_mask(Op.MUL, a, b).tolist() == [True, True, False, True, True, True]
    assert X.pair_mask(Op.DIV, a, b).tolist() == [False, False, True, False, True, True]
    assert X.pair_mask(Op.POW, a, b)[3:].tolist() == [True, False, False]


def test_quick_tier_sweeps_whole_domains():
    sw = {s.name: s for s in X.sweeps("quick")}
    # every fp16 value in the domain of each unary float operation, one request each
    for op in X.UNARY_FLOAT:
        (x,) = sw[f"{op.name}-fp16"].make_inputs()
        assert x.size == int(X.domain_mask(op, X.fp16_all()).sum()), op.name
    # every byte pair of quantised ADD, every code of quantised LOGISTIC
    a, b = sw["ADD-quant8-a_0.5z128_b_0.25z0_out_0.75z128_act_0"].make_inputs()
    assert np.unique(a.astype(np.int32) * 256 + b).size == 65536
    (c,) = sw["LOGISTIC-quant8_signed-in0.1z0-out0.00390625z-128"].make_inputs()
    assert sorted(c.tolist()) == list(range(-128, 128))
    # the extremes of the zero points and scales are in the grid
    names = " ".join(sw)
    assert "in1.52588e-05z0" in names and "in256z255" in names and "in256z127" in names
    # operation/type combinations NNAPI refuses are left out by rule
    assert not any(n.startswith("NEG-quant8") for n in sw) and "DIV-quant8" not in names


def test_full_tier_every_fp16_pair_in_chunks():
    full = [s for s in X.sweeps("full") if s.name.startswith("MAXIMUM-fp16-pairs-") and "stratified" not in s.name]
    assert len(full) == 65536 // X.CHUNK - 30  # the 30 chunks of NaN first operands are out of the domain
    a, b = full[3].make_inputs()
    assert a.size == X.CHUNK * (65536 - 2046)  # every non-NaN second operand (chunk 3 holds no NaN)
    assert set(np.unique(a.view(np.uint16)).tolist()) <= set(range(3 * X.CHUNK, 4 * X.CHUNK))


@pytest.mark.parametrize("op", [Op.ADD, Op.POW, Op.DIV, Op.LESS])
def test_pair_chunk_inputs_are_the_masked_product(op):
    # The chunk's inputs are built on a broadcast grid; they must be exactly the pairs of the
    # plain definition (first operands repeated, every second operand tiled, the domain rule).
    v = X.fp16_all()
    for c in (0, 511, 1000):
        a = np.repeat(v[c * X.CHUNK : (c + 1) * X.CHUNK], v.size)
        b = np.tile(v, X.CHUNK)
        keep = X.pair_mask(op, a, b)
        got = X._float_pairs_chunk(op, c)
        for want, have in zip((a[keep], b[keep]), got):
            assert np.array_equal(want.view(np.uint16), have.view(np.uint16)), (op, c)


def test_every_sweep_of_a_tier_is_one_of_a_kind():
    # a sweep made twice (the comparisons once per output encoding they do not have) costs a
    # second run and gives two rows of one test id
    for tier in X.TIERS:
        names = [s.name for s in X.sweeps(tier)]
        assert len(names) == len(set(names)), tier
    compare = [s for s in X.sweeps("full") if s.operation == Op.EQUAL and s.data_type == "quant8"]
    assert len(compare) == 16  # every (a, b) encoding pair of the grid once


def test_shards_partition_the_sweeps():
    items = list(range(23))
    parts = [X.shard(items, (i, 4)) for i in range(1, 5)]
    assert sorted(sum(parts, [])) == items and all(parts)
    assert X.parse_shard(" 2/8 ") == (2, 8)
    for bad in ("0/4", "5/4", "a/b", "3"):
        with pytest.raises(ValueError, match="not a shard"):
            X.parse_shard(bad)


def test_error_stats_ulps_fractions_and_histogram():
    from helpers import relu_model

    from nnconform.ir import ModelBuilder
    from nnconform.ir import OperandType as T

    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT16, (4,))
    b.operation(Op.EXP, [x], [b.output(T.TENSOR_FLOAT16, (4,))])
    m = b.build()
    e = np.array([1.0, 2.0, 4.0, 8.0], np.float16)
    a = e.copy()
    a[1] = np.nextafter(e[1], np.float16(3), dtype=np.float16)  # 1 ULP
    a[3] = np.float16(9.0)  # 128 ULP, far out of tolerance
    s = X.error_stats(m, e, a)
    assert s.failing.tolist() == [3] and s.worst_index == 3
    summ = s.summary()
    assert summ["worst_ulp"] == 128 and summ["histogram"] == {"0": 2, "1": 1, "64-255": 1}
    assert summ["worst_fraction"] > 1 and summ["criterion"] == "default+relaxed.float16"
    # RELU is exact: any difference is an infinite fraction of its (zero) tolerance
    s = X.error_stats(relu_model(), np.zeros(4, np.float32), np.array([0, 0, 0, 1e-30], np.float32))
    assert s.failing.tolist() == [3] and s.summary()["worst_fraction"] == "inf"


def _run(tmp_path: Path, driver: str, select: str, *, cli: bool = False) -> list[dict]:
    report = tmp_path / "report"
    if cli:
        cmd = [sys.executable, "-m", "nnconform", "run", "--driver", driver, "--suite", "exhaustive"]
        cmd += ["--report-dir", str(report), "--seed", "5", "--", "-k", select]
    else:
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout", "0"]
        cmd += [str(Path(suites.__file__).with_name("test_exhaustive.py")), "--driver", driver]
        cmd += ["--nn-report-dir", str(report), "--nn-seed", "5", "--nn-progress", "0", "-k", select]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=dict(os.environ))
    journal = report / "results.jsonl"
    assert journal.is_file(), r.stdout[-2000:] + r.stderr[-2000:]
    rows = [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]
    assert rows, r.stdout[-2000:] + r.stderr[-2000:]
    return rows


def test_reference_passes_and_rows_carry_the_error_report(tmp_path):
    rows = _run(tmp_path, "reference", "LOG or TANH or ADD-quant8 or DEQUANTIZE-quant8-in0")
    assert {r["outcome"] for r in rows} == {"PASS"}, [r["message"] for r in rows if r["outcome"] != "PASS"]
    info = {r["test_id"]: r["extra"]["exhaustive"] for r in rows}
    log = info["exhaustive/LOG-fp32"]
    assert log["elements"] > 60000 and log["failing"] == 0 and log["worst_ulp"] is not None
    assert sum(log["histogram"].values()) == log["elements"]
    assert info["exhaustive/ADD-quant8-a_0.5z128_b_0.25z0_out_0.75z128_act_0"]["elements"] == 65536


# (double, -k selection, failing sweep, element it must be shrunk to)
CAUGHT = [
    ("LogFlushesSubnormals", "LOG-fp32 or EXP-fp32", "exhaustive/LOG-fp32", None),
    ("TanhFp16Band", "TANH-fp16 or LOGISTIC-fp16", "exhaustive/TANH-fp16", None),
    ("MulFlushesInputs", "MUL-fp32 or DIV-fp32", "exhaustive/MUL-fp32-pairs-stratified", None),
    (
        "QuantAddOnePair",
        "ADD-quant8-a_0.5z128 or ADD-quant8_signed",
        "exhaustive/ADD-quant8-a_0.5z128_b_0.25z0_out_0.75z128_act_0",
        [[200], [37]],
    ),
]


def test_full_tier_through_the_cli_catches_the_pair_at_every_grid_point(tmp_path):
    """`nnconform run --suite exhaustive` runs the full tier: the grid points of the selection
    (3 output encodings x 4 fused activations) fail on the one byte pair alone."""
    rows = _run(tmp_path, double("broken_sweep", "QuantAddOnePair"), "ADD-quant8-a_0.25z128_b_1z255", cli=True)
    assert len(rows) == 12
    failed = [r for r in rows if r["outcome"] == "FAIL"]
    # where the bumped code saturates at 255 (an output encoding whose top the pair reaches)
    # the defect does not show; everywhere else it does
    assert len(failed) >= 6 and {r["outcome"] for r in rows} <= {"FAIL", "PASS"}
    for r in failed:
        ex = load_spec(r["spec_path"]).examples[0]
        assert [np.asarray(x).tolist() for x in ex.inputs] == [[200], [37]], r["test_id"]
    run = json.loads((tmp_path / "report" / "run.json").read_text())
    assert run.get("exhaustive tier") == "full"


@pytest.mark.parametrize("name,select,failing,inputs", CAUGHT, ids=[c[0] for c in CAUGHT])
def test_broken_driver_caught_with_a_small_spec(tmp_path, name, select, failing, inputs):
    rows = _run(tmp_path, double("broken_sweep", name), select)
    bad = [r for r in rows if r["outcome"] != "PASS"]
    assert [r["test_id"] for r in bad] == [failing], [(r["test_id"], r["message"]) for r in rows]
    assert len(rows) > 1  # the other sweeps of the selection pass: the defect is that one
    (row,) = bad
    info = row["extra"]["exhaustive"]
    assert info["shrunk_to"] <= 3 and "shrunk to" in row["message"]
    spec = load_spec(row["spec_path"])
    ex = spec.examples[0]
    assert all(np.asarray(x).size <= 3 for x in ex.inputs)
    if inputs is not None:
        assert [np.asarray(x).tolist() for x in ex.inputs] == inputs
    if name == "LogFlushesSubnormals":
        (x,) = ex.inputs
        assert np.all((np.asarray(x) != 0) & (np.abs(np.asarray(x)) < np.finfo(np.float32).tiny))
    if name == "MulFlushesInputs":
        assert "subnormal inputs read as 0" in row["message"] and info["flushed_subnormals"] > 0
    if name == "TanhFp16Band":
        (x,) = ex.inputs
        assert np.all((np.asarray(x) >= 0.5) & (np.asarray(x) <= 0.504))
    # the dumped spec replays to the same failure
    r = subprocess.run(
        [sys.executable, "-m", "nnconform", "replay", row["spec_path"]],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 1, r.stdout + r.stderr


def test_report_section_one_line_per_operation_and_type():
    from nnconform.reports.html_report import _exhaustive_rows, render_html
    from nnconform.verdict.results import ResultRecord

    def row(test_id, outcome, **info):
        base = {"operation": "TANH", "data_type": "fp16", "grid": "all", "elements": 10, "worst_ulp": 0}
        return ResultRecord(
            suite="exhaustive", test_id=test_id, driver="d", outcome=outcome, extra={"exhaustive": {**base, **info}}
        )

    recs = [
        row("exhaustive/a", "PASS", worst_fraction=0.5),
        row("exhaustive/b", "FAIL", grid="in 0.1z0", worst_ulp=155, worst_fraction=5.39, shrunk_to=1),
        row("exhaustive/c", "PASS", operation="LOG", worst_fraction="inf"),
    ]
    rows = _exhaustive_rows(recs)
    assert rows == [
        ["LOG fp16", "1/1", "10", "0", "inf", ""],
        ["TANH fp16", "1/2", "20", "155", "5.39", "in 0.1z0 (1 input(s) in its spec)"],
    ]
    assert '<section id="exhaustive">' in render_html(recs)


@pytest.mark.parametrize("op", [Op.LOGISTIC, Op.TANH])
def test_reference_zero_point_code_at_a_coarse_input_scale(op):
    """Found by the sweep (onnxruntime disagreed): with input scale 256 the fixed-point input
    radius is 0 and AOSP's saturation test sent the zero-point code (exactly 0.0) to the
    bottom of the range; logistic(0) = 0.5 and tanh(0) = 0."""
    from nnconform.reference.executor import execute

    for t, zp, want in ((X.Q8, 255, 128), (X.Q8S, 127, 0)):
        model = X._unary_builder(op, t, qin=(256.0, zp), qout=X._FIXED_OUT[(op, t)])(3)
        dt = np.uint8 if t == X.Q8 else np.int8
        (y,) = execute(model, [np.array([zp, zp - 1, zp - 200], dt)])
        lo = 0 if t == X.Q8 else -128
        assert y.tolist() == [want, lo, lo], (op.name, t.name)


def test_a_bad_shard_is_one_line_and_exit_2(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "nnconform", "run", "--suite", "exhaustive", "--shard", "5/4"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert r.returncode == 2 and "not a shard" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "nnconform-report").exists()


@pytest.mark.parametrize("name", ["WrongDtype", "GarbageResult"])
def test_a_result_without_values_to_measure_is_the_runners_verdict(tmp_path, name):
    rows = _run(tmp_path, double("broken", name), "ABS-fp16 or ADD-quant8-a_0.5z128")
    assert len(rows) == 2 and {r["outcome"] for r in rows} == {"FAIL"}, [r["message"] for r in rows]
    for r in rows:
        assert "elements" not in r["extra"]["exhaustive"], r["extra"]  # nothing to measure
        assert r["message"]


def test_no_flush_rule_is_about_subnormal_inputs():
    from nnconform.ir import OperandType as T

    mul = X._binary_builder(Op.MUL, T.TENSOR_FLOAT32, act=0)(3)
    a = np.array([1e-40, 1e-20, 2.0], np.float32)
    b = np.array([1.0, 1e-20, 3.0], np.float32)
    e = a * b  # 1e-40 (subnormal input), 1e-40 (normal inputs), 6
    got = np.array([0.0, 0.0, 6.0], np.float32)
    s = X.error_stats(mul, e, got, inputs=[a, b])
    assert s.flushed == 1 and s.failing.tolist() == [0]  # the far tail of normal inputs is the tolerance's
    assert X.error_stats(mul, e, got).flushed == 0  # without the inputs: tolerance only
    relaxed = X._binary_builder(Op.MUL, T.TENSOR_FLOAT32, act=0, relaxed=True)(3)
    assert X.error_stats(relaxed, e, got, inputs=[a, b]).flushed == 0  # relaxed models may flush
