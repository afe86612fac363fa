"""Child processes of the harness: the one place that starts, bounds, watches and ends them.

Three parts of nnconform run foreign code in a child interpreter: the driver host of a
conformance run (nnconform.isolation.proxy / nnconform.isolation.host), the stress sandbox's workers
(nnconform.isolation.sandbox), and, through the driver host, the fuzzer.  They all need the same things,
provided here once:

- **spawn** (:class:`Child`): ``python -X faulthandler -m MODULE`` started with subprocess
  (never forked from the harness: GPU runtimes break under fork), in a session and process
  group of its own, with a request pipe and a reply pipe, stdout and stderr going to a file,
  ``PYTHONFAULTHANDLER`` on and a token in its environment that everything it starts inherits;
  the harness is made a child subreaper first, so what the child's descendants leave behind
  re-parents to the harness, not to init, and can still be found;
- **the child's own set-up** (:func:`child_arguments`, :func:`child_setup`): faulthandler on
  every thread (fatal signals, and SIGUSR1 on demand), ``RLIMIT_AS``, child subreaper, and a
  watchdog that ends the child and what it started once its parent is gone;
- **stderr capture** (:class:`StderrFile`): a tail bounded in lines, characters and bytes
  read, and a longer fault dump that always keeps the crashing thread's frames;
- **signal naming** (:func:`signal_name`, :func:`exit_text`) and the parsing of faulthandler
  dumps (:func:`fault_blocks`);
- **ending** (:meth:`Child.dump_stacks`, :meth:`Child.kill`): a stack dump before a kill, then
  SIGKILL of the whole group, of every descendant, and of the orphans carrying the child's token
  or session, and the reaping of them all;
- **classification** (:func:`classify`): how a child that gave no answer ended, as a CRASH
  (a signal, an exit code, or a closed pipe) or a HANG, with its one-line reason.

The wire formats stay with their users: the driver host speaks nnconform.isolation.hostproto frames,
the sandbox JSON lines.  This module only hands them the two pipe ends.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nnconform.isolation import reaper
from nnconform.verdict.outcome import Outcome

CRASH, HANG = Outcome.CRASH, Outcome.HANG
HANG_DUMP_S = 0.5  # time given to faulthandler to write every thread's stack
TAIL_WINDOW = 64_000  # bytes at the end of a stderr file that a tail reads at most
FAULT_SCAN = 1 << 20  # bytes searched for the crashing thread when a dump outgrows the tail
FAULT_DUMP_LINES, FAULT_DUMP_CHARS = 4000, 64_000


# ---------------------------------------------------------------------------------------------
# Names and classification
# ---------------------------------------------------------------------------------------------


def signal_name(sig: object) -> str:
    """``SIGSEGV`` for 11; ``signal 99`` for a number no signal has (or anything that is not one)."""
    try:
        return signal.Signals(int(sig)).name  # type: ignore[call-overload]  # any value: see except
    except (ValueError, TypeError):
        return f"signal {sig}"


def exit_text(returncode: int | None) -> str:
    """How a process ended, from ``Popen.returncode`` (negative: the signal that killed it)."""
    if returncode is None:
        return "still running"
    return f"killed by {signal_name(-returncode)}" if returncode < 0 else f"exit code {returncode}"


@dataclass(frozen=True)
class Ending:
    """A child that did not answer: CRASH (by ``signal``, by ``exit_code``, or neither when it
    closed its pipe and did not exit) or HANG, with the one-line reason for the row."""

    verdict: str
    reason: str
    signal: int | None = None
    exit_code: int | None = None

    def details(self) -> dict[str, int]:
        """The ``signal`` / ``exit_code`` entries a result row carries (only those known)."""
        return {k: v for k, v in (("signal", self.signal), ("exit_code", self.exit_code)) if v is not None}


def classify(returncode: int | None, timed_out: bool, *, who: str, unfinished: str, hang_reason: str = "") -> Ending:
    """The verdict on a child that gave no answer.

    ``timed_out``: no answer within its bound, a HANG whatever the child did afterwards
    (``hang_reason`` says which bound); otherwise the reply pipe closed and ``returncode`` (after
    a short wait for the exit) tells a signal from an exit.  An exit, even with status 0, is a
    CRASH: the child had something to answer.  ``who`` names the child ("worker", "driver
    host"), ``unfinished`` what it left undone ("without a verdict", "in the middle of a call")."""
    if timed_out:
        return Ending(HANG, f"{hang_reason}; {who} stacks dumped and its process group killed")
    if returncode is None:
        return Ending(CRASH, f"{who} closed its result pipe {unfinished} and did not exit")
    if returncode < 0:
        return Ending(CRASH, f"{who} killed by {signal_name(-returncode)}", signal=-returncode)
    return Ending(CRASH, f"{who} exited with code {returncode} {unfinished}", exit_code=returncode)


# ---------------------------------------------------------------------------------------------
# stderr
# ---------------------------------------------------------------------------------------------


class StderrFile:
    """The file a child's stdout and stderr go to.  Reads are bounded: a child that writes
    gigabytes costs the harness no more than the end of the file."""

    def __init__(self, directory: str | None = None, prefix: str = "nnconform-child-"):
        fd, self.path = tempfile.mkstemp(prefix=prefix, suffix=".stderr", dir=directory)
        os.close(fd)

    def size(self) -> int:
        try:
            return os.path.getsize(self.path)
        except OSError:
            return 0

    def tail(self, offset: int = 0, lines: int = 30, chars: int = 6000) -> str:
        """The last ``lines`` lines written since ``offset`` (a ``size()`` taken earlier, e.g.
        when a case started), at most ``chars`` characters of them."""
        return file_tail(self.path, offset, lines, chars)

    def fault_dump(self, offset: int = 0, chars: int = FAULT_DUMP_CHARS) -> str:
        """The end of the file, long enough for a faulthandler dump of every thread (for who
        needs the crashing thread's frames, like the fuzzer's buckets).  A dump of many deep
        threads can be longer than ``chars``; then the crashing thread's block ("Current
        thread ...", which faulthandler prints in the middle of the others) is put first, so
        its frames are never the part that was cut off."""
        tail = self.tail(offset, FAULT_DUMP_LINES, chars)
        if _CURRENT in tail:
            return tail
        text = _read_end(self.path, offset, FAULT_SCAN)
        headers = list(_CURRENT_HEADER.finditer(text))
        if not headers:
            return tail
        start = headers[-1].start()  # the last dump's crashing thread
        end = text.find("\n\n", start)
        block = text[start : end if end >= 0 else len(text)][: chars // 4]
        keep = chars - len(block) - 2
        return block + "\n\n" + (tail[len(tail) - keep :] if keep > 0 else "")

    def remove(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            return  # already gone: nothing to clean


def _read_end(path: str, offset: int, window: int) -> str:
    """The text of ``path`` from ``offset`` on, but no more than its last ``window`` bytes."""
    try:
        with open(path, "rb") as f:
            f.seek(max(offset, os.fstat(f.fileno()).st_size - window))
            data = f.read()
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace").rstrip("\n")


def file_tail(path: str, offset: int = 0, lines: int = 30, chars: int = 6000) -> str:
    """The last ``lines`` lines of the file ``path`` from ``offset`` on, at most ``chars``
    characters of them, reading no more than the file's last TAIL_WINDOW bytes ("" when it
    cannot be read).  For any process's stderr file; a Child's is ``child.stderr``."""
    text = _read_end(path, offset, TAIL_WINDOW)
    return "\n".join(text.split("\n")[-lines:])[-chars:]


_CURRENT = "Current thread "
_CURRENT_HEADER = re.compile(r"^Current thread 0x[0-9a-fA-F]+ \(most recent call first\):", re.MULTILINE)
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+) in (\S+)')


def fault_frames(text: str) -> list[list[tuple[str, int, str]]]:
    """The thread blocks of the faulthandler dumps in ``text``, each a list of ``(file, line,
    function)`` frames, most recent call first.  The crashing thread's block (faulthandler's
    "Current thread") comes first, then all blocks in the order written.  A blank line ends a
    block (faulthandler separates them so); frames with no block header before them belong to
    a block whose header was cut off and are left out."""
    blocks: list[list[tuple[str, int, str]]] = []
    cur: list[tuple[str, int, str]] | None = None
    current: list[tuple[str, int, str]] | None = None
    for line in (text or "").splitlines():
        if not line.strip():
            cur = None
        elif "(most recent call first)" in line:
            cur = []
            blocks.append(cur)
            if line.startswith(_CURRENT):
                current = cur  # the thread that received the fatal signal
            continue
        m = _FRAME.match(line)
        if m and cur is not None:
            cur.append((m.group(1), int(m.group(2)), m.group(3)))
    return ([current] if current is not None else []) + blocks


def fault_blocks(text: str) -> list[list[tuple[str, str]]]:
    """:func:`fault_frames` without the line numbers: ``(file, function)`` frames."""
    return [[(f, fn) for f, _, fn in block] for block in fault_frames(text)]


# Frames that are not the driver's: the driver host's own loop and protocol (since the layer
# packages, and the flat modules' paths from before them) and the standard library's thread
# and queue machinery every idle thread sits in.
NOT_DRIVER = (
    "/isolation/host.py",
    "/isolation/hostproto.py",
    "/nnconform/host.py",
    "/nnconform/hostproto.py",
    "/harness/host.py",
    "/harness/hostproto.py",
    "/concurrent/futures/",
    "/threading.py",
    "/selectors.py",
    "/queue.py",
)


def is_driver_frame(path: str) -> bool:
    return not any(s in path for s in NOT_DRIVER) and "/lib/python3" not in path and not path.startswith("<")


def _short_path(path: str) -> str:
    parts = path.split("/")
    return "/".join(parts[-2:]) if len(parts) > 2 else path


def crash_stack(text: str, limit: int = 16) -> list[str]:
    """The stack of the thread that crashed or hung, as ``dir/file.py:LINE in function``
    lines, most recent call first (so the driver's own frames come first): from the last
    faulthandler dump in ``text``, the first thread block (the crashing thread's first) with a
    frame of the driver.  Idle harness threads are left out.  Empty when no block has one."""
    for block in fault_frames(text):
        if any(is_driver_frame(f) for f, _, _ in block):
            # frames inside the standard library above the driver's innermost frame (a lock
            # it waits on, a numpy call) stay: they say where the driver was stuck
            return [f"{_short_path(f)}:{line} in {fn}" for f, line, fn in block[:limit]]
    return []


def driver_frame(text: str) -> str:
    """The innermost driver frame of :func:`crash_stack`'s thread, ``dir/file.py:LINE in
    function`` ("" when there is none): what a crash is bucketed on."""
    for block in fault_frames(text):
        for f, line, fn in block:
            if is_driver_frame(f):
                return f"{_short_path(f)}:{line} in {fn}"
    return ""


# ---------------------------------------------------------------------------------------------
# The parent side
# ---------------------------------------------------------------------------------------------


class Child:
    """One child interpreter running ``python -m module``, with its two pipes.

    The child gets ``--req-fd R --res-fd W --mem-limit N`` after ``args`` (see
    :func:`child_arguments`); the harness writes requests to ``req_fd`` and reads replies from
    ``res_fd``, in whatever format the two sides agree on.  ``env`` replaces the inherited
    environment; ``token_var`` names the variable that carries this child's token to every
    process it starts.  Raises OSError when the interpreter cannot be started."""

    def __init__(
        self,
        module: str,
        args: Sequence[str] = (),
        *,
        token_var: str,
        mem_limit: int | None = None,
        env: Mapping[str, str] | None = None,
        stderr_dir: str | None = None,
        stderr_prefix: str = "nnconform-child-",
    ):
        self.stderr = StderrFile(stderr_dir, stderr_prefix)
        self.token_var = token_var
        self.token = f"{os.getpid()}-{os.urandom(8).hex()}"
        child_env = dict(os.environ if env is None else env)
        child_env["PYTHONFAULTHANDLER"] = "1"
        child_env[token_var] = self.token
        # Orphans of a child that dies re-parent here (not to init), so kill() can find them.
        reaper.set_subreaper()
        req_r, req_w = os.pipe()
        res_r, res_w = os.pipe()
        cmd = [
            sys.executable,
            "-X",
            "faulthandler",
            "-m",
            module,
            *args,
            "--req-fd",
            str(req_r),
            "--res-fd",
            str(res_w),
            "--mem-limit",
            str(int(mem_limit or 0)),
        ]
        try:
            with open(self.stderr.path, "ab") as err:
                self.proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=err,
                    stderr=err,
                    pass_fds=(req_r, res_w),
                    start_new_session=True,
                    env=child_env,
                )
        except BaseException:
            for fd in (req_w, res_r):
                os.close(fd)
            self.stderr.remove()
            raise
        finally:
            os.close(req_r)
            os.close(res_w)
        self.pid = self.proc.pid
        self.req_fd, self.res_fd = req_w, res_r
        self._fds_open = True

    # -- state ----------------------------------------------------------------------------
    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def poll(self) -> int | None:
        return self.proc.poll()

    def wait_exit(self, timeout: float) -> int | None:
        """The return code once the child has exited, waiting up to ``timeout``; None if it
        is still running then."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def exit_text(self) -> str:
        return exit_text(self.proc.returncode)

    def write(self, data: bytes) -> None:
        """All of ``data`` to the request pipe; OSError (BrokenPipeError) once the child is gone."""
        view = memoryview(data)
        while view:
            view = view[os.write(self.req_fd, view) :]

    # -- ending ---------------------------------------------------------------------------
    def dump_stacks(self, wait_s: float = HANG_DUMP_S) -> None:
        """Ask the child's faulthandler for every thread's stack (SIGUSR1, into its stderr)
        and give it ``wait_s`` to write them: the diagnosis of a HANG, taken before the kill."""
        try:
            os.kill(self.pid, signal.SIGUSR1)
        except ProcessLookupError:
            return
        end = time.monotonic() + wait_s
        while time.monotonic() < end and self.proc.poll() is None:
            time.sleep(0.02)

    def kill(self) -> list[str]:
        """SIGKILL the child, its process group and everything it started, wherever that went
        (setsid, double forks), and reap them.  Returns the processes killed outside the
        child's process group, described for a result row."""
        try:
            os.killpg(self.pid, signal.SIGKILL)  # the child leads its own session and group
        except (ProcessLookupError, PermissionError):
            pass  # already gone; its descendants are looked for below
        # Descendants that left the group but are still below the child (setsid).
        killed = reaper.kill_descendant_procs(self.pid)
        try:
            self.proc.kill()
        except ProcessLookupError:
            pass  # the group kill got it first
        self.wait_exit(10)
        killed += self._kill_orphans()
        return [desc for p, desc in killed if p.pgrp != self.pid]

    def _kill_orphans(self) -> list[tuple[reaper.Proc, str]]:
        """Once the child is dead: what it left that re-parented to this process (a subreaper),
        and the zombies of its session.  Only processes attributable to this child (its session
        or group, its token in their environment, or below such a process): other children of
        the harness (other hosts and workers, anything else it runs) are left alone."""
        wpid, marker = self.pid, f"{self.token_var}={self.token}".encode()

        def ours(p: reaper.Proc) -> bool:
            return p.pid != wpid and (p.session == wpid or p.pgrp == wpid or reaper.environ_has(p.pid, marker))

        killed = reaper.kill_descendant_procs(os.getpid(), only=ours)
        if reaper.has_children():
            reaper.reap(z.pid for z in reaper.zombie_children() if z.session == wpid or z.pgrp == wpid)
        return killed

    def close_fds(self) -> None:
        if not self._fds_open:
            return
        self._fds_open = False
        for fd in (self.req_fd, self.res_fd):
            try:
                os.close(fd)
            except OSError:
                continue  # closed by the OS already (the peer's end does not matter here)


# ---------------------------------------------------------------------------------------------
# The child side
# ---------------------------------------------------------------------------------------------


def child_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options :class:`Child` passes: the two pipe descriptors and the memory limit."""
    parser.add_argument("--req-fd", type=int, required=True)
    parser.add_argument("--res-fd", type=int, required=True)
    parser.add_argument("--mem-limit", type=int, default=0)
    return parser


def child_start(prog: str, argv: Sequence[str], *options: str) -> argparse.Namespace:
    """The start of a child's ``main``: parse ``argv``, the options :class:`Child` passes and
    the child's own ``options`` (strings, all required: its parent always passes them, e.g.
    ``"--driver"``), then :func:`child_setup` with the memory limit given."""
    parser = child_arguments(argparse.ArgumentParser(prog=prog))
    for name in options:
        parser.add_argument(name, required=True)
    args = parser.parse_args(argv)
    child_setup(args.mem_limit)
    return args


def child_setup(mem_limit: int) -> None:
    """First thing in a child: faulthandler writes every thread's stack to stderr on a fatal
    signal and on SIGUSR1; ``RLIMIT_AS`` is ``mem_limit`` bytes (0: none); whatever the child's
    code starts stays its descendant (child subreaper); and once the parent is gone (a
    SIGKILLed harness cannot clean up) the child kills its descendants and its group."""
    import faulthandler

    faulthandler.enable(file=sys.stderr, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    if mem_limit > 0:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (mem_limit, mem_limit))
    reaper.set_subreaper()
    reaper.die_with_parent(os.getppid())


__all__ = [
    "CRASH",
    "HANG",
    "HANG_DUMP_S",
    "Child",
    "Ending",
    "StderrFile",
    "child_arguments",
    "child_setup",
    "child_start",
    "classify",
    "exit_text",
    "fault_blocks",
    "fault_frames",
    "crash_stack",
    "driver_frame",
    "is_driver_frame",
    "file_tail",
    "signal_name",
]
