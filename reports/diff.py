"""``nnconform diff RUN_A RUN_B``: what changed between two runs (A the older, B the newer).

A run is a report directory (its ``results.jsonl``) or a results file.  Cases are matched by
test id; each run counts a case once (its last row).  Every case that is bad (FAIL, ERROR,
CRASH, HANG, XPASS, FAILURE) in either run lands in one class:

- **new**: bad in B, good or absent in A;
- **fixed**: bad in A, good in B;
- **still failing**: bad in both;
- **flaky**: bad in one run, good in the other, although nothing that decides its outcome
  changed: the same driver and driver version and a case whose inputs do not depend on the
  seed (every suite but ``random``; the random suite draws its cases from the seed, so a
  change there is a new finding or a fix of that seed's cases, never flakiness).

Each entry keeps the replay command of its failing side.  ``render_text`` and ``render_html``
format the result; the HTML is one self-contained page like report.html.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from nnconform.reports.headline import driver_label
from nnconform.reports.summary import latest_rows
from nnconform.verdict.results import BAD_OUTCOMES, GOOD_OUTCOMES, ResultRecord, read_results

SEEDED_SUITES = frozenset({"random"})
CLASSES = ("new", "fixed", "flaky", "still failing")


@dataclass
class Change:
    test_id: str
    kind: str
    before: str  # outcome in A ("" when absent)
    after: str  # outcome in B ("" when absent)
    message: str  # of the failing side (B's when both fail)
    replay: str


@dataclass
class BucketChange:
    """A failure bucket (nnconform.reports.triage: operation, data type, defect) and how many
    cases it held in each run."""

    operation: str
    data_type: str
    defect: str
    count_a: int
    count_b: int
    replay: str  # of B's bucket (A's when B has none)

    @property
    def kind(self) -> str:
        return "new" if not self.count_a else ("fixed" if not self.count_b else "still failing")


@dataclass
class RunDiff:
    a: str
    b: str
    changes: dict[str, list[Change]] = field(default_factory=dict)
    cases_a: int = 0
    cases_b: int = 0
    driver_a: str = ""
    driver_b: str = ""
    seeds_a: str = ""
    seeds_b: str = ""
    names_a: str = ""  # driver names without versions
    names_b: str = ""
    buckets: list[BucketChange] = field(default_factory=list)

    def count(self, kind: str) -> int:
        return len(self.changes.get(kind, []))

    def comparison(self) -> str:
        """Whether the two runs ran the same driver and seed: what a difference can mean."""
        if self.driver_a == self.driver_b:
            driver = "same driver and version"
        elif self.names_a == self.names_b:
            driver = "same driver, DIFFERENT versions"
        else:
            driver = "DIFFERENT drivers"
        seed = "same seed" if self.seeds_a == self.seeds_b else "different seeds (the random suite drew other cases)"
        return f"{driver}, {seed}"


def load_run(path: str | os.PathLike) -> list[ResultRecord]:
    p = Path(path)
    journal = p / "results.jsonl" if p.is_dir() else p
    if not journal.is_file():
        raise FileNotFoundError(f"{path}: no results.jsonl (give a report directory or a results file)")
    return latest_rows(read_results(journal))


def _versions(rows: list[ResultRecord]) -> set[tuple[str, str]]:
    return {(r.driver, str(r.extra.get("driver_version", ""))) for r in rows}


def diff_runs(rows_a: list[ResultRecord], rows_b: list[ResultRecord], a: str = "A", b: str = "B") -> RunDiff:
    by_a = {r.test_id: r for r in rows_a}
    by_b = {r.test_id: r for r in rows_b}
    same_driver = _versions(rows_a) == _versions(rows_b)
    out = RunDiff(a, b, {k: [] for k in CLASSES}, len(by_a), len(by_b))
    for tid in sorted(set(by_a) | set(by_b)):
        ra, rb = by_a.get(tid), by_b.get(tid)
        bad_a = ra is not None and ra.outcome in BAD_OUTCOMES
        bad_b = rb is not None and rb.outcome in BAD_OUTCOMES
        if not (bad_a or bad_b):
            continue
        good_a = ra is not None and ra.outcome in GOOD_OUTCOMES
        good_b = rb is not None and rb.outcome in GOOD_OUTCOMES
        failing = rb if bad_b else ra
        assert failing is not None  # bad_a or bad_b: that run's record exists
        flipped = (bad_a and good_b) or (bad_b and good_a)
        seeded = failing.suite in SEEDED_SUITES
        if bad_a and bad_b:
            kind = "still failing"
        elif flipped and same_driver and not seeded:
            kind = "flaky"
        elif bad_b:
            kind = "new"
        elif good_b:
            kind = "fixed"
        else:
            continue  # bad in A, skipped or absent in B: nothing to say about it
        out.changes[kind].append(
            Change(tid, kind, ra.outcome if ra else "", rb.outcome if rb else "", failing.message, failing.replay)
        )
    out.driver_a, out.driver_b = driver_label(rows_a), driver_label(rows_b)
    out.seeds_a, out.seeds_b = _seeds(rows_a), _seeds(rows_b)
    out.names_a, out.names_b = (", ".join(sorted({r.driver for r in rows})) for rows in (rows_a, rows_b))
    out.buckets = _bucket_changes(rows_a, rows_b)
    # replay commands are recorded relative to their report directory: shown from here
    from nnconform.reports.triage import replay_here

    shown: list[Change | BucketChange] = [*out.buckets, *(c for v in out.changes.values() for c in v)]
    for c in shown:
        run = (
            b
            if (isinstance(c, Change) and c.after in BAD_OUTCOMES) or (isinstance(c, BucketChange) and c.count_b)
            else a
        )
        if c.replay and os.path.isdir(run):
            c.replay = replay_here(c.replay, run)
    return out


def _seeds(rows: list[ResultRecord]) -> str:
    return ", ".join(str(s) for s in sorted({r.seed for r in rows if r.seed is not None})) or "none recorded"


def _bucket_changes(rows_a: list[ResultRecord], rows_b: list[ResultRecord]) -> list[BucketChange]:
    from nnconform.reports import triage

    def by_key(rows: list[ResultRecord]) -> dict[tuple[str, str, str], triage.Bucket]:
        return {(b.operation, b.data_type, b.criterion): b for b in triage.buckets(rows)}

    ba, bb = by_key(rows_a), by_key(rows_b)
    out: list[BucketChange] = []
    for key in set(ba) | set(bb):
        a, b = ba.get(key), bb.get(key)
        either = b or a
        replay = either.replay if either is not None else ""
        op, data_type, defect = key
        out.append(BucketChange(op, data_type, defect, a.count if a else 0, b.count if b else 0, replay))
    order = {"new": 0, "still failing": 1, "fixed": 2}
    return sorted(out, key=lambda c: (order[c.kind], -max(c.count_a, c.count_b), c.operation, c.data_type))


def render_text(d: RunDiff, limit: int = 50) -> str:
    lines = [
        f"nnconform diff: A = {d.a} ({d.cases_a} cases), B = {d.b} ({d.cases_b} cases)",
        "  " + ", ".join(f"{d.count(k)} {k}" for k in CLASSES) + " (cases)",
        f"  A: driver {d.driver_a}, seed {d.seeds_a}",
        f"  B: driver {d.driver_b}, seed {d.seeds_b}",
        f"  {d.comparison()}",
    ]
    if d.buckets:
        lines.append(f"\nfailure buckets ({len(d.buckets)}; cases in A -> B):")
        for bc in d.buckets[:limit]:
            lines.append(f"  {bc.kind:13s} {bc.operation} {bc.data_type}: {bc.defect}: {bc.count_a} -> {bc.count_b}")
            if bc.replay:
                lines.append(f"      {bc.replay}")
        if len(d.buckets) > limit:
            lines.append(f"  ... and {len(d.buckets) - limit} more buckets (see the HTML)")
    for kind in CLASSES:
        items = d.changes.get(kind, [])
        if not items:
            continue
        lines.append(f"\n{kind} ({len(items)}):")
        for c in items[:limit]:
            lines.append(f"  {c.test_id}: {c.before or 'absent'} -> {c.after or 'absent'}: {c.message[:200]}")
            if c.replay:
                lines.append(f"      {c.replay}")
        if len(items) > limit:
            lines.append(f"  ... and {len(items) - limit} more (see the HTML)")
    return "\n".join(lines)


def render_html(d: RunDiff) -> str:
    from nnconform.reports.html_report import _CSS, _environment

    template = _environment().from_string(_DIFF_TEMPLATE)
    return template.render(css=_CSS, d=d, classes=CLASSES)


_DIFF_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>nnconform diff</title><style>{{ css }}</style></head>
<body>
<h1>nnconform diff</h1>
<p>A = <code>{{ d.a }}</code> ({{ d.cases_a }} cases): driver <b id="driver-a">{{ d.driver_a }}</b>, seed {{ d.seeds_a }}<br>
B = <code>{{ d.b }}</code> ({{ d.cases_b }} cases): driver <b id="driver-b">{{ d.driver_b }}</b>, seed {{ d.seeds_b }}<br>
<span id="comparison">{{ d.comparison() }}</span></p>
{% if d.buckets %}<h2 id="buckets">Failure buckets ({{ d.buckets | length }})</h2>
<table><tr><th>change</th><th>operation</th><th>data type</th><th>defect</th><th>cases in A</th><th>cases in B</th><th>replay</th></tr>
{% for c in d.buckets %}<tr class="bucket-{{ c.kind | replace(' ', '-') }}"><td>{{ c.kind }}</td><td>{{ c.operation }}</td><td>{{ c.data_type }}</td><td>{{ c.defect }}</td><td class="num">{{ c.count_a }}</td><td class="num">{{ c.count_b }}</td><td><code>{{ c.replay }}</code></td></tr>
{% endfor %}</table>{% endif %}
<p>{% for k in classes %}<span id="count-{{ k | replace(' ', '-') }}">{{ d.count(k) }} {{ k }}</span>{% if not loop.last %}, {% endif %}{% endfor %}</p>
{% for k in classes %}{% if d.changes[k] %}
<h2 id="{{ k | replace(' ', '-') }}">{{ k }} ({{ d.changes[k] | length }})</h2>
<table><tr><th>test id</th><th>A</th><th>B</th><th>message</th><th>replay</th></tr>
{% for c in d.changes[k] %}<tr><td>{{ c.test_id }}</td><td class="outcome-{{ c.before }}">{{ c.before or "absent" }}</td><td class="outcome-{{ c.after }}">{{ c.after or "absent" }}</td><td>{{ c.message }}</td><td><code>{{ c.replay }}</code></td></tr>
{% endfor %}</table>
{% endif %}{% endfor %}
</body></html>
"""
