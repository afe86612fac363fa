"""The benchmark's page (bench.html, and the report directory's report.html).

At a glance, top to bottom: the headline (reports/headline.py: the drivers and the verdict,
red / amber / green), one line per model x driver with its verdict, latency percentiles
with their confidence intervals, throughput, start-up, memory, the three audits, accuracy
(and the operation a failing model was traced to), the fall-back share and gate, and the
baseline verdicts; then charts comparing the drivers, every number in a table, and latency
histograms.  Self-contained: inline CSS and SVG, no scripts, nothing fetched.
"""

from __future__ import annotations

import html
import math
import os
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from nnconform.bench import CSV_COLUMNS, HISTOGRAM_BINS, BenchRow

_PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _bar_chart(
    title: str,
    models: list[str],
    drivers: list[str],
    value: Callable[[str, str], float | None],
    unit: str,
    log_scale: bool = False,
    status: Callable[[str, str], str] | None = None,
) -> str:
    """Grouped horizontal bars: one group per model, one bar per driver."""
    bar_h, gap, left, width = 12, 8, 210, 330
    vals = [value(m, d) for m in models for d in drivers]
    finite = [v for v in vals if v is not None and math.isfinite(v) and v > 0]
    vmax = max(finite) if finite else 1.0
    vmin = min(finite) if finite else 1.0

    def scale(v: float) -> float:
        if log_scale and vmax > vmin:
            lo = math.log10(vmin) - 0.3
            return width * (math.log10(v) - lo) / (math.log10(vmax) - lo)
        return width * v / vmax

    group = bar_h * len(drivers) + gap
    height = 40 + group * len(models) + 20
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 110}" height="{height}" '
        f'role="img" aria-label="{_e(title)}">',
        f'<text x="4" y="18" font-size="14" font-weight="bold">{_e(title)}'
        f"{' (log scale)' if log_scale and vmax > vmin else ''}</text>",
    ]
    y = 34
    for m in models:
        parts.append(f'<text x="{left - 6}" y="{y + group / 2}" font-size="11" text-anchor="end">{_e(m)}</text>')
        for j, d in enumerate(drivers):
            v = value(m, d)
            color = _PALETTE[j % len(_PALETTE)]
            if v is None or not math.isfinite(v):
                why = status(m, d) if status is not None else "n/a"
                parts.append(
                    f'<text x="{left + 4}" y="{y + bar_h - 3}" font-size="10" fill="#999">{_e(d)}: {_e(why)}</text>'
                )
            else:
                w = max(scale(v) if v > 0 else 0.0, 1.0)
                parts.append(
                    f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h - 2}" fill="{color}">'
                    f"<title>{_e(d)} {_e(m)}: {v:.4g} {unit}</title></rect>"
                )
                parts.append(f'<text x="{left + w + 4:.1f}" y="{y + bar_h - 3}" font-size="10">{v:.3g}</text>')
            y += bar_h
        y += gap
    parts.append("</svg>")
    return "".join(parts)


def _histogram(row: BenchRow, color: str) -> str:
    w, h, pad = 260, 90, 18
    lat = np.asarray(row.latencies_ms)
    if lat.size == 0:
        return ""
    hi = float(np.percentile(lat, 99.5)) if lat.size > 10 else float(lat.max())
    lo = float(lat.min())
    if hi <= lo:
        hi = lo + 1e-3
    counts, edges = np.histogram(np.clip(lat, lo, hi), bins=HISTOGRAM_BINS, range=(lo, hi))
    cmax = max(int(counts.max()), 1)
    bw = w / HISTOGRAM_BINS
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h + pad}">']
    for k, c in enumerate(counts):
        bh = (h - 14) * c / cmax
        parts.append(
            f'<rect x="{k * bw:.1f}" y="{h - bh:.1f}" width="{bw - 1:.1f}" height="{bh:.1f}" fill="{color}">'
            f"<title>{edges[k]:.3f}-{edges[k + 1]:.3f} ms: {int(c)}</title></rect>"
        )
    parts.append(f'<text x="0" y="{h + 13}" font-size="10">{lo:.3g} ms</text>')
    parts.append(f'<text x="{w}" y="{h + 13}" font-size="10" text-anchor="end">{hi:.3g} ms</text>')
    parts.append(f'<text x="{w / 2}" y="10" font-size="10" text-anchor="middle">{_e(row.driver)}</text>')
    parts.append("</svg>")
    return "".join(parts)


_CSS = """body{font-family:system-ui,sans-serif;margin:24px;color:#222}h1{font-size:22px}
h2{font-size:17px;margin-top:28px}table{border-collapse:collapse;font-size:12px}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#f2f2f2}
td.l,th.l{text-align:left}td:not(.l){white-space:nowrap}.ok{color:#176417}.bad{color:#a11}.hist{display:inline-block;margin:4px 12px 4px 0}
.legend span{display:inline-block;margin-right:14px}.legend i{display:inline-block;width:12px;height:12px;
margin-right:4px;vertical-align:middle}.note{color:#555;font-size:12px;max-width:900px}
.charts{display:flex;flex-wrap:wrap;gap:8px 24px}.chart{flex:0 0 auto}"""


_CSS = """body{font-family:system-ui,sans-serif;margin:24px;color:#222}h1{font-size:22px;padding:8px 12px;
border-radius:6px}.verdict-red{background:#fde2e1;color:#8a1212}.verdict-amber{background:#fff3c4;color:#6b5200}
.verdict-green{background:#e2f4e2;color:#175c17}
h2{font-size:17px;margin-top:28px}table{border-collapse:collapse;font-size:12px}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:right;vertical-align:top}th{background:#f2f2f2}
td.l,th.l{text-align:left}td:not(.l){white-space:nowrap}.ok{color:#176417}.bad{color:#a11}
.hist{display:inline-block;margin:4px 12px 4px 0}
.chip{display:inline-block;padding:0 5px;border-radius:3px;font-size:11px;margin:1px;white-space:nowrap}
.c-PASS{background:#d8f0d8;color:#175c17}.c-FAIL{background:#f8d0ce;color:#8a1212}
.c-WARN,.c-PASS_WITH_WARNING{background:#fff0b3;color:#6b5200}.c-none{background:#eee;color:#777}
.small{font-size:11px;color:#555}.share{display:inline-block;width:60px;height:8px;background:#eee;
vertical-align:middle}.share i{display:block;height:8px;background:#2ca02c}
.legend span{display:inline-block;margin-right:14px}.legend i{display:inline-block;width:12px;height:12px;
margin-right:4px;vertical-align:middle}.note{color:#555;font-size:12px;max-width:1000px}
.charts{display:flex;flex-wrap:wrap;gap:8px 24px}.chart{flex:0 0 auto}details{margin-top:16px}
.glance td.model{max-width:240px}.glance td.v{width:1%}.glance td.acc{min-width:150px}.glance td.base{min-width:125px}.glance td.model{min-width:170px;overflow-wrap:anywhere}.glance td.aud{min-width:95px}
.glance tr.first td{border-top:2px solid #999}"""


def _chip(v: str, label: str = "", title: str = "") -> str:
    cls = f"c-{v}" if v else "c-none"
    t = f" title='{_e(title)}'" if title else ""
    return f"<span class='chip {cls}'{t}>{_e(label + (': ' if label else '') + (v or 'n/a'))}</span>"


def _iv(r: BenchRow, tag: str) -> str:
    v = getattr(r, f"{tag}_ms")
    if v is None:
        return "-"
    lo, hi, ok = getattr(r, f"{tag}_low_ms"), getattr(r, f"{tag}_high_ms"), getattr(r, f"{tag}_supported")
    ci = f"<br><span class='small'>[{lo:.3g}, {hi:.3g}]</span>" if lo is not None and hi is not None else ""
    if ok is False:
        ci += "<br><span class='small bad' title='fewer queries than the early-stopping rule needs'>n too small</span>"
    return f"{v:.3g}{ci}"


def _f(v, fmt: str = ".3g") -> str:
    return "-" if v is None else format(v, fmt)


def _glance_row(r: BenchRow, first: bool) -> str:
    status = "" if r.status == "OK" else f"<br><span class='small bad'>{_e(r.status)}</span>"
    ran = r.load_ms is not None
    named = (("outputs", r.audit_same_outputs), ("cache", r.audit_cache), ("seed", r.audit_seed))
    audits = "".join(_chip(v, k) for k, v in named if v) or "-"
    if r.accuracy_verdict:
        acc = _chip(r.accuracy_verdict, "", r.accuracy_message)
        if r.top1_agreement is not None:
            acc += f"<br><span class='small'>top-1 {r.top1_agreement:.0%} top-5 {r.top5_agreement:.0%}</span>"
        acc += (
            f"<br><span class='small'>max err {_f(r.max_single_error)}, mean {_f(r.mean_abs_error)}, "
            f"{_f(r.within_tolerance, '.1%')} in tol.</span>"
        )
        if r.accuracy_traced_to:
            acc += f"<br><span class='small bad'>traced to {_e(r.accuracy_traced_to)}</span>"
    else:
        acc = "-"
    if r.driver_share is not None:
        share = (
            f"<span class='share' title='estimated share of the work'><i style='width:{100 * r.driver_share:.0f}%'>"
            f"</i></span> {r.ops_on_driver}/{r.operations} ops, ~{r.driver_share:.0%}"
        )
        if r.gate:
            share += "<br>" + _chip(r.gate, "gate")
    else:
        share = "-"
    base = (
        "".join(
            _chip(v, k)
            for k, v in (
                ("latency", r.baseline_latency),
                ("start-up", r.baseline_startup),
                ("memory", r.baseline_memory),
                ("accuracy", r.baseline_accuracy),
            )
        )
        if r.baseline
        else "-"
    )
    startup = (
        "-"
        if not ran
        else (
            f"load {_f(r.load_ms, '.0f')}<br>prepare {_f(r.compile_without_cache_ms)}<br>1st {_f(r.first_execution_ms)}"
            + (
                f"<br><span class='small'>cache: {_f(r.prepare_from_cache_ms)} + {_f(r.first_execution_cached_ms)}</span>"
                if r.prepare_from_cache_ms is not None
                else ""
            )
        )
    )
    memory = (
        "-"
        if not ran
        else (
            f"load {_f(r.rss_after_load_mb, '.0f')}<br>prepare {_f(r.peak_rss_prepare_mb, '.0f')}<br>"
            f"run {_f(r.peak_rss_execute_mb, '.0f')}"
        )
    )
    queries = (
        f"{r.iterations}<br><span class='small'>min {r.min_queries}<br>+{r.warmup_queries} warm-up</span>"
        if r.iterations
        else "-"
    )
    msg = f"<br><span class='small'>{_e(r.message[:300])}</span>" if r.message else ""
    cells = [
        f"<td class='l model'><b>{_e(r.model)}</b><br>{_e(r.driver)}{msg}</td>",
        f"<td class='l v'>{_chip(r.verdict)}{status}</td>",
        f"<td>{_iv(r, 'p50')}</td><td>{_iv(r, 'p90')}</td><td>{_iv(r, 'p99')}</td>",
        f"<td>{queries}</td><td>{_f(r.offline_qps, '.1f')}</td>",
        f"<td>{startup}</td><td>{memory}</td>",
        f"<td class='l aud'>{audits}</td><td class='l acc'>{acc}</td><td class='l'>{share}</td>",
        f"<td class='l base'>{base}</td>",
    ]
    return f"<tr{' class=first' if first else ''}>" + "".join(cells) + "</tr>"


def write_html(rows: Sequence[BenchRow], path: Path, meta: dict, records: Sequence | None = None) -> None:
    from nnconform.bench import result_records
    from nnconform.reports.headline import headline

    verdict = headline(records if records is not None else result_records(rows, meta), meta)
    models = list(dict.fromkeys(r.model for r in rows))
    drivers = list(dict.fromkeys(r.driver for r in rows))
    by = {(r.model, r.driver): r for r in rows}

    def metric(name: str):
        def get(m, d):
            r = by.get((m, d))
            return getattr(r, name) if r is not None and r.status == "OK" else None

        return get

    def status(m, d):
        r = by.get((m, d))
        return "not run" if r is None else (r.status if r.status != "OK" else "n/a")

    def chart(title, name, unit):
        return (
            "<div class='chart'>"
            + _bar_chart(title, models, drivers, metric(name), unit, log_scale=True, status=status)
            + "</div>"
        )

    legend = "".join(
        f'<span><i style="background:{_PALETTE[j % len(_PALETTE)]}"></i>{_e(d)}</span>' for j, d in enumerate(drivers)
    )
    out = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{_e(verdict.text)} - nnconform bench</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1 class='verdict-{verdict.kind}'>nnconform bench: {_e(verdict.text)}</h1>",
        "<p class='note'>" + " &middot; ".join(f"{_e(k)}: {_e(v)}" for k, v in meta.items()) + "</p>",
        "<h2>At a glance</h2><div style='overflow-x:auto'><table class='glance'><tr>"
        "<th class='l'>model / driver</th><th class='l'>verdict</th><th>p50 ms<br>[99% CI]</th>"
        "<th>p90 ms<br>[99% CI]</th><th>p99 ms<br>[99% CI]</th><th>queries</th><th>offline<br>qps</th>"
        "<th>start-up ms</th><th>peak host<br>memory MB</th><th class='l'>audits</th><th class='l'>accuracy "
        "(golden)</th><th class='l'>on the driver</th><th class='l'>baseline</th></tr>",
        # model by model, the drivers next to each other
        *(_glance_row(by[(m, d)], j == 0) for m in models for j, d in enumerate([d for d in drivers if (m, d) in by])),
        "</table></div>",
        f"<div class='legend' style='margin-top:18px'>{legend}</div>",
        "<div class='charts'>",
        chart("p50 latency (ms)", "p50_ms", "ms"),
        chart("p90 latency (ms)", "p90_ms", "ms"),
        chart("Prepare without cache (ms)", "compile_without_cache_ms", "ms"),
        chart("Peak host memory in execution (MB)", "peak_rss_execute_mb", "MB"),
        chart("Offline throughput (queries/s)", "offline_qps", "q/s"),
        chart("Max absolute error against golden outputs", "max_single_error", ""),
        "</div>",
        "<details><summary>All numbers (as in bench.csv)</summary><div style='overflow-x:auto'><table><tr>"
        + "".join(
            f"<th class='l'>{_e(c)}</th>" if c in ("model", "driver", "status", "message") else f"<th>{_e(c)}</th>"
            for c in CSV_COLUMNS
        )
        + "</tr>",
    ]
    for r in rows:
        cells = r.csv_row()
        tds = []
        for c in CSV_COLUMNS:
            cls = "l" if c in ("model", "driver", "status", "message") else ""
            if c == "status":
                cls += " ok" if r.status == "OK" else " bad"
            tds.append(f"<td class='{cls.strip()}'>{_e(cells[c])}</td>")
        out.append("<tr>" + "".join(tds) + "</tr>")
    out.append("</table></div></details><h2>Latency histograms</h2>")
    for m in models:
        hists = [
            _histogram(by[(m, d)], _PALETTE[j % len(_PALETTE)])
            for j, d in enumerate(drivers)
            if (m, d) in by and by[(m, d)].status == "OK"
        ]
        if hists:
            out.append(
                f"<h3 style='font-size:13px'>{_e(m)}</h3>" + "".join(f"<div class='hist'>{h}</div>" for h in hists)
            )
    out.append(
        "<p class='note'>Latency: single-stream, wall clock around execute through each driver's host, warm-up "
        "excluded; intervals are 99% confidence intervals from order statistics, and a percentile is supported "
        "when the run has MLPerf's early-stopping query count for it. Start-up: load (host start and driver "
        "load), prepare without cache, first execution; with a cache, prepare from it and its first execution. "
        "Memory: peak resident memory of the driver host. Audits: timed outputs equal accuracy mode's; a repeated "
        "input is not faster than fresh ones; another input seed gives the same latency. Accuracy: against golden "
        "outputs of the reference on seeded inputs. On the driver: operations the driver takes and their "
        "estimated share of the work. Thresholds: docs/benchmark.md.</p></body></html>"
    )
    tmp = path.with_name(path.name + ".part")
    tmp.write_text("".join(out), encoding="utf-8")
    os.replace(tmp, path)
