"""Subprocess sandbox: run one stress case in a child process and classify what happened.

    box = Sandbox("reference", mem_limit=4 << 30)
    r = box.run("nnconform.stress.tests:run_case", {"test": "leak", "params": {...}},
                timeout=30.0, case_key="leak#3", seed=1234)
    r.verdict   # SUCCESS / FAILURE / HANG / CRASH
    box.close()

The child is a *warm worker*: a fresh interpreter (``python -m nnconform.isolation.sandbox``, started
with subprocess, never forked from the harness, so GPU runtimes that break under fork are
safe) that imports the driver once and then runs cases one after the other, reading requests
from a pipe.  Per-case overhead is one JSON round trip.  ``mode="fresh"`` starts a new
interpreter for every case instead (the benchmark compares the two).

Each worker is a ``nnconform.isolation.childproc.Child``: it runs in its own session (process group)
with ``RLIMIT_AS`` set and faulthandler on (SIGSEGV & co. print every thread's Python stack;
SIGUSR1 prints it on demand), and a CRASH or HANG is classified by ``childproc.classify``, as
for the driver host.  Verdicts, as MLTS's ``CrashTestStatus``:

- SUCCESS / FAILURE: the case function returned (or raised: FAILURE with the exception);
  ``MemoryError`` is a FAILURE that names the memory limit;
- HANG: no verdict within ``timeout`` seconds.  The harness asks the child for a stack dump
  (SIGUSR1), then SIGKILLs its whole process group, so clients it spawned go too;
- CRASH: the child died before answering: signal number or exit code (``os._exit(0)`` in a
  driver is a CRASH: exit status 0 but no verdict), with the tail of its stderr, which holds
  faulthandler's stack.

After a HANG or CRASH (or a case that asks for it, ``Verdict.recycle``), the next case gets a
new worker.  A worker that loses its parent (the runner was SIGKILLed) kills its descendants
and its own process group within a second, so nothing is left running.

**Leftovers.**  The worker is a child subreaper (``nnconform.isolation.reaper``): whatever a driver
starts stays its descendant, even after ``setsid`` or a double fork.  After every case it
SIGKILLs the descendants the case started and names them in the row
(``extra["leftover_processes"]``), and names and removes the /dev/shm entries the case created
(``extra["leftover_shm"]``); either turns a SUCCESS into a FAILURE.  A thread of the worker
that dies of an uncaught exception (BaseException included) during a case does too
(``extra["thread_deaths"]``).  The parent is a subreaper as well: when a worker dies (CRASH,
HANG, or retired), the processes it left re-parent to the parent, which kills those it can
attribute to that worker (its session or group, or the worker's token in their environment;
never anything else of the host process) and names those outside the worker's group in a
CRASH/HANG result, with the /dev/shm entries the crashed case left.

A case function runs in the worker as ``fn(ctx: CaseContext, **kwargs) -> Verdict``; ``ctx``
carries the loaded device, the case key and seed, a breadcrumb slot (what the case was doing
when it died, read back by the harness after a crash or hang) and the worker's RSS.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import sys
import tempfile
import threading
import time
import types
from dataclasses import dataclass, field
from typing import Any

from nnconform.isolation import childproc, reaper
from nnconform.verdict.results import FAILURE, SUCCESS

DEFAULT_MEM_LIMIT = 4 << 30  # RLIMIT_AS of a worker (bytes): generous, catches runaway leaks
STARTUP_TIMEOUT = 120.0  # seconds for a worker to import the driver and say "ready"
STDERR_TAIL_LINES = 40
BREADCRUMB_SIZE = 512
CASE_ENV = "NNCONFORM_CASE"  # the running case's key, visible to the driver and its children
WORKER_ENV = "NNCONFORM_SANDBOX_WORKER"  # a token per worker, inherited by what it starts


class SandboxError(Exception):
    """A worker could not start (the driver cannot be loaded, or the interpreter died at
    start-up).  The message is one line for the user."""


@dataclass
class Verdict:
    """What a case function returns.  ``verdict`` is SUCCESS or FAILURE; ``recycle`` asks for
    a new worker afterwards (the case left threads or memory behind)."""

    verdict: str
    reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    recycle: bool = False

    @classmethod
    def success(cls, reason: str = "", **extra: Any) -> "Verdict":
        return cls(SUCCESS, reason, extra)

    @classmethod
    def failure(cls, reason: str, recycle: bool = False, **extra: Any) -> "Verdict":
        return cls(FAILURE, reason, extra, recycle)


@dataclass
class SandboxResult:
    verdict: str
    reason: str = ""
    duration_s: float = 0.0  # parent's wall clock, request sent -> verdict known
    case_s: float | None = None  # time the case function took inside the worker
    extra: dict[str, Any] = field(default_factory=dict)
    signal: int | None = None  # CRASH by signal
    exit_code: int | None = None  # CRASH by exit
    stderr_tail: str = ""
    breadcrumb: str = ""
    worker_pid: int | None = None
    rss_bytes: int | None = None  # worker RSS after the case (SUCCESS/FAILURE)


def rss_bytes() -> int:
    """Resident set size of this process (Linux /proc; 0 where unavailable)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _json_default(v: Any) -> Any:
    if hasattr(v, "tolist"):
        return v.tolist()
    if isinstance(v, (set, frozenset, tuple)):
        return list(v)
    return repr(v)


# ---------------------------------------------------------------------------------------
# The parent side
# ---------------------------------------------------------------------------------------


class _Worker:
    """One child interpreter with the driver loaded (a nnconform.isolation.childproc.Child speaking JSON
    lines: one request per line on its request pipe, one answer per line on its result pipe)."""

    def __init__(
        self, driver: str, mem_limit: int | None, env: dict[str, str] | None, workdir: str, startup_timeout: float
    ):
        self.driver = driver
        fd, self.crumb_path = tempfile.mkstemp(prefix="worker-", suffix=".crumb", dir=workdir)
        os.close(fd)
        # WORKER_ENV marks every process the worker (and its driver) starts, so the parent can
        # tell them from the host process's other children once they re-parent to it.
        self.child = childproc.Child(
            "nnconform.isolation.sandbox",
            ["--driver", driver, "--crumb", self.crumb_path],
            token_var=WORKER_ENV,
            mem_limit=mem_limit,
            env=env,
            stderr_dir=workdir,
            stderr_prefix="worker-",
        )
        self.pid = self.child.pid
        self.escaped: list[str] = []  # processes outside its group killed after it died
        self._buf = b""
        self.cases_run = 0
        msg = self._read(time.monotonic() + startup_timeout)
        if msg is None or "ready" not in msg:
            if msg is not None and "error" in msg:
                why = msg["error"]
            elif msg is None and self.child.poll() is None:
                why = f"no 'ready' within {startup_timeout:g} s"
            else:
                why = f"worker died at start-up ({self.child.exit_text()}): {self.stderr_tail(0, 5)!r}"
            self.kill()
            raise SandboxError(why)
        self.startup_s = msg.get("startup_s")

    # -- messages -----------------------------------------------------------------------
    def _read(self, deadline: float) -> dict[str, Any] | None:
        """The next JSON line from the worker; None on EOF; TimeoutError past ``deadline``."""
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self.child.res_fd], [], [], left)
            if not ready:
                raise TimeoutError
            chunk = os.read(self.child.res_fd, 65536)
            if not chunk:
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        msg: dict[str, Any] = json.loads(line)
        return msg

    def send(self, msg: dict[str, Any]) -> bool:
        try:
            self.child.write((json.dumps(msg, default=_json_default) + "\n").encode("utf-8"))
            return True
        except OSError:
            return False

    # -- death --------------------------------------------------------------------------
    def kill_group(self) -> None:
        """SIGKILL the worker's process group only (an interrupted run: the slot's thread
        then sees the worker die and ends it properly)."""
        try:
            os.killpg(self.pid, signal.SIGKILL)  # the worker leads its own session/group
        except (ProcessLookupError, PermissionError):
            return

    def kill(self) -> None:
        self.escaped += self.child.kill()
        self.child.close_fds()

    def quit(self) -> None:
        if self.child.poll() is None and self.send({"op": "quit"}):
            self.child.wait_exit(5)
        self.kill()
        self.cleanup()

    def cleanup(self) -> None:
        self.child.stderr.remove()
        try:
            os.unlink(self.crumb_path)
        except OSError:
            return  # already gone

    # -- diagnostics --------------------------------------------------------------------
    def stderr_size(self) -> int:
        return self.child.stderr.size()

    def stderr_tail(self, offset: int, lines: int = STDERR_TAIL_LINES) -> str:
        return self.child.stderr.tail(offset, lines)

    def breadcrumb(self) -> str:
        try:
            with open(self.crumb_path, "rb") as f:
                return f.read(BREADCRUMB_SIZE).rstrip(b"\0 ").decode("utf-8", errors="replace")
        except OSError:
            return ""


class Sandbox:
    """One sandbox slot.  Not thread-safe: a runner with N workers holds N of these.

    ``mode``: "warm" keeps a worker across cases (replaced after a CRASH/HANG/recycle);
    "fresh" starts a new interpreter for every case.  ``env`` replaces the workers'
    environment (default: inherit).  Worker start-up failures raise SandboxError.
    """

    def __init__(
        self,
        driver: str,
        *,
        mem_limit: int | None = DEFAULT_MEM_LIMIT,
        mode: str = "warm",
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        startup_timeout: float = STARTUP_TIMEOUT,
        hang_dump_s: float = 0.5,
    ):
        if mode not in ("warm", "fresh"):
            raise ValueError(f"mode must be 'warm' or 'fresh', not {mode!r}")
        self.driver, self.mem_limit, self.mode, self.env = driver, mem_limit, mode, env
        self._own_workdir = workdir is None
        self.workdir = workdir or tempfile.mkdtemp(prefix="nnconform-sandbox-")
        os.makedirs(self.workdir, exist_ok=True)
        self.startup_timeout = startup_timeout
        self.hang_dump_s = hang_dump_s
        self._worker: _Worker | None = None
        self.workers_started = 0

    @property
    def worker_pid(self) -> int | None:
        return self._worker.pid if self._worker else None

    def start(self) -> _Worker:
        if self._worker is None:
            self._worker = _Worker(self.driver, self.mem_limit, self.env, self.workdir, self.startup_timeout)
            self.workers_started += 1
        return self._worker

    def _retire(self, kill: bool) -> None:
        w, self._worker = self._worker, None
        if w is None:
            return
        if kill:
            w.kill()
            w.cleanup()
        else:
            w.quit()

    def run(
        self,
        target: str,
        kwargs: dict[str, Any] | None = None,
        *,
        timeout: float,
        case_key: str = "",
        seed: int | None = None,
    ) -> SandboxResult:
        """Run ``target`` ("module:function") in the worker; never raises for anything the
        case or the driver does (only SandboxError when no worker can be started)."""
        w = self.start()
        offset = w.stderr_size()
        shm_before = reaper.shm_snapshot()  # for a case that dies before its own check
        t0 = time.monotonic()
        sent = w.send(
            {
                "op": "run",
                "target": target,
                "kwargs": kwargs or {},
                "case_key": case_key,
                "seed": seed,
                "timeout": timeout,
            }
        )
        msg: dict[str, Any] | None = None
        timed_out = False
        if sent:
            try:
                msg = w._read(t0 + timeout)
            except TimeoutError:
                timed_out = True
        dt = time.monotonic() - t0

        if msg is not None:
            w.cases_run += 1
            verdict = msg.get("verdict", FAILURE)
            res = SandboxResult(
                verdict,
                msg.get("reason", ""),
                dt,
                msg.get("case_s"),
                msg.get("extra") or {},
                worker_pid=w.pid,
                rss_bytes=msg.get("rss"),
            )
            if verdict != SUCCESS:
                res.stderr_tail = w.stderr_tail(offset)
                res.breadcrumb = w.breadcrumb()
            # A case that ran a client in the group and left it behind must not outlive the case.
            if self.mode == "fresh" or msg.get("recycle"):
                self._retire(kill=False)
            return res

        # No verdict: the worker hung (its stacks are dumped first) or died.  Either way it is
        # killed with all it started; the stderr tail and breadcrumb say where it was.
        if timed_out:
            w.child.dump_stacks(self.hang_dump_s)
            rc = None
        else:
            rc = w.child.wait_exit(5)  # EOF (or a broken request pipe): reap it
        w.kill()
        end = childproc.classify(
            rc, timed_out, who="worker", unfinished="without a verdict", hang_reason=f"no verdict within {timeout:g} s"
        )
        res = SandboxResult(
            end.verdict,
            end.reason,
            dt,
            signal=end.signal,
            exit_code=end.exit_code,
            worker_pid=w.pid,
            stderr_tail=w.stderr_tail(offset),
            breadcrumb=w.breadcrumb(),
        )
        _leftovers(res, w, shm_before)
        w.cleanup()
        self._worker = None
        return res

    def close(self) -> None:
        self._retire(kill=False)
        if self._own_workdir:
            try:
                for name in os.listdir(self.workdir):
                    os.unlink(os.path.join(self.workdir, name))
                os.rmdir(self.workdir)
            except OSError:
                pass

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _leftovers(res: SandboxResult, w: _Worker, shm_before: set[str]) -> None:
    """Name in a CRASH/HANG result what the dead worker's case left: processes outside its
    group (already killed) and new /dev/shm entries (removed: a nightly full of crashes must
    not fill /dev/shm; entries another live process holds are not counted)."""
    if w.escaped:
        res.extra["leftover_processes"] = w.escaped[:20]
        res.reason += f"; killed {_n(len(w.escaped), 'process')} it left outside its group: " + ", ".join(w.escaped[:5])
    shm = reaper.shm_leftovers(shm_before)
    if shm:
        reaper.remove_shm(shm)
        res.extra["leftover_shm"] = shm[:20]
        res.reason += f"; removed {_n(len(shm), 'entry', 'entries')} it left in /dev/shm: " + ", ".join(shm[:5])


def _n(k: int, one: str, many: str | None = None) -> str:
    return f"{k} {one if k == 1 else (many or one + 'es')}"


# ---------------------------------------------------------------------------------------
# The worker side
# ---------------------------------------------------------------------------------------


@dataclass
class CaseContext:
    """What a case function sees in the worker."""

    device: Any
    driver: str
    case_key: str
    seed: int | None
    timeout: float
    crumb_fd: int | None = None

    def breadcrumb(self, text: str) -> None:
        """Say what the case is doing now (e.g. the model being executed); the harness reads
        it back if the worker crashes or hangs.  Cheap: one pwrite."""
        if self.crumb_fd is not None:
            data = text.encode("utf-8", errors="replace")[:BREADCRUMB_SIZE].ljust(BREADCRUMB_SIZE, b"\0")
            os.pwrite(self.crumb_fd, data, 0)

    @staticmethod
    def rss_bytes() -> int:
        return rss_bytes()


def _resolve(target: str) -> Any:
    module, _, attr = target.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


class _ThreadDeaths:
    """threading.excepthook: remembers every thread that dies of an uncaught exception
    (SystemExit, KeyboardInterrupt and GeneratorExit included, which the default hook lets
    pass silently or which kill only that thread), so the case it happened in fails."""

    def __init__(self) -> None:
        self.deaths: list[str] = []
        self.lock = threading.Lock()
        self.default = threading.excepthook

    def __call__(self, args: threading.ExceptHookArgs) -> None:
        text = str(args.exc_value).splitlines()[0] if args.exc_value is not None and str(args.exc_value) else ""
        name = args.thread.name if args.thread is not None else "?"
        with self.lock:
            self.deaths.append(f"thread {name!r} died of {args.exc_type.__name__}" + (f": {text}" if text else ""))
        self.default(args)  # still print the traceback to stderr (the row's stderr tail)

    def since(self, mark: int) -> list[str]:
        with self.lock:
            return self.deaths[mark:]

    def mark(self) -> int:
        with self.lock:
            return len(self.deaths)


def _after_case(out: Verdict, deaths: list[str], procs: list[str], shm: list[str]) -> Verdict:
    """Add what a case left behind to its verdict: a SUCCESS becomes a FAILURE."""
    problems = []
    if deaths:
        out.extra["thread_deaths"] = deaths[:20]
        problems.append(f"{len(deaths)} thread(s) died: " + "; ".join(deaths[:3]))
    if procs:
        out.extra["leftover_processes"] = procs[:20]
        problems.append(f"left {_n(len(procs), 'process')} running: " + ", ".join(procs[:5]))
    if shm:
        out.extra["leftover_shm"] = shm[:20]
        problems.append(f"left {_n(len(shm), 'entry', 'entries')} in /dev/shm: " + ", ".join(shm[:5]))
    if problems:
        text = "; ".join(problems)
        if out.verdict == SUCCESS:
            out = Verdict(FAILURE, text + (f" (case: {out.reason})" if out.reason else ""), out.extra, out.recycle)
        else:
            out.reason = f"{out.reason}; also {text}"
    return out


def _judges() -> dict[tuple[str, str], Any]:
    """The functions and classes of every nnconform module loaded now, the comparison and the
    reference executor among them (imported first): a driver runs in the stress worker's own
    process, and one that replaces them (``criteria.compare = always_pass``) would judge its
    own cases.  Taken before the driver loads; _restore_judges puts back what it replaced."""
    import nnconform.reference.executor  # noqa: F401  (the judges, loaded before the driver)
    import nnconform.verdict.criteria  # noqa: F401
    import nnconform.verdict.runner  # noqa: F401

    snap: dict[tuple[str, str], Any] = {}
    for name, mod in list(sys.modules.items()):
        if mod is None or not (name == "nnconform" or name.startswith("nnconform.")):
            continue
        for attr, v in list(vars(mod).items()):
            if isinstance(v, (types.FunctionType, type)):
                snap[(name, attr)] = v
    return snap


def _restore_judges(snap: dict[tuple[str, str], Any]) -> list[str]:
    """The names of snapshot functions or classes that were replaced or removed since (each put
    back)."""
    changed = []
    for (name, attr), v in snap.items():
        mod = sys.modules.get(name)
        if mod is not None and vars(mod).get(attr) is not v:
            changed.append(f"{name}.{attr}")
            setattr(mod, attr, v)
    return changed


def _worker_main(argv: list[str]) -> int:
    import traceback

    t0 = time.perf_counter()
    # Whatever the driver starts stays our descendant (setsid, double forks): see _after_case.
    a = childproc.child_start("nnconform.isolation.sandbox", argv, "--driver", "--crumb")
    thread_deaths = _ThreadDeaths()
    threading.excepthook = thread_deaths
    req = os.fdopen(a.req_fd, "r", encoding="utf-8")
    res = os.fdopen(a.res_fd, "w", encoding="utf-8")
    crumb_fd = os.open(a.crumb, os.O_WRONLY) if a.crumb else None

    def send(msg: dict[str, Any]) -> None:
        res.write(json.dumps(msg, default=_json_default) + "\n")
        res.flush()

    from nnconform.driver.loader import load_driver
    from nnconform.errors import NnError

    judges = _judges()
    try:
        device = load_driver(a.driver)
    except NnError as e:
        send({"error": str(e)})
        return 3
    send({"ready": True, "pid": os.getpid(), "startup_s": time.perf_counter() - t0})
    # Processes the driver started while loading are the driver's, not a case's: they and
    # their descendants are kept (only when it has children: no /proc scan otherwise).
    driver_procs = set(reaper.descendants(os.getpid())) if reaper.has_children() else set()

    for line in req:
        msg = json.loads(line)
        if msg.get("op") != "run":
            break
        key = msg.get("case_key", "")
        os.environ[CASE_ENV] = key
        ctx = CaseContext(device, a.driver, key, msg.get("seed"), float(msg.get("timeout") or 0), crumb_fd)
        ctx.breadcrumb("")
        shm_before = reaper.shm_snapshot()
        deaths_mark = thread_deaths.mark()
        t1 = time.perf_counter()
        recycle = False
        tampered = _restore_judges(judges)  # (replaced while loading, or after the last case)
        try:
            out = _resolve(msg["target"])(ctx, **msg.get("kwargs", {}))
            if not isinstance(out, Verdict):
                out = Verdict.failure(f"case function returned {type(out).__name__}, not a Verdict")
            recycle = out.recycle
        except MemoryError:
            out = Verdict.failure(
                f"MemoryError: the worker hit its memory limit "
                f"({a.mem_limit / 2**30:.1f} GiB RLIMIT_AS) or ran out of memory"
            )
            recycle = True
        except BaseException as e:  # a driver's exception is the case's FAILURE reason
            tb = traceback.extract_tb(e.__traceback__)
            where = f" at {tb[-1].filename}:{tb[-1].lineno}" if tb else ""
            text = str(e).splitlines()[0] if str(e) else ""
            out = Verdict.failure(
                f"{type(e).__name__}: {text}{where}" if text else f"{type(e).__name__}{where}",
                traceback="".join(traceback.format_exception(e))[-4000:],
            )
            recycle = isinstance(e, (SystemExit, KeyboardInterrupt))
        case_s = time.perf_counter() - t1
        tampered += _restore_judges(judges)
        if tampered:
            text = (
                f"the driver replaced {_n(len(tampered), 'function', 'functions')} of nnconform in the worker "
                f"({', '.join(sorted(set(tampered))[:5])}): put back; this case's verdict cannot be trusted"
            )
            out = Verdict(FAILURE, text + (f" (case: {out.reason})" if out.reason else ""), out.extra, out.recycle)
        procs = reaper.kill_descendants(os.getpid(), keep=driver_procs)
        # New /dev/shm entries that no process outside this worker holds are what the case
        # left.  They are named in the row and then removed, so a nightly of thousands of
        # cases does not fill /dev/shm (a driver's deliberate cache is recreated next time).
        # With several workers, an entry a concurrent case created and already closed may be
        # named here too; nothing another live process holds is counted or removed.
        shm = []
        if reaper.shm_snapshot() - shm_before:
            shm = reaper.shm_leftovers(shm_before, ours={os.getpid(), *reaper.descendants(os.getpid())})
            reaper.remove_shm(shm)
        out = _after_case(out, thread_deaths.since(deaths_mark), procs, shm)
        send(
            {
                "verdict": out.verdict,
                "reason": out.reason,
                "extra": out.extra,
                "recycle": recycle,
                "case_s": case_s,
                "rss": rss_bytes(),
            }
        )
        os.environ.pop(CASE_ENV, None)
    return 0


# Targets used by the tests and the benchmark: they measure the sandbox, not a driver.
def noop_case(ctx: CaseContext, **kwargs: Any) -> Verdict:
    return Verdict.success()


if __name__ == "__main__":
    # Run the importable module's copy, so case functions and this loop share one Verdict class.
    from nnconform.isolation.sandbox import _worker_main as _main

    sys.exit(_main(sys.argv[1:]))
