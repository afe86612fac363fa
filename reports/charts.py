"""Inline SVG charts for the HTML report (no scripts, no external resources).

``suite_bars`` draws one stacked horizontal bar per suite (pass / fail / expected failure /
skip); ``heat_colour`` gives the background of a conformance-matrix cell from its counts, so
the matrix reads as a heat map.  Every label is XML-escaped.
"""

from __future__ import annotations

import html
from collections import Counter
from typing import Any, Mapping

# kind -> (label, fill colour)
SERIES = (
    ("good", "pass", "#3a9d3a"),
    ("bad", "fail", "#d23c3c"),
    ("xfail", "expected failure", "#e6a23c"),
    ("skip", "skip", "#b4b4b4"),
)


def _e(v: object) -> str:
    return html.escape(str(v), quote=True)


def suite_bars(per_suite: Mapping[str, Mapping[str, int]], width: int = 900) -> str:
    """``per_suite``: suite -> {kind: count} with kinds good / bad / xfail / skip."""
    if not per_suite:
        return ""
    label_w, bar_w, row_h, top = 130, width - 130 - 330, 24, 26
    height = top + row_h * len(per_suite) + 8
    parts = [
        f'<svg class="chart suite-bars" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="pass, fail and skip counts per suite">'
    ]
    x: float = label_w
    for kind, label, colour in SERIES:  # legend
        parts.append(
            f'<rect x="{x}" y="4" width="12" height="12" fill="{colour}"/>'
            f'<text x="{x + 16}" y="14" font-size="12">{_e(label)}</text>'
        )
        x += 24 + 8 * len(label)
    for i, (suite, counts) in enumerate(per_suite.items()):
        y = top + i * row_h
        total = sum(counts.values()) or 1
        parts.append(f'<text x="{label_w - 6}" y="{y + 15}" font-size="12" text-anchor="end">{_e(suite)}</text>')
        x = float(label_w)
        for kind, label, colour in SERIES:
            n = int(counts.get(kind, 0))
            if not n:
                continue
            w = bar_w * n / total
            parts.append(
                f'<rect class="bar bar-{kind}" data-suite="{_e(suite)}" data-count="{n}" x="{x:.1f}" '
                f'y="{y + 2}" width="{max(w, 1):.1f}" height="{row_h - 6}" fill="{colour}">'
                f"<title>{_e(suite)}: {n} {_e(label)}</title></rect>"
            )
            x += w
        summary = ", ".join(f"{counts.get(k, 0)} {lab}" for k, lab, _ in SERIES if counts.get(k, 0))
        parts.append(f'<text x="{label_w + bar_w + 6}" y="{y + 15}" font-size="11">{_e(summary)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def kind_counts(outcome_counts: Counter, kind_of) -> Counter:
    out: Counter = Counter()
    for outcome, n in outcome_counts.items():
        out[kind_of(outcome)] += n
    return out


def heat_colour(good: int, bad: int, skip: int) -> str:
    """Background of a matrix cell: green for all passed, red shading with the failed share,
    grey for skipped only."""
    run = good + bad
    if run == 0:
        return "#e4e4e4" if skip else "#ffffff"
    if bad == 0:
        return "#c8efc8"
    share = bad / run
    # from light pink (a few failures) to strong red (all failed)
    light = 88 - int(round(40 * share))
    return f"hsl(0, 75%, {light}%)"


def trend(history: list[dict], width: int = 720, height: int = 160) -> str:
    """Lines of the bad / good / skipped case counts across runs (oldest left)."""
    if len(history) < 2:
        return ""
    from nnconform.verdict.results import BAD_OUTCOMES, GOOD_OUTCOMES

    series: dict[str, list[int]] = {"pass": [], "fail": [], "skip": []}
    for h in history:
        c = h.get("counts") or {}
        series["pass"].append(sum(int(n) for o, n in c.items() if o in GOOD_OUTCOMES))
        series["fail"].append(sum(int(n) for o, n in c.items() if o in BAD_OUTCOMES))
        series["skip"].append(sum(int(n) for o, n in c.items() if o not in GOOD_OUTCOMES | BAD_OUTCOMES))
    top = max(max(v) for v in series.values()) or 1
    left, right, pad = 50, 90, 16
    n = len(history)
    xs = [left + (width - left - right) * i / (n - 1) for i in range(n)]
    colours = {"pass": "#3a9d3a", "fail": "#d23c3c", "skip": "#999999"}
    parts = [
        f'<svg class="chart trend" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="case counts across runs">',
        f'<text x="4" y="{pad + 4}" font-size="11">{top}</text>',
        f'<text x="4" y="{height - pad}" font-size="11">0</text>',
    ]
    labels: list[list[Any]] = []  # [y, series name, last value], sorted by y
    for name, values in series.items():
        pts = " ".join(f"{x:.1f},{height - pad - (height - 2 * pad) * v / top:.1f}" for x, v in zip(xs, values))
        parts.append(
            f'<polyline class="trend-{name}" fill="none" stroke="{colours[name]}" stroke-width="2" points="{pts}"/>'
        )
        labels.append([height - pad - (height - 2 * pad) * values[-1] / top, name, values[-1]])
    labels.sort()
    for k in range(1, len(labels)):  # end labels at least 12 px apart
        labels[k][0] = max(labels[k][0], labels[k - 1][0] + 12)
    for y, name, value in labels:
        parts.append(
            f'<text x="{xs[-1] + 6:.1f}" y="{y + 4:.1f}" font-size="11" fill="{colours[name]}">{value} {name}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def line(
    values: list[float], label: str, unit: str, width: int = 720, height: int = 140, colour: str = "#1a4f9c"
) -> str:
    """One series in case order (e.g. a stress worker's RSS after each case)."""
    if len(values) < 2:
        return ""
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    left, right, pad = 60, 20, 16
    n = len(values)
    pts = " ".join(
        f"{left + (width - left - right) * i / (n - 1):.1f},{height - pad - (height - 2 * pad) * (v - lo) / span:.1f}"
        for i, v in enumerate(values)
    )
    return (
        f'<svg class="chart line" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(label)}">'
        f'<text x="4" y="{pad + 4}" font-size="11">{hi:.4g} {_e(unit)}</text>'
        f'<text x="4" y="{height - pad}" font-size="11">{lo:.4g} {_e(unit)}</text>'
        f'<polyline class="series" fill="none" stroke="{colour}" stroke-width="1.5" points="{pts}"/>'
        f'<text x="{left}" y="12" font-size="11">{_e(label)} ({n} cases, in the order they ran)</text></svg>'
    )
