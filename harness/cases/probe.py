"""Capability probe: what a driver claims against what it actually computes.

For every operation the random generator covers (``generators.signatures``), every data type
of it and every rank, the probe builds a few tiny one-operation models from fixed seeds (the
signatures draw the notable parameters: layout, fused activation, axes, quantisation, ...),
then per model:

- *claimed*: ``supported_operations`` says True;
- *works*: ``prepare`` + ``execute`` succeed and the outputs meet the operation's random-graph
  criteria against the reference executor (asked whatever the claim was).

A cell (operation x type x rank) is **honest** when claim and behaviour agree on every
sample, an **over-claim** when a claimed sample fails, an **under-claim** when a refused
sample works.  The matrix is JSON (``capabilities-<driver>-<version>.json``
in the report directory, reused by later runs of the same driver version) and Markdown
(``capabilities.md``); a run's report shows the summary line among its run facts.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable

from nnconform.ir import SHORT_TYPE_NAME, Request
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op

HONEST, HONEST_NO, OVER, UNDER, NOT_BUILT = "honest", "honest-unsupported", "over-claim", "under-claim", "not-built"
PROBE_FORMAT = 1


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


def _describe(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text[:200]}" if text else type(e).__name__


def op_criteria(op: Op):
    from nnconform.verdict.criteria import RELAXED, STRICT, criteria_for_operation

    newer = {Op.MIRROR_PAD: STRICT, Op.REVERSE: STRICT, Op.PACK: STRICT, Op.BATCH_MATMUL: RELAXED}
    return newer.get(op) or criteria_for_operation(op, "1.3")


def _try_sample(device, case, criteria) -> tuple[bool, bool, str]:
    """(claimed, works, message) of one model.  Nothing the driver does escapes."""
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
        return False, False, f"supported_operations: {_describe(e)}"
    expected = Executor(model).run(case.inputs)
    try:
        prepared = device.prepare(model)
    except Exception as e:
        return claimed, False, f"prepare: {_describe(e)}"
    try:
        result = prepared.execute(Request.from_arrays(model, case.inputs))
    except Exception as e:
        result = e
    try:
        prepared.release()
    except Exception as e:
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
) -> list[Cell]:
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
            for rank in sig.ranks:
                cell = Cell(op.name, SHORT_TYPE_NAME[t], rank)
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
                    claimed, works, msg = _try_sample(device, case, crit)
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


class CapabilityCache:
    """The probe's cells for one driver name and version, kept in the report directory and
    filled on demand: a run that needs only some cells (the random suite's ``-k`` selection)
    probes only those; ``nnconform probe`` fills them all.  Cells from another harness
    version, sample count or seed are not reused."""

    def __init__(self, device, report_dir: Path | str, *, samples: int = 2, seed: int = 0):
        from nnconform import __version__

        self.device, self.samples, self.seed = device, samples, seed
        self.name = str(getattr(device, "name", "driver"))
        self.version = str(getattr(device, "version", "0"))
        self.path = cache_path(report_dir, self.name, self.version)
        self.harness_version = __version__
        self.cells: dict[tuple[str, str, int], dict] = {}
        self.probed_s = 0.0
        self._read()

    def _read(self) -> None:
        if not self.path.is_file() or self.path.is_symlink():
            return
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return  # unreadable: probe again and replace it
        if (
            data.get("format") == PROBE_FORMAT
            and data.get("harness_version") == self.harness_version
            and data.get("samples") == self.samples
            and data.get("seed") == self.seed
        ):
            for c in data.get("cells", ()):
                self.cells[(c["operation"], c["data_type"], int(c["rank"]))] = c
            self.probed_s = float(data.get("seconds", 0.0))

    def ensure(self, operations: Iterable[Op] | None = None, types: Iterable[T] | None = None) -> int:
        """Probe the cells of ``operations`` x ``types`` (None: all) not yet known; returns
        how many were probed.  Writes the file when anything was."""
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
        if not missing_ops:
            return 0
        t0 = time.perf_counter()
        new = [
            c
            for c in probe_cells(self.device, samples=self.samples, seed=self.seed, operations=missing_ops, types=tys)
            if (c.operation, c.data_type, c.rank) not in self.cells
        ]
        for c in new:
            self.cells[(c.operation, c.data_type, c.rank)] = asdict(c)
        self.probed_s += time.perf_counter() - t0
        self.write()
        return len(new)

    def data(self) -> dict:
        cells = sorted(self.cells.values(), key=lambda c: (c["operation"], c["data_type"], c["rank"]))
        from nnconform.generators.signatures import SIGNATURES

        total = sum(len(s.types) * len(s.ranks) for s in SIGNATURES.values())
        return {
            "format": PROBE_FORMAT,
            "driver": self.name,
            "driver_version": self.version,
            "harness_version": self.harness_version,
            "samples": self.samples,
            "seed": self.seed,
            "seconds": round(self.probed_s, 1),
            "complete": len(cells) >= total,
            "summary": summarise_dicts(cells),
            "cells": cells,
        }

    def write(self) -> None:
        from nnconform.artifacts.reportdir import atomic_write

        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = self.data()
        atomic_write(self.path, json.dumps(data, indent=1))
        atomic_write(self.path.parent / "capabilities.md", markdown(data))


def summarise_dicts(cells: list[dict]) -> dict:
    counts = {s: 0 for s in (HONEST, HONEST_NO, OVER, UNDER, NOT_BUILT)}
    for c in cells:
        counts[c["status"]] += 1
    return counts


def markdown(data: dict) -> str:
    s = data["summary"]
    lines = [
        f"## Capability matrix: {data['driver']} {data['driver_version']}",
        "",
        f"{len(data['cells'])} cells (operation x data type x rank), {data['samples']} one-operation "
        f"model(s) each (seed {data['seed']}), probed in {data['seconds']} s.",
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
    for status in (OVER, UNDER):
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
