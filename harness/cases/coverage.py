"""Operation coverage, generated from the registry: for every NNAPI operation and data type,
is it implemented by the reference executor, from which NNAPI feature level NNAPI has it
(``ops/feature_levels.py``), how many hand-checked examples exercise it, and how many golden
vectors passed (from a vectors-suite results file, when given).

    nnconform coverage [--results nnconform-report/results.jsonl] [--format md|csv]
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from nnconform.ir import SHORT_TYPE_NAME, Model, OperationType
from nnconform.reference.ops.feature_levels import feature_level
from nnconform.reference.ops.registry import REGISTRY, load_all

TOTAL = "*"  # key of the per-operation vector totals

# Operations outside the executor's scope by design.
_EXCLUDED = {OperationType.OEM_OPERATION}


@dataclass
class CoverageRow:
    operation: str
    code: int
    implemented: list[str]  # data types
    examples: dict[str, int] = field(default_factory=dict)  # data type -> count
    feature_levels: dict[str, int] = field(default_factory=dict)  # data type -> NNAPI feature level
    vectors_passed: dict[str, int] = field(default_factory=dict)
    vectors_run: dict[str, int] = field(default_factory=dict)


def primary_types(model: Model) -> dict[str, set[str]]:
    """Operation name -> short names of the data type each of its uses runs on."""
    out: dict[str, set[str]] = defaultdict(set)
    for sg in model.subgraphs():
        for op in sg.operations:
            opdef = REGISTRY.get(op.type) if isinstance(op.type, OperationType) else None
            k = opdef.primary_input if opdef else 0
            if op.inputs and k < len(op.inputs):
                t = sg.operands[op.inputs[k]].type
                out[op.name].add(SHORT_TYPE_NAME.get(t, t.name))
    return out


def example_counts() -> dict[str, Counter]:
    from nnconform.suites.examples import all_examples

    counts: dict[str, Counter] = defaultdict(Counter)
    for ex in all_examples():
        for name, types in primary_types(ex.model).items():
            for t in types:
                counts[name][t] += 1
    return counts


def vector_counts(results) -> tuple[dict[str, Counter], dict[str, Counter]]:
    """From a vectors-suite results file (or its records, already read): (passed, run) per
    operation and data type.  The data type of a row is that of its main-graph inputs and
    outputs."""
    from nnconform.verdict.results import read_results

    passed: dict[str, Counter] = defaultdict(Counter)
    run: dict[str, Counter] = defaultdict(Counter)
    records = read_results(results) if isinstance(results, (str, os.PathLike)) else results
    for r in records:
        if r.suite != "vectors" or r.outcome == "SKIP":
            continue
        for op in r.operations:
            # TOTAL counts each vector once; a vector with several data types also counts
            # once under each of them.
            for t in [TOTAL, *(r.data_types or ["?"])]:
                run[op][t] += 1
                if r.outcome == "PASS":
                    passed[op][t] += 1
    return passed, run


def coverage(results=None) -> list[CoverageRow]:
    """The coverage table; ``results``: a results file or its records (vectors passed and run
    are counted from them), or None."""
    load_all()
    ex = example_counts()
    passed, run = vector_counts(results) if results is not None else ({}, {})
    rows = []
    for t in OperationType:
        if t in _EXCLUDED:
            continue
        opdef = REGISTRY.get(t)
        impl = [SHORT_TYPE_NAME.get(d, d.name) for d in opdef.data_types] if opdef else []
        rows.append(
            CoverageRow(
                t.name,
                int(t),
                impl,
                dict(ex.get(t.name, {})),
                {d: feature_level(t, d) for d in impl},
                dict(passed.get(t.name, {})),
                dict(run.get(t.name, {})),
            )
        )
    return rows


def summary(rows: list[CoverageRow]) -> str:
    impl = sum(1 for r in rows if r.implemented)
    pairs = sum(len(r.implemented) for r in rows)
    with_ex = sum(1 for r in rows for t in r.implemented if r.examples.get(t))
    late = sum(1 for r in rows for t in r.implemented if r.feature_levels.get(t, 0) >= 5)
    return (
        f"{impl} of {len(rows)} operations implemented; {pairs} operation x data type pairs, "
        f"{with_ex} of them with hand-checked examples, {late} of them from NNAPI feature level 5 "
        f"or later"
    )


LEGEND = (
    "The feature level column gives, for each data type in the order of the types column, the "
    "NNAPI feature level from which NNAPI accepts the operation on it: 1 to 4 are HAL 1.0 to 1.3 "
    "(Android 8.1 to 11), 5 is Android 12, and 6 and 7 are the later NNAPI module releases."
)


def types_cell(r: CoverageRow) -> str:
    return ", ".join(r.implemented) if r.implemented else "**not implemented**"


def levels_cell(r: CoverageRow) -> str:
    """The feature level of each implemented type, in the order of the types column."""
    return ", ".join(str(r.feature_levels[t]) for t in r.implemented) if r.implemented else "-"


def to_markdown(rows: list[CoverageRow]) -> str:
    lines = [
        "| code | operation | data types implemented | feature level | examples | vectors passed |",
        "|---:|---|---|---|---:|---:|",
    ]
    for r in rows:
        exs = sum(r.examples.values())
        vp = r.vectors_passed.get(TOTAL, 0)
        vr = r.vectors_run.get(TOTAL, 0)
        lines.append(
            f"| {r.code} | {r.operation} | {types_cell(r)} | {levels_cell(r)} | {exs} | {f'{vp}/{vr}' if vr else '-'} |"
        )
    return "\n".join(lines)


def to_csv_rows(rows: list[CoverageRow]) -> list[dict]:
    out = []
    for r in rows:
        types = sorted((set(r.implemented) | set(r.examples) | set(r.vectors_run)) - {TOTAL}) or [""]
        for t in types:
            out.append(
                {
                    "operation": r.operation,
                    "code": r.code,
                    "data_type": t,
                    "implemented": t in r.implemented,
                    "feature_level": r.feature_levels.get(t, ""),
                    "examples": r.examples.get(t, 0),
                    "vectors_passed": r.vectors_passed.get(t, 0),
                    "vectors_run": r.vectors_run.get(t, 0),
                }
            )
    return out


README_START = "<!-- coverage:start (generated by `nnconform coverage --write-readme README.md`) -->"
README_END = "<!-- coverage:end -->"


def update_readme(path: Path, rows: list[CoverageRow]) -> None:
    """Replace the table between the coverage markers of a README."""
    text = Path(path).read_text()
    if README_START not in text or README_END not in text:
        raise ValueError(f"{path}: no coverage markers ({README_START!r} ... {README_END!r})")
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    block = f"{README_START}\n{summary(rows)}.\n\n{LEGEND}\n\n{to_markdown(rows)}\n{README_END}"
    Path(path).write_text(head + block + tail)


def readme_rows(path: Path) -> dict[str, tuple[str, str, str]]:
    """operation -> (data types, feature level, examples) columns as the README states them."""
    text = Path(path).read_text()
    block = text.split(README_START, 1)[1].split(README_END, 1)[0]
    out = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0].isdigit():
            out[cells[1]] = (cells[2], cells[3], cells[4])
    return out
