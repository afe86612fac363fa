"""nnconform.isolation.interrupts: a Ctrl-C reaches the main thread's waits whichever thread took it.

Each check runs in a fresh interpreter, whose main thread owns SIGINT's default handler (a
pytest-xdist worker's may not).  A signal is aimed at one thread with pthread_kill, as the
kernel does when it picks a thread other than the main one for a process-wide Ctrl-C.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

from nnconform.isolation import interrupts


def run_script(body: str) -> str:
    prelude = textwrap.dedent("""\
        import concurrent.futures, os, signal, threading, time
        from nnconform.isolation import interrupts

        # (Python leaves SIGINT ignored when this process inherited it ignored: a background job)
        signal.signal(signal.SIGINT, signal.default_int_handler)

        def sigint_from_a_plain_thread(then=None, delay=0.3):
            # A thread that does not block SIGINT takes it: Python's C handler runs there,
            # and only the main thread can raise the KeyboardInterrupt.  ``then`` (what the
            # main thread waits for) completes 30 s later: a wait that is not woken by the
            # signal ends there, and the KeyboardInterrupt follows it, with ``then`` done.
            def poke():
                time.sleep(delay)
                signal.pthread_kill(threading.get_ident(), signal.SIGINT)
                time.sleep(30)
                if then is not None:
                    then()
            threading.Thread(target=poke, daemon=True).start()
        """)
    r = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(body)], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.strip()


@pytest.mark.parametrize("timeout", ["60", "None"])
def test_sliced_wait_raises_the_interrupt_a_helper_thread_took(timeout):
    # A plain Event.wait(60) sleeps until the event is set 30 s later: the handler's exception
    # waits for the main thread to run Python code again (the bug that held a Ctrl-C for a
    # whole driver call bound), and comes after the event.
    out = run_script(f"""
        ev = threading.Event()
        sigint_from_a_plain_thread(ev.set)
        try:
            got = interrupts.wait(ev, {timeout})
            print("returned", got)
        except KeyboardInterrupt:
            print("interrupted", ev.is_set())
        """)
    assert out == "interrupted False"


def test_future_result_is_interrupted_and_keeps_its_own_timeout_error():
    out = run_script("""
        f = interrupts.Future()
        sigint_from_a_plain_thread(lambda: f.set_result(1))
        try:
            f.result(60)
            print("returned")
        except KeyboardInterrupt:
            print("interrupted", f.done())
        try:
            f.exception(0.25)
        except concurrent.futures.TimeoutError:
            print("timed out", f.done())
        # a driver's own TimeoutError is the outcome of a finished call, raised at once
        g = interrupts.Future()
        g.set_exception(TimeoutError("the driver's"))
        try:
            g.result(60)
        except TimeoutError as e:
            print("driver's:", e)
        h = interrupts.Future()
        threading.Timer(0.2, h.set_result, args=(7,)).start()
        print("result", h.result(60))
        """)
    assert out.splitlines() == ["interrupted False", "timed out False", "driver's: the driver's", "result 7"]


def test_wait_returns_the_event_state_at_its_bound():
    out = run_script("""
        ev = threading.Event()
        print(interrupts.wait(ev, 0.25), interrupts.wait(ev, 0))
        threading.Timer(0.2, ev.set).start()
        print(interrupts.wait(ev, 60), interrupts.wait(ev, 0))
        """)
    assert out.splitlines() == ["False False", "True True"]


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="no POSIX signal masks on this platform")
def test_helper_threads_block_the_stop_signals_and_the_creator_keeps_its_mask():
    out = run_script("""
        def blocked(tid):
            with open(f"/proc/self/task/{tid}/status") as f:
                return int(next(l for l in f if l.startswith("SigBlk:")).split()[1], 16)
        seen = {}
        done = threading.Event()
        def body():
            seen["mask"] = blocked(threading.get_native_id())
            seen["py"] = signal.pthread_sigmask(signal.SIG_BLOCK, [])
            done.set()
        t = interrupts.thread(body, name="probe")
        done.wait(60)
        bits = lambda sigs: sum(1 << (s - 1) for s in sigs)
        print(t.daemon, t.name)
        print(seen["mask"] & bits(interrupts.STOP_SIGNALS) == bits(interrupts.STOP_SIGNALS))
        print(set(seen["py"]) >= set(interrupts.STOP_SIGNALS))
        print(blocked(threading.get_native_id()) == 0, signal.pthread_sigmask(signal.SIG_BLOCK, []) == set())
        """)
    assert out.splitlines() == ["True probe", "True", "True", "True True"]


def test_stop_signals_are_asynchronous_ones_only():
    assert signal.SIGINT in interrupts.STOP_SIGNALS and signal.SIGTERM in interrupts.STOP_SIGNALS
    # faults belong to the thread that caused them: blocking them would hide a driver's crash
    for fault in (signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT):
        assert fault not in interrupts.STOP_SIGNALS


def _sigblk(status: str) -> int:
    return int(next(line for line in status.splitlines() if line.startswith("SigBlk:")).split()[1], 16)


def test_a_driver_call_and_the_processes_it_starts_keep_the_callers_signals():
    """A driver's code runs in the watchdog's thread: it must not block the stop signals, or a
    server process the driver starts could never be sent SIGTERM (a child inherits the mask
    of the thread that started it)."""
    from nnconform.isolation.watchdog import call_with_timeout

    with open("/proc/thread-self/status") as f:
        mine = _sigblk(f.read())
    child = call_with_timeout(
        lambda: subprocess.run(["cat", "/proc/self/status"], capture_output=True, text=True, timeout=60).stdout, 60
    )
    assert _sigblk(child) == mine


def test_join_waits_for_the_thread_or_its_bound():
    out = run_script("""
        t = threading.Thread(target=time.sleep, args=(0.3,), daemon=True); t.start()
        interrupts.join(t, 0.05); print(t.is_alive())
        interrupts.join(t); print(t.is_alive())
        finished = []
        u = threading.Thread(target=lambda: (time.sleep(30), finished.append(1)), daemon=True); u.start()
        sigint_from_a_plain_thread()
        try:
            interrupts.join(u)
            print("returned")
        except KeyboardInterrupt:
            # (not u.is_alive(): Python 3.11 marks the thread of an interrupted join stopped)
            print("interrupted", bool(finished))
        """)
    assert out.splitlines() == ["True", "False", "interrupted False"]
