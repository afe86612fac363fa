"""False failures of the reference driver under load (issue 47, point 2): the README's main job
(``nnconform run --driver reference``) and a default stress run on the reference, each while
two extra CPU-bound processes keep the machine busy, N repetitions; prints how many rows of
each run were not good (FAIL / FAILURE / ERROR / CRASH / HANG / XPASS).  The goal is 0: the
reference is correct, so every such row is a false failure.

    python benchmarks/bench_false_failures.py [--repetitions 3] [--main-repetitions N]
                                              [--stress-budget 150s|default] [--burners 2]
                                              [--stress-args "--tests performance-degradation"]
                                              [--workdir DIR] [--main-timeout 1h]

``--stress-budget default`` passes no ``--budget``: the stress run gets the command's own
default (30 minutes).  ``--stress-args`` adds options to every stress run, e.g. a run of
performance-degradation alone, which fits many more of its cases in a budget than the default
mix of tests does.

``--main-repetitions`` (default: ``--repetitions``; 0 leaves the main job out) exists because
the main job runs every suite and can take much longer than a stress run.  A run that
exceeds ``--main-timeout`` is stopped with SIGTERM (its report says how far it got) and
marked "timeout" in the table.  Seeds are the repetition numbers, printed in the table.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nnconform.cli.options import parse_duration
from nnconform.verdict.results import read_results

STRESS_DEFAULT_BUDGET = "30m"  # what `nnconform stress` runs for without --budget (its --help)
BURNER = "while True:\n    pass\n"  # one busy core's worth of pure CPU, no I/O


def start_burners(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", BURNER]) for _ in range(n)]


def stop_burners(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()  # ours, by pid
    for p in procs:
        p.wait()


def run_job(argv: list[str], report_dir: Path, timeout: float | None) -> tuple[int | str, float]:
    """(exit status or "timeout", wall seconds) of one nnconform command."""
    log = open(report_dir.with_suffix(".log"), "w")
    t = time.monotonic()
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        code: int | str = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # the run writes its report on SIGTERM
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # its own session, started above
            proc.wait()
        code = "timeout"
    finally:
        log.close()
    return code, time.monotonic() - t


def bad_rows(report_dir: Path) -> tuple[int, int, list[str]]:
    """(rows, rows that are not good, the first few of them as 'test_id: message')."""
    journal = report_dir / "results.jsonl"
    rows = read_results(journal) if journal.exists() else []
    bad = [r for r in rows if r.outcome.bad]
    return len(rows), len(bad), [f"{r.test_id}: {r.message[:160]}" for r in bad[:3]]


def perf_cases(report_dir: Path) -> str:
    """performance-degradation's cases of a stress run: how many, and the highest lower end of
    each of its two intervals (the share, the growth), which the verdict compares with the limit."""
    journal = report_dir / "results.jsonl"
    rows = [r for r in (read_results(journal) if journal.exists() else []) if r.test_id.startswith("performance-")]
    if not rows:
        return "-"
    share = max(r.extra.get("degradation_low", float("nan")) for r in rows)
    grown = [r.extra["growth_low"] for r in rows if r.extra.get("growth_low") is not None]
    return f"{len(rows)}: share low max {share:+.0%}, growth low max " + (f"{max(grown):+.0%}" if grown else "-")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--main-repetitions", type=int, default=None)
    ap.add_argument("--stress-budget", default="150s")
    ap.add_argument("--burners", type=int, default=2)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--main-timeout", default="1h")
    ap.add_argument("--stress-args", default="", help="more options for every stress run (one string)")
    a = ap.parse_args(argv)
    main_reps = a.repetitions if a.main_repetitions is None else a.main_repetitions
    work = Path(a.workdir or tempfile.mkdtemp(prefix="nnconform-false-failures-"))
    work.mkdir(parents=True, exist_ok=True)
    nn = [sys.executable, "-c", "import sys; from nnconform.cli import main; sys.exit(main())"]
    jobs = [("stress", k) for k in range(a.repetitions)] + [("main", k) for k in range(main_reps)]
    print(f"work directory {work}; {a.burners} CPU-bound burner processes during every job; {os.cpu_count()} cores")
    print(f"stress runs: budget {a.stress_budget}, extra options {a.stress_args or '(none)'}")
    results = []
    for kind, k in jobs:
        rdir = work / f"{kind}-{k}"
        if kind == "stress":
            default = a.stress_budget == "default"
            budget = STRESS_DEFAULT_BUDGET if default else a.stress_budget
            argv_ = nn + ["stress", "--driver", "reference", "--seed", str(k)] + shlex.split(a.stress_args)
            argv_ += [] if default else ["--budget", budget]
            timeout = parse_duration(budget) * 3 + 300
        else:
            argv_ = nn + ["run", "--driver", "reference", "--seed", str(k)]
            timeout = parse_duration(a.main_timeout)
        argv_ += ["--report-dir", str(rdir)]
        burners = start_burners(a.burners)
        try:
            code, wall = run_job(argv_, rdir, timeout)
        finally:
            stop_burners(burners)
        rows, bad, examples = bad_rows(rdir)
        perf = perf_cases(rdir) if kind == "stress" else "-"
        load = os.getloadavg()[0]
        results.append(
            dict(
                job=kind,
                rep=k,
                seed=k,
                exit=code,
                rows=rows,
                false_failures=bad,
                wall_s=round(wall),
                perf=perf,
                load_1min_at_end=round(load, 1),
            )
        )
        print(f"{kind} #{k}: exit {code}, {rows} rows, {bad} false failure(s), {wall:.0f} s, perf {perf}", flush=True)
        for e in examples:
            print(f"    {e}", flush=True)
    print()
    print(
        "| job | repetition (seed) | exit | rows | false failures | wall s | performance-degradation cases | load at end |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['job']} | {r['rep']} | {r['exit']} | {r['rows']} | {r['false_failures']} | {r['wall_s']} "
            f"| {r['perf']} | {r['load_1min_at_end']} |"
        )
    total = sum(r["false_failures"] for r in results)
    print(f"\nfalse failures in total: {total} over {len(results)} run(s)")
    (work / "false_failures.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
