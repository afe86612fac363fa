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
class RunDiff:
    a: str
    b: str
    changes: dict[str, list[Change]] = field(default_factory=dict)
    cases_a: int = 0
    cases_b: int = 0

    def count(self, kind: str) -> int:
        return len(self.changes.get(kind, []))


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
    return out


def render_text(d: RunDiff, limit: int = 50) -> str:
    lines = [
        f"nnconform diff: A = {d.a} ({d.cases_a} cases), B = {d.b} ({d.cases_b} cases)",
        "  " + ", ".join(f"{d.count(k)} {k}" for k in CLASSES),
    ]
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
<p>A = <code>{{ d.a }}</code> ({{ d.cases_a }} cases), B = <code>{{ d.b }}</code> ({{ d.cases_b }} cases)</p>
<p>{% for k in classes %}<span id="count-{{ k | replace(' ', '-') }}">{{ d.count(k) }} {{ k }}</span>{% if not loop.last %}, {% endif %}{% endfor %}</p>
{% for k in classes %}{% if d.changes[k] %}
<h2 id="{{ k | replace(' ', '-') }}">{{ k }} ({{ d.changes[k] | length }})</h2>
<table><tr><th>test id</th><th>A</th><th>B</th><th>message</th><th>replay</th></tr>
{% for c in d.changes[k] %}<tr><td>{{ c.test_id }}</td><td class="outcome-{{ c.before }}">{{ c.before or "absent" }}</td><td class="outcome-{{ c.after }}">{{ c.after or "absent" }}</td><td>{{ c.message }}</td><td><code>{{ c.replay }}</code></td></tr>
{% endfor %}</table>
{% endif %}{% endfor %}
</body></html>
"""
