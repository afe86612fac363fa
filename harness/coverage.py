"""Operation coverage, generated from the registry: for every NNAPI operation and data type,
is it implemented by the reference executor, how many hand-checked examples exercise it, and
how many golden vectors passed (from a vectors-suite results file, when given).

    nnconform coverage [--results nnconform-report/results.jsonl] [--format md|csv]
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from .ir import SHORT_TYPE_NAME, Model, OperationType
from .ops.registry import REGISTRY, load_all

# Operations outside the executor's scope by design.
_EXCLUDED = {OperationType.OEM_OPERATION}


@dataclass
class CoverageRow:
    operation: str
    code: int
    implemented: list[str]                                   # data types
    examples: dict[str, int] = field(default_factory=dict)   # data type -> count
    vectors_passed: dict[str, int] = field(default_factory=dict)
    vectors_run: dict[str, int] = field(default_factory=dict)


def _primary_types(model: Model) -> dict[str, set[str]]:
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
    from .suites.examples import all_examples
    counts: dict[str, Counter] = defaultdict(Counter)
    for ex in all_examples():
        for name, types in _primary_types(ex.model).items():
            for t in types:
                counts[name][t] += 1
    return counts


def vector_counts(results_path: Path) -> tuple[dict[str, Counter], dict[str, Counter]]:
    """From a vectors-suite results file: (passed, run) per operation and data type.  The
    data type of a row is that of its main-graph inputs and outputs."""
    from .results import read_results
    passed: dict[str, Counter] = defaultdict(Counter)
    run: dict[str, Counter] = defaultdict(Counter)
    for r in read_results(results_path):
        if r.suite != "vectors" or r.outcome == "SKIP":
            continue
        for op in r.operations:
            for t in r.data_types or ["?"]:
                run[op][t] += 1
                if r.outcome == "PASS":
                    passed[op][t] += 1
    return passed, run


def coverage(results_path: Path | None = None) -> list[CoverageRow]:
    load_all()
    ex = example_counts()
    passed, run = vector_counts(results_path) if results_path else ({}, {})
    rows = []
    for t in OperationType:
        if t in _EXCLUDED:
            continue
        opdef = REGISTRY.get(t)
        impl = [SHORT_TYPE_NAME.get(d, d.name) for d in opdef.data_types] if opdef else []
        rows.append(CoverageRow(t.name, int(t), impl, dict(ex.get(t.name, {})),
                                dict(passed.get(t.name, {})), dict(run.get(t.name, {}))))
    return rows


def summary(rows: list[CoverageRow]) -> str:
    impl = sum(1 for r in rows if r.implemented)
    pairs = sum(len(r.implemented) for r in rows)
    with_ex = sum(1 for r in rows for t in r.implemented if r.examples.get(t))
    return (f"{impl} of {len(rows)} operations implemented; {pairs} operation x data type pairs, "
            f"{with_ex} of them with hand-checked examples")


def to_markdown(rows: list[CoverageRow]) -> str:
    lines = ["| code | operation | data types implemented | examples | vectors passed |",
             "|---:|---|---|---:|---:|"]
    for r in rows:
        impl = ", ".join(r.implemented) if r.implemented else "**not implemented**"
        exs = sum(r.examples.values())
        vp = sum(r.vectors_passed.values())
        vr = sum(r.vectors_run.values())
        lines.append(f"| {r.code} | {r.operation} | {impl} | {exs} | {f'{vp}/{vr}' if vr else '-'} |")
    return "\n".join(lines)


def to_csv_rows(rows: list[CoverageRow]) -> list[dict]:
    out = []
    for r in rows:
        types = sorted(set(r.implemented) | set(r.examples) | set(r.vectors_run)) or [""]
        for t in types:
            out.append({"operation": r.operation, "code": r.code, "data_type": t,
                        "implemented": t in r.implemented, "examples": r.examples.get(t, 0),
                        "vectors_passed": r.vectors_passed.get(t, 0), "vectors_run": r.vectors_run.get(t, 0)})
    return out
