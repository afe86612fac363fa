"""Timing helpers of the benchmark scripts: runtimes sampled side by side.

On a shared machine (CI and these sessions run on two shared cores) a neighbour's load comes
and goes within seconds.  Timed one after the other, the reference's samples and a
runtime's could see different machines, and a ratio moved by 2x between runs.  Here every
round takes one sample of each function in turn, and a ratio is the median of the rounds'
own ratios, so both sides of it share whatever else was running.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable, Sequence

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def calls_per_sample(fn: Callable[[], object], target: float = 0.002) -> int:
    """Enough calls of ``fn`` to last ~``target`` seconds (1..1000).  A 20 us call timed
    alone is at the mercy of the clock's own cost and granularity (process_time's is coarse
    on some kernels).  Calls ``fn`` twice: a warm-up (allocations, BLAS threads) and a probe."""
    fn()
    t0 = time.perf_counter()
    fn()
    return max(1, min(1000, int(target / max(time.perf_counter() - t0, 1e-7))))


def interleaved(
    fns: Sequence[Callable[[], object]], repeats: int, clock: Callable[[], float] = time.perf_counter
) -> list[list[float]]:
    """Milliseconds per call of each of ``fns``: ``repeats`` rounds, each one sample (a batch
    of calls) of every function in turn."""
    calls = [calls_per_sample(fn) for fn in fns]
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, n, out in zip(fns, calls, samples):
            t0 = clock()
            for _ in range(n):
                fn()
            out.append((clock() - t0) / n * 1e3)
    return samples


def median_ms(fn: Callable[[], object], repeats: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """Median milliseconds per call of one function."""
    return statistics.median(interleaved([fn], repeats, clock)[0])


def round_ratio(a: Sequence[float], b: Sequence[float] | None) -> float | None:
    """Median of the rounds' own ratios a/b (None without ``b``)."""
    return statistics.median(x / y for x, y in zip(a, b)) if b else None
