"""``nnconform bench``: a benchmark a release decision can rest on.

    nnconform bench --driver tflite --driver onnxruntime [--models builtin,zoo] [--baseline DIR]

Per driver and model (built-in MobileNets, and the fetched zoo models that import), each in a
fresh driver host (a crash or hang is that model's row, status CRASH / HANG):

- start-up (:mod:`.memory`, this module): load (the host starting and loading the driver),
  prepare without the compilation cache, first execution; with a cache (drivers with
  CompilationCaching) saving to it, preparing from it and that model's first execution; the
  peak resident memory of the driver host while preparing and in steady execution;
- scenarios (:mod:`.scenarios`): single-stream latency with every reported percentile's
  confidence interval from order statistics, and a query count that supports the requested
  percentile by MLPerf's early-stopping rule (:mod:`.statistics`), over at least
  ``--min-duration``; warm-up queries excluded and reported; offline throughput;
- audits (:mod:`.audits`): timed outputs equal accuracy mode's, no result caching, the same
  latency with inputs of another seed;
- accuracy on golden data (:mod:`.golden`), with a failing model traced to an operation;
- the fall-back gate (:mod:`.gate`): the share of each model the driver takes, and
  ``--must-accelerate`` rules;
- verdicts against ``--baseline`` (:mod:`.baseline`, every threshold in one place).

The time is the caller's wall clock around ``execute``, so for an isolated driver it includes
the round trip to its host (the same for every driver, and what an app sees through the HAL).
Results: ``bench.csv`` (every number, one row per driver x model), ``bench.html`` (also the
report directory's report.html) and the artifact contract's files.
"""

from __future__ import annotations

import csv
import os
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from nnconform.bench import audits, baseline, gate, golden, scenarios, statistics
from nnconform.bench.golden import metrics as _metrics
from nnconform.bench.memory import PeakMeter, host_pid
from nnconform.ir import Model, Request

if TYPE_CHECKING:
    from nnconform.isolation.proxy import IsolatedDevice

HISTOGRAM_BINS = 20
MB = 1 << 20


@dataclass
class Settings:
    """What a bench run does (the CLI's options)."""

    warmup: int = 5
    iterations: int = 50  # at least this many single-stream queries (more if the percentile needs them)
    inputs_count: int = 4  # golden inputs per model
    seed: int = 0
    percentile: float = 90.0  # the percentile the query count must support, and baselines compare
    min_duration: float = 0.0  # seconds of single-stream queries at least
    scenarios: tuple[str, ...] = scenarios.SCENARIOS
    audit_queries: int = audits.CACHE_QUERIES
    rules: Sequence[gate.Rule] = ()
    call_timeout: float = 120.0
    mem_limit: int | None = None

    def queries(self) -> int:
        return max(self.iterations, statistics.min_queries(self.percentile))


@dataclass
class BenchRow:
    model: str
    driver: str
    status: str = "OK"  # OK, PARTIAL, UNSUPPORTED, UNMAPPED (no NNAPI import), FAIL, CRASH, HANG
    verdict: str = ""  # PASS, PASS_WITH_WARNING or FAIL: the status, audits, accuracy, gate and baseline together
    message: str = ""
    operations: int = 0
    ops_on_driver: int | None = None
    driver_share: float | None = None  # estimated share of the model's work the driver takes
    gate: str = ""  # PASS / FAIL under --must-accelerate ('' when no rule names the model)
    testset_size: int = 0
    golden: str = ""  # stored / computed
    # single-stream
    iterations: int = 0
    min_queries: int | None = None
    target_percentile: float | None = None
    warmup_queries: int = 0
    warmup_mean_ms: float | None = None
    duration_s: float | None = None
    total_time_sec: float | None = None
    mean_ms: float | None = None
    std_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    p50_ms: float | None = None
    p50_low_ms: float | None = None
    p50_high_ms: float | None = None
    p50_supported: bool | None = None
    p90_ms: float | None = None
    p90_low_ms: float | None = None
    p90_high_ms: float | None = None
    p90_supported: bool | None = None
    p99_ms: float | None = None
    p99_low_ms: float | None = None
    p99_high_ms: float | None = None
    p99_supported: bool | None = None
    target_ms: float | None = None
    target_low_ms: float | None = None
    target_high_ms: float | None = None
    early_stop_ms: float | None = None  # the target percentile is below this at 99 % confidence
    early_stop_discarded: int | None = None
    # offline
    offline_queries: int | None = None
    offline_qps: float | None = None
    offline_burst: bool | None = None
    # start-up
    load_ms: float | None = None
    compile_without_cache_ms: float | None = None
    first_execution_ms: float | None = None
    save_to_cache_ms: float | None = None
    prepare_from_cache_ms: float | None = None
    first_execution_cached_ms: float | None = None
    # memory of the driver host
    rss_after_load_mb: float | None = None
    peak_rss_prepare_mb: float | None = None
    peak_rss_execute_mb: float | None = None
    peak_since_start: bool | None = None
    # audits
    audit_same_outputs: str = ""
    audit_cache: str = ""
    audit_seed: str = ""
    audit_message: str = ""
    cache_fresh_p50_ms: float | None = None
    cache_repeated_p50_ms: float | None = None
    seed_p50_ms: float | None = None
    # accuracy on golden data
    max_single_error: float | None = None
    mean_abs_error: float | None = None
    mse: float | None = None
    within_tolerance: float | None = None
    top1_agreement: float | None = None
    top5_agreement: float | None = None
    accuracy_verdict: str = ""
    accuracy_traced_to: str = ""
    accuracy_message: str = ""
    # against --baseline
    baseline: str = ""
    baseline_latency: str = ""
    baseline_startup: str = ""
    baseline_memory: str = ""
    baseline_accuracy: str = ""
    baseline_message: str = ""
    latencies_ms: list[float] = field(default_factory=list)

    def csv_row(self) -> dict:
        d = asdict(self)
        return {k: _cell(d[k]) for k in CSV_COLUMNS}


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return v


CSV_COLUMNS = [f.name for f in fields(BenchRow) if f.name != "latencies_ms"]


def accuracy(model: Model, expected, actual, classifier: bool) -> dict:
    """max abs error, MSE and top-1/top-5 agreement (the golden module's metrics, in the
    older four-figure form)."""
    m = _metrics(model, expected, actual, classifier)
    return {k: m[k] for k in ("max_single_error", "mse", "top1_agreement", "top5_agreement")}


def latency_stats(lat_ms: Sequence[float]) -> dict:
    """Mean, spread, min/max and the reported percentiles (with their intervals)."""
    s = statistics.summarise(lat_ms)
    s.pop("queries", None)
    return s


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


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


def _mb(v: int | None) -> float | None:
    return None if v is None else v / MB


def _load_model(row: BenchRow, entry) -> Model | None:
    try:
        return entry.load()
    except Exception as e:  # an import problem of a zoo model is that model's row
        from nnconform.cases.tflite_import import UnmappedOperations

        row.status = "UNMAPPED" if isinstance(e, UnmappedOperations) else "FAIL"
        row.message = (
            "no NNAPI equivalent: " + ", ".join(f"{k} x{v}" for k, v in sorted(e.unmapped.items()))
            if isinstance(e, UnmappedOperations)
            else f"load: {type(e).__name__}: {e}"
        )
        return None


def _requests(model: Model, entry, seeds: Sequence[int]) -> list[Request]:
    return [Request.from_arrays(model, entry.inputs(s)) for s in seeds]


def bench_model(
    open_device: Callable[[], IsolatedDevice],
    driver_name: str,
    entry,
    settings: Settings,
    golden_root: Path | None = None,
) -> BenchRow:
    """Benchmark one model on a fresh device from ``open_device`` (closed before returning)."""
    from nnconform.driver import CompilationCaching
    from nnconform.errors import DriverLoadError

    row = BenchRow(entry.name, driver_name)
    model = _load_model(row, entry)
    if model is None:
        return row
    row.operations = len(model.main.operations)
    seeds = [settings.seed + k for k in range(settings.inputs_count)]
    try:
        inputs, expected, row.golden = golden.golden_set(entry, model, seeds, golden_root)
    except Exception as e:  # the reference cannot compute this model: no golden data, no bench row
        row.status, row.message = "FAIL", f"golden outputs: the reference failed: {type(e).__name__}: {str(e)[:300]}"
        return row
    row.testset_size = len(inputs)
    stage = "load"
    t0 = time.perf_counter()
    try:
        device = open_device()
    except DriverLoadError as e:
        row.status, row.message = "FAIL", f"driver: {e}"
        return row
    row.load_ms = _ms(t0)
    meter = PeakMeter(host_pid(device))
    row.rss_after_load_mb = _mb(meter.rss())
    try:
        stage = "supported_operations"
        supported = device.supported_operations(model)
        got = gate.share(model, supported)
        row.ops_on_driver, row.driver_share = got.on_driver, got.time_share
        names = [driver_name, getattr(device, "name", "")]
        row.gate, gate_msg = gate.check(
            settings.rules, names, int(getattr(device, "feature_level", 0)), entry.name, got
        )
        if not got.whole:
            row.status = "PARTIAL" if got.on_driver else "UNSUPPORTED"
            row.message = (
                f"the driver takes {got.on_driver}/{got.total} operations (~{got.time_share:.0%} of the work); "
                f"refused: {', '.join(got.refused[:5])}{' ...' if len(got.refused) > 5 else ''}"
            )
            if gate_msg:
                row.message += f"; gate: {gate_msg}"
            return row
        stage = "prepare"
        meter.reset()
        t0 = time.perf_counter()
        pm = device.prepare(model)
        row.compile_without_cache_ms = _ms(t0)
        row.peak_rss_prepare_mb = _mb(meter.peak())
        stage = "execute (accuracy mode)"
        requests = [Request.from_arrays(model, x) for x in inputs]
        t0 = time.perf_counter()
        first = pm.execute(requests[0])
        row.first_execution_ms = _ms(t0)
        actual = [list(first.outputs)] + [list(pm.execute(r).outputs) for r in requests[1:]]
        if isinstance(device, CompilationCaching):
            token = os.urandom(32)
            stage = "prepare (saving to cache)"
            t0 = time.perf_counter()
            saved = device.prepare(model, cache_token=token)
            row.save_to_cache_ms = _ms(t0)
            saved.release()
            stage = "prepare_from_cache"
            t0 = time.perf_counter()
            cached = device.prepare_from_cache(token)
            row.prepare_from_cache_ms = _ms(t0)
            stage = "first execution from cache"
            t0 = time.perf_counter()
            cached.execute(requests[0])
            row.first_execution_cached_ms = _ms(t0)
            cached.release()
        if scenarios.SINGLE_STREAM in settings.scenarios:
            stage = "single-stream"
            meter.reset()
            ss = scenarios.single_stream(
                pm, requests, warmup=settings.warmup, queries=settings.queries(), min_duration=settings.min_duration
            )
            row.peak_rss_execute_mb = _mb(meter.peak())
            _fill_latency(row, ss, settings)
            v, m = audits.same_outputs(actual, ss.outputs)
            row.audit_same_outputs, msgs = v, [f"same outputs: {m}"]
        else:
            msgs = []
        stage = "audit: other seed"
        other = _requests(model, entry, [settings.seed + 2 * audits.SEED_OFFSET + k for k in range(len(inputs))])
        n_audit = max(settings.audit_queries, audits.CACHE_MIN_QUERIES)
        v, m, figs = audits.input_seed(pm, requests, other, queries=n_audit)
        row.audit_seed, row.seed_p50_ms = v, figs["seed_p50_ms"]
        msgs.append(f"seed: {m}")
        stage = "audit: result cache"
        base_seed = settings.seed + audits.SEED_OFFSET

        def fresh(k: int) -> Request:
            return Request.from_arrays(model, entry.inputs(base_seed + k))

        v, m, figs = audits.result_cache(pm, fresh, queries=settings.audit_queries)
        row.audit_cache, row.cache_fresh_p50_ms, row.cache_repeated_p50_ms = (
            v,
            figs["cache_fresh_p50_ms"],
            figs["cache_repeated_p50_ms"],
        )
        msgs.append(f"cache: {m}")
        row.audit_message = "; ".join(msgs)
        if scenarios.OFFLINE in settings.scenarios:
            stage = "offline"
            if row.peak_rss_execute_mb is None:
                meter.reset()
            off = scenarios.offline(pm, requests, queries=settings.queries())
            if row.peak_rss_execute_mb is None:
                row.peak_rss_execute_mb = _mb(meter.peak())
            row.offline_queries, row.offline_qps, row.offline_burst = off.queries, off.qps, off.burst
            if off.note:
                row.message = f"offline: {off.note}"
        row.peak_since_start = meter.peak_since_start
        stage = "accuracy"
        for k, v in _metrics(model, expected, actual, entry.classifier).items():
            setattr(row, k, v)
        row.accuracy_verdict, row.accuracy_message, row.accuracy_traced_to = golden.verdict(
            device, model, inputs, expected, actual
        )
        pm.release()
        if row.gate:
            row.message = "; ".join(filter(None, [row.message, f"gate: {gate_msg}"]))
        left = device.end_case()["processes"]
        if left:
            # as in the suites: processes the driver leaves running are killed and fail the row
            row.status = "FAIL"
            row.message = "; ".join(
                filter(
                    None, [row.message, f"driver left {len(left)} process(es) running (killed): " + "; ".join(left[:3])]
                )
            )
    except Exception as e:  # the driver's failure (or crash/hang, through the host) is this row
        row.status = _incident_status(e) or "FAIL"
        row.message = f"{stage}: {type(e).__name__}: {str(e)[:300]}"
        if row.status in ("CRASH", "HANG") and hasattr(device, "liveness"):
            row.message += f" ({device.liveness()})"
    finally:
        device.close()
    return row


def _fill_latency(row: BenchRow, ss: scenarios.SingleStream, settings: Settings) -> None:
    lat = ss.latencies_ms
    row.iterations = len(lat)
    row.latencies_ms = lat
    row.warmup_queries = len(ss.warmup_ms)
    row.warmup_mean_ms = float(np.mean(ss.warmup_ms)) if ss.warmup_ms else None
    row.duration_s = ss.duration_s
    row.min_queries = statistics.min_queries(settings.percentile)
    row.target_percentile = settings.percentile
    for k, v in latency_stats(lat).items():
        setattr(row, k, v)
    iv = statistics.percentile_interval(lat, settings.percentile)
    row.target_ms, row.target_low_ms, row.target_high_ms = iv.value, iv.low, iv.high
    es = statistics.early_stopping_estimate(lat, settings.percentile)
    if es is not None:
        row.early_stop_ms, row.early_stop_discarded = es


def decide(row: BenchRow) -> None:
    """The row's verdict: its status, audits, accuracy, gate and baseline together."""
    if row.status not in ("OK", "PARTIAL", "UNSUPPORTED", "UNMAPPED"):
        row.verdict = "FAIL"
        return
    parts = [row.audit_same_outputs, row.audit_cache, row.audit_seed, row.accuracy_verdict, row.gate, row.baseline]
    if "FAIL" in parts:
        row.verdict = "FAIL"
    elif row.status != "OK":
        row.verdict = ""  # not measured, and no rule says it had to be
    elif "WARN" in parts or baseline.WARN in parts:
        row.verdict = baseline.WARN
    else:
        row.verdict = "PASS"


def apply_baseline(rows: Sequence[BenchRow], base: dict, percentile: float, thresholds=None) -> None:
    for r in rows:
        b = base.get((r.model, r.driver))
        if b is None or r.status != "OK":
            continue
        got = baseline.compare(r.csv_row(), b, percentile, thresholds)
        r.baseline_latency, r.baseline_startup = got["latency"][0], got["startup"][0]
        r.baseline_memory, r.baseline_accuracy = got["memory"][0], got["accuracy"][0]
        r.baseline = baseline.overall(got)
        r.baseline_message = "; ".join(f"{k}: {v or 'n/a'} {m}" for k, (v, m) in got.items())


def run_bench(
    drivers: Sequence[str],
    entries: Sequence,
    settings: Settings | None = None,
    *,
    baseline_rows: dict | None = None,
    baseline_driver: str | None = None,
    golden_root: Path | None = None,
    log=print,
    **legacy: Any,
) -> list[BenchRow]:
    """Every model on every driver; ``legacy`` keywords (warmup=, iterations=, inputs_count=,
    seed=, call_timeout=, mem_limit=) set the matching Settings fields.  ``baseline_rows``
    (baseline.load) or ``baseline_driver`` (one of ``drivers``: every other driver is judged
    against its rows of this run) give the baseline verdicts."""
    from nnconform.isolation.proxy import DEFAULT_MEM_LIMIT, open_isolated

    s = settings or Settings()
    for k, v in legacy.items():
        if not hasattr(s, k):
            raise TypeError(f"run_bench() got an unexpected keyword argument {k!r}")
        setattr(s, k, v)
    rows: list[BenchRow] = []
    bar = Progress(len(drivers) * len(entries))
    mem = DEFAULT_MEM_LIMIT if s.mem_limit is None else s.mem_limit
    for spec in drivers:

        def open_device(spec: str = spec):
            return open_isolated(spec, call_timeout=s.call_timeout, mem_limit=mem)

        loaded = False
        for entry in entries:
            if not loaded and rows and rows[-1].driver == spec and rows[-1].message.startswith("driver: "):
                # the driver did not load for the model before: one FAIL row per model, quickly
                rows.append(BenchRow(entry.name, spec, "FAIL", message=rows[-1].message))
                bar.step(f"{spec} {entry.name}: driver did not load")
                continue
            row = bench_model(open_device, spec, entry, s, golden_root)
            loaded = loaded or row.load_ms is not None
            rows.append(row)
            bar.step(f"{spec} {entry.name}: " + (f"p50 {row.p50_ms:.2f} ms" if row.p50_ms is not None else row.status))
    if baseline_driver is not None:
        mine = [r for r in rows if r.driver == baseline_driver]
        baseline_rows = {(r.model, d): r.csv_row() for r in mine for d in drivers if d != baseline_driver}
    if baseline_rows is not None:
        apply_baseline(rows, baseline_rows, s.percentile)
    for r in rows:
        decide(r)
    return rows


def write_csv(rows: Sequence[BenchRow], path: Path) -> None:
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow(r.csv_row())
    os.replace(tmp, path)


def table(rows: Sequence[BenchRow]) -> str:
    """A plain-text table of the main numbers (what the CLI prints)."""

    def f(v, fmt):
        return "-" if v is None else format(v, fmt)

    def iv(r: BenchRow, tag: str) -> str:
        v, lo, hi = getattr(r, f"{tag}_ms"), getattr(r, f"{tag}_low_ms"), getattr(r, f"{tag}_high_ms")
        if v is None:
            return "-"
        return f"{v:.3f} [{lo:.3f},{hi:.3f}]" if lo is not None and hi is not None else f"{v:.3f} [n<]"

    head = (
        f"{'model':30s} {'driver':12s} {'verdict':9s} {'status':8s} {'p50 [99% CI] ms':>24s} {'p90 [99% CI] ms':>24s} "
        f"{'n':>5s} {'qps':>7s} {'load':>7s} {'prep':>7s} {'1st':>7s} {'MB exe':>7s} {'audits':7s} {'acc':5s} "
        f"{'top1':>5s} {'base':5s}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        aud = "".join((v or "-")[0] for v in (r.audit_same_outputs, r.audit_cache, r.audit_seed))
        lines.append(
            f"{r.model[:30]:30s} {r.driver[:12]:12s} {(r.verdict or '-')[:9]:9s} {r.status[:8]:8s} "
            f"{iv(r, 'p50'):>24s} {iv(r, 'p90'):>24s} {r.iterations:5d} {f(r.offline_qps, '7.1f')} "
            f"{f(r.load_ms, '7.0f')} {f(r.compile_without_cache_ms, '7.1f')} {f(r.first_execution_ms, '7.2f')} "
            f"{f(r.peak_rss_execute_mb, '7.0f')} {aud:7s} {(r.accuracy_verdict or '-')[:5]:5s} "
            f"{f(r.top1_agreement, '5.2f')} {(r.baseline or '-')[:5]:5s}"
        )
    lines.append(
        "(ms; latency: wall clock around execute through the driver host; audits: same outputs, result cache, "
        "other seed; P/W/F = PASS/WARN/FAIL)"
    )
    return "\n".join(lines)


# A benchmark row as an outcome of the artifact contract: a model the driver cannot take (or
# nnconform cannot import) is skipped unless a --must-accelerate rule said it had to.
def row_outcome(r: BenchRow) -> str:
    if r.status in ("CRASH", "HANG"):
        return r.status
    if r.verdict == "FAIL":
        return "FAIL"
    if r.status in ("UNSUPPORTED", "UNMAPPED", "PARTIAL"):
        return "SKIP"
    return "PASS"


def result_records(rows: Sequence[BenchRow], meta: dict) -> list:
    """One result row of the artifact contract per model x driver."""
    from nnconform.verdict.outcome import Outcome
    from nnconform.verdict.results import ResultRecord

    return [
        ResultRecord(
            suite="bench",
            test_id=f"bench/{r.model}",
            driver=r.driver,
            outcome=Outcome(row_outcome(r)),
            message="; ".join(
                filter(
                    None,
                    [
                        r.message,
                        r.accuracy_message if r.accuracy_verdict == "FAIL" else "",
                        r.audit_message if "FAIL" in (r.audit_cache, r.audit_same_outputs, r.audit_seed) else "",
                        r.baseline_message if r.baseline == "FAIL" else "",
                    ],
                )
            ),
            duration_s=float(r.total_time_sec or 0.0),
            seed=meta.get("seed"),
            extra={k: v for k, v in r.csv_row().items() if k not in ("model", "driver", "message")},
        )
        for r in rows
    ]


def write_artifacts(rows: Sequence[BenchRow], out: Path, meta: dict) -> int:
    """The artifact contract's files for a benchmark (nnconform.artifacts): a results row per
    model and driver (its figures in ``extra``), results.csv, summary.json, report.html (the
    benchmark page) and run.json with the exit status, which is returned."""
    from nnconform.artifacts import RESULTS_JSONL, write_common, write_run
    from nnconform.artifacts.reportdir import atomic_write
    from nnconform.bench.report import write_html
    from nnconform.verdict.outcome import ExitStatus
    from nnconform.verdict.results import record_to_json

    records = result_records(rows, meta)
    atomic_write(out / RESULTS_JSONL, "".join(record_to_json(r) + "\n" for r in records))
    code = ExitStatus.of([r.outcome for r in records])
    status = f"complete: {len(records)} model x driver rows"
    write_common(out, records, {**meta, "status": status}, title="nnconform bench", html=False)
    write_html(rows, out / "report.html", {**meta, "status": status}, records)
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


from nnconform.bench.report import write_html as write_html  # noqa: E402  (it needs the row type above)
