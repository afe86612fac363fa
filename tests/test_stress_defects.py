"""Regression tests for defects of ``nnconform stress``: threads dying of BaseException,
empty runs accepted, tests silently left out by a short budget, and processes or /dev/shm
files a driver leaves behind.  No verdict here depends on how fast the machine is."""

import json
import os
import signal

import pytest
from helpers import double, double_module

from nnconform.cli import main
from nnconform.isolation import reaper
from nnconform.isolation.sandbox import CaseContext, Sandbox
from nnconform.stress import client
from nnconform.stress.runner import StressConfig, build_plan, run_stress
from nnconform.stress.tests import StressOptions, parallel_inference, performance_degradation
from nnconform.verdict.results import read_results

BROKEN = double("broken_stress")
PROBE = "nnconform.stress.tests:liveness_probe"
CASE = "nnconform.stress.tests:run_case"
BASE_EXCS = ["KeyboardInterrupt", "SystemExit", "GeneratorExit"]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(") ")[2][0] != "Z"
    except OSError:
        return False


def _device(name: str):
    broken_stress = double_module("broken_stress")
    return getattr(broken_stress, name)()


@pytest.fixture
def truth_log(tmp_path, monkeypatch):
    """The broken drivers' log (inherited by sandbox workers); every child pid it names is
    SIGKILLed at teardown, so a failing test leaves no ``sleep 600`` behind."""
    log = tmp_path / "truth.log"
    monkeypatch.setenv("NNCONFORM_BROKEN_LOG", str(log))
    yield log
    for d in _log(log):
        if "child" in d:
            try:
                os.kill(d["child"], signal.SIGKILL)
            except ProcessLookupError:
                pass
        if "path" in d and os.path.exists(d["path"]):
            os.unlink(d["path"])


@pytest.fixture
def shm_dir(tmp_path, monkeypatch):
    """A private stand-in for /dev/shm, here and in the workers: other programs on a shared
    machine create and remove /dev/shm entries at any moment."""
    d = tmp_path / "shm"
    d.mkdir()
    monkeypatch.setenv("NNCONFORM_SHM_DIR", str(d))
    monkeypatch.setattr(reaper, "SHM_DIR", str(d))
    return d


def _log(path) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


# ---- 1. threads that die of BaseException ---------------------------------------------------


@pytest.mark.parametrize("exc", BASE_EXCS)
def test_parallel_inference_thread_dying_of_base_exception_is_failure(exc):
    ctx = CaseContext(_device(f"{exc}InThreads"), "x", "parallel-inference#0", 1, 30.0)
    v = parallel_inference(ctx, duration=1.0, threads=2)
    assert v.verdict == "FAILURE" and exc in v.reason, v.reason


def test_compile_thread_dying_of_base_exception_fails_performance_degradation():
    ctx = CaseContext(_device("SystemExitInThreads"), "x", "performance-degradation#0", 1, 30.0)
    v = performance_degradation(ctx, warmup=0.05, duration=0.2, threshold=1e9)
    assert v.verdict == "FAILURE" and "SystemExit" in v.reason, v.reason


@pytest.mark.parametrize("mode,exc", [("infer", "KeyboardInterrupt"), ("compile", "SystemExit")])
def test_client_thread_dying_of_base_exception_fails_the_client(capsys, mode, exc):
    code = client.main(["--driver", f"{BROKEN}{exc}InThreads", "--mode", mode, "--duration", "1", "--threads", "2"])
    out = capsys.readouterr().out
    assert code == 1 and "FAIL" in out and exc in out, out


def test_keyboard_interrupt_in_parallel_inference_threads_through_the_sandbox():
    with Sandbox(BROKEN + "KeyboardInterruptInThreads") as box:
        r = box.run(
            CASE,
            {"test": "parallel-inference", "params": {"duration": 1.0, "threads": 2}},
            timeout=120,
            case_key="parallel-inference#0",
        )
    assert r.verdict == "FAILURE" and "KeyboardInterrupt" in r.reason, r.reason


def test_a_driver_thread_dying_of_system_exit_fails_the_case():
    # The safety net: any thread of the worker that dies of an uncaught exception during a case.
    with Sandbox(BROKEN + "ThreadDiesInExecute") as box:
        r = box.run(PROBE, {}, timeout=120, case_key="probe#0")
    assert r.verdict == "FAILURE" and "SystemExit" in r.reason and "driver-internal" in r.reason, r.reason


# ---- 2. runs that would run nothing are usage errors ----------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["--budget", "0"],
        ["--budget", "0s"],
        ["--budget", "-5"],
        ["--budget=-1m"],
        ["--budget", "nan"],
        ["--budget", "inf"],
        ["--budget="],
        ["--budget", "5x"],
        ["--workers", "0"],
        ["--workers", "-2"],
        ["--threads", "0"],
        ["--processes", "0"],
        ["--client-threads", "-1"],
    ],
)
def test_empty_or_unparsable_runs_are_usage_errors(tmp_path, capsys, args):
    # (a short budget and one quick test first, so a run the harness wrongly starts is short)
    code = main(
        ["stress", "--report-dir", str(tmp_path / "r"), "--budget", "2s", "--tests", "random-model-load", *args]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("nnconform: error:"), err
    assert not (tmp_path / "r").exists()  # nothing was started


def test_tests_the_budget_left_out_are_named_and_the_exit_status_is_3(tmp_path, capsys):
    # One worker; the first case lasts at least its 2 s duration, the budget is 1 s, so the
    # leak case can never start, however fast or slow the machine is.
    rdir = tmp_path / "run"
    code = main(
        [
            "stress",
            "--driver",
            "reference",
            "--budget",
            "1s",
            "--workers",
            "1",
            "--seed",
            "1",
            "--case",
            "parallel-inference#0",
            "--case",
            "leak#0",
            "--duration",
            "parallel-inference=2",
            "--hang-grace",
            "120",
            "--threads",
            "1",
            "--report-dir",
            str(rdir),
        ]
    )
    out = capsys.readouterr().out
    assert code == 3
    [line] = [ln for ln in out.splitlines() if ln.startswith("not run:")]
    assert "leak" in line and "parallel-inference" not in line
    assert [r.test_id for r in read_results(rdir / "results.jsonl")] == ["parallel-inference#0"]
    html = (rdir / "report.html").read_text()
    assert "not run" in html and "leak" in html
    # --report-only rebuilds the same summary from the journal and the manifest
    (rdir / "report.html").unlink()
    assert main(["stress", "--report-only", "--report-dir", str(rdir)]) == 0
    assert "not run" in (rdir / "report.html").read_text()


def test_the_first_case_of_every_test_is_planned_before_any_second_case():
    o = StressOptions()
    plan = build_plan({"leak": 1, "random-model-load": 30, "parallel-inference": 2}, 5, o)
    assert [c.key for c in plan[:3]] == ["random-model-load#0", "parallel-inference#0", "leak#0"]  # shortest first
    assert plan[3].key == "random-model-load#1"


# ---- 4. processes and /dev/shm entries left behind ------------------------------------------


@pytest.mark.parametrize("driver,action", [("SpawnsSetsidChild", "spawn-setsid"), ("DoubleForks", "double-fork")])
def test_processes_a_case_leaves_are_killed_and_named(truth_log, driver, action):
    with Sandbox(BROKEN + driver) as box:
        r = box.run(PROBE, {}, timeout=120, case_key="probe#0")
        children = [d["child"] for d in _log(truth_log) if d["action"] == action]
        assert len(children) == 1
        assert r.verdict == "FAILURE", r.reason
        assert "left 1 process running" in r.reason
        names = r.extra["leftover_processes"]
        assert len(names) == 1 and f"pid {children[0]} " in names[0] and "sleep 600" in names[0]
        assert not _alive(children[0])
        assert reaper.descendants(box.worker_pid) == []
        # the worker carries on: a case that spawns nothing is a SUCCESS again
        assert box.run("nnconform.isolation.sandbox:noop_case", {}, timeout=120).verdict == "SUCCESS"
    assert children[0] not in reaper.descendants(os.getpid())


def test_processes_left_behind_are_named_in_the_stress_row(truth_log, tmp_path):
    cfg = StressConfig(
        driver=BROKEN + "SpawnsSetsidChild",
        budget_s=600,
        tests=["random-inference"],
        workers=1,
        seed=2,
        report_dir=str(tmp_path / "run"),
        cases=["random-inference#0"],
        options=StressOptions(hang_grace=120),
    )
    assert run_stress(cfg) == 1
    [row] = read_results(tmp_path / "run" / "results.jsonl")
    [child] = [d["child"] for d in _log(truth_log) if d["action"] == "spawn-setsid"]
    assert row.outcome == "FAILURE" and "left 1 process running" in row.message
    assert any(f"pid {child} " in p for p in row.extra["leftover_processes"])
    assert not _alive(child)


@pytest.mark.parametrize(
    "driver,verdict,timeout", [("SetsidChildThenCrash", "CRASH", 120), ("SetsidChildThenHang", "HANG", 2.0)]
)
def test_a_dead_workers_escaped_children_are_killed_by_the_parent(truth_log, driver, verdict, timeout):
    with Sandbox(BROKEN + driver, hang_dump_s=0.2) as box:
        r = box.run(PROBE, {}, timeout=timeout, case_key="probe#0")
        [child] = [d["child"] for d in _log(truth_log) if d["action"] == "spawn-setsid"]
        assert r.verdict == verdict, r.reason
        assert not _alive(child)
        assert any(f"pid {child} " in p for p in r.extra["leftover_processes"])
        assert child not in reaper.descendants(os.getpid())


def test_shm_entries_a_case_leaves_are_named_and_removed(truth_log, shm_dir):
    with Sandbox(BROKEN + "LeavesShm") as box:
        r = box.run(PROBE, {}, timeout=120, case_key="probe#0")
    [path] = [d["path"] for d in _log(truth_log) if d["action"] == "shm"]
    assert os.path.dirname(path) == str(shm_dir)
    assert r.verdict == "FAILURE" and "/dev/shm" in r.reason, r.reason
    assert r.extra["leftover_shm"] == [os.path.basename(path)]
    assert not os.path.exists(path) and os.listdir(shm_dir) == []


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs /dev/shm (POSIX named semaphores live there)")
def test_a_named_semaphore_another_process_holds_is_neither_blamed_nor_removed(monkeypatch):
    """A spawned multiprocessing lock is a POSIX named semaphore: glibc writes it under a
    temporary name, maps it and only then links it as sem.mp-..., so its holder's maps name a
    deleted file.  Matched by name, the stress worker of a parallel test took a starting Dask
    worker's semaphore for a leftover of its case and removed it ("Nanny failed to start")."""
    import subprocess
    import sys

    monkeypatch.setattr(reaper, "SHM_DIR", "/dev/shm")
    before = reaper.shm_snapshot()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import multiprocessing as mp, sys; "
            "lock = mp.get_context('spawn').Lock(); print(lock._semlock.name, flush=True); "
            "sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        entry = "sem." + holder.stdout.readline().strip().lstrip("/")
        assert entry in reaper.shm_snapshot() - before, entry
        assert entry not in reaper.shm_leftovers(before, ours={os.getpid()})
        assert entry in reaper.shm_leftovers(before, ours={os.getpid(), holder.pid})  # held by one of ours
        assert os.path.exists(os.path.join("/dev/shm", entry))
    finally:
        holder.stdin.close()
        holder.wait()


def test_shm_entries_held_open_by_another_process_are_not_blamed_on_the_case(shm_dir):
    # Another program's (or another worker's) entry, created during the case and still open
    # elsewhere, is neither named nor removed.
    import subprocess
    import sys

    name = f"nnconform-test-foreign-{os.getpid()}"
    path = str(shm_dir / name)
    before = reaper.shm_snapshot()
    holder = subprocess.Popen(
        [sys.executable, "-c", f"f = open({path!r}, 'wb'); print('ok', flush=True); import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout.readline().strip() == b"ok"
        assert reaper.shm_leftovers(before, ours={os.getpid()}) == []
        assert reaper.shm_leftovers(before, ours={os.getpid(), holder.pid}) == [name]  # held by one of ours
        assert os.path.exists(path)
    finally:
        holder.stdin.close()
        holder.wait()
        if os.path.exists(path):
            os.unlink(path)
