"""Aggregations the reports are built from: failure buckets, the conformance matrix, counts.

A **bucket** is every failing row with the same blamed operation, data type, criterion and
normalised message (numbers, quoted text and the case's list of operations taken out), so
1,661 failures of one quantised-ADD bug are a handful of buckets, each with its count, one
representative replay command and the list of its cases.

The **matrix** counts a failing row in its blamed operation's cell only
(``ResultRecord.blamed_operation`` / ``blamed_data_type``, see nnconform.verdict.attribution).  Good
and skipped rows count in the cell of every operation x data type they name, as before.  A
failure nobody attributed (several operations, no divergence hunt) counts in the row
``(not attributed)``.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Iterable

from nnconform.verdict.results import BAD_OUTCOMES, GOOD_OUTCOMES, SKIPPED_OUTCOMES, XFAIL, ResultRecord

# Cases without a model (device-level vts checks such as capabilities or the cache token size)
# have no operation and no data type; they get their own row and column, sorted last, named
# for what they are rather than a bare "(none)".
NONE_LABEL = "(no operand type)"
NO_MODEL = "(device-level, no model)"
UNATTRIBUTED = "(not attributed)"
# Column order of the matrix: the types a driver engineer scans first come first.
TYPE_ORDER = [
    "fp32",
    "relaxed",
    "fp16",
    "int32",
    "quant8",
    "quant8_signed",
    "quant8_symm",
    "quant8_per_channel",
    "quant16_symm",
    "quant16_asymm",
    "bool8",
]

_OPS_PREFIX = re.compile(r"\[[A-Z0-9_, ]+\]\s*")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
# A path starts a word: "bool8/fp32" in a type list is not one.
_PATH = re.compile(r"(?<![\w.])(?:/[\w.+-]+)+")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b")
# Digits inside a name (fp32, CONV_2D, V1_2) are part of it, not a number.
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+|inf|nan)\b")
_SPACE = re.compile(r"\s+")
_MORE = re.compile(r"\[\+\d+ more mismatch\(es\)\]")
MESSAGE_KEY_LIMIT = 200


def normalise_message(message: str) -> str:
    """The part of a failure message that is the same for every case of one bug: the leading
    ``[OP, OP]`` list, numbers, hex, paths and quoted text become placeholders."""
    text = message.splitlines()[0] if message else ""
    text = _MORE.sub("", _OPS_PREFIX.sub("", text))
    text = _QUOTED.sub("'…'", text)
    text = _PATH.sub("PATH", text)
    text = _HEX.sub("0x#", text)
    text = _NUMBER.sub("#", text)
    text = _SPACE.sub(" ", text).strip()
    return text[:MESSAGE_KEY_LIMIT]


def type_key(t: str) -> tuple:
    return (TYPE_ORDER.index(t), t) if t in TYPE_ORDER else (len(TYPE_ORDER), t)


def kind(outcome: str) -> str:
    """good / bad / skip / xfail: how a report colours and counts an outcome."""
    if outcome in GOOD_OUTCOMES:
        return "good"
    if outcome == XFAIL:
        return "xfail"
    if outcome in SKIPPED_OUTCOMES:
        return "skip"
    return "bad"


@dataclass
class Bucket:
    operation: str
    data_type: str
    criterion: str
    message: str
    rows: list[ResultRecord] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.rows)

    @property
    def outcomes(self) -> str:
        return ", ".join(f"{n} {o}" for o, n in Counter(r.outcome for r in self.rows).most_common())

    @property
    def suites(self) -> str:
        return ", ".join(sorted({r.suite for r in self.rows}))

    @property
    def representative(self) -> ResultRecord:
        """The first case with a replay command (else the first case)."""
        return next((r for r in self.rows if r.replay), self.rows[0])


def blamed(r: ResultRecord) -> tuple[str, str]:
    """(operation, data type) a failing row counts against: its blamed operation, else its only
    operation (rows of older journals), else ``(not attributed)``."""
    dtype = r.blamed_data_type or (r.data_types[0] if r.data_types else NONE_LABEL)
    if r.blamed_operation:
        return r.blamed_operation, dtype
    ops = set(r.operations)
    return (ops.pop() if len(ops) == 1 else UNATTRIBUTED), dtype


def failure_key(r: ResultRecord) -> tuple[str, str, str, str]:
    op, dtype = blamed(r)
    criterion = str(r.extra.get("criterion") or r.outcome.lower())
    # The blamed operation's own mismatch (divergence hunt) is the same for every case of one
    # bug, whatever operation the case was about; the case's message is not.
    return op, dtype, criterion, normalise_message(str(r.extra.get("blamed_message") or r.message))


def buckets(records: Iterable[ResultRecord]) -> list[Bucket]:
    """Failing rows grouped by (blamed operation, data type, criterion, normalised message),
    the biggest bucket first."""
    groups: dict[tuple, Bucket] = {}
    for r in records:
        if r.outcome not in BAD_OUTCOMES:
            continue
        key = failure_key(r)
        if key not in groups:
            groups[key] = Bucket(*key)
        groups[key].rows.append(r)
    return sorted(groups.values(), key=lambda b: (-b.count, b.operation, type_key(b.data_type), b.message))


@dataclass
class Matrix:
    operations: list[str]
    types: list[str]
    cells: dict[tuple[str, str], Counter]


def matrix(records: Iterable[ResultRecord]) -> Matrix:
    cells: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for r in records:
        k = kind(r.outcome)
        if k == "bad":
            op, _ = blamed(r)
            types = [r.blamed_data_type] if r.blamed_data_type else (r.data_types or [NONE_LABEL])
            for t in types:
                cells[(op, t)]["bad"] += 1
            continue
        for op in r.operations or [NO_MODEL]:
            for t in r.data_types or [NONE_LABEL]:
                cells[(op, t)][k] += 1
    ops = sorted({op for op, _ in cells}, key=lambda o: (o == NO_MODEL, o == UNATTRIBUTED, o))
    types = sorted({t for _, t in cells}, key=lambda t: (t == NONE_LABEL, type_key(t)))
    return Matrix(ops, types, cells)


def per_suite(records: Iterable[ResultRecord]) -> dict[str, Counter]:
    """Outcome counts per suite, suites in name order."""
    out: dict[str, Counter] = {}
    for r in records:
        if r.suite is not None:
            out.setdefault(str(r.suite), Counter())[r.outcome] += 1
    return dict(sorted(out.items()))
