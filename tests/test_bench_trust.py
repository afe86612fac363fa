"""A benchmark you can trust (issue 49): the statistics, the audits, accuracy traced to an
operation, the fall-back gate and verdicts against a baseline, each shown to catch its
broken driver (tests/drivers/broken_bench.py).  No wall-clock bound is asserted: the broken
drivers sleep far beyond any noise, and the self-comparison gets generous thresholds."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from helpers import double

from nnconform.bench import Settings, gate, run_bench, statistics, write_artifacts, write_csv
from nnconform.bench import baseline as bl
from nnconform.cli import main
from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.models import ModelEntry, builtin_entries

# Small runs: p50 needs 11 queries by the early-stopping rule.
FAST = dict(warmup=1, iterations=11, inputs_count=2, percentile=50.0, audit_queries=12)


def _floor_entry() -> ModelEntry:
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [1, 16])
    b.operation(Op.FLOOR, [x], [b.output(T.TENSOR_FLOAT32, [1, 16])])
    m = b.build()
    return ModelEntry(
        "floor16",
        "builtin",
        False,
        "test",
        lambda: m,
        lambda model, seed: [np.random.default_rng(seed).normal(size=(1, 16)).astype(np.float32)],
    )


# ---- statistics --------------------------------------------------------------------------


def test_mlperf_early_stopping_query_counts():
    assert statistics.min_queries(90) == 64 and statistics.min_queries(99) == 662
    # the rule itself: with n queries at most one may be slower than the percentile
    cdf = statistics.binomial_cdf(64, 0.1)
    assert cdf[1] <= 0.01 < statistics.binomial_cdf(63, 0.1)[1]


@pytest.mark.parametrize("n, pc", [(11, 50), (64, 90), (200, 90), (700, 99)])
def test_order_statistic_intervals_cover_at_the_confidence(n, pc):
    lo, hi = statistics.order_ranks(n, pc)
    cdf = statistics.binomial_cdf(n, pc / 100)
    coverage = cdf[hi - 1] - cdf[lo - 1]  # P(lo <= B <= hi - 1)
    assert coverage >= statistics.CONFIDENCE and 1 <= lo < hi <= n
    # and the interval is the narrowest equal-tailed one: one rank in on either side loses it
    assert cdf[lo] > (1 - statistics.CONFIDENCE) / 2 and cdf[hi - 2] < 1 - (1 - statistics.CONFIDENCE) / 2


def test_intervals_on_samples_and_the_early_stopping_estimate():
    rng = np.random.default_rng(7)
    lat = rng.exponential(size=400)
    iv = statistics.percentile_interval(lat, 90)
    assert iv.low <= iv.value <= iv.high and iv.supported
    assert statistics.percentile_interval(lat[:20], 99).supported is False
    est, discarded = statistics.early_stopping_estimate(lat, 90)
    assert est >= iv.value and discarded < 40 and est in lat
    assert statistics.early_stopping_estimate(lat[:10], 90) is None  # fewer than 64 queries
    assert statistics.order_ranks(5, 50) is None  # 5 samples cannot hold a 99 % median interval


# ---- the audits and accuracy, each against its broken driver -------------------------------


def test_a_driver_that_caches_results_fails_the_audit_and_the_reference_passes(tmp_path):
    rows = run_bench(
        ["reference", double("broken_bench", "CachesResults")],
        [_floor_entry()],
        Settings(**FAST, scenarios=("single-stream",)),
        golden_root=tmp_path,
        log=lambda *a: None,
    )
    ref, cheat = rows
    assert ref.status == "OK" and ref.audit_cache == "PASS" and ref.audit_same_outputs == "PASS", ref.audit_message
    assert ref.verdict in ("PASS", "PASS_WITH_WARNING") and ref.accuracy_verdict == "PASS"
    assert cheat.audit_cache == "FAIL" and cheat.verdict == "FAIL", cheat.audit_message
    assert "caching" in cheat.audit_message and cheat.cache_repeated_p50_ms < cheat.cache_fresh_p50_ms
    # the figures a reader needs are all there: start-up, memory, intervals
    for r in rows:
        assert r.load_ms > 0 and r.compile_without_cache_ms is not None and r.first_execution_ms > 0
        assert r.peak_rss_prepare_mb > 1 and r.peak_rss_execute_mb > 1
        assert r.p50_low_ms <= r.p50_ms <= r.p50_high_ms and r.iterations >= 11 and r.p50_supported


def test_a_low_precision_driver_fails_accuracy_traced_to_an_operation(tmp_path):
    (r,) = run_bench(
        [double("broken_bench", "LowPrecision")],
        [builtin_entries()["mobilenet_v2_float"]],
        Settings(**FAST, scenarios=("single-stream",)),
        golden_root=tmp_path,
        log=lambda *a: None,
    )
    assert r.status == "OK" and r.accuracy_verdict == "FAIL" and r.verdict == "FAIL", r.accuracy_message
    assert r.accuracy_traced_to == "#0 CONV_2D", r.accuracy_message  # the first operation with fp32 weights
    assert r.max_single_error > 0 and r.within_tolerance < 1.0
    assert r.golden == "computed" and list(tmp_path.glob("mobilenet_v2_float-*.npz"))


def test_a_partial_driver_fails_the_fall_back_gate_only_where_a_rule_says(tmp_path):
    rules_file = tmp_path / "must.txt"
    rules_file.write_text("# driver  model  [level]\n*refuses-softmax  mobilenet_v1_*  7\n")
    rules = gate.load_rules(rules_file)
    entries = [builtin_entries()["mobilenet_v1_float"], builtin_entries()["mobilenet_v2_float"]]
    rows = run_bench(
        [double("broken_bench", "RefusesSoftmax")], entries, Settings(**FAST, rules=rules), golden_root=tmp_path
    )
    v1, v2 = rows
    assert v1.status == v2.status == "PARTIAL"
    assert v1.gate == "FAIL" and v1.verdict == "FAIL" and "SOFTMAX" in v1.message and "falls back" in v1.message
    assert v2.gate == "" and v2.verdict == ""  # no rule names it: reported, not judged
    assert v1.ops_on_driver == v1.operations - 1 and 0.99 < v1.driver_share < 1.0
    (tmp_path / "out").mkdir()
    code = write_artifacts(rows, tmp_path / "out", {"seed": 0})
    got = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert code == 1 and [g["outcome"] for g in got] == ["FAIL", "SKIP"]


def test_must_accelerate_file_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("tflite mobilenet_* seven\n")
    with pytest.raises(ValueError, match="bad.txt:1: feature level 'seven'"):
        gate.load_rules(bad)
    with pytest.raises(ValueError, match="cannot read"):
        gate.load_rules(tmp_path / "missing.txt")


# ---- baselines -----------------------------------------------------------------------------


def test_baseline_fails_a_2x_slowdown_and_passes_a_run_against_itself(tmp_path):
    s = Settings(**FAST, scenarios=("single-stream",))
    entry = _floor_entry()
    first = run_bench(["reference"], [entry], s, golden_root=tmp_path, log=lambda *a: None)
    write_csv(first, tmp_path / "bench.csv")
    base = bl.load(tmp_path)
    # the run against itself: every metric PASS under the documented thresholds
    same = bl.compare(first[0].csv_row(), base[("floor16", "reference")], 50.0)
    assert {v for v, _ in same.values()} == {"PASS"}, same
    # a second run of the same driver, with generous thresholds (a loaded machine moves latency)
    generous = {**bl.THRESHOLDS, "latency": {"warn_ratio": 5.0, "fail_ratio": 10.0}}
    again = run_bench(["reference"], [entry], s, golden_root=tmp_path, log=lambda *a: None)
    assert bl.compare(again[0].csv_row(), base[("floor16", "reference")], 50.0, generous)["latency"][0] == "PASS"
    # the deliberate slowdown, named like the baseline's driver so the rows pair up
    slow_rows = run_bench([double("broken_bench", "SlowDown")], [entry], s, golden_root=tmp_path, log=lambda *a: None)
    slow_rows[0].driver = "reference"
    from nnconform.bench import apply_baseline, decide

    apply_baseline(slow_rows, base, 50.0)
    decide(slow_rows[0])
    r = slow_rows[0]
    assert r.baseline_latency == "FAIL" and r.baseline == "FAIL" and r.verdict == "FAIL", r.baseline_message
    assert r.baseline_accuracy == "PASS"


def test_cli_bench_baseline_scenario_and_errors(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # golden outputs go there
    first, second, third = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    common = ["--models", "mobilenet_v1_float", "--iterations", "11", "--percentile", "50", "--inputs", "1"]
    single = [*common, "--scenario", "single-stream"]
    assert main(["bench", "--driver", "reference", *single, "--report-dir", str(first)]) == 0
    # a second driver as the baseline: the deliberate slowdown fails against the reference
    slow = double("broken_bench", "SlowDown")
    args = ["bench", "--driver", "reference", "--driver", slow, "--baseline", "reference", *single]
    assert main([*args, "--report-dir", str(second)]) == 1
    with open(second / "bench.csv") as f:
        ref, slowed = list(csv.DictReader(f))
    assert ref["baseline"] == "" and slowed["baseline_latency"] == "FAIL" and slowed["verdict"] == "FAIL"
    assert slowed["baseline_accuracy"] == "PASS" and "intervals apart" in slowed["baseline_message"]
    # a directory as the baseline, offline only: the rows pair up, accuracy is judged, latency has no percentile
    capsys.readouterr()
    assert main(["bench", "--driver", "reference", *common, "--scenario", "offline", "--baseline", str(first),
                 "--report-dir", str(third)]) in (0, 1)  # fmt: skip
    with open(third / "bench.csv") as f:
        (row,) = list(csv.DictReader(f))
    assert row["offline_qps"] and not row["p50_ms"] and row["audit_cache"] == "PASS"
    assert row["baseline_accuracy"] == "PASS" and row["baseline_latency"] == ""
    page = (second / "report.html").read_text()
    assert "verdict-red" in page and "<script" not in page and "latency: FAIL" in page
    for args, why in [
        (["--scenario", "server"], "unknown scenario server"),
        (["--baseline", str(tmp_path / "nowhere")], "cannot read bench.csv"),
        (["--must-accelerate", str(tmp_path / "none.txt")], "cannot read"),
        (["--percentile", "100"], "below 100"),
        (["--baseline", "reference"], "needs a second --driver"),
    ]:
        capsys.readouterr()
        assert main(["bench", *common, *args, "--report-dir", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err
        assert why in err and err.strip().count("\n") <= 1, err


def test_golden_outputs_are_stored_once_and_recomputed_when_damaged(tmp_path):
    from nnconform.bench.golden import golden_set

    entry = builtin_entries()["mobilenet_v1_quant8"]
    model = entry.load()
    inputs, first, how = golden_set(entry, model, [5, 6], tmp_path)
    assert how == "computed" and len(first) == 2
    _, again, how = golden_set(entry, model, [5, 6], tmp_path)
    assert how == "stored" and all(np.array_equal(a, b) for x, y in zip(first, again) for a, b in zip(x, y))
    (path,) = tmp_path.glob("mobilenet_v1_quant8-*.npz")
    path.write_bytes(b"not a zip")
    _, third, how = golden_set(entry, model, [5, 6], tmp_path)
    assert how == "computed" and all(np.array_equal(a, b) for x, y in zip(first, third) for a, b in zip(x, y))
    assert golden_set(entry, model, [7], tmp_path)[2] == "computed"  # another seed set, another file
