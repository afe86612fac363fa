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


def records_frame(records: Iterable[ResultRecord]) -> pd.DataFrame:
    rows = []
    for r in records:
        # Go through the results-file JSON so numpy values and NaNs in ``extra`` look the
        # same here as in results.jsonl.
        d = json.loads(record_to_json(r))
        d["operations"] = LIST_SEPARATOR.join(d["operations"])
        d["data_types"] = LIST_SEPARATOR.join(d["data_types"])
        d["extra"] = json.dumps(d["extra"], sort_keys=True) if d["extra"] else ""
        rows.append(d)
    df = pd.DataFrame(rows, columns=COLUMNS)
    # Keep seeds integral (a column with some None would otherwise become float).
    df["seed"] = df["seed"].astype("Int64")
    return df


def write_csv(records: Iterable[ResultRecord], path: str | os.PathLike) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    df = records_frame(records)
    for col in df.columns:
        if not pd.api.types.is_numeric_dtype(df[col]):   # text columns; numbers keep their sign
            df[col] = df[col].map(defuse_cell)
    # RFC 4180 line ends: the csv writer then quotes a cell holding a bare "\r" too (with
    # "\n" line ends it would not, and a reader would split the row there).
    df.to_csv(path, index=False, lineterminator="\r\n")
    return path
