"""Verdicts against a baseline: ``nnconform bench --baseline PREVIOUS_DIR``.

Each model x driver row of this run is compared with the same model x driver of the
previous run's ``bench.csv``, metric by metric, into PASS, PASS_WITH_WARNING or FAIL (the
words of TFLite's Delegate Performance Benchmark).  Every threshold is in :data:`THRESHOLDS`,
here and nowhere else (docs/benchmark.md explains them):

- latency (the requested percentile, default p90): a ratio over ``fail_ratio`` (or
  ``warn_ratio``) is FAIL (PASS_WITH_WARNING) only when the two percentiles' confidence
  intervals are also apart, so noise alone never fails a run; faster is always PASS;
- start-up (prepare + first execution, one sample each): over the ratio *and* more than
  ``min_ms`` slower;
- memory (peak resident memory of the driver host in steady execution): over the ratio and
  more than ``min_mb`` more;
- accuracy: the accuracy verdict turning to FAIL, or top-1 agreement dropping by more than
  ``top1_drop_fail``, is FAIL; a largest error growing past ``error_ratio_warn`` times is a
  warning.

A row with no counterpart in the baseline (a new model or driver) gets no verdict.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Mapping

PASS, WARN, FAIL = "PASS", "PASS_WITH_WARNING", "FAIL"
METRICS = ("latency", "startup", "memory", "accuracy")

THRESHOLDS: dict[str, dict[str, float]] = {
    "latency": {"warn_ratio": 1.10, "fail_ratio": 1.50},
    "startup": {"warn_ratio": 1.50, "fail_ratio": 2.00, "min_ms": 25.0},
    "memory": {"warn_ratio": 1.20, "fail_ratio": 1.50, "min_mb": 16.0},
    "accuracy": {"top1_drop_fail": 0.10, "error_ratio_warn": 2.0},
}


def load(directory: str | Path) -> dict[tuple[str, str], dict[str, str]]:
    """(model, driver) -> the baseline's bench.csv row; ValueError (one line) when unreadable."""
    p = Path(directory) / "bench.csv"
    try:
        with open(p, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise ValueError(
            f"--baseline {directory}: cannot read {p.name} ({getattr(e, 'strerror', None) or e})"
        ) from None
    if not rows or "model" not in rows[0] or "driver" not in rows[0]:
        raise ValueError(f"--baseline {directory}: {p.name} holds no benchmark rows")
    return {(r["model"], r["driver"]): r for r in rows}


def _num(v: Any) -> float | None:
    if v is None or v == "":
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _ratio_verdict(now: float | None, before: float | None, t: Mapping[str, float], floor: float) -> tuple[str, str]:
    if now is None or before is None:
        return "", "not measured in both runs"
    ratio = now / before if before > 0 else (1.0 if now <= 0 else float("inf"))
    text = f"{now:.4g} vs {before:.4g} (x{ratio:.2f})"
    if now - before <= floor:
        return PASS, text
    if ratio > t["fail_ratio"]:
        return FAIL, text
    if ratio > t["warn_ratio"]:
        return WARN, text
    return PASS, text


def compare(
    row: Mapping[str, Any], base: Mapping[str, Any], percentile: float, thresholds: Mapping[str, Mapping] | None = None
) -> dict[str, tuple[str, str]]:
    """metric -> (verdict, message); ``row`` and ``base`` are CSV rows (strings or numbers)."""
    t = thresholds or THRESHOLDS
    out: dict[str, tuple[str, str]] = {}
    tag = f"p{percentile:g}"

    def target(r: Mapping[str, Any]) -> tuple[float | None, float | None, float | None]:
        # the run's requested percentile; a baseline run for another one still has p50/p90/p99
        if _num(r.get("target_percentile")) == percentile:
            return _num(r.get("target_ms")), _num(r.get("target_low_ms")), _num(r.get("target_high_ms"))
        return _num(r.get(f"{tag}_ms")), _num(r.get(f"{tag}_low_ms")), _num(r.get(f"{tag}_high_ms"))

    (now, lo_now, _), (before, _, hi_before) = target(row), target(base)
    if now is None or before is None:
        out["latency"] = ("", f"{tag} not measured in both runs")
    else:
        ratio = now / before if before > 0 else float("inf")
        apart = lo_now is not None and hi_before is not None and lo_now > hi_before
        text = f"{tag} {now:.4g} ms vs {before:.4g} ms (x{ratio:.2f}; intervals {'apart' if apart else 'overlap'})"
        lat = t["latency"]
        if ratio > lat["fail_ratio"] and apart:
            out["latency"] = (FAIL, text)
        elif ratio > lat["warn_ratio"] and apart:
            out["latency"] = (WARN, text)
        else:
            out["latency"] = (PASS, text)

    def startup(r: Mapping[str, Any]) -> float | None:
        a, b = _num(r.get("compile_without_cache_ms")), _num(r.get("first_execution_ms"))
        return None if a is None or b is None else a + b

    v, m = _ratio_verdict(startup(row), startup(base), t["startup"], t["startup"]["min_ms"])
    out["startup"] = (v, "prepare + first execution ms " + m)
    v, m = _ratio_verdict(
        _num(row.get("peak_rss_execute_mb")), _num(base.get("peak_rss_execute_mb")), t["memory"], t["memory"]["min_mb"]
    )
    out["memory"] = (v, "peak resident MB in execution " + m)

    acc = t["accuracy"]
    now_v, before_v = str(row.get("accuracy_verdict") or ""), str(base.get("accuracy_verdict") or "")
    top_now, top_before = _num(row.get("top1_agreement")), _num(base.get("top1_agreement"))
    err_now, err_before = _num(row.get("max_single_error")), _num(base.get("max_single_error"))
    if not now_v or not before_v:
        out["accuracy"] = ("", "not measured in both runs")
    elif now_v == "FAIL" and before_v != "FAIL":
        out["accuracy"] = (FAIL, f"accuracy verdict {before_v} -> FAIL")
    elif top_now is not None and top_before is not None and top_before - top_now > acc["top1_drop_fail"]:
        out["accuracy"] = (FAIL, f"top-1 agreement {top_before:.2f} -> {top_now:.2f}")
    elif (
        err_now is not None
        and err_before is not None
        and err_now > acc["error_ratio_warn"] * err_before
        and err_now > 0
        and not (err_before == 0 and now_v == "PASS")
    ):
        out["accuracy"] = (WARN, f"largest error {err_before:.3g} -> {err_now:.3g}")
    else:
        out["accuracy"] = (PASS, f"accuracy verdict {before_v} -> {now_v}")
    return out


def overall(verdicts: Mapping[str, tuple[str, str]]) -> str:
    got = [v for v, _ in verdicts.values() if v]
    if FAIL in got:
        return FAIL
    if WARN in got:
        return WARN
    return PASS if got else ""
