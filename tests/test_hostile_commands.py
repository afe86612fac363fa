"""Every command that loads a driver survives every hostile test driver (issue 47 point 7).

The hostile drivers of tests/drivers/broken_isolation.py (segfault, exit, hang in execute and
in prepare, BaseException, a 30 GB allocation, a forked child, scribbling on inputs, lying
arrays, patching nnconform) go through `run` with the capability probe, `probe`, `stress`,
`fuzz`, `bench` and `run --cluster local:2`; each must end with the verdict the driver earns,
its report, and no process of the run left behind.  `run` without the probe, `replay` and
`run -n 2` have their hostile matrix in tests/test_isolation.py
(test_hostile_driver_gets_its_verdict_and_the_run_goes_on, test_replay_of_a_hostile_driver,
test_pytest_xdist_with_a_hostile_driver); test_replay here replays for the drivers of this
matrix that test_isolation's CASES leave out (ScribblesInputs), so every command meets all ten.

Kept cheap: one FLOOR case for `run`, FLOOR alone for `probe`, one stress case, three fuzz
cases, one bench model.  A call bound costs time only when a call reaches it, and only the
hanging drivers' calls do (each hang costs one bound: the probe's sample, the case, every
candidate of a stress shrink), so they run under short bounds (HANG_BOUNDS) and every other
driver under generous ones that a busy machine cannot turn into a false HANG.  `stress`,
`fuzz` and `bench` draw or build their own models, so there the drivers strike on every graph
of two or more operations (NNCONFORM_HOSTILE_ON_GRAPHS=1)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import double
from test_isolation import CASES as ISOLATION_CASES
from test_isolation import floor_spec, marked_env, no_survivors  # noqa: F401 (floor_spec: a fixture)

HOSTILE = double("broken_isolation")

# driver -> what it does to a call that reaches it: "crash", "hang", "fail" (a wrong or refused
# answer, or a process left behind), "clean" (its harm reaches nobody through isolation)
DRIVERS = {
    "Segfault": "crash",
    "ExitZero": "crash",
    "HangsInExecute": "hang",
    "HangsInPrepare": "hang",
    "KeyboardInterrupts": "fail",
    "Allocates30GB": "fail",
    "ForksChild": "fail",
    "ScribblesInputs": "clean",
    "LyingArray": "fail",
    "PatchesNnconform": "fail",
}
IDS = list(DRIVERS)

# Seconds: the bounds of each kind of call, as passed to the commands (--probe-timeout,
# --call-timeout, --hang-grace).  The hanging drivers reach every bound, so theirs are short;
# the others' are never reached by a working call, however long, so they are generous.
HANG_BOUNDS = {"probe": "1", "call": "1", "grace": "1s"}
CALM_BOUNDS = {"probe": "3", "call": "5", "grace": "3s"}


def _bounds(driver: str) -> dict[str, str]:
    return HANG_BOUNDS if DRIVERS[driver] == "hang" else CALM_BOUNDS


def _nnconform(*args: str, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nnconform", *args], capture_output=True, text=True, env=env, timeout=timeout
    )


def _rows(report: Path) -> list[dict]:
    journal = report / "results.jsonl"
    return [json.loads(line) for line in journal.read_text().splitlines()] if journal.exists() else []


def _has_report(report: Path, out: str) -> None:
    assert (report / "report.html").stat().st_size > 0, out
    summary = json.loads((report / "summary.json").read_text())
    assert isinstance(summary, dict) and summary, out


def _env(on_graphs: bool = False, probe: bool = False) -> tuple[dict, str]:
    env, mark = marked_env()
    if on_graphs:
        env["NNCONFORM_HOSTILE_ON_GRAPHS"] = "1"
    if probe:
        env["NNCONFORM_AUTO_PROBE"] = "1"
    return env, mark


RUN_VERDICT = {"crash": {"CRASH"}, "hang": {"HANG"}, "fail": {"FAIL"}, "clean": {"PASS"}}


@pytest.mark.parametrize("driver", IDS)
def test_run_with_the_probe(driver, tmp_path):
    env, mark = _env(probe=True)
    r = _nnconform(
        "run",
        "--driver",
        HOSTILE + driver,
        "--suite",
        "generated",
        "--report-dir",
        str(tmp_path),
        "--seed",
        "1",
        "--probe-timeout",
        _bounds(driver)["probe"],
        "--call-timeout",
        _bounds(driver)["call"],
        "--",
        "-k",
        "floor_fp32",
        env=env,
    )
    out = r.stdout[-3000:] + r.stderr[-2000:]
    kind = DRIVERS[driver]
    assert r.returncode == (0 if kind == "clean" else 1), out
    _has_report(tmp_path, out)
    (row,) = [row for row in _rows(tmp_path) if row["test_id"] == "generated/floor_fp32"]
    assert row["outcome"] in RUN_VERDICT[kind], row
    (cap,) = tmp_path.glob("capabilities-*.json")
    floor = [c for c in json.loads(cap.read_text())["cells"] if c["operation"] == "FLOOR"]
    statuses = {c["status"] for c in floor if c["data_type"] == "fp32"}
    want = {"crash": {"crash", "quarantined"}, "hang": {"hang", "quarantined"}}.get(kind)
    if want:
        assert statuses <= want and statuses & {"crash", "hang"}, statuses
    assert no_survivors(mark) == []


PROBE_STATUS = {"crash": "crash", "hang": "hang", "fail": "over-claim", "clean": "worked"}


@pytest.mark.parametrize("driver", IDS)
def test_probe(driver, tmp_path):
    env, mark = _env()
    r = _nnconform(
        "probe",
        "--driver",
        HOSTILE + driver,
        "--report-dir",
        str(tmp_path),
        "--ops",
        "FLOOR",
        "--samples",
        "1",
        "--probe-timeout",
        _bounds(driver)["probe"],
        env=env,
    )
    out = r.stdout[-3000:] + r.stderr[-2000:]
    kind = DRIVERS[driver]
    (cap,) = tmp_path.glob("capabilities-*.json")
    data = json.loads(cap.read_text())
    assert (tmp_path / "capabilities.md").stat().st_size > 0
    first = {c["data_type"]: c["status"] for c in data["cells"] if c["rank"] == 1}
    if driver == "ForksChild":
        # Its answer is right; the child it leaves is the probe's to kill with the host (the
        # suites judge leftovers, the probe judges answers).
        assert set(first.values()) == {"worked"}, first
    else:
        assert set(first.values()) == {PROBE_STATUS[kind]}, (first, out)
    assert r.returncode == (0 if PROBE_STATUS[kind] == "worked" or driver == "ForksChild" else 1), out
    assert no_survivors(mark) == []


STRESS_VERDICT = {"crash": {"CRASH"}, "hang": {"HANG"}, "fail": {"FAILURE"}, "clean": {"SUCCESS"}}
# A stress worker runs the driver in its own process (no driver host between them): zeroing the
# caller's input arrays there corrupts what the harness holds, and that is a FAILURE.
STRESS_KIND = dict(DRIVERS, ScribblesInputs="fail")


@pytest.mark.parametrize("driver", IDS)
def test_stress(driver, tmp_path):
    env, mark = _env(on_graphs=True)
    r = _nnconform(
        "stress",
        "--driver",
        HOSTILE + driver,
        "--report-dir",
        str(tmp_path),
        "--seed",
        "1",
        "--case",
        "random-inference#0",
        "--budget",
        "120s",
        "--hang-grace",
        _bounds(driver)["grace"],
        "--no-probe",
        env=env,
    )
    out = r.stdout[-3000:] + r.stderr[-2000:]
    kind = STRESS_KIND[driver]
    assert r.returncode == (0 if kind == "clean" else 1), out
    _has_report(tmp_path, out)
    (row,) = _rows(tmp_path)
    assert row["outcome"] in STRESS_VERDICT[kind], row
    if driver == "PatchesNnconform":  # it judged its own case as passing, before the sandbox checked
        assert "the driver replaced 3 functions of nnconform" in row["message"], row["message"]
    assert no_survivors(mark) == []


# The fuzzer's models are malformed: a driver refuses them in supported_operations, before any
# prepare or execute.  So here the drivers strike at the start of supported_operations
# (NNCONFORM_HOSTILE_IN_QUERY=1); what the fuzzer counts is a CRASH, HANG or OOM bucket, and a
# driver whose harm needs a computed answer (or is a Python exception, a plain refusal to the
# fuzzer) leaves a clean fuzz run.  HangsInPrepare is never reached: nothing is prepared.
# (an OOM bucket's row is a CRASH, the artifact contract's outcome for it)
FUZZ_BUCKET = {"Segfault": "CRASH", "ExitZero": "CRASH", "HangsInExecute": "HANG", "Allocates30GB": "CRASH"}


@pytest.mark.parametrize("driver", IDS)
def test_fuzz(driver, tmp_path):
    env, mark = _env()
    env["NNCONFORM_HOSTILE_IN_QUERY"] = "1"
    r = _nnconform(
        "fuzz",
        "--driver",
        HOSTILE + driver,
        "--report-dir",
        str(tmp_path),
        "--seed",
        "1",
        "--cases",
        "3",
        "--call-timeout",
        _bounds(driver)["call"],
        env=env,
    )
    out = r.stdout[-3000:] + r.stderr[-2000:]
    _has_report(tmp_path, out)
    outcomes = {row["outcome"] for row in _rows(tmp_path)}
    want = FUZZ_BUCKET.get(driver)
    if want:
        assert r.returncode == 1 and want in outcomes, (outcomes, out)
        if driver == "Allocates30GB":
            assert "OOM|MemoryError" in r.stdout, out
    else:
        assert r.returncode == 0 and not outcomes, (outcomes, out)
    assert no_survivors(mark) == []


BENCH_STATUS = {"crash": {"CRASH"}, "hang": {"HANG"}, "fail": {"FAIL"}, "clean": {"PASS"}}
# The benchmark gates on accuracy against golden outputs (nnconform.bench.golden): a driver
# whose answers are wrong gets a FAIL row whose accuracy columns say why.
WRONG_ANSWERS = {"LyingArray", "PatchesNnconform"}


@pytest.mark.parametrize("driver", IDS)
def test_bench(driver, tmp_path):
    env, mark = _env(on_graphs=True)
    r = _nnconform(
        "bench",
        "--driver",
        HOSTILE + driver,
        "--report-dir",
        str(tmp_path),
        "--models",
        "mobilenet_v1_float",
        "--warmup",
        "0",
        "--iterations",
        "1",
        "--inputs",
        "1",
        "--call-timeout",
        _bounds(driver)["call"],
        env=env,
    )
    out = r.stdout[-3000:] + r.stderr[-2000:]
    kind = "fail" if driver in WRONG_ANSWERS else DRIVERS[driver]
    assert r.returncode == (0 if kind == "clean" else 1), out
    _has_report(tmp_path, out)
    (row,) = _rows(tmp_path)
    assert row["outcome"] in BENCH_STATUS[kind], row
    if driver in WRONG_ANSWERS:
        assert float(row["extra"]["max_single_error"]) > 0.01 and row["extra"]["top1_agreement"] == "0", row
    elif kind == "clean":
        assert float(row["extra"]["max_single_error"]) < 1e-3, row
    assert no_survivors(mark) == []


# A local Dask cluster costs ~30 s to start and stop on two busy cores, so the cluster goes
# through one driver per way of dying (a signal, a hang, an exception out of the driver's
# Python, a process left behind) rather than all ten; the others take the same path through
# the cluster worker's driver host.
CLUSTER_DRIVERS = ["Segfault", "HangsInExecute", "KeyboardInterrupts", "ForksChild"]


@pytest.mark.skipif(importlib.util.find_spec("distributed") is None, reason="needs the [cluster] extra")
@pytest.mark.parametrize("driver", CLUSTER_DRIVERS)
def test_run_on_a_local_cluster(driver, tmp_path):
    env, mark = _env()
    r = _nnconform(
        "run",
        "--driver",
        HOSTILE + driver,
        "--suite",
        "generated",
        "--report-dir",
        str(tmp_path),
        "--seed",
        "1",
        "--call-timeout",
        _bounds(driver)["call"],
        "--no-probe",
        "--cluster",
        "local:2",
        "--",
        "-k",
        "floor_fp32",
        env=env,
    )
    out = r.stdout[-3000:] + r.stderr[-2000:]
    kind = DRIVERS[driver]
    assert r.returncode == (0 if kind == "clean" else 1), out
    _has_report(tmp_path, out)
    (row,) = [row for row in _rows(tmp_path) if row["test_id"] == "generated/floor_fp32"]
    assert row["outcome"] in RUN_VERDICT[kind], row
    assert no_survivors(mark) == []


# test_isolation replays a FLOOR spec against its own list of hostile drivers; the ones of this
# matrix it leaves out are replayed here, so `replay` meets every driver above.
REPLAY_ELSEWHERE = {case[0] for case in ISOLATION_CASES}
REPLAY_HERE = [d for d in IDS if d not in REPLAY_ELSEWHERE]


@pytest.mark.parametrize("driver", REPLAY_HERE)
def test_replay(driver, floor_spec):  # noqa: F811 (the fixture imported above)
    env, mark = _env()
    r = _nnconform(
        "replay", str(floor_spec), "--driver", HOSTILE + driver, "--call-timeout", _bounds(driver)["call"], env=env
    )
    out = r.stdout[-3000:] + r.stderr[-2000:]
    verdict = RUN_VERDICT[DRIVERS[driver]]
    assert r.returncode == (0 if DRIVERS[driver] == "clean" else 1), out
    assert any(f": {v}" in r.stdout for v in verdict), out
    assert "Traceback" not in r.stderr, out
    assert no_survivors(mark) == []
