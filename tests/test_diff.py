"""`nnconform diff RUN_A RUN_B`: new, fixed, flaky and still failing cases, as text and HTML."""

from __future__ import annotations

import os
import subprocess
import sys

from helpers import double

from nnconform.reports.diff import diff_runs, render_html
from nnconform.verdict.results import ResultRecord, ResultsWriter


def row(tid, outcome, suite="vectors", version="1.0", replay=""):
    return ResultRecord(
        suite=suite,
        test_id=tid,
        driver="dev",
        outcome=outcome,
        operations=["ADD"],
        data_types=["quant8"],
        message=f"{tid} {outcome}",
        replay=replay or f"nnconform replay {tid}",
        extra={"driver_version": version},
    )


def classes(d):
    return {k: sorted(c.test_id for c in v) for k, v in d.changes.items() if v}


def test_classes_of_the_same_driver():
    a = [
        row("v/1", "PASS"),
        row("v/2", "FAIL"),
        row("v/3", "FAIL"),
        row("v/4", "PASS"),
        row("r/1", "PASS", suite="random"),
        row("r/2", "FAIL", suite="random"),
        row("v/5", "FAIL"),
    ]
    b = [
        row("v/1", "FAIL"),
        row("v/2", "PASS"),
        row("v/3", "CRASH"),
        row("v/4", "PASS"),
        row("r/1", "FAIL", suite="random"),
        row("r/2", "PASS", suite="random"),
        row("v/6", "FAIL"),
        row("v/5", "SKIP"),
    ]
    d = diff_runs(a, b)
    # deterministic cases that flip with the same driver are flaky; the random suite's cases
    # depend on the seed, so theirs are new findings or fixes
    assert classes(d) == {"flaky": ["v/1", "v/2"], "still failing": ["v/3"], "new": ["r/1", "v/6"], "fixed": ["r/2"]}
    html = render_html(d)
    assert '<span id="count-flaky">2 flaky</span>' in html and "nnconform replay v/1" in html


def test_a_new_driver_version_makes_flips_new_and_fixed():
    a = [row("v/1", "PASS"), row("v/2", "FAIL")]
    b = [row("v/1", "FAIL", version="2.0"), row("v/2", "PASS", version="2.0")]
    assert classes(diff_runs(a, b)) == {"new": ["v/1"], "fixed": ["v/2"]}


def _journal(path, rows):
    path.mkdir()
    with ResultsWriter(path / "results.jsonl") as w:
        w.write_all(rows)
    return path


def nnconform(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "nnconform", *args], capture_output=True, text=True, env=env, timeout=600
    )


def test_cli_text_html_and_exit_status(tmp_path):
    a = _journal(tmp_path / "a", [row("v/1", "PASS"), row("v/2", "FAIL")])
    b = _journal(tmp_path / "b", [row("v/1", "FAIL", version="2"), row("v/2", "PASS", version="2")])
    r = nnconform("diff", str(a), str(b), "--html", str(tmp_path / "d.html"))
    assert r.returncode == 1, r.stderr  # B has a new failure
    assert "1 new, 1 fixed, 0 flaky, 0 still failing" in r.stdout
    # a replay command is recorded relative to its report directory: shown from here
    assert f"nnconform replay {b / 'v/1'}" in r.stdout
    assert "A: driver dev 1.0, seed" in r.stdout and "B: driver dev 2, seed" in r.stdout
    assert "same driver, DIFFERENT versions" in r.stdout and "failure buckets" in r.stdout
    assert "v/1" in (tmp_path / "d.html").read_text()
    r = nnconform("diff", str(b), str(a))
    assert r.returncode == 1 and "1 new, 1 fixed" in r.stdout
    r = nnconform("diff", str(a), str(a))
    assert r.returncode == 0 and "0 new, 0 fixed, 0 flaky, 1 still failing" in r.stdout
    r = nnconform("diff", str(a), str(tmp_path / "missing"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no results.jsonl" in r.stderr


def test_two_seeds_of_a_flaky_driver(tmp_path):
    runs = []
    for n in (1, 2):
        env = dict(os.environ, NNCONFORM_FLAKY_SEED=str(n))
        rep = tmp_path / f"run{n}"
        r = nnconform(
            "run",
            "--driver",
            double("broken_flaky", "FlakyQuantAdd"),
            "--suite",
            "generated",
            "--seed",
            str(n),
            "--report-dir",
            str(rep),
            "--",
            "-k",
            "add_quant8",
            env=env,
        )
        assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
        runs.append(rep)
    r = nnconform("diff", str(runs[0]), str(runs[1]))
    counts = r.stdout.splitlines()[1]
    new, flaky = (int(counts.split(f" {k}")[0].rsplit(" ", 1)[-1]) for k in ("new", "flaky"))
    assert flaky > 0 and new == 0, r.stdout[:3000]
    assert r.returncode == 0  # a flaky case is not a new failure


def test_history_trend_across_runs(tmp_path):
    hist = tmp_path / "hist"
    for n in (1, 2, 3):
        env = dict(os.environ, NNCONFORM_FLAKY_SEED=str(n))
        r = nnconform(
            "run",
            "--driver",
            double("broken_flaky", "FlakyQuantAdd"),
            "--suite",
            "generated",
            "--seed",
            str(n),
            "--report-dir",
            str(tmp_path / "rep"),
            "--history",
            str(hist),
            "--",
            "-k",
            "add_quant8 or relu_fp32",
            env=env,
        )
        assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    lines = (hist / "history.jsonl").read_text().splitlines()
    assert len(lines) == 3 and all('"seed": ' in ln for ln in lines)
    html = (tmp_path / "rep" / "report.html").read_text()
    assert "Trend (3 runs)" in html and html.count('class="history-run"') == 3
    assert '<polyline class="trend-fail"' in html
