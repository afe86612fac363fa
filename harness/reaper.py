"""Finding and killing every process a driver left behind.

Killing a process group is not enough: a driver's child can call ``setsid`` (a new group) or
double-fork (its parent exits and it is re-parented).  Linux's child subreaper flag fixes the
second: orphans re-parent to the nearest subreaper ancestor instead of init, so they stay
*descendants* of the harness, and a walk of /proc by parent pid finds them whatever group or
session they moved to.

    set_subreaper()                   # once, in the harness and in each driver host
    kill_descendants(os.getpid(), keep={host.pid})

``/dev/shm`` entries a driver leaves are noticed by comparing two snapshots.
"""
from __future__ import annotations

import ctypes
import os
import signal
import time
from typing import Iterable

_PR_SET_CHILD_SUBREAPER = 36
SHM_DIR = "/dev/shm"


def set_subreaper() -> bool:
    """Make orphaned descendants re-parent to this process (Linux); False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _parents() -> dict[int, int]:
    """pid -> ppid for every process visible in /proc."""
    out: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue  # it exited while we looked
        # The command name (field 2) is in parentheses and may hold spaces or ')'.
        rest = data[data.rfind(b")") + 2:].split()
        if len(rest) >= 2:
            out[int(name)] = int(rest[1])
    return out


def descendants(root: int) -> list[int]:
    """Every live descendant of ``root`` (children first), found through /proc."""
    children: dict[int, list[int]] = {}
    for pid, ppid in _parents().items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def describe(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        cmd = ""
    return f"pid {pid} ({cmd[:80] or '?'})"


def kill_descendants(root: int, keep: Iterable[int] = (), rounds: int = 5) -> list[str]:
    """SIGKILL every descendant of ``root`` except ``keep`` (and their own descendants),
    repeated while new ones appear (a forking child can outrun one pass).  Returns a
    description of each process killed, for the result row."""
    keep = set(keep)
    kept_trees = set(keep)
    for k in keep:
        kept_trees.update(descendants(k))
    killed: list[str] = []
    for _ in range(rounds):
        victims = [p for p in descendants(root) if p not in kept_trees]
        if not victims:
            break
        for pid in victims:
            killed.append(describe(pid))
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)
        reap(victims)
    return killed


def reap(pids: Iterable[int]) -> None:
    """Collect the exit status of the given processes where they are our children (orphans
    re-parented to us).  Only named pids: ``waitpid(-1)`` would steal the status of a
    subprocess.Popen child and lose how it died."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass  # not our child: its own parent (or init) reaps it


def shm_snapshot() -> set[str]:
    try:
        return set(os.listdir(SHM_DIR))
    except OSError:
        return set()


__all__ = ["set_subreaper", "descendants", "kill_descendants", "reap", "describe", "shm_snapshot"]
