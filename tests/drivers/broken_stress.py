"""DELIBERATELY BROKEN DRIVERS, for testing the stress harness and its sandbox.  They crash,
hang, leak and kill their own process ON PURPOSE.  Never use them as references, and never
load them in a process you care about: run them only through ``nnconform stress``.

Each is the reference driver with one misbehaviour in ``execute``:

    SegfaultOnNegative   SIGSEGV (reads address 0) when the first input's first element is < 0
    HangsInExecute       execute never returns (blocks forever)
    ExitsInExecute       os._exit(0) in the middle of execute (exit status 0, no answer)
    LeaksMemory          keeps LEAK_BYTES of touched memory alive per execution
    RaisesInExecute      raises a plain RuntimeError
    GarbageOutputs       returns outputs of the right shape filled with garbage (wrong values)
    RandomlyBroken       on a seeded fraction of executions: crash / exit / hang / leak / raise
                         / garbage; otherwise correct

Drivers whose threads die of a BaseException (raised from prepare and execute when called off
the main thread, so the liveness probe and the main thread of a case still work):

    KeyboardInterruptInThreads, SystemExitInThreads, GeneratorExitInThreads
    ThreadDiesInExecute  execute starts an internal thread of its own that dies of SystemExit
                         (and joins it), then answers correctly

Drivers that leave things behind (once per case, on the first execute of that case):

    SpawnsSetsidChild    starts ``setsid sleep 600`` (a new session: a process-group kill
                         misses it) and forgets it
    DoubleForks          double-forks a ``sleep 600`` (setsid in between; its parent exits)
    LeavesShm            creates a file in /dev/shm and never unlinks it
    SetsidChildThenCrash / SetsidChildThenHang  start ``setsid sleep 600``, then SIGSEGV / hang

Drivers for the verdicts of single tests:

    CompileBlocksInference  a compilation holds a device-wide lock for 50 ms; execute waits on it
    LatencyGrowsWithCompilations  every compilation ever made stays in a device-wide registry
                         that each execute checksums: latency grows with the compilations
    AbortsInSub          abort() (SIGABRT) when executing any model that holds a SUB
    HangsInSub           execute never returns on any model that holds a SUB

RandomlyBroken is configured by the environment (inherited by sandbox workers and their
clients): ``NNCONFORM_BROKEN_RATES="seed=7,crash=0.01,exit=0.005,hang=0.005,leak=0.05,
raise=0.01,garbage=0.005"`` (per-execution probabilities; unnamed ones keep their defaults).
The action of each execution is drawn from a hash of (seed, running case key, client id,
execution counter), so a run is repeatable.  With ``NNCONFORM_BROKEN_LOG=/path`` every driver
here appends one JSON line per misbehaviour, *before* doing it (written and fsynced):
``{"case": "...", "client": "...", "action": "crash", "pid": 123}``.  That log is the ground
truth the harness's own tests compare the stress verdicts with.

Name them on the command line as ``tests/drivers/broken_stress.py:RandomlyBroken``.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import threading
import zlib

import numpy as np

from nnconform.driver import ExecutionResult
from nnconform.drivers.reference import ReferenceDevice, ReferencePreparedModel

LEAK_BYTES = 8 << 20
LOG_ENV = "NNCONFORM_BROKEN_LOG"
RATES_ENV = "NNCONFORM_BROKEN_RATES"
CLIENT_ENV = "NNCONFORM_CLIENT"  # set by the stress harness in multi-process clients
CASE_ENV = "NNCONFORM_CASE"  # set by the sandbox for the running case

_leaked: list[np.ndarray] = []  # what the leaking drivers never give back
_leak_lock = threading.Lock()
_hang_forever = threading.Event()  # never set
_forgotten: list = []  # Popen objects of children left running on purpose


def log_action(action: str, **fields) -> None:
    """Append the ground-truth line for a misbehaviour that is about to happen (``fields``:
    e.g. the pid of a child it left behind)."""
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    line = (
        json.dumps(
            {
                "case": os.environ.get(CASE_ENV, ""),
                "client": os.environ.get(CLIENT_ENV, ""),
                "action": action,
                "pid": os.getpid(),
                **fields,
            }
        )
        + "\n"
    )
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())  # one write of an O_APPEND file: lines never interleave
        os.fsync(fd)
    finally:
        os.close(fd)


def segfault() -> None:
    log_action("crash")
    ctypes.string_at(0)  # reads address 0: SIGSEGV


def exit_now() -> None:
    log_action("exit")
    os._exit(0)


def hang() -> None:
    log_action("hang")
    _hang_forever.wait()


def leak(nbytes: int = LEAK_BYTES) -> None:
    log_action("leak")
    block = np.ones(nbytes // 8, dtype=np.float64)  # ones, not empty: the pages are touched
    with _leak_lock:
        _leaked.append(block)


class _Misbehaving(ReferenceDevice):
    """Reference device whose prepared models call ``self.misbehave`` in execute.  It returns
    None (behave) or a callable result tamperer."""

    def misbehave(self, request):
        raise NotImplementedError

    def prepare(self, model, **kw):
        pm = super().prepare(model, **kw)
        device = self

        class Prepared(ReferencePreparedModel):
            def execute(self, request, **kw2):
                tamper = device.misbehave(request)
                result = super().execute(request, **kw2)
                return tamper(result) if tamper else result

        return Prepared(pm.model)


def _garbage(result: ExecutionResult) -> ExecutionResult:
    log_action("garbage")
    outs = []
    for o in result.outputs:
        g = np.full(o.shape, 123, dtype=o.dtype) if o.dtype.kind in "iub" else np.full(o.shape, 1e30, o.dtype)
        outs.append(g)
    return ExecutionResult(tuple(outs), result.output_shapes, result.timing)


class SegfaultOnNegative(_Misbehaving):
    name = "broken-segfault"

    def misbehave(self, request):
        first = request.inputs[0].value if request.inputs else None
        if first is not None and first.size and float(np.asarray(first).reshape(-1)[0]) < 0:
            segfault()
        return None


class HangsInExecute(_Misbehaving):
    name = "broken-hang"

    def misbehave(self, request):
        hang()


class ExitsInExecute(_Misbehaving):
    name = "broken-exit"

    def misbehave(self, request):
        exit_now()


class LeaksMemory(_Misbehaving):
    name = "broken-leak"

    def misbehave(self, request):
        leak()
        return None


class RaisesInExecute(_Misbehaving):
    name = "broken-raise"

    def misbehave(self, request):
        log_action("raise")
        raise RuntimeError("simulated driver bug: command buffer overflow")


class GarbageOutputs(_Misbehaving):
    name = "broken-garbage-outputs"

    def misbehave(self, request):
        return _garbage


class _BaseExceptionInThreads(ReferenceDevice):
    """prepare and execute raise ``exc`` when called from any thread but the main one."""

    exc: type = KeyboardInterrupt

    def _maybe_raise(self, what: str) -> None:
        if threading.current_thread() is not threading.main_thread():
            log_action(self.exc.__name__)
            raise self.exc(f"simulated {self.exc.__name__} in {what} off the main thread")

    def prepare(self, model, **kw):
        self._maybe_raise("prepare")
        pm = super().prepare(model, **kw)
        device = self

        class Prepared(ReferencePreparedModel):
            def execute(self, request, **kw2):
                device._maybe_raise("execute")
                return super().execute(request, **kw2)

        return Prepared(pm.model)


class KeyboardInterruptInThreads(_BaseExceptionInThreads):
    name = "broken-keyboardinterrupt-in-threads"
    exc = KeyboardInterrupt


class SystemExitInThreads(_BaseExceptionInThreads):
    name = "broken-systemexit-in-threads"
    exc = SystemExit


class GeneratorExitInThreads(_BaseExceptionInThreads):
    name = "broken-generatorexit-in-threads"
    exc = GeneratorExit


class ThreadDiesInExecute(_Misbehaving):
    name = "broken-internal-thread-dies"

    def misbehave(self, request):
        def internal() -> None:
            raise SystemExit("simulated driver-internal thread exit")

        log_action("thread-dies")
        t = threading.Thread(target=internal, name="driver-internal")
        t.start()
        t.join()
        return None


class _OncePerCase(_Misbehaving):
    """Misbehaves on the first execute of each case (per process), then behaves."""

    def __init__(self):
        super().__init__()
        self._seen: set[str] = set()
        self._seen_lock = threading.Lock()

    def misbehave(self, request):
        case = os.environ.get(CASE_ENV, "")
        with self._seen_lock:
            first = case not in self._seen
            self._seen.add(case)
        if first:
            self.once()
        return None

    def once(self) -> None:
        raise NotImplementedError


def spawn_setsid_sleep() -> int:
    """Start ``setsid sleep 600`` (its own session and process group) and forget it."""
    import shutil
    import subprocess

    if shutil.which("setsid"):
        proc = subprocess.Popen(
            ["setsid", "sleep", "600"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
    else:
        proc = subprocess.Popen(
            ["sleep", "600"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    log_action("spawn-setsid", child=proc.pid)
    _forgotten.append(proc)  # never waited: the harness must find and kill it
    return proc.pid


def double_fork_sleep() -> int:
    """Double-fork a ``sleep 600``: the intermediate calls setsid, forks and exits, so the
    sleeper is re-parented away from us."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # intermediate
        try:
            os.close(r)
            os.setsid()
            grandchild = os.fork()
            if grandchild == 0:
                os.execvp("sleep", ["sleep", "600"])
            os.write(w, str(grandchild).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        grandchild = int(f.read() or b"0")
    os.waitpid(pid, 0)
    log_action("double-fork", child=grandchild)
    return grandchild


SHM_PREFIX = "nnconform-broken-shm-"


class SpawnsSetsidChild(_OncePerCase):
    name = "broken-setsid-child"

    def once(self) -> None:
        spawn_setsid_sleep()


class DoubleForks(_OncePerCase):
    name = "broken-double-fork"

    def once(self) -> None:
        double_fork_sleep()


class LeavesShm(_OncePerCase):
    name = "broken-leaves-shm"

    def once(self) -> None:
        import uuid

        from nnconform.isolation.reaper import SHM_DIR

        path = os.path.join(SHM_DIR, f"{SHM_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}")
        log_action("shm", path=path)
        with open(path, "wb") as f:
            f.write(b"\0" * 4096)


class SetsidChildThenCrash(_Misbehaving):
    name = "broken-setsid-child-then-crash"

    def misbehave(self, request):
        spawn_setsid_sleep()
        segfault()


class SetsidChildThenHang(_Misbehaving):
    name = "broken-setsid-child-then-hang"

    def misbehave(self, request):
        spawn_setsid_sleep()
        hang()


COMPILE_HOLDS_S = 0.050  # CompileBlocksInference: how long each compilation holds the lock


class CompileBlocksInference(ReferenceDevice):
    """Every compilation holds one device-wide lock for COMPILE_HOLDS_S (sleeping: almost no
    CPU), and every execution takes that lock: inference waits for any compilation in
    flight.  The driver-caused slowdown performance-degradation must catch."""

    name = "broken-compile-blocks-inference"

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._global = threading.Lock()

    def prepare(self, model, **kw):
        with self._global:
            import time

            time.sleep(COMPILE_HOLDS_S)
            pm = super().prepare(model, **kw)
        lock = self._global

        class Prepared(ReferencePreparedModel):
            def execute(self, request, **kw2):
                with lock:
                    return super().execute(request, **kw2)

        return Prepared(pm.model)


REGISTRY_ENTRY_BYTES = 16384  # LatencyGrowsWithCompilations: what each execute checksums per compilation


class LatencyGrowsWithCompilations(ReferenceDevice):
    """Each compilation leaves an entry (REGISTRY_ENTRY_BYTES of compiled-artifact bytes) in a
    device-wide registry that release never empties, and every execution verifies the
    checksum of every entry before it runs.  Execute latency grows with the number of
    compilations made so far, in the windows without compilations as much as in those with
    them, so comparing the compile loop with its control cancels it out: the slowdown the
    growth check of performance-degradation must catch."""

    name = "broken-latency-grows-with-compilations"

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._registry: list[tuple[bytes, int]] = []  # (artifact, its checksum), one per compilation
        self._registry_lock = threading.Lock()

    def prepare(self, model, **kw):
        pm = super().prepare(model, **kw)
        # a distinct artifact per compilation; its content only has to be checksummed
        artifact = len(self._registry).to_bytes(8, "little") * (REGISTRY_ENTRY_BYTES // 8)
        with self._registry_lock:
            self._registry.append((artifact, zlib.crc32(artifact)))
        registry = self._registry

        class Prepared(ReferencePreparedModel):
            def execute(self, request, **kw2):
                # the bug: every compilation ever made is re-verified, on every execution
                for blob, crc in list(registry):
                    if zlib.crc32(blob) != crc:
                        raise RuntimeError("corrupt compilation registry")
                return super().execute(request, **kw2)

        return Prepared(pm.model)


class AbortsInSub(ReferenceDevice):
    """SIGABRT (``abort()``, as a failed native assertion) when executing a model that holds a
    SUB; every other model runs right.  The random-graph crash the stress runner must blame on
    SUB and shrink."""

    name = "broken-aborts-in-sub"

    def prepare(self, model, **kw):
        pm = super().prepare(model, **kw)
        has_sub = any(op.type.name == "SUB" for op in model.main.operations)

        class Prepared(ReferencePreparedModel):
            def execute(self, request, **kw2):
                if has_sub:
                    device.fail_in_sub()
                return super().execute(request, **kw2)

        device = self
        return Prepared(pm.model)

    def fail_in_sub(self) -> None:
        log_action("abort")
        os.abort()


class HangsInSub(AbortsInSub):
    """Executing a model that holds a SUB never returns; every other model runs right."""

    name = "broken-hangs-in-sub"

    def fail_in_sub(self) -> None:
        hang()


DEFAULT_RATES = {"crash": 0.004, "exit": 0.002, "hang": 0.002, "leak": 0.02, "raise": 0.004, "garbage": 0.002}
ACTIONS = ("crash", "exit", "hang", "leak", "raise", "garbage")


def parse_rates(text: str) -> tuple[int, dict[str, float]]:
    seed, rates = 0, dict(DEFAULT_RATES)
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, _, value = item.partition("=")
        if key == "seed":
            seed = int(value)
        elif key in rates:
            rates[key] = float(value)
        else:
            raise ValueError(f"{RATES_ENV}: unknown key {key!r} (known: seed, {', '.join(ACTIONS)})")
    if sum(rates.values()) > 1:
        raise ValueError(f"{RATES_ENV}: rates add up to more than 1")
    return seed, rates


class RandomlyBroken(_Misbehaving):
    name = "broken-random"

    def __init__(self):
        super().__init__()
        self.seed, self.rates = parse_rates(os.environ.get(RATES_ENV, ""))
        self._counter = 0
        self._lock = threading.Lock()
        self._case = None

    def action(self) -> str | None:
        case = os.environ.get(CASE_ENV, "")
        with self._lock:
            if case != self._case:  # count executions per case, so a case replays alike
                self._case, self._counter = case, 0
            n = self._counter
            self._counter += 1
        key = f"{self.seed}/{case}/{os.environ.get(CLIENT_ENV, '')}/{n}".encode()
        u = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") / 2.0**64
        for name in ACTIONS:
            u -= self.rates[name]
            if u < 0:
                return name
        return None

    def misbehave(self, request):
        a = self.action()
        if a == "crash":
            segfault()
        elif a == "exit":
            exit_now()
        elif a == "hang":
            hang()
        elif a == "leak":
            leak()
        elif a == "raise":
            log_action("raise")
            raise RuntimeError("simulated driver bug (RandomlyBroken)")
        elif a == "garbage":
            return _garbage
        return None


# ---------------------------------------------------------------------------------------
# Ground truth: what verdict each stress case should have got, from the misbehaviour log
# ---------------------------------------------------------------------------------------

_BAD = {"crash", "exit", "hang", "raise", "garbage"}
_CLIENT_TESTS = {"multi-process-inference", "multi-process-model-load", "client-early-termination"}


def read_log(path) -> dict[str, dict[str, list[str]]]:
    """{case key: {client id ("" = the sandbox worker): [actions in order]}}; liveness probes
    (keys ending in /liveness) are left out."""
    out: dict[str, dict[str, list[str]]] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            d = json.loads(line)
            if d["case"].endswith("/liveness") or not d["case"]:
                continue
            out.setdefault(d["case"], {}).setdefault(d["client"], []).append(d["action"])
    return out


def expected_verdicts(record, actions: dict[str, list[str]], leak_threshold_mb: float = 32.0) -> tuple[set, str]:
    """The verdicts a correct harness may give this stress row, and why.

    Worker-side misbehaviour decides first (a crash kills the case whatever else happened,
    then a hang keeps it from answering, then a raise or garbage is its reason).  Clients of
    the multi-process tests fail the case unless the test killed them on purpose first.  A
    leak fails the leak test once it is clearly past the threshold; below that both verdicts
    are accepted."""
    test = record.extra.get("test", record.test_id.partition("#")[0])
    worker = actions.get("", [])
    w = set(worker)
    if w & {"crash", "exit"}:
        return {"CRASH"}, "worker crashed/exited"
    if "hang" in w:
        return {"HANG"}, "worker hung"
    if w & {"raise", "garbage"}:
        return {"FAILURE"}, "worker raised/returned garbage"
    if test in _CLIENT_TESTS:
        statuses = record.extra.get("clients", {})
        bad = {c for c, acts in actions.items() if c and set(acts) & _BAD}
        failed = {c for c, s in statuses.items() if s not in ("ok", "killed on purpose")}
        if failed - bad:
            return set(), f"clients {sorted(failed - bad)} failed with no logged misbehaviour"
        if any(statuses.get(c) == "ok" for c in bad):
            return set(), "a misbehaving client was reported ok"
        if failed:
            return {"FAILURE"}, f"clients {sorted(failed)} misbehaved"
    leaks = worker.count("leak")
    if test == "leak" and leaks:
        if leaks * LEAK_BYTES >= 2 * leak_threshold_mb * 2**20:
            return {"FAILURE"}, f"{leaks} leaks of {LEAK_BYTES >> 20} MiB"
        return {"SUCCESS", "FAILURE"}, f"only {leaks} leak(s): either verdict accepted"
    if leaks and "MemoryError" in record.message:
        return {"FAILURE"}, "leaked into the memory limit"
    return {"SUCCESS"}, "no misbehaviour" + (f" ({leaks} leaks)" if leaks else "")


def check_against_log(records, log_path, leak_threshold_mb: float = 32.0) -> list[str]:
    """Every stress row whose verdict the misbehaviour log does not explain, one line each."""
    log = read_log(log_path) if os.path.exists(log_path) else {}
    problems = []
    for r in records:
        if r.suite != "stress":
            continue
        ok, why = expected_verdicts(r, log.get(r.test_id, {}), leak_threshold_mb)
        if r.outcome not in ok:
            problems.append(
                f"{r.test_id}: got {r.outcome}, expected {'/'.join(sorted(ok)) or '-'} ({why}); {r.message[:160]}"
            )
    return problems
