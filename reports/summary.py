"""``summary.json``: what a CI job needs to know about a run, in one small file.

    {"format": "nnconform-summary/1", "status": "complete: 412 of 412 cases", "complete": true,
     "driver": ..., "seed": ..., "versions": {"nnconform": ..., "python": ..., "pytest": ...},
     "cases": 412, "counts": {"PASS": 400, "FAIL": 12, ...}, "skip_ratio": 0.02,
     "per_suite": {"vectors": {"PASS": ..}}, "per_operation": {"ADD": {"FAIL": 12, ..}},
     "per_data_type": {"quant8": {...}}, "buckets": [{"operation", "data_type", "criterion",
     "message", "count", "replay"}, ...]}

Rows are counted once per case (the last row of a node id, so a resumed run counts each case
once).  ``per_operation`` / ``per_data_type`` count a failing case at its blamed operation and
type only (like the matrix), a passing or skipped one at each operation / type it names.

``github_annotations`` gives one GitHub Actions workflow command per failure bucket (at most
``limit``), the format the Actions runner turns into annotations on the run.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Iterable, Mapping

from nnconform import __version__
from nnconform.reports import triage
from nnconform.verdict.results import BAD_OUTCOMES, SKIP, ResultRecord

SUMMARY_FILE = "summary.json"
FORMAT = "nnconform-summary/1"


def latest_rows(records: Iterable[ResultRecord]) -> list[ResultRecord]:
    """One row per case: the last one recorded for each node id (rows without one all count)."""
    latest: dict[str, ResultRecord] = {}
    for i, r in enumerate(records):
        latest[str(r.extra.get("nodeid") or f"#{i}")] = r
    return list(latest.values())


def skip_ratio(records: Iterable[ResultRecord]) -> float:
    """Share of SKIP rows; a vector out of the driver's declared feature level is not counted
    as skipped (it is out of scope, not untested for lack of support)."""
    rows = list(records)
    return (sum(r.outcome == SKIP and not r.extra.get("out_of_scope") for r in rows) / len(rows)) if rows else 0.0


def variant_counts(records: Iterable[ResultRecord]) -> dict[str, dict]:
    """The vectors suite's execution matrix (nnconform.cases.variants): per variant kind, how many
    (vector, variant) pairs ran ("pairs"), how many distinct variants and the outcomes."""
    kinds: dict[str, Counter] = defaultdict(Counter)
    names: dict[str, set] = defaultdict(set)
    for r in records:
        kind = r.extra.get("variant_kind")
        if r.suite != "vectors" or not isinstance(kind, str):
            continue
        kinds[kind][r.outcome] += 1
        names[kind].add(str(r.extra.get("variant", "")))
    return {k: {"pairs": sum(c.values()), "variants": len(names[k]), **dict(c)} for k, c in sorted(kinds.items())}


def build_summary(records: Iterable[ResultRecord], meta: Mapping[str, object] | None = None) -> dict:
    import pytest

    meta = dict(meta or {})
    rows = latest_rows(records)
    per_suite: dict[str, Counter] = defaultdict(Counter)
    per_op: dict[str, Counter] = defaultdict(Counter)
    per_type: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        per_suite[r.suite][r.outcome] += 1
        if r.outcome in BAD_OUTCOMES:
            op, dtype = triage.blamed(r)
            per_op[op][r.outcome] += 1
            per_type[dtype][r.outcome] += 1
            continue
        for op in set(r.operations):
            per_op[op][r.outcome] += 1
        for t in set(r.data_types):
            per_type[t][r.outcome] += 1
    status = str(meta.get("status", ""))
    return {
        "format": FORMAT,
        "status": status,
        "complete": status.startswith("complete"),
        "driver": meta.get("driver") or ", ".join(sorted({r.driver for r in rows})),
        "seed": meta.get("seed"),
        "started": meta.get("started"),
        "isolation": meta.get("isolation"),
        "versions": {"nnconform": __version__, "python": sys.version.split()[0], "pytest": pytest.__version__},
        "cases": len(rows),
        "counts": dict(Counter(r.outcome for r in rows)),
        "skip_ratio": round(skip_ratio(rows), 4),
        "out_of_scope": sum(1 for r in rows if r.extra.get("out_of_scope")),
        "variants_mode": meta.get("vectors variants"),
        "variants": variant_counts(rows),
        "per_suite": {k: dict(v) for k, v in sorted(per_suite.items())},
        "per_operation": {k: dict(v) for k, v in sorted(per_op.items())},
        "per_data_type": {k: dict(v) for k, v in sorted(per_type.items(), key=lambda kv: triage.type_key(kv[0]))},
        "buckets": [
            {
                "operation": b.operation,
                "data_type": b.data_type,
                "criterion": b.criterion,
                "message": b.message,
                "count": b.count,
                "example": b.representative.test_id,
                "replay": b.replay,
                "no_replay": b.no_replay,
            }
            for b in triage.buckets(rows)
        ],
    }


def write_summary(
    report_dir: str | os.PathLike[str],
    records: Iterable[ResultRecord],
    meta: Mapping[str, object] | None = None,
    summary: dict | None = None,
) -> Path:
    """Write summary.json: ``summary`` if already built from these records, else built here."""
    from nnconform.artifacts.reportdir import atomic_write

    path = Path(report_dir) / SUMMARY_FILE
    if summary is None:
        summary = build_summary(records, meta)
    atomic_write(path, json.dumps(summary, indent=1, sort_keys=False) + "\n")
    return path


def _escape_data(text: str) -> str:
    # GitHub's workflow-command escaping: % first, then line ends.
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotations(
    records: Iterable[ResultRecord], *, file_of: Mapping[str, str] | None = None, limit: int = 50
) -> list[str]:
    """``::error file=...,title=...::message`` lines, one per failure bucket (biggest first),
    at most ``limit`` (GitHub shows 10 per step anyway); a last line says how many were left out."""
    out = []
    bl = triage.buckets(latest_rows(records))
    for b in bl[:limit]:
        rep = b.representative
        title = f"nnconform: {b.operation} {b.data_type} ({b.count} case{'s' if b.count != 1 else ''}, {b.criterion})"
        body = f"{rep.test_id}: {rep.message}" + (f"\nreplay: {b.replay}" if b.replay else f"\n{b.no_replay}")
        where = (file_of or {}).get(rep.suite)
        props = (f"file={_escape_property(where)}," if where else "") + f"title={_escape_property(title)}"
        out.append(f"::error {props}::{_escape_data(body[:4000])}")
    if len(bl) > limit:
        out.append(f"::warning title=nnconform::{len(bl) - limit} more failure buckets; see report.html")
    return out
