"""HTML report: one self-contained file (inline CSS, inline SVG, one inline script; nothing
external).  Rendered with jinja2 from ``report.html`` beside this module, autoescaped: every
text taken from records is HTML-escaped.

Sections, in the order a driver engineer triages: the headline (driver, version and verdict,
coloured red / amber / green: reports/headline.py) and the run status, the counts with a per-suite
bar chart, the **failure buckets** (reports/triage.py: failures grouped by blamed operation,
data type, criterion and normalised message; a count, one replay command and the expandable
list of cases each; filter by text, outcome and suite, sort by any column), the conformance
matrix (operation x data type, a failure counted against its blamed operation only, shaded as
a heat map, filterable), the per-suite table, the run's metadata and, on reference runs, the
reference executor's coverage.  The page works without its script (everything is shown); the
script only filters and sorts.
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping

import jinja2

from nnconform import __version__
from nnconform.reports import charts, triage
from nnconform.reports.headline import headline
from nnconform.reports.summary import latest_rows
from nnconform.verdict.results import BAD_OUTCOMES, OUTCOMES, PASS, XFAIL, ResultRecord

NONE_LABEL = triage.NONE_LABEL
TEMPLATE = "report.html"
# A bucket lists at most this many cases (the rest are counted): a page with 50,000 failures
# of one bug must still open.
CASES_PER_BUCKET = 500

_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #bbb; padding: 3px 7px; vertical-align: top; text-align: left; }
th { background: #eee; }
th[data-sort] { cursor: pointer; user-select: none; }
th[data-sort]::after { content: " \\2195"; color: #999; }
td.num { text-align: right; }
td.good, td.bad, td.skip, td.empty { white-space: nowrap; }
td.good { background: #c8efc8; } td.bad { background: #f4b6b6; }
td.skip { background: #e4e4e4; color: #555; } td.empty { background: #fff; }
.outcome-PASS, .outcome-SUCCESS { color: #17631a; font-weight: bold; }
.outcome-FAIL, .outcome-ERROR, .outcome-FAILURE, .outcome-HANG, .outcome-CRASH, .outcome-XPASS
  { color: #a30000; font-weight: bold; }
.outcome-SKIP { color: #666; } .outcome-XFAIL { color: #8a5a00; }
code { font-size: 0.9em; white-space: pre-wrap; word-break: break-all; }
.legend { color: #555; font-size: 0.85em; max-width: 70em; }
.status { font-size: 1.1em; font-weight: bold; padding: 0.4em 0.7em; border-radius: 4px; display: inline-block; }
.verdict { padding: 0.3em 0.6em; border-radius: 4px; display: inline-block; }
.verdict-red { background: #f4b6b6; color: #a30000; }
.verdict-amber { background: #fff3c4; color: #6b5200; }
.verdict-green { background: #c8efc8; color: #17631a; }
.report-kind { display: block; font-size: 0.55em; font-weight: normal; color: #555; margin-top: 0.3em; }
/* The status line says whether the run finished, not whether the driver passed (the
   headline's colour says that): a finished run's line is neutral, never green. */
.status-complete { background: #eee; color: #333; }
.status-running, .status-interrupted { background: #fff3c4; color: #6b5200; }
.controls { margin: 0.5em 0; display: flex; gap: 1.2em; align-items: center; flex-wrap: wrap; }
.controls input[type=search] { width: 22em; }
#buckets { width: 100%; }
#buckets td.msg { max-width: 40em; }
#buckets td.replay { min-width: 24em; max-width: 36em; }
pre.stack { font-size: 0.85em; background: #f6f0f0; padding: 0.3em 0.5em; margin: 0.2em 0; white-space: pre-wrap; }
td.elsewhere { color: #999; text-align: center; }
nav#toc { margin: 0.6em 0; font-size: 0.9em; }
nav#toc a { margin-right: 1em; }
.skip-warning { background: #fff3c4; color: #6b5200; padding: 0.4em 0.7em; border-radius: 4px; }
details.cases summary { cursor: pointer; color: #1a4f9c; margin-top: 0.3em; }
table.case-list { font-size: 0.95em; }
svg.chart { display: block; margin: 0.6em 0; }
"""

_SCRIPT = r"""
(function () {
  function text(el) { return (el.textContent || "").trim(); }
  // sortable tables: click a th[data-sort] to sort its tbody, again to reverse
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("th[data-sort]").forEach(function (th, col) {
      th.addEventListener("click", function () {
        var numeric = th.dataset.sort === "num";
        var dir = th.dataset.dir === "asc" ? -1 : 1;
        th.dataset.dir = dir === 1 ? "asc" : "desc";
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var index = Array.prototype.indexOf.call(th.parentNode.children, th);
        rows.sort(function (a, b) {
          var x = text(a.cells[index]), y = text(b.cells[index]);
          if (numeric) { return dir * (parseFloat(x) - parseFloat(y)); }
          return dir * x.localeCompare(y);
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  // failure buckets: text, outcome and suite filters
  var filter = document.getElementById("bucket-filter");
  if (filter) {
    var outcome = document.getElementById("bucket-outcome");
    var suite = document.getElementById("bucket-suite");
    var shown = document.getElementById("bucket-shown");
    var buckets = Array.prototype.slice.call(document.querySelectorAll("#buckets tr.bucket"));
    var apply = function () {
      var q = filter.value.toLowerCase(), o = outcome.value, s = suite.value, n = 0;
      buckets.forEach(function (tr) {
        var ok = (!q || tr.dataset.search.indexOf(q) >= 0)
          && (!o || (" " + tr.dataset.outcomes + " ").indexOf(" " + o + " ") >= 0)
          && (!s || (" " + tr.dataset.suites + " ").indexOf(" " + s + " ") >= 0);
        tr.style.display = ok ? "" : "none";
        if (ok) { n += 1; }
      });
      shown.textContent = n + " of " + buckets.length + " buckets shown";
    };
    [filter, outcome, suite].forEach(function (el) { el.addEventListener("input", apply); el.addEventListener("change", apply); });
    // A link can carry a view: report.html#q=ADD&outcome=FAIL&suite=vectors&sort=2
    // (sort = column number, 1-based; negative for descending).
    var params = new URLSearchParams(location.hash.replace(/^#/, ""));
    if (params.has("q")) { filter.value = params.get("q"); }
    if (params.has("outcome")) { outcome.value = params.get("outcome"); }
    if (params.has("suite")) { suite.value = params.get("suite"); }
    apply();
    if (params.has("sort")) {
      var col = parseInt(params.get("sort"), 10);
      var th = document.querySelectorAll("#buckets thead th")[Math.abs(col) - 1];
      if (th) { th.dataset.dir = col < 0 ? "asc" : ""; th.click(); }
    }
  }
  // matrix: operation filter and "only failing"
  var mfilter = document.getElementById("matrix-filter");
  if (mfilter) {
    var failing = document.getElementById("matrix-failing");
    var mrows = Array.prototype.slice.call(document.querySelectorAll("#matrix-table tr.matrix-row"));
    var mapply = function () {
      var q = mfilter.value.toLowerCase();
      mrows.forEach(function (tr) {
        var ok = (!q || tr.dataset.op.toLowerCase().indexOf(q) >= 0) && (!failing.checked || tr.dataset.failing === "1");
        tr.style.display = ok ? "" : "none";
      });
    };
    mfilter.addEventListener("input", mapply);
    failing.addEventListener("change", mapply);
  }
  document.body.setAttribute("data-script", "ready");
})();
"""


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).parent)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=False,
        lstrip_blocks=False,
    )


def _status_kind(status: str) -> str:
    if status.startswith("complete"):
        return "complete"
    return "running" if status.startswith("running") else "interrupted"


def _bucket_view(b: triage.Bucket) -> dict:
    rep = b.representative
    search = " ".join(
        [b.operation, b.data_type, b.criterion, b.message, rep.message, *(r.test_id for r in b.rows)]
    ).lower()
    return {
        "count": b.count,
        "operation": b.operation,
        "data_type": b.data_type,
        "criterion": b.criterion,
        "outcomes": b.outcomes,
        "suites": b.suites,
        "example_message": rep.message,
        "outcome_set": " ".join(sorted({r.outcome for r in b.rows})),
        "suite_set": " ".join(sorted({r.suite for r in b.rows})),
        "search": search,
        "replay": b.replay,
        "no_replay": b.no_replay,
        **_stack_parts(rep),
        "spec_path": rep.spec_path or "",
        "rows": b.rows[:CASES_PER_BUCKET],
    }


def _stack_parts(rep: ResultRecord) -> dict[str, Any]:
    """The crashing thread's stack with the driver's frames first: from the driver's
    innermost frame outwards (``stack``), then what the driver had called when it died
    (``above``: library frames such as ctypes, innermost first), so the driver's own line
    is the first a reader sees."""
    stack = [str(f) for f in (rep.extra.get("stack") or [])]
    frame = str(rep.extra.get("driver_frame") or "")
    if frame and frame in stack:
        i = stack.index(frame)
        return {"stack": stack[i:], "above": stack[:i], "driver_frame": frame}
    return {"stack": stack, "above": [], "driver_frame": frame}


def _matrix_rows(m: triage.Matrix) -> list[dict]:
    rows = []
    for op in m.operations:
        cells, failing = [], False
        for t in m.types:
            c = m.cells.get((op, t))
            if c is None:
                cells.append({"empty": True, "type": t})
                continue
            good, bad, skip = c["good"], c["bad"], c["skip"] + c["xfail"]
            failing = failing or bad > 0
            if not (good or bad or skip):
                # only passes the driver did not compute (refused must-reject cases, the
                # reference's side of partitioned cases): not coloured, not a pass
                cells.append(
                    {
                        "empty": False,
                        "type": t,
                        "cls": "elsewhere",
                        "text": "-",
                        "title": f"not computed by the driver ({c['elsewhere']} case(s) rejected as expected "
                        "or run on the reference)",
                        "colour": "#fff",
                    }
                )
                continue
            cls = "bad" if bad else ("good" if good else "skip")
            cells.append(
                {
                    "empty": False,
                    "type": t,
                    "cls": cls,
                    "text": f"{good} / {bad} / {skip}",
                    "title": f"{good} pass, {bad} fail, {skip} skip",
                    "colour": charts.heat_colour(good, bad, skip),
                }
            )
        rows.append({"op": op, "cells": cells, "failing": failing})
    return rows


def _stress_verdicts(records: list[ResultRecord]) -> list[tuple[str, Counter, str]]:
    """Stress rows (SUCCESS / FAILURE / HANG / CRASH) per stress test (the test id before
    ``#``): the verdict table `nnconform stress` prints, with the case durations' p50 / p90 /
    max."""
    import numpy as np

    from nnconform.verdict.results import STRESS_OUTCOMES

    per: dict[str, Counter] = {}
    durations: dict[str, list[float]] = {}
    for r in records:
        # a conformance run's CRASH or HANG is no stress verdict: only stress rows count
        if r.outcome in STRESS_OUTCOMES and (r.suite == "stress" or r.outcome in ("SUCCESS", "FAILURE")):
            name = r.test_id.split("#", 1)[0]
            per.setdefault(name, Counter())[r.outcome] += 1
            durations.setdefault(name, []).append(float(r.extra.get("case_s", r.duration_s) or 0.0))
    out = []
    for name, c in sorted(per.items()):
        p50, p90, top = np.percentile(np.asarray(durations[name]), [50, 90, 100])
        out.append((name, c, f"{p50:.2f} / {p90:.2f} / {top:.2f}"))
    return out


def _stress_memory(records: list[ResultRecord]) -> str:
    # the rows that have it, then in time order (a conformance run's 538,000 rows have none)
    rows = [r for r in records if isinstance(r.extra.get("rss_mb"), (int, float))]
    values = [float(r.extra["rss_mb"]) for r in sorted(rows, key=lambda r: r.timestamp)]
    return charts.line(values, "stress worker RSS after each case", "MB")


def _coverage_rows(rows) -> list[list[str]]:
    out = []
    for r in rows or ():
        impl = ", ".join(r.implemented) if r.implemented else "not implemented"
        vr = r.vectors_run.get("*", 0)  # coverage.TOTAL: each vector counted once
        vectors = f"{r.vectors_passed.get('*', 0)}/{vr}" if vr else "-"
        out.append([str(r.code), r.operation, impl, str(sum(r.examples.values())), vectors])
    return out


def render_html(
    records: Iterable[ResultRecord],
    title: str = "nnconform report",
    meta: Mapping[str, object] | None = None,
    coverage_rows=None,
    history: list[dict] | None = None,
) -> str:
    records = list(records)
    total = Counter(r.outcome for r in records)
    present = [o for o in OUTCOMES if total[o]]
    suites = triage.per_suite(records)
    bucket_list = triage.buckets(records)
    bad = [r for r in records if r.outcome in BAD_OUTCOMES]
    m: dict[str, object] = {}
    drivers = sorted({r.driver for r in records})
    if drivers:
        m["driver"] = ", ".join(drivers)
    m["harness version"] = __version__
    m["report date"] = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    m.update(meta or {})
    status = str((meta or {}).get("status", "") or "")
    verdict = headline(records, meta)
    # each made once: a pass over every row (538,000 for a whole execution matrix)
    matrix = triage.matrix(records) if records else triage.Matrix([], [], {})
    latest = latest_rows(records)
    chart_data = {s: charts.kind_counts(c, triage.kind) for s, c in suites.items()}
    suite_rows = [(s, suites[s], False) for s in suites] + [("all suites", total, True)]
    return (
        _environment()
        .get_template(TEMPLATE)
        .render(
            title=title,
            verdict=verdict,
            css=_CSS,
            script=_SCRIPT,
            status=status,
            status_kind=_status_kind(status),
            total=len(records),
            overall=[(o, total[o]) for o in present],
            suite_chart=charts.suite_bars(chart_data),
            buckets=[_bucket_view(b) for b in bucket_list],
            n_failures=len(bad),
            bad_outcomes=sorted({r.outcome for r in bad}),
            bad_suites=sorted({r.suite for r in bad}),
            xfails=[r for r in records if r.outcome == XFAIL],
            accumulated=[r for r in records if r.outcome == PASS and (r.extra or {}).get("accumulated_rounding")],
            matrix=matrix,
            matrix_rows=_matrix_rows(matrix) if records else [],
            skip_reasons=triage.skip_reasons(latest),
            present=present,
            suite_rows=suite_rows,
            meta=list(m.items()),
            history=list(history or []),
            trend_chart=charts.trend(list(history or [])),
            stress=_stress_verdicts(records),
            stress_memory=_stress_memory(records),
            stress_outcomes=("SUCCESS", "FAILURE", "HANG", "CRASH"),
            coverage=_coverage_rows(coverage_rows),
            ledger=_ledger_rows(records),
            exhaustive=_exhaustive_rows(records),
            variants=_variant_rows(latest, present),
        )
    )


def _variant_rows(latest, present) -> list[tuple[str, int, int, list[int]]]:
    """(kind, (vector, variant) pairs, distinct variants, counts per present outcome), from
    the latest row of each case."""
    from nnconform.reports.summary import variant_counts

    return [(k, d["pairs"], d["variants"], [d.get(o, 0) for o in present]) for k, d in variant_counts(latest).items()]


def _ledger_rows(records) -> list[list[str]]:
    """The domain-coverage ledger of the random suite's rows (nnconform.generators.ledger)."""
    from nnconform.generators import ledger

    return ledger.table_rows(*ledger.aggregate(r for r in records if r.suite == "random"))


def _exhaustive_rows(records) -> list[list[str]]:
    """The exhaustive suite per operation and data type: sweeps (grid points) run and failed,
    inputs swept, the worst error in ULPs (codes for quantised outputs) and as a multiple of
    the tolerance, and the first failing sweep with its shrunk input count."""
    groups: dict[tuple[str, str], dict] = {}
    for r in records:
        info = (r.extra or {}).get("exhaustive") if r.suite == "exhaustive" else None
        if not info:
            continue
        g = groups.setdefault(
            (info.get("operation", "?"), info.get("data_type", "?")),
            {"n": 0, "bad": 0, "elements": 0, "ulp": None, "frac": 0.0, "first": ""},
        )
        g["n"] += 1
        g["elements"] += int(info.get("elements") or 0)
        if info.get("worst_ulp") is not None:
            g["ulp"] = max(g["ulp"] or 0, int(info["worst_ulp"]))
        frac = info.get("worst_fraction")
        if frac is not None:
            g["frac"] = max(g["frac"], float(frac))
        if r.outcome in BAD_OUTCOMES:
            g["bad"] += 1
            if not g["first"]:
                shrunk = info.get("shrunk_to")
                g["first"] = f"{info.get('grid', '')}" + (f" ({shrunk} input(s) in its spec)" if shrunk else "")
    rows = []
    for (op, t), g in sorted(groups.items()):
        frac = "inf" if g["frac"] == float("inf") else f"{g['frac']:.3g}"
        ulp = "" if g["ulp"] is None else str(g["ulp"])
        rows.append([f"{op} {t}", f"{g['n'] - g['bad']}/{g['n']}", f"{g['elements']:,}", ulp, frac, g["first"]])
    return rows


def write_html(
    records: Iterable[ResultRecord],
    path: str | os.PathLike,
    title: str = "nnconform report",
    meta: Mapping[str, object] | None = None,
    coverage_rows=None,
    history: list[dict] | None = None,
) -> Path:
    """Write the report; ``meta`` (driver, seed, harness version, date, ...) is shown as
    given and overrides the defaults taken from the records."""
    from nnconform.artifacts.reportdir import atomic_write

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(
        path, render_html(records, title=title, meta=meta, coverage_rows=coverage_rows, history=history)
    )
