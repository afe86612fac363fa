"""Expected failures: ``--expected-failures FILE`` (``--nn-expected-failures`` under pytest).

A driver with a documented, accepted difference from NNAPI can still have a green CI: list the
cases it fails, with the reason, and they become XFAIL rows instead of failures.  The file is
JSON:

    {"expected_failures": [
       {"pattern": "V1_3/transpose_quant8_signed*",          # fnmatch over the test id
        "reason": "int8 DequantizeLinear -> Transpose rejected at ORT_ENABLE_EXTENDED",
        "link": "docs/findings.md#1",                          # optional
        "strict": true},                                       # optional, default true
       ...]}

(``"patterns": [...]`` instead of ``"pattern"`` gives one reason to several patterns.)  A case
whose test id matches a pattern and FAILs or ERRORs is XFAIL; one that PASSes is XPASS, which
fails the run unless its entry says ``"strict": false`` (then it is a PASS with a note: the
expectation is stale).  CRASH, HANG and SKIP are never changed: a driver crash is not an
accepted difference.  The first matching entry wins.
"""

from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FILE_LIMIT = 4 << 20


class ExpectationsError(ValueError):
    """The expected-failures file cannot be used (the message is one line naming it)."""


@dataclass(frozen=True)
class Expectation:
    pattern: str
    reason: str
    link: str = ""
    strict: bool = True

    def matches(self, test_id: str) -> bool:
        return fnmatch.fnmatchcase(test_id, self.pattern)

    def describe(self) -> str:
        return self.reason + (f" ({self.link})" if self.link else "")

    def to_dict(self) -> dict[str, Any]:
        return {"pattern": self.pattern, "reason": self.reason, "link": self.link, "strict": self.strict}


def load_expectations(path: str | os.PathLike[str]) -> list[Expectation]:
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(FILE_LIMIT + 1)
    except OSError as err:
        raise ExpectationsError(f"{path}: {err.strerror or err}") from None
    if len(raw) > FILE_LIMIT:
        raise ExpectationsError(f"{path}: larger than {FILE_LIMIT >> 20} MiB; not an expected-failures file")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise ExpectationsError(f"{path}: not valid JSON ({str(err).splitlines()[0]})") from None
    entries = data.get("expected_failures") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ExpectationsError(f'{path}: needs an object with a list "expected_failures"')
    out: list[Expectation] = []
    for i, e in enumerate(entries):
        where = f"{path}: expected_failures[{i}]"
        if not isinstance(e, dict):
            raise ExpectationsError(f"{where} is not an object")
        patterns = e.get("patterns", [e.get("pattern")] if "pattern" in e else None)
        if not isinstance(patterns, list) or not patterns or not all(isinstance(p, str) and p for p in patterns):
            raise ExpectationsError(f'{where} needs "pattern" (a test-id pattern) or a non-empty "patterns" list')
        reason = e.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise ExpectationsError(f'{where} needs a "reason"')
        link = e.get("link", "")
        strict = e.get("strict", True)
        if not isinstance(link, str) or not isinstance(strict, bool):
            raise ExpectationsError(f'{where}: "link" must be a string and "strict" true or false')
        unknown = set(e) - {"pattern", "patterns", "reason", "link", "strict"}
        if unknown:
            raise ExpectationsError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        out.extend(Expectation(p, reason.strip(), link, strict) for p in patterns)
    return out


def match(expectations: list[Expectation], test_id: str) -> Expectation | None:
    return next((e for e in expectations if e.matches(test_id)), None)
