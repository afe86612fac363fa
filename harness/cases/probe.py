"""Capability probe: what a driver claims against what it actually computes.

For every operation the random generator covers (``generators.signatures``), every data type
of it and every rank, the probe builds a few tiny one-operation models from fixed seeds (the
signatures draw the notable parameters: layout, fused activation, axes, quantisation, ...),
then per model:

- *claimed*: ``supported_operations`` says True;
- *works*: ``prepare`` + ``execute`` succeed and the outputs meet the operation's random-graph
  criteria against the reference executor (asked whatever the claim was).

A cell (operation x type x rank) **worked** when it was claimed and every sample ran and
matched: "worked on N samples", no more (a few seeded samples prove nothing about the rest);
it is **unsupported** when refused and not working on every sample, an **over-claim** when a
claimed sample fails, an **under-claim** when a refused sample works.  A sample that crashes
the driver host or hangs past the probe's own short call bound (``--probe-timeout``) makes
its cell **crash** / **hang** and quarantines the (operation, data type): its remaining
samples and ranks are not tried (**quarantined**), so one hanging operation costs one bound
per data type, not one per sample.  The matrix is JSON (``capabilities-<driver>-<version>.json``
in the report directory, reused by later runs only while the driver's files, version and
name, the harness version and the probe's settings are the same: see ``driver_fingerprint``)
and Markdown (``capabilities.md``); a run's report shows the summary line among its run facts.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from nnconform.ir import SHORT_TYPE_NAME, Request
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op

# HONEST keeps its old constant name; its text says only what was seen ("worked").
HONEST, HONEST_NO, OVER, UNDER, NOT_BUILT = "worked", "unsupported", "over-claim", "under-claim", "not-built"
CRASH, HANG, QUARANTINED = "crash", "hang", "quarantined"
STATUSES = (HONEST, HONEST_NO, OVER, UNDER, CRASH, HANG, QUARANTINED, NOT_BUILT)
PROBE_FORMAT = 2
#: The probe's own bound on one driver call (seconds): its models have one tiny operation, so a
#: call that takes longer is a hang, and a hanging operation must not cost the run's call bound
#: (a minute) per sample.
DEFAULT_PROBE_TIMEOUT = 5.0


@dataclass
class Cell:
    operation: str
    data_type: str
    rank: int
    samples: int = 0
    claimed: int = 0  # samples claimed
    worked: int = 0  # samples that ran and matched the reference
    over: int = 0  # samples claimed that failed
    under: int = 0  # samples refused that worked
    status: str = NOT_BUILT
    message: str = ""  # the first failure of a claimed sample, or why nothing was built
    incident: str = ""  # "CRASH" / "HANG" when a sample killed or stalled the driver host


def describe_cell(c: dict) -> str:
    """One cell's status in words: what was seen, on how many samples."""
    st = c["status"]
    if st == HONEST:
        return f"worked on {c['samples']} sample{'s' if c['samples'] != 1 else ''}"
    if st in (CRASH, HANG):
        return f"{c['incident'] or st.upper()} in the probe" + (f": {c['message']}" if c["message"] else "")
    if st == QUARANTINED:
        return f"not probed ({c['message']})"
    return st


def _describe(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text[:200]}" if text else type(e).__name__


def op_criteria(op: Op):
    from nnconform.verdict.criteria import RELAXED, STRICT, criteria_for_operation

    newer = {Op.MIRROR_PAD: STRICT, Op.REVERSE: STRICT, Op.PACK: STRICT, Op.BATCH_MATMUL: RELAXED}
    return newer.get(op) or criteria_for_operation(op, "1.3")


def _incident(e: BaseException) -> str:
    """ "CRASH" / "HANG" when ``e`` is the driver host dying or stalling (nnconform.isolation),
    else ""."""
    from nnconform.isolation.proxy import HostIncident

    return str(e.verdict) if isinstance(e, HostIncident) else ""


def _per_cell(progress: Callable[[Cell, int, int], None], done: int, total: int) -> Callable[[Cell], None]:
    """The probe's per-cell callback, telling ``progress`` how many operations are done."""
    return lambda c: progress(c, done, total)


class _Incident(Exception):
    def __init__(self, kind: str, claimed: bool, message: str):
        super().__init__(message)
        self.kind, self.claimed, self.message = kind, claimed, message


def _try_sample(device, case, criteria) -> tuple[bool, bool, str]:
    """(claimed, works, message) of one model.  Nothing the driver does escapes; a CRASH or
    HANG of the driver host is raised as _Incident (the cell is quarantined)."""
    from nnconform.driver import ExecutionResult
    from nnconform.reference.executor import Executor
    from nnconform.verdict.criteria import compare

    model = case.model
    try:
        claims = device.supported_operations(model)
        claimed = (
            isinstance(claims, (list, tuple))
            and len(claims) == len(model.main.operations)
            and all(bool(c) for c in claims)
        )
    except Exception as e:
        if _incident(e):
            raise _Incident(_incident(e), False, f"supported_operations: {_describe(e)}") from None
        return False, False, f"supported_operations: {_describe(e)}"
    expected = Executor(model).run(case.inputs)
    try:
        prepared = device.prepare(model)
    except Exception as e:
        if _incident(e):
            raise _Incident(_incident(e), claimed, f"prepare: {_describe(e)}") from None
        return claimed, False, f"prepare: {_describe(e)}"
    try:
        result = prepared.execute(Request.from_arrays(model, case.inputs))
    except Exception as e:
        result = e
    if isinstance(result, Exception) and _incident(result):
        # the host is gone: its prepared model with it (no release to ask)
        raise _Incident(_incident(result), claimed, f"execute: {_describe(result)}")
    try:
        prepared.release()
    except Exception as e:
        if _incident(e):
            raise _Incident(_incident(e), claimed, f"release: {_describe(e)}") from None
        if not isinstance(result, Exception):
            return claimed, False, f"release: {_describe(e)}"
    if isinstance(result, Exception):
        return claimed, False, f"execute: {_describe(result)}"
    if not isinstance(result, ExecutionResult) or not isinstance(result.outputs, (list, tuple)):
        return claimed, False, f"execute returned {type(result).__name__}"
    cmp = compare(model, expected, list(result.outputs), criteria=criteria, ignored=case.ignored)
    return claimed, cmp.passed, "" if cmp.passed else f"compare: {cmp.message[:200]}"


def probe_cells(
    device,
    *,
    samples: int = 2,
    seed: int = 0,
    max_dim: int = 6,
    max_elems: int = 64,
    operations: Iterable[Op] | None = None,
    types: Iterable[T] | None = None,
    progress: Callable[[Cell], None] | None = None,
    call_timeout: float | None = None,
) -> list[Cell]:
    """The cells of ``operations`` x ``types`` (None: all) x every rank.  ``call_timeout``:
    the bound on each driver call while probing, for a device that has one (the isolated
    driver host); the device's own bound is restored afterwards."""
    with _call_bound(device, call_timeout):
        return _probe_cells(device, samples, seed, max_dim, max_elems, operations, types, progress)


@contextlib.contextmanager
def _call_bound(device, seconds: float | None) -> Iterator[None]:
    old = getattr(device, "call_timeout", None)
    if seconds is None or old is None:  # in-process: nothing can bound a call
        yield
        return
    device.call_timeout = float(seconds)
    try:
        yield
    finally:
        device.call_timeout = old


def _probe_cells(device, samples, seed, max_dim, max_elems, operations, types, progress) -> list[Cell]:
    from nnconform.generators.graphs import GraphConfig
    from nnconform.generators.signatures import SIGNATURES, Reject
    from nnconform.generators.strategies import sample

    wanted_ops = set(operations) if operations is not None else None
    wanted_types = set(types) if types is not None else None
    cells = []
    for op, sig in sorted(SIGNATURES.items(), key=lambda kv: kv[0].name):
        if wanted_ops is not None and op not in wanted_ops:
            continue
        crit = op_criteria(op)
        for t in sig.types:
            if wanted_types is not None and t not in wanted_types:
                continue
            quarantine = ""  # why this (operation, data type) is no longer tried
            for rank in sig.ranks:
                cell = Cell(op.name, SHORT_TYPE_NAME[t], rank)
                if quarantine:
                    cell.status, cell.message = QUARANTINED, quarantine
                    cells.append(cell)
                    if progress:
                        progress(cell)
                    continue
                for k in range(samples):
                    cfg = GraphConfig(
                        dtype=t, n_ops=1, rank=rank, max_dim=max_dim, max_elems=max_elems, ops=(op,), shrinkable=False
                    )
                    try:
                        case = sample(cfg, seed * 1000 + k)
                    except (Reject, ValueError) as e:
                        cell.message = cell.message or f"no model built: {_describe(e)}"
                        continue
                    if [o.type for o in case.model.main.operations] != [op]:
                        continue
                    try:
                        claimed, works, msg = _try_sample(device, case, crit)
                    except _Incident as inc:
                        cell.samples += 1
                        cell.claimed += inc.claimed
                        cell.incident, cell.message = inc.kind, inc.message
                        quarantine = f"quarantined after a {inc.kind} at rank {rank}"
                        break
                    cell.samples += 1
                    cell.claimed += claimed
                    cell.worked += works
                    cell.over += claimed and not works
                    cell.under += works and not claimed
                    if msg and (claimed and cell.over == 1 or not cell.message):
                        cell.message = msg
                cell.status = _status(cell)
                cells.append(cell)
                if progress:
                    progress(cell)
    return cells


def _status(c: Cell) -> str:
    if c.incident:
        return HANG if c.incident == "HANG" else CRASH
    if c.samples == 0:
        return NOT_BUILT
    if c.over:
        return OVER
    if c.under:
        return UNDER
    return HONEST if c.claimed else HONEST_NO


def cache_path(report_dir: Path | str, name: str, version: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.+-]+", "_", f"{name}-{version}")[:120]
    return Path(report_dir) / f"capabilities-{safe}.json"


#: Hashing a driver's files stops here (a driver inside a huge installed package): the
#: fingerprint then says it covered only part of them.
_MAX_FILES, _MAX_BYTES = 5000, 256 << 20
_CODE_SUFFIXES = (".py", ".so", ".pyd", ".dylib", ".json", ".toml", ".cfg")


def _driver_files(spec: str) -> list[Path]:
    """The files a driver name stands for, found without importing the driver: a driver file
    and the Python files beside it (it may import them), or the whole top-level package of
    ``module:attribute`` / an installed entry point's module."""
    import importlib.util

    from nnconform.driver.loader import _file_form, installed_drivers

    form = _file_form(spec)
    if form is not None:
        path = Path(form[0]).expanduser().resolve()
        return sorted(p for p in path.parent.glob("*.py") if p.is_file()) if path.is_file() else []
    eps = installed_drivers()
    target = eps[spec].value if spec in eps else spec
    top = target.partition(":")[0].split(".")[0]
    try:
        found = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return []
    if found is None:
        return []
    if found.submodule_search_locations:
        files: list[Path] = []
        for root in found.submodule_search_locations:
            files += (p for p in Path(root).rglob("*") if p.suffix in _CODE_SUFFIXES and p.is_file())
        return sorted(set(files))
    return [Path(found.origin)] if found.origin and os.path.isfile(found.origin) else []


def driver_fingerprint(spec: str | None, name: str, version: str) -> dict:
    """What a cached matrix is valid for: the driver's name, declared version and the hash of
    its files' contents (a bug fixed without a version bump is a new driver to the probe)."""
    h = hashlib.sha256(f"{spec}\0{name}\0{version}\0".encode())
    n = size = 0
    partial = False
    for path in _driver_files(spec) if spec else []:
        try:
            data = path.read_bytes()
        except OSError:
            continue  # unreadable now: it cannot be loaded either; the others still key the cache
        if n >= _MAX_FILES or size + len(data) > _MAX_BYTES:
            partial = True
            break
        h.update(str(path).encode() + b"\0" + hashlib.sha256(data).digest())
        n, size = n + 1, size + len(data)
    return {"digest": h.hexdigest()[:32], "files": n, "partial": partial}


class CapabilityCache:
    """The probe's cells for one driver, kept in the report directory and filled on demand:
    a run that needs only some cells (the random suite's ``-k`` selection) probes only those;
    ``nnconform probe`` fills them all.  Cells are reused only while the driver's files
    (driver_fingerprint), name and version, the harness version, the sample count, the seed
    and the probe's call bound are the ones they were made with; ``fresh=True``
    (``run --reprobe``, ``probe --force``) throws them away."""

    def __init__(
        self,
        device,
        report_dir: Path | str,
        *,
        samples: int = 2,
        seed: int = 0,
        driver_spec: str | None = None,
        call_timeout: float | None = DEFAULT_PROBE_TIMEOUT,
        fresh: bool = False,
    ):
        from nnconform import __version__

        self.device, self.samples, self.seed = device, samples, seed
        self.call_timeout = call_timeout
        self.name = str(getattr(device, "name", "driver"))
        self.version = str(getattr(device, "version", "0"))
        self.driver_spec = driver_spec or getattr(device, "driver_spec", None)
        self.fingerprint = driver_fingerprint(self.driver_spec, self.name, self.version)
        self.path = cache_path(report_dir, self.name, self.version)
        self.harness_version = __version__
        self.cells: dict[tuple[str, str, int], dict] = {}
        self.probed_s = 0.0
        self.created = ""
        self.stale = ""  # why a cached matrix was not reused
        if not fresh:
            self._read()

    def _read(self) -> None:
        if not self.path.is_file() or self.path.is_symlink():
            return
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return  # unreadable: probe again and replace it
        if not isinstance(data, dict):
            return
        differs = [
            what
            for what, key, want in (
                ("format", "format", PROBE_FORMAT),
                ("harness version", "harness_version", self.harness_version),
                ("samples", "samples", self.samples),
                ("seed", "seed", self.seed),
                ("probe call bound", "probe_timeout", self.call_timeout),
                ("driver files", "driver_digest", self.fingerprint["digest"]),
            )
            if data.get(key) != want
        ]
        if differs:
            self.stale = f"the cached matrix is for other {', '.join(differs)}"
            return
        try:
            for c in data.get("cells", ()):
                self.cells[(c["operation"], c["data_type"], int(c["rank"]))] = c
            self.probed_s = float(data.get("seconds", 0.0))
            self.created = str(data.get("created", ""))
        except (KeyError, TypeError, ValueError):
            self.cells.clear()  # damaged: probe again and replace it
            self.stale = "the cached matrix is damaged"

    def ensure(
        self,
        operations: Iterable[Op] | None = None,
        types: Iterable[T] | None = None,
        progress: Callable[[Cell, int, int], None] | None = None,
    ) -> int:
        """Probe the cells of ``operations`` x ``types`` (None: all) not yet known; returns
        how many were probed.  Writes the file as it goes (every operation), so a run stopped
        during the probe keeps what it learnt.  ``progress(cell, operations done, operations
        to probe)`` after every cell."""
        missing_ops, tys = self._missing(operations, types)
        if not missing_ops:
            return 0
        return self._probe(missing_ops, tys, progress)

    def ensure_needed(self, operations: Iterable[Op] | None = None, types: Iterable[T] | None = None) -> int:
        """How many operations ``ensure`` would probe (0: the cache has them all)."""
        return len(self._missing(operations, types)[0])

    def _missing(self, operations, types) -> tuple[list[Op], set[T] | None]:
        from nnconform.generators.signatures import SIGNATURES

        ops = list(operations) if operations is not None else list(SIGNATURES)
        tys = set(types) if types is not None else None
        missing_ops = []
        for op in ops:
            sig = SIGNATURES.get(op)
            if sig is None:
                continue
            if any(
                (op.name, SHORT_TYPE_NAME[t], r) not in self.cells
                for t in sig.types
                if tys is None or t in tys
                for r in sig.ranks
            ):
                missing_ops.append(op)
        return missing_ops, tys

    def _probe(self, missing_ops: list[Op], tys: set[T] | None, progress) -> int:
        t0 = time.perf_counter()
        new = 0
        try:
            for i, op in enumerate(missing_ops):
                cells = probe_cells(
                    self.device,
                    samples=self.samples,
                    seed=self.seed,
                    operations=[op],
                    types=tys,
                    call_timeout=self.call_timeout,
                    progress=_per_cell(progress, i, len(missing_ops)) if progress else None,
                )
                for c in cells:
                    key = (c.operation, c.data_type, c.rank)
                    if key not in self.cells:
                        self.cells[key] = asdict(c)
                        new += 1
                if i % 16 == 15:
                    self.probed_s += time.perf_counter() - t0
                    t0 = time.perf_counter()
                    self.write()
        finally:
            # also when stopped (KeyboardInterrupt from SIGINT/SIGTERM/SIGHUP): what was probed stays
            self.probed_s += time.perf_counter() - t0
            if new:
                self.write()
        return new

    def data(self) -> dict:
        cells = sorted(self.cells.values(), key=lambda c: (c["operation"], c["data_type"], c["rank"]))
        from nnconform.generators.signatures import SIGNATURES

        total = sum(len(s.types) * len(s.ranks) for s in SIGNATURES.values())
        return {
            "format": PROBE_FORMAT,
            "driver": self.name,
            "driver_version": self.version,
            "harness_version": self.harness_version,
            "driver_spec": self.driver_spec,
            "driver_digest": self.fingerprint["digest"],
            "driver_files": self.fingerprint["files"],
            "driver_files_partial": self.fingerprint["partial"],
            "created": self.created,
            "samples": self.samples,
            "seed": self.seed,
            "probe_timeout": self.call_timeout,
            "seconds": round(self.probed_s, 1),
            "complete": len(cells) >= total,
            "summary": summarise_dicts(cells),
            "cells": cells,
        }

    def write(self) -> None:
        from nnconform.artifacts.reportdir import atomic_write

        if not self.created:
            self.created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = self.data()
        atomic_write(self.path, json.dumps(data, indent=1))
        atomic_write(self.path.parent / "capabilities.md", markdown(data))


def summarise_dicts(cells: list[dict]) -> dict:
    counts = {s: 0 for s in STATUSES}
    for c in cells:
        counts[c["status"]] = counts.get(c["status"], 0) + 1
    return counts


def summary_text(summary: dict) -> str:
    """ "1029 worked (on the probe's samples), 2 hang, ..." leaving out zero counts."""
    parts = [f"{n} {k}" + (" (on the probe's samples only)" if k == HONEST else "") for k, n in summary.items() if n]
    return ", ".join(parts) or "no cells"


def markdown(data: dict) -> str:
    s = data["summary"]
    lines = [
        f"## Capability matrix: {data['driver']} {data['driver_version']}",
        "",
        f"{len(data['cells'])} cells (operation x data type x rank), {data['samples']} one-operation "
        f"model(s) each (seed {data['seed']}), probed in {data['seconds']} s, made {data.get('created') or '?'}, "
        f"each call bounded by {data.get('probe_timeout') or 'the run'} s; driver files hashed: "
        f"{data.get('driver_files', 0)}.",
        "",
        '"worked" means worked on the probe\'s few seeded samples, no more; "crash" and "hang" cells '
        'quarantined their operation and data type (later ranks: "quarantined", not tried).',
        "",
        "| status | cells |",
        "|---|---|",
    ]
    lines += [f"| {k} | {v} |" for k, v in s.items()]
    by_type: dict[str, dict[str, int]] = {}
    for c in data["cells"]:
        row = by_type.setdefault(c["data_type"], {})
        row[c["status"]] = row.get(c["status"], 0) + 1
    lines += ["", "| data type | " + " | ".join(s) + " |", "|---" * (len(s) + 1) + "|"]
    for t, row in sorted(by_type.items()):
        lines.append(f"| {t} | " + " | ".join(str(row.get(k, 0)) for k in s) + " |")
    for status in (CRASH, HANG, OVER, UNDER):
        bad = [c for c in data["cells"] if c["status"] == status]
        if bad:
            lines += ["", f"### {status}s ({len(bad)})", ""]
            lines += [
                f"- {c['operation']} {c['data_type']} rank {c['rank']}: {c['claimed']}/{c['samples']} "
                f"claimed, {c['worked']}/{c['samples']} worked" + (f"; {c['message']}" if c["message"] else "")
                for c in bad
            ]
    return "\n".join(lines) + "\n"


class ClaimCache:
    """What the driver claims, per operation x data type x rank, asked lazily with the
    probe's one-operation models (``supported_operations`` only: cheap).  The random suite
    and the stress random models draw from the claimed cells, so every drawn operation is
    one the driver says it runs: no unsupported skips, and an over-claim still shows up as a
    failing random case with a minimal replayable model."""

    def __init__(self, device, *, samples: int = 1, seed: int = 0, max_dim: int = 6, max_elems: int = 64):
        self.device, self.samples, self.seed = device, samples, seed
        self.max_dim, self.max_elems = max_dim, max_elems
        self.cells: dict[tuple[Op, T, int], bool] = {}
        self.flow: dict[tuple[str, T], bool] = {}

    def claimed(self, op: Op, t: T, rank: int) -> bool:
        key = (Op(op), T(t), int(rank))
        if key not in self.cells:
            self.cells[key] = self._ask(*key)
        return self.cells[key]

    def _ask(self, op: Op, t: T, rank: int) -> bool:
        from nnconform.generators.graphs import GraphConfig
        from nnconform.generators.signatures import Reject
        from nnconform.generators.strategies import sample

        built = 0
        for k in range(self.samples):
            cfg = GraphConfig(
                dtype=t, n_ops=1, rank=rank, max_dim=self.max_dim, max_elems=self.max_elems, ops=(op,), shrinkable=False
            )
            try:
                case = sample(cfg, self.seed * 1000 + k)
            except (Reject, ValueError):
                continue
            built += 1
            try:
                claims = self.device.supported_operations(case.model)
            except Exception:
                return False
            if not (isinstance(claims, (list, tuple)) and claims and all(bool(c) for c in claims)):
                return False
        return built > 0

    def allowed(self, t: T, operations: Iterable[Op] | None = None, ranks: Iterable[int] | None = None) -> frozenset:
        """(operation, rank) pairs of type ``t`` the driver claims, for GraphConfig.allowed."""
        from nnconform.generators.signatures import SIGNATURES

        ops = list(operations) if operations is not None else [o for o, s in SIGNATURES.items() if T(t) in s.types]
        wanted = set(ranks) if ranks is not None else None
        out = set()
        for op in ops:
            sig = SIGNATURES.get(op)
            if sig is None or T(t) not in sig.types:
                continue
            for r in sig.ranks:
                if (wanted is None or r in wanted) and self.claimed(op, t, r):
                    out.add((op, r))
        return frozenset(out)

    def control_flow_claimed(self, kind: str, t: T) -> bool:
        """Whether the driver claims the IF / WHILE (``kind`` "if" / "while") of a random
        wrapped graph of type ``t`` in any of two seeded samples (operations inside it aside:
        those are partitioning's business)."""
        key = (kind, T(t))
        if key not in self.flow:
            from nnconform.generators.control_flow import sample_wrapped
            from nnconform.generators.signatures import Reject

            flow_op = Op.IF if kind == "if" else Op.WHILE
            claimed = False
            for k in range(2):
                try:
                    case = sample_wrapped(kind, t, self.seed * 1000 + k)
                    claims = self.device.supported_operations(case.model)
                except (Reject, ValueError):
                    continue
                except Exception:
                    break
                ops = case.model.main.operations
                if (
                    isinstance(claims, (list, tuple))
                    and len(claims) == len(ops)
                    and any(bool(c) for c, op in zip(claims, ops) if op.type == flow_op)
                ):
                    claimed = True
                    break
            self.flow[key] = claimed
        return self.flow[key]
