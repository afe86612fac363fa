"""Progress with an ETA across all suites of a conformance run.

pytest's own progress is a column of dots and a percentage per line; a 10,000-case run across
suites whose cases differ 100-fold in cost (a golden vector takes milliseconds, a real model
seconds) needs a time estimate instead.  Every ``--nn-progress`` seconds the controller prints
one line: cases done of planned, elapsed, an estimate of the time left, and the suite running.

The estimate weighs what is left by suite: each suite's mean case time so far (the overall
mean for a suite not yet started) times its remaining cases, scaled by how wall time has
related to summed case time so far (which accounts for ``-n`` workers and for the harness's
overhead between cases).

It counts work, not cases: a case's time is its call phase, the work the case itself does.
Set-up and tear-down (a driver host starting, a module's models prepared once for all its
checks) are one-off costs, already spent: they are taken out of the elapsed time before it is
related to the work done.  Counted as case time, one 5-second host start among 100 cases of
1 ms made every remaining case cost 50 ms ("44 min left" for a 9-minute run).
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import cast

import pytest


def suite_of(nodeid: str) -> str:
    return Path(nodeid.split("::", 1)[0]).stem.removeprefix("test_")


def format_duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    if h:
        return f"{h}h{m:02d}m"
    if m:
        return f"{m}m{s:02d}s"
    return f"{s}s"


class Estimate:
    """Running totals of finished cases; :meth:`eta` is the time-left estimate."""

    def __init__(self, planned_by_suite: Counter):
        self.planned = Counter(planned_by_suite)
        self.done: Counter[str] = Counter()
        # summed per-case durations (seconds, floats), by suite; a Counter for its 0 default,
        # though typeshed's Counter counts ints only
        self.case_time = cast("dict[str, float]", Counter())
        self.one_off = 0.0  # set-up and tear-down time of the finished cases (seconds)
        self.workers = 1  # xdist workers running cases side by side

    def finish(self, suite: str, duration: float, one_off: float = 0.0, cases: int = 1) -> None:
        """A case finished (or ``cases`` of them, a batched item's cells): ``duration`` is
        their own work (the call phase), ``one_off`` the set-up and tear-down around it."""
        self.done[suite] += cases
        self.case_time[suite] += max(0.0, duration)
        self.one_off += max(0.0, one_off)

    @property
    def total_done(self) -> int:
        return sum(self.done.values())

    @property
    def total_planned(self) -> int:
        return sum(self.planned.values())

    def eta(self, elapsed: float) -> float | None:
        done = self.total_done
        work_done = sum(self.case_time.values())
        if not done or elapsed <= 0:
            return None
        overall = work_done / done
        work_left = 0.0
        for suite, n in self.planned.items():
            left = max(0, n - self.done[suite])
            if left:
                mean = self.case_time[suite] / self.done[suite] if self.done[suite] else overall
                work_left += left * mean
        if work_done <= 0:  # only instant cases so far: fall back on the case rate
            return elapsed / done * max(0, self.total_planned - done)
        # wall time per second of case work, one-off costs taken out (never below 1: the
        # cases' own time cannot have taken less wall time than it did, on one worker)
        w = max(1, self.workers)  # set-up on w workers side by side took 1/w of its sum in wall time
        working = max(elapsed - self.one_off / w, work_done / w)
        return work_left * (working / work_done)


def _is_suite_nodeid(nodeid: str) -> bool:
    """Under xdist the controller sees node ids only: a conformance case lives in a
    ``suites/test_*.py`` file (a checkout's or the installed package's)."""
    path = Path(nodeid.split("::", 1)[0])
    return path.name.startswith("test_") and path.parent.name == "suites"


class ProgressReporter:
    """The controller-side plugin (registered by nnconform.plugin when --nn-progress > 0)."""

    def __init__(self, config: pytest.Config, interval: float):
        self.config = config
        self.interval = interval
        self.estimate: Estimate | None = None
        self.started = time.monotonic()
        self.last_print = self.started
        self.current = ""
        # (call, setup) durations of the cases in flight
        self._phase_time: dict[str, tuple[float, float]] = {}

    def _plan(self, planned: Counter) -> None:
        # A resumed run's recorded cases are deselected before this point (on the workers
        # too), so what is planned here is what is left to run.
        self.estimate = Estimate(planned)
        n = getattr(self.config.option, "numprocesses", None)
        self.estimate.workers = n if isinstance(n, int) and n > 0 else 1
        self.started = self.last_print = time.monotonic()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.estimate is None and session.items:
            from nnconform.plugin.cells import by_suite

            self._plan(by_suite(session.items))  # a batched item counts its cells

    @pytest.hookimpl(optionalhook=True, trylast=True)
    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        if self.estimate is None:  # every worker collects the same cases: plan from the first
            from nnconform.plugin import session_of

            # the worker's plan counts a batched item's cells (nnconform.plugin.cells); read
            # by the plugin's own hook, which runs first
            plan = session_of(self.config).cell_plan
            self._plan(plan if plan is not None else Counter(suite_of(n) for n in ids if _is_suite_nodeid(n)))

    def pytest_runtest_logreport(self, report) -> None:
        est = self.estimate
        if est is None or not est.total_planned:
            return
        suite = suite_of(report.nodeid)
        if suite not in est.planned:
            return
        took = max(0.0, float(getattr(report, "duration", 0.0)))
        call, around = self._phase_time.pop(report.nodeid, (0.0, 0.0))
        if report.when == "call":
            call += took
        else:
            around += took
        if report.when != "teardown":
            self._phase_time[report.nodeid] = (call, around)
            self.current = suite
            return
        # a batched item (nnconform.plugin.cells) finished all its cells at once
        cells = next((int(v) for k, v in report.user_properties if k == "nnconform.cells"), 1)
        est.finish(suite, call, around, cases=max(1, cells))
        now = time.monotonic()
        if now - self.last_print >= self.interval:
            self.last_print = now
            self._print(now)

    def line(self, now: float | None = None) -> str:
        est = self.estimate
        assert est is not None, "line() is printed only after the run's cases were planned"
        now = time.monotonic() if now is None else now
        elapsed = now - self.started
        done, planned = est.total_done, est.total_planned
        pct = 100.0 * done / planned if planned else 100.0
        eta = est.eta(elapsed)
        left = f", about {format_duration(eta)} left" if eta is not None and done < planned else ""
        where = f"; now in {self.current}" if self.current and done < planned else ""
        return f"nnconform: {done:,} of {planned:,} cases ({pct:.0f}%) in {format_duration(elapsed)}{left}{where}"

    def _print(self, now: float) -> None:
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if tr is None:
            return
        # pytest's dots share the line: start a fresh one (ensure_newline only knows about
        # file-path prefixes, not the -q dots).
        if getattr(tr._tw, "width_of_current_line", 0):
            tr._tw.line()
        tr.write_line(self.line(now))
