"""``nnconform bench``: the MLTS benchmark for real models.

    nnconform bench --driver tflite --driver onnxruntime [--models mobilenet_v2_quant8 ...]

Per driver and model (built-in MobileNets, and the fetched zoo models that import):

- compilation (MLTS's CompilationBenchmarkResult): ``compile_without_cache_ms`` (a cold
  ``prepare``), and for drivers with CompilationCaching ``save_to_cache_ms`` (``prepare`` with
  a cache token) and ``prepare_from_cache_ms``;
- latency: ``--warmup`` executions, then ``--iterations`` timed ones cycling through the
  seeded inputs; mean, standard deviation, p50/p90/p99, min, max and a histogram.  The time is
  the caller's wall clock around ``execute``, so for an isolated driver it includes the round
  trip to its host (the same for every driver, and what an app sees through the HAL);
- accuracy against the reference executor on the same inputs (MLTS's evaluator): the largest
  absolute error and the mean squared error over all outputs (quantised outputs dequantised),
  and for classifiers top-1 agreement (the driver's argmax is the reference's) and top-5
  agreement (the reference's top class is among the driver's five best).

Every driver runs in a driver host (``nnconform.isolation.proxy.open_isolated``): a crash or hang
of the driver is that model's row (status CRASH / HANG) and the bench goes on with a fresh
host.  Results: ``bench.csv`` (one row per driver x model) and ``bench.html`` (a
self-contained page comparing the drivers side by side, inline SVG charts, no scripts).
Numbers are printed and written, never judged: speed is not a test verdict.
"""

from __future__ import annotations

import csv
import html
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from nnconform.ir import Model, Request

if TYPE_CHECKING:
    from nnconform.driver import Device

CSV_COLUMNS = [
    "model",
    "driver",
    "status",
    "message",
    "operations",
    "testset_size",
    "iterations",
    "total_time_sec",
    "mean_ms",
    "std_ms",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "min_ms",
    "max_ms",
    "compile_without_cache_ms",
    "save_to_cache_ms",
    "prepare_from_cache_ms",
    "max_single_error",
    "mse",
    "top1_agreement",
    "top5_agreement",
]
HISTOGRAM_BINS = 20


@dataclass
class BenchRow:
    model: str
    driver: str
    status: str = "OK"  # OK, UNSUPPORTED, UNMAPPED (no NNAPI import), FAIL, CRASH, HANG
    message: str = ""
    operations: int = 0
    testset_size: int = 0
    iterations: int = 0
    total_time_sec: float | None = None
    mean_ms: float | None = None
    std_ms: float | None = None
    p50_ms: float | None = None
    p90_ms: float | None = None
    p99_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    compile_without_cache_ms: float | None = None
    save_to_cache_ms: float | None = None
    prepare_from_cache_ms: float | None = None
    max_single_error: float | None = None
    mse: float | None = None
    top1_agreement: float | None = None
    top5_agreement: float | None = None
    latencies_ms: list[float] = field(default_factory=list)

    def csv_row(self) -> dict:
        d = asdict(self)
        return {k: ("" if d[k] is None else (f"{d[k]:.6g}" if isinstance(d[k], float) else d[k])) for k in CSV_COLUMNS}


def _as_float(model: Model, k: int, arr: np.ndarray) -> np.ndarray:
    op = model.main.operands[model.main.output_indexes[k]]
    a = np.asarray(arr)
    if op.info.is_quant:
        return (a.astype(np.float64) - op.zero_point) * op.scale
    return a.astype(np.float64)


def accuracy(
    model: Model, expected: Sequence[Sequence[np.ndarray]], actual: Sequence[Sequence[np.ndarray]], classifier: bool
) -> dict:
    """max abs error, MSE over every output element, and top-1/top-5 agreement of output 0."""
    max_err, sq, n = 0.0, 0.0, 0
    top1 = top5 = 0
    for exp, act in zip(expected, actual):
        for k, (e, a) in enumerate(zip(exp, act)):
            ef, af = _as_float(model, k, e), _as_float(model, k, a)
            if ef.shape != af.shape:
                return {
                    "max_single_error": math.inf,
                    "mse": math.inf,
                    "top1_agreement": 0.0 if classifier else None,
                    "top5_agreement": 0.0 if classifier else None,
                }
            d = np.abs(ef - af)
            bad = ~np.isfinite(d)
            max_err = max(max_err, math.inf if bad.any() else float(d.max(initial=0.0)))
            sq += float(np.sum(np.where(bad, 0.0, d) ** 2))
            n += d.size
        if classifier:
            e0 = _as_float(model, 0, exp[0]).reshape(-1)
            a0 = _as_float(model, 0, act[0]).reshape(-1)
            ref_top = int(np.argmax(e0))
            top1 += int(int(np.argmax(a0)) == ref_top)
            top5 += int(ref_top in np.argsort(-a0, kind="stable")[:5])
    count = max(len(expected), 1)
    return {
        "max_single_error": max_err,
        "mse": sq / n if n else 0.0,
        "top1_agreement": top1 / count if classifier else None,
        "top5_agreement": top5 / count if classifier else None,
    }


def latency_stats(lat_ms: Sequence[float]) -> dict:
    a = np.asarray(lat_ms, dtype=np.float64)
    if a.size == 0:
        return {}
    return {
        "mean_ms": float(a.mean()),
        "std_ms": float(a.std()),
        "p50_ms": float(np.percentile(a, 50)),
        "p90_ms": float(np.percentile(a, 90)),
        "p99_ms": float(np.percentile(a, 99)),
        "min_ms": float(a.min()),
        "max_ms": float(a.max()),
        "total_time_sec": float(a.sum() / 1000.0),
    }


class Progress:
    """A one-line progress bar on a terminal (plain lines otherwise)."""

    def __init__(self, total: int, stream=None):
        self.total, self.done = max(total, 1), 0
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def step(self, what: str) -> None:
        self.done += 1
        width = 30
        filled = int(width * self.done / self.total)
        line = f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} {what}"
        if self.tty:
            self.stream.write("\r" + line[:120].ljust(120))
            if self.done == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def _incident_status(e: BaseException) -> str | None:
    from nnconform.isolation.proxy import HostIncident

    return e.verdict if isinstance(e, HostIncident) else None


def bench_model(
    device: Device,
    driver_name: str,
    entry,
    *,
    warmup: int,
    iterations: int,
    inputs_count: int,
    seed: int,
    progress: Callable[[str], None] | None = None,
) -> BenchRow:
    """Benchmark one model on one (isolated) device."""
    from nnconform.driver import CompilationCaching
    from nnconform.reference.executor import Executor

    row = BenchRow(entry.name, driver_name)
    try:
        model = entry.load()
    except Exception as e:  # an import problem of a zoo model is that model's row
        from nnconform.cases.tflite_import import UnmappedOperations

        row.status = "UNMAPPED" if isinstance(e, UnmappedOperations) else "FAIL"
        row.message = (
            "no NNAPI equivalent: " + ", ".join(f"{k} x{v}" for k, v in sorted(e.unmapped.items()))
            if isinstance(e, UnmappedOperations)
            else f"load: {type(e).__name__}: {e}"
        )
        return row
    row.operations = len(model.main.operations)
    inputs = [entry.inputs(seed + k) for k in range(inputs_count)]
    row.testset_size = len(inputs)
    ref = Executor(model)
    expected = [[np.array(o, copy=True) for o in ref.run(x)] for x in inputs]
    stage = "supported_operations"
    try:
        supported = device.supported_operations(model)
        missing = sorted({model.main.operations[k].name for k, ok in enumerate(supported) if not ok})
        if missing:
            row.status, row.message = "UNSUPPORTED", "unsupported: " + ", ".join(missing)
            return row
        stage = "prepare"
        t0 = time.perf_counter()
        pm = device.prepare(model)
        row.compile_without_cache_ms = (time.perf_counter() - t0) * 1e3
        if isinstance(device, CompilationCaching):
            token = os.urandom(32)
            stage = "prepare (saving to cache)"
            t0 = time.perf_counter()
            saved = device.prepare(model, cache_token=token)
            row.save_to_cache_ms = (time.perf_counter() - t0) * 1e3
            saved.release()
            stage = "prepare_from_cache"
            t0 = time.perf_counter()
            cached = device.prepare_from_cache(token)
            row.prepare_from_cache_ms = (time.perf_counter() - t0) * 1e3
            cached.release()
        stage = "execute"
        requests = [Request.from_arrays(model, x) for x in inputs]
        actual = [list(pm.execute(r).outputs) for r in requests]
        for k in range(warmup):
            pm.execute(requests[k % len(requests)])
        lat = []
        for k in range(iterations):
            r = requests[k % len(requests)]
            t0 = time.perf_counter()
            pm.execute(r)
            lat.append((time.perf_counter() - t0) * 1e3)
        pm.release()
    except Exception as e:  # the driver's failure (or crash/hang, through the host) is this row
        row.status = _incident_status(e) or "FAIL"
        row.message = f"{stage}: {type(e).__name__}: {str(e)[:300]}"
        return row
    row.iterations = len(lat)
    row.latencies_ms = lat
    for k, v in latency_stats(lat).items():
        setattr(row, k, v)
    for k, v in accuracy(model, expected, actual, entry.classifier).items():
        setattr(row, k, v)
    if progress:
        progress(f"{driver_name} {entry.name}: {row.mean_ms:.2f} ms")
    return row


def run_bench(
    drivers: Sequence[str],
    entries: Sequence,
    *,
    warmup: int = 5,
    iterations: int = 50,
    inputs_count: int = 4,
    seed: int = 0,
    call_timeout: float = 120.0,
    mem_limit: int | None = None,
    log=print,
) -> list[BenchRow]:
    from nnconform.errors import DriverLoadError
    from nnconform.isolation.proxy import DEFAULT_MEM_LIMIT, open_isolated

    rows: list[BenchRow] = []
    bar = Progress(len(drivers) * len(entries))
    for spec in drivers:
        try:
            device = open_isolated(
                spec, call_timeout=call_timeout, mem_limit=DEFAULT_MEM_LIMIT if mem_limit is None else mem_limit
            )
        except DriverLoadError as e:
            for entry in entries:
                rows.append(BenchRow(entry.name, spec, "FAIL", f"driver: {e}"))
                bar.step(f"{spec} {entry.name}: driver did not load")
            continue
        try:
            for entry in entries:
                row = bench_model(
                    device, spec, entry, warmup=warmup, iterations=iterations, inputs_count=inputs_count, seed=seed
                )
                if row.status in ("CRASH", "HANG"):
                    row.message += f" ({device.liveness()})"
                else:
                    # as in the suites: processes the driver leaves running are killed now, before
                    # they can eat the next model's (or driver's) time, and fail the row
                    left = device.end_case()["processes"]
                    if left:
                        row.status = "FAIL"
                        row.message = "; ".join(
                            filter(
                                None,
                                [
                                    row.message,
                                    (
                                        f"driver left {len(left)} process(es) running after the model (killed): "
                                        + "; ".join(left[:3])
                                    ),
                                ],
                            )
                        )
                rows.append(row)
                bar.step(f"{spec} {entry.name}: " + (f"{row.mean_ms:.2f} ms" if row.status == "OK" else row.status))
        finally:
            device.close()
    return rows


def write_csv(rows: Sequence[BenchRow], path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow(r.csv_row())


def table(rows: Sequence[BenchRow]) -> str:
    """A plain-text table of the main numbers (what the CLI prints)."""
    head = (
        f"{'model':32s} {'driver':12s} {'status':8s} {'compile':>9s} {'mean':>8s} {'std':>7s} {'p50':>8s} "
        f"{'p90':>8s} {'p99':>8s} {'max err':>9s} {'top1':>5s} {'top5':>5s}"
    )
    lines = [head, "-" * len(head)]

    def f(v, fmt):
        return "-" if v is None else format(v, fmt)

    for r in rows:
        lines.append(
            f"{r.model[:32]:32s} {r.driver[:12]:12s} {r.status:8s} {f(r.compile_without_cache_ms, '9.1f')} "
            f"{f(r.mean_ms, '8.3f')} {f(r.std_ms, '7.3f')} {f(r.p50_ms, '8.3f')} {f(r.p90_ms, '8.3f')} "
            f"{f(r.p99_ms, '8.3f')} {f(r.max_single_error, '9.2e')} {f(r.top1_agreement, '5.2f')} "
            f"{f(r.top5_agreement, '5.2f')}"
        )
    lines.append("(times in ms; latency is the wall clock around execute through the driver host)")
    return "\n".join(lines)


# ---- HTML ---------------------------------------------------------------------------------

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


def write_html(rows: Sequence[BenchRow], path: Path, meta: dict) -> None:
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
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>nnconform bench</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>nnconform bench: drivers side by side</h1>",
        "<p class='note'>" + " &middot; ".join(f"{_e(k)}: {_e(v)}" for k, v in meta.items()) + "</p>",
        f"<div class='legend'>{legend}</div>",
        "<div class='charts'>",
        chart("Mean latency per inference (ms)", "mean_ms", "ms"),
        chart("p99 latency (ms)", "p99_ms", "ms"),
        chart("Compilation without cache (ms)", "compile_without_cache_ms", "ms"),
        chart("Max absolute error against the reference", "max_single_error", ""),
        "</div>",
        "<h2>All numbers</h2><div style='overflow-x:auto'><table><tr>"
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
    out.append("</table></div><h2>Latency histograms</h2>")
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
        "<p class='note'>Latency: wall clock around execute, after warm-up, through each driver's host "
        "process. Accuracy: against nnconform's reference executor on the same seeded inputs "
        "(quantised outputs dequantised); top-1: the driver's best class is the reference's; top-5: "
        "the reference's best class is among the driver's five best.</p></body></html>"
    )
    tmp = path.with_name(path.name + ".part")
    tmp.write_text("".join(out), encoding="utf-8")
    os.replace(tmp, path)


# A benchmark row's status as an outcome of the artifact contract: a model the driver cannot
# take (or nnconform cannot import) is skipped, not failed.
STATUS_OUTCOME = {
    "OK": "PASS",
    "UNSUPPORTED": "SKIP",
    "UNMAPPED": "SKIP",
    "FAIL": "FAIL",
    "CRASH": "CRASH",
    "HANG": "HANG",
}


def write_artifacts(rows: Sequence[BenchRow], out: Path, meta: dict) -> int:
    """The artifact contract's files for a benchmark (nnconform.artifacts): a results row per
    model and driver (its figures in ``extra``), results.csv, summary.json, report.html (the
    benchmark page) and run.json with the exit status, which is returned."""
    from nnconform.artifacts import RESULTS_JSONL, write_common, write_run
    from nnconform.artifacts.reportdir import atomic_write
    from nnconform.verdict.outcome import ExitStatus, Outcome
    from nnconform.verdict.results import ResultRecord, record_to_json

    records = [
        ResultRecord(
            suite="bench",
            test_id=f"bench/{r.model}",
            driver=r.driver,
            outcome=Outcome(STATUS_OUTCOME.get(r.status, "ERROR")),
            message=r.message,
            duration_s=float(r.total_time_sec or 0.0),
            seed=meta.get("seed"),
            extra={k: v for k, v in r.csv_row().items() if k not in ("model", "driver", "message")},
        )
        for r in rows
    ]
    atomic_write(out / RESULTS_JSONL, "".join(record_to_json(r) + "\n" for r in records))
    code = ExitStatus.of([r.outcome for r in records])
    status = f"complete: {len(records)} model x driver rows"
    write_common(out, records, {**meta, "status": status}, title="nnconform bench", html=False)
    write_html(rows, out / "report.html", meta)
    write_run(
        out,
        {
            "command": "bench",
            "driver": meta.get("drivers"),
            "seed": meta.get("seed"),
            "options": {k: v for k, v in meta.items() if k not in ("drivers", "seed")},
            "status": status,
            "exit_status": int(code),
        },
    )
    return int(code)
