"""The subprocess sandbox: each deliberately broken driver gets the right verdict."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from helpers import double

from nnconform.isolation.sandbox import Sandbox, SandboxError

BROKEN = double("broken_stress")
PROBE = "nnconform.stress.tests:liveness_probe"
CASE = "nnconform.stress.tests:run_case"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


# Time limits of cases that are meant to finish are generous: they only stop a broken test,
# and a busy machine must not turn a working case into a HANG.
LIMIT = 120.0


def _run(driver, target=PROBE, kwargs=None, timeout=LIMIT, **kw):
    with Sandbox(driver, **kw) as box:
        return box.run(target, kwargs or {}, timeout=timeout, case_key="test#0")


def test_reference_probe_succeeds_and_worker_is_reused():
    with Sandbox("reference") as box:
        a = box.run(PROBE, {}, timeout=LIMIT)
        b = box.run(PROBE, {}, timeout=LIMIT)
        assert a.verdict == b.verdict == "SUCCESS"
        assert a.worker_pid == b.worker_pid and box.workers_started == 1
        assert b.rss_bytes and b.rss_bytes > 0


def test_fresh_mode_starts_an_interpreter_per_case():
    with Sandbox("reference", mode="fresh") as box:
        a = box.run(PROBE, {}, timeout=LIMIT)
        b = box.run(PROBE, {}, timeout=LIMIT)
        assert a.verdict == b.verdict == "SUCCESS"
        assert a.worker_pid != b.worker_pid and box.workers_started == 2


def test_raising_driver_is_failure_with_the_reason():
    r = _run(BROKEN + "RaisesInExecute")
    assert r.verdict == "FAILURE"
    assert "RuntimeError" in r.reason and "command buffer overflow" in r.reason


def test_garbage_outputs_are_failure_with_the_mismatch():
    r = _run(BROKEN + "GarbageOutputs")
    assert r.verdict == "FAILURE"
    assert "relu_fp32" in r.reason and "expected" in r.reason


def test_segfault_is_crash_with_signal_stack_and_breadcrumb():
    r = _run(BROKEN + "SegfaultOnNegative")
    assert r.verdict == "CRASH"
    assert r.signal == signal.SIGSEGV and "SIGSEGV" in r.reason
    assert "Segmentation fault" in r.stderr_tail  # faulthandler's header
    assert "broken_stress.py" in r.stderr_tail  # ... and the Python stack
    assert r.breadcrumb == "example relu_fp32"


def test_segfault_driver_only_crashes_on_negative_input():
    # The random 10-op graph of this seed has a non-negative first input element.
    from nnconform.stress.random_models import random_model

    seed = next(s for s in range(100) if random_model(s, 10, 1000).inputs[0].reshape(-1)[0] >= 0)
    r = _run(
        BROKEN + "SegfaultOnNegative",
        CASE,
        {"test": "random-inference", "params": {"seed": seed, "graph": "10ops-dims1000"}},
    )
    assert r.verdict == "SUCCESS", r.reason


def test_exit_in_execute_is_crash_with_exit_code_0():
    r = _run(BROKEN + "ExitsInExecute")
    assert r.verdict == "CRASH"
    assert r.exit_code == 0 and r.signal is None and "without a verdict" in r.reason


def test_hang_is_hang_with_stack_dump_and_the_group_is_killed():
    with Sandbox(BROKEN + "HangsInExecute") as box:
        box.start()
        pid = box.worker_pid
        r = box.run(PROBE, {}, timeout=2.0)
        assert r.verdict == "HANG" and "no verdict within 2 s" in r.reason
        assert "Thread" in r.stderr_tail and "broken_stress.py" in r.stderr_tail  # SIGUSR1 dump
        assert not _alive(pid)
        # The slot recovers: the next case gets a new worker.
        assert box.run("nnconform.isolation.sandbox:noop_case", {}, timeout=LIMIT).verdict == "SUCCESS"
        assert box.worker_pid != pid


def test_leaking_driver_fails_the_leak_test():
    r = _run(
        BROKEN + "LeaksMemory",
        CASE,
        {"test": "leak", "params": {"duration": 2.0, "threshold_mb": 32.0}},
        mem_limit=2 << 30,
    )
    assert r.verdict == "FAILURE"
    assert "leak" in r.reason


def test_reference_passes_the_leak_test():
    r = _run("reference", CASE, {"test": "leak", "params": {"duration": 2.0, "threshold_mb": 32.0}})
    assert r.verdict == "SUCCESS", r.reason


def test_unknown_driver_is_a_one_line_sandbox_error():
    with pytest.raises(SandboxError) as e:
        _run("no_such_module_xyz:Driver")
    assert "no_such_module_xyz" in str(e.value) and "\n" not in str(e.value)


def test_workers_die_when_the_runner_is_sigkilled(tmp_path):
    # A parent holding a sandbox whose case hangs is SIGKILLed: the orphan watchdog takes the
    # worker (and its group) down.
    script = textwrap.dedent(f"""
        import sys
        from nnconform.isolation.sandbox import Sandbox
        box = Sandbox("{BROKEN}HangsInExecute", workdir={str(tmp_path)!r})
        box.start()
        print(box.worker_pid, flush=True)
        box.run("{PROBE}", {{}}, timeout=600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pid = int(parent.stdout.readline())
    time.sleep(0.5)
    assert _alive(pid)
    parent.kill()
    parent.wait()
    # (the watchdog polls every 0.5 s; the deadline only keeps a broken watchdog from hanging
    # the test, so it is generous for a busy machine)
    deadline = time.monotonic() + 120
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)
