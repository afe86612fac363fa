"""The report's headline: its verdict and driver at a glance (issue #46).

A report's <title>, <h1> and badge colour say what a reader needs before anything else: which
driver (and version) ran, and whether the run is a failure (red), clean but not to be trusted
as a pass (amber: interrupted, still running, nothing ran, or most of the claimed work was
skipped) or a complete clean run (green).  The run status line ("Run status: complete ...")
stays below it; it only says whether the run finished, never whether the driver passed.

Cases are counted once each (the last row of a node id, as summary.json counts them), so a
resumed run's headline agrees with its summary.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Mapping

from nnconform.reports.summary import latest_rows, skip_ratio
from nnconform.reports.triage import rejected_as_expected
from nnconform.verdict.outcome import Outcome
from nnconform.verdict.results import ResultRecord

RED, AMBER, GREEN = "red", "amber", "green"

# Bad outcomes in the order the headline names them: conformance words first, then the
# driver-host failures, then the stress word.  Fixed, so two runs' titles read alike.
BAD_ORDER = (Outcome.FAIL, Outcome.ERROR, Outcome.CRASH, Outcome.HANG, Outcome.XPASS, Outcome.FAILURE)
# What a clean run's headline counts, in this order.
CLEAN_ORDER = (Outcome.PASS, Outcome.SUCCESS, Outcome.XFAIL, Outcome.SKIP)
# More than this share of cases skipped (out-of-scope ones not counted) and a clean run is amber.
MOSTLY_SKIPPED = 0.5


@dataclass(frozen=True)
class Headline:
    kind: str  # RED, AMBER or GREEN
    text: str  # "<driver> <version>: 6 FAIL, 1 CRASH"


def driver_label(rows: list[ResultRecord], meta: Mapping[str, object] | None = None) -> str:
    """The driver's name and version as the rows give them (``driver`` and
    ``extra.driver_version``); the meta's ``driver`` (the spec the run was given) when no row
    names one.  Several drivers or versions are listed, comma-separated."""
    names = sorted({r.driver for r in rows if r.driver})
    if not names:
        names = [str((meta or {}).get("driver") or "")] if (meta or {}).get("driver") else []
    versions = sorted({str(r.extra.get("driver_version")) for r in rows if r.extra.get("driver_version")})
    label = " ".join(p for p in (", ".join(names), ", ".join(versions)) if p)
    return label or "unknown driver"


def _counts(counts: Counter, order: Iterable[Outcome]) -> str:
    return ", ".join(f"{counts[o]} {o}" for o in order if counts[o])


def headline(records: Iterable[ResultRecord], meta: Mapping[str, object] | None = None) -> Headline:
    """The verdict of a run: red when any case is bad, amber when the run is clean but
    incomplete or mostly skipped (or empty), green for a complete clean run."""
    rows = latest_rows(records)
    counts = Counter(Outcome.parse(r.outcome) for r in rows)
    status = str((meta or {}).get("status", "") or "")
    # No status (a report rebuilt from a journal alone) is taken as complete: nothing says otherwise.
    incomplete = bool(status) and not status.startswith("complete")
    who = driver_label(rows, meta)
    bad = _counts(counts, BAD_ORDER)
    if bad:
        return Headline(RED, f"{who}: {bad}" + (f" ({status})" if incomplete else ""))
    clean = _counts(counts, CLEAN_ORDER) or "no cases"
    rejected = sum(1 for r in rows if r.outcome == Outcome.PASS and rejected_as_expected(r))
    if rejected:
        # what the driver computed, apart from the must-reject cases it refused (issue 46, 6)
        computed = counts[Outcome.PASS] - rejected
        rest = _counts(counts, [o for o in CLEAN_ORDER if o is not Outcome.PASS])
        clean = ", ".join(
            p for p in (f"{computed} PASS computed on the driver", f"{rejected} rejected as expected", rest) if p
        )
    if incomplete:
        return Headline(AMBER, f"{who}: {status}, {clean}")
    if not rows:
        return Headline(AMBER, f"{who}: no cases ran")
    ratio = skip_ratio(rows)
    if ratio > MOSTLY_SKIPPED:
        return Headline(AMBER, f"{who}: {clean} ({ratio:.0%} skipped)")
    return Headline(GREEN, f"{who}: {clean}")
