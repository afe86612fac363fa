"""CSV report: one row per ResultRecord, columns in ResultRecord field order.

List fields (operations, data_types) are joined with ``;``; ``extra`` is a JSON object
string.  The file opens in a spreadsheet and diffs between nights with pandas.

Text cells come from drivers and test ids, so a spreadsheet must not run them: a string cell
starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a leading ``'``
(OWASP's CSV injection defence).  Only the CSV is changed; ``results.jsonl`` keeps the true
text, and numeric cells (a negative duration or seed) stay numbers.  Lines end in CRLF
(RFC 4180), so a carriage return inside a message is quoted and never splits a row.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Iterable

import pandas as pd

from nnconform.results import ResultRecord, record_to_json

COLUMNS = [f.name for f in dataclasses.fields(ResultRecord)]
LIST_SEPARATOR = ";"
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def defuse_cell(value):
    """A string cell a spreadsheet would read as a formula, made plain text (prefix ``'``)."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


_NUMBERS = (int, float)
_TEXT = ("suite", "test_id", "driver", "outcome", "blamed_operation", "blamed_data_type", "message", "replay",
         "timestamp")
_LISTS = ("operations", "data_types")


def _cells(values: dict, extra_text: str) -> tuple:
    return tuple(LIST_SEPARATOR.join(values[k]) if k in _LISTS else extra_text if k == "extra" else values[k]
                 for k in COLUMNS)


def _as_written(r: ResultRecord) -> tuple | None:
    """The record's cells as results.jsonl has its values, with ``extra`` as its CSV text,
    when every value already is plain JSON (the rows nnconform writes); None otherwise (numpy
    values, NaN, paths...: _through_json)."""
    d, s = r.duration_s, r.seed
    if not ((type(d) in _NUMBERS and math.isfinite(d)) and (s is None or type(s) is int)
            and (r.spec_path is None or type(r.spec_path) is str)
            and all(type(getattr(r, k)) is str for k in _TEXT)):
        return None
    try:
        extra = json.dumps(r.extra, sort_keys=True, allow_nan=False) if r.extra else ""
    except (TypeError, ValueError):
        return None
    return _cells(r.__dict__, extra)


def _through_json(r: ResultRecord) -> tuple:
    # Through the results-file JSON, so numpy values and NaNs in ``extra`` look the same here
    # as in results.jsonl.
    d = json.loads(record_to_json(r))
    return _cells(d, json.dumps(d["extra"], sort_keys=True) if d["extra"] else "")


def records_frame(records: Iterable[ResultRecord]) -> pd.DataFrame:
    rows = [_as_written(r) or _through_json(r) for r in records]
    df = pd.DataFrame.from_records(rows, columns=COLUMNS) if rows else pd.DataFrame(columns=COLUMNS)
    # Keep seeds integral (a column with some None would otherwise become float).
    df["seed"] = df["seed"].astype("Int64")
    return df


def write_csv(records: Iterable[ResultRecord], path: str | os.PathLike) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    df = records_frame(records)
    for col in df.columns:
        if not pd.api.types.is_numeric_dtype(df[col]):   # text columns; numbers keep their sign
            # defuse_cell on the cells that need it (a column-wide test, not a call per cell)
            risky = df[col].astype(str).str.startswith(FORMULA_STARTS)
            if risky.any():
                df.loc[risky, col] = df.loc[risky, col].map(defuse_cell)
    # RFC 4180 line ends: the csv writer then quotes a cell holding a bare "\r" too (with
    # "\n" line ends it would not, and a reader would split the row there).
    df.to_csv(path, index=False, lineterminator="\r\n")
    return path
