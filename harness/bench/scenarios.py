"""How queries are issued (MLPerf's scenarios, for one device).

- single-stream: one query at a time, the next issued when the previous returns; every
  query's latency is a sample.  It runs until it has at least ``queries`` samples *and*
  ``min_duration`` seconds of them (whichever is later), after ``warmup`` untimed queries
  (their latencies are reported separately, never mixed into the statistics).
- offline: the whole query set issued back to back (through a burst object when the
  driver offers one, as an app streaming frames would); the figure is throughput, queries
  per second over the wall time of the set.

The inputs cycle through the seeded request set; the outputs of the last timed query of each
request are kept for the audit that performance mode computes what accuracy mode did.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

SINGLE_STREAM = "single-stream"
OFFLINE = "offline"
SCENARIOS = (SINGLE_STREAM, OFFLINE)
# A bound on a single-stream run however small min_duration makes a query: queries x this.
MAX_QUERY_FACTOR = 50


def parse_scenarios(text: str | None) -> tuple[str, ...]:
    if not text:
        return SCENARIOS
    chosen = tuple(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
    bad = [s for s in chosen if s not in SCENARIOS]
    if bad or not chosen:
        raise ValueError(f"unknown scenario {', '.join(bad) or repr(text)} (choose from {', '.join(SCENARIOS)})")
    return chosen


@dataclass
class SingleStream:
    latencies_ms: list[float] = field(default_factory=list)
    warmup_ms: list[float] = field(default_factory=list)
    outputs: dict[int, list[np.ndarray]] = field(default_factory=dict)  # request index -> last timed outputs
    duration_s: float = 0.0


def single_stream(pm, requests: Sequence, *, warmup: int, queries: int, min_duration: float) -> SingleStream:
    out = SingleStream()
    for k in range(warmup):
        t0 = time.perf_counter()
        pm.execute(requests[k % len(requests)])
        out.warmup_ms.append((time.perf_counter() - t0) * 1e3)
    start = time.perf_counter()
    k = 0
    cap = max(queries, 1) * MAX_QUERY_FACTOR
    while k < cap and (k < queries or time.perf_counter() - start < min_duration):
        i = k % len(requests)
        t0 = time.perf_counter()
        res = pm.execute(requests[i])
        out.latencies_ms.append((time.perf_counter() - t0) * 1e3)
        out.outputs[i] = list(res.outputs)
        k += 1
    out.duration_s = time.perf_counter() - start
    return out


@dataclass
class Offline:
    queries: int
    duration_s: float
    burst: bool
    note: str = ""  # why the queries went one by one although the driver offers bursts

    @property
    def qps(self) -> float:
        return self.queries / self.duration_s if self.duration_s > 0 else float("inf")


def offline(pm, requests: Sequence, *, queries: int) -> Offline:
    from nnconform.driver import BurstExecution

    burst, note = None, ""
    if isinstance(pm, BurstExecution):
        try:
            burst = pm.configure_burst()
        except Exception as e:  # recorded in the row; the offline run goes on query by query
            note = f"configure_burst failed ({type(e).__name__}: {str(e)[:120]})"
    run = burst.execute if burst is not None else pm.execute
    t0 = time.perf_counter()
    for k in range(queries):
        run(requests[k % len(requests)])
    took = time.perf_counter() - t0
    if burst is not None:
        burst.release()
    return Offline(queries, took, burst is not None, note)
