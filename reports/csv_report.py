"""CSV report: one row per ResultRecord, columns in ResultRecord field order.

List fields (operations, data_types) are joined with ``;``; ``extra`` is a JSON object
string.  The file opens in a spreadsheet and diffs between nights with pandas
(``pandas.read_csv(path, keep_default_na=False)``; tests/test_reports.py reads it so).

It is written with the standard library's csv module.  pandas wrote it until its import
(0.5-0.6 s) turned out to be a quarter of the fixed cost of every ``nnconform run``; the
cells are the same (checked byte for byte on 138 reports of real runs): empty for None,
seeds as integers, floats as Python prints them.

Text cells come from drivers and test ids, so a spreadsheet must not run them: a string cell
starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a leading ``'``
(OWASP's CSV injection defence).  Only the CSV is changed; ``results.jsonl`` keeps the true
text, and numeric cells (a negative duration or seed) stay numbers.  Lines end in CRLF
(RFC 4180), so a carriage return inside a message is quoted and never splits a row.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Iterable, Iterator

from nnconform.verdict.outcome import Outcome
from nnconform.verdict.results import ResultRecord, record_to_json

COLUMNS = [f.name for f in dataclasses.fields(ResultRecord)]
LIST_SEPARATOR = ";"
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def defuse_cell(value):
    """A string cell a spreadsheet would read as a formula, made plain text (prefix ``'``)."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


_NUMBERS = (int, float)
_TEXT = (
    "suite",
    "test_id",
    "driver",
    "blamed_operation",
    "blamed_data_type",
    "message",
    "replay",
    "timestamp",
)
_LISTS = ("operations", "data_types")
_OUTCOME_TYPES = (str, Outcome)


def _cells(values: dict, extra_text: str) -> tuple:
    return tuple(
        LIST_SEPARATOR.join(values[k]) if k in _LISTS else extra_text if k == "extra" else values[k] for k in COLUMNS
    )


def _through_json(r: ResultRecord) -> tuple:
    # Through the results-file JSON, so numpy values and NaNs in ``extra`` look the same here
    # as in results.jsonl.
    d = json.loads(record_to_json(r))
    return _cells(d, json.dumps(d["extra"], sort_keys=True) if d["extra"] else "")


def _plain(cell):
    """A cell as the file holds it: None empty, numbers printed as Python does, text defused
    (numbers never are: a negative duration stays a number)."""
    if cell is None:
        return ""
    if isinstance(cell, str):
        return defuse_cell(cell)
    return cell


def iter_rows(records: Iterable[ResultRecord]) -> Iterator[tuple]:
    """The CSV's rows (without the header), cells as written, one at a time."""
    for r in records:
        yield _fast_row(r) or tuple(_plain(c) for c in _through_json(r))


def _fast_row(r: ResultRecord) -> tuple | None:
    """iter_rows's cells of a row nnconform wrote (every text a str, the seed an int or None,
    a finite duration, plain-JSON ``extra``), built in one go: the same cells as the general
    path, about three times faster (a whole execution matrix is 538,000 rows).  None for
    any other row."""
    v = r.__dict__
    d, seed, spec, ops, types = v["duration_s"], v["seed"], v["spec_path"], v["operations"], v["data_types"]
    if not (
        type(d) in _NUMBERS
        and math.isfinite(d)
        and (seed is None or type(seed) is int)
        and (spec is None or type(spec) is str)
        and type(ops) is list
        and type(types) is list
        and all(type(v[k]) is str for k in _TEXT)
        and type(v["outcome"]) in _OUTCOME_TYPES
    ):
        return None
    try:
        extra = json.dumps(r.extra, sort_keys=True, allow_nan=False) if r.extra else ""
        joined_ops, joined_types = LIST_SEPARATOR.join(ops), LIST_SEPARATOR.join(types)
    except (TypeError, ValueError):
        return None
    return (
        _text_cell(v["suite"]),
        _text_cell(v["test_id"]),
        _text_cell(v["driver"]),
        _text_cell(str(v["outcome"])),
        _text_cell(joined_ops),
        _text_cell(joined_types),
        _text_cell(v["blamed_operation"]),
        _text_cell(v["blamed_data_type"]),
        d,
        "" if seed is None else seed,
        "" if spec is None else _text_cell(spec),
        _text_cell(v["message"]),
        _text_cell(v["replay"]),
        _text_cell(v["timestamp"]),
        _text_cell(extra),
    )


def _text_cell(s: str) -> str:
    return "'" + s if s.startswith(FORMULA_STARTS) else s


# _fast_row writes the columns in this order
assert COLUMNS == [
    "suite",
    "test_id",
    "driver",
    "outcome",
    "operations",
    "data_types",
    "blamed_operation",
    "blamed_data_type",
    "duration_s",
    "seed",
    "spec_path",
    "message",
    "replay",
    "timestamp",
    "extra",
], COLUMNS


def write_csv(records: Iterable[ResultRecord], path: str | os.PathLike) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # streamed: the cells of a whole execution matrix (538,000 rows) held at once took 700 MB
    rows = iter_rows(records)
    # RFC 4180 line ends: the csv writer then quotes a cell holding a bare "\r" too (with
    # "\n" line ends it would not, and a reader would split the row there).
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\r\n")
        w.writerow(COLUMNS)
        w.writerows(rows)
    return path
