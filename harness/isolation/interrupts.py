"""Ctrl-C that reaches a run while it waits on a driver.

Python raises KeyboardInterrupt only in the main thread, and only once that thread runs Python
code again: when its blocking call returns, or fails with EINTR because the signal interrupted
*it*.  The kernel hands a process-wide signal (Ctrl-C from the terminal, ``kill -INT``, a
release engineer's ``timeout`` wrapper) to any one thread that does not block it, and it
passes over the main thread when that thread already has a signal pending.  If the signal
lands on a helper thread (a driver host's reply reader, the deadline monitor, a BLAS or
runtime worker), the main thread sleeps on in its wait for the driver until the call ends,
which for a hanging driver is the whole call bound (a minute by default).  The interrupt
then arrives after the HANG verdict the user pressed Ctrl-C to avoid (tests/test_isolation.py
aims a SIGINT at such a thread with tgkill and shows it).

Two measures make the interrupt prompt:

- ``thread()`` starts the harness's helper threads with the stopping signals blocked, so the
  kernel gives those signals to a thread that can act on them: the main one.  Only for threads
  that run the harness's own code and start no process: a child inherits the signal mask of
  the thread that started it, and a driver's server or a Dask worker that cannot be sent
  SIGTERM or SIGINT is a process nobody can stop politely.  Threads that run a driver's code
  (nnconform.isolation.watchdog) stay plain;
- ``wait()``, ``join()`` and ``Future`` cut the main thread's long waits into short slices.
  Between slices Python runs the handlers of signals that any thread received, including
  threads we do not start (a driver's, a library's), so an interrupt lands within one slice.
"""

from __future__ import annotations

import concurrent.futures
import signal
import threading
import time
from typing import Any, Callable, Iterator, Protocol

#: Longest stretch the main thread waits without looking at received signals (seconds).  Ten
#: wake-ups a second cost nothing next to a driver call, and Ctrl-C feels immediate.
SLICE_S = 0.1

#: Asynchronous signals a person, a shell or a timer sends to stop or poke the run.  Faults
#: (SIGSEGV, SIGBUS...) belong to the thread that caused them and are never blocked.
STOP_SIGNALS = frozenset(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGALRM", "SIGUSR1", "SIGUSR2")
    if hasattr(signal, name)
)


def thread(target: Callable[..., Any], *, name: str, args: tuple[Any, ...] = ()) -> threading.Thread:
    """A started daemon thread running ``target(*args)`` with STOP_SIGNALS blocked (harness
    code only: see the module's note on processes started from it).

    The new thread inherits its creator's signal mask, so the signals are blocked around its
    start rather than from inside it: there is no moment at which it could be handed one.  A
    signal arriving during those microseconds stays pending for the process and goes to the
    creating thread as soon as the mask is restored."""
    t = threading.Thread(target=target, args=args, name=name, daemon=True)
    if not hasattr(signal, "pthread_sigmask"):  # (not POSIX: signals go to the main thread anyway)
        t.start()
        return t
    old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        t.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    return t


def _slices(timeout: float | None) -> Iterator[float]:
    """Waits of at most SLICE_S that together last ``timeout`` seconds (forever when None).
    Between two of them the main thread runs Python code, and with it the handler of a signal
    that any thread took."""
    end = None if timeout is None else time.monotonic() + timeout
    while True:
        left = SLICE_S if end is None else min(SLICE_S, end - time.monotonic())
        if left <= 0:
            return
        yield left


class Waitable(Protocol):
    """What ``wait`` needs of an event (threading.Event, or the proxy's one-shot answer)."""

    def wait(self, timeout: float | None = None) -> bool: ...

    def is_set(self) -> bool: ...


def wait(event: Waitable, timeout: float | None = None) -> bool:
    """``event.wait(timeout)``, so sliced that a KeyboardInterrupt (or any other signal
    handler's exception) is raised within a slice, whichever thread the signal hit."""
    return any(event.wait(s) for s in _slices(timeout)) or event.is_set()


def join(thread: threading.Thread, timeout: float | None = None) -> None:
    """``thread.join(timeout)``, sliced like ``wait``."""
    for s in _slices(timeout):
        thread.join(s)
        if not thread.is_alive():
            return


class Future(concurrent.futures.Future[Any]):
    """A Future whose ``result`` and ``exception`` wait in slices (see ``wait``): the driver
    proxies hand these to suites for asynchronous executions."""

    def _sliced(self, get: Callable[[float | None], Any], timeout: float | None) -> Any:
        for s in _slices(timeout):
            try:
                return get(s)
            except concurrent.futures.TimeoutError:
                if self.done():  # the TimeoutError is the call's own outcome (a driver's)
                    raise
        return get(0)  # the bound is spent: the outcome, or TimeoutError

    def result(self, timeout: float | None = None) -> Any:
        return self._sliced(super().result, timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        exc: BaseException | None = self._sliced(super().exception, timeout)
        return exc


__all__ = ["SLICE_S", "STOP_SIGNALS", "thread", "wait", "join", "Future"]
