"""Latency statistics a release decision can rest on.

- :func:`percentile_interval`: a distribution-free confidence interval of a percentile from
  order statistics.  Of ``n`` independent latencies, the number below the true ``p``-quantile
  is Binomial(n, p); the interval between the ``l``-th and ``u``-th smallest latency covers
  the quantile with probability P(l <= B < u), so ``l`` and ``u`` are the binomial's tails.
  No normality is assumed (latencies have long right tails).
- :func:`min_queries`: MLPerf LoadGen's early-stopping query count.  The smallest ``n`` for
  which a run with at most one query slower than the reported percentile still shows, at
  the given confidence, that the true percentile is not worse: P(Binomial(n, 1 - p) <= 1) is
  at most 1 - confidence.  At 99 % that is 64 queries for p90 and 662 for p99.
- :func:`early_stopping_estimate`: with ``n`` queries, the latency the ``p``-quantile is
  below at that confidence (MLPerf's "early stopping percentile estimate"), the order
  statistic after discarding the largest number ``t`` of slow queries the binomial allows.

All of it is numpy over the whole sample; binomial tails come from log-factorial cumsums.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence, Union

import numpy as np

# The confidence of every interval and of the early-stopping rule (MLPerf's default is 99 %).
CONFIDENCE = 0.99
Samples = Union[Sequence[float], np.ndarray]
REPORTED_PERCENTILES = (50.0, 90.0, 99.0)


def binomial_cdf(n: int, p: float) -> np.ndarray:
    """P(Binomial(n, p) <= k) for k = 0..n."""
    k = np.arange(n + 1)
    if p <= 0.0:
        return np.ones(n + 1)
    if p >= 1.0:
        return (k >= n).astype(np.float64)
    logfact = np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, n + 1, dtype=np.float64)))))
    logpmf = logfact[n] - logfact[k] - logfact[n - k] + k * math.log(p) + (n - k) * math.log1p(-p)
    return np.minimum(np.cumsum(np.exp(logpmf)), 1.0)


def min_queries(percentile: float, confidence: float = CONFIDENCE, overlatency: int = 1) -> int:
    """MLPerf's early-stopping minimum: see the module docstring."""
    q = 1.0 - percentile / 100.0
    if q <= 0.0:
        raise ValueError("the percentile must be below 100")
    alpha = 1.0 - confidence
    n = overlatency + 1

    # P(B <= t) falls as n grows; double, then bisect
    def tail(m: int) -> float:
        return float(binomial_cdf(m, q)[overlatency])

    hi = n
    while tail(hi) > alpha:
        hi *= 2
    lo = max(n, hi // 2)
    while lo < hi:
        mid = (lo + hi) // 2
        if tail(mid) > alpha:
            lo = mid + 1
        else:
            hi = mid
    return lo


@dataclass(frozen=True)
class Interval:
    percentile: float
    value: float  # the sample percentile (numpy's linear interpolation)
    low: float | None  # None: too few samples for a two-sided interval at this confidence
    high: float | None
    supported: bool  # enough queries for the early-stopping rule (min_queries)

    def as_text(self, fmt: str = ".3f") -> str:
        if self.low is None or self.high is None:
            return f"{self.value:{fmt}} [n too small]"
        return f"{self.value:{fmt}} [{self.low:{fmt}}, {self.high:{fmt}}]"


def order_ranks(n: int, percentile: float, confidence: float = CONFIDENCE) -> tuple[int, int] | None:
    """1-based ranks (l, u) with P(X_(l) <= q_p <= X_(u)) >= confidence, as equal-tailed as
    the binomial allows; None when even (1, n) does not reach the confidence."""
    p = percentile / 100.0
    cdf = binomial_cdf(n, p)
    a = (1.0 - confidence) / 2.0
    # X_(l) <= q  <=>  at least l samples below q  <=> B >= l: P(B >= l) = 1 - cdf[l-1]
    # X_(u) >= q  <=>  fewer than u samples below q <=> B <= u-1: P = cdf[u-1]
    below = np.nonzero(cdf <= a)[0]  # k with P(B <= k) <= a: l = k + 1 keeps the lower tail <= a (lo below)
    lo = int(below[-1]) + 1 if below.size else 0
    above = np.nonzero(cdf >= 1.0 - a)[0]
    u = int(above[0]) + 1 if above.size else n + 1
    if lo < 1 or u > n:
        return None
    return lo, u


def percentile_interval(samples: Samples, percentile: float, confidence: float = CONFIDENCE) -> Interval:
    a = np.sort(np.asarray(samples, dtype=np.float64))
    if a.size == 0:
        raise ValueError("no samples")
    value = float(np.percentile(a, percentile))
    ranks = order_ranks(a.size, percentile, confidence)
    supported = a.size >= min_queries(percentile, confidence) if percentile < 100 else False
    if ranks is None:
        return Interval(percentile, value, None, None, supported)
    return Interval(percentile, value, float(a[ranks[0] - 1]), float(a[ranks[1] - 1]), supported)


def early_stopping_estimate(samples: Samples, percentile: float, confidence: float = CONFIDENCE):
    """(latency, discarded) or None when the run is shorter than min_queries: the ``p``-th
    percentile is at most ``latency`` with the given confidence."""
    a = np.sort(np.asarray(samples, dtype=np.float64))
    n = a.size
    if n == 0:
        return None
    cdf = binomial_cdf(n, 1.0 - percentile / 100.0)
    ok = np.nonzero(cdf <= 1.0 - confidence)[0]  # overlatency counts t the test still accepts
    if ok.size == 0:
        return None
    t = int(ok[-1])
    return float(a[n - 1 - t]), t


def summarise(samples: Samples, confidence: float = CONFIDENCE) -> dict:
    """Mean, spread and every reported percentile with its interval, as flat columns."""
    a = np.asarray(samples, dtype=np.float64)
    if a.size == 0:
        return {}
    out: dict = {
        "queries": int(a.size),
        "mean_ms": float(a.mean()),
        "std_ms": float(a.std()),
        "min_ms": float(a.min()),
        "max_ms": float(a.max()),
        "total_time_sec": float(a.sum() / 1000.0),
    }
    for pc in REPORTED_PERCENTILES:
        iv = percentile_interval(a, pc, confidence)
        tag = f"p{pc:g}"
        out[f"{tag}_ms"] = iv.value
        out[f"{tag}_low_ms"] = iv.low
        out[f"{tag}_high_ms"] = iv.high
        out[f"{tag}_supported"] = iv.supported
    return out


def intervals_overlap(a: tuple[float | None, float | None], b: tuple[float | None, float | None]) -> bool:
    """Whether two intervals share a point; an interval missing a bound overlaps anything."""
    if None in a or None in b:
        return True
    return not (a[1] < b[0] or b[1] < a[0])  # type: ignore[operator]
