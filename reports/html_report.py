"""HTML report: one self-contained file (inline CSS, no scripts, no external assets).

Sections: the run's metadata (driver, seed, harness version, date... as given), outcome
counts overall and per suite, the conformance matrix (operation x data type; each cell counts
good / bad / skipped cases and is coloured by the worst), and a table of every failure with
its message, replay command and spec path.  Everything taken from records is HTML-escaped.
"""
from __future__ import annotations

import datetime as _dt
import html
import os
from collections import Counter, defaultdict
from pathlib import Path
from typing import Iterable, Mapping

from nnconform import __version__
from nnconform.results import (BAD_OUTCOMES, GOOD_OUTCOMES, OUTCOMES, SKIPPED_OUTCOMES,
                               ResultRecord)

NONE_LABEL = "(none)"
# Column order of the matrix: the types a driver engineer scans first come first.
_TYPE_ORDER = ["fp32", "relaxed", "fp16", "int32", "quant8", "quant8_signed", "quant8_symm",
               "quant8_per_channel", "quant16_symm", "quant16_asymm", "bool8"]

_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #bbb; padding: 3px 7px; vertical-align: top; text-align: left; }
th { background: #eee; }
td.num { text-align: right; }
td.good, td.bad, td.skip, td.empty { white-space: nowrap; }
td.good { background: #c8efc8; } td.bad { background: #f4b6b6; }
td.skip { background: #e4e4e4; color: #555; } td.empty { background: #fff; }
.outcome-PASS, .outcome-SUCCESS { color: #17631a; font-weight: bold; }
.outcome-FAIL, .outcome-ERROR, .outcome-FAILURE, .outcome-HANG, .outcome-CRASH
  { color: #a30000; font-weight: bold; }
.outcome-SKIP { color: #666; }
code { font-size: 0.9em; white-space: pre-wrap; word-break: break-all; }
.legend { color: #555; font-size: 0.85em; }
.status { font-size: 1.1em; font-weight: bold; padding: 0.4em 0.7em; border-radius: 4px; display: inline-block; }
.status-complete { background: #c8efc8; color: #17631a; }
.status-running { background: #fff3c4; color: #6b5200; }
.status-interrupted { background: #f4b6b6; color: #a30000; }
"""


def _e(v: object) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def _type_key(t: str) -> tuple:
    return (_TYPE_ORDER.index(t), t) if t in _TYPE_ORDER else (len(_TYPE_ORDER), t)


def _kind(outcome: str) -> str:
    if outcome in GOOD_OUTCOMES:
        return "good"
    if outcome in BAD_OUTCOMES:
        return "bad"
    if outcome in SKIPPED_OUTCOMES:
        return "skip"
    return "bad"


def _table(head: list[str], rows: list[list[str]], raw: bool = False) -> str:
    """rows are already-escaped HTML cells if raw, else plain text."""
    out = ["<table>", "<tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"]
    for r in rows:
        cells = r if raw else [f"<td>{_e(c)}</td>" for c in r]
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _summary(records: list[ResultRecord]) -> str:
    present = [o for o in OUTCOMES if any(r.outcome == o for r in records)]
    total = Counter(r.outcome for r in records)
    per_suite: dict[str, Counter] = defaultdict(Counter)
    for r in records:
        per_suite[r.suite][r.outcome] += 1
    head = ["suite", *present, "total"]

    def row(name: str, c: Counter, strong: bool = False) -> list[str]:
        label = f"<th>{_e(name)}</th>" if strong else f"<td>{_e(name)}</td>"
        cells = [label]
        for o in present:
            cells.append(f'<td class="num outcome-{o}" data-suite="{_e(name)}" '
                         f'data-outcome="{o}">{c[o]}</td>')
        cells.append(f'<td class="num">{sum(c.values())}</td>')
        return cells

    rows = [row(s, per_suite[s]) for s in sorted(per_suite)]
    rows.append(row("all suites", total, strong=True))
    overall = ", ".join(f'<span class="outcome-{o}">{total[o]} {o}</span>' for o in present)
    return (f"<h2>Summary</h2>\n<p>{len(records)} cases: {overall or 'none'}</p>\n"
            + _table(head, rows, raw=True))


def _matrix(records: list[ResultRecord]) -> str:
    cells: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for r in records:
        for op in r.operations or [NONE_LABEL]:
            for t in r.data_types or [NONE_LABEL]:
                cells[(op, t)][_kind(r.outcome)] += 1
    ops = sorted({op for op, _ in cells})
    types = sorted({t for _, t in cells}, key=_type_key)
    rows = []
    for op in ops:
        row = [f"<th>{_e(op)}</th>"]
        for t in types:
            c = cells.get((op, t))
            if c is None:
                row.append(f'<td class="empty" data-op="{_e(op)}" data-type="{_e(t)}"></td>')
                continue
            cls = "bad" if c["bad"] else ("good" if c["good"] else "skip")
            title = f"{c['good']} pass, {c['bad']} fail, {c['skip']} skip"
            row.append(f'<td class="num {cls}" data-op="{_e(op)}" data-type="{_e(t)}" '
                       f'title="{_e(title)}">{c["good"]} / {c["bad"]} / {c["skip"]}</td>')
        rows.append(row)
    legend = ('<p class="legend">Each cell: pass / fail / skip case counts (stress SUCCESS '
              'counts as pass; FAILURE, HANG, CRASH and ERROR as fail). A case with several '
              'operations or data types counts in each of their cells.</p>')
    return ("<h2>Conformance matrix (operation &times; data type)</h2>\n" + legend + "\n"
            + _table(["operation", *types], rows, raw=True))


def _failures(records: list[ResultRecord]) -> str:
    bad = [r for r in records if _kind(r.outcome) == "bad"]
    if not bad:
        return "<h2>Failures</h2>\n<p>None.</p>"
    rows = []
    for r in bad:
        rows.append([
            f"<td>{_e(r.suite)}</td>",
            f"<td>{_e(r.test_id)}</td>",
            f'<td class="outcome-{_e(r.outcome)}">{_e(r.outcome)}</td>',
            f"<td>{_e(', '.join(r.operations))}</td>",
            f"<td>{_e(', '.join(r.data_types))}</td>",
            f"<td>{_e(r.message)}</td>",
            f"<td><code>{_e(r.replay)}</code></td>",
            f"<td><code>{_e(r.spec_path or '')}</code></td>",
        ])
    return (f"<h2>Failures ({len(bad)})</h2>\n"
            + _table(["suite", "test id", "outcome", "operations", "data types", "message",
                      "replay", "spec"], rows, raw=True))


def _metadata(records: list[ResultRecord], meta: Mapping[str, object] | None) -> str:
    m: dict[str, object] = {}
    drivers = sorted({r.driver for r in records})
    if drivers:
        m["driver"] = ", ".join(drivers)
    m["harness version"] = __version__
    m["report date"] = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    m.update(meta or {})
    return "<h2>Run</h2>\n" + _table(["", ""], [[k, v] for k, v in m.items()])


def _status(meta: Mapping[str, object] | None) -> str:
    """The banner that says whether this report is the whole run: a report of an
    interrupted or still running run must not pass for a complete one."""
    status = str((meta or {}).get("status", "") or "")
    if not status:
        return ""
    kind = "complete" if status.startswith("complete") else ("running" if status.startswith("running")
                                                              else "interrupted")
    return f'<p class="status status-{kind}">Run status: {_e(status)}</p>'


def _coverage(rows) -> str:
    """The reference executor's operation x data type coverage (harness/coverage.py rows)."""
    if not rows:
        return ""
    body = []
    for r in rows:
        impl = ", ".join(r.implemented) if r.implemented else "not implemented"
        vr = r.vectors_run.get("*", 0)   # coverage.TOTAL: each vector counted once
        vectors = f"{r.vectors_passed.get('*', 0)}/{vr}" if vr else "-"
        body.append([str(r.code), r.operation, impl, str(sum(r.examples.values())), vectors])
    return ("<h2>Reference executor coverage</h2>\n<p>Data types implemented, hand-checked examples "
            "and golden vectors passed in this run, per operation.</p>\n"
            + _table(["code", "operation", "data types implemented", "examples", "vectors passed"], body))


def render_html(records: Iterable[ResultRecord], title: str = "nnconform report",
                meta: Mapping[str, object] | None = None, coverage_rows=None) -> str:
    records = list(records)
    body = "\n".join([f"<h1>{_e(title)}</h1>", _status(meta), _metadata(records, meta), _summary(records),
                      _matrix(records), _failures(records), _coverage(coverage_rows)])
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{_e(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n{body}\n"
            "</body>\n</html>\n")


def write_html(records: Iterable[ResultRecord], path: str | os.PathLike,
               title: str = "nnconform report",
               meta: Mapping[str, object] | None = None, coverage_rows=None) -> Path:
    """Write the report; ``meta`` (driver, seed, harness version, date, ...) is shown as
    given and overrides the defaults taken from the records."""
    from nnconform.reportdir import atomic_write
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(path, render_html(records, title=title, meta=meta, coverage_rows=coverage_rows))
