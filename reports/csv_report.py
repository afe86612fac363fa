"""CSV report: one row per ResultRecord, columns in ResultRecord field order.

List fields (operations, data_types) are joined with ``;``; ``extra`` is a JSON object
string.  The file opens in a spreadsheet and diffs between nights with pandas.
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
    records_frame(records).to_csv(path, index=False)
    return path
