"""The stress runner behind ``nnconform stress``: plan, sandboxes, journal, resume, reports.

    nnconform stress --driver X --budget 30m [--tests a,b] [--workers N] [--seed S]
                     [--report-dir D] [--resume]

**Plan.**  A case is (test name, case index); its seed is derived from the run seed, the test
name and the index (:func:`case_seed`), and its parameters from that seed and the options
only, so a case replays alike whatever the budget.  The budget (x workers) is shared among the
tests by weight; each test gets as many cases as its nominal case duration fits (at least
one).  The first case of every test comes first (shortest first), so a short budget runs each
test once where it can; the other cases of all tests are interleaved.  Before the first case
the runner lays those first cases out on the workers by their nominal durations
(:func:`budget_fit`) and names the tests whose first case the budget is not expected to
reach, with the budget that would cover them all (terminal and ``run.json``).  A selected test that still gets no case
before the budget runs out is named at the end (terminal and report) and the exit status is
3, "incomplete" (unless a case failed: 1).  The plan, seed and options are written to
``run.json`` in the report directory before the first case starts.

**Journal.**  Every finished case is one :class:`nnconform.verdict.results.ResultRecord` (suite
``stress``, test id ``"<test>#<index>"``) appended to ``results.jsonl`` at once, in one write
(fsynced at most once a second) (contract 6).  Killing the runner, even with SIGKILL, loses only the
cases in flight; the workers notice their parent is gone and kill their process groups.
``--resume`` reads the manifest and the journal and runs exactly the planned cases that have
no row yet; its time budget is what is left of the original one, but never less than the
remaining cases' nominal time.  The CSV and HTML reports are written at the end and can be
rebuilt from the journal alone (``nnconform stress --report-only --report-dir D``).

**Failures.**  Every FAILURE / HANG / CRASH row carries the reason, the signal or exit code,
the tail of the worker's stderr (faulthandler's stack for a crash or hang), the breadcrumb
(what the case was running), a dumped model spec where the model is known (random graphs: the
graph and its inputs with the reference's outputs; workload tests: the example in flight), the
command that reruns exactly that case (``replay``), and for CRASH/HANG the liveness probe's
verdict (a fresh worker running a small known-good model).  A random graph's CRASH/HANG is
then blamed on one operation and shrunk (:func:`shrink_case`, nnconform.stress.shrink): the
row's ``blamed_operation`` / ``blamed_data_type``, its spec the smallest graph that still
fails, ``extra.shrunk`` how it was found.

Whole-life leak verdict: every row carries its worker's pid and RSS after the case; at the end
of a run every worker whose RSS grew by more than ``StressOptions.worker_leak_mb`` (512 MiB)
between its first and its last case gets a FAILURE row ``worker-life#<pid>`` (memory a
driver keeps across cases, which no single test's window sees).

**Random graphs.**  Cases build their graphs with :func:`nnconform.stress.random_models.random_model`,
which draws them from ``nnconform.generators`` (the random suite's builder) with the case's
seed; the runner, the case functions and spec dumps only use its ``model``, ``inputs`` and
``describe()``.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import shlex
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nnconform.isolation.sandbox import DEFAULT_MEM_LIMIT, Sandbox, SandboxError, SandboxResult
from nnconform.stress.progress import Progress
from nnconform.stress.tests import TESTS, StressOptions, worker_life_leaks
from nnconform.verdict.outcome import ExitStatus, Outcome
from nnconform.verdict.results import (
    CRASH,
    FAILURE,
    HANG,
    STRESS_OUTCOMES,
    SUCCESS,
    ResultRecord,
    ResultsWriter,
    read_results,
)

SUITE = "stress"
MANIFEST = "run.json"  # the artifact contract's run record (nnconform.artifacts)
LEGACY_MANIFEST = "stress-run.json"  # its name before; a run recorded under it can still resume
MANIFEST_FORMAT = "nnconform-stress-run"
CASE_TARGET = "nnconform.stress.tests:run_case"
PROBE_TARGET = "nnconform.stress.tests:liveness_probe"
SPEC_DIR = "specs"
EXIT_OK, EXIT_FAILED, EXIT_INCOMPLETE = int(ExitStatus.CLEAN), int(ExitStatus.FAILURES), int(ExitStatus.INCOMPLETE)
EXIT_INTERRUPTED = int(ExitStatus.INCOMPLETE)  # one table: an interrupted run is incomplete


class StressUsageError(Exception):
    """Bad arguments or an unusable report directory; one line for the user."""


def check_config(cfg: "StressConfig") -> None:
    """Reject a configuration that would run nothing (and so 'pass'): StressUsageError."""
    if not (isinstance(cfg.budget_s, (int, float)) and math.isfinite(cfg.budget_s) and cfg.budget_s > 0):
        raise StressUsageError(f"the budget must be a positive number of seconds, not {cfg.budget_s!r}")
    if cfg.workers is not None and cfg.workers < 1:
        raise StressUsageError(f"--workers must be at least 1, not {cfg.workers}")
    o = cfg.options
    for flag, v in (("--threads", o.threads), ("--processes", o.processes), ("--client-threads", o.client_threads)):
        if v < 1:
            raise StressUsageError(f"{flag} must be at least 1, not {v}")
    for name, sec in o.durations.items():
        if not (math.isfinite(sec) and sec >= 0):
            raise StressUsageError(f"--duration {name}={sec:g}: seconds must be a finite number >= 0")
    if not (math.isfinite(o.hang_grace) and o.hang_grace >= 0):
        raise StressUsageError(f"--hang-grace must be a finite number >= 0, not {o.hang_grace:g}")


def case_seed(run_seed: int, test: str, index: int) -> int:
    digest = hashlib.sha256(f"{run_seed}/{test}/{index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


@dataclass(frozen=True)
class Case:
    test: str
    index: int
    seed: int
    params: dict = field(hash=False, compare=False)

    @property
    def key(self) -> str:
        return f"{self.test}#{self.index}"


def plan_counts(tests: list[str], budget_s: float, workers: int, options: StressOptions) -> dict[str, int]:
    sel = [TESTS[t] for t in tests]
    total_w = sum(t.weight for t in sel)
    counts = {}
    for t in sel:
        share = budget_s * workers * t.weight / total_w
        cost = t.nominal_s(options) * (workers if t.exclusive else 1)
        counts[t.name] = max(1, int(share // max(cost, 1e-3)))
    return counts


def build_plan(counts: dict[str, int], run_seed: int, options: StressOptions) -> list[Case]:
    """The first case of every test first (shortest nominal case first, then in the given
    order), then the others interleaved evenly (case k of a test with n cases sits at
    (k+.5)/n), so a budget that runs out early has still run as many tests as it could."""
    order = {name: i for i, name in enumerate(counts)}
    slots = sorted(
        ((-1.0, TESTS[name].nominal_s(options)) if k == 0 else ((k + 0.5) / n, 0.0), order[name], name, k)
        for name, n in counts.items()
        for k in range(n)
    )
    cases = []
    for _, _, name, k in slots:
        s = case_seed(run_seed, name, k)
        cases.append(Case(name, k, s, TESTS[name].params(k, s, options)))
    return cases


def first_case_schedule(plan: list[Case], budget_s: float, workers: int, options: StressOptions) -> dict[str, float]:
    """When each test's first case is expected to start (seconds into the run): the plan's
    first cases laid out on ``workers`` slots by their nominal durations, as the scheduler
    hands them out (in plan order, each to the slot free first; an exclusive case waits for
    every slot and holds them all).  Only first cases: they all come before any second one."""
    free = [0.0] * max(1, workers)
    starts: dict[str, float] = {}
    for c in plan:
        if c.index != 0 or c.test in starts:
            continue
        t = TESTS[c.test]
        cost = t.nominal_s(options)
        if t.exclusive:
            start = max(free)
            free = [start + cost] * len(free)
        else:
            k = min(range(len(free)), key=free.__getitem__)
            start = free[k]
            free[k] = start + cost
        starts[c.test] = start
    return starts


def budget_fit(plan: list[Case], budget_s: float, workers: int, options: StressOptions) -> tuple[list[str], float]:
    """(tests whose first case is not expected to start within ``budget_s``, the time by which
    every selected test's first case is expected to have started), from nominal durations.
    A case that starts before the budget ends runs to its end, so a test is reached when its
    first case starts in time."""
    starts = first_case_schedule(plan, budget_s, workers, options)
    late = [name for name, start in starts.items() if start >= budget_s]
    return late, max(starts.values(), default=0.0)


def fit_line(late: list[str], needed_s: float, budget_s: float) -> str:
    return (
        f"the budget of {budget_s:.0f} s is not expected to reach the first case of: {', '.join(late)} "
        f"(the last test's first case is expected to start at about {math.ceil(needed_s)} s; "
        f"--budget {math.ceil(needed_s * 1.2) + 1}s leaves some margin)"
    )


def parse_case_key(key: str) -> tuple[str, int]:
    name, _, idx = key.partition("#")
    if name not in TESTS or not idx.isdigit():
        raise StressUsageError(f"bad case {key!r}: expected <test>#<index> with test one of {', '.join(TESTS)}")
    return name, int(idx)


# ---------------------------------------------------------------------------------------
# Manifest
# ---------------------------------------------------------------------------------------


def _now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def _write_json_atomic(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _time_used(manifest: dict, records: list[ResultRecord]) -> float:
    """Wall time the earlier sessions spent: per session, its start to its last row."""
    starts = [_dt.datetime.fromisoformat(s) for s in manifest.get("sessions", [])]
    used = 0.0
    stamps = sorted(_dt.datetime.fromisoformat(r.timestamp) for r in records if r.suite == SUITE)
    for i, s in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else None
        inside = [t for t in stamps if t >= s and (end is None or t < end)]
        if inside:
            used += (inside[-1] - s).total_seconds()
    return used


# ---------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------


@dataclass
class StressConfig:
    driver: str
    budget_s: float
    tests: list[str]
    workers: int = 1
    seed: int = 0
    report_dir: str = "nnconform-stress"
    options: StressOptions = field(default_factory=StressOptions)
    mem_limit: int = DEFAULT_MEM_LIMIT
    cases: list[str] | None = None  # run only these case keys (replay)
    probe_timeout: float = 30.0
    claims: bool = True  # ask the driver's claims before random-graph cases


class _Scheduler:
    """Hands cases to the slot threads; an exclusive case waits for the others to drain and
    runs alone."""

    def __init__(self, todo: list[Case], end: float):
        self.todo, self.end = list(todo), end
        self.cond = threading.Condition()
        self.in_flight = 0
        self.exclusive_running = False
        self.stopped = False

    def next(self) -> Case | None:
        with self.cond:
            while True:
                if self.stopped or not self.todo or time.monotonic() >= self.end:
                    return None
                c = self.todo[0]
                if self.exclusive_running or (TESTS[c.test].exclusive and self.in_flight):
                    self.cond.wait(0.5)
                    continue
                self.todo.pop(0)
                self.in_flight += 1
                self.exclusive_running = TESTS[c.test].exclusive
                return c

    def finished(self, c: Case) -> None:
        with self.cond:
            self.in_flight -= 1
            if TESTS[c.test].exclusive:
                self.exclusive_running = False
            self.cond.notify_all()

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify_all()


def replay_command(cfg: StressConfig, key: str) -> str:
    o, d = cfg.options, StressOptions()
    parts = [
        "nnconform",
        "stress",
        "--driver",
        cfg.driver,
        "--seed",
        str(cfg.seed),
        "--case",
        key,
        "--report-dir",
        f"{cfg.report_dir}-replay",
    ]
    for name, sec in sorted(o.durations.items()):
        parts += ["--duration", f"{name}={sec:g}"]
    for flag, attr in (
        ("--threads", "threads"),
        ("--processes", "processes"),
        ("--client-threads", "client_threads"),
        ("--hang-grace", "hang_grace"),
        ("--perf-threshold", "perf_threshold"),
        ("--leak-threshold-mb", "leak_threshold_mb"),
        ("--random-pause", "random_pause"),
        ("--soak-executions", "soak_executions"),
        ("--worker-leak-mb", "worker_leak_mb"),
        ("--exhaustive-shards", "exhaustive_shards"),
    ):
        if getattr(o, attr) != getattr(d, attr):
            parts += [flag, f"{getattr(o, attr):g}"]
    if o.exhaustive_tier != d.exhaustive_tier:
        parts += ["--exhaustive-tier", o.exhaustive_tier]
    if not cfg.claims:
        parts += ["--no-probe"]
    if cfg.mem_limit != DEFAULT_MEM_LIMIT:
        parts += ["--mem-limit", str(cfg.mem_limit)]
    return " ".join(shlex.quote(p) for p in parts)


def _spec_meta(
    cfg: StressConfig, case: Case, res: SandboxResult, path: Path, name: str, replay: str, **extra: Any
) -> dict[str, Any]:
    """The failure metadata of a stress case's spec file (the whole graph's, or the shrunk one's
    with ``shrunk_from``): the run and case seeds, the verdict, and both replay commands."""
    from nnconform.ir.spec import failure_meta
    from nnconform.ir.spec import replay_command as spec_replay

    return failure_meta(
        seed=case.seed,
        driver=cfg.driver,
        actual_outputs=[],
        criterion={"verdict": res.verdict, "reason": res.reason[:500]},
        replay=spec_replay(path, cfg.driver),
        example=name,
        suite=SUITE,
        test_id=case.key,
        run_seed=cfg.seed,
        stress_replay=replay,
        **extra,
    )


def _dump_spec(cfg: StressConfig, case: Case, res: SandboxResult, replay: str):
    """The model the case was running when it went wrong, as a spec file; (path, ops, types) or
    (None, [], []) when no single model is known (e.g. a client process died)."""
    from nnconform.ir.spec import SpecExample, SpecFile, dump_spec
    from nnconform.stress import workload as wl

    t = TESTS[case.test]
    model = inputs = expected = None
    ignored: tuple[bool, ...] = ()
    name = ""
    if t.random_graph:
        from nnconform.reference.executor import Executor
        from nnconform.stress.tests import graph_of

        rm = graph_of(case.params)
        model, inputs = rm.model, rm.inputs
        name = f"random_{case.params['graph']}_{rm.dtype}_seed{case.params['seed']}"
        ignored = rm.ignored
        try:
            expected = Executor(model).run(inputs)
        except Exception:  # the reference cannot run it: dump the graph without expected outputs
            expected = None
    else:
        import re

        m = re.search(r"example (\w+)", res.breadcrumb) or re.match(r"(?:thread \d+: )?(\w+): ", res.reason)
        if m and m.group(1) in wl._examples_by_name():
            ex = wl.example(m.group(1))
            model, inputs, expected, name = ex.model, list(ex.inputs), list(ex.outputs), ex.name
    if model is None:
        return None, [], []
    path = Path(cfg.report_dir) / SPEC_DIR / f"{case.test}-{case.index}.json"
    meta = _spec_meta(cfg, case, res, path, name, replay)
    assert inputs is not None  # set together with model
    examples = [SpecExample(name, list(inputs), list(expected), ignored)] if expected is not None else []
    try:
        dump_spec(SpecFile(model, examples, meta), path)
    except Exception as e:  # a spec that cannot be written must not lose the row
        return None, model.operation_names(), model.data_types() + [f"(spec not written: {e})"]
    return str(path), model.operation_names(), model.data_types()


CLAIMS_TARGET = "nnconform.stress.tests:claimed_cells"
CLAIMS_TIMEOUT_S = 300.0


def ask_claims(cfg: StressConfig, out) -> dict:
    """The driver's claimed (operation, rank) cells per data type, asked once in a sandbox
    worker (a driver that crashes or hangs on the question costs no case).  Empty, with a
    note, when the answer did not come: the random graphs then draw fp32 over everything."""
    with Sandbox(cfg.driver, mem_limit=cfg.mem_limit) as box:
        res = box.run(CLAIMS_TARGET, {}, timeout=CLAIMS_TIMEOUT_S, case_key="claims")
    claims = res.extra.get("claims") if res.verdict == SUCCESS else None
    if not isinstance(claims, dict) or not claims:
        print(
            f"nnconform stress: the driver's claims could not be asked ({res.verdict}: {res.reason[:200]}); "
            f"random graphs draw fp32 over every operation",
            file=out,
            flush=True,
        )
        return {}
    print(
        "nnconform stress: random graphs draw the driver's claimed cells: "
        + ", ".join(f"{t} {len(c)}" for t, c in claims.items()),
        file=out,
        flush=True,
    )
    return claims


def _dump_minimal(cfg: StressConfig, case: Case, res: SandboxResult, shrunk, replay: str) -> str | None:
    """The shrunk graph of a CRASH/HANG as a spec file of its own (what ``replay`` should run
    first); None when it cannot be written (the row keeps the full graph's spec)."""
    from nnconform.ir.spec import SpecExample, SpecFile, dump_spec
    from nnconform.reference.executor import Executor

    path = Path(cfg.report_dir) / SPEC_DIR / f"{case.test}-{case.index}-minimal.json"
    name = f"random_{case.params['graph']}_seed{case.params['seed']}_minimal_{shrunk.operation.lower()}"
    try:
        expected = Executor(shrunk.model).run(list(shrunk.inputs))
        meta = _spec_meta(cfg, case, res, path, name, replay, shrunk_from=shrunk.of)
        examples = [SpecExample(name, list(shrunk.inputs), list(expected), ())]
        dump_spec(SpecFile(shrunk.model, examples, meta), path)
    except Exception as e:  # noqa: BLE001 - a spec that cannot be written must not lose the row
        print(f"nnconform stress: the minimal spec of {case.key} was not written: {e}", file=sys.stderr)
        return None
    return str(path)


def shrink_case(cfg: StressConfig, box, case: Case, res: SandboxResult, left_s: float):
    """Blame a random-graph CRASH/HANG on one operation and shrink its graph
    (nnconform.stress.shrink), each candidate run in ``box``, within ``left_s`` seconds (what
    the run's budget has left).  (Shrunk or None, a note for the row)."""
    from nnconform.stress.shrink import SHRINK_BUDGET_S, SHRINK_TARGET, shrink
    from nnconform.stress.tests import graph_of

    timeout = TESTS[case.test].timeout_s(cfg.options)
    if left_s < timeout:
        return None, "not shrunk: the run's budget was spent"
    rm = graph_of(case.params)

    def try_keep(keep: list[int]) -> SandboxResult:
        return box.run(
            SHRINK_TARGET,
            {"test": case.test, "params": case.params, "keep": keep},
            timeout=timeout,
            case_key=f"{case.key}/shrink",
            seed=case.seed,
        )

    shrunk = shrink(rm.model, rm.inputs, res, try_keep, budget_s=min(SHRINK_BUDGET_S, left_s))
    if shrunk is None:
        return None, f"not attributed: the whole graph did not end in {res.verdict} again (a flaky failure?)"
    return shrunk, ""


def _record(
    cfg: StressConfig, case: Case, res: SandboxResult, liveness: SandboxResult | None, shrunk=None, shrink_note=""
) -> ResultRecord:
    replay = replay_command(cfg, case.key)
    spec_path, ops, types = None, [], []
    if res.verdict != SUCCESS:
        spec_path, ops, types = _dump_spec(cfg, case, res, replay)
    message = res.reason
    blamed_op = blamed_type = ""
    shrink_extra: dict = {}
    if shrink_note:
        shrink_extra["shrink"] = shrink_note
        message += f"; {shrink_note}"
    if shrunk is not None:
        from nnconform.isolation.childproc import signal_name

        full_ops = shrunk.of
        minimal = _dump_minimal(cfg, case, res, shrunk, replay)
        blamed_op, blamed_type = shrunk.operation, shrunk.data_type
        what = res.verdict + (f" {signal_name(res.signal)}" if res.signal is not None else "")
        shrink_extra = {
            "shrunk": shrunk.to_extra(),
            "blamed_index": shrunk.index,
            "blamed_how": shrunk.how,
            # the bucket's words: the same for every graph this defect crashes
            "blamed_message": f"{what} in {blamed_op} {blamed_type}",
        }
        message += (
            f"; blamed on {blamed_op} ({blamed_type}, operation {shrunk.index} of {full_ops}): "
            f"still {res.verdict} as a {len(shrunk.keep)}-operation graph"
            + ("" if shrunk.complete else " (shrink stopped at its time budget)")
        )
        if minimal:
            shrink_extra["full_spec"] = spec_path
            spec_path = minimal
            ops, types = shrunk.model.operation_names(), shrunk.model.data_types()
    params = dict(case.params)
    if params.get("cells") is not None:  # the claimed cells are the run's (manifest); count them here
        params["cells"] = len(params["cells"])
    extra = {
        "test": case.test,
        "index": case.index,
        "run_seed": cfg.seed,
        "params": params,
        "case_s": res.case_s,
        "worker_pid": res.worker_pid,
        "rss_mb": None if res.rss_bytes is None else round(res.rss_bytes / 2**20, 1),
        **res.extra,
    }
    if res.signal is not None:
        extra["signal"] = res.signal
    if res.exit_code is not None:
        extra["exit_code"] = res.exit_code
    if res.verdict != SUCCESS:
        extra["stderr_tail"] = res.stderr_tail
        extra["breadcrumb"] = res.breadcrumb
    if spec_path:
        from nnconform.ir.spec import replay_command as spec_replay

        extra["spec_replay"] = spec_replay(spec_path, cfg.driver)
    extra.update(shrink_extra)
    if isinstance(extra.get("rerun"), str):
        from nnconform.stress.tests import DRIVER

        extra["rerun"] = extra["rerun"].replace(DRIVER, shlex.quote(cfg.driver))
        message = message.replace(DRIVER, shlex.quote(cfg.driver))
    if liveness is not None:
        extra["liveness"] = {"verdict": liveness.verdict, "reason": liveness.reason}
        message += (
            "; liveness OK" if liveness.verdict == SUCCESS else f"; LIVENESS {liveness.verdict}: {liveness.reason}"
        )
    return ResultRecord(
        suite=SUITE,
        test_id=case.key,
        driver=cfg.driver,
        outcome=Outcome.parse(res.verdict),
        operations=ops,
        data_types=types,
        duration_s=res.duration_s,
        seed=case.seed,
        spec_path=spec_path,
        message=message,
        replay=replay,
        extra=extra,
        blamed_operation=blamed_op,
        blamed_data_type=blamed_type,
    )


def _worker_life_record(cfg: StressConfig, leak: dict) -> ResultRecord:
    """The whole-life leak verdict of one worker as a FAILURE row (test ``worker-life``)."""
    msg = (
        f"worker {leak['worker_pid']} grew from {leak['rss_first_mb']:.0f} MiB to {leak['rss_last_mb']:.0f} MiB "
        f"RSS over its {leak['cases']} case(s) (+{leak['growth_mb']:.0f} MiB, limit "
        f"{cfg.options.worker_leak_mb:g} MiB): memory the driver keeps across cases"
    )
    return ResultRecord(
        suite=SUITE,
        test_id=f"worker-life#{leak['worker_pid']}",
        driver=cfg.driver,
        outcome=FAILURE,
        operations=[],
        data_types=[],
        duration_s=0.0,
        seed=cfg.seed,
        spec_path=None,
        message=msg,
        replay="",
        extra={"test": "worker-life", **leak},
    )


def verdict_table(records: list[ResultRecord], tests: list[str] | None = None) -> str:
    by: dict[str, Counter[str]] = {}
    for r in records:
        if r.suite == SUITE:
            by.setdefault(r.extra.get("test", r.test_id.partition("#")[0]), Counter())[r.outcome] += 1
    names = tests or sorted(by)
    w = max([len(n) for n in names] + [4])
    head = f"{'test':{w}s} " + " ".join(f"{o:>7s}" for o in STRESS_OUTCOMES) + "   total"
    lines = [head, "-" * len(head)]
    total: Counter[str] = Counter()
    for n in names:
        c = by.get(n, Counter())
        total.update(c)
        lines.append(
            f"{n:{w}s} "
            + " ".join(f"{c[o]:7d}" for o in STRESS_OUTCOMES)
            + f" {sum(c.values()):7d}"
            + ("   not run" if not c else "")
        )
    lines.append(f"{'all':{w}s} " + " ".join(f"{total[o]:7d}" for o in STRESS_OUTCOMES) + f" {sum(total.values()):7d}")
    return "\n".join(lines)


def planned_tests(manifest: dict) -> list[str]:
    """The tests a run was asked to run (with --case: the tests of those cases)."""
    if manifest.get("cases"):
        return list(dict.fromkeys(k.partition("#")[0] for k in manifest["cases"]))
    return list(manifest.get("tests", []))


def tests_not_run(manifest: dict, records: list[ResultRecord]) -> list[str]:
    """Selected tests with no row at all: the budget ran out before their first case."""
    ran = {r.extra.get("test", r.test_id.partition("#")[0]) for r in records if r.suite == SUITE}
    return [t for t in planned_tests(manifest) if t not in ran]


def not_run_line(missing: list[str]) -> str:
    return (
        f"not run: {', '.join(missing)} (the budget ran out before their first case; "
        f"--resume or a larger --budget runs them)"
    )


def rebuild_reports(report_dir: str | os.PathLike, meta: dict | None = None):
    from nnconform.artifacts import write_common
    from nnconform.reports import RESULTS_FILE

    manifest = {}
    mpath = Path(report_dir) / MANIFEST
    if mpath.exists():
        manifest = json.loads(mpath.read_text())
    m = {
        "driver": manifest.get("driver"),
        "seed": manifest.get("seed"),
        "budget_s": manifest.get("budget_s"),
        "workers": manifest.get("workers"),
        "tests": ", ".join(manifest.get("tests", [])),
    }
    journal = Path(report_dir) / RESULTS_FILE
    records = read_results(journal) if journal.exists() else []
    if manifest and journal.exists():
        missing = tests_not_run(manifest, records)
        m["tests not run"] = not_run_line(missing) if missing else "none: every selected test ran"
    fit = manifest.get("first_cases") or {}
    if fit.get("not_expected"):
        m["budget plan"] = fit_line(fit["not_expected"], fit.get("needed_s", 0.0), fit.get("budget_s", 0.0))
    m.update(meta or {})
    m["status"] = m.get("status") or manifest.get("status") or "complete"
    return write_common(report_dir, records, m, title="nnconform stress report")


def run_stress(cfg: StressConfig, resume: bool = False, out=None, err=None, box_factory=None) -> int:
    """Run (or resume) a stress run; returns the exit status: 0 every case SUCCESS, 1 a case
    was not, 3 none failed but a selected test never ran (budget too short), 130 interrupted,
    2 no worker could start.  Raises StressUsageError for a configuration that would run
    nothing.  ``box_factory`` makes a slot's sandbox (``--cluster``: one that runs the cases
    on the cluster's workers; its rows are fsynced one by one)."""
    from nnconform.reports import RESULTS_FILE

    out = out or sys.stdout
    err = err or sys.stderr
    rdir = Path(cfg.report_dir)
    mpath = rdir / MANIFEST
    journal = rdir / RESULTS_FILE
    if resume:
        if not mpath.exists() and (rdir / LEGACY_MANIFEST).exists():
            mpath = rdir / LEGACY_MANIFEST
        if not mpath.exists():
            raise StressUsageError(f"--resume: {mpath} not found (nothing to resume)")
        manifest = json.loads(mpath.read_text())
        if manifest.get("format") != MANIFEST_FORMAT:
            raise StressUsageError(f"--resume: {mpath} is not a stress run manifest")
        cfg.driver, cfg.seed, cfg.budget_s = manifest["driver"], manifest["seed"], manifest["budget_s"]
        cfg.tests, cfg.workers = manifest["tests"], manifest["workers"] if cfg.workers is None else cfg.workers
        cfg.options = StressOptions.from_dict(manifest["options"])
        cfg.mem_limit, cfg.cases = manifest["mem_limit"], manifest.get("cases")
        counts = manifest["plan"]
        check_config(cfg)
    else:
        check_config(cfg)
        if journal.exists() and journal.stat().st_size and not cfg.cases:
            raise StressUsageError(
                f"{journal} already holds results: use --resume to continue that run, or another --report-dir"
            )
        if cfg.cases:
            counts = {}
            for key in cfg.cases:
                name, idx = parse_case_key(key)
                counts[name] = max(counts.get(name, 0), idx + 1)
            cfg.tests = list(counts)
        else:
            counts = plan_counts(cfg.tests, cfg.budget_s, cfg.workers, cfg.options)
        if cfg.claims and not cfg.options.claims and any(TESTS[t].random_graph for t in cfg.tests):
            cfg.options.claims = ask_claims(cfg, out)
        cfg.options.run_seed = cfg.seed
        manifest = {
            "format": MANIFEST_FORMAT,
            "version": 1,
            "command": "stress",
            "driver": cfg.driver,
            "seed": cfg.seed,
            "budget_s": cfg.budget_s,
            "tests": cfg.tests,
            "workers": cfg.workers,
            "options": cfg.options.to_dict(),
            "mem_limit": cfg.mem_limit,
            "plan": counts,
            "cases": cfg.cases,
            "sessions": [],
        }
    # cases derive their parameters from the seed (the exhaustive test's shards): the options
    # carry it, and the manifest keeps it for --resume
    cfg.options.run_seed = cfg.seed
    plan = build_plan(counts, cfg.seed, cfg.options)
    if cfg.cases:
        wanted = set(cfg.cases)
        plan = [c for c in plan if c.key in wanted]

    rdir.mkdir(parents=True, exist_ok=True)
    records = read_results(journal) if journal.exists() else []
    done = {r.test_id for r in records if r.suite == SUITE}
    used = _time_used(manifest, records) if resume else 0.0
    todo = [c for c in plan if c.key not in done]
    remaining_nominal = sum(TESTS[c.test].nominal_s(cfg.options) for c in todo) / max(1, cfg.workers)
    budget = max(cfg.budget_s - used, remaining_nominal) if resume else cfg.budget_s
    manifest["sessions"] = manifest.get("sessions", []) + [_now_iso()]
    if not cfg.cases:
        late, needed = budget_fit(todo, budget, cfg.workers, cfg.options)
        manifest["first_cases"] = {"budget_s": budget, "needed_s": round(needed, 1), "not_expected": late}
    _write_json_atomic(mpath, manifest)

    print(
        f"nnconform stress: driver {cfg.driver}, seed {cfg.seed}, {len(plan)} planned cases "
        f"({', '.join(f'{k} {v}' for k, v in counts.items())}), {cfg.workers} worker(s), "
        f"budget {budget:.0f} s"
        + (f"; resuming: {len(plan) - len(todo)} done, {len(todo)} to run, {used:.0f} s used before" if resume else ""),
        file=out,
        flush=True,
    )
    print(f"nnconform stress: journal {journal}", file=out, flush=True)
    if not cfg.cases:
        late, needed = budget_fit(todo, budget, cfg.workers, cfg.options)
        if late:
            # said before the first case: a nightly job learns now which budget covers every test
            print(f"nnconform stress: warning: {fit_line(late, needed, budget)}", file=out, flush=True)

    sched = _Scheduler(todo, time.monotonic() + budget)
    progress = Progress(len(plan), budget, done=len(plan) - len(todo), stream=err)
    writer = ResultsWriter(journal)
    fatal: list[str] = []
    aborting = threading.Event()
    sandboxes: list[Sandbox] = []
    probe_timeout = cfg.probe_timeout + cfg.options.hang_grace

    written: list[ResultRecord] = []

    def slot(n: int) -> None:
        box = box_factory() if box_factory is not None else Sandbox(cfg.driver, mem_limit=cfg.mem_limit)
        sandboxes.append(box)
        try:
            while (case := sched.next()) is not None:
                try:
                    res = box.run(
                        CASE_TARGET,
                        {"test": case.test, "params": case.params},
                        timeout=TESTS[case.test].timeout_s(cfg.options),
                        case_key=case.key,
                        seed=case.seed,
                    )
                    live = shrunk = None
                    shrink_note = ""
                    if res.verdict in (CRASH, HANG) and not aborting.is_set():
                        live = box.run(PROBE_TARGET, {}, timeout=probe_timeout, case_key=f"{case.key}/liveness")
                        if TESTS[case.test].random_graph and not aborting.is_set():
                            progress.note(f"{res.verdict} {case.key}: shrinking its random graph")
                            shrunk, shrink_note = shrink_case(cfg, box, case, res, sched.end - time.monotonic())
                except SandboxError as e:
                    fatal.append(f"cannot start a worker for driver '{cfg.driver}': {e}")
                    sched.stop()
                    sched.finished(case)
                    return
                if aborting.is_set():  # interrupted: this case is not done, --resume reruns it
                    sched.finished(case)
                    return
                rec = _record(cfg, case, res, live, shrunk, shrink_note)
                writer.write(rec)
                if box_factory is not None:
                    writer.sync()
                written.append(rec)
                sched.finished(case)
                progress.case_done(res.verdict)
                if res.verdict != SUCCESS:
                    progress.note(
                        f"{res.verdict} {case.key}: {rec.message[:300]}\n"
                        f"    replay: {rec.replay}" + (f"\n    spec: {rec.spec_path}" if rec.spec_path else "")
                    )
        finally:
            box.close()

    threads = [
        threading.Thread(target=slot, args=(n,), name=f"stress-slot-{n}", daemon=True) for n in range(cfg.workers)
    ]
    for t in threads:
        t.start()
    interrupted = False
    try:
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(timeout=0.5)
            progress.tick()
    except KeyboardInterrupt:
        interrupted = True
        aborting.set()
        sched.stop()
        for box in list(sandboxes):
            w = getattr(box, "_worker", None)
            if w is not None:
                w.kill_group()
        for t in threads:
            t.join(timeout=10)
    progress.finish()
    if not interrupted:
        for leak in worker_life_leaks(written, cfg.options.worker_leak_mb):
            writer.write(_worker_life_record(cfg, leak))
    writer.close()

    if fatal:
        print(f"nnconform: error: {fatal[0]}", file=err)
        manifest.update(status=f"failed: {fatal[0]}", exit_status=int(ExitStatus.USAGE))
        _write_json_atomic(mpath, manifest)
        return int(ExitStatus.USAGE)
    records = read_results(journal)
    stress_rows = [r for r in records if r.suite == SUITE]
    keys = [r.test_id for r in stress_rows]
    left = [c.key for c in plan if c.key not in set(keys)]
    print("\n" + verdict_table(stress_rows, cfg.tests), file=out)
    missing = tests_not_run(manifest, stress_rows)
    if interrupted:
        print(
            f"\ninterrupted: {len(left)} planned case(s) not done; rerun with --resume --report-dir {cfg.report_dir}",
            file=out,
        )
    elif left:
        print(f"\nbudget exhausted: {len(left)} planned case(s) not started; --resume runs them", file=out)
    else:
        print(f"\nall {len(plan)} planned cases done", file=out)
    if missing:
        print(not_run_line(missing), file=out)
    code = ExitStatus.of([r.outcome for r in stress_rows], complete=not (interrupted or missing))
    status = (
        f"interrupted after {len(keys)} of {len(plan)} cases"
        if interrupted
        else f"incomplete: not run: {', '.join(missing)}"
        if missing
        else f"complete: {len(keys)} of {len(plan)} cases" + ("" if not left else f" ({len(left)} not started)")
    )
    manifest.update(status=status, exit_status=int(code))
    _write_json_atomic(rdir / MANIFEST, manifest)
    csv_path, html_path = rebuild_reports(rdir)
    print(f"reports: {csv_path}  {html_path}  {rdir / 'summary.json'}", file=out)
    return int(code)


__all__ = [
    "StressConfig",
    "StressUsageError",
    "run_stress",
    "rebuild_reports",
    "case_seed",
    "build_plan",
    "plan_counts",
    "verdict_table",
    "replay_command",
    "Case",
    "TESTS",
    "MANIFEST",
    "check_config",
    "tests_not_run",
    "budget_fit",
    "EXIT_INCOMPLETE",
]
