"""Aggregations the reports are built from: failure buckets, the conformance matrix, counts.

A **bucket** is every failing row with the same defect: blamed operation, data type and what
went wrong ("wrong values", "wrong shape", "raised ValueError in execute", a crash's signal
and innermost driver frame), never the message's text, so 1,661 failures of one quantised-ADD
bug are one bucket per data type, each with its count, one replay command and its cases.
A vts check that embeds an operation's mismatch ("[CONV_2D] output 0 ...") counts against
that operation.

The **matrix** counts a failing row in its blamed operation's cell only
(``ResultRecord.blamed_operation`` / ``blamed_data_type``, see nnconform.verdict.attribution).  Good
and skipped rows count in the cell of every operation x data type they name, as before.  A
failure nobody attributed (several operations, no divergence hunt) counts in the row
``(not attributed)``.
"""

from __future__ import annotations

import os
import re
import shlex
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

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

    @property
    def replay(self) -> str:
        """The representative's replay command, or one that re-runs its check."""
        return replay_for(self.representative)[0]

    @property
    def no_replay(self) -> str:
        """Why the bucket has no replay command ("" when it has one)."""
        return replay_for(self.representative)[1]


# An operation list a message names, "[CONV_2D]" or "[ADD, CONV_2D]" (only names of NNAPI
# operations count: "[XPASS(strict)]" or "[general-sync]" are not one).
_OPS_NAMED = re.compile(r"\[([A-Z][A-Z0-9_]*(?:, [A-Z][A-Z0-9_]*)*)\]")
# The type of the output a mismatch is about: "output 0 (TENSOR_FLOAT32 [1, 2])".
_OUTPUT_TYPE = re.compile(r"output \d+ \((TENSOR_[A-Z0-9_]+)")
# A vts check names the example model it failed on: "conv_2d_valid_2x2_fp32: output 0 (...".
_EXAMPLE_NAMED = re.compile(r"(?<![\w/])([a-z][a-z0-9_]*): (?:output \d+ \(|wrong results)")


def _operation_names() -> set[str]:
    from nnconform.ir import OperationType

    return {o.name for o in OperationType}


def _short_type(operand_type: str) -> str:
    from nnconform.ir import SHORT_TYPE_NAME, OperandType

    try:
        return SHORT_TYPE_NAME.get(OperandType[operand_type], "")
    except KeyError:
        return ""


def named_in_message(message: str) -> tuple[str, str]:
    """(operation, data type) a failure message names when the row itself names none: a vts
    check that embeds an operation's mismatch ("[CONV_2D] output 0 (TENSOR_QUANT8_ASYMM ...")
    or names the example model it failed on ("conv_2d_valid_2x2_fp32: output 0 (...)").
    Empty when the message names no operation, or several."""
    known = _operation_names()
    found = {op for group in _OPS_NAMED.findall(message or "") for op in group.split(", ") if op in known}
    if not found:
        # an example model is named after its operation: the longest operation name its name starts with
        by_length = sorted(known, key=len, reverse=True)
        for name in _EXAMPLE_NAMED.findall(message or ""):
            op = next((o for o in by_length if name.startswith(o.lower() + "_") or name == o.lower()), None)
            if op is not None:
                found.add(op)
    if len(found) != 1:
        return "", ""
    types = {_short_type(t) for t in _OUTPUT_TYPE.findall(message or "")} - {""}
    return found.pop(), (types.pop() if len(types) == 1 else "")


def blamed(r: ResultRecord) -> tuple[str, str]:
    """(operation, data type) a failing row counts against: its blamed operation, else its only
    operation (rows of older journals), else the one operation its message names (a vts check
    embedding an operation's mismatch), else ``(not attributed)``."""
    dtype = r.blamed_data_type or (r.data_types[0] if r.data_types else NONE_LABEL)
    if r.blamed_operation:
        return r.blamed_operation, dtype
    ops = set(r.operations)
    if len(ops) == 1:
        return ops.pop(), dtype
    op, named_type = named_in_message(r.message)
    if op and (not ops or op in ops):
        return op, r.blamed_data_type or named_type or dtype
    return UNATTRIBUTED, dtype


# What a mismatch of values is, whatever the criterion that caught it: a comparison kind, or a
# message that shows an element's expected and actual values (a variant's or a vts check's).
_VALUE_KINDS = {"element", "nan_expected", "nan_actual", "inf"}
_VALUES = re.compile(r"index \[[\d, ]*\]: expected .+?, actual ")
_RAISED = re.compile(r"driver raised in (\w+)(?: on \[[^\]]*\])?: ([A-Za-z_][\w.]*)")
# Suites whose test ids name a case (a vector, a graph), not a check: their unattributed
# failures are one bucket per defect, not one per case.
CASE_SUITES = {"vectors", "generated", "random", "models", "control_flow", "stress", "fuzz"}


def crash_signature(r: ResultRecord) -> str:
    """A CRASH or HANG as a defect: the signal (or exit status) and the innermost driver frame
    of the crashing thread's stack (``extra.stack``), else the stage it happened in."""
    got = r.extra.get("incident")
    incident: dict[str, Any] = got if isinstance(got, dict) else {}
    sig = incident.get("signal")
    if sig:
        from nnconform.isolation.childproc import signal_name

        how = signal_name(int(sig)) if str(sig).lstrip("-").isdigit() else str(sig)
    elif incident.get("exit_code") is not None:
        how = f"exit {incident['exit_code']}"
    else:
        how = ""
    stack = r.extra.get("stack") or []
    frame = r.extra.get("driver_frame") or (stack[0] if stack else "")
    where = f"at {frame}" if frame else ""
    return " ".join(p for p in (r.outcome.lower(), how, where) if p)


def defect(r: ResultRecord) -> str:
    """What went wrong, in words that are the same for every case of one bug (never the
    message's numbers, names or test ids): "wrong values", "wrong shape", "raised ValueError in
    execute", "crash SIGSEGV at driver.py:execute" ..."""
    if r.outcome in ("CRASH", "HANG"):
        return crash_signature(r)
    criterion = str(r.extra.get("criterion") or "")
    kind_ = criterion.split(":", 1)[0].strip()
    message = str(r.extra.get("blamed_message") or r.message or "")
    if kind_ in _VALUE_KINDS or _VALUES.search(message):
        return "wrong values"
    raised = _RAISED.search(message)
    if raised:
        return f"raised {raised.group(2)} in {raised.group(1)}"
    if kind_ in ("shape", "dtype", "count", "unsupported_type"):
        return f"wrong {kind_}"
    return kind_ or r.outcome.lower()


def failure_key(r: ResultRecord) -> tuple[str, str, str, str]:
    """(operation, data type, defect, check): the check (the test id without its parameters)
    only for a failure nobody attributed to an operation in a suite of checks (vts), where it
    is the one thing that tells two defects apart."""
    op, dtype = blamed(r)
    check = ""
    if op in (UNATTRIBUTED, NO_MODEL) and r.suite not in CASE_SUITES:
        check = r.test_id.split("[", 1)[0]
    return op, dtype, defect(r), check


def replay_for(r: ResultRecord, driver: str = "") -> tuple[str, str]:
    """(replay command, why there is none) of a failing row: its own replay command, else a
    command that re-runs just its check (a vts check has no model of its own to replay)."""
    if r.replay:
        return r.replay, ""
    nodeid = str(r.extra.get("nodeid") or "")
    if r.suite and nodeid and "::" in nodeid:
        name = nodeid.split("::")[-1]
        who = f" --driver {shlex.quote(driver or r.driver)}" if (driver or r.driver) else ""
        return f"nnconform run --suite {shlex.quote(str(r.suite))}{who} -- -k {shlex.quote(name)}", ""
    return "", "no replay: the case left no model to replay and no test id to re-run"


def replay_here(command: str, report_dir: str | os.PathLike[str]) -> str:
    """A replay command recorded relative to its report directory (``nnconform replay
    failures/x.spec.json``), made to work from the current directory."""
    prefix = "nnconform replay "
    if not command.startswith(prefix):
        return command
    rest = command[len(prefix) :]
    path = shlex.split(rest)[0] if rest else ""
    if not path or os.path.isabs(path):
        return command
    where = Path(report_dir) / path
    try:
        where = where.relative_to(Path.cwd())
    except ValueError:
        pass  # outside the current directory: the absolute path is the one that works
    return prefix + shlex.quote(str(where)) + rest[len(shlex.quote(path)) :]


def buckets(records: Iterable[ResultRecord]) -> list[Bucket]:
    """Failing rows grouped by what the defect is (blamed operation, data type, defect kind;
    see failure_key), the biggest bucket first.  A bucket's message is its first case's
    message, normalised (for display; it is not part of the key)."""
    groups: dict[tuple, Bucket] = {}
    for r in records:
        if r.outcome not in BAD_OUTCOMES:
            continue
        key = failure_key(r)
        if key not in groups:
            op, dtype, what, check = key
            message = normalise_message(str(r.extra.get("blamed_message") or r.message))
            groups[key] = Bucket(op, dtype, what + (f" ({check})" if check else ""), message)
        groups[key].rows.append(r)
    return sorted(groups.values(), key=lambda b: (-b.count, b.operation, type_key(b.data_type), b.criterion))


@dataclass
class Matrix:
    operations: list[str]
    types: list[str]
    cells: dict[tuple[str, str], Counter]


def rejected_as_expected(r: ResultRecord) -> bool:
    """A must-reject validation case the driver refused, as it must: a PASS, but the driver
    computed nothing."""
    return bool(r.extra.get("rejected_as_expected")) or str(r.message or "").startswith("rejected as expected")


def computed_on_driver(r: ResultRecord) -> list[str]:
    """The operations of a good row the driver itself computed: all of them, those of a
    partitioned case's driver side (``extra.driver_operations``), none for a rejected
    must-reject case."""
    if rejected_as_expected(r):
        return []
    if r.extra.get("partitioned") is not None:
        return [str(o) for o in r.extra.get("driver_operations") or []]
    return list(r.operations or [NO_MODEL])


def matrix(records: Iterable[ResultRecord]) -> Matrix:
    """Cells count ``good`` (passes of what the driver computed), ``bad``, ``skip`` and
    ``xfail``; ``elsewhere`` counts passes of an operation the driver did not compute (a
    must-reject case it refused, an operation a partitioned case ran on the reference), which
    colour no cell: a RELU-only driver gets no green ADD cell for refusing an invalid ADD."""
    cells: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for r in records:
        k = kind(r.outcome)
        if k == "bad":
            op, _ = blamed(r)
            types = [r.blamed_data_type] if r.blamed_data_type else (r.data_types or [NONE_LABEL])
            for t in types:
                cells[(op, t)]["bad"] += 1
            continue
        on_driver = set(computed_on_driver(r)) if k == "good" else None
        for op in r.operations or [NO_MODEL]:
            for t in r.data_types or [NONE_LABEL]:
                cells[(op, t)][k if on_driver is None or op in on_driver else "elsewhere"] += 1
    ops = sorted({op for op, _ in cells}, key=lambda o: (o == NO_MODEL, o == UNATTRIBUTED, o))
    types = sorted({t for _, t in cells}, key=lambda t: (t == NONE_LABEL, type_key(t)))
    return Matrix(ops, types, cells)


def skip_reasons(records: Iterable[ResultRecord]) -> list[tuple[str, int, list[tuple[int, str]]]]:
    """Skipped cases grouped by operation: (operation, skipped cases, [(count, real reason
    text)]) with the reasons grouped by their normalised text but shown by the first real
    one, most skipped operation first."""
    per_op: dict[str, dict[str, list[str]]] = defaultdict(dict)
    counts: Counter = Counter()
    for r in records:
        if kind(r.outcome) != "skip" or r.outcome == XFAIL:
            continue
        text = (r.message or "(no reason given)").splitlines()[0]
        for op in r.operations or [NO_MODEL]:
            counts[op] += 1
            per_op[op].setdefault(normalise_message(text), []).append(text)
    return [
        (op, counts[op], sorted(((len(v), v[0]) for v in per_op[op].values()), key=lambda x: -x[0]))
        for op in sorted(per_op, key=lambda o: (-counts[o], o))
    ]


def per_suite(records: Iterable[ResultRecord]) -> dict[str, Counter]:
    """Outcome counts per suite, suites in name order."""
    out: dict[str, Counter] = {}
    for r in records:
        if r.suite is not None:
            out.setdefault(str(r.suite), Counter())[r.outcome] += 1
    return dict(sorted(out.items()))
