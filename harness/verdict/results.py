"""Result records: one row per case run, appended to a JSON-lines file (design contract 6).

Every case (a pytest conformance test or a stress case) produces one ``ResultRecord``.
``ResultsWriter`` appends it to ``results.jsonl`` as one JSON line with one ``write`` system
call at once, so a run that is killed (even with SIGKILL) loses nothing already recorded: the
line is in the kernel's page cache the moment ``write`` returns.  ``fsync``, which only guards
against the machine itself going down, runs at most once a second and at close; per row it
cost 3-6 ms on a loaded disk, a minute over a 10,000-case run.  Reports read only these rows
(``read_results``), which tolerates what a kill leaves behind: a truncated last line.

Outcomes: conformance cases are PASS / FAIL / SKIP / ERROR (ERROR: the harness or the driver
broke before a verdict, e.g. an exception the test did not expect), and XFAIL / XPASS for
cases listed in an expected-failures file; stress cases are
SUCCESS / FAILURE / HANG / CRASH (MLTS crash-test classification).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import fcntl
import gc
import json
import math
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from nnconform.verdict.outcome import CONFORMANCE_OUTCOMES as CONFORMANCE_OUTCOMES  # (re-exported)
from nnconform.verdict.outcome import OUTCOMES as OUTCOMES  # (re-exported)
from nnconform.verdict.outcome import STRESS_OUTCOMES as STRESS_OUTCOMES  # (re-exported)
from nnconform.verdict.outcome import Outcome

# The outcome names as module constants (nnconform.verdict.outcome.Outcome is the type; these are its
# members, so ``r.outcome == FAIL`` and ``r.outcome is Outcome.FAIL`` agree).
PASS, FAIL, SKIP, ERROR = Outcome.PASS, Outcome.FAIL, Outcome.SKIP, Outcome.ERROR
XFAIL, XPASS = Outcome.XFAIL, Outcome.XPASS
SUCCESS, FAILURE, HANG, CRASH = Outcome.SUCCESS, Outcome.FAILURE, Outcome.HANG, Outcome.CRASH
# How reports group outcomes: a good verdict, a bad one, or no verdict.
GOOD_OUTCOMES = frozenset(o for o in Outcome if o.good)
BAD_OUTCOMES = frozenset(o for o in Outcome if o.bad)
SKIPPED_OUTCOMES = frozenset(o for o in Outcome if o.skipped)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


@dataclass
class ResultRecord:
    """One case run.  ``replay`` is the command line that reruns exactly this case;
    ``spec_path`` the dumped spec file (failures); ``blamed_operation`` / ``blamed_data_type``
    the operation and type a failure is counted against (see nnconform.verdict.attribution); ``extra`` anything else a suite wants to
    keep (comparison details, timings, the device's version string...)."""

    suite: str
    test_id: str
    driver: str
    outcome: Outcome
    operations: list[str] = field(default_factory=list)
    data_types: list[str] = field(default_factory=list)
    # The operation a failure is blamed on (nnconform.verdict.attribution: the first that diverged)
    # and the data type it ran on; empty for cases that did not fail or cannot be attributed.
    blamed_operation: str = ""
    blamed_data_type: str = ""
    duration_s: float = 0.0
    seed: int | None = None
    spec_path: str | None = None
    message: str = ""
    replay: str = ""
    timestamp: str = field(default_factory=_now)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.outcome = Outcome.parse(self.outcome)
        self.operations = [str(o) for o in self.operations]
        self.data_types = [str(t) for t in self.data_types]
        self.blamed_operation = str(self.blamed_operation or "")
        self.blamed_data_type = str(self.blamed_data_type or "")

    @property
    def good(self) -> bool:
        return self.outcome.good

    @property
    def bad(self) -> bool:
        return self.outcome.bad

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ResultRecord":
        """Build a record from a parsed line.  Keys this version does not know (written by a
        newer harness, or by hand) are kept in ``extra`` rather than rejected."""
        known = _FIELD_NAMES
        kwargs = {k: v for k, v in d.items() if k in known}
        extra = dict(kwargs.pop("extra", None) or {})
        for k, v in d.items():
            if k not in known:
                extra.setdefault(k, v)
        missing = [k for k in ("suite", "test_id", "driver", "outcome") if k not in kwargs]
        if missing:
            raise ValueError(f"record lacks {', '.join(missing)}")
        return cls(**kwargs, extra=extra)


def _json_default(v: Any) -> Any:
    # numpy scalars and arrays, paths and sets show up in ``extra``; keep them readable.
    if hasattr(v, "tolist"):
        return v.tolist()
    if isinstance(v, (set, frozenset, tuple)):
        return list(v)
    if isinstance(v, os.PathLike):
        return os.fspath(v)
    return repr(v)


def _clean_floats(v: Any) -> Any:
    # JSON has no NaN/inf; write them as strings so every line is standard JSON.
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, dict):
        return {str(k): _clean_floats(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean_floats(x) for x in v]
    return v


_FIELDS = tuple(f.name for f in dataclasses.fields(ResultRecord))
_FIELD_NAMES = frozenset(_FIELDS)


def record_to_json(record: ResultRecord) -> str:
    # Fast path (the cluster coordinator writes thousands of rows a second): a row of plain
    # JSON values is dumped once, from a shallow dict.  ``dataclasses.asdict`` deep-copies and
    # the careful path below dumps twice; they cost ~70 us a row, this ~10.  A row holding NaN
    # or inf (ValueError) or a value JSON has no type for (TypeError: numpy, paths, sets)
    # takes the careful path, which gives the same text for every row the fast one accepts.
    try:
        return json.dumps({k: getattr(record, k) for k in _FIELDS}, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError):
        pass
    d = json.loads(json.dumps(record.to_dict(), default=_json_default))
    return json.dumps(_clean_floats(d), allow_nan=False, ensure_ascii=False)


class ResultsWriter:
    """Appends records to a JSON-lines file, one durable line each.

    Opening an existing file keeps its rows; a partial last line left by a killed run is cut
    off first, so the new rows do not glue onto it.  Safe for several threads of one process
    and for several processes (pytest-xdist workers share one journal): each line is one
    O_APPEND write under an exclusive flock.  A symlink in the journal's place is refused
    (O_NOFOLLOW), never written through.
    """

    FSYNC_INTERVAL_S = 1.0

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self._last_fsync = time.monotonic()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        self._fd: int | None = fd
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            self._trim_partial_line()
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _trim_partial_line(self) -> None:
        if not self.path.exists():
            return
        fd = os.open(self.path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb+") as f:
            size = f.seek(0, os.SEEK_END)
            if size == 0:
                return
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return
            # Find the last newline; everything after it is the partial line.
            pos, chunk = size, 4096
            keep = 0
            while pos > 0:
                start = max(0, pos - chunk)
                f.seek(start)
                data = f.read(pos - start)
                nl = data.rfind(b"\n")
                if nl >= 0:
                    keep = start + nl + 1
                    break
                pos = start
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())

    def write(self, record: ResultRecord) -> None:
        self._append((record_to_json(record) + "\n").encode("utf-8"))

    def write_many(self, records: Iterable[ResultRecord], sync: bool = False) -> int:
        """Append several rows with one flock and one ``write`` (the cluster coordinator: a
        chunk of rows streamed back by a worker), then fsync them if ``sync``; else the usual
        policy (at most once a second).  The chunk is whole lines: if the write fails
        part-way, the journal is cut back to where the chunk began and the error raised, so
        no row of it is recorded.  Returns the number of rows written."""
        lines = [record_to_json(r) + "\n" for r in records]
        if not lines:
            if sync:
                self.sync()
            return 0
        self._append("".join(lines).encode("utf-8"), sync=sync)
        return len(lines)

    def _append(self, data: bytes, sync: bool = False) -> None:
        with self._lock:
            if self._fd is None:
                raise ValueError(f"results writer for {self.path} is closed")
            fd = self._fd
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                start = os.lseek(fd, 0, os.SEEK_END)
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
                    if sync or time.monotonic() - self._last_fsync >= self.FSYNC_INTERVAL_S:
                        os.fsync(fd)
                        self._last_fsync = time.monotonic()
                except OSError:
                    # A full disk (or a file-size limit) cut the line short: take the partial
                    # line back so every line in the journal stays a whole record.
                    try:
                        os.ftruncate(fd, start)
                    except OSError:
                        pass  # the reader drops a broken last line anyway; the write error is raised
                    raise
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def sync(self) -> None:
        """fsync the rows written so far now (the cluster coordinator: each batch's rows are
        on disk before their cases count as done)."""
        with self._lock:
            if self._fd is not None:
                os.fsync(self._fd)
                self._last_fsync = time.monotonic()

    def write_all(self, records: Iterable[ResultRecord]) -> None:
        for r in records:
            self.write(r)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                try:
                    os.fsync(self._fd)
                finally:
                    os.close(self._fd)
                    self._fd = None

    def __enter__(self) -> "ResultsWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_results(path: str | os.PathLike[str]) -> list[ResultRecord]:
    """All records of a results file, in the order written.

    A last line that does not parse (a run killed mid-write) is dropped.  Any other bad line
    raises ValueError naming the file and line number: that file was damaged some other way.
    A missing file raises FileNotFoundError.

    The file is read line by line and the short strings repeated from row to row (messages,
    driver, variant names, extra values) are shared: a whole execution matrix is 538,000 rows
    and 500 MB of JSON, and reading it whole, then holding each row's own copies, took 2.5 GB.
    """
    path = Path(path)
    shared: dict[str, str] = {}
    keep = shared.setdefault
    records: list[ResultRecord] = []
    # No reference cycles are made here, but the cyclic collector, counting the containers
    # made, walked the growing list of records again and again: half of the read's time.
    collecting = gc.isenabled()
    gc.disable()
    try:
        _read_into(records, path, keep)
    finally:
        if collecting:
            gc.enable()
    return records


def _read_into(records: list[ResultRecord], path: Path, keep: Callable[[str, str], str]) -> None:
    short = _SHARED_LEN
    trusted = _from_line_dict
    with open(path, encoding="utf-8", errors="replace", newline="\n") as f:
        for i, ln in enumerate(f):
            if not ln.strip():
                continue
            try:
                d = json.loads(ln)
                if not isinstance(d, dict):
                    raise ValueError(f"a JSON {type(d).__name__}, not an object")
                for k in _SHARED_FIELDS:
                    v = d.get(k)
                    if type(v) is str and len(v) <= short:
                        d[k] = keep(v, v)
                extra = d.get("extra")
                if type(extra) is dict:
                    for k, v in extra.items():
                        if type(v) is str and len(v) <= short:
                            extra[k] = keep(v, v)
                records.append(trusted(d) or ResultRecord.from_dict(d))
            except (ValueError, TypeError) as e:
                # a row cut short by a kill: the last one, and the file does not end a line
                rest = f.read()
                if not rest.strip() and not (ln + rest).endswith("\n"):
                    break
                raise ValueError(f"{path}:{i + 1}: not a result record ({e})") from None


def _from_line_dict(d: dict[str, Any]) -> ResultRecord | None:
    """A record from a parsed journal line that holds exactly the record's fields, its
    ``extra`` a dict (what nnconform writes): the constructor straight away, without
    from_dict's sorting of unknown keys into ``extra``.  None for anything else.  (Not
    ``__dict__.update``: an instance dict filled that way is not the compact key-sharing
    kind, and a whole matrix's 538,000 records then took 1.7 GB instead of 1.1.)"""
    if d.keys() != _FIELD_NAMES or type(d["extra"]) is not dict:
        return None
    return ResultRecord(**d)


_SHARED_LEN = 200  # longer strings (tracebacks, commands) are mostly one row's own
_SHARED_FIELDS = ("suite", "driver", "message", "blamed_operation", "blamed_data_type")
