"""The MLTS crash tests (nnapi_facts.md section 7), scaled to one machine.

Each test is a :class:`StressTest`: a worker-side function that runs one case in the sandbox
and returns a Verdict, the parameters of case ``index`` (derived from the case seed and the
options only, so a case replays alike whatever the budget), a nominal duration for planning
and the case's wall-clock limit (duration + grace, past which the sandbox calls it a HANG).

    parallel-inference          the workload on N threads for D s; a failed thread -> FAILURE
    multi-process-inference     P client processes x T threads; kill rate alternates 0 / 0.8:
                                each client is SIGKILLed at U[0, D] with that probability;
                                pass = every client not killed ends DONE, then liveness OK
    multi-process-model-load    the same, compile only; kill rates 0 / 0.5 / 1.0
    client-early-termination    a client with 4 compiling threads, killed at U[D/4, D/2];
                                pass = it was still running when killed, then liveness OK
    random-model-load           one random graph per case (10 ops / dims <= 1000 and 600 ops /
                                dims <= 10, alternating): support query + prepare.  The
                                graphs rotate over every data type the driver claims
                                operations of, draw only the (operation, rank) cells it
                                claims (StressOptions.claims, asked once per run) and
                                alternate plain and value-class inputs
    random-inference            the same graphs, prepared, executed and compared with the
                                reference executor (SmallGraph / LargeGraph criteria)
    performance-degradation     latency with a thread compiling every 20 ms vs with a control
                                thread burning the same CPU time without the driver, in 8
                                interleaved window pairs; FAILURE when the lower end of the
                                95% bootstrap interval of the driver's share is above +50%,
                                or that of the growth of the control windows' latency
                                (relative to the reference executor) over the case's
                                compilations (runs alone: no other case beside it)
    leak                        one prepared model executed for D s while the worker's RSS is
                                sampled; FAILURE on steady growth past a threshold
    compile-leak                prepare/release cycles of one model for D s (MLTS model-loading
                                stress), RSS sampled per compilation; FAILURE on steady growth
                                past leak_threshold_mb / 4, reported per compilation
    exhaustive                  one shard of the exhaustive suite's full tier per case
                                (exhaustive_shards shards; case k of a run with seed S runs
                                shard (S + k) mod n + 1, so runs with successive seeds
                                rotate over the whole tier); every sweep of it run and
                                measured as the suite does; FAILURE names the failing sweeps
                                and the command that reruns the shard through the suite
    execution-soak              one prepared model executed until soak_executions (70,000:
                                past request counters that wrap at 2^16) or D s; every result
                                must equal the first, checked one; the rate is in the row

A random graph the driver supports in part is loaded and run partitioned, as Android would:
model-load compiles the driver's partitions, inference runs them with the rest on the
reference (nnconform.verdict.partition).  Only a graph the driver refuses entirely is a SUCCESS with
a note, as in MLTS.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from nnconform.isolation.childproc import file_tail, signal_name
from nnconform.isolation.sandbox import CaseContext, Verdict
from nnconform.stress import SOAK_EXECUTIONS
from nnconform.stress import workload as wl
from nnconform.stress.random_models import GRAPH_SIZES, random_model
from nnconform.verdict.results import SUCCESS

CLIENT_STARTUP_S = 15.0
DRIVER = "<driver>"  # in a case's rerun command: the runner substitutes the run's --driver


@dataclass
class StressOptions:
    """Knobs of a run; every field is a command-line option of ``nnconform stress``."""

    durations: dict = field(default_factory=dict)  # test name -> seconds per case
    threads: int = 4  # parallel-inference threads
    processes: int = 3  # multi-process clients
    client_threads: int = 2  # threads per client
    hang_grace: float = 10.0  # seconds past a case's duration before it is a HANG
    perf_threshold: float = 0.5  # performance-degradation limit, share and growth (0.5 = +50 %)
    leak_threshold_mb: float = 32.0  # RSS growth that counts as a leak
    soak_executions: int = SOAK_EXECUTIONS  # execution-soak: executions of one prepared model
    worker_leak_mb: float = 512.0  # a worker's RSS growth over its whole life that fails the run
    random_pause: float = 0.0  # pause after each random-graph case (MLTS: 0.3 s)
    # What the driver claims, per short type name: sorted "OPERATION:rank" cells (nnconform.cases.probe
    # ClaimCache, asked once at the start of a run by the claimed_cells target and kept in the
    # manifest, so --resume and replays rebuild the same graphs).  Empty: fp32 over every
    # covered operation (the claims could not be asked, or --no-probe).
    claims: dict = field(default_factory=dict)
    exhaustive_shards: int = 256  # the exhaustive tier is cut in this many shards, one per case
    exhaustive_tier: str = "full"  # which tier of the exhaustive suite the shards cut
    # The run's seed (the runner sets it before planning; kept in the manifest): the exhaustive
    # test's shard of case k is (run_seed + k) mod exhaustive_shards, so --case replays and
    # --resume give each case the shard it had.
    run_seed: int = 0

    def duration(self, test: str) -> float:
        return float(self.durations.get(test, DEFAULT_DURATIONS[test]))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "StressOptions":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


# Seconds per case (random-graph tests: no duration, one graph per case).
DEFAULT_DURATIONS = {
    "parallel-inference": 8.0,
    "multi-process-inference": 8.0,
    "multi-process-model-load": 8.0,
    "client-early-termination": 8.0,
    "random-model-load": 0.0,
    "random-inference": 0.0,
    "performance-degradation": 4.0,
    "leak": 10.0,
    "compile-leak": 10.0,
    "execution-soak": 120.0,
    # a shard's planning estimate: 1/256 of the full tier is ~59 sweeps, ~49 of them 4.2 M-element
    # fp16-pair chunks (0.1-0.6 s each on the reference, 2-core machine under load)
    "exhaustive": 30.0,
}


@dataclass(frozen=True)
class StressTest:
    name: str
    run: Callable[..., Verdict]  # in the worker: run(ctx, **params)
    params: Callable[[int, int, StressOptions], dict]  # (index, case seed, options)
    nominal_s: Callable[[StressOptions], float]  # planning estimate per case
    timeout_s: Callable[[StressOptions], float]  # the sandbox's wall-clock limit
    weight: float = 1.0  # share of the budget
    exclusive: bool = False  # run with no other case beside it
    random_graph: bool = False


# ---------------------------------------------------------------------------------------
# Worker-side case functions
# ---------------------------------------------------------------------------------------


def exc_text(e: BaseException) -> str:
    """``Type: first line of the message`` (the type alone when there is no message)."""
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def parallel_inference(ctx: CaseContext, duration: float, threads: int) -> Verdict:
    models = wl.workload(ctx.device)
    stop = threading.Event()
    errors: list[str] = []
    counts = [0] * threads

    def body(k: int) -> None:
        i = k
        try:
            while not stop.is_set():
                ex = models[i % len(models)]
                i += 1
                why = wl.check(ctx.device, ex, ctx)
                if why:
                    errors.append(f"thread {k}: {why}")
                    stop.set()
                    return
                counts[k] += 1
        except BaseException as e:  # KeyboardInterrupt, SystemExit... from the driver: the thread died
            errors.append(f"thread {k} died of {exc_text(e)}")
            stop.set()

    ts = [threading.Thread(target=body, args=(k,), daemon=True) for k in range(threads)]
    for t in ts:
        t.start()
    stop.wait(duration)
    stop.set()
    for t in ts:
        t.join()  # a thread stuck in the driver: no verdict, the sandbox calls HANG
    if errors:
        return Verdict.failure(errors[0], executions=sum(counts))
    return Verdict.success(f"{sum(counts)} executions on {threads} threads", executions=sum(counts))


@dataclass
class _Client:
    cid: int
    proc: subprocess.Popen
    err_path: str
    started: float
    kill_at: float | None  # seconds after start, None: never killed on purpose
    out: bytes = b""
    killed: bool = False
    hung: bool = False
    ready_at: float | None = None

    def lines(self) -> list[str]:
        return self.out.decode("utf-8", "replace").splitlines()

    def status(self) -> str:
        rc = self.proc.returncode
        last = self.lines()[-1] if self.out else ""
        if self.killed:
            return "killed on purpose"
        if self.hung:
            return "hung (killed by the test)"
        if rc == 0 and last.startswith("DONE"):
            return "ok"
        if rc is not None and rc < 0:
            return f"died of {signal_name(-rc)}"
        if last.startswith("FAIL"):
            return f"failed: {last[5:]}"
        return f"exit code {rc} without DONE"

    def stderr_tail(self, n: int = 8) -> str:
        return file_tail(self.err_path, lines=n)


def _start_client(
    ctx: CaseContext, cid: int, mode: str, duration: float, threads: int, kill_at: float | None, tmp: str
) -> _Client:
    err_path = os.path.join(tmp, f"client{cid}.stderr")
    env = dict(os.environ)
    env["NNCONFORM_CLIENT"] = f"c{cid}"
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-X",
                "faulthandler",
                "-m",
                "nnconform.stress.client",
                "--driver",
                ctx.driver,
                "--mode",
                mode,
                "--duration",
                str(duration),
                "--threads",
                str(threads),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            env=env,
        )
    return _Client(cid, proc, err_path, time.monotonic(), kill_at)


def _supervise(clients: list[_Client], deadline_of: Callable[[_Client], float], kill_from_ready: bool = False) -> None:
    """Read client output, carry out the planned kills, and kill clients that overrun."""
    live = list(clients)
    while live:
        fds = {c.proc.stdout.fileno(): c for c in live if c.proc.stdout and not c.proc.stdout.closed}
        if fds:
            ready = select.select(list(fds), [], [], 0.05)[0]
        else:
            time.sleep(0.05)
            ready = []
        for fd in ready:
            c = fds[fd]
            chunk = os.read(fd, 65536)
            if chunk:
                c.out += chunk
                if c.ready_at is None and b"READY" in c.out:
                    c.ready_at = time.monotonic()
            else:
                assert c.proc.stdout is not None  # fds holds only open pipes
                c.proc.stdout.close()
        now = time.monotonic()
        for c in list(live):
            if c.proc.poll() is not None and (c.proc.stdout is None or c.proc.stdout.closed):
                live.remove(c)
                continue
            base = c.ready_at if kill_from_ready else c.started
            if (
                c.kill_at is not None
                and not c.killed
                and base is not None
                and now - base >= c.kill_at
                and c.proc.poll() is None
            ):
                c.proc.send_signal(signal.SIGKILL)
                c.killed = True
            elif now > deadline_of(c) and c.proc.poll() is None:
                c.proc.send_signal(signal.SIGKILL)
                c.hung = True
        if not live:
            break
    for c in clients:
        c.proc.wait()


def multi_process(
    ctx: CaseContext,
    mode: str,
    duration: float,
    processes: int,
    threads: int,
    kill_rate: float,
    seed: int,
    grace: float,
) -> Verdict:
    rng = np.random.default_rng(seed)
    plan = [float(rng.uniform(0, duration)) if rng.random() < kill_rate else None for _ in range(processes)]
    with tempfile.TemporaryDirectory(prefix="nnconform-clients-") as tmp:
        clients = [_start_client(ctx, i, mode, duration, threads, plan[i], tmp) for i in range(processes)]
        ctx.breadcrumb(f"{processes} {mode} clients, pids {[c.proc.pid for c in clients]}")
        _supervise(clients, lambda c: c.started + CLIENT_STARTUP_S + duration + grace)
        statuses = {f"c{c.cid}": c.status() for c in clients}
        bad = [c for c in clients if statuses[f"c{c.cid}"] not in ("ok", "killed on purpose")]
        info: dict[str, Any] = {"clients": statuses, "kill_plan": plan}
        if bad:
            c = bad[0]
            tail = c.stderr_tail()
            return Verdict.failure(
                f"client c{c.cid} (pid {c.proc.pid}): {statuses[f'c{c.cid}']}", **info, client_stderr=tail
            )
    why = wl.probe(ctx.device, ctx)
    if why:
        return Verdict.failure(f"liveness after clients: {why}", **info)
    killed = sum(c.killed for c in clients)
    return Verdict.success(f"{processes} clients ({killed} killed on purpose), liveness OK", **info)


def client_early_termination(ctx: CaseContext, duration: float, seed: int, grace: float) -> Verdict:
    rng = np.random.default_rng(seed)
    kill_at = float(rng.uniform(duration / 4, duration / 2))
    with tempfile.TemporaryDirectory(prefix="nnconform-clients-") as tmp:
        c = _start_client(ctx, 0, "compile", duration, 4, kill_at, tmp)
        ctx.breadcrumb(f"compiling client pid {c.proc.pid}, kill at {kill_at:.2f} s")
        _supervise([c], lambda c: c.started + CLIENT_STARTUP_S + duration + grace, kill_from_ready=True)
        status = c.status()
        if not c.killed:
            return Verdict.failure(
                f"compiling client ended before it was killed: {status}", client_stderr=c.stderr_tail(), kill_at=kill_at
            )
    why = wl.probe(ctx.device, ctx)
    if why:
        return Verdict.failure(f"liveness after killing a compiling client: {why}", kill_at=kill_at)
    return Verdict.success(f"client killed while compiling at {kill_at:.2f} s, liveness OK", kill_at=kill_at)


# The data types random stress graphs rotate over, in this order, among those the driver claims.
RANDOM_TYPES = ("fp32", "quant8", "fp16", "quant8_signed", "int32", "bool8")


def random_graph_params(index: int, seed: int, o: StressOptions) -> dict:
    """Case ``index`` of a random-graph test: the graph size alternates each case, the data
    type each pair of cases (over the types the driver claims), and plain vs value-class inputs
    so that each pair has one of each and each graph size gets both: a short budget already
    sees several types and both kinds of inputs.  ``cells`` carries the claimed cells of that
    type into the worker (the journal row keeps their count)."""
    graphs = list(GRAPH_SIZES)
    types = [t for t in RANDOM_TYPES if o.claims.get(t)] or ["fp32"]
    step = index // len(graphs)
    dtype = types[step % len(types)]
    return dict(
        seed=seed,
        graph=graphs[index % len(graphs)],
        pause=o.random_pause,
        dtype=dtype,
        value_classes=index % 4 in (1, 2),
        cells=o.claims.get(dtype) or None,
    )


def graph_of(params: dict):
    """The RandomModel of a random-graph case (worker, spec dump and replay alike)."""
    n, d = GRAPH_SIZES[params["graph"]]
    return random_model(
        params["seed"],
        n,
        d,
        dtype=params.get("dtype", "fp32"),
        cells=params.get("cells"),
        value_classes=bool(params.get("value_classes", False)),
    )


def claimed_cells(ctx: CaseContext) -> Verdict:
    """Sandbox target run once before a run's random-graph cases: the (operation, rank) cells
    of every data type the driver claims (supported_operations on the probe's one-operation
    models; no execution), for StressOptions.claims."""
    from nnconform.cases.probe import ClaimCache
    from nnconform.stress.random_models import TYPE_BY_SHORT_NAME

    cc = ClaimCache(ctx.device)
    out = {}
    for short in RANDOM_TYPES:
        ctx.breadcrumb(f"claims of {short}")
        cells = cc.allowed(TYPE_BY_SHORT_NAME[short])
        if cells:
            out[short] = sorted(f"{op.name}:{r}" for op, r in cells)
    n = sum(map(len, out.values()))
    return Verdict.success(f"{n} claimed cells over {len(out)} data type(s)", claims=out)


def load_graph(ctx: CaseContext, model, label: str, pause: float = 0.0) -> Verdict:
    """Support query and prepare of one graph, partitioned when the driver claims a part
    (random-model-load's body; the shrink runs its candidates through it too)."""
    from nnconform.driver import DriverError

    ctx.breadcrumb(f"{label}: supported_operations")
    supported = ctx.device.supported_operations(model)
    if not any(supported):
        return Verdict.success(f"not supported at all (0/{len(supported)} ops)")
    if not all(supported):
        # As Android loads a model a driver supports in part: the driver compiles the
        # partitions it claims (the rest would run on the CPU), each as a model of its own.
        from nnconform.verdict.partition import assign, plan, submodel

        parts = [p for p in plan(model, assign(ctx.device, model, supported)) if p.on_driver]
        for k, part in enumerate(parts):
            ctx.breadcrumb(f"{label}: prepare driver partition {k} of {len(parts)}")
            try:
                ctx.device.prepare(submodel(model, part)).release()
            except DriverError as e:
                return Verdict.failure(
                    f"prepare failed on driver partition {k} ({len(part.operations)} claimed "
                    f"ops: {part.names(model)[:200]}): {e}"
                )
        time.sleep(pause)
        n_on = sum(len(p.operations) for p in parts)
        return Verdict.success(
            f"partitioned: {n_on} of {len(supported)} ops in {len(parts)} driver partition(s) prepared",
            partitioned=True,
        )
    ctx.breadcrumb(f"{label}: prepare")
    try:
        ctx.device.prepare(model).release()
    except DriverError as e:
        return Verdict.failure(f"prepare failed on a supported random graph: {e}")
    time.sleep(pause)
    return Verdict.success("prepared")


def random_model_load(
    ctx: CaseContext,
    seed: int,
    graph: str,
    pause: float = 0.0,
    dtype: str = "fp32",
    value_classes: bool = False,
    cells=None,
) -> Verdict:
    rm = graph_of(dict(seed=seed, graph=graph, dtype=dtype, value_classes=value_classes, cells=cells))
    v = load_graph(ctx, rm.model, f"random graph seed {seed} {graph}", pause)
    if v.verdict == SUCCESS:
        v.reason = (v.reason + "; " if v.reason != "prepared" else "") + rm.describe()[:160]
    return v


def infer_graph(ctx: CaseContext, model, inputs, ignored, graph: str, label: str, pause: float = 0.0) -> Verdict:
    """One graph prepared, executed and compared with the reference executor
    (random-inference's body; the shrink runs its candidates through it too)."""
    from nnconform.reference.executor import Executor
    from nnconform.verdict.criteria import LARGE_GRAPH, SMALL_GRAPH
    from nnconform.verdict.runner import FAIL, SKIP, run_case

    expected = Executor(model).run(list(inputs))
    crit = LARGE_GRAPH if GRAPH_SIZES[graph][0] > 10 else SMALL_GRAPH
    ctx.breadcrumb(f"{label}: run")
    out = run_case(ctx.device, model, list(inputs), expected, criteria=crit, ignored=ignored or None)
    time.sleep(pause)
    if out.outcome == FAIL:
        return Verdict.failure(out.message, stage=out.stage)
    if out.outcome == SKIP:
        return Verdict.success(out.message)
    return Verdict.success("ran and matched")


def random_inference(
    ctx: CaseContext,
    seed: int,
    graph: str,
    pause: float = 0.0,
    dtype: str = "fp32",
    value_classes: bool = False,
    cells=None,
) -> Verdict:
    rm = graph_of(dict(seed=seed, graph=graph, dtype=dtype, value_classes=value_classes, cells=cells))
    v = infer_graph(ctx, rm.model, rm.inputs, rm.ignored, graph, f"random graph seed {seed} {graph}", pause)
    if v.verdict == SUCCESS and v.reason == "ran and matched":
        v.reason = rm.describe()[:200]
    return v


PERF_MODEL = "conv_2d_same_3x3_stride2_fp32"
COMPILE_GAP_S = 0.020
PERF_PAIRS = 8  # interleaved (compile loop, control) window pairs per case
PERF_BOOTSTRAP = 2000  # bootstrap resamples of the pairs' log latency ratios
PERF_CONFIDENCE = 0.95  # two-sided interval; the verdict uses its lower end


class WrongResult(Exception):
    """An execution inside a timing or memory loop returned outputs that do not match."""


def _checked(ex, result) -> None:
    # The loops time and watch executions; they still reject garbage, outside the timed part.
    from nnconform.verdict.criteria import compare

    cmp = compare(ex.model, list(ex.outputs), list(getattr(result, "outputs", None) or []))
    if not cmp.passed:
        raise WrongResult(f"{ex.name}: {cmp.message}")


def _latencies(prepared, request, seconds: float, ex, calibrate: Callable[[], Any]) -> tuple[np.ndarray, np.ndarray]:
    """(driver latencies, calibration latencies) of ``seconds`` of executions, each followed by
    one call of ``calibrate``: the same work without the driver, timed back to back with it so
    that whatever load the machine has at that moment falls on both."""
    times, cal = [], []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t = time.perf_counter()
        result = prepared.execute(request)
        times.append(time.perf_counter() - t)
        _checked(ex, result)
        t = time.perf_counter()
        calibrate()
        cal.append(time.perf_counter() - t)
    return np.asarray(times, dtype=np.float64), np.asarray(cal, dtype=np.float64)


def _burn_cpu(seconds: float) -> None:
    """Spend ``seconds`` of this thread's CPU time in Python bytecode: it holds the GIL and a
    core as a Python compilation would, and touches no driver."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        sum(range(256))


def ratio_interval(
    log_ratios: np.ndarray, seed: int, resamples: int = PERF_BOOTSTRAP, confidence: float = PERF_CONFIDENCE
):
    """(point, low, high) of the mean of ``log_ratios`` (one per window pair): a seeded
    percentile bootstrap over the pairs.  Pairs, not single executions, are resampled: the
    executions of one window share its machine load and are not independent."""
    rng = np.random.default_rng(seed)
    x = np.asarray(log_ratios, dtype=np.float64)
    means = x[rng.integers(0, x.size, size=(resamples, x.size))].mean(axis=1)
    a = (1.0 - confidence) / 2
    lo, hi = np.quantile(means, [a, 1.0 - a])
    return float(x.mean()), float(lo), float(hi)


def growth_interval(
    compiles: np.ndarray,
    log_ratios: np.ndarray,
    seed: int,
    resamples: int = PERF_BOOTSTRAP,
    confidence: float = PERF_CONFIDENCE,
):
    """(point, low, high) of how much the driver's latency relative to the calibration grows
    from the control window after the fewest compilations to the one after the most: a
    least-squares line of ``log_ratios`` (one per control window) on ``compiles`` (the
    compilations made before it), as a relative change, with a seeded percentile bootstrap
    over the windows.  None when every window came after as many compilations."""
    x = np.asarray(compiles, dtype=np.float64)
    y = np.asarray(log_ratios, dtype=np.float64)
    if x.size < 3 or np.ptp(x) == 0:
        return None

    def slope(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:  # one line fit per row
        dx = xs - xs.mean(axis=-1, keepdims=True)
        sxx = (dx * dx).sum(axis=-1)
        sxy = (dx * (ys - ys.mean(axis=-1, keepdims=True))).sum(axis=-1)
        # a resample that draws one window over and over has no slope: left out
        return np.divide(sxy, sxx, out=np.full(sxx.shape, np.nan), where=sxx > 0)

    span = float(np.ptp(x))
    point = float(np.expm1(slope(x, y) * span))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(resamples, x.size))
    b = slope(x[idx], y[idx])
    b = b[np.isfinite(b)]
    a = (1.0 - confidence) / 2
    lo, hi = np.expm1(np.quantile(b, [a, 1.0 - a]) * span)
    return point, float(lo), float(hi)


def performance_degradation(
    ctx: CaseContext,
    warmup: float,
    duration: float,
    threshold: float,
    seed: int = 0,
    pairs: int = PERF_PAIRS,
) -> Verdict:
    """Inference latency with a compilation every COMPILE_GAP_S on another thread, against a
    control that loads the machine alike without touching the driver: a thread that burns, per
    cycle, the CPU time the driver's compilations took (measured in the windows so far) and
    waits the same gap.  ``pairs`` pairs of windows (``duration`` / ``pairs`` s each), the
    order inside a pair drawn from ``seed``, so load that comes and goes on a shared machine
    falls on both alike.  Two checks, each failing only when the lower end of its bootstrap
    interval is above ``threshold``:

    - the driver's share of the slowdown: per pair the log of mean(compiling) / mean(control);
    - latency growing with the number of compilations made so far (a driver that keeps every
      compilation somewhere each execution walks): it slows the control windows as much as
      the compiling ones, so the first check cancels it.  Each execution is followed by the
      same model on the reference executor (the calibration), and the control windows' median
      ratio of the two latencies is fitted against the compilations made before each window.
      The ratio, not the latency, so a machine that gets busier during the case is not
      taken for growth."""
    from nnconform.ir import Request
    from nnconform.reference.executor import Executor

    ex = wl.example(PERF_MODEL) if PERF_MODEL in wl._examples_by_name() else wl.workload(ctx.device)[0]
    ctx.breadcrumb(f"example {ex.name}: latency")
    why = wl.check(ctx.device, ex, ctx)
    if why:
        return Verdict.failure(why)
    prepared = ctx.device.prepare(ex.model)
    request = Request.from_arrays(ex.model, list(ex.inputs))
    executor, inputs = Executor(ex.model), list(ex.inputs)

    def calibrate() -> None:
        executor.run(inputs)

    rng = np.random.default_rng(seed)
    window = duration / max(1, pairs)
    compile_cpu: list[float] = []  # thread CPU seconds of each compilation
    died: list[str] = []
    # per window the MEAN latency: a driver that stalls one execution in many for a whole
    # compilation leaves the median alone, not the mean (nor the throughput)
    means: dict[str, list[float]] = {"compile": [], "control": []}
    counts = {"compile": 0, "control": 0}
    # per control window: the median over its executions of log(driver latency / the calibration
    # right after it); the median because growth slows every execution, and a preemption on a
    # busy machine lands on one of a pair, not both
    control_ratio: list[float] = []
    control_after: list[int] = []  # per control window: the compilations made before it

    def compile_loop(stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                c = time.thread_time()
                ctx.device.prepare(ex.model).release()
                compile_cpu.append(time.thread_time() - c)
                stop.wait(COMPILE_GAP_S)
        except BaseException as e:  # the load is gone: the window's latency would mean nothing
            died.append(f"compile thread died after {len(compile_cpu)} compiles: {exc_text(e)}")

    def control_loop(stop: threading.Event) -> None:
        per_cycle = float(np.mean(compile_cpu)) if compile_cpu else 0.0
        while not stop.is_set():
            _burn_cpu(per_cycle)
            stop.wait(COMPILE_GAP_S)

    def measure(kind: str) -> None:
        stop = threading.Event()
        t = threading.Thread(target=compile_loop if kind == "compile" else control_loop, args=(stop,), daemon=True)
        ctx.breadcrumb(f"example {ex.name}: latency with the {kind} loop")
        before = len(compile_cpu)
        t.start()
        try:
            lat, cal = _latencies(prepared, request, window, ex, calibrate)
        finally:
            stop.set()
            t.join()  # a compilation stuck in the driver: no verdict, the sandbox calls HANG
        means[kind].append(float(np.mean(lat)) if lat.size else float("nan"))
        counts[kind] += int(lat.size)
        if kind == "control" and lat.size:
            control_ratio.append(float(np.median(np.log(lat / cal))))
            control_after.append(before)

    try:
        _latencies(prepared, request, warmup, ex, calibrate)
        alone, _ = _latencies(prepared, request, window, ex, calibrate)
        for k in range(pairs):
            # the first pair measures the compilations first: the control needs their CPU time
            order = ("compile", "control") if k == 0 or rng.random() < 0.5 else ("control", "compile")
            for kind in order:
                measure(kind)
                if died:
                    return Verdict.failure(died[0], compiles=len(compile_cpu), model=ex.name)
    except WrongResult as e:
        return Verdict.failure(str(e))
    finally:
        prepared.release()
    comp, ctrl = np.asarray(means["compile"]), np.asarray(means["control"])
    if not (np.all(comp > 0) and np.all(ctrl > 0)):
        return Verdict.failure(
            f"a latency window of {window:.2f} s finished no execution "
            f"({counts['compile']} with compilations, {counts['control']} with the control)",
            model=ex.name,
        )
    point, lo, hi = ratio_interval(np.log(comp / ctrl), seed)
    degradation, low, high = math.expm1(point), math.expm1(lo), math.expm1(hi)
    # its own stream of the case seed: the first check's interval stays what it was
    grown = growth_interval(np.asarray(control_after), np.asarray(control_ratio), seed + 1)
    info = dict(
        latency_alone_ms=float(np.mean(alone)) * 1e3 if alone.size else None,
        latency_loaded_ms=float(np.median(comp)) * 1e3,
        latency_control_ms=float(np.median(ctrl)) * 1e3,
        degradation=degradation,
        degradation_low=low,
        degradation_high=high,
        growth=grown[0] if grown else None,
        growth_low=grown[1] if grown else None,
        growth_high=grown[2] if grown else None,
        growth_compiles=[min(control_after), max(control_after)] if control_after else None,
        confidence=PERF_CONFIDENCE,
        pairs=pairs,
        window_s=window,
        control_cpu_ms_per_cycle=float(np.mean(compile_cpu)) * 1e3 if compile_cpu else 0.0,
        executions=int(alone.size) + counts["compile"] + counts["control"],
        compiles=len(compile_cpu),
        model=ex.name,
    )
    share = (
        f"mean latency {np.median(comp) * 1e3:.3f} ms with a compile every {COMPILE_GAP_S * 1e3:.0f} ms, "
        f"{np.median(ctrl) * 1e3:.3f} ms under a control burning the same CPU "
        f"({np.mean(alone) * 1e3 if alone.size else float('nan'):.3f} ms alone); driver's share "
        f"{degradation:+.0%}, {PERF_CONFIDENCE:.0%} interval [{low:+.0%}, {high:+.0%}] over {pairs} window pairs "
        f"(limit +{threshold:.0%})"
    )
    if grown:
        g_text = (
            f"execute latency relative to the same model on the reference executor {grown[0]:+.0%} "
            f"from the control window after "
            f"{min(control_after)} compilations to the one after {max(control_after)}, "
            f"{PERF_CONFIDENCE:.0%} interval [{grown[1]:+.0%}, {grown[2]:+.0%}] (limit +{threshold:.0%})"
        )
    else:
        g_text = "growth with the compilations not measured (the control windows came after as many)"
    if grown and grown[1] > threshold:
        # the growth first: it is the reason, and the share alone would look harmless
        return Verdict.failure(f"latency grows with the number of compilations: {g_text}; {share}", **info)
    if low > threshold:
        return Verdict.failure(f"{share}; {g_text}", **info)
    return Verdict.success(f"{share}; {g_text}", **info)


LEAK_MODEL = "relu_fp32"


def leak_check(ctx: CaseContext, duration: float, threshold_mb: float, warmup_fraction: float = 0.2) -> Verdict:
    from nnconform.ir import Request

    ex = wl.example(LEAK_MODEL)
    ctx.breadcrumb(f"example {ex.name}: inference loop, watching RSS")
    prepared = ctx.device.prepare(ex.model)
    request = Request.from_arrays(ex.model, list(ex.inputs))
    samples: list[tuple[float, int]] = []
    t0 = time.perf_counter()
    n = 0
    next_sample = 0.0
    try:
        while (now := time.perf_counter() - t0) < duration:
            _checked(ex, prepared.execute(request))
            n += 1
            if now >= next_sample:
                samples.append((now, ctx.rss_bytes()))
                next_sample = now + 0.02
    except MemoryError:
        # Growth fast enough to reach the worker's RLIMIT_AS before the window closed.
        first = samples[0][1] if samples else 0
        return Verdict.failure(
            f"leak: out of memory after {n} executions in {time.perf_counter() - t0:.1f} s "
            f"(RSS {first / 2**20:.1f} MiB at start, {ctx.rss_bytes() / 2**20:.1f} MiB now)",
            recycle=True,
            executions=n,
        )
    except WrongResult as e:
        return Verdict.failure(str(e), executions=n)
    finally:
        prepared.release()
    window = [(t, r) for t, r in samples if t >= warmup_fraction * duration]
    if len(window) < 5:
        return Verdict.failure(f"only {len(window)} memory samples in {duration:g} s ({n} executions)")
    ts = np.array([w[0] for w in window])
    rs = np.array([w[1] for w in window], dtype=np.float64)
    slope, intercept = np.polyfit(ts, rs, 1)
    fit = slope * ts + intercept
    ss_tot = float(((rs - rs.mean()) ** 2).sum())
    r2 = 1.0 - float(((rs - fit) ** 2).sum()) / ss_tot if ss_tot > 0 else 0.0
    growth = float(fit[-1] - fit[0])
    info = dict(
        rss_start_mb=rs[0] / 2**20,
        rss_end_mb=rs[-1] / 2**20,
        growth_mb=growth / 2**20,
        slope_mb_per_s=slope / 2**20,
        r2=r2,
        executions=n,
        samples=len(window),
    )
    text = (
        f"RSS {rs[0] / 2**20:.1f} -> {rs[-1] / 2**20:.1f} MiB over {ts[-1] - ts[0]:.1f} s "
        f"({n} executions; fitted growth {growth / 2**20:+.1f} MiB, R^2 {r2:.2f})"
    )
    if growth > threshold_mb * 2**20 and r2 > 0.5:
        return Verdict.failure(f"steady memory growth (leak?): {text}", recycle=True, **info)
    return Verdict.success(text, **info)


def _fit_growth(xs: np.ndarray, rs: np.ndarray) -> tuple[float, float, float]:
    """(slope, fitted growth over xs, R^2) of a least-squares line through (xs, rs)."""
    slope, intercept = np.polyfit(xs, rs, 1)
    fit = slope * xs + intercept
    ss_tot = float(((rs - rs.mean()) ** 2).sum())
    r2 = 1.0 - float(((rs - fit) ** 2).sum()) / ss_tot if ss_tot > 0 else 0.0
    return float(slope), float(fit[-1] - fit[0]), r2


_MAX_RSS_SAMPLES = 4096  # compile_leak's RSS samples at most (then thinned)


def compile_leak(ctx: CaseContext, duration: float, threshold_mb: float, warmup_fraction: float = 0.2) -> Verdict:
    """MLTS model-loading stress, watched: prepare and release one model in a loop for
    ``duration`` s, sampling RSS after every compilation; a steady growth (fitted over the
    compilations after the warm-up, R^2 > 0.5) above ``threshold_mb`` fails, reported as
    KiB per compilation."""
    ex = wl.example(LEAK_MODEL)
    ctx.breadcrumb(f"example {ex.name}: prepare/release loop, watching RSS")
    counts: list[int] = []
    rss: list[int] = []
    t0 = time.perf_counter()
    n, stride = 0, 8
    try:
        while time.perf_counter() - t0 < duration:
            prepared = ctx.device.prepare(ex.model)
            prepared.release()
            n += 1
            if n <= 64 or n % stride == 0:
                counts.append(n)
                rss.append(ctx.rss_bytes())
                if len(counts) >= _MAX_RSS_SAMPLES:
                    # Bounded: a driver that compiles a million times a second would otherwise
                    # see this loop's own sample lists grow with every compilation, and be
                    # blamed for them.  Every other sample goes, and the stride doubles.
                    del counts[::2], rss[::2]
                    stride *= 2
    except MemoryError:
        # A fast machine reaches the memory limit within the case's duration: the samples taken
        # until then still say how much each compilation kept.
        # (Plain arithmetic on two samples: at the memory limit a numpy fit may not get its memory.)
        rate: dict[str, float] = {}
        if len(counts) >= 2 and counts[-1] > counts[0]:
            rate = {"kib_per_compilation": (rss[-1] - rss[0]) / (counts[-1] - counts[0]) / 1024}
        return Verdict.failure(
            f"compile leak: out of memory after {n} compilations (RSS {rss[0] / 2**20 if rss else 0:.1f} MiB at start"
            + (f"; {rate['kib_per_compilation']:+.2f} KiB per compilation)" if rate else ")"),
            recycle=True,
            compilations=n,
            **rate,
        )
    elapsed = time.perf_counter() - t0
    skip = int(len(counts) * warmup_fraction)
    xs = np.array(counts[skip:], dtype=np.float64)
    rs = np.array(rss[skip:], dtype=np.float64)
    if xs.size < 5:
        return Verdict.failure(f"only {xs.size} compilations sampled in {duration:g} s ({n} compilations)")
    slope, growth, r2 = _fit_growth(xs, rs)
    info = dict(
        compilations=n,
        compilations_per_s=round(n / elapsed, 1),
        kib_per_compilation=slope / 1024,
        growth_mb=growth / 2**20,
        r2=r2,
        rss_start_mb=rs[0] / 2**20,
        rss_end_mb=rs[-1] / 2**20,
    )
    text = (
        f"{n} compilations in {elapsed:.1f} s ({n / elapsed:.0f}/s); RSS {rs[0] / 2**20:.1f} -> "
        f"{rs[-1] / 2**20:.1f} MiB, {slope / 1024:+.2f} KiB per compilation (R^2 {r2:.2f})"
    )
    if growth > threshold_mb * 2**20 and r2 > 0.5:
        return Verdict.failure(f"memory grows with every compilation (leak?): {text}", recycle=True, **info)
    return Verdict.success(text, **info)


def exhaustive_params(index: int, seed: int, o: StressOptions) -> dict:
    """Case ``index``'s shard: consecutive cases take consecutive shards from the run seed's."""
    n = max(1, int(o.exhaustive_shards))
    return dict(shard=(o.run_seed + index) % n + 1, shards=n, tier=o.exhaustive_tier)


def exhaustive_shard(ctx: CaseContext, shard: int, shards: int, tier: str) -> Verdict:
    """Every sweep of one shard of the exhaustive suite (``nnconform.cases.exhaustive``), run on
    the driver and measured as the suite does (the tolerances, the no-flush rule).  A sweep the
    driver does not support is a skip; any other outcome but PASS fails the case, which names
    those sweeps with their worst error.  Shrinking to a small spec is the suite's work: the
    row gives the command that reruns this shard through it."""
    from nnconform.cases import exhaustive as X
    from nnconform.verdict.runner import PASS, SKIP

    items = X.shard(_sweeps_of(tier), (shard, shards))
    passed = skipped = elements = 0
    worst_ulp: int | None = None
    failed: list[dict] = []
    for k, sweep in enumerate(items):
        ctx.breadcrumb(f"exhaustive shard {shard}/{shards}: sweep {k + 1} of {len(items)}, {sweep.name}")
        swept = X.run_sweep(ctx.device, sweep, partition=False)
        out = swept.outcome
        if out.outcome == SKIP:
            skipped += 1
            continue
        elements += int(swept.info.get("elements") or 0)
        if swept.info.get("worst_ulp") is not None:
            worst_ulp = max(worst_ulp or 0, int(swept.info["worst_ulp"]))
        if out.outcome == PASS:
            passed += 1
            continue
        first = (str(out.message).splitlines() or [""])[0]
        failed.append(
            dict(
                sweep=sweep.name,
                outcome=str(out.outcome),
                failing=swept.info.get("failing"),
                worst_ulp=swept.info.get("worst_ulp"),
                worst_fraction=swept.info.get("worst_fraction"),
                message=first[:300],
            )
        )
    # the runner puts the run's driver in place of DRIVER (a case does not know how it was named)
    if tier == "full":
        rerun = f"nnconform run --driver {DRIVER} --suite exhaustive --shard {shard}/{shards}"
    else:  # `nnconform run --suite exhaustive` is the full tier: the suite file under pytest
        from nnconform import suites

        path = os.path.join(os.path.dirname(suites.__file__), "test_exhaustive.py")
        rerun = f"python -m pytest {path} --driver {DRIVER} --nn-exhaustive {tier} --nn-shard {shard}/{shards}"
    info: dict[str, Any] = dict(
        shard=f"{shard}/{shards}",
        tier=tier,
        sweeps=len(items),
        passed=passed,
        skipped=skipped,
        failed=len(failed),
        elements=elements,
        worst_ulp=worst_ulp,
        failing_sweeps=failed[:20],
        rerun=rerun,
    )
    text = f"shard {shard}/{shards} of the {tier} tier: {len(items)} sweeps, {passed} passed, {skipped} skipped"
    if failed:
        names = ", ".join(f["sweep"] for f in failed[:5]) + (f" and {len(failed) - 5} more" if len(failed) > 5 else "")
        return Verdict.failure(f"{text}, {len(failed)} failed ({names}); rerun with specs: {rerun}", **info)
    return Verdict.success(f"{text}, {elements:,} inputs; worst {worst_ulp} ULP", **info)


@functools.lru_cache(maxsize=2)
def _sweeps_of(tier: str) -> list:
    # building the full tier's 14,741 sweeps (each model validated) takes seconds: once per worker
    from nnconform.cases import exhaustive as X

    return X.sweeps(tier)


def execution_soak(ctx: CaseContext, duration: float, executions: int) -> Verdict:
    """One prepared model executed ``executions`` times (or for ``duration`` s): request ids
    and counters that wrap at 2^16 or 2^31 inside a driver are passed.  The first result is
    checked against the example; every later one must equal it byte for byte."""
    from nnconform.ir import Request

    ex = wl.example(wl.PROBE_NAME)
    ctx.breadcrumb(f"example {ex.name}: execution soak")
    prepared = ctx.device.prepare(ex.model)
    request = Request.from_arrays(ex.model, list(ex.inputs))
    n = 0
    t0 = time.perf_counter()
    try:
        first = prepared.execute(request)
        _checked(ex, first)
        n = 1
        ref = [np.asarray(o).tobytes() for o in first.outputs]
        while n < executions and time.perf_counter() - t0 < duration:
            result = prepared.execute(request)
            n += 1
            if [np.asarray(o).tobytes() for o in result.outputs] != ref:
                return Verdict.failure(f"execution {n} of one prepared model differs from the first", executions=n)
            if n & 0xFFF == 0:
                ctx.breadcrumb(f"example {ex.name}: execution soak, {n} executions")
    except WrongResult as e:
        return Verdict.failure(str(e), executions=n)
    except Exception as e:  # the driver's failure on execution n is the finding
        return Verdict.failure(f"execution {n + 1} of one prepared model failed: {exc_text(e)}", executions=n)
    finally:
        prepared.release()
    elapsed = time.perf_counter() - t0
    rate = n / elapsed if elapsed > 0 else 0.0
    info = dict(executions=n, executions_per_s=round(rate, 1), target=executions, target_reached=n >= executions)
    text = f"{n} executions of one prepared model in {elapsed:.1f} s ({rate:.0f}/s)"
    if n < executions:
        text += f"; the {duration:g} s case ended before the target {executions} (a larger --budget gives it longer)"
    return Verdict.success(text, **info)


# ---------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------


def _timed(name: str, extra: float = 0.0) -> tuple[Callable[[StressOptions], float], Callable[[StressOptions], float]]:
    return (lambda o: o.duration(name) + extra), (lambda o: o.duration(name) + extra + o.hang_grace)


def _mp(name: str, mode: str, rates: tuple[float, ...]):
    nominal, _ = _timed(name, 2.0)
    return StressTest(
        name,
        lambda ctx, **p: multi_process(ctx, **p),
        lambda i, s, o: dict(
            mode=mode,
            duration=o.duration(name),
            processes=o.processes,
            threads=o.client_threads,
            kill_rate=rates[i % len(rates)],
            seed=s,
            grace=o.hang_grace,
        ),
        nominal,
        lambda o: CLIENT_STARTUP_S + o.duration(name) + 2 * o.hang_grace + 5,
    )


def _random(name: str, fn) -> StressTest:
    return StressTest(
        name,
        fn,
        random_graph_params,
        lambda o: 0.3 + o.random_pause,
        lambda o: 2.0 + o.random_pause + o.hang_grace,
        weight=2.0,
        random_graph=True,
    )


TESTS: dict[str, StressTest] = {
    t.name: t
    for t in (
        StressTest(
            "parallel-inference",
            lambda ctx, **p: parallel_inference(ctx, **p),
            lambda i, s, o: dict(duration=o.duration("parallel-inference"), threads=o.threads),
            *_timed("parallel-inference"),
        ),
        _mp("multi-process-inference", "infer", (0.0, 0.8)),
        _mp("multi-process-model-load", "compile", (0.0, 0.5, 1.0)),
        StressTest(
            "client-early-termination",
            lambda ctx, **p: client_early_termination(ctx, **p),
            lambda i, s, o: dict(duration=o.duration("client-early-termination"), seed=s, grace=o.hang_grace),
            lambda o: o.duration("client-early-termination") / 2 + 2.0,
            lambda o: CLIENT_STARTUP_S + o.duration("client-early-termination") + 2 * o.hang_grace + 5,
        ),
        _random("random-model-load", random_model_load),
        _random("random-inference", random_inference),
        StressTest(
            "performance-degradation",
            lambda ctx, **p: performance_degradation(ctx, **p),
            lambda i, s, o: dict(
                warmup=1.0, duration=o.duration("performance-degradation"), threshold=o.perf_threshold, seed=s
            ),
            # warm-up, an alone window, then the compiling and the control windows
            lambda o: 1.0 + (2 + 1 / PERF_PAIRS) * o.duration("performance-degradation"),
            lambda o: 1.0 + (2 + 1 / PERF_PAIRS) * o.duration("performance-degradation") + o.hang_grace,
            exclusive=True,
        ),
        StressTest(
            "leak",
            lambda ctx, **p: leak_check(ctx, **p),
            lambda i, s, o: dict(duration=o.duration("leak"), threshold_mb=o.leak_threshold_mb),
            *_timed("leak"),
        ),
        StressTest(
            "compile-leak",
            lambda ctx, **p: compile_leak(ctx, **p),
            lambda i, s, o: dict(duration=o.duration("compile-leak"), threshold_mb=o.leak_threshold_mb / 4),
            *_timed("compile-leak"),
        ),
        # A shard's limit is generous: a slow driver's shard takes several times the estimate
        # (which is the reference's) and must not be called a HANG; a call that hangs is still
        # caught, at twenty times the estimate plus the grace.
        StressTest(
            "exhaustive",
            lambda ctx, **p: exhaustive_shard(ctx, **p),
            exhaustive_params,
            lambda o: o.duration("exhaustive"),
            lambda o: 20 * o.duration("exhaustive") + o.hang_grace,
        ),
        # the soak's case limit is its duration: it ends at the target count or the duration
        StressTest(
            "execution-soak",
            lambda ctx, **p: execution_soak(ctx, **p),
            lambda i, s, o: dict(duration=o.duration("execution-soak"), executions=o.soak_executions),
            *_timed("execution-soak", 1.0),
            weight=0.5,
        ),
    )
}


def worker_life_leaks(rows, threshold_mb: float) -> list[dict]:
    """The whole-life leak verdict: per worker process (``extra.worker_pid``), the RSS after
    its first case and after its last (``extra.rss_mb``, in journal order); every worker that
    grew by more than ``threshold_mb`` is returned (pid, first, last, growth, cases)."""
    life: dict[int, list[float]] = {}
    for r in rows:
        extra = getattr(r, "extra", None) or (r.get("extra") if isinstance(r, dict) else None) or {}
        pid, mb = extra.get("worker_pid"), extra.get("rss_mb")
        if pid is None or mb is None:
            continue
        life.setdefault(int(pid), []).append(float(mb))
    out = []
    for pid, mbs in sorted(life.items()):
        growth = mbs[-1] - mbs[0]
        if growth > threshold_mb:
            out.append(
                dict(
                    worker_pid=pid, rss_first_mb=mbs[0], rss_last_mb=mbs[-1], growth_mb=round(growth, 1), cases=len(mbs)
                )
            )
    return out


def run_case(ctx: CaseContext, test: str, params: dict) -> Verdict:
    """The sandbox target of every stress case."""
    return TESTS[test].run(ctx, **params)


def liveness_probe(ctx: CaseContext) -> Verdict:
    """The sandbox target run after every CRASH/HANG (DriverLivenessChecker)."""
    why = wl.probe(ctx.device, ctx)
    return Verdict.failure(why) if why else Verdict.success("probe model ran and matched")
