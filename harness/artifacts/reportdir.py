"""The report directory: one run at a time, earlier results kept, nothing written through links.

    rd = ReportDir("nnconform-report")
    rd.lock()                  # ReportDirError if another run holds it
    moved = rd.rotate()        # earlier results -> previous/<when>/ (None if there were none)
    rd.write_status("running", ...)
    rd.atomic_write("report.html", text)

Files are replaced with rename(2), which swaps the directory entry: a symlink planted at
``report.html`` (by a driver, which runs as the same user) is replaced, never followed.  The
journal is opened with O_NOFOLLOW for the same reason.
"""

from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from nnconform.errors import NnError

LOCK_FILE = ".nnconform.lock"
STATUS_FILE = "run.json"
PREVIOUS_DIR = "previous"
# What one run writes; rotated together so a report never mixes two runs.
RUN_FILES = ("results.jsonl", "results.csv", "report.html", STATUS_FILE, "failures", "summary.json", "junit.xml")


class ReportDirError(NnError):
    """The report directory cannot be used (busy, unwritable, full); one line for the user."""


def describe_os_error(e: OSError, path: os.PathLike | str) -> str:
    if e.errno == errno.ENOSPC:
        why = "no space left on the device"
    elif e.errno == errno.EFBIG:
        why = "file too large (file-size limit or full quota)"
    elif e.errno in (errno.EROFS,):
        why = "the file system is read-only"
    elif e.errno in (errno.EACCES, errno.EPERM):
        why = "permission denied"
    elif e.errno == errno.ELOOP:
        why = "it is a symbolic link (not followed)"
    else:
        why = e.strerror or str(e)
    return f"cannot write to {path}: {why}"


class ReportDir:
    def __init__(self, path: os.PathLike | str):
        self.path = Path(path)
        self._lock_fd: int | None = None

    # -- one run at a time ----------------------------------------------------------------
    def lock(self) -> None:
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise ReportDirError(describe_os_error(e, self.path)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = ""
            try:
                holder = os.read(fd, 200).decode("utf-8", "replace").strip()
            except OSError:
                holder = ""
            os.close(fd)
            raise ReportDirError(
                f"{self.path} is in use by another nnconform run"
                + (f" ({holder})" if holder else "")
                + "; wait for it or choose another --report-dir"
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()}".encode())
        except OSError:
            pass  # the note for a second run's message is a courtesy; the lock itself is held
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing releases the flock
            self._lock_fd = None

    # -- earlier results ---------------------------------------------------------------------
    def has_results(self) -> bool:
        return any(os.path.lexists(self.path / n) for n in RUN_FILES)

    def rotate(self) -> Path | None:
        """Move the files of an earlier run into ``previous/<its start time>/``."""
        if not self.has_results():
            return None
        stamp = ""
        try:
            st = self.read_status()
            stamp = str(st.get("started", ""))
        except (OSError, ValueError):
            stamp = ""
        stamp = "".join(c if c.isalnum() or c in "-_" else "-" for c in stamp)[:40] or _dt.datetime.now().strftime(
            "%Y%m%dT%H%M%S"
        )
        dest = self.path / PREVIOUS_DIR / stamp
        n = 1
        while os.path.lexists(dest):
            n += 1
            dest = self.path / PREVIOUS_DIR / f"{stamp}.{n}"
        try:
            dest.mkdir(parents=True)
            for name in RUN_FILES:
                src = self.path / name
                if os.path.lexists(src):
                    os.rename(src, dest / name)  # rename moves links as links
        except OSError as e:
            raise ReportDirError(describe_os_error(e, dest)) from None
        return dest

    # -- writing ------------------------------------------------------------------------------
    def atomic_write(self, name: str, data: str | bytes) -> Path:
        return atomic_write(self.path / name, data)

    def write_status(self, status: dict[str, Any]) -> None:
        self.atomic_write(STATUS_FILE, json.dumps(status, indent=1, default=str))

    def read_status(self) -> dict:
        p = self.path / STATUS_FILE
        if os.path.islink(p):
            raise ValueError(f"{p} is a symbolic link")
        d = json.loads(p.read_text(encoding="utf-8"))
        if not isinstance(d, dict):
            raise ValueError(f"{p} is not a JSON object")
        return d


def atomic_write(path: os.PathLike | str, data: str | bytes) -> Path:
    """Write ``path`` through a fresh temporary file and rename(2): readers never see half a
    file, and whatever sits at ``path`` (a symlink included) is replaced, not followed."""
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass  # the original error is what the user needs to see
        raise
    return path


# One process may take the same directory twice (``nnconform run`` locks it before starting
# pytest, whose plugin takes it again): flock would refuse the second open file, so holders
# in this process share one ReportDir, counted.
_held: dict[str, list] = {}


def acquire(path: os.PathLike | str) -> ReportDir:
    key = os.path.realpath(path)
    entry = _held.get(key)
    if entry is None:
        rd = ReportDir(path)
        rd.lock()
        entry = _held[key] = [rd, 0]
    entry[1] += 1
    return entry[0]


def release(rd: ReportDir) -> None:
    key = os.path.realpath(rd.path)
    entry = _held.get(key)
    if entry is None:
        rd.unlock()
        return
    entry[1] -= 1
    if entry[1] <= 0:
        del _held[key]
        rd.unlock()
