"""Finding and killing every process a driver left behind.

Killing a process group is not enough: a driver's child can call ``setsid`` (a new group) or
double-fork (its parent exits and it is re-parented).  Linux's child subreaper flag fixes the
second: orphans re-parent to the nearest subreaper ancestor instead of init, so they stay
*descendants* of the harness, and a walk of /proc by parent pid finds them whatever group or
session they moved to.

    set_subreaper()                   # once, in the harness and in each driver host
    kill_descendants(os.getpid(), keep={host.pid})

``/dev/shm`` entries a driver leaves are noticed by comparing two snapshots
(:func:`shm_leftovers` leaves out entries another process still holds open or mapped).
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from dataclasses import dataclass
from typing import AbstractSet, Callable, Iterable

_PR_SET_CHILD_SUBREAPER = 36
# Tests point this at a private directory (other programs on a shared machine create and
# remove /dev/shm entries at any time); the harness itself always watches /dev/shm.
SHM_DIR = os.environ.get("NNCONFORM_SHM_DIR") or "/dev/shm"
KILL_WAIT_S = 5.0  # how long kill_descendants waits for SIGKILLed processes to die


def set_subreaper() -> bool:
    """Make orphaned descendants re-parent to this process (Linux); False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        done: bool = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        return done
    except (OSError, AttributeError):
        return False


@dataclass(frozen=True)
class Proc:
    """One line of /proc/<pid>/stat, the fields the reaper uses."""

    pid: int
    ppid: int
    state: str  # "Z": a zombie (dead, not yet reaped by its parent)
    pgrp: int
    session: int


def _stat(pid: int) -> Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None  # it exited (and was reaped) while we looked
    # The command name (field 2) is in parentheses and may hold spaces or ')'.
    rest = data[data.rfind(b")") + 2 :].split()
    if len(rest) < 4:
        return None
    return Proc(pid, int(rest[1]), rest[0].decode("ascii", "replace"), int(rest[2]), int(rest[3]))


def _table() -> dict[int, Proc]:
    """Every process visible in /proc."""
    out: dict[int, Proc] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if name.isdigit():
            p = _stat(int(name))
            if p is not None:
                out[p.pid] = p
    return out


def _parents() -> dict[int, int]:
    """pid -> ppid for every process visible in /proc."""
    return {pid: p.ppid for pid, p in _table().items()}


def _walk(
    table: dict[int, Proc], root: int, skip: AbstractSet[int] = frozenset(), only: Callable[[Proc], bool] | None = None
) -> list[int]:
    """Descendants of ``root`` in one /proc snapshot, parents before their children, leaving
    out the processes in ``skip`` and everything below them.  With ``only``, just the
    processes for which it holds and everything below those."""
    children: dict[int, list[int]] = {}
    for pid, p in table.items():
        children.setdefault(p.ppid, []).append(pid)
    found: list[int] = []
    todo = [(c, only is None) for c in children.get(root, ()) if c not in skip]
    while todo:
        pid, chosen = todo.pop(0)
        chosen = chosen or (only is not None and only(table[pid]))  # only None: all chosen already
        if chosen:
            found.append(pid)
        todo.extend((c, chosen) for c in children.get(pid, ()) if c not in skip)
    return found


def descendants(root: int) -> list[int]:
    """Every live descendant of ``root`` (parents before children), found through /proc.
    Zombies (dead, awaiting their parent's wait) are left out: nothing of them is running."""
    table = _table()
    return [pid for pid in _walk(table, root) if table[pid].state != "Z"]


def describe(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = " ".join(f.read().decode("utf-8", "replace").replace("\0", " ").split())
    except OSError:
        cmd = ""
    if not cmd:
        try:
            with open(f"/proc/{pid}/comm", "rb") as f:
                cmd = "[" + f.read().decode("utf-8", "replace").strip() + "]"
        except OSError:
            cmd = ""
    return f"pid {pid} ({cmd[:80] or '?'})"


def has_children() -> bool:
    """Whether this process has any child (running or zombie), without reaping one and
    without reading /proc: a subreaper with none has no descendants at all."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def _dead(pid: int) -> bool:
    p = _stat(pid)
    return p is None or p.state == "Z"


def kill_descendant_procs(
    root: int,
    keep: Iterable[int] = (),
    rounds: int = 5,
    wait_s: float = KILL_WAIT_S,
    only: Callable[[Proc], bool] | None = None,
) -> list[tuple[Proc, str]]:
    """SIGKILL every live descendant of ``root`` except ``keep`` and their own descendants
    (recomputed from each /proc snapshot, so a child a kept process starts meanwhile is kept
    too); with ``only``, just the descendants it selects and their own descendants.
    Repeated while new ones appear (a forking child can outrun one pass).  Waits up to
    ``wait_s`` for the killed to die and reaps those that are this process's children.
    Returns (Proc as it was before the kill, description) for each process killed."""
    if root == os.getpid() and not has_children():
        return []  # the common case, without scanning /proc
    keep = set(keep)
    killed: dict[int, tuple[Proc, str]] = {}
    deadline = time.monotonic() + wait_s
    for _ in range(rounds):
        table = _table()
        victims = [pid for pid in _walk(table, root, keep, only) if table[pid].state != "Z" and pid not in killed]
        if not victims:
            break
        for pid in victims:
            killed[pid] = (table[pid], describe(pid))
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        # SIGKILL is not instant (a process in the kernel, a large address space to free):
        # wait until each is a zombie or gone, so the next round does not count it again and
        # its status can be collected now rather than left as a zombie.
        pending = set(victims)
        while pending:
            pending = {pid for pid in pending if not _dead(pid)}
            reap(killed)
            if not pending or time.monotonic() >= deadline:
                break
            time.sleep(0.005)
    reap(killed)
    return list(killed.values())


def kill_descendants(root: int, keep: Iterable[int] = (), rounds: int = 5) -> list[str]:
    """SIGKILL every descendant of ``root`` except ``keep`` (and their own descendants),
    repeated while new ones appear (a forking child can outrun one pass).  Returns a
    description of each process killed, for the result row."""
    return [desc for _, desc in kill_descendant_procs(root, keep, rounds)]


def reap(pids: Iterable[int]) -> None:
    """Collect the exit status of the given processes where they are our children (orphans
    re-parented to us).  Only named pids: ``waitpid(-1)`` would steal the status of a
    subprocess.Popen child and lose how it died."""
    for pid in list(pids):
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass  # not our child: its own parent (or init) reaps it


def environ_has(pid: int, marker: bytes) -> bool:
    """Whether ``marker`` is in the environment ``pid`` started with (inherited by its children
    unless they replace it); False where /proc does not let us read it (a zombie, another
    user's process)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return marker in f.read()
    except OSError:
        return False


def zombie_children(of: int | None = None) -> list[Proc]:
    """Zombies whose parent is ``of`` (default: this process)."""
    of = os.getpid() if of is None else of
    return [p for p in _table().values() if p.ppid == of and p.state == "Z"]


def shm_snapshot() -> set[str]:
    try:
        return set(os.listdir(SHM_DIR))
    except OSError:
        return set()


def _held(paths: set[str]) -> dict[int, set[str]]:
    """pid -> which of ``paths`` it has open or mapped (the processes of /proc we may read).

    Files are matched by device and inode, not by name: a POSIX named semaphore (sem_open,
    and so every multiprocessing lock of a spawned process) is written under a temporary
    name, mapped, and only then linked to its real name, so the process that holds it shows
    ``/dev/shm/sem.XXXXXX (deleted)`` in its maps, never ``sem.mp-...``."""
    want: dict[tuple[int, int], str] = {}
    for path in paths:
        try:
            st = os.lstat(path)
        except OSError:
            continue  # gone meanwhile
        want[(st.st_dev, st.st_ino)] = path
    # /proc/PID/maps gives a mapping's device as major:minor in hex, then its inode
    maps_key = {(f"{os.major(dev):02x}:{os.minor(dev):02x}", str(ino)): path for (dev, ino), path in want.items()}
    found: dict[int, set[str]] = {}
    if not want:
        return found
    prefix = os.path.realpath(SHM_DIR).rstrip("/") + "/"  # how /proc names files there
    prefix_b = prefix.encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        held: set[str] = set()
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    # only descriptors of files in the shm directory (renamed or deleted ones
                    # still show it) are worth a stat: the open file itself, whatever its name
                    if not os.readlink(f"/proc/{pid}/fd/{fd}").startswith(prefix):
                        continue
                    st = os.stat(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                held_path = want.get((st.st_dev, st.st_ino))
                if held_path is not None:
                    held.add(held_path)
        except OSError:
            pass  # gone, or another user's process
        try:
            with open(f"/proc/{pid}/maps", "rb") as f:
                maps = f.read()
            if prefix_b in maps:  # most processes map nothing there: one substring search
                for line in maps.splitlines():
                    if prefix_b not in line:
                        continue
                    fields = line.split(None, 5)
                    if len(fields) >= 6:
                        held_path = maps_key.get((fields[3].decode(), fields[4].decode()))
                        if held_path is not None:
                            held.add(held_path)
        except OSError:
            pass
        if held:
            found[pid] = held
    return found


def shm_leftovers(before: set[str], ours: Iterable[int] = ()) -> list[str]:
    """Entries of /dev/shm that are not in the ``before`` snapshot, belong to this user and
    are not held open or mapped by any process outside ``ours``: what the processes ``ours``
    (and those that have exited) created since and left.  An entry another process holds
    belongs to someone else (another worker's case, another program) and is left out."""
    new = sorted(shm_snapshot() - set(before))
    mine = []
    for name in new:
        try:
            st = os.lstat(os.path.join(SHM_DIR, name))
        except OSError:
            continue  # already gone
        if st.st_uid == os.getuid():
            mine.append(name)
    if not mine:
        return []
    ours = set(ours)
    foreign: set[str] = set()
    for pid, held in _held({os.path.join(SHM_DIR, n) for n in mine}).items():
        if pid not in ours:
            foreign |= held
    # (an entry removed meanwhile shows in /proc as "... (deleted)": gone, so not ours to name)
    return [n for n in mine if os.path.join(SHM_DIR, n) not in foreign and os.path.lexists(os.path.join(SHM_DIR, n))]


def remove_shm(names: Iterable[str]) -> list[str]:
    """Unlink the given /dev/shm entries; returns the names actually removed."""
    removed = []
    for name in names:
        path = os.path.join(SHM_DIR, os.path.basename(name))
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                os.rmdir(path)
            else:
                os.unlink(path)
            removed.append(name)
        except OSError:
            continue  # gone meanwhile, or not ours to remove: it stays named in the row
    return removed


__all__ = [
    "set_subreaper",
    "descendants",
    "kill_descendants",
    "kill_descendant_procs",
    "reap",
    "describe",
    "has_children",
    "environ_has",
    "zombie_children",
    "shm_snapshot",
    "shm_leftovers",
    "remove_shm",
    "Proc",
]


def die_with_parent(parent: int) -> None:
    """Start a daemon thread that, once ``parent`` is gone (a SIGKILLed harness gets no
    chance to clean up), kills every descendant of this process (setsid ones too) and then
    this process group.  Used by driver hosts and stress workers."""
    import threading

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                kill_descendants(os.getpid())
                os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, daemon=True, name="nnconform-orphan-watchdog").start()
