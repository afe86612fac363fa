"""The stress runner: plans, random graphs, verdicts against ground truth, kill -9 and resume."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import pytest
from helpers import double, double_module

from nnconform.cases import exhaustive as X
from nnconform.cli import main
from nnconform.ir import OperationType as Op
from nnconform.ir.spec import load_spec
from nnconform.ir.validation import validate_model
from nnconform.reference.executor import Executor
from nnconform.stress.random_models import random_model
from nnconform.stress.runner import (
    StressConfig,
    build_plan,
    case_seed,
    plan_counts,
    run_stress,
)
from nnconform.stress.tests import TESTS, StressOptions, exhaustive_params
from nnconform.verdict.results import read_results

_broken_stress = double_module("broken_stress")
check_against_log, parse_rates = _broken_stress.check_against_log, _broken_stress.parse_rates

SHORT = {
    name: 1.0
    for name in (
        "parallel-inference",
        "multi-process-inference",
        "multi-process-model-load",
        "client-early-termination",
        "performance-degradation",
        "leak",
        "compile-leak",
        "execution-soak",
    )
}
# No verdict of these tests may depend on how busy the machine is (CI: 2 shared cores):
# - a generous hang grace: it only bounds a case's wall clock (a correct driver never waits
#   for it), so a slow machine is not a HANG;
# - no latency limit in the harness's own tests: performance-degradation's timing verdict is
#   the stress command's job; here its row must hold measured latencies.
GRACE = 60.0
NO_PERF_LIMIT = 1e9
QUICK_SWEEPS = len(X.sweeps("quick"))


# ---- random graphs ------------------------------------------------------------------------


@pytest.mark.parametrize("num_ops,max_dim", [(10, 1000), (600, 10)])
def test_random_models_are_valid_sized_and_finite(num_ops, max_dim):
    for seed in range(4):
        rm = random_model(seed, num_ops, max_dim)
        validate_model(rm.model)
        # one not-comparable flag per output (TOPK_V2 indices), as the random suite uses them
        assert len(rm.ignored) == len(rm.model.main.output_indexes)
        # candidates the op's own validation rejects are dropped, so allow some shortfall
        assert num_ops // 2 <= len(rm.model.main.operations) <= num_ops
        outs = Executor(rm.model).run(rm.inputs)
        assert all(np.isfinite(x).all() for x in outs if x.dtype.kind == "f")


def test_random_models_repeat_from_the_seed():
    a, b, c = random_model(7, 40, 10), random_model(7, 40, 10), random_model(8, 40, 10)
    assert [o.type for o in a.model.main.operations] == [o.type for o in b.model.main.operations]
    assert all(np.array_equal(x, y) for x, y in zip(a.inputs, b.inputs))
    assert [o.dimensions for o in a.model.main.operands] != [o.dimensions for o in c.model.main.operands]


# ---- planning -------------------------------------------------------------------------------


def test_plan_is_deterministic_interleaved_and_case_params_ignore_the_budget():
    o = StressOptions()
    small = build_plan(plan_counts(list(TESTS), 120, 2, o), 5, o)
    big = build_plan(plan_counts(list(TESTS), 3600, 2, o), 5, o)
    assert [c.key for c in small] == [c.key for c in build_plan(plan_counts(list(TESTS), 120, 2, o), 5, o)]
    assert {c.test for c in small} == set(TESTS)  # every test gets a case
    assert len({c.key for c in small}) == len(small)
    by_key = {c.key: c for c in big}
    for c in small:  # same case, same seed and params
        assert by_key[c.key].seed == c.seed == case_seed(5, c.test, c.index)
        assert by_key[c.key].params == c.params
    assert small[0].test != small[1].test  # interleaved, not grouped
    assert case_seed(5, "leak", 0) != case_seed(6, "leak", 0)


# ---- runs ----------------------------------------------------------------------------------


def _cfg(tmp_path, driver="reference", **kw):
    kw.setdefault(
        "options",
        StressOptions(
            durations=dict(SHORT),
            threads=2,
            processes=1,
            client_threads=1,
            hang_grace=GRACE,
            perf_threshold=NO_PERF_LIMIT,
            # one quick-tier sweep per exhaustive case: the full tier's shards take minutes
            exhaustive_tier="quick",
            exhaustive_shards=QUICK_SWEEPS,
        ),
    )
    return StressConfig(
        driver=driver,
        budget_s=kw.pop("budget_s", 60),
        tests=kw.pop("tests", list(TESTS)),
        workers=kw.pop("workers", 2),
        seed=kw.pop("seed", 11),
        report_dir=str(tmp_path / "run"),
        **kw,
    )


def test_reference_driver_passes_every_stress_test(tmp_path, capsys):
    # One case of every test (two of the random ones: both graph sizes), short durations.
    cases = [f"{t}#0" for t in TESTS] + ["random-model-load#1", "random-inference#1"]
    code = run_stress(_cfg(tmp_path, cases=cases))
    rows = read_results(tmp_path / "run" / "results.jsonl")
    assert sorted(r.test_id for r in rows) == sorted(cases)
    assert all(r.outcome == "SUCCESS" for r in rows), [(r.test_id, r.message) for r in rows if not r.good]
    assert code == 0
    # performance-degradation measured both latencies (its +50% verdict is not judged here)
    [perf] = [r for r in rows if r.test_id == "performance-degradation#0"]
    assert perf.extra["latency_alone_ms"] > 0 and perf.extra["latency_loaded_ms"] > 0
    assert perf.extra["executions"] > 0 and perf.extra["compiles"] > 0
    assert (tmp_path / "run" / "results.csv").exists() and (tmp_path / "run" / "report.html").exists()
    assert f"all {len(cases)} planned cases done" in capsys.readouterr().out


def test_randomly_broken_driver_every_verdict_right_and_nothing_lost(tmp_path, monkeypatch):
    log = tmp_path / "truth.log"
    monkeypatch.setenv("NNCONFORM_BROKEN_LOG", str(log))
    monkeypatch.setenv(
        "NNCONFORM_BROKEN_RATES", "seed=8,crash=0.12,exit=0.08,hang=0.08,leak=0.1,raise=0.12,garbage=0.12"
    )
    cases = [f"random-inference#{i}" for i in range(24)]
    # Hangs wait out the whole limit (2 s + grace), so the grace is a compromise: long enough
    # that a slow, busy machine does not turn a working case into a HANG (a cold 600-op case
    # takes ~1 s on 2 loaded cores), short enough for the two hangs this seed draws.
    opts = StressOptions(hang_grace=8.0)
    # The budget only bounds the time (the cases are listed): every CRASH/HANG of a random
    # graph is also run again to be shrunk, which a loaded machine pays for.
    code = run_stress(
        _cfg(
            tmp_path,
            double("broken_stress", "RandomlyBroken"),
            cases=cases,
            options=opts,
            probe_timeout=10,
            budget_s=240,
        )
    )
    rows = read_results(tmp_path / "run" / "results.jsonl")
    assert sorted(r.test_id for r in rows) == sorted(cases)  # none lost, none twice
    assert check_against_log(rows, log) == []
    seen = Counter(r.outcome for r in rows)
    assert set(seen) == {"SUCCESS", "FAILURE", "HANG", "CRASH"}, seen  # the seed exercises all four
    assert code == 1
    for r in rows:
        if r.outcome in ("CRASH", "HANG"):
            assert r.extra["liveness"]["verdict"] in ("SUCCESS", "FAILURE", "CRASH", "HANG")
            assert "liveness" in r.message.lower()
        if r.outcome == "CRASH" and r.extra.get("signal") == signal.SIGSEGV:
            assert "Segmentation fault" in r.extra["stderr_tail"]
        if not r.good:  # every bad case can be replayed
            assert f"--case '{r.test_id}'" in r.replay and "--seed 11" in r.replay
            spec = load_spec(r.spec_path)
            assert spec.meta["test_id"] == r.test_id and spec.examples


def test_rates_parser_rejects_unknown_keys():
    assert parse_rates("seed=4,crash=0.5")[0] == 4
    with pytest.raises(ValueError):
        parse_rates("explode=0.1")


def _stress_with_rows(rdir, cases: list[str], rows: int, extra=(), **popen) -> subprocess.Popen:
    """`nnconform stress` of exactly ``cases`` (so the plan does not depend on how fast this
    machine is today), returned once ``rows`` of them are recorded (or it has ended)."""
    args = [
        sys.executable,
        "-m",
        "nnconform",
        "stress",
        "--driver",
        "reference",
        "--budget",
        "10m",
        "--workers",
        "2",
        "--seed",
        "3",
        "--report-dir",
        str(rdir),
        *extra,
    ]
    for c in cases:
        args += ["--case", c]
    runner = subprocess.Popen(args, **popen)
    journal = rdir / "results.jsonl"
    # (a deadline only so a broken runner cannot hang the test; a slow machine just waits)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and runner.poll() is None:
        if journal.exists() and len(read_results(journal)) >= rows:
            break
        time.sleep(0.05)
    return runner


def test_sigterm_ends_a_stress_run_as_interrupted_and_resume_finishes_it(tmp_path):
    """A nightly stress run under `timeout` gets SIGTERM: it stops as Ctrl-C stops it (the
    workers killed, the reports rebuilt, "interrupted" and the resume hint printed), instead of
    dying with its reports stale."""
    from nnconform.stress.runner import EXIT_INTERRUPTED

    rdir = tmp_path / "run"
    cases = [f"{t}#{i}" for i in range(8) for t in ("random-model-load", "random-inference")]
    runner = _stress_with_rows(rdir, cases, 4, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    journal = rdir / "results.jsonl"
    signalled = time.time()
    runner.send_signal(signal.SIGTERM)
    out, err = runner.communicate(timeout=300)
    rows = read_results(journal)
    if len(rows) == len(cases):
        pytest.skip("the stress run finished before the SIGTERM reached it (nothing was left to interrupt)")
    assert runner.returncode == EXIT_INTERRUPTED, out[-2000:] + err[-2000:]
    assert "SIGTERM: stopping the run as Ctrl-C would" in err and "interrupted:" in out
    # (file times come from the kernel's coarse clock, up to a tick behind time.time())
    assert (rdir / "report.html").stat().st_mtime >= signalled - 0.05, "the reports are rebuilt after the signal"
    assert main(["stress", "--resume", "--report-dir", str(rdir)]) == 0
    keys = [r.test_id for r in read_results(journal)]
    assert len(keys) == len(set(keys)) == len(cases)


def test_kill_9_then_resume_loses_and_repeats_nothing(tmp_path):
    rdir = tmp_path / "run"
    marker = f"killtest{os.getpid()}"  # in the worker env, so we can find our workers
    # An explicit case list, so the plan does not depend on how fast this machine is today;
    # the kill comes at 20 rows, so 22 or so are left for --resume.
    cases = [f"{t}#{i}" for i in range(20) for t in ("random-model-load", "random-inference")] + ["leak#0", "leak#1"]
    env = dict(os.environ, NNCONFORM_TEST_MARK=marker)
    runner = _stress_with_rows(
        rdir, cases, 20, ["--duration", "leak=1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    journal = rdir / "results.jsonl"
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    before = {r.test_id: r for r in read_results(journal)}
    assert len(before) >= 20
    manifest = json.loads((rdir / "run.json").read_text())
    planned = len(manifest["cases"])
    assert len(before) < planned, "the run finished before it was killed; nothing to resume"
    # The workers notice their parent is gone (their watchdog polls every 0.5 s; a busy
    # machine may take longer, so wait for it rather than for a fixed time).
    deadline = time.monotonic() + 120
    while (leftovers := [p for p in _worker_pids() if _env_has(p, marker)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leftovers == []

    code = main(["stress", "--resume", "--report-dir", str(rdir)])
    after = read_results(journal)
    keys = [r.test_id for r in after]
    assert len(keys) == len(set(keys)) == planned  # every planned case once
    for r in after:  # rows written before the kill untouched
        if r.test_id in before:
            assert r.timestamp == before[r.test_id].timestamp
    assert code == 0
    assert len(json.loads((rdir / "run.json").read_text())["sessions"]) == 2


def _worker_pids() -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if b"nnconform.isolation.sandbox" in f.read():
                        out.append(int(d))
            except OSError:
                pass
    return out


def _env_has(pid: int, marker: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return marker.encode() in f.read()
    except OSError:
        return False


def test_cli_usage_errors_are_one_line(tmp_path, capsys):
    assert main(["stress", "--tests", "no-such-test", "--report-dir", str(tmp_path / "a")]) == 2
    assert main(["stress", "--budget", "soon", "--report-dir", str(tmp_path / "b")]) == 2
    assert main(["stress", "--driver", "nope_nope:X", "--report-dir", str(tmp_path / "c")]) == 2
    assert main(["stress", "--resume", "--report-dir", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and all(line.startswith("nnconform: error:") for line in err)


def test_reports_rebuild_from_the_journal_alone(tmp_path, capsys):
    run_stress(_cfg(tmp_path, cases=["random-model-load#0", "random-inference#0"]))
    rdir = tmp_path / "run"
    for f in ("results.csv", "report.html"):
        (rdir / f).unlink()
    assert main(["stress", "--report-only", "--report-dir", str(rdir)]) == 0
    assert "random-inference#0" in (rdir / "results.csv").read_text()
    # the rebuilt page states its verdict and driver first, then the report's kind (issue #46)
    assert re.search(r"<title>[^<:]+: 2 SUCCESS - nnconform stress report</title>", (rdir / "report.html").read_text())


def test_random_graphs_draw_only_claimed_cells_of_every_claimed_type(tmp_path, capsys):
    """Issue 13: stress random graphs rotate over the data types the driver claims and draw only
    the (operation, rank) cells it claims; the claims are asked once and kept in the manifest."""
    from nnconform.stress.tests import graph_of

    driver = double("broken_partial", "HalfReferenceEven")
    cases = [f"random-model-load#{i}" for i in range(12)]
    code = run_stress(_cfg(tmp_path, driver=driver, cases=cases, tests=["random-model-load"]))
    assert code == 0
    out = capsys.readouterr().out
    assert "random graphs draw the driver's claimed cells" in out
    claims = json.loads((tmp_path / "run" / "run.json").read_text())["options"]["claims"]
    # the driver claims only even operation codes: every claimed cell is one
    assert claims and all(int(Op[c.rpartition(":")[0]]) % 2 == 0 for cells in claims.values() for c in cells)
    rows = read_results(tmp_path / "run" / "results.jsonl")
    assert sorted(r.test_id for r in rows) == sorted(cases) and all(r.outcome == "SUCCESS" for r in rows)
    types = {r.extra["params"]["dtype"] for r in rows}
    assert len(types) >= 4 and types <= set(claims), types
    assert {r.extra["params"]["value_classes"] for r in rows} == {False, True}
    for r in rows:  # the journal keeps the count of cells, the graph is rebuilt from the claims
        p = dict(r.extra["params"], cells=claims[r.extra["params"]["dtype"]])
        assert r.extra["params"]["cells"] == len(p["cells"])
        ops = graph_of(p).model.main.operations
        assert ops and all(int(op.type) % 2 == 0 for op in ops)
        assert "not supported" not in r.message


def test_random_model_load_prepares_the_claimed_partitions(tmp_path):
    """A graph the driver supports in part is loaded as Android would: its partitions."""
    cases = ["random-model-load#1"]  # the 600-operation graph: both sides certainly appear
    opts = StressOptions(durations=dict(SHORT), hang_grace=GRACE)
    run_stress(
        _cfg(
            tmp_path,
            driver=double("broken_partial", "HalfReferenceOdd"),
            cases=cases,
            tests=["random-model-load"],
            options=opts,
            claims=False,
        )
    )
    [row] = read_results(tmp_path / "run" / "results.jsonl")
    assert row.outcome == "SUCCESS" and row.message.startswith("partitioned: "), row.message
    assert row.extra["partitioned"] is True


# ---- the exhaustive suite's shards ----------------------------------------------------------


def test_exhaustive_cases_rotate_over_the_shards_and_come_first_like_every_test():
    o = StressOptions(exhaustive_shards=8, run_seed=6)
    assert [exhaustive_params(k, 0, o)["shard"] for k in range(4)] == [7, 8, 1, 2]
    # successive nights with seeds 0, k, 2k, ... and k cases each tile the shards in order
    nights = [
        exhaustive_params(k, 0, StressOptions(exhaustive_shards=8, run_seed=3 * night))["shard"]
        for night in range(3)
        for k in range(3)
    ]
    assert nights == [1, 2, 3, 4, 5, 6, 7, 8, 1]
    # in a whole plan, the exhaustive test gets its first case before any test gets a second
    opts = StressOptions(run_seed=5)
    counts = plan_counts(list(TESTS), 3600, 2, opts)
    assert counts["exhaustive"] > 1
    plan = build_plan(counts, 5, opts)
    first_second = min(i for i, c in enumerate(plan) if c.index > 0)
    assert {c.test for c in plan[:first_second]} == set(TESTS)
    shards = [c.params["shard"] for c in plan if c.test == "exhaustive"]
    assert shards == [(5 + k) % 256 + 1 for k in range(counts["exhaustive"])]


def test_exhaustive_case_runs_its_shard_and_rows_name_it(tmp_path):
    code = run_stress(_cfg(tmp_path, tests=["exhaustive"], cases=["exhaustive#0", "exhaustive#1"], seed=40))
    rows = {r.test_id: r for r in read_results(tmp_path / "run" / "results.jsonl")}
    assert code == 0 and set(rows) == {"exhaustive#0", "exhaustive#1"}
    quick = X.sweeps("quick")
    for k in (0, 1):
        r = rows[f"exhaustive#{k}"]
        assert r.outcome == "SUCCESS", r.message
        assert r.extra["shard"] == f"{41 + k}/{QUICK_SWEEPS}" and r.extra["sweeps"] == 1
        assert r.extra["passed"] == 1 and r.extra["failed"] == 0
        assert r.extra["elements"] == quick[40 + k].make_inputs()[0].size
        assert f"shard {41 + k}/{QUICK_SWEEPS}" in r.message


def test_exhaustive_case_fails_on_a_broken_sweep_with_the_command_to_rerun_it(tmp_path):
    # the seed puts fp16 TANH (wrong on a narrow band) in case 0's shard
    names = [s.name for s in X.sweeps("quick")]
    seed = names.index("TANH-fp16")
    driver = double("broken_sweep", "TanhFp16Band")
    code = run_stress(_cfg(tmp_path, driver=driver, tests=["exhaustive"], cases=["exhaustive#0"], seed=seed))
    (row,) = read_results(tmp_path / "run" / "results.jsonl")
    assert code == 1 and row.outcome == "FAILURE"
    assert row.extra["failed"] == 1 and row.extra["failing_sweeps"][0]["sweep"] == "TANH-fp16"
    assert row.extra["failing_sweeps"][0]["failing"] == 8  # the eight values of the band
    assert "TANH-fp16" in row.message and "--nn-shard" in row.extra["rerun"]
    assert driver in row.extra["rerun"] and "<driver>" not in row.message
    assert f"--seed {seed}" in row.replay and "--exhaustive-tier quick" in row.replay
