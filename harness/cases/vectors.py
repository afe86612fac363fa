"""Loading AOSP CTS golden vectors (JSON, format in ``vectors_data/SCHEMA.md``) as nnconform models.

A vectors tree holds one folder per NNAPI feature level (``V1_0`` ... ``V1_3_cts_only``,
``AIDL_V2``, ``AIDL_V3``, and whatever a later import adds), each with one JSON file of test
cases per AOSP spec file.  Every folder is discovered; the folder is the feature level of its
cases.  The tree is, in this order: the one given by an option (``--nn-vectors`` /
``--vectors``), the ``NNCONFORM_VECTORS`` environment variable, or the copy bundled with the
package (``nnconform.vectors_data``, unpacked once into a cache directory).

Developer tools:

    python -m nnconform.cases.vectors [DIR] --op CONV_2D -v   run the reference over matching vectors
    python -m nnconform.cases.vectors pack SRC_DIR [--out D]   regenerate the bundled, compressed copy
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence, cast

import numpy as np

from nnconform.errors import DeadlineMissed, NnError, NotImplementedOperation, OpFailure, ValidationError
from nnconform.ir import (
    ChannelQuant,
    Lifetime,
    Model,
    Operand,
    OperandType,
    Operation,
    OperationType,
    Subgraph,
    type_info,
)
from nnconform.reference.ops.feature_levels import folder_level

ENV_VAR = "NNCONFORM_VECTORS"
# Files at the top of a vectors tree that are not test cases.
NOT_CASES = {"index.json"}


def default_root() -> Path:
    """$NNCONFORM_VECTORS if set, else the bundled vectors (unpacked on first use)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    from nnconform.vectors_data import bundled_root

    return bundled_root()


def resolve_root(option: str | os.PathLike | None = None) -> Path:
    """The vectors tree to use: ``option`` when given, else :func:`default_root`."""
    return Path(option) if option else default_root()


@dataclass(frozen=True, eq=False)
class VectorCase:
    name: str
    spec_dir: str
    spec: str
    model: Model
    inputs: tuple[np.ndarray | None, ...]
    outputs: tuple[np.ndarray, ...]
    ignored: tuple[bool, ...]
    expect_failure: bool
    multinomial_tolerance: float
    operations: tuple[str, ...]
    path: str
    variations: tuple[str, ...] = ()

    @property
    def test_id(self) -> str:
        return f"{self.spec_dir}/{self.name}"

    @property
    def feature_level(self) -> int | None:
        """The NNAPI feature level of the case's folder (None for a folder named otherwise)."""
        return folder_level(self.spec_dir)


def _decode_values(values: Sequence, t: OperandType, dims: Sequence[int]) -> np.ndarray:
    info = type_info(t)
    if info.is_float:
        # Parse as float32 first, then narrow: AOSP builds fp16 buffers that way.
        arr = np.array(
            [float(v) for v in values] if any(isinstance(v, str) for v in values) else values, dtype=np.float32
        )
        arr = arr.astype(info.dtype)
    elif info.dtype == np.bool_:
        arr = np.array(values, dtype=np.bool_)
    else:
        arr = np.array(values, dtype=np.int64).astype(info.dtype)
    if info.is_scalar:
        return arr.reshape(())
    if dims and all(d > 0 for d in dims) and arr.size == int(np.prod(dims)):
        return arr.reshape(tuple(dims))
    return arr


def _subgraph(d: dict) -> Subgraph:
    operands = []
    for od in d["operands"]:
        t = OperandType[od["type"]]
        lifetime = Lifetime[od["lifetime"]]
        dims = tuple(int(x) for x in od["dimensions"])
        cq = od.get("channel_quant")
        channel_quant = None
        if cq is not None and not cq.get("hidden", False):
            channel_quant = ChannelQuant(tuple(float(s) for s in cq["scales"]), int(cq["channel_dim"]))
        value: np.ndarray | int | None = None
        if lifetime == Lifetime.SUBGRAPH:
            value = int(od["value"][0])
        elif od.get("value") is not None and lifetime in (Lifetime.CONSTANT_COPY, Lifetime.CONSTANT_REFERENCE):
            value = _decode_values(od["value"], t, dims)
            value.setflags(write=False)
        operands.append(
            Operand(
                t,
                dims,
                float(od.get("scale", 0.0)),
                int(od.get("zero_point", 0)),
                lifetime,
                value,
                channel_quant,
                od.get("name") or "",
                od.get("num_consumers"),
            )
        )
    operations = tuple(
        Operation(OperationType[o["type"]], tuple(o["inputs"]), tuple(o["outputs"])) for o in d["operations"]
    )
    return Subgraph(
        tuple(operands), operations, tuple(d["input_indexes"]), tuple(d["output_indexes"]), d.get("name") or ""
    )


def case_from_dict(d: dict, path: str = "") -> VectorCase:
    m = d["model"]
    model = Model(
        _subgraph(m["main"]),
        tuple(_subgraph(s) for s in m.get("referenced", [])),
        bool(m.get("relax_float32_to_float16", False)),
    )

    def arrays(entries, are_inputs: bool) -> tuple[np.ndarray | None, ...]:
        out: list[np.ndarray | None] = []
        for e in entries:
            op = model.main.operands[e["operand"]]
            if not e["values"] and not op.info.is_scalar:
                if are_inputs:
                    # AOSP's harness passes a zero-length input buffer as "no value" (an
                    # omitted optional input, e.g. LSTM's unused peephole weights).
                    out.append(None)
                else:
                    # An empty expected output is a zero-sized tensor of the model's shape.
                    out.append(np.zeros(tuple(op.dimensions) or (0,), dtype=op.info.dtype))
                continue
            out.append(_decode_values(e["values"], op.type, op.dimensions))
        return tuple(out)

    ops = sorted({op.name for op in model.all_operations()})
    # The folder a case lives in is its feature level, whatever the file says.
    spec_dir = Path(path).parent.name if path else d.get("spec_dir", "")
    return VectorCase(
        d["name"],
        spec_dir,
        d.get("spec", ""),
        model,
        arrays(d["inputs"], True),
        # cast: only inputs can be None (an omitted optional input)
        cast("tuple[np.ndarray, ...]", arrays(d["outputs"], False)),
        tuple(bool(e.get("ignored", False)) for e in d["outputs"]),
        bool(d.get("expect_failure", False)),
        float(d.get("multinomial_tolerance", 0) or 0),
        tuple(ops),
        path,
        tuple(d.get("variations") or ()),
    )


def folder_key(name: str) -> tuple:
    """Feature-level order: V1_0 ... V1_3_cts_only, AIDL_V2, AIDL_V3, ...; other names last."""
    level = folder_level(name)
    return (level if level is not None else 1 << 30, name)


def vector_folders(root: Path) -> list[Path]:
    """Every folder of the tree that holds *.json files, in feature-level order.  A directory
    with no such folder but with vector files of its own is itself the one folder."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"vectors directory {root} does not exist")
    subs = [d for d in root.iterdir() if d.is_dir() and not d.name.startswith((".", "_")) and any(d.glob("*.json"))]
    if not subs and any(f.name not in NOT_CASES for f in root.glob("*.json")):
        return [root]
    return sorted(subs, key=lambda d: folder_key(d.name))


def vector_files(root: Path, dirs: Iterable[str] | None = None) -> list[Path]:
    """The JSON files of every folder (or only of the folders named in ``dirs``)."""
    wanted = set(dirs) if dirs else None
    files: list[Path] = []
    for d in vector_folders(root):
        if wanted is None or d.name in wanted:
            files.extend(f for f in sorted(d.glob("*.json")) if f.name not in NOT_CASES)
    return files


def _case_ops(d: dict) -> set[str]:
    return {o["type"] for sg in (d["model"]["main"], *d["model"].get("referenced", [])) for o in sg["operations"]}


def _ops_facts(raw) -> list[list[str]] | None:
    """The sorted operation names of each case of a decoded file; None when the file is not
    a list of well-formed cases (load_cases then reads it and fails on it as before)."""
    try:
        return [sorted(_case_ops(d)) for d in raw]
    except (KeyError, TypeError, AttributeError):
        return None


@functools.lru_cache(maxsize=8)
def _ops_index(root: Path):
    """Which operations each case of each file of ``root`` uses, kept between processes
    (nnconform.cases.vector_index, its own file): an ops-filtered load opens only the files that
    have a matching case.  Without it, the first such load in a process decoded all 117 MB of
    JSON, and every pytest worker collecting tests/ops paid that again."""
    from nnconform.cases.vector_index import VectorIndex, code_key

    def derive(path: Path):
        with open(path) as fh:
            return _ops_facts(json.load(fh))

    return VectorIndex(root, code_key(__file__), derive, kind="ops")


def load_cases(
    root: Path | str | None = None,
    ops: Iterable[str] | None = None,
    dirs: Iterable[str] | None = None,
    name_contains: str | None = None,
    within: Iterable[str] | None = None,
) -> list[VectorCase]:
    """All cases under ``root`` (optionally only those using any of ``ops``, and only those
    whose every operation is one of ``within``)."""
    root = Path(root) if root is not None else default_root()
    wanted = {o.upper() for o in ops} if ops else None
    allowed = {o.upper() for o in within} if within is not None else None

    def takes(case_ops) -> bool:
        return (wanted is None or not wanted.isdisjoint(case_ops)) and (allowed is None or allowed.issuperset(case_ops))

    index = _ops_index(root.resolve()) if wanted is not None or allowed is not None else None
    cases = []
    for f in vector_files(root, dirs):
        known = None
        if index is not None:
            known = index.known(f)
            if known is not None and not any(takes(k) for k in known):
                continue  # no case here is wanted: skip parsing the file (the MobileNets are 40 MB)
        with open(f) as fh:
            raw = json.load(fh)
        if index is not None and known is None:
            facts = _ops_facts(raw)
            if facts is not None:
                index.remember(f, facts)
        for d in raw:
            if name_contains and name_contains not in d["name"]:
                continue
            if index is not None and not takes(_case_ops(d)):
                continue
            cases.append(case_from_dict(d, str(f)))
    if index is not None and index.derived:
        index.save(vector_files(root))  # every file's entry, not only those of ``dirs``
    return cases


def check_case(case: VectorCase) -> tuple[str, str]:
    """Run one vector on the reference executor: ("pass"|"fail"|"not_implemented"|"error", message)."""
    from nnconform.ir.validation import validate_model
    from nnconform.reference.executor import Executor
    from nnconform.verdict.criteria import compare

    try:
        validate_model(case.model)
        actual = Executor(case.model).run(list(case.inputs))
    except NotImplementedOperation as e:
        return "not_implemented", str(e)
    except (ValidationError, OpFailure, DeadlineMissed) as e:
        if case.expect_failure:
            return "pass", f"failed as expected: {e}"
        return "fail", f"{type(e).__name__}: {e}"
    except NnError as e:
        return "error", f"{type(e).__name__}: {e}"
    if case.expect_failure:
        return "fail", "expected the model or its execution to fail, but it ran"
    if case.multinomial_tolerance > 0:
        from nnconform.reference.ops.random_multinomial import check_multinomial

        probabilities = case.inputs[0]
        assert probabilities is not None  # RANDOM_MULTINOMIAL's input 0 is never omitted
        ok, msg = check_multinomial(probabilities, actual[0], case.multinomial_tolerance)
        return ("pass", "") if ok else ("fail", msg)
    cmp = compare(case.model, list(case.outputs), actual, ignored=list(case.ignored))
    return ("pass", "") if cmp.passed else ("fail", cmp.message)


def pack_main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(
        prog="python -m nnconform.cases.vectors pack",
        description="Regenerate the bundled, compressed vectors (nnconform.vectors_data) from a vectors tree.",
    )
    p.add_argument("src", help="vectors tree, e.g. ../shared/aosp_vectors")
    p.add_argument("--out", default=None, help="output directory (default: the vectors_data package)")
    a = p.parse_args(argv)
    from nnconform.vectors_data import pack

    t0 = time.perf_counter()
    try:
        man = pack(Path(a.src), Path(a.out) if a.out else None)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for folder, info in man["folders"].items():
        print(f"  {folder:14s} {info['files']:4d} files {info['cases']:6d} cases -> {info['archive']}")
    print(f"{man['total_cases']} cases in {man['total_files']} files packed in {time.perf_counter() - t0:.1f}s")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["pack"]:
        return pack_main(argv[1:])
    p = argparse.ArgumentParser(
        prog="python -m nnconform.cases.vectors",
        description="Run AOSP golden vectors on the reference executor "
        "(`pack SRC` regenerates the bundled copy instead).",
    )
    p.add_argument(
        "root", nargs="?", default=None, help="vectors directory (default: $NNCONFORM_VECTORS or the bundled copy)"
    )
    p.add_argument("--op", action="append", help="only vectors using this operation (repeatable)")
    p.add_argument("--dir", action="append", help="only this feature-level folder (V1_0 ... AIDL_V3; repeatable)")
    p.add_argument("--name", help="only vectors whose name contains this")
    p.add_argument("-v", "--verbose", action="count", default=0, help="print failures (-vv: all of them)")
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    from nnconform.vectors_data import BundleError

    try:
        cases = load_cases(a.root, a.op, a.dir, a.name)
    except (FileNotFoundError, KeyError, json.JSONDecodeError, BundleError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    counts: Counter = Counter()
    per_dir: dict[str, Counter] = defaultdict(Counter)
    failures = []
    missing: Counter = Counter()
    for c in cases:
        status, msg = check_case(c)
        counts[status] += 1
        per_dir[c.spec_dir][status] += 1
        if status in ("fail", "error"):
            failures.append((c.test_id, msg))
        elif status == "not_implemented":
            missing[msg] += 1
    print(
        f"{len(cases)} vectors in {time.perf_counter() - t0:.1f}s: "
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    )
    for d in sorted(per_dir, key=folder_key):
        print(f"  {d:14s} " + ", ".join(f"{k} {v}" for k, v in sorted(per_dir[d].items())))
    if missing and a.verbose:
        print("not implemented:")
        for msg, n in missing.most_common():
            print(f"  {n:5d}  {msg}")
    limit = None if a.verbose >= 2 else 20
    for tid, msg in failures[:limit] if a.verbose else []:
        print(f"FAIL {tid}: {msg}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
