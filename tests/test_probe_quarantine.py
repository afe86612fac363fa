"""The capability probe against a driver that hangs (issue 47 points 3 and 4, issue 46 point 7):
a hanging (operation, data type) is quarantined after one short probe bound, the run then
goes on to its cases and ends with a report; a run stopped during the probe or during its
cases by SIGINT, SIGTERM or SIGHUP leaves report.html and summary.json saying how far it got;
the matrix cache is keyed on the driver's files and `run --reprobe` refreshes it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import double
from test_isolation import marked_env, no_survivors, with_default_signals

from nnconform.cases.probe import (
    HANG,
    HONEST,
    QUARANTINED,
    CapabilityCache,
    describe_cell,
    driver_fingerprint,
    probe_cells,
)
from nnconform.driver.loader import load_driver
from nnconform.ir import OperationType as Op

HANGS_ON_RELU = double("broken_isolation", "HangsOnRelu")
PROBING = {"NNCONFORM_AUTO_PROBE": "1"}


def _cli(*args, env=None, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "nnconform", *args], capture_output=True, text=True, env=env, timeout=timeout
    )


def test_a_hanging_operation_is_quarantined_after_one_short_bound_per_data_type():
    from nnconform.isolation.proxy import open_isolated

    device = open_isolated(HANGS_ON_RELU, call_timeout=60)
    try:
        cells = probe_cells(device, operations=[Op.RELU, Op.ABS], samples=2, call_timeout=1.0)
        assert device.call_timeout == 60, "the run's own bound is restored after the probe"
    finally:
        device.close()
    relu = [c for c in cells if c.operation == "RELU"]
    by_type: dict[str, list] = {}
    for c in relu:
        by_type.setdefault(c.data_type, []).append(c)
    assert len(by_type) >= 2
    for t, row in by_type.items():
        first, *rest = sorted(row, key=lambda c: c.rank)
        assert first.status == HANG and first.incident == "HANG" and first.samples == 1, first
        assert "execute" in first.message and "did not return within 1 s" in first.message, first.message
        assert rest and all(c.status == QUARANTINED and c.samples == 0 for c in rest), rest
        assert describe_cell(vars(first)).startswith("HANG in the probe")
    abs_cells = [c for c in cells if c.operation == "ABS"]
    assert abs_cells and {c.status for c in abs_cells} == {HONEST}, "the host came back for the next operation"
    assert describe_cell(vars(abs_cells[0])) == "worked on 2 samples"


def test_the_cache_is_keyed_on_the_drivers_files_and_records_when_it_was_made(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    driver = src / "mydriver.py"
    driver.write_text(
        "from nnconform.drivers.reference import ReferenceDevice\n\n\n"
        "class Mine(ReferenceDevice):\n    name = 'mine'\n    version = '1.0'\n"
    )
    spec = f"{driver}:Mine"
    device = load_driver(spec)
    report = tmp_path / "report"
    first = CapabilityCache(device, report, samples=1, driver_spec=spec)
    assert first.ensure([Op.ABS]) > 0
    data = json.loads(first.path.read_text())
    assert data["created"] and data["driver_digest"] == driver_fingerprint(spec, "mine", "1.0")["digest"]
    assert data["driver_files"] == 1
    assert "worked" in data["summary"] and "honest" not in json.dumps(data["summary"])

    again = CapabilityCache(device, report, samples=1, driver_spec=spec)
    assert again.ensure([Op.ABS]) == 0 and again.created == data["created"], "same files: reused"

    # A fix without a version bump: another driver as far as the probe knows.
    driver.write_text(driver.read_text() + "# fixed a bug, same version\n")
    fixed = CapabilityCache(device, report, samples=1, driver_spec=spec)
    assert fixed.stale == "the cached matrix is for other driver files" and not fixed.cells
    # A sibling file it may import counts too.
    (src / "helper.py").write_text("X = 1\n")
    assert driver_fingerprint(spec, "mine", "1.0")["digest"] != fixed.fingerprint["digest"]
    # fresh=True (run --reprobe, probe --force) ignores a valid cache.
    assert not CapabilityCache(device, report, samples=1, driver_spec=spec, fresh=True).cells


def _run_hanging(tmp_path, *extra, env=None):
    return _cli(
        "run",
        "--driver",
        HANGS_ON_RELU,
        "--suite",
        "generated",
        "--report-dir",
        str(tmp_path),
        "--seed",
        "3",
        "--call-timeout",
        "3",
        "--probe-timeout",
        "1",
        *extra,
        "--",
        "-k",
        "relu_fp32 or relu_quant8 or abs",
        env=env,
    )


def test_a_driver_hanging_on_relu_is_probed_then_run_to_a_report(tmp_path):
    """The run issue 47 saw stall for 15 minutes in the probe: each hanging (RELU, type) costs
    one probe bound, each hanging RELU case one call bound, and the run ends with a report."""
    env, mark = marked_env()
    env.update(PROBING)
    r = _run_hanging(tmp_path, env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out[-3000:]
    assert "probing now, each call bounded by 1 s" in out, out[-3000:]
    assert "nnconform: probe: HANG in RELU" in out and "quarantined" in out, out[-3000:]
    assert "crashed or hung in the probe: RELU" in out, out[-3000:]
    (cap,) = tmp_path.glob("capabilities-*.json")
    data = json.loads(cap.read_text())
    assert data["summary"][HANG] >= 2 and data["summary"][QUARANTINED] >= 2 and data["probe_timeout"] == 1.0
    assert "### hangs" in (tmp_path / "capabilities.md").read_text()
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["status"].startswith("complete"), run
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    relu = [r for r in rows if r["test_id"].startswith("generated/relu_")]
    assert relu and {r["outcome"] for r in relu} == {"HANG"}
    assert {r["outcome"] for r in rows if r["test_id"].startswith("generated/abs")} == {"PASS"}
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["counts"]["HANG"] == len(relu)
    html = (tmp_path / "report.html").read_text()
    assert "crashed or hung in the probe: RELU" in html
    assert no_survivors(mark) == []

    # The next probe reuses the matrix (same driver files); --reprobe probes again.
    probe = ("probe", "--driver", HANGS_ON_RELU, "--report-dir", str(tmp_path), "--probe-timeout", "1", "--ops", "ABS")
    cached = _cli(*probe, env=env)
    assert "(0 probed now" in cached.stdout, cached.stdout + cached.stderr
    fresh = _cli(*probe, "--reprobe", env=env)
    assert "(0 probed now" not in fresh.stdout and fresh.returncode == 0, fresh.stdout + fresh.stderr


def _wait_for(predicate, p, what: str, limit: float = 240) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if p.poll() is not None:
            raise AssertionError(f"the run ended before {what}: {p.communicate()[1][-2000:]}")
        if predicate():
            return
        time.sleep(0.2)
    p.kill()
    raise AssertionError(f"never {what}: {p.communicate()[1][-2000:]}")


def _status(report: Path) -> str:
    try:
        return json.loads((report / "run.json").read_text()).get("status", "")
    except (OSError, ValueError):
        return ""  # not written yet, or being replaced


def _stop(p, sig) -> tuple[str, str]:
    p.send_signal(sig)
    try:
        return p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()


def _reported_as(report: Path, status_start: str) -> None:
    run = json.loads((report / "run.json").read_text())
    assert run["status"].startswith(status_start), run
    summary = json.loads((report / "summary.json").read_text())
    assert summary["status"].startswith(status_start) and not summary["complete"], summary
    html = (report / "report.html").read_text()
    assert "Run status: interrupted" in html and status_start in html


STOPS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]


@pytest.mark.parametrize("sig", STOPS, ids=[s.name for s in STOPS])
def test_a_run_stopped_during_the_probe_writes_a_report_saying_so(tmp_path, sig):
    env, mark = marked_env()
    env.update(PROBING)
    p = subprocess.Popen(
        with_default_signals(
            "run",
            "--driver",
            HANGS_ON_RELU,
            "--suite",
            "generated",
            "--report-dir",
            str(tmp_path),
            "--seed",
            "3",
            "--probe-timeout",
            "600",
            "--",
            "-m",
            "relu",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    _wait_for(lambda: _status(tmp_path) == "running: capability probe", p, "the probe started")
    time.sleep(1.0)
    out, err = _stop(p, sig)
    assert p.returncode == 3, out[-2000:] + err[-2000:]
    _reported_as(tmp_path, "interrupted during the capability probe, after 0 of")
    assert no_survivors(mark) == []


@pytest.mark.parametrize("sig", STOPS, ids=[s.name for s in STOPS])
def test_a_run_stopped_during_its_cases_writes_a_report_saying_so(tmp_path, sig):
    env, mark = marked_env()
    p = subprocess.Popen(
        with_default_signals(
            "run",
            "--driver",
            HANGS_ON_RELU,
            "--suite",
            "generated",
            "--report-dir",
            str(tmp_path),
            "--seed",
            "3",
            "--no-probe",
            "--call-timeout",
            "600",
            "--",
            "-k",
            "abs or relu_fp32",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    journal = tmp_path / "results.jsonl"
    _wait_for(lambda: journal.exists() and len(journal.read_text().splitlines()) >= 1, p, "a case ended")
    time.sleep(1.0)
    out, err = _stop(p, sig)
    assert p.returncode == 3, out[-2000:] + err[-2000:]
    _reported_as(tmp_path, "interrupted after ")
    assert no_survivors(mark) == []


def test_a_copied_driver_directory_has_its_own_fingerprint(tmp_path):
    """Two copies of one driver file in two places are two drivers (their path is part of the
    key), and identical content hashes identically wherever it is read from."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    src = Path(double("broken_isolation", "X").rpartition(":")[0])
    shutil.copy(src, a / src.name)
    shutil.copytree(a, b)
    fa = driver_fingerprint(f"{a / src.name}:HangsOnRelu", "hostile", "0.1.0")
    fb = driver_fingerprint(f"{b / src.name}:HangsOnRelu", "hostile", "0.1.0")
    assert fa["files"] == fb["files"] == 1 and fa["digest"] != fb["digest"]
    assert fa == driver_fingerprint(f"{a / src.name}:HangsOnRelu", "hostile", "0.1.0")
    assert os.path.isfile(a / src.name)


def test_the_status_line_says_at_which_stage_a_run_stopped():
    from types import SimpleNamespace

    from nnconform.plugin import _run_status

    def status(stage, done, interrupted, planned=7):
        return _run_status(SimpleNamespace(planned=planned, stage=stage), done, interrupted)

    assert status("probe", 0, True) == "interrupted during the capability probe, after 0 of 7 cases"
    assert status("collection", 0, True, planned=None) == "interrupted during collection, after 0 cases"
    assert status("cases", 3, True) == "interrupted after 3 of 7 cases"
    assert status("report writing", 7, False) == "complete: 7 of 7 cases"
    assert status("cases", 3, False) == "interrupted after 3 of 7 cases", "fewer rows than planned is not complete"
