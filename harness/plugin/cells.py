"""Batched items: one pytest item that records one result row per cell.

The vectors suite's execution matrix (nnconform.cases.variants) has about 538,000 cells with
``--variants all``.  As one pytest item each, the items cost more than the cells: collecting
them took a minute and 2 GB in every process before the first cell ran.  So a suite may batch:
one item per golden vector, whose test runs that vector's cells one after another and records
each as a row of its own.  What a user relies on stays per cell:

- a cell's row has its own test id and outcome, and its own node id: the item's with the cell
  id inside its brackets (``test_vector_variant[V1_2/add[general-async]]``), the node id the
  cell had when it was an item;
- ``-k`` is evaluated on each cell's name; an item is kept when one of its cells matches, and
  only the matching cells run;
- ``--resume`` and ``--nn-last-failed`` skip or keep cells by those node ids;
- the planned count, the progress line and the run's status count cells;
- a cell's verdict takes in the driver host's incidents during that cell and the
  ``--expected-failures`` entries, as an item's did.

A suite module declares its batched items with ``nn_item_cells(item)``: a list of (cell id,
extra fields of the cell's row), or None for an ordinary item.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from nnconform.plugin import NnSession
    from nnconform.verdict.results import ResultRecord
    from nnconform.verdict.runner import Case, CaseOutcome

# cell id -> extra fields of its row, in run order; only the cells still to run (-k, --resume)
_CELLS_KEY = pytest.StashKey[dict]()
_DONE_KEY = pytest.StashKey[list]()  # the rows this item has recorded


def declare(item) -> None:
    """At collection: the cells of a batched item, from its module's ``nn_item_cells``."""
    hook = getattr(getattr(item, "module", None), "nn_item_cells", None)
    cells = hook(item) if hook is not None else None
    if cells is not None:
        item.stash[_CELLS_KEY] = dict(cells)


def cells_of(item) -> dict | None:
    """The cells a batched item runs (id -> row extras); None for an ordinary item."""
    return item.stash.get(_CELLS_KEY, None)


def cell_nodeid(item_nodeid: str, cell: str) -> str:
    return f"{item_nodeid[:-1]}[{cell}]]"


def item_nodeid_of(nodeid: str) -> str | None:
    """The batched item's node id of a cell's node id (None: not a cell's): its parameter id
    holds one bracketed cell id (``f::t[V1_2/add[general-async]]`` -> ``f::t[V1_2/add]``)."""
    head, sep, param = nodeid.rpartition("::")[2].partition("[")
    if not sep or not param.endswith("]]") or "[" not in param:
        return None
    return nodeid[: nodeid.rindex("[")] + "]"


def count(items) -> int:
    """Cases of a list of items: a batched item counts its cells."""
    from nnconform.plugin import _is_case

    n = 0
    for it in items:
        if _is_case(it):
            cells = cells_of(it)
            n += 1 if cells is None else len(cells)
    return n


def by_suite(items) -> Counter:
    from nnconform.plugin import _is_case
    from nnconform.plugin.progress import suite_of

    out: Counter = Counter()
    for it in items:
        if _is_case(it):
            cells = cells_of(it)
            out[suite_of(it.nodeid)] += 1 if cells is None else len(cells)
    return out


def narrow(config: pytest.Config, items: list, keep_case) -> None:
    """Deselect the cases ``keep_case(nodeid)`` rejects: an ordinary item by its node id, a
    batched item's cells by theirs (the item goes when none is left)."""
    _deselect(
        config,
        items,
        lambda it: keep_case(it.nodeid),
        lambda it, cells: {c: x for c, x in cells.items() if keep_case(cell_nodeid(it.nodeid, c))},
    )


def select_by_keyword(config: pytest.Config, items: list, expression: str) -> None:
    """``-k`` as pytest evaluates it, with a batched item's cells matched one by one under
    their own names (so ``-k general-async`` and ``-k "not general-async"`` select cells)."""
    from _pytest.mark import KeywordMatcher, _parse_expression

    expr = _parse_expression(expression, "Wrong expression passed to '-k'")

    def cells_matching(it, cells: dict) -> dict:
        matcher = _CellMatcher(set(KeywordMatcher.from_item(it)._names) - {it.name})
        left = {}
        for c, x in cells.items():
            matcher.cell = cell_nodeid(it.name, c).lower()
            if expr.evaluate(matcher):
                left[c] = x
        return left

    _deselect(config, items, lambda it: expr.evaluate(KeywordMatcher.from_item(it)), cells_matching)


def _deselect(config: pytest.Config, items: list, keep_item, keep_cells) -> None:
    """Keep an ordinary item when ``keep_item(item)``, a batched one with the cells
    ``keep_cells(item, cells)`` leaves (none left: the item goes); the rest is deselected."""
    kept: list = []
    dropped: list = []
    for it in items:
        cells = cells_of(it)
        if cells is None:
            keep = keep_item(it)
        else:
            left = keep_cells(it, cells)
            if left:
                it.stash[_CELLS_KEY] = left
            keep = bool(left)
        (kept if keep else dropped).append(it)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


class _CellMatcher:
    """pytest's KeywordMatcher for one cell: a case-insensitive substring of one of the item's
    names (its parents, markers, keywords) or of the cell's own name.  The item's part is
    asked once per word for all its cells (a vector has up to a few hundred)."""

    def __init__(self, names: set[str]):
        self.names = [n.lower() for n in names]
        self.known: dict[str, bool] = {}
        self.cell = ""

    def __call__(self, subname: str, /, **kwargs) -> bool:
        if kwargs:
            raise pytest.UsageError("Keyword expressions do not support call parameters.")
        word = subname.lower()
        hit = self.known.get(word)
        if hit is None:
            hit = self.known[word] = any(word in n for n in self.names)
        return hit or word in self.cell


# ---- the plan under xdist: the controller sees item ids, the workers know the cells ----------


def _plan_path(s: NnSession, worker: str) -> Path:
    return s.report_dir / f".nnconform.plan.{worker}.json"


def write_plan(s: NnSession, items) -> None:
    """An xdist worker's planned cases by suite, for the controller (it sees item ids only)."""
    from nnconform.artifacts.reportdir import atomic_write

    worker = str((s.workerinput or {}).get("workerid", "gw"))
    try:
        atomic_write(_plan_path(s, worker), json.dumps(dict(by_suite(items))))
    except OSError:
        return  # the controller then counts items, and says "complete" by rows: a plan only


def read_plan(s: NnSession, node) -> Counter | None:
    worker = str(getattr(node, "workerinput", {}).get("workerid", ""))
    path = _plan_path(s, worker)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        os.unlink(path)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not all(isinstance(v, int) for v in data.values()):
        return None
    return Counter({str(k): int(v) for k, v in data.items()})


# ---- one cell's row ----------------------------------------------------------------------------


def record_cell(
    s: NnSession, item, cell: str, rec: dict, outcome: CaseOutcome, case: Case, duration: float
) -> ResultRecord:
    """Record one cell of a batched item: its verdict (a dumped spec on failure), the driver
    host's incidents since the previous cell, its expected-failures entry; one row."""
    from nnconform.plugin import _MARK_KEY, expectation_for, write_case_row
    from nnconform.verdict.outcome import Outcome

    s.settle(rec, outcome, case)
    verdict = Outcome.parse(rec["verdict"])
    message = rec.get("message", "")
    exp = expectation_for(s, rec, failed=verdict.bad, crashlike=verdict in (Outcome.CRASH, Outcome.HANG))
    if exp is not None:
        verdict, message = exp
    row = write_case_row(s, item, rec, verdict, message, duration, cell_nodeid(item.nodeid, cell))
    item.stash[_MARK_KEY] = len(s._device.incidents) if s.isolated else 0
    item.stash.setdefault(_DONE_KEY, []).append(cell)
    return row


def end_item(rows: list) -> None:
    """The pytest outcome of a batched item from its cells' rows: failed when a cell's
    verdict is bad (naming the first few), skipped when every cell was, else passed."""
    bad = [r for r in rows if r.outcome.bad]
    if bad:
        lines = [f"{r.test_id}: {r.outcome}: {r.message.splitlines()[0] if r.message else ''}" for r in bad[:5]]
        more = f"\n  ... and {len(bad) - 5} more" if len(bad) > 5 else ""
        pytest.fail(f"{len(bad)} of {len(rows)} cells failed:\n  " + "\n  ".join(lines) + more, pytrace=False)
    if rows and all(r.outcome == "SKIP" for r in rows):
        pytest.skip(rows[0].message or "every cell skipped")


def write_unfinished(s: NnSession, item, rec: dict, outcome, message: str, duration: float) -> int:
    """At a batched item's tear-down: a row for each cell it did not record (its set-up
    skipped or failed, or the test broke off), with the item's outcome; returns how many."""
    from nnconform.plugin import write_case_row
    from nnconform.verdict.outcome import Outcome

    cells = cells_of(item) or {}
    done = set(item.stash.get(_DONE_KEY, ()))
    left = [c for c in cells if c not in done]
    if not left:
        return 0
    if outcome is Outcome.PASS:  # the test returned without recording these: it did not run them
        outcome, message = Outcome.ERROR, "the cell was not run (the test ended before it)"
    elif done:
        message = f"the cell was not run: {message}" if outcome.bad else message
    base = rec.get("test_id") or getattr(getattr(item, "callspec", None), "id", item.name)
    base = str(base).split("[", 1)[0]
    for c in left:
        r: dict[str, Any] = dict(rec, test_id=f"{base}[{c}]", extra=dict(rec.get("extra", {}), **cells[c]))
        write_case_row(s, item, r, outcome, message, duration / len(left), cell_nodeid(item.nodeid, c))
    return len(left)
