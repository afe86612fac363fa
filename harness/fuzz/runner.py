"""The runner behind ``nnconform fuzz``: cases through a driver host, buckets, shrinking,
journal, resume and reports.

    nnconform fuzz --driver X --budget 10m [--seed S] [--report-dir D] [--resume]
    nnconform fuzz --driver X --cases 300 --seed 1        (a fixed amount of work, for CI)

**Cases.**  Case ``i`` of a run is drawn by :class:`nnconform.fuzz.steer.Steering` from the run
seed and ``i``: the first ten cases are one of each kind (the plan), later ones are drawn
away from the known buckets' triggers (a draw predicted to repeat a known bucket is mostly put
back).  The steering learns only from the run's findings, which the journal keeps, so the
same seed and driver give the same cases, whatever the machine.  Once a HANG bucket is known,
every call is first bounded by ``repeat_hang_timeout``: a repeat of a known hang costs that
much; any other hang under it is run again under the full bound (:func:`run_bounded`).
Each case goes through the driver host exactly as ``nnconform replay`` runs a spec example
that must fail (:func:`nnconform.verdict.runner.run_case` with ``expect_failure``): the support query,
then prepare and execute.  A clean error anywhere is a success; so is a model the driver
accepts.  What counts:

- CRASH: the driver host died (signal or exit); HANG: a call outlived ``--call-timeout``;
- OOM: the driver raised MemoryError (the host runs under ``--mem-limit`` RLIMIT_AS) or was
  SIGKILLed (the kernel's OOM killer);
- SLOW: the case finished but took longer than ``--slow`` seconds.

**Buckets.**  A finding's bucket key is its verdict, signal (or exception), and the top three
driver frames of the faulthandler stack the host left (file and function, no line numbers).
Without driver frames (a native crash, an OOM, a slow case) the sorted operation types of the
case stand in for them.  The first case of a new bucket is shrunk at once (greedily: keep one
operation, drop operations, inputs, outputs and unreferenced operands, cut constants; a
candidate is kept only if it lands in the same bucket) and written as a spec file that
``nnconform replay SPEC --driver X`` reproduces.

**Journal.**  ``run.json`` (seed, driver, options) is written before the first case;
``fuzz-journal.jsonl`` gets a line per finding and per new bucket, and a progress line (next
case index, elapsed time, counts) every two seconds, each flushed and fsynced.  ``--resume``
continues from the last progress line with what is left of the budget; the few cases after
it are run again (their findings are not counted twice).  At the end (and again on resume)
the artifact contract's files are written from the journal (nnconform.artifacts): one
results row per bucket, ``summary.json``, ``report.html`` (the bucket table) and, beside them,
``fuzz-report.json`` with every bucket's details; the page and ``summary.json`` (``fuzz``)
say how the budget was spent (clean cases, new buckets, shrinking, repeats, buckets over time).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import html
import json
import os
import re
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np

from nnconform.fuzz.generate import case_features, make_case, operation_names
from nnconform.fuzz.steer import Steering, plan
from nnconform.ir import Model, Subgraph
from nnconform.isolation.childproc import fault_blocks, is_driver_frame, signal_name
from nnconform.verdict.outcome import ExitStatus, Outcome

if TYPE_CHECKING:
    from nnconform.driver import Device

MANIFEST, JOURNAL = "run.json", "fuzz-journal.jsonl"
LEGACY_MANIFEST = "fuzz-run.json"  # the run record's name before the artifact contract
REPORT_JSON, REPORT_HTML, SPEC_DIR = "fuzz-report.json", "report.html", "specs"
MANIFEST_FORMAT = "nnconform-fuzz-run"
VERDICTS = ("CRASH", "HANG", "OOM", "SLOW")
EXIT_OK, EXIT_FOUND, EXIT_INTERRUPTED = (int(ExitStatus.CLEAN), int(ExitStatus.FAILURES), int(ExitStatus.INCOMPLETE))
# A bucket's row in results.jsonl: a memory-limit kill is a crash of the driver host; a case
# slower than --slow computed, but not as a driver may (a failure, not a crash).
ROW_OUTCOME = {"CRASH": Outcome.CRASH, "HANG": Outcome.HANG, "OOM": Outcome.CRASH, "SLOW": Outcome.FAIL}
PROGRESS_EVERY_S = 2.0
HOST_RESTART_S = 2.0  # a generous driver host restart, for the plan's worst case


class FuzzUsageError(Exception):
    """Bad arguments or an unusable report directory; one line for the user."""


@dataclass
class FuzzConfig:
    driver: str
    report_dir: Path
    seed: int
    budget_s: float | None = None  # wall-clock budget (the CLI's --budget)
    max_cases: int | None = None  # or a number of cases (CI: independent of speed)
    call_timeout: float = 5.0
    mem_limit: int = 1 << 30
    slow_s: float = 3.0
    shrink_attempts: int = 80
    shrink_hang_timeout: float = 1.0  # a hang is endless: shrink candidates need not wait long
    # the time one new bucket's shrinking may take (None: a twentieth of --budget, at least 5 s;
    # no limit with --cases, whose runs do a fixed amount of work)
    shrink_budget_s: float | None = None
    # once a HANG bucket is known, every call is first bounded by this: a repeat of a known
    # hang costs this much; a hang under it that is not a known one is run again with the full
    # call timeout before it counts (so a slow call is never taken for a new hang)
    repeat_hang_timeout: float = 1.0
    steer: bool = True  # draw away from the known buckets' triggers (nnconform.fuzz.steer)

    def options(self) -> dict:
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(self).items()}


def case_seed(run_seed: int, index: int) -> int:
    h = hashlib.sha256(f"nnconform-fuzz:{run_seed}:{index}".encode()).digest()
    return int.from_bytes(h[:8], "little") >> 1


# ---- one case ----------------------------------------------------------------------------


@dataclass
class Finding:
    verdict: str
    key: str
    stage: str
    message: str
    signal: str
    frames: list
    operations: list
    duration_s: float


def driver_frames(stderr_tail: str, limit: int = 3) -> list[str]:
    """The top driver frames of the last faulthandler dump in ``stderr_tail``: the first
    thread block (most recent call first; the crashing thread's first) with frames outside the
    host loop and the standard library's thread machinery, as ``file:function``."""
    # the host's stderr holds this incident's dump (a crashed or hung host is replaced by a
    # fresh one with a fresh stderr file); the innermost driver frames come first in a block
    for block in fault_blocks(stderr_tail):
        frames = [f"{os.path.basename(f)}:{fn}" for f, fn in block if is_driver_frame(f)]
        if frames:
            return frames[:limit]
    return []


class _Watch:
    """The device as run_case sees it, remembering the last exception a driver call raised
    (run_case keeps only its message; the bucket wants where a MemoryError came from)."""

    def __init__(self, device):
        self.device, self.last = device, None

    def _call(self, fn, *a, **kw):
        try:
            return fn(*a, **kw)
        except BaseException as e:
            self.last = e
            raise

    def supported_operations(self, model):
        return self._call(self.device.supported_operations, model)

    def prepare(self, model, **kw):
        return _WatchPrepared(self._call(self.device.prepare, model, **kw), self)


class _WatchPrepared:
    def __init__(self, pm, watch: _Watch):
        self.pm, self.watch = pm, watch

    def execute(self, request, **kw):
        return self.watch._call(self.pm.execute, request, **kw)

    def release(self):
        return self.pm.release()


def _where(e) -> list[str]:
    where = getattr(e, "remote_where", "") or ""
    if not where and isinstance(e, BaseException) and e.__traceback__ is not None:
        import traceback

        tb = traceback.extract_tb(e.__traceback__)
        where = f"{tb[-1].filename}:{tb[-1].lineno}" if tb else ""
    return [os.path.basename(where)] if where else []


def classify(outcome, slow_s: float, model: Model, last_error=None) -> Finding | None:
    """A Finding for a run_case outcome that counts, else None."""
    ops = operation_names(model)
    msg = outcome.message or ""
    details = outcome.details or {}
    if outcome.outcome in ("CRASH", "HANG"):
        sig = details.get("signal")
        signame = signal_name(sig) if sig else (f"exit {details['exit_code']}" if "exit_code" in details else "")
        verdict = outcome.outcome
        if verdict == "CRASH" and signame == "SIGKILL":
            verdict = "OOM"  # the kernel's OOM killer (nobody else kills the host)
        frames = driver_frames(str(details.get("fault_dump") or details.get("stderr_tail", "")))
    elif outcome.outcome == "FAIL" and re.search(r"driver raised in \w+: MemoryError", msg):
        verdict, signame, frames = "OOM", "MemoryError", _where(last_error)
    elif outcome.duration_s > slow_s:
        verdict, signame, frames = "SLOW", "", []
    else:
        return None
    # without driver frames the operation types stand in (not for OOM: a runaway allocation
    # is one bug whatever operations the model had; its stage says where it happened)
    where = frames if frames else [f"stage:{outcome.stage}", *([] if verdict == "OOM" else ops)]
    key = "|".join([verdict, signame, *where])
    return Finding(verdict, key, outcome.stage, msg[:500], signame, frames, ops, round(outcome.duration_s, 4))


def run_one(device, model: Model, inputs: list, slow_s: float) -> Finding | None:
    from nnconform.verdict.runner import run_case

    watch = _Watch(device)
    isolated = getattr(device, "isolated", False)
    before = len(device.incidents) if isolated else 0
    # cast: _Watch stands in for the device with the calls run_case makes (duck-typed)
    out = run_case(cast("Device", watch), model, inputs, [], expect_failure=True)
    if isolated:
        device.end_case()
        if len(device.incidents) > before:
            # the host died: start its successor now, so that its start-up time is not
            # charged to the next case (it would look SLOW)
            device.liveness()
    return classify(out, slow_s, model, watch.last)


def run_bounded(device, model: Model, inputs: list, cfg: "FuzzConfig", hang_keys) -> tuple[Finding | None, bool]:
    """run_one, with every call bounded by ``cfg.repeat_hang_timeout`` once a HANG bucket is
    known (``hang_keys``): (finding, whether it is a known hang found under the short bound).
    A hang under the short bound that is not a known one is run again under the full bound,
    whose verdict stands."""
    full = getattr(device, "call_timeout", None)
    if not hang_keys or full is None or cfg.repeat_hang_timeout >= full:
        return run_one(device, model, inputs, cfg.slow_s), False
    device.call_timeout = cfg.repeat_hang_timeout
    try:
        f = run_one(device, model, inputs, cfg.slow_s)
    finally:
        device.call_timeout = full
    if f is None or f.verdict != "HANG":
        return f, False
    if f.key in hang_keys:
        return f, True
    return run_one(device, model, inputs, cfg.slow_s), False


# ---- shrinking ---------------------------------------------------------------------------


def _with_main(model: Model, **kw) -> Model:
    return dataclasses.replace(model, main=dataclasses.replace(model.main, **kw))


def _compact(model: Model, inputs: list) -> tuple[Model, list] | None:
    """Drop operands nothing refers to, renumbering the rest (out-of-range indexes stay as
    they are, shifted past the end so they stay out of range)."""
    sg = model.main
    n = len(sg.operands)
    used = sorted(
        {i for op in sg.operations for i in (*op.inputs, *op.outputs) if 0 <= i < n}
        | {i for i in (*sg.input_indexes, *sg.output_indexes) if 0 <= i < n}
    )
    if len(used) == n:
        return None
    new = {old: k for k, old in enumerate(used)}
    m = len(used)

    def remap(i: int) -> int:
        return new[i] if i in new else (i if i < 0 else m + (i - n) if i >= n else m)

    ops = tuple(
        dataclasses.replace(op, inputs=tuple(map(remap, op.inputs)), outputs=tuple(map(remap, op.outputs)))
        for op in sg.operations
    )
    main = Subgraph(
        tuple(sg.operands[i] for i in used),
        ops,
        tuple(map(remap, sg.input_indexes)),
        tuple(map(remap, sg.output_indexes)),
        sg.name,
    )
    return dataclasses.replace(model, main=main), inputs


def _candidates(model: Model, inputs: list):
    sg = model.main
    ops = sg.operations
    if len(ops) > 1:
        for j in range(len(ops)):
            yield _with_main(model, operations=(ops[j],)), inputs
        for j in range(len(ops)):
            yield _with_main(model, operations=ops[:j] + ops[j + 1 :]), inputs
    for k in range(len(sg.input_indexes)):
        yield (
            _with_main(model, input_indexes=sg.input_indexes[:k] + sg.input_indexes[k + 1 :]),
            inputs[:k] + inputs[k + 1 :],
        )
    for k in range(len(sg.output_indexes)):
        yield _with_main(model, output_indexes=sg.output_indexes[:k] + sg.output_indexes[k + 1 :]), inputs
    c = _compact(model, inputs)
    if c is not None:
        yield c
    for k, o in enumerate(sg.operands):
        v = o.value
        if isinstance(v, np.ndarray) and v.size > 1:
            operands = list(sg.operands)
            operands[k] = dataclasses.replace(o, value=np.ascontiguousarray(v.reshape(-1)[:1]))
            yield _with_main(model, operands=tuple(operands)), inputs
        if o.name:
            operands = list(sg.operands)
            operands[k] = dataclasses.replace(o, name="")
            yield _with_main(model, operands=tuple(operands)), inputs
    for k, x in enumerate(inputs):
        if isinstance(x, np.ndarray) and x.size > 1 and x.ndim >= 1:
            yield model, inputs[:k] + [np.ascontiguousarray(x.reshape(-1)[:1])] + inputs[k + 1 :]


def _size(model: Model, inputs: list) -> tuple:
    sg = model.main
    consts = sum(
        int(np.asarray(o.value).size) for o in sg.operands if o.value is not None and not isinstance(o.value, int)
    )
    ins = sum(int(np.asarray(x).size) for x in inputs if x is not None)
    return (
        len(sg.operations),
        len(sg.operands),
        len(sg.input_indexes) + len(sg.output_indexes),
        consts + ins,
        sum(bool(o.name) for o in sg.operands),
    )


def spec_problem(model: Model, inputs: list) -> str | None:
    """Why this case cannot be written as a spec file that loads back (None: it can)."""
    from nnconform.errors import SpecError
    from nnconform.ir.spec import SpecExample, SpecFile, dumps_spec, loads_spec

    try:
        loads_spec(dumps_spec(SpecFile(model, [SpecExample("fuzz", list(inputs), [], (), True)], {})), validate=False)
    except (SpecError, ValueError, TypeError, OverflowError, KeyError) as e:
        return str(e)[:200] or type(e).__name__
    return None


def _fit_value(o):
    """The operand with a constant value the spec format can hold: sized to its dimensions
    (small ones) or no value at all."""
    import dataclasses as dc

    from nnconform.ir import Lifetime

    if isinstance(o.value, int) or o.value is None:
        if o.lifetime == Lifetime.SUBGRAPH and not isinstance(o.value, int):
            return dc.replace(o, value=0)
        return o
    if o.lifetime == Lifetime.SUBGRAPH:
        return dc.replace(o, value=0)
    dims = o.dimensions
    n = 1
    for d in dims:
        n *= d
    v = np.asarray(o.value).reshape(-1)
    if n > (1 << 16) or any(d < 0 for d in dims):
        return dc.replace(o, value=None, lifetime=Lifetime.TEMPORARY_VARIABLE)
    v = np.resize(v, n) if v.size else np.zeros(n, v.dtype)
    if v.dtype == np.bool_ or o.info.dtype == np.bool_:
        v = v.astype(np.uint8).view(np.uint8) != 0  # random bytes are not all 0/1
    return dc.replace(o, value=v.reshape(dims) if dims else v.reshape(()) if v.size == 1 else v)


def _no_negative_dims(o):
    return o.with_dims([d if d >= 0 else 1 for d in o.dimensions])


def _no_constant(o):
    from nnconform.ir import Lifetime

    return dataclasses.replace(o, value=None, lifetime=Lifetime.TEMPORARY_VARIABLE) if o.value is not None else o


# what makes a case representable as a spec file, mildest first, applied one after another
REPAIRS = (_no_negative_dims, lambda o: _fit_value_safe(o), _no_constant)


def _fit_value_safe(o):
    try:
        return _fit_value(o)
    except (KeyError, ValueError, TypeError):
        from nnconform.ir import Lifetime

        return dataclasses.replace(o, value=None, lifetime=Lifetime.TEMPORARY_VARIABLE)


def _zeros_for(sg: Subgraph, k: int) -> np.ndarray:
    """Zeros a spec can hold for main input ``k``: its operand's dtype, its shape when that is
    a small valid one, else one element."""
    from nnconform.fuzz.generate import _dtype

    o = sg.operands[k] if 0 <= k < len(sg.operands) else None
    dt = _dtype(int(o.type)) if o is not None and isinstance(o.type, int) else None
    if o is None or dt is None:
        return np.zeros(1, np.float32)
    dims = tuple(o.dimensions)
    ok = all(0 < d <= 64 for d in dims) and int(np.prod(dims or (1,))) <= 4096
    return np.zeros(dims if ok else (1,), dt)


def make_replayable(device, model: Model, inputs: list, finding: Finding, cfg: FuzzConfig) -> tuple[Model, list, int]:
    """Apply repairs (one after another, each kept only if the case stays in its bucket)
    until the case can be written as a spec file."""
    tried = 0
    for repair in REPAIRS:
        if spec_problem(model, inputs) is None:
            break
        cand = _with_main(model, operands=tuple(repair(o) for o in model.main.operands))
        tried += 1
        got = run_one(device, cand, inputs, cfg.slow_s)
        if got is not None and got.key == finding.key:
            model = cand
    if spec_problem(model, inputs) is not None:
        # inputs the spec cannot hold (a value of the wrong dtype for its operand): zeros in
        # the operand's own storage type
        fixed = [None if x is None else _zeros_for(model.main, k) for k, x in zip(model.main.input_indexes, inputs)]
        tried += 1
        got = run_one(device, model, fixed, cfg.slow_s)
        if got is not None and got.key == finding.key:
            inputs = fixed
    return model, inputs, tried


def shrink_deadline(cfg: FuzzConfig) -> float | None:
    """When a new bucket's shrinking must stop (time.monotonic()), or None."""
    cap = cfg.shrink_budget_s
    if cap is None and cfg.budget_s is not None:
        cap = max(5.0, cfg.budget_s / 20)
    return None if cap is None else time.monotonic() + cap


def shrink(
    device, model: Model, inputs: list, finding: Finding, cfg: FuzzConfig, log=None, deadline: float | None = None
) -> tuple[Model, list, int]:
    """The smallest (model, inputs) found that still lands in ``finding``'s bucket, and the
    number of candidates tried (stopping at ``deadline``, a time.monotonic() value)."""
    tried = 0
    saved = getattr(device, "call_timeout", None)
    if finding.verdict == "HANG" and saved is not None:
        device.call_timeout = min(saved, cfg.shrink_hang_timeout)
    replayable = spec_problem(model, inputs) is None
    try:
        improved = True
        while improved and tried < cfg.shrink_attempts:
            improved = False
            for cand, cand_inputs in _candidates(model, inputs):
                if tried >= cfg.shrink_attempts or (deadline is not None and time.monotonic() >= deadline):
                    improved = False
                    break
                if _size(cand, cand_inputs) >= _size(model, inputs):
                    continue
                if replayable and spec_problem(cand, cand_inputs) is not None:
                    continue  # never trade a replayable case for a smaller one that is not
                tried += 1
                got = run_one(device, cand, cand_inputs, cfg.slow_s)
                if got is not None and got.key == finding.key:
                    model, inputs, improved = cand, cand_inputs, True
                    break
    finally:
        if saved is not None:
            device.call_timeout = saved
    return model, inputs, tried


def dump_bucket_spec(
    cfg: FuzzConfig, bucket_id: str, model: Model, inputs: list, finding: Finding, index: int, seed: int
) -> tuple[str, str]:
    """Write the bucket's minimal spec; (path, replay command).  A spec the loader would refuse
    (e.g. a negative dimension, which the spec format cannot hold) is not written: ("", why)."""
    from nnconform.errors import SpecError
    from nnconform.ir.spec import SpecExample, SpecFile, dump_spec, load_spec, replay_command

    d = Path(cfg.report_dir) / SPEC_DIR
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"fuzz-{bucket_id}.json"
    from nnconform import __version__

    meta = {
        "driver": cfg.driver,
        "harness_version": __version__,
        "seed": int(seed),
        "fuzz_run_seed": int(cfg.seed),
        "fuzz_case": int(index),
        "verdict": finding.verdict,
        "bucket": finding.key,
        "message": finding.message,
    }
    try:
        dump_spec(SpecFile(model, [SpecExample("fuzz", list(inputs), [], (), True)], meta), path)
        load_spec(path, validate=False)
    except (SpecError, ValueError, TypeError, OverflowError) as e:
        try:
            path.unlink()
        except OSError:
            pass
        return "", f"not replayable as a spec file: {str(e)[:200]}"
    return str(path), replay_command(path, cfg.driver)


# ---- journal -----------------------------------------------------------------------------


class Journal:
    def __init__(self, path: Path):
        self.path = path
        self.fh = open(path, "a", encoding="utf-8")

    def write(self, rec: dict) -> None:
        self.fh.write(json.dumps(rec, separators=(",", ":"), allow_nan=False, default=str) + "\n")
        self.fh.flush()
        os.fsync(self.fh.fileno())

    def close(self) -> None:
        self.fh.close()


def read_journal(path: Path) -> list[dict]:
    out: list[dict] = []
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by a kill: everything before it stands
        if isinstance(rec, dict):
            out.append(rec)
    return out


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


# How the budget went (a progress line carries it): seconds of cases that found nothing, that
# found a new bucket, that repeated a known one, and of shrinking; repeats (those cut short by
# the repeat bound among them); draws put back as predicted repeats; predicted repeats run.
BUDGET_KEYS = (
    "clean_s",
    "new_s",
    "repeat_s",
    "shrink_s",
    "repeats",
    "short_bound_repeats",
    "rejected_draws",
    "predicted_repeats_run",
)


@dataclass
class State:
    next_index: int = 0
    elapsed_s: float = 0.0
    counts: dict = field(default_factory=lambda: {"cases": 0, **{v: 0 for v in VERDICTS}})
    buckets: dict = field(default_factory=dict)  # key -> bucket record
    finding_indexes: set = field(default_factory=set)
    budget: dict = field(default_factory=lambda: dict.fromkeys(BUDGET_KEYS, 0))
    kinds: dict = field(default_factory=dict)  # case kind -> cases run
    steering: Steering = field(default_factory=Steering)

    @property
    def hang_keys(self) -> set:
        return {k for k, b in self.buckets.items() if b.get("verdict") == "HANG"}

    @classmethod
    def from_journal(cls, recs: list[dict]) -> "State":
        s = cls()
        for r in recs:
            kind = r.get("kind")
            if kind == "progress":
                s.next_index, s.elapsed_s = int(r["next_index"]), float(r["elapsed_s"])
                s.counts = dict(r["counts"])
                s.budget = {**dict.fromkeys(BUDGET_KEYS, 0), **r.get("budget", {})}
                s.kinds = dict(r.get("kinds", {}))
            elif kind == "bucket":
                s.buckets[r["key"]] = r
                if "triggers" in r:
                    s.steering.triggers[r["key"]] = frozenset(r["triggers"])
            elif kind == "finding":
                s.finding_indexes.add(int(r["index"]))
                if r["key"] in s.buckets and "features" in r:
                    s.steering.learn(r["key"], r["features"])
                    if r.get("predicted") == r["key"]:
                        s.steering.confirm(r["key"])
        return s


# ---- the run -----------------------------------------------------------------------------


def _clock(s: float) -> str:
    s = max(0, int(s))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


@dataclass
class CaseRun:
    """One case run: what was drawn (seed, kind, features, the draws put back before it, the
    bucket it was predicted to repeat), its finding, and what it cost."""

    index: int
    seed: int
    kind: str
    features: frozenset
    finding: Finding | None
    duration_s: float
    attempt: int = 0
    rejected: int = 0
    predicted: str | None = None
    short_bound: bool = False
    model: Model | None = None  # None from a cluster worker: drawn again here from seed and kind
    inputs: list | None = None


def local_cases(device, cfg: "FuzzConfig", start: int, should_stop, state: "State"):
    """The cases from ``start`` on, drawn with ``state``'s steering and run here one after the
    other on ``device``, as CaseRun, until ``should_stop(index)``."""
    index = start
    while not should_stop(index):
        d = state.steering.draw(cfg.seed, index)
        t0 = time.monotonic()
        f, short = run_bounded(device, d.case.model, d.case.inputs, cfg, state.hang_keys)
        yield CaseRun(
            index,
            d.case.seed,
            d.case.kind,
            d.case.features,
            f,
            time.monotonic() - t0,
            d.attempt,
            d.rejected,
            d.predicted,
            short,
            d.case.model,
            d.case.inputs,
        )
        index += 1


def run_fuzz(cfg: FuzzConfig, resume: bool = False, out=None, err=None, cases=None) -> int:
    """Run (or resume) a fuzz run.  ``cases(cfg, start, should_stop)`` yields the cases in index
    order as :func:`local_cases` does (``--cluster``: run on the cluster's workers, where the
    model and inputs may be None: they are drawn again here from the seed for a finding)."""
    from nnconform.isolation.proxy import open_isolated

    out = out or sys.stdout
    err = err or sys.stderr
    rd = Path(cfg.report_dir)
    manifest_path = rd / MANIFEST
    if resume and not manifest_path.exists() and (rd / LEGACY_MANIFEST).exists():
        manifest_path = rd / LEGACY_MANIFEST
    if resume:
        try:
            manifest = json.loads(manifest_path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise FuzzUsageError(f"--resume: no fuzz run to resume in {rd} ({e})") from None
        if manifest.get("format") != MANIFEST_FORMAT:
            raise FuzzUsageError(f"--resume: {manifest_path} is not a fuzz run manifest")
        if manifest["options"]["driver"] != cfg.driver:
            raise FuzzUsageError(
                f"--resume: {rd} holds a run of driver {manifest['options']['driver']!r}, not {cfg.driver!r}"
            )
        o = manifest["options"]
        cfg = dataclasses.replace(
            cfg,
            seed=int(o["seed"]),
            budget_s=o["budget_s"],
            max_cases=o["max_cases"],
            call_timeout=o["call_timeout"],
            mem_limit=o["mem_limit"],
            slow_s=o["slow_s"],
            repeat_hang_timeout=o.get("repeat_hang_timeout", cfg.repeat_hang_timeout),
            steer=o.get("steer", False),  # a run recorded before steering existed did not steer
        )
        state = State.from_journal(read_journal(rd / JOURNAL))
        the_plan = manifest.get("plan") or plan(cfg.budget_s, cfg.max_cases, case_bound(cfg))
    else:
        if manifest_path.exists() or (rd / JOURNAL).exists():
            raise FuzzUsageError(f"{rd} already holds a fuzz run (use --resume, or another --report-dir)")
        rd.mkdir(parents=True, exist_ok=True)
        the_plan = plan(cfg.budget_s, cfg.max_cases, case_bound(cfg))
        manifest = {
            "format": MANIFEST_FORMAT,
            "version": 1,
            "command": "fuzz",
            "driver": cfg.driver,
            "seed": cfg.seed,
            "started": _now(),
            "options": cfg.options(),
            "plan": the_plan,
            "python": sys.version.split()[0],
        }
        tmp = manifest_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(manifest, indent=1))
        os.replace(tmp, manifest_path)
        state = State()
    print(
        f"nnconform fuzz: driver {cfg.driver}; seed {cfg.seed}; "
        + (f"budget {cfg.budget_s:g} s" if cfg.budget_s else f"{cfg.max_cases} cases")
        + (f"; resuming at case {state.next_index} ({state.elapsed_s:.0f} s used)" if resume else "")
        + f"; call timeout {cfg.call_timeout:g} s; memory limit {cfg.mem_limit / 2**30:g} GiB; report {rd}",
        file=out,
        flush=True,
    )
    state.steering.enabled = cfg.steer
    print(
        f"nnconform fuzz: plan: one case of each of the {len(the_plan['first_round'])} kinds first "
        f"({', '.join(the_plan['first_round'])}), then drawn"
        + (", steered away from the known buckets" if cfg.steer else " (steering off)")
        + (
            f"; the first case of {', '.join(the_plan['may_not_fit'])} may not fit "
            f"(up to {the_plan['case_bound_s']:g} s a case)"
            if the_plan["may_not_fit"]
            else ""
        ),
        file=out,
        flush=True,
    )
    # Local cases need the driver host now; cluster cases only when a new bucket is shrunk.
    device = (
        open_isolated(cfg.driver, call_timeout=cfg.call_timeout, mem_limit=cfg.mem_limit) if cases is None else None
    )
    journal = Journal(rd / JOURNAL)
    t_start = time.monotonic() - state.elapsed_s
    last_progress = 0.0
    index = state.next_index
    tty = hasattr(err, "isatty") and err.isatty()
    interrupted = False

    def progress(final: bool = False) -> None:
        elapsed = time.monotonic() - t_start
        journal.write(
            {
                "kind": "progress",
                "next_index": index,
                "elapsed_s": round(elapsed, 3),
                "counts": state.counts,
                "budget": {k: round(v, 3) if isinstance(v, float) else v for k, v in state.budget.items()},
                "kinds": state.kinds,
                "time": _now(),
            }
        )
        rate = state.counts["cases"] / elapsed if elapsed > 0 else 0.0
        line = (
            f"[fuzz] {state.counts['cases']} cases  {rate:.1f}/s  buckets {len(state.buckets)}  "
            + "  ".join(f"{v} {state.counts[v]}" for v in VERDICTS)
            + f"  elapsed {_clock(elapsed)}"
            + (f"  left {_clock(cfg.budget_s - elapsed)}" if cfg.budget_s else "")
        )
        print(("\r" + line) if tty and not final else line, end="" if tty and not final else "\n", file=err, flush=True)

    def should_stop(i: int) -> bool:
        return (cfg.budget_s is not None and time.monotonic() - t_start >= cfg.budget_s) or (
            cfg.max_cases is not None and i >= cfg.max_cases
        )

    try:
        source = (
            local_cases(device, cfg, index, should_stop, state)
            if cases is None
            else cases(cfg, index, should_stop, state)
        )
        for cr in source:
            index, seed, finding = cr.index, cr.seed, cr.finding
            model, inputs = cr.model, cr.inputs
            if finding is not None and model is None:
                model, inputs = make_case(seed, cr.kind)
            if finding is not None and device is None:
                device = open_isolated(cfg.driver, call_timeout=cfg.call_timeout, mem_limit=cfg.mem_limit)
            state.counts["cases"] += 1
            state.kinds[cr.kind] = state.kinds.get(cr.kind, 0) + 1
            state.budget["rejected_draws"] += cr.rejected
            state.budget["predicted_repeats_run"] += cr.predicted is not None
            if finding is None:
                state.budget["clean_s"] += cr.duration_s
            elif index not in state.finding_indexes or finding.key not in state.buckets:
                # (a finding recorded before an interruption whose bucket was never written,
                # the run stopped while shrinking it: the bucket is made now, counted once)
                if index not in state.finding_indexes:
                    state.counts[finding.verdict] += 1
                state.finding_indexes.add(index)
                journal.write(
                    {
                        "kind": "finding",
                        "index": index,
                        "seed": seed,
                        "case_kind": cr.kind,
                        "elapsed_s": round(time.monotonic() - t_start, 3),
                        "case_s": round(cr.duration_s, 3),
                        "short_bound": cr.short_bound,
                        "predicted": cr.predicted,
                        "draw": cr.attempt,
                        "features": sorted(cr.features),
                        **dataclasses.asdict(finding),
                    }
                )
                if finding.key not in state.buckets:
                    state.budget["new_s"] += cr.duration_s
                    t_new = time.monotonic()
                    _new_bucket(
                        cfg,
                        device,
                        state,
                        journal,
                        finding,
                        cr,
                        model,
                        inputs,
                        time.monotonic() - t_start,
                        out,
                        tty,
                    )
                    state.budget["shrink_s"] += time.monotonic() - t_new
                else:
                    state.buckets[finding.key]["count"] = state.buckets[finding.key].get("count", 1) + 1
                    state.budget["repeat_s"] += cr.duration_s
                    state.budget["repeats"] += 1
                    state.budget["short_bound_repeats"] += cr.short_bound
                    state.steering.learn(finding.key, cr.features)
                    if cr.predicted == finding.key:
                        state.steering.confirm(finding.key)
            index += 1
            if time.monotonic() - last_progress >= PROGRESS_EVERY_S:
                last_progress = time.monotonic()
                progress()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        progress(final=True)
        journal.close()
        if device is not None:
            device.close()
    report = write_reports(rd, interrupted=interrupted)
    print(
        f"nnconform fuzz: {report['cases']} cases in {report['elapsed_s']:.0f} s "
        f"({report['cases_per_s']:.1f}/s), {len(report['buckets'])} bucket(s); seed {cfg.seed}; "
        f"reports -> {rd / REPORT_HTML}, {rd / REPORT_JSON}",
        file=out,
        flush=True,
    )
    for b in report["buckets"]:
        print(
            f"  {b['verdict']:5s} {b['key'][:110]}  first at {b['first_elapsed_s']:.1f} s (case {b['first_index']}), "
            f"{b['count']} case(s); " + (f"replay: {b['replay']}" if b.get("spec") else b.get("replay", "")),
            file=out,
        )
    return int(report["exit_status"])


def case_bound(cfg: "FuzzConfig") -> float:
    """What one case can cost at worst before the next starts: three calls (support query,
    prepare, execute) each just inside the call bound, and a driver host restart."""
    return 3 * cfg.call_timeout + HOST_RESTART_S


def _new_bucket(cfg, device, state, journal, finding, cr: CaseRun, model, inputs, found_at, out, tty) -> None:
    index, seed = cr.index, cr.seed
    bid = f"{len(state.buckets) + 1:03d}-{finding.verdict.lower()}"
    if tty:
        print(file=sys.stderr)
    print(
        f"nnconform fuzz: new bucket {bid} at {found_at:.1f} s (case {index}, seed {seed}): {finding.key[:160]}",
        file=out,
        flush=True,
    )
    t0 = time.monotonic()
    deadline = shrink_deadline(cfg)
    saved = getattr(device, "call_timeout", None)
    if finding.verdict == "HANG" and saved is not None:
        device.call_timeout = min(saved, cfg.shrink_hang_timeout)
    try:
        small, small_inputs, tried = make_replayable(device, model, inputs, finding, cfg)
    finally:
        if saved is not None:
            device.call_timeout = saved
    small, small_inputs, more = shrink(device, small, small_inputs, finding, cfg, deadline=deadline)
    tried += more
    spec, replay = dump_bucket_spec(cfg, bid, small, small_inputs, finding, index, seed)
    # the trigger: what the first case had that its minimal case kept, with the case's kind
    # and mutations (the shrinker keeps only what the bucket needs, so this is a good start)
    kept = case_features(small, small_inputs)
    triggers = frozenset(f for f in cr.features if f in kept or f.startswith(("origin:", "mutation:")))
    state.steering.triggers[finding.key] = triggers
    rec = {
        "kind": "bucket",
        "id": bid,
        "key": finding.key,
        "verdict": finding.verdict,
        "signal": finding.signal,
        "frames": finding.frames,
        "operations": operation_names(small),
        "first_index": index,
        "first_seed": seed,
        "first_elapsed_s": round(found_at, 3),
        "case_kind": cr.kind,
        "triggers": sorted(triggers),
        "message": finding.message,
        "stage": finding.stage,
        "shrink_tried": tried,
        "shrink_s": round(time.monotonic() - t0, 2),
        "minimal_size": {"operations": len(small.main.operations), "operands": len(small.main.operands)},
        "spec": spec,
        "replay": replay,
        "count": 1,
    }
    state.buckets[finding.key] = rec
    journal.write(rec)


# ---- reports -----------------------------------------------------------------------------


def _manifest(rd: Path) -> dict:
    path = rd / MANIFEST if (rd / MANIFEST).exists() or not (rd / LEGACY_MANIFEST).exists() else rd / LEGACY_MANIFEST
    return json.loads(path.read_text())


def _status_text(rep: dict, code: ExitStatus) -> str:
    done = f"{rep['cases']} cases in {rep['elapsed_s']:.0f} s, {len(rep['buckets'])} bucket(s)"
    return ("interrupted after " if code is ExitStatus.INCOMPLETE else "complete: ") + done


def bucket_rows(rep: dict) -> list:
    """One results row per bucket: its verdict, key, minimal spec and replay command."""
    from nnconform.verdict.results import ResultRecord

    return [
        ResultRecord(
            suite="fuzz",
            test_id=f"fuzz/{b['id']}",
            driver=rep["driver"],
            outcome=ROW_OUTCOME.get(b["verdict"], Outcome.CRASH),
            operations=b.get("operations") or [],
            blamed_operation=(b.get("operations") or [""])[0] if len(b.get("operations") or []) == 1 else "",
            seed=b.get("first_seed"),
            spec_path=b.get("spec"),
            message=b["key"],
            replay=b.get("replay") or "",
            extra={
                "verdict": b["verdict"],
                "cases": b["count"],
                "signal": b.get("signal"),
                "frames": b.get("frames") or [],
                "first_index": b["first_index"],
            },
        )
        for b in rep["buckets"]
    ]


def build_report(rd: Path) -> dict:
    manifest = _manifest(rd)
    recs = read_journal(rd / JOURNAL)
    state = State.from_journal(recs)
    counts_by_key: dict[str, int] = {}
    seconds_by_key: dict[str, float] = {}
    short_by_key: dict[str, int] = {}
    seen: set[int] = set()
    repeat_times: list[float] = []
    for r in recs:
        if r.get("kind") == "finding" and int(r["index"]) not in seen:
            seen.add(int(r["index"]))
            k = r["key"]
            counts_by_key[k] = counts_by_key.get(k, 0) + 1
            seconds_by_key[k] = seconds_by_key.get(k, 0.0) + float(r.get("case_s", r.get("duration_s", 0.0)))
            short_by_key[k] = short_by_key.get(k, 0) + bool(r.get("short_bound"))
            if counts_by_key[k] > 1:
                repeat_times.append(float(r.get("elapsed_s", 0.0)))
    buckets = []
    for b in sorted(state.buckets.values(), key=lambda b: b["first_elapsed_s"]):
        k = b["key"]
        buckets.append(
            dict(
                b,
                count=counts_by_key.get(k, 1),
                case_s=round(seconds_by_key.get(k, 0.0), 3),
                short_bound_repeats=short_by_key.get(k, 0),
                triggers=sorted(state.steering.triggers.get(k, b.get("triggers", []))),
            )
        )
    elapsed = state.elapsed_s
    cases = int(state.counts.get("cases", 0))
    the_plan = manifest.get("plan") or {}
    not_reached = [k for k in the_plan.get("first_round", []) if not state.kinds.get(k)]
    return {
        "format": "nnconform-fuzz-report",
        "driver": manifest["options"]["driver"],
        "seed": manifest["options"]["seed"],
        "options": manifest["options"],
        "started": manifest["started"],
        "cases": cases,
        "elapsed_s": round(elapsed, 2),
        "cases_per_s": round(cases / elapsed, 2) if elapsed else 0.0,
        "counts": state.counts,
        "buckets": buckets,
        "budget": budget_spent(state, elapsed),
        "timeline": [
            {"elapsed_s": b["first_elapsed_s"], "case": b["first_index"], "bucket": b["id"], "verdict": b["verdict"]}
            for b in buckets
        ],
        "repeats_over_time": _binned(repeat_times, elapsed),
        "kinds": dict(sorted(state.kinds.items())),
        "plan": dict(the_plan, first_round_not_reached=not_reached),
    }


def _binned(times: list[float], elapsed: float, bins: int = 30) -> dict:
    """Repeats per time bin (bins of equal length over the run), for the report's chart."""
    width = max(elapsed, 1e-9) / bins
    counts = np.bincount(np.minimum((np.asarray(times, float) / width).astype(int), bins - 1), minlength=bins)
    return {"bin_s": round(width, 3), "counts": [int(c) for c in counts[:bins]]}


def budget_spent(state: "State", elapsed: float) -> dict:
    """Where the run's time went: seconds and cases per use (a case's seconds include the
    restart of a driver host it killed), and the rest (drawing cases, journal), rounded for the
    report."""
    b = state.budget
    used = b["clean_s"] + b["new_s"] + b["repeat_s"] + b["shrink_s"]
    findings = sum(int(state.counts.get(v, 0)) for v in VERDICTS)
    return {
        "elapsed_s": round(elapsed, 2),
        "clean_s": round(b["clean_s"], 2),
        "clean_cases": int(state.counts.get("cases", 0)) - findings,
        "new_bucket_s": round(b["new_s"], 2),
        "shrink_s": round(b["shrink_s"], 2),
        "repeat_s": round(b["repeat_s"], 2),
        "repeats": int(b["repeats"]),
        "short_bound_repeats": int(b["short_bound_repeats"]),
        "predicted_repeats_run": int(b["predicted_repeats_run"]),
        "rejected_draws": int(b["rejected_draws"]),
        "other_s": round(max(0.0, elapsed - used), 2),
    }


def _add_to_summary(rd: Path, rep: dict) -> None:
    """summary.json (the artifact contract's, from the bucket rows) gets the fuzz run's own
    section: how the budget was spent, the buckets over time, the kinds run, the plan."""
    from nnconform.artifacts import SUMMARY_JSON
    from nnconform.artifacts.reportdir import atomic_write

    path = rd / SUMMARY_JSON
    summary = json.loads(path.read_text(encoding="utf-8"))
    summary["fuzz"] = {
        "cases": rep["cases"],
        "elapsed_s": rep["elapsed_s"],
        "budget": rep["budget"],
        "timeline": rep["timeline"],
        "repeats_over_time": rep["repeats_over_time"],
        "kinds": rep["kinds"],
        "plan": rep["plan"],
        "steer": rep["options"].get("steer", False),
    }
    atomic_write(path, json.dumps(summary, indent=1, sort_keys=False, allow_nan=False) + "\n")


def _timeline_svg(rep: dict, width: int = 560, height: int = 160) -> str:
    """Buckets found against elapsed time: a step line with a dot (coloured by verdict) at
    each new bucket."""
    total = max(float(rep["elapsed_s"]), 1e-9)
    n = max(len(rep["timeline"]), 1)
    left, bottom, top, right = 40, height - 24, 10, width - 10

    def x(t: float) -> float:
        return left + (right - left) * min(max(t / total, 0.0), 1.0)

    def y(k: int) -> float:
        return bottom - (bottom - top) * k / n

    colour = {"HANG": "#b58900", "CRASH": "#dc322f", "OOM": "#6c71c4", "SLOW": "#268bd2"}
    pts, k = [(x(0), y(0))], 0
    dots = []
    for ev in rep["timeline"]:
        pts.append((x(ev["elapsed_s"]), y(k)))
        k += 1
        pts.append((x(ev["elapsed_s"]), y(k)))
        dots.append(
            f'<circle cx="{x(ev["elapsed_s"]):.1f}" cy="{y(k):.1f}" r="4" fill="{colour.get(ev["verdict"], "#555")}">'
            f"<title>{html.escape(ev['bucket'])} at {ev['elapsed_s']:.1f} s (case {ev['case']})</title></circle>"
        )
    pts.append((x(total), y(k)))
    line = " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)
    # repeats per time bin: grey bars along the bottom, the tallest a third of the height
    rot = rep.get("repeats_over_time") or {"bin_s": 0, "counts": []}
    peak = max(rot["counts"] or [0])
    bw = (right - left) / max(len(rot["counts"]), 1)
    bars = "".join(
        f'<rect x="{left + i * bw:.1f}" y="{bottom - (bottom - top) / 3 * c / peak:.1f}" width="{bw * 0.9:.1f}" '
        f'height="{(bottom - top) / 3 * c / peak:.1f}" fill="#ccc"><title>{c} repeat(s) in '
        f"{i * rot['bin_s']:.0f}..{(i + 1) * rot['bin_s']:.0f} s</title></rect>"
        for i, c in enumerate(rot["counts"])
        if c and peak
    )
    return (
        f'<svg width="{width}" height="{height}" role="img" aria-label="buckets found over time">'
        f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#999"/>'
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#999"/>'
        f'<text x="{left - 6}" y="{y(n) + 4:.1f}" text-anchor="end" font-size="11">{n if rep["timeline"] else 0}</text>'
        f'<text x="{left - 6}" y="{bottom + 4}" text-anchor="end" font-size="11">0</text>'
        f'<text x="{left}" y="{height - 6}" font-size="11">0 s</text>'
        f'<text x="{right}" y="{height - 6}" text-anchor="end" font-size="11">{total:.0f} s</text>'
        + bars
        + f'<polyline points="{line}" fill="none" stroke="#333" stroke-width="1.5"/>'
        + "".join(dots)
        + "</svg>"
    )


def _budget_html(rep: dict) -> str:
    e = html.escape
    b = rep["budget"]
    total = max(b["elapsed_s"], 1e-9)
    found = sum(1 for _ in rep["buckets"])
    rows = [
        ("cases that found nothing", b["clean_cases"], b["clean_s"]),
        ("cases that found a new bucket", found, b["new_bucket_s"]),
        ("shrinking the new buckets' cases", "", b["shrink_s"]),
        (
            f"repeats of known buckets ({b['short_bound_repeats']} hangs cut short by the repeat bound)",
            b["repeats"],
            b["repeat_s"],
        ),
        ("the rest (drawing cases, the draws put back among them; journal; reports)", "", b["other_s"]),
    ]
    body = "".join(
        f"<tr><td>{e(what)}</td><td>{n}</td><td>{sec:.1f} s</td><td>{100 * sec / total:.0f}%</td></tr>"
        for what, n, sec in rows
    )
    plan_ = rep.get("plan") or {}
    kinds = rep.get("kinds") or {}
    kind_cells = "".join(
        f"<tr><td>{e(k)}</td><td>{kinds.get(k, 0)}</td></tr>" for k in plan_.get("first_round", sorted(kinds))
    )
    notes = []
    if plan_.get("may_not_fit"):
        notes.append(
            f"Planned before the run: the first case of {e(', '.join(plan_['may_not_fit']))} might not fit "
            f"(up to {plan_.get('case_bound_s', 0):g} s a case)."
        )
    if plan_.get("first_round_not_reached"):
        notes.append(f"<b>Never reached:</b> {e(', '.join(plan_['first_round_not_reached']))}.")
    steer = rep["options"].get("steer", False)
    return (
        "<h2>How the budget was spent</h2>"
        f"<p>{'Steered: cases predicted to repeat a known bucket were drawn again' if steer else 'Not steered'}"
        f" ({b['rejected_draws']} draws put back; {b['predicted_repeats_run']} predicted repeats run anyway). "
        f"Once a hang is known, every call is first bounded by "
        f"{rep['options'].get('repeat_hang_timeout', rep['options'].get('call_timeout', 0)):g} s.</p>"
        f"<table><tr><th>time went to</th><th>cases</th><th>time</th><th>share</th></tr>{body}</table>"
        "<h3>New buckets over time</h3><p>The line counts the buckets found (a dot at each, red a crash, "
        f"amber a hang); the grey bars are the repeats of known buckets in each {rep['repeats_over_time']['bin_s']:.0f} s "
        f"(at most {max(rep['repeats_over_time']['counts'] or [0])}).</p>{_timeline_svg(rep)}"
        "<h3>Cases per kind</h3><p>The first case of each kind runs before any kind gets its second.</p>"
        f"<table><tr><th>kind</th><th>cases</th></tr>{kind_cells}</table>" + "".join(f"<p>{n}</p>" for n in notes)
    )


def write_reports(rd: Path, interrupted: bool = False) -> dict:
    """The fuzz run's artifacts from its journal: results.jsonl/.csv (a row per bucket),
    summary.json, report.html, fuzz-report.json, and the exit status in run.json (also the
    report's ``exit_status``): 3 when interrupted, else 1 when a bucket was found, else 0."""
    from nnconform.artifacts import RESULTS_JSONL, record_exit, write_common
    from nnconform.artifacts.reportdir import atomic_write
    from nnconform.verdict.results import record_to_json

    rep = build_report(rd)
    atomic_write(rd / REPORT_JSON, json.dumps(rep, indent=1, allow_nan=False, default=str))
    rows = bucket_rows(rep)
    atomic_write(rd / RESULTS_JSONL, "".join(record_to_json(r) + "\n" for r in rows))
    code = ExitStatus.of([r.outcome for r in rows], complete=not interrupted)
    rep["exit_status"] = int(code)
    write_common(
        rd,
        rows,
        {"driver": rep["driver"], "seed": rep["seed"], "status": _status_text(rep, code)},
        title="nnconform fuzz report",
        html=False,
    )
    _add_to_summary(rd, rep)
    if (rd / MANIFEST).exists():  # (a run recorded under the legacy name keeps that record)
        record_exit(rd, code, status=_status_text(rep, code))
    e = html.escape
    table_rows = "".join(
        f"<tr><td>{e(b['id'])}</td><td>{e(b['verdict'])}</td><td>{e(b.get('signal') or '')}</td>"
        f"<td>{e(' / '.join(b.get('frames') or []))}</td><td>{e(', '.join(b.get('operations') or []))}</td>"
        f"<td>{b['first_elapsed_s']:.1f} s (case {b['first_index']})</td><td>{b['count']}</td>"
        f"<td>{b.get('case_s', 0):.1f} s"
        + (f" ({b['short_bound_repeats']} cut short)" if b.get("short_bound_repeats") else "")
        + f"</td><td>{e(', '.join(b.get('triggers') or []))}</td>"
        f"<td>{e(os.path.basename(b['spec'])) if b.get('spec') else ''}</td><td><code>{e(b.get('replay') or '')}</code></td></tr>"
        for b in rep["buckets"]
    )
    counts = ", ".join(f"{k} {v}" for k, v in rep["counts"].items())
    page = (
        f"<!doctype html><meta charset=utf-8><title>nnconform fuzz: {e(rep['driver'])}</title>"
        "<style>body{font:14px sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}</style>"
        f"<h1>nnconform fuzz: {e(rep['driver'])}</h1>"
        f"<p>seed {rep['seed']} &middot; started {e(rep['started'])} &middot; {rep['cases']} cases in "
        f"{rep['elapsed_s']:.0f} s ({rep['cases_per_s']:.1f} cases/s) &middot; {e(counts)}</p>"
        f"<p>Replay a bucket's minimal spec with the command shown; resume with "
        f"<code>nnconform fuzz --driver {e(shlex.quote(rep['driver']))} --report-dir "
        f"{e(shlex.quote(str(rd)))} --resume</code>.</p>"
        + (
            f"<table><tr><th>bucket</th><th>verdict</th><th>signal</th><th>top frames</th><th>operations "
            f"(minimal spec)</th><th>first found</th><th>cases</th><th>time in its cases</th>"
            f"<th>trigger (steered away from)</th><th>spec</th><th>replay</th></tr>{table_rows}</table>"
            if rep["buckets"]
            else "<p><b>No crash, hang, out-of-memory or slow case.</b></p>"
        )
        + _budget_html(rep)
    )
    (rd / REPORT_HTML).write_text(page, encoding="utf-8")
    return rep


__all__ = [
    "FuzzConfig",
    "FuzzUsageError",
    "run_fuzz",
    "write_reports",
    "build_report",
    "case_seed",
    "driver_frames",
    "classify",
    "shrink",
]
