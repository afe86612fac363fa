"""Audits: did the driver earn its figures?  (MLPerf's compliance tests, adapted.)

- ``same_outputs`` (MLPerf TEST01): the outputs of the timed, performance-mode queries are
  bit for bit those of the accuracy-mode run of the same inputs.  A driver that computes
  less when it believes it is being timed is caught here.
- ``result_cache`` (MLPerf TEST04): one input repeated is not suspiciously faster than fresh
  inputs never seen before.  Fresh and repeated queries are interleaved (so a change of load
  hits both alike); the repeated median must not be below ``CACHE_RATIO`` times the fresh
  median with the two medians' intervals apart.  A driver that remembers results by input
  answers the repeated ones from its cache.
- ``input_seed`` (MLPerf TEST05): inputs of another seed have the same latency within its
  interval: queries of the run's inputs and of the other seed's, interleaved, have medians
  within ``SEED_RATIO`` of each other, or medians whose intervals overlap.  Beyond ``SEED_FAIL_RATIO`` with apart
  intervals it fails (a latency that depends on which inputs were tuned for); between, it is
  a warning (a loaded machine can do that).

Each gives (verdict, message), verdicts PASS, WARN or FAIL.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np

from nnconform.bench.statistics import intervals_overlap, percentile_interval

PASS, WARN, FAIL = "PASS", "WARN", "FAIL"
CACHE_RATIO = 0.5
CACHE_QUERIES = 16  # fresh and repeated queries each
# Fewer cannot judge: the 99 % interval of a median needs 8 samples, and with 12 it leaves out
# the slowest and fastest (the repeated input's first query is a fresh one to any cache).
CACHE_MIN_QUERIES = 12
SEED_RATIO = 1.25
SEED_FAIL_RATIO = 2.0
SEED_OFFSET = 1_000_003  # the other seed: far from every seed the main run used


def same_outputs(accuracy_mode: Sequence[Sequence[np.ndarray]], perf: dict[int, list[np.ndarray]]) -> tuple[str, str]:
    if not perf:
        return PASS, "no timed queries to compare"
    for i, outs in sorted(perf.items()):
        ref = accuracy_mode[i]
        if len(outs) != len(ref):
            return FAIL, f"input {i}: {len(outs)} outputs when timed, {len(ref)} in accuracy mode"
        for k, (a, b) in enumerate(zip(outs, ref)):
            a, b = np.asarray(a), np.asarray(b)
            if a.shape != b.shape or a.dtype != b.dtype or not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
                d = "" if a.shape != b.shape else f", largest difference {np.max(np.abs(a.astype(float) - b)):.3g}"
                return FAIL, f"input {i} output {k}: the timed query's output differs from accuracy mode's{d}"
    return PASS, f"{len(perf)} input(s): timed outputs equal accuracy mode's bit for bit"


def _median_iv(lat: Sequence[float]) -> tuple[float, tuple[float | None, float | None]]:
    iv = percentile_interval(lat, 50.0)
    return iv.value, (iv.low, iv.high)


def result_cache(pm, fresh_request: Callable[[int], object], *, queries: int = CACHE_QUERIES) -> tuple[str, str, dict]:
    """``fresh_request(k)`` makes a request of inputs never used before (k = 0..queries);
    request 0 is the repeated one."""
    queries = max(queries, CACHE_MIN_QUERIES)
    repeated = fresh_request(0)
    fresh_ms, rep_ms = [], []
    for k in range(1, queries + 1):
        r = fresh_request(k)
        t0 = time.perf_counter()
        pm.execute(r)
        fresh_ms.append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        pm.execute(repeated)
        rep_ms.append((time.perf_counter() - t0) * 1e3)
    fm, fiv = _median_iv(fresh_ms)
    rm, riv = _median_iv(rep_ms)
    figures = {"cache_fresh_p50_ms": fm, "cache_repeated_p50_ms": rm}
    ratio = rm / fm if fm > 0 else 1.0
    text = f"repeated input p50 {rm:.3f} ms vs fresh inputs {fm:.3f} ms (x{ratio:.2f}, {queries} each)"
    if ratio < CACHE_RATIO and not intervals_overlap(fiv, riv):
        return FAIL, "repeated input answered suspiciously fast (result caching?): " + text, figures
    return PASS, text, figures


def input_seed(pm, main: Sequence, other: Sequence, *, queries: int) -> tuple[str, str, dict]:
    """Queries of the run's inputs and of another seed's, interleaved (so that a change of
    load hits both alike), ``queries`` of each."""
    main_ms: list[float] = []
    other_ms: list[float] = []
    for k in range(queries):
        for reqs, out in ((main, main_ms), (other, other_ms)):
            t0 = time.perf_counter()
            pm.execute(reqs[k % len(reqs)])
            out.append((time.perf_counter() - t0) * 1e3)
    m, miv = _median_iv(main_ms)
    o, oiv = _median_iv(other_ms)
    ratio = max(m, o) / max(min(m, o), 1e-9)
    figures = {"seed_p50_ms": o}
    text = f"other seed p50 {o:.3f} ms vs {m:.3f} ms (x{o / m if m > 0 else 1.0:.2f}, {queries} each, interleaved)"
    if intervals_overlap(miv, oiv) or ratio <= SEED_RATIO:
        return PASS, text, figures
    if ratio <= SEED_FAIL_RATIO:
        return WARN, text + "; the intervals are apart", figures
    return FAIL, "latency depends on the input seed: " + text, figures


def worst(verdicts: Sequence[str]) -> str:
    order = {PASS: 0, WARN: 1, FAIL: 2}
    return max(verdicts, key=lambda v: order.get(v, 0), default=PASS)
