"""The domain-coverage ledger: which value, quantisation and shape classes each operation x
data type really received (issue 20).

Every generated case carries ``case.domain``: ``"OP/type" -> sorted classes`` where a class is

- ``value:<class>``: a value class of ``values.VALUE_CLASSES`` found (``values.classify``) in
  the operation's data inputs of the case's type;
- ``quant:<class>``: ``scale_tiny`` (< 1e-3), ``scale_huge`` (> 10), ``zp_min`` / ``zp_max``
  (zero point at a stored extreme), and for operations with several quantised inputs
  ``equal_scales`` or ``ratio_extreme`` (largest / smallest scale >= 100);
- ``shape:<class>``: ``rank1`` .. ``rank4``, ``broadcast`` (data inputs of different
  dimensions), and the shape classes drawn on purpose (``signatures.SHAPE_CLASSES``):
  ``zero_sized`` (a data input with a 0 dimension), ``broadcast_ranks`` (rank-1 and rank-4
  data inputs together), ``max_dim`` (a dimension as long as the configuration allows) and
  ``unknown_dims`` (the operation's output is a model output of unknown dimensions).

``case.meaningful`` holds, per key, the value classes the operation declares meaningful
(``signatures.declared_classes``) that its inputs' value ranges can hold at all, and the
shape classes it declares (``signatures.declared_shapes``).  A suite
puts both in its row (``extra.domain`` / ``extra.domain_meaningful``), and
:func:`aggregate` / :func:`holes` / :func:`render_markdown` turn rows into the ledger: per
operation x type, the classes drawn and the meaningful ones never drawn (a visible hole).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

from nnconform.generators import values as V
from nnconform.ir import SHORT_TYPE_NAME
from nnconform.ir import OperandType as T

QUANT_CLASSES = ("scale_tiny", "scale_huge", "zp_min", "zp_max")


def key(op, dtype) -> str:
    return f"{op.name}/{SHORT_TYPE_NAME[T(dtype)]}"


def quant_classes(scale: float, zp: int, t: T) -> set[str]:
    out = set()
    if scale < 1e-3:
        out.add("scale_tiny")
    elif scale > 10:
        out.add("scale_huge")
    lo, hi = V.stored_range(t)
    if zp == lo:
        out.add("zp_min")
    elif zp == hi:
        out.add("zp_max")
    return out


def record(
    domain: dict,
    meaningful: dict,
    op,
    dtype,
    data: list,
    sig_classes,
    ranges,
    shape_classes: tuple = (),
    max_dim: int | None = None,
) -> None:
    """Add one operation's classes.  ``data``: (operand, value) of its data inputs of the
    case's type; ``ranges``: their (lo, hi) value ranges (None: default); ``shape_classes``:
    the shape classes it declares meaningful; ``max_dim``: the configuration's longest
    dimension."""
    k = key(op, dtype)
    got = domain.setdefault(k, set())
    want = meaningful.setdefault(k, set())
    scales = []
    for (operand, value), (lo, hi) in zip(data, ranges):
        t = operand.type
        if value is not None:
            got.update("value:" + c for c in V.classify(value, t, operand.zero_point))
        for c in sig_classes(t):
            if V.class_values(t, c, lo, hi, operand.zero_point).size or c == "negative" and (lo is None or lo < 0):
                want.add("value:" + c)
        if V.type_family(t) == "quant":
            got.update("quant:" + c for c in quant_classes(operand.scale, operand.zero_point, t))
            scales.append(operand.scale)
        dims = tuple(operand.dimensions)
        got.add(f"shape:rank{len(dims)}")
        if any(d == 0 for d in dims):
            got.add("shape:zero_sized")
        if max_dim is not None and max_dim > 1 and max_dim in dims:
            got.add("shape:max_dim")
    if len(scales) > 1:
        lo_s, hi_s = min(scales), max(scales)
        got.add(
            "quant:equal_scales"
            if lo_s == hi_s
            else "quant:ratio_extreme"
            if hi_s >= 100 * lo_s
            else "quant:different_scales"
        )
    dims_seen = {tuple(o.dimensions) for o, _ in data}
    if len(dims_seen) > 1:
        got.add("shape:broadcast")
    if {1, 4} <= {len(d) for d in dims_seen}:
        got.add("shape:broadcast_ranks")
    want.update("shape:" + c for c in shape_classes)


def aggregate(rows: Iterable[dict]) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(drawn, meaningful) per "OP/type" over result rows (their extra.domain*)."""
    drawn: dict[str, set[str]] = {}
    meaningful: dict[str, set[str]] = {}
    for r in rows:
        extra = (r.get("extra") if isinstance(r, dict) else getattr(r, "extra", None)) or {}
        for k, v in (extra.get("domain") or {}).items():
            drawn.setdefault(k, set()).update(v)
        for k, v in (extra.get("domain_meaningful") or {}).items():
            meaningful.setdefault(k, set()).update(v)
    return drawn, meaningful


def holes(drawn: dict, meaningful: dict) -> dict[str, list[str]]:
    """Meaningful value and shape classes never drawn, per "OP/type" (empty dict: no hole)."""
    out = {}
    for k, want in sorted(meaningful.items()):
        miss = sorted(want - drawn.get(k, set()))
        if miss:
            out[k] = miss
    return out


def read_rows(path: str | Path) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a torn last line of a killed run
    return rows


def table_rows(drawn: dict, meaningful: dict) -> list[list[str]]:
    """[operation/type, value classes, quantisation, shapes, never drawn] per pair."""
    h = holes(drawn, meaningful)
    out = []
    for k in sorted(set(drawn) | set(meaningful)):
        d = drawn.get(k, set())
        part = [
            ", ".join(sorted(c.split(":", 1)[1] for c in d if c.startswith(p + ":")))
            for p in ("value", "quant", "shape")
        ]
        out.append([k, *part, ", ".join(c.split(":", 1)[1] for c in h.get(k, []))])
    return out


def render_markdown(drawn: dict, meaningful: dict) -> str:
    """The ledger as a Markdown table: classes drawn, and the holes."""
    h = holes(drawn, meaningful)
    keys = sorted(set(drawn) | set(meaningful))
    lines = [
        f"{len(keys)} operation x type pairs; {len(h)} with a meaningful value or shape class never drawn.",
        "",
        "| operation/type | value classes drawn | quantisation | shapes | never drawn |",
        "|---|---|---|---|---|",
    ]
    for k in keys:
        d = drawn.get(k, set())
        part = {
            p: ", ".join(sorted(c.split(":", 1)[1] for c in d if c.startswith(p + ":")))
            for p in ("value", "quant", "shape")
        }
        lines.append(
            f"| {k} | {part['value']} | {part['quant']} | {part['shape']} | "
            f"{', '.join(c.split(':', 1)[1] for c in h.get(k, []))} |"
        )
    return "\n".join(lines) + "\n"


def as_json(domain: dict) -> dict:
    return {k: sorted(v) for k, v in sorted(domain.items())}


def main(argv=None) -> int:
    """``python -m nnconform.generators.ledger REPORT_DIR``: print the ledger of a run."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m nnconform.generators.ledger REPORT_DIR|results.jsonl", file=sys.stderr)
        return 2
    p = Path(args[0])
    if p.is_dir():
        p = p / "results.jsonl"
    drawn, meaningful = aggregate(read_rows(p))
    sys.stdout.write(render_markdown(drawn, meaningful))
    return 1 if holes(drawn, meaningful) else 0


if __name__ == "__main__":
    raise SystemExit(main())
