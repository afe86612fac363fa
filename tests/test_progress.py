"""The progress line of a conformance run: cases done of planned, and an estimate of the time
left that weighs each suite by its own case cost."""

import re
import subprocess
import sys
from collections import Counter

from nnconform.plugin.progress import Estimate, format_duration, suite_of


def test_estimate_weighs_suites_by_their_own_case_time():
    est = Estimate(Counter(vectors=100, models=2))
    for _ in range(50):
        est.finish("vectors", 0.01)  # 50 cheap cases done, 0.5 s of case time
    # 50 vectors left at 0.01 s, 2 models at the overall mean (0.01 s): 0.52 s of work; wall
    # time ran at 2x the summed case time, so about 1.04 s are left.
    assert abs(est.eta(elapsed=1.0) - 1.04) < 1e-9
    est.finish("models", 5.0)  # now a model is known to cost 5 s
    assert abs(est.eta(elapsed=6.0) - (50 * 0.01 + 5.0) * (6.0 / 5.5)) < 1e-9
    assert est.total_done == 51 and est.total_planned == 102


def test_estimate_before_any_case_and_with_instant_cases():
    est = Estimate(Counter(generated=10))
    assert est.eta(elapsed=3.0) is None
    for _ in range(5):
        est.finish("generated", 0.0)
    assert est.eta(elapsed=2.0) == 2.0  # the case rate: 5 cases in 2 s, 5 left


def test_helpers():
    assert suite_of("suites/test_vectors.py::test_vector[V1_0/add]") == "vectors"
    assert [format_duration(s) for s in (0, 59.4, 61, 3600 * 2 + 65)] == ["0s", "59s", "1m01s", "2h01m"]


def _run(tmp_path, *extra):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "nnconform",
            "run",
            "--suite",
            "generated",
            "--report-dir",
            str(tmp_path / "r"),
            *extra,
            "--",
            "-k",
            "RELU or ADD",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_run_prints_progress_lines_with_planned_count(tmp_path):
    proc = _run(tmp_path, "--progress", "0.001")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = re.findall(r"nnconform: ([\d,]+) of ([\d,]+) cases \((\d+)%\) in \S+", proc.stdout)
    assert lines, proc.stdout[-2000:]
    planned = {int(p.replace(",", "")) for _, p, _ in lines}
    done = [int(d.replace(",", "")) for d, _, _ in lines]
    m = re.search(r"run complete: (\d+) of (\d+) cases", proc.stdout)
    assert m and planned == {int(m.group(2))}  # one plan, the run's own case count
    assert done == sorted(done) and done[-1] <= int(m.group(2))
    assert any("left; now in generated" in line for line in proc.stdout.splitlines())


def test_progress_off_and_bad_value(tmp_path):
    quiet = _run(tmp_path, "--progress", "0")
    assert quiet.returncode == 0 and not re.search(r"cases \(\d+%\)", quiet.stdout)
    bad = _run(tmp_path, "--progress", "-1")
    assert bad.returncode == 2 and "--progress must be >= 0" in bad.stderr


def test_eta_counts_work_not_one_off_set_up():
    # one 5 s host start in the first case's set-up, then 1 ms cases: the other 900 cases
    # cost about a second, not 45 (issue 46)
    est = Estimate(Counter(vectors=1000))
    est.finish("vectors", 0.001, one_off=5.0)
    for _ in range(99):
        est.finish("vectors", 0.001)
    eta = est.eta(elapsed=5.1)
    assert eta is not None and 0.5 < eta < 2.0, eta
