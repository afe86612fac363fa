"""The one outcome type and the one exit-status table every command uses.

A case ends in an :class:`Outcome`.  Conformance cases (``run``, ``replay``) end PASS, FAIL,
SKIP or ERROR (the harness or the driver broke before a verdict), XFAIL / XPASS when an
expected-failures file lists them, and CRASH / HANG when the driver host died or stopped
answering.  Stress cases keep MLTS's crash-test words, SUCCESS and FAILURE, beside the same
CRASH and HANG; :meth:`Outcome.conformance` maps them onto the conformance words in this one
place (a report that mixes both counts them the same way).

Everything else derives from the outcome and is never worked out backwards: pytest's own
outcome of a test (:meth:`Outcome.pytest_outcome`), whether a run found failures
(:attr:`Outcome.bad`), and the process's exit status (:class:`ExitStatus`).
"""

from __future__ import annotations

import enum
from typing import Iterable


class Outcome(enum.StrEnum):
    """A case's verdict.  A ``StrEnum``: it compares equal to, formats as and serialises as
    its name, so ``results.jsonl`` rows and older code that holds plain strings agree."""

    PASS = "PASS"
    FAIL = "FAIL"
    SKIP = "SKIP"
    ERROR = "ERROR"
    CRASH = "CRASH"
    HANG = "HANG"
    XFAIL = "XFAIL"  # listed in --expected-failures and failed: not a failure of the run
    XPASS = "XPASS"  # listed and passed: a failure of the run unless the entry is non-strict
    SUCCESS = "SUCCESS"  # stress (MLTS) words for PASS and FAIL
    FAILURE = "FAILURE"

    @classmethod
    def parse(cls, value: object) -> "Outcome":
        """The outcome named by ``value``; ValueError naming the allowed ones otherwise."""
        if isinstance(value, cls):
            return value
        got = cls._value2member_map_.get(value) if type(value) is str else None
        if got is not None:  # the usual case, without Enum's call machinery (every row read)
            return got  # type: ignore[return-value]
        try:
            return cls(str(value))
        except ValueError:
            raise ValueError(f"outcome {value!r} is not one of {', '.join(cls)}") from None

    @property
    def good(self) -> bool:
        return self in _GOOD

    @property
    def bad(self) -> bool:
        """A failure of the run: a row with this outcome makes the exit status 1."""
        return self in _BAD

    @property
    def skipped(self) -> bool:
        """No verdict on the driver's computation (not run, or an expected failure)."""
        return self in _SKIPPED

    def conformance(self) -> "Outcome":
        """The conformance word for a stress outcome (SUCCESS -> PASS, FAILURE -> FAIL)."""
        return {Outcome.SUCCESS: Outcome.PASS, Outcome.FAILURE: Outcome.FAIL}.get(self, self)

    def pytest_outcome(self) -> str:
        """What pytest is told: 'passed', 'failed' or 'skipped'.  XFAIL is reported to pytest
        as skipped (pytest's own xfail machinery would need its marker on the item)."""
        if self.bad:
            return "failed"
        if self.skipped:
            return "skipped"
        return "passed"


_GOOD = frozenset({Outcome.PASS, Outcome.SUCCESS})
_BAD = frozenset({Outcome.FAIL, Outcome.ERROR, Outcome.FAILURE, Outcome.HANG, Outcome.CRASH, Outcome.XPASS})
_SKIPPED = frozenset({Outcome.SKIP, Outcome.XFAIL})

CONFORMANCE_OUTCOMES = (Outcome.PASS, Outcome.FAIL, Outcome.SKIP, Outcome.ERROR, Outcome.XFAIL, Outcome.XPASS)
STRESS_OUTCOMES = (Outcome.SUCCESS, Outcome.FAILURE, Outcome.HANG, Outcome.CRASH)
OUTCOMES = CONFORMANCE_OUTCOMES + STRESS_OUTCOMES


class ExitStatus(enum.IntEnum):
    """The exit status of every nnconform command."""

    CLEAN = 0  # everything ran; no case failed
    FAILURES = 1  # everything ran; some case failed (or a gate such as --max-skip-ratio)
    USAGE = 2  # bad option, unknown driver, malformed input file, busy report directory, no case selected
    INCOMPLETE = 3  # interrupted (Ctrl-C, SIGTERM, SIGHUP), budget too short, a lost worker

    @classmethod
    def of(cls, outcomes: Iterable[Outcome | str], complete: bool = True) -> "ExitStatus":
        """The status of a run whose cases ended in ``outcomes``.  An incomplete run is 3 even
        with failures: its report says what it found, and the job must know it did not finish."""
        if not complete:
            return cls.INCOMPLETE
        return cls.FAILURES if any(Outcome.parse(o).bad for o in outcomes) else cls.CLEAN


EXIT_STATUS_MEANING = {
    ExitStatus.CLEAN: "complete, no case failed",
    ExitStatus.FAILURES: "complete, some case failed (FAIL, ERROR, CRASH, HANG, XPASS, FAILURE) "
    "or a gate such as --max-skip-ratio did",
    ExitStatus.USAGE: "usage error: bad option, unknown driver, malformed input file, busy report directory, "
    "a selection of no case",
    ExitStatus.INCOMPLETE: "interrupted or incomplete: Ctrl-C, SIGTERM or SIGHUP, a budget too short "
    "for every test, a lost worker, a full disk; --resume continues",
}


def exit_status_help() -> str:
    """The exit-status table as ``--help`` prints it."""
    return "Exit status (every command):\n" + "\n".join(
        f"  {int(code)}  {text}" for code, text in EXIT_STATUS_MEANING.items()
    )


__all__ = [
    "Outcome",
    "ExitStatus",
    "EXIT_STATUS_MEANING",
    "exit_status_help",
    "OUTCOMES",
    "CONFORMANCE_OUTCOMES",
    "STRESS_OUTCOMES",
]
