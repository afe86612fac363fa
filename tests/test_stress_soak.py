"""Issue 20 soak tests in `nnconform stress`: the compile-loop leak watch, the execution-count
soak (past 2^16 executions of one prepared model) and the whole-life leak verdict, each
catching its broken driver of tests/drivers/broken_domains.py while the reference passes."""

from __future__ import annotations

from helpers import double

from nnconform.stress.runner import StressConfig, run_stress
from nnconform.stress.tests import StressOptions, worker_life_leaks
from nnconform.verdict.results import read_results

BROKEN = double("broken_domains")
GRACE = 120.0


def _run(tmp_path, driver, cases, durations, **opts):
    options = StressOptions(durations=durations, hang_grace=GRACE, **opts)
    code = run_stress(
        StressConfig(
            driver=driver,
            budget_s=600,
            tests=sorted({c.split("#")[0] for c in cases}),
            workers=1,
            seed=5,
            report_dir=str(tmp_path / "run"),
            cases=cases,
            options=options,
        )
    )
    return code, read_results(tmp_path / "run" / "results.jsonl")


def test_reference_passes_the_soaks_and_reports_rates(tmp_path):
    code, rows = _run(
        tmp_path, "reference", ["compile-leak#0", "execution-soak#0"], {"compile-leak": 3.0, "execution-soak": 600.0}
    )
    assert code == 0, [(r.test_id, r.message) for r in rows]
    by = {r.test_id: r for r in rows}
    soak = by["execution-soak#0"].extra
    assert soak["executions"] == 70_000 and soak["target_reached"] and soak["executions_per_s"] > 0
    comp = by["compile-leak#0"].extra
    assert comp["compilations"] > 5 and comp["compilations_per_s"] > 0 and "kib_per_compilation" in comp


def test_a_leak_per_compilation_is_caught(tmp_path):
    code, rows = _run(tmp_path, BROKEN + "LeaksPerCompilation", ["compile-leak#0"], {"compile-leak": 3.0})
    (row,) = rows
    assert code == 1 and row.outcome == "FAILURE", row.message
    assert "per compilation" in row.message and row.extra["kib_per_compilation"] > 100


def test_a_crash_after_65536_executions_is_caught(tmp_path):
    code, rows = _run(tmp_path, BROKEN + "CrashesAfter65536", ["execution-soak#0"], {"execution-soak": 600.0})
    soak = [r for r in rows if r.test_id == "execution-soak#0"]
    assert code == 1 and soak[0].outcome == "CRASH", [(r.test_id, r.outcome, r.message) for r in rows]


def test_whole_life_leak_verdict(tmp_path):
    rows = [
        {"extra": {"worker_pid": 1, "rss_mb": 100.0}},
        {"extra": {"worker_pid": 2, "rss_mb": 90.0}},
        {"extra": {"worker_pid": 1, "rss_mb": 700.0}},
        {"extra": {"worker_pid": 2, "rss_mb": 95.0}},
    ]
    (leak,) = worker_life_leaks(rows, 512)
    assert leak["worker_pid"] == 1 and leak["growth_mb"] == 600.0 and leak["cases"] == 2
    # end to end: a cache that never forgets grows the worker over many distinct random models
    cases = [f"random-model-load#{i}" for i in range(24)]
    code, out = _run(tmp_path, BROKEN + "CachesEveryModel", cases, {}, worker_leak_mb=40.0)
    life = [r for r in out if r.test_id.startswith("worker-life#")]
    assert code == 1 and life and life[0].outcome == "FAILURE", [(r.test_id, r.outcome, r.message) for r in out]
    assert all(r.outcome == "SUCCESS" for r in out if not r.test_id.startswith("worker-life#"))
