"""DELIBERATELY HOSTILE DRIVERS, for testing driver isolation.  Never use them as references.

Each is the reference driver plus one way a driver in bring-up can hurt the process it runs
in.  Most strike only on models with a FLOOR operation (the generated suite has two such
cases: floor_fp32 and floor_fp16), so a test can check that exactly those cases
get the verdict and every other case the reference driver's outcome:

    Segfault            execute dereferences NULL                      -> CRASH (SIGSEGV)
    ExitZero            execute calls os._exit(0)                      -> CRASH (exit code 0)
    SysExit             execute raises SystemExit(3)                   -> FAIL
    KeyboardInterrupts  execute raises KeyboardInterrupt               -> FAIL
    HangsInExecute      execute never returns                          -> HANG
    HangsOnRelu         execute never returns on a model with RELU (not FLOOR) -> HANG
    HangsInPrepare      prepare never returns, with SIGALRM ignored    -> HANG
    Allocates30GB       execute allocates 30 GB                        -> FAIL (MemoryError)
    LyingArray          outputs are zeros in an ndarray subclass whose == is always True -> FAIL
    PatchesNnconform    replaces nnconform's comparisons with "always pass", returns zeros -> FAIL
    ForksChild          execute starts a child process and leaves it   -> FAIL (process left)
    SetsidChild         the same child in a new session (escapes the process group) -> FAIL
    DoubleForks         a grandchild whose parent exits (re-parented)  -> FAIL
    GarblesPipe         execute writes junk into the host's reply pipe   -> CRASH (protocol)
    ScribblesInputs     every execution zeroes its input arrays after computing the right
                        outputs where it can make them writable (all cases; behind the host
                        they are read-only pool views it cannot)  -> same as reference

Name them as ``tests/drivers/broken_isolation.py:Segfault``.  With the environment variable
NNCONFORM_HOSTILE_ON_GRAPHS=1 (inherited by driver hosts, stress sandboxes and fuzz workers)
they also strike on every model of two or more operations: for the commands whose models are
random graphs or real models (stress, fuzz, bench).  One-operation models (the liveness check
after a crash or hang) are still served, so a test sees the incident, not a dead driver.
NNCONFORM_HOSTILE_IN_QUERY=1 makes them strike at the start of every supported_operations,
before the model is validated: for `fuzz`, whose malformed models are refused there, before
any prepare or execute.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

import numpy as np

from nnconform.driver import ExecutionResult
from nnconform.drivers.reference import ReferenceDevice, ReferencePreparedModel
from nnconform.ir import OperationType as Op

TRIGGER = Op.FLOOR
CHILD_SECONDS = "600"


def _triggered(model, trigger=TRIGGER) -> bool:
    if os.environ.get("NNCONFORM_HOSTILE_ON_GRAPHS") == "1" and len(model.main.operations) >= 2:
        return True
    return any(op.type == trigger for op in model.main.operations)


class _HostilePrepared(ReferencePreparedModel):
    hook = None
    trigger = TRIGGER

    def execute(self, request, **kw) -> ExecutionResult:
        if _triggered(self.model, self.trigger):
            return type(self).hook(self, request, kw)
        return super().execute(request, **kw)


class _Hostile(ReferenceDevice):
    name = "hostile"
    hook = None
    trigger = TRIGGER

    def supported_operations(self, model):
        if os.environ.get("NNCONFORM_HOSTILE_IN_QUERY") == "1":
            try:
                type(self).hook(None, None, {})
            except AttributeError:
                pass  # the hook went on to compute an answer, with no prepared model: its harm is done
        return super().supported_operations(model)

    def prepare(self, model, **kw):
        pm = super().prepare(model, **kw)
        cls = type(
            f"{type(self).__name__}Prepared",
            (_HostilePrepared,),
            {"hook": type(self).hook, "trigger": type(self).trigger},
        )
        return cls(pm.model)


def _correct(pm, request, kw) -> ExecutionResult:
    return ReferencePreparedModel.execute(pm, request, **kw)


def _segfault(pm, request, kw):
    ctypes.string_at(0)  # reads address 0: SIGSEGV


def _exit_zero(pm, request, kw):
    os._exit(0)


def _sys_exit(pm, request, kw):
    raise SystemExit(3)


def _keyboard_interrupt(pm, request, kw):
    raise KeyboardInterrupt


def _hang(pm, request, kw):
    while True:
        time.sleep(1)


def _allocate_30gb(pm, request, kw):
    big = np.ones((30 << 30) // 4, np.float32)  # far beyond the driver host's memory limit
    return ExecutionResult((big[:1],), ())


class _AlwaysEqual(np.ndarray):
    """An array that says it equals anything."""

    def __eq__(self, other):
        return np.ones(np.broadcast(self, other).shape, bool) if hasattr(other, "shape") else True

    def __ne__(self, other):
        return np.zeros(np.broadcast(self, other).shape, bool) if hasattr(other, "shape") else False

    def all(self, *a, **k):
        return True

    def tolist(self):
        return "equal to whatever you expected"


def _lying_array(pm, request, kw):
    good = _correct(pm, request, kw)
    liars = tuple(np.zeros_like(o).view(_AlwaysEqual) for o in good.outputs)
    return ExecutionResult(liars, good.output_shapes, good.timing)


def _zeros(pm, request, kw):
    good = _correct(pm, request, kw)
    return ExecutionResult(tuple(np.zeros_like(o) for o in good.outputs), good.output_shapes, good.timing)


def _spawn(pm, request, kw, **popen):
    subprocess.Popen(
        ["sleep", CHILD_SECONDS],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        **popen,
    )
    return _correct(pm, request, kw)


def _fork_child(pm, request, kw):
    return _spawn(pm, request, kw)


def _setsid_child(pm, request, kw):
    return _spawn(pm, request, kw, start_new_session=True)


def _double_fork(pm, request, kw):
    # The intermediate shell exits at once; its background sleep is re-parented.
    subprocess.run(["sh", "-c", f"setsid sleep {CHILD_SECONDS} >/dev/null 2>&1 &"], check=True)
    return _correct(pm, request, kw)


class Segfault(_Hostile):
    hook = _segfault


class ExitZero(_Hostile):
    hook = _exit_zero


class SysExit(_Hostile):
    hook = _sys_exit


class KeyboardInterrupts(_Hostile):
    hook = _keyboard_interrupt


class HangsInExecute(_Hostile):
    hook = _hang


class HangsOnRelu(_Hostile):
    """Hangs in execute on every model with a RELU: one operation, every data type and rank
    (the capability probe quarantines it; each RELU case of the run costs one call bound)."""

    hook = _hang
    trigger = Op.RELU


class HangsInPrepare(ReferenceDevice):
    """prepare of a FLOOR model never returns; SIGALRM (what a timeout based on alarm() would
    use) is ignored by the whole process."""

    name = "hostile"

    def __init__(self):
        super().__init__()
        signal.signal(signal.SIGALRM, signal.SIG_IGN)

    def prepare(self, model, **kw):
        if _triggered(model):
            _hang(None, None, None)
        return super().prepare(model, **kw)


class Allocates30GB(_Hostile):
    hook = _allocate_30gb


class LyingArray(_Hostile):
    hook = _lying_array


class PatchesNnconform(_Hostile):
    """Rewrites the harness's judges, in whatever process imported the driver."""

    hook = _zeros

    def __init__(self):
        super().__init__()
        from nnconform.verdict import criteria, runner
        from nnconform.verdict.criteria import Comparison

        def always_pass(model, expected, actual, **kw):
            return Comparison(passed=True)

        runner.compare = always_pass
        criteria.compare = always_pass
        for name, mod in list(sys.modules.items()):
            if name.startswith("nnconform") and hasattr(mod, "compare"):
                setattr(mod, "compare", always_pass)


def _garble_pipe(pm, request, kw):
    # A driver can find the host's reply pipe (its number is on the command line) and write
    # to it directly: the harness must see a broken protocol, never a forged answer.
    fd = int(sys.argv[sys.argv.index("--res-fd") + 1])
    os.write(fd, b"\xff\xff\xff\x7fthis is not a frame")
    _hang(pm, request, kw)


class GarblesPipe(_Hostile):
    hook = _garble_pipe


class ForksChild(_Hostile):
    hook = _fork_child


class SetsidChild(_Hostile):
    hook = _setsid_child


class DoubleForks(_Hostile):
    hook = _double_fork


class _ScribblingPrepared(ReferencePreparedModel):
    def execute(self, request, **kw) -> ExecutionResult:
        result = super().execute(request, **kw)
        # Its own copies of the outputs first (the reference may return views of its inputs).
        result = ExecutionResult(
            tuple(np.array(o, copy=True) for o in result.outputs), result.output_shapes, result.timing
        )
        for arg in request.inputs:  # after the right answer: zero what the caller gave us
            arr = arg.value
            if arr is None or not arr.size:
                continue
            if not arr.flags.writeable:
                try:
                    arr.setflags(write=True)
                except ValueError:
                    continue  # memory it cannot make writable is safe from it
            arr[...] = 0
        return result


class ScribblesInputs(ReferenceDevice):
    name = "hostile"

    def prepare(self, model, **kw):
        return _ScribblingPrepared(super().prepare(model, **kw).model)
