"""Bounded driver calls: turn a driver that never returns into a HANG verdict.

    result = call_with_timeout(lambda: prepared.execute(request, loop_timeout=0.001), 5.0)

runs the call in a daemon thread and waits at most ``timeout_s`` seconds.  If the call returns
(or raises), that result (or exception) is handed back unchanged; if it does not, HangError is
raised and the suite can record a HANG instead of waiting forever.

Limits, on purpose: Python cannot kill a thread, so a hung call keeps running in the
background (daemon threads do not keep the interpreter alive at exit) and keeps whatever it
holds.  A driver that hangs while holding the GIL in native code, crashes the process or
corrupts shared state is beyond this module; the subprocess sandbox of the stress runner
(a later issue) isolates each case in its own process and can kill it.  Callers that can, also
tell the driver to stop (e.g. ``PreparedModel.release()``) after a HangError.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from nnconform.errors import NnError
from nnconform.isolation import interrupts


class HangError(NnError):
    """A driver call did not return within its bound."""

    def __init__(self, what: str, timeout_s: float):
        self.what, self.timeout_s = what, timeout_s
        super().__init__(f"HANG: {what} did not return within {timeout_s:g} s")


def call_with_timeout(fn: Callable[[], Any], timeout_s: float, what: str = "") -> Any:
    """``fn()``, or HangError if it takes longer than ``timeout_s`` seconds."""
    box: dict[str, Any] = {}
    finished = threading.Event()

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as e:  # handed back to the caller below, not swallowed
            box["error"] = e
        finally:
            finished.set()

    name = what or getattr(fn, "__qualname__", "driver call")
    # A plain thread: the driver's code runs in it, and processes it starts inherit its signal
    # mask.  The wait is sliced instead, so a Ctrl-C stops the run now, not when the driver
    # call returns or its bound runs out (nnconform.isolation.interrupts).
    thread = threading.Thread(target=target, name=f"nnconform-watchdog: {name}", daemon=True)
    thread.start()
    if not interrupts.wait(finished, timeout_s):
        raise HangError(name, timeout_s)
    if "error" in box:
        raise box["error"]  # its traceback still shows the driver's own frames
    return box["result"]


__all__ = ["HangError", "call_with_timeout"]
