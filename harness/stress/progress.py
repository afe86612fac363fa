"""A one-line progress bar for stress runs: cases done, verdict counts, time left.

On a terminal the line is redrawn in place; otherwise (a CI log) a full line is printed at most
every ``log_every`` seconds.  Notes (a case that went wrong) are printed above the bar.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter

from nnconform.verdict.results import STRESS_OUTCOMES


def _clock(s: float) -> str:
    s = max(0, int(s))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Progress:
    def __init__(
        self, total: int, budget_s: float, done: int = 0, stream=None, log_every: float = 10.0, width: int = 24
    ):
        self.total, self.budget_s, self.done = total, budget_s, done
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.counts: Counter = Counter()
        self.start = time.monotonic()
        self.log_every, self.width = log_every, width
        self._last = 0.0
        self._lock = threading.Lock()

    def line(self) -> str:
        frac = self.done / self.total if self.total else 1.0
        fill = int(round(frac * self.width))
        elapsed = time.monotonic() - self.start
        counts = " ".join(f"{o} {self.counts[o]}" for o in STRESS_OUTCOMES)
        return (
            f"[{'#' * fill}{'.' * (self.width - fill)}] {self.done}/{self.total} cases  {counts}  "
            f"elapsed {_clock(elapsed)}  left {_clock(self.budget_s - elapsed)}"
        )

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.tty:
            self.stream.write("\r\033[K" + self.line())
            self.stream.flush()
        elif force or now - self._last >= self.log_every:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
            self._last = now

    def case_done(self, verdict: str) -> None:
        with self._lock:
            self.done += 1
            self.counts[verdict] += 1
            self._draw()

    def note(self, text: str) -> None:
        with self._lock:
            if self.tty:
                self.stream.write("\r\033[K")
            self.stream.write(text.rstrip("\n") + "\n")
            self._draw(force=False)

    def tick(self) -> None:
        with self._lock:
            self._draw()

    def finish(self) -> None:
        with self._lock:
            self._draw(force=True)
            if self.tty:
                self.stream.write("\n")
            self.stream.flush()
