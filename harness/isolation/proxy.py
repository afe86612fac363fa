"""The harness side of driver isolation: a Device that forwards every call to a driver host.

    device = open_isolated("mypkg.driver:MyDevice", call_timeout=60, mem_limit=4 << 30)
    pm = device.prepare(model)              # runs in the host process
    pm.execute(request)                     # outputs rebuilt here as fresh ndarrays

The proxy implements the whole driver interface (nnconform.driver), optional interfaces
included, so suites do not know whether they talk to a driver in-process or through a host.
What can go wrong across the boundary becomes one of these exceptions:

- ``HostCrash`` (CRASH verdict): the host died during the call: a signal, an exit (also
  ``os._exit(0)``), or a reply that breaks the wire protocol;
- ``HostHang`` (HANG verdict): a call did not answer within its bound.  The host's stacks are
  dumped (faulthandler, SIGUSR1) into its stderr, then its process group and every descendant
  are killed;
- ``DriverProtocolError`` (FAIL): the driver returned something the interface does not allow
  (not an ExecutionResult, outputs that are not arrays...);
- ``PoolViolation`` (FAIL, a DriverProtocolError): a request's tensors travel in shared-memory
  pools (nnconform.isolation.pools) and a check of them failed after an execution: an input
  written, an output overrun or half-written in place, an output of a rejected request changed;
- ``StaleHandle`` (FAIL): an object of a host that has since died was used;
- anything the driver raised comes back as a ``DriverError`` or as an exception of the same
  type name (a ``RemoteException``; never a BaseException, so a driver's KeyboardInterrupt or
  SystemExit fails one case and the run goes on).

After a CRASH or HANG the next call starts a fresh host; ``incidents`` lists what happened, for
the result rows.
"""

from __future__ import annotations

import builtins
import collections
import concurrent.futures
import itertools
import os
import re
import threading
import time
import weakref
from typing import Any, Callable, Sequence

import numpy as np

from nnconform.driver import (
    AsyncExecution,
    BufferDesc,
    BufferRole,
    Burst,
    BurstExecution,
    BurstMemory,
    CacheFile,
    Capabilities,
    CompilationCaching,
    Device,
    DeviceBuffer,
    DriverError,
    ErrorStatus,
    ExecutionPreference,
    ExecutionResult,
    FencedExecution,
    FencedExecutionHandle,
    FencedExecutionInfo,
    MemoryDomains,
    OutputShape,
    PerformanceInfo,
    PreparedModel,
    Priority,
    Timing,
)
from nnconform.errors import DriverLoadError, NnError
from nnconform.ir import Model, OperandType, Request
from nnconform.isolation import childproc, interrupts, pools
from nnconform.isolation import hostproto as wire
from nnconform.isolation.childproc import CRASH, HANG
from nnconform.reference.ops.feature_levels import NEWEST_FEATURE_LEVEL

DEFAULT_CALL_TIMEOUT = 60.0  # seconds one driver call may take before it is a HANG
DEFAULT_MEM_LIMIT = 4 << 30  # RLIMIT_AS of a driver host (bytes)
STARTUP_TIMEOUT = 120.0  # seconds for a host to load the driver and say "ready"
READER_JOIN_S = 10.0  # how long close() waits for the reader to see the end of the reply pipe
REJECT_BUDGET_S = 0.5  # a reject_many reply after this long (one round trip per many models)
HANG_DUMP_S = childproc.HANG_DUMP_S  # time given to faulthandler to write the stacks
STDERR_TAIL_LINES = 30
CACHED_MODELS = 256  # cache tokens whose models a device proxy remembers (prepare_from_cache)
_TOKEN_VAR = "NNCONFORM_HOST_TOKEN"
# how childproc.classify names the host and what its death interrupted
_WORDING = {"who": "driver host", "unfinished": "in the middle of a call"}


class HostIncident(NnError):
    """The driver host died (CRASH) or stopped answering (HANG) during a call."""

    verdict = CRASH

    def __init__(self, message: str, **details: Any):
        super().__init__(message)
        self.details = details


class HostCrash(HostIncident):
    verdict = CRASH


class HostHang(HostIncident):
    verdict = HANG


class DriverProtocolError(NnError):
    """The driver answered with something the driver interface does not allow."""


class PoolViolation(DriverProtocolError):
    """A memory-pool check failed (nnconform.isolation.pools): an input written, an output
    overrun, or an output written in place only in part.  The message starts with the check's
    name (inputs_unchanged, guard_bytes, output_written)."""


class StaleHandle(NnError):
    """An object made by a driver host that has since been replaced."""


class RemoteException(Exception):
    """An exception the driver raised in its host; its class name is the driver's."""

    remote_type = "Exception"
    remote_where = ""


_BASE_ONLY = {"KeyboardInterrupt", "SystemExit", "GeneratorExit", "BaseException", "BaseExceptionGroup"}
_remote_classes: dict[str, type] = {}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,79}$")


def _remote_class(name: Any) -> type:
    """An Exception class named like the driver's, so messages read ``ValueError: ...``.
    Built-in Exception types are also inherited (``except TimeoutError`` still works); the
    BaseException-only ones are not: a driver's KeyboardInterrupt must not stop the run."""
    if not isinstance(name, str) or not _NAME.match(name):
        name = "RemoteException"
    cls = _remote_classes.get(name)
    if cls is None:
        builtin = getattr(builtins, name, None)
        bases: tuple[type, ...] = (RemoteException,)
        if (
            isinstance(builtin, type)
            and issubclass(builtin, Exception)
            and name not in _BASE_ONLY
            and builtin not in (Exception,)
        ):
            bases = (RemoteException, builtin)
        if len(_remote_classes) < 512:
            cls = _remote_classes[name] = type(name, bases, {"remote_type": name})
        else:
            cls = type(name, bases, {"remote_type": name})
    return cls


def _text(v: Any, limit: int = 2000) -> str:
    return v[:limit] if isinstance(v, str) else ""


def _decode_error(err: Any) -> BaseException:
    if not isinstance(err, dict):
        raise wire.ProtocolViolation("malformed error reply")
    kind = err.get("kind")
    if kind == "driver_error":
        status = err.get("status")
        if type(status) is not int or status not in ErrorStatus._value2member_map_ or status == 0:
            return DriverProtocolError(f"driver failed with an invalid ErrorStatus {str(status)[:20]}")
        return DriverError(
            ErrorStatus(status),
            _text(err.get("message")),
            [_decode_shape(s) for s in _list(err.get("output_shapes", []))],
        )
    if kind == "garbage":
        return DriverProtocolError(_text(err.get("message")) or "malformed driver result")
    if kind == "input_written":
        return PoolViolation(_text(err.get("message")) or "inputs_unchanged: the driver wrote to a read-only input")
    if kind == "exception":
        cls = _remote_class(err.get("type"))
        e: RemoteException = cls(_text(err.get("message")))
        e.remote_where = _text(err.get("where"), 300)
        return e
    raise wire.ProtocolViolation(f"unknown error kind {str(kind)[:20]!r}")


# the message of a rejection answered by reject_many, which does not send the driver's own
_REJECTED_TEXT = "rejected (reject_many does not carry the driver's message of a rejection)"


def _stuck_at(dump: str) -> str:
    """The innermost frames of the main thread in a faulthandler dump of a host that has not
    started, "function (file.py) <- caller (file.py)"; "" when the dump has none.  The
    watchdog thread (nnconform.isolation.reaper) is never the one stuck."""
    for block in childproc.fault_blocks(dump):
        if block and not any(f.endswith("reaper.py") and fn == "watch" for f, fn in block):
            return " <- ".join(f"{fn} ({os.path.basename(f)})" for f, fn in block[:3])
    return ""


def _list(v: Any, limit: int = 1 << 20) -> list[Any]:
    if not isinstance(v, list) or len(v) > limit:
        raise wire.ProtocolViolation("malformed list in a reply")
    return v


def _decode_shape(s: Any) -> OutputShape:
    if not isinstance(s, dict):
        raise wire.ProtocolViolation("malformed output shape")
    dims = _list(s.get("dimensions"), 64)
    if not all(type(d) is int and 0 <= d < 2**32 for d in dims) or type(s.get("is_sufficient")) is not bool:
        raise wire.ProtocolViolation("malformed output shape")
    return OutputShape(tuple(dims), s["is_sufficient"])


def _decode_timing(t: Any) -> Timing:
    t = _list(t, 2)
    if len(t) != 2 or not all(v is None or (type(v) is int and 0 <= v < 2**64) for v in t):
        raise wire.ProtocolViolation("malformed timing")
    return Timing(t[0], t[1])


def _decode_result(v: Any, bufs: Sequence[bytes | bytearray]) -> ExecutionResult:
    if not isinstance(v, dict):
        raise wire.ProtocolViolation("malformed execution result")
    outs = tuple(wire.decode_array(r, bufs) for r in _list(v.get("outputs"), 1 << 16))
    shapes = tuple(_decode_shape(s) for s in _list(v.get("output_shapes"), 1 << 16))
    return ExecutionResult(outs, shapes, _decode_timing(v.get("timing")))


def _decode_perf(p: Any) -> PerformanceInfo:
    p = _list(p, 2)
    if len(p) != 2 or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in p):
        raise wire.ProtocolViolation("malformed performance info")
    return PerformanceInfo(float(p[0]), float(p[1]))


def _handle(v: Any) -> int:
    if not isinstance(v, dict) or type(v.get("handle")) is not int:
        raise wire.ProtocolViolation("malformed handle reply")
    handle: int = v["handle"]
    return handle


# ---------------------------------------------------------------------------------------------
# One host process
# ---------------------------------------------------------------------------------------------


class _Answered:
    """A threading.Event that is set once: a call's answer has come (or its host died).

    Each slot is taken out of ``pending`` under the host's lock by whoever answers it (the
    reader or _fail_pending), so it is set exactly once; a held lock released then is all an
    event needs, without the Condition (and its per-wait lock) of a threading.Event, on every
    round trip to a driver host."""

    __slots__ = ("_lock", "_set")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self._set = False

    def set(self) -> None:
        if not self._set:
            self._set = True
            self._lock.release()

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float | None = None) -> bool:
        if self._set:
            return True
        if self._lock.acquire(timeout=-1 if timeout is None else max(timeout, 0.0)):
            self._lock.release()  # set stays set: later waits pass at once
            return True
        return self._set


class _Slot:
    __slots__ = ("event", "header", "bufs", "error", "deadline", "bound", "what", "future", "decode")
    event: _Answered
    header: dict[str, Any] | None
    bufs: list[bytes | bytearray] | None
    error: BaseException | None
    deadline: float
    bound: float
    what: str
    future: concurrent.futures.Future[Any] | None
    decode: Callable[[Any, list[bytes | bytearray]], Any] | None

    def __init__(self, bound: float, what: str) -> None:
        self.event = _Answered()
        self.header, self.bufs, self.error = None, None, None
        self.deadline, self.bound, self.what = time.monotonic() + bound, bound, what
        self.future, self.decode = None, None


class _Host:
    """One driver host process and the reader thread that answers its calls."""

    def __init__(self, owner: "IsolatedDevice", generation: int) -> None:
        self.owner, self.generation = owner, generation
        self.pending: dict[int, _Slot] = {}
        self.drops: collections.deque[int] = collections.deque()
        self.lock = threading.Lock()
        self.write_lock = threading.Lock()
        self.pipes_closed = False
        self.ids = itertools.count(1)
        self.death: HostIncident | None = None
        self.killing = False
        self.pools = pools.PoolSet()  # the shared-memory segments of this host's requests
        # Every process of this host inherits its token (_TOKEN_VAR), so that its orphans can be
        # told from the harness's other children once they re-parent here.
        self.child = childproc.Child(
            "nnconform.isolation.host",
            ["--driver", owner.driver_spec],
            token_var=_TOKEN_VAR,
            mem_limit=owner.mem_limit,
            stderr_prefix="nnconform-host-",
        )
        self.pid = self.child.pid
        self.req_fd, self.res_fd = self.child.req_fd, self.child.res_fd
        wire.widen_pipe(self.req_fd)
        wire.widen_pipe(self.res_fd)
        self.reader = wire.FrameReader(self.res_fd, max_payload=owner.max_payload)
        first: tuple[dict[str, Any], list[bytes | bytearray]] | str | None
        try:
            first = self.reader.read(time.monotonic() + owner.startup_timeout)
        except TimeoutError:
            first = "timeout"
        except wire.ProtocolViolation as e:
            first = f"protocol: {e}"
        if not isinstance(first, tuple) or not first[0].get("ready"):
            if first == "timeout":
                # where the load is stuck (an import, a device that never answers) is the
                # diagnosis: every thread's stack, taken before the kill
                self.child.dump_stacks(HANG_DUMP_S)
            why = self._startup_failure(first)
            self.kill_everything()
            self._close_pipes()
            self.cleanup()
            raise DriverLoadError(why)
        ready = first[0]
        self.info: dict[str, Any] = {
            "name": _text(ready.get("name"), 100) or owner.driver_spec,
            "version": _text(ready.get("version"), 100) or "0",
            "feature_level": ready.get("feature_level")
            if type(ready.get("feature_level")) is int
            else NEWEST_FEATURE_LEVEL,
            "ifaces": [i for i in _list(ready.get("ifaces", []), 8) if isinstance(i, str)],
        }
        # (helper threads block Ctrl-C, so that the kernel hands it to the waiting main thread)
        self.thread = interrupts.thread(self._read_loop, name=f"nnconform-host-reader-{self.pid}")
        self.monitor = interrupts.thread(self._watch_deadlines, name=f"nnconform-host-monitor-{self.pid}")

    def _startup_failure(self, first: tuple[dict[str, Any], list[bytes | bytearray]] | str | None) -> str:
        if isinstance(first, tuple) and isinstance(first[0].get("error"), str):
            error: str = first[0]["error"]
            return error[:2000]
        if first == "timeout":
            where = _stuck_at(self.child.stderr.fault_dump())
            return (
                f"driver '{self.owner.driver_spec}': the driver host did not start within "
                f"{self.owner.startup_timeout:g} s" + (f" (stuck in {where})" if where else "")
            )
        self.child.wait_exit(5)
        tail = self.stderr_tail().strip().splitlines()
        return (
            f"driver '{self.owner.driver_spec}': the driver host died while loading the driver "
            f"({self.child.exit_text()})" + (f": {tail[-1][:300]}" if tail else "")
        )

    # -- calls ------------------------------------------------------------------------------
    def start_call(
        self,
        op: str,
        args: dict[str, Any],
        bound: float,
        future: concurrent.futures.Future[Any] | None = None,
        decode: Callable[[Any, list[bytes | bytearray]], Any] | None = None,
    ) -> _Slot:
        slot = _Slot(bound, op)
        slot.future, slot.decode = future, decode
        call_id = next(self.ids)
        with self.lock:
            if self.death is not None:
                raise self.death
            self.pending[call_id] = slot
        if self.drops:
            dropped = []
            while self.drops:
                dropped.append(self.drops.popleft())
            args = dict(args, _drop=dropped)
        gone = self.pools.take_gone()
        if gone:
            args = dict(args, _unmap=gone)
        frame = wire.encode_call(call_id, op, args)
        try:
            self._write(frame)
        except OSError:
            # The host is gone; the reader classifies how and fails this slot with it.
            self.thread.join(10)
        return slot

    def _write(self, frame: list[bytes]) -> None:
        """One call frame (wire.encode_call); BrokenPipeError once the pipes are closed (see
        _close_pipes)."""
        with self.write_lock:
            if self.pipes_closed:
                raise BrokenPipeError("the driver host's pipes are closed")
            wire.send_call(self.req_fd, frame)

    def notify(self, op: str, args: dict[str, Any]) -> None:
        """A message with no answer (fence signalled, handles dropped)."""
        if self.death is not None:
            return
        try:
            self._write(wire.encode_call(0, op, args))
        except OSError:
            return  # the host is gone: the reader records how; a notice has nobody to tell

    def call(self, op: str, args: dict[str, Any], bound: float | None = None) -> tuple[Any, list[bytes | bytearray]]:
        bound = self.owner.call_timeout if bound is None else bound
        slot = self.start_call(op, args, bound)
        # The monitor thread turns an overdue call into a HANG; the extra wait is a backstop.
        # The waits are sliced so that a Ctrl-C stops the run at once (nnconform.isolation.interrupts).
        if not interrupts.wait(slot.event, bound + HANG_DUMP_S + 10):
            self.hang(f"{op} did not return within {bound:g} s")
            interrupts.wait(slot.event, 10)
        if slot.error is not None:
            raise slot.error
        # answered without an error: the reader filled both
        assert slot.header is not None and slot.bufs is not None
        return slot.header.get("ok"), slot.bufs

    # -- the reader -------------------------------------------------------------------------
    def _read_loop(self) -> None:
        try:
            for header, bufs in self.reader.frames():
                call_id = header.get("id")
                with self.lock:
                    slot = self.pending.pop(call_id, None) if type(call_id) is int else None
                if slot is None:
                    raise wire.ProtocolViolation(f"reply to unknown call {str(call_id)[:20]}")
                if header.get("dirty") is True:
                    self.owner.dirty = True
                if "err" in header:
                    try:
                        slot.error = _decode_error(header["err"])
                    except wire.ProtocolViolation:
                        raise
                elif "ok" not in header:
                    raise wire.ProtocolViolation("reply with neither a value nor an error")
                slot.header, slot.bufs = header, bufs
                self._finish(slot)
        except wire.ProtocolViolation as e:
            self._die(HostCrash(f"driver host broke the wire protocol ({e}); host killed", protocol=str(e)))
            return
        except OSError as e:
            self._die(HostCrash(f"reading from the driver host failed: {e}"))
            return
        self._die(None)

    def _finish(self, slot: _Slot) -> None:
        if slot.future is not None:
            if slot.error is not None:
                slot.future.set_exception(slot.error)
            else:
                # a future's call always has a decoder, and an answer without error fills both
                assert slot.decode is not None and slot.header is not None and slot.bufs is not None
                try:
                    slot.future.set_result(slot.decode(slot.header.get("ok"), slot.bufs))
                except (wire.ProtocolViolation, NnError) as e:
                    slot.future.set_exception(e)
        slot.event.set()

    def _watch_deadlines(self) -> None:
        while self.death is None:
            time.sleep(0.05)
            now = time.monotonic()
            with self.lock:
                late = [s for s in self.pending.values() if s.deadline < now]
            if late:
                worst = min(late, key=lambda s: s.deadline)
                self.hang(f"{worst.what} did not return within {worst.bound:g} s")
                return

    def _die(self, cause: HostIncident | None) -> None:
        """The result pipe closed (or broke the protocol): classify, kill what is left, fail
        every pending call."""
        with self.lock:
            already = self.death if not self.killing else (self.death or HostHang("being killed"))
        if already is None:
            if cause is None:
                end = childproc.classify(self.child.wait_exit(5), False, **_WORDING)
                cause = HostCrash(end.reason, **end.details())
            self.kill_everything()
            cause.details["stderr_tail"] = self.stderr_tail()
            # the whole faulthandler dump (every thread), for who needs the crashing thread's
            # frames (nnconform fuzz buckets); the short tail above may start inside it
            cause.details["fault_dump"] = self.child.stderr.fault_dump()
            cause.details["host_pid"] = self.pid
            with self.lock:
                if self.death is None:
                    self.death = cause
        else:
            return  # hang() or close() killed the host: they record and fail the pending calls
        self.owner._incident(self, self.death)  # recorded before any waiting call wakes up
        self._fail_pending()

    def _fail_pending(self) -> None:
        self.pools.close()  # segments in use are closed when their calls give them back
        with self.lock:
            slots, self.pending = list(self.pending.values()), {}
        for s in slots:
            s.error = self.death
            if s.future is not None and not s.future.done():
                s.future.set_exception(self.death)
            s.event.set()

    def hang(self, reason: str) -> None:
        """A call is overdue: dump the host's stacks, kill it and everything it started."""
        with self.lock:
            if self.death is not None or self.killing:
                return
            self.killing = True
        self.child.dump_stacks(HANG_DUMP_S)  # faulthandler: every thread's stack to stderr
        incident = HostHang(childproc.classify(None, True, hang_reason=f"HANG: {reason}", **_WORDING).reason)
        with self.lock:
            if self.death is None:
                self.death = incident
        self.kill_everything()
        incident.details.update(
            stderr_tail=self.stderr_tail(), host_pid=self.pid, fault_dump=self.child.stderr.fault_dump()
        )
        self.owner._incident(self, incident)  # recorded before any waiting call wakes up
        self._fail_pending()

    # -- ending -----------------------------------------------------------------------------
    def kill_everything(self) -> None:
        """The host, its process group, its descendants and its orphans (only this host's:
        another host or a stress worker of the same process is not touched)."""
        self.child.kill()

    def close(self) -> None:
        with self.lock:
            alive = self.death is None
            if alive:
                self.death = HostCrash("the driver host was closed")
        if alive:
            try:
                self._write(wire.encode_call(0, "quit", {}))
                self.child.wait_exit(5)
            except OSError:
                pass  # the host is gone already: killed below all the same
        self.kill_everything()
        self._fail_pending()
        self._close_pipes()
        self.cleanup()

    def _close_pipes(self) -> None:
        """Close both pipe ends, but never under a thread that may still use one.  A closed
        descriptor's number is given to the next pipe opened (the next host's): a write
        started by another thread would land in that host's requests, and a late read by
        this host's reader would steal that host's replies (its call then waits to a HANG).
        So writers check ``pipes_closed`` under the write lock, and the reply pipe is closed
        once the reader has seen the end of it; a reader still blocked after the wait (a
        descendant kept the pipe's write end) keeps its descriptor open."""
        with self.write_lock:
            if self.pipes_closed:
                return
            self.pipes_closed = True
            try:
                os.close(self.req_fd)
            except OSError:
                pass  # closed already: nothing left to release
        reader = getattr(self, "thread", None)  # not started when the host failed to start
        if reader is not None and reader is not threading.current_thread():
            reader.join(READER_JOIN_S)
            if reader.is_alive():
                return
        try:
            os.close(self.res_fd)
        except OSError:
            pass  # closed already: nothing left to release

    def cleanup(self) -> None:
        self.pools.close()
        self.child.stderr.remove()

    def stderr_tail(self) -> str:
        return self.child.stderr.tail(0, STDERR_TAIL_LINES)


# ---------------------------------------------------------------------------------------------
# The proxies
# ---------------------------------------------------------------------------------------------


class _Remote:
    """An object living in a host: the host generation it belongs to and its handle."""

    def __init__(self, device: "IsolatedDevice", host: _Host, handle: int):
        self._device, self._host, self._handle = device, host, handle
        # When the suite drops the proxy, the host drops the object too.
        self._finalizer = weakref.finalize(self, _drop, weakref.ref(host), handle)

    def _live(self) -> _Host:
        if self._host.death is not None or self._host is not self._device._current:
            raise StaleHandle(
                f"{type(self).__name__.removeprefix('Remote')} belongs to a driver host that "
                f"has been replaced after a CRASH or HANG; prepare again"
            )
        return self._host

    def _call(self, op: str, args: dict[str, Any], bound: float | None = None) -> tuple[Any, list[bytes | bytearray]]:
        return self._live().call(op, dict(args, handle=self._handle), bound)


def _drop(host_ref: weakref.ref[_Host], handle: int) -> None:
    # A finalizer runs inside whatever allocation triggered the collection, possibly in the
    # middle of writing a frame on this very thread: it must not write.  The handle rides
    # along with the next call instead.
    host = host_ref()
    if host is not None:
        host.drops.append(handle)


def _aliased(v: Any) -> list[int]:
    """The host's aliasing watch: outputs of the previous result the driver changed since."""
    got = v.get("aliased") if isinstance(v, dict) else None
    if got is None:
        return []
    if not isinstance(got, list) or len(got) > 1 << 16 or not all(type(i) is int and i >= 0 for i in got):
        raise wire.ProtocolViolation("malformed aliasing report")
    return got


def _strip(request: Request, placement: pools.Placement) -> Request:
    """The request as it crosses the pipe: pooled inputs without their values (the host gives
    the driver views of the pool instead)."""
    if not placement.inputs:
        return request
    ins = list(request.inputs)
    for r in placement.inputs:
        ins[r.index] = pools.replace(ins[r.index], value=None)
    return pools.replace(request, inputs=tuple(ins))


def _decode_pooled(
    v: Any, bufs: Sequence[bytes | bytearray], placement: pools.Placement, buf: np.ndarray
) -> tuple[ExecutionResult, dict[int, bool]]:
    """An execution reply whose outputs are in the pool (``{"pool": i, ...}``) or inline."""
    if not isinstance(v, dict):
        raise wire.ProtocolViolation("malformed execution result")
    regions = {o.index: o for o in placement.outputs}
    outs: list[np.ndarray] = []
    inplace: dict[int, bool] = {}
    for i, ref in enumerate(_list(v.get("outputs"), 1 << 16)):
        if isinstance(ref, dict) and "pool" in ref:
            o = regions.get(ref["pool"]) if type(ref["pool"]) is int else None
            dtype, shape, how = ref.get("dtype"), ref.get("shape"), ref.get("how")
            if (
                o is None
                or o.index != i
                or not isinstance(dtype, str)
                or dtype not in wire.ALLOWED_DTYPES
                or not isinstance(shape, list)
                or len(shape) > 16
                or not all(type(d) is int and 0 <= d < 2**31 for d in shape)
                or how not in ("inplace", "copied")
            ):
                raise wire.ProtocolViolation("malformed pooled output reference")
            outs.append(pools.read_output(buf, o, dtype, shape))
            inplace[i] = how == "inplace"
        else:
            outs.append(wire.decode_array(ref, bufs))
    shapes = tuple(_decode_shape(s) for s in _list(v.get("output_shapes"), 1 << 16))
    return ExecutionResult(tuple(outs), shapes, _decode_timing(v.get("timing"))), inplace


def _explain_fault(e: HostCrash, placement: pools.Placement, buf: np.ndarray) -> HostCrash:
    """A host killed by SIGSEGV/SIGBUS while its request was in a pool: say what the pool
    shows (``buf``: the harness's own mapping of it, intact after the host's death): an
    output overrun into its inaccessible guard page, or the possible causes (pools.fault_message)."""
    if e.details.get("signal") not in (7, 11):
        return e
    why = pools.fault_message(buf, placement)
    return HostCrash(f"{e} ({why})", **e.details) if why else e


def _pooled_execute(
    remote: "_Remote", op: str, request: Request, kwargs: dict[str, Any]
) -> tuple[ExecutionResult, Any]:
    """One synchronous execution with its operands in a shared-memory pool, and the pool checks
    (nnconform.isolation.pools) on its answer, whether the driver succeeded or failed."""
    host = remote._live()
    if not pools.ENABLED:
        v, bufs = remote._call(op, {"request": request, "kwargs": kwargs})
        return _decode_result(v, bufs), v
    placement = pools.plan(request, pools.output_specs(getattr(remote, "_model", None), request), **host.pools.layout())
    if not placement.inputs and not placement.outputs:
        v, bufs = remote._call(op, {"request": request, "kwargs": kwargs})
        return _decode_result(v, bufs), v
    seg = host.pools.acquire(placement.total)
    stripped = _strip(request, placement)

    def once(alternate: bool) -> tuple[Any, list[bytes | bytearray]]:
        pools.fill(seg.buf, placement, request, alternate)
        try:
            v, bufs = remote._call(op, {"request": stripped, "kwargs": kwargs, "pool": placement.describe(seg)})
        except DriverError as e:
            # a failed execution still must not have touched its inputs or overrun an output
            pools.check_inputs(seg.buf, placement)
            pools.check_guards(seg.buf, placement)
            pools.check_untouched(seg.buf, placement, e, alternate)
            raise
        except HostCrash as e:
            raise _explain_fault(e, placement, seg.buf) from None
        pools.check_inputs(seg.buf, placement)
        pools.check_guards(seg.buf, placement)
        return v, bufs

    try:
        v, bufs = once(False)
        result, inplace = _decode_pooled(v, bufs, placement, seg.buf)
        for o in placement.outputs:
            if not inplace.get(o.index):
                continue
            a = result.outputs[o.index]
            idx = pools.unwritten(seg.buf, o, a.nbytes)
            if idx.size and pools.needs_confirmation(o.dtype):
                v, bufs = once(True)
                result, inplace = _decode_pooled(v, bufs, placement, seg.buf)
                if inplace.get(o.index):
                    idx = np.intersect1d(idx, pools.unwritten(seg.buf, o, a.nbytes, alternate=True))
                else:
                    idx = idx[:0]
            if idx.size:
                raise pools._violation(pools.unwritten_message(o, idx, a.size))
        return result, v
    finally:
        host.pools.release(seg)


class RemotePreparedModel(_Remote, PreparedModel):
    _model: Model | None = None  # the model prepared (None from a cache): sizes the output regions

    #: After each synchronous execution: the outputs of the one before it that the driver
    #: overwrote since it returned them (found in the driver host; nnconform.verdict.aliasing reads it).
    aliased_outputs: list[int] = []

    def execute(
        self,
        request: Request,
        *,
        measure_timing: bool = False,
        deadline: float | None = None,
        loop_timeout: float | None = None,
    ) -> ExecutionResult:
        kwargs = dict(measure_timing=measure_timing, deadline=deadline, loop_timeout=loop_timeout)
        result, v = _pooled_execute(self, "execute", request, kwargs)
        self.aliased_outputs = _aliased(v)
        return result

    def release(self) -> None:
        self._call("release", {})

    # optional interfaces: reachable only through the subclasses that declare them
    def execute_async(
        self,
        request: Request,
        *,
        measure_timing: bool = False,
        deadline: float | None = None,
        loop_timeout: float | None = None,
    ) -> concurrent.futures.Future[ExecutionResult]:
        fut: concurrent.futures.Future[ExecutionResult] = interrupts.Future()  # its result() wait is sliced too
        host = self._live()
        kwargs = dict(measure_timing=measure_timing, deadline=deadline, loop_timeout=loop_timeout)
        placement = pools.plan(request, pools.output_specs(self._model, request), **host.pools.layout())
        if not pools.ENABLED or not (placement.inputs or placement.outputs):
            host.start_call(
                "execute_async",
                {"handle": self._handle, "request": request, "kwargs": kwargs},
                self._device.call_timeout,
                future=fut,
                decode=_decode_result,
            )
            return fut
        seg = host.pools.acquire(placement.total)
        pools.fill(seg.buf, placement, request)
        inner: concurrent.futures.Future[Any] = concurrent.futures.Future()
        inner.add_done_callback(lambda f: self._async_done(f, fut, host, seg, placement, request, kwargs))
        try:
            host.start_call(
                "execute_async",
                {
                    "handle": self._handle,
                    "request": _strip(request, placement),
                    "kwargs": kwargs,
                    "pool": placement.describe(seg),
                },
                self._device.call_timeout,
                future=inner,
                decode=lambda v, bufs: (v, bufs),
            )
        except BaseException:
            host.pools.release(seg)
            raise
        return fut

    def _async_done(
        self,
        inner: concurrent.futures.Future[Any],
        fut: concurrent.futures.Future[ExecutionResult],
        host: _Host,
        seg: pools.Segment,
        placement: pools.Placement,
        request: Request,
        kwargs: dict[str, Any],
    ) -> None:
        """The pool checks of an asynchronous execution, on the reader thread (no driver call
        may be made here: an integer output that looks unwritten is confirmed by a synchronous
        execution on a thread of its own)."""
        confirm = False
        try:
            exc = inner.exception()
            if exc is not None:
                if isinstance(exc, DriverError):
                    pools.check_inputs(seg.buf, placement)
                    pools.check_guards(seg.buf, placement)
                    pools.check_untouched(seg.buf, placement, exc)
                fut.set_exception(_explain_fault(exc, placement, seg.buf) if isinstance(exc, HostCrash) else exc)
                return
            v, bufs = inner.result()
            pools.check_inputs(seg.buf, placement)
            pools.check_guards(seg.buf, placement)
            result, inplace = _decode_pooled(v, bufs, placement, seg.buf)
            for o in placement.outputs:
                if inplace.get(o.index):
                    a = result.outputs[o.index]
                    idx = pools.unwritten(seg.buf, o, a.nbytes)
                    if idx.size and pools.needs_confirmation(o.dtype):
                        confirm = True
                    elif idx.size:
                        raise pools._violation(pools.unwritten_message(o, idx, a.size))
            if not confirm:
                fut.set_result(result)
        except (wire.ProtocolViolation, NnError) as e:
            fut.set_exception(e)
        finally:
            host.pools.release(seg)
        if confirm:
            interrupts.thread(self._confirm, args=(fut, request, kwargs), name="nnconform-pool-confirm")

    def _confirm(
        self, fut: concurrent.futures.Future[ExecutionResult], request: Request, kwargs: dict[str, Any]
    ) -> None:
        try:
            fut.set_result(_pooled_execute(self, "execute", request, kwargs)[0])
        except Exception as e:  # the synchronous execution's verdict is this future's
            fut.set_exception(e)

    def execute_fenced(
        self,
        request: Request,
        wait_for: Sequence[threading.Event | None],
        *,
        measure_timing: bool = False,
        deadline: float | None = None,
        loop_timeout: float | None = None,
        timeout_after_fence: float | None = None,
    ) -> FencedExecutionHandle:
        host = self._live()
        fences: list[int | None] = []
        for ev in wait_for:
            if ev is None:
                fences.append(None)
                continue
            fid = next(self._device._fence_ids)
            fences.append(fid)
            interrupts.thread(_forward_fence, args=(ev, weakref.ref(host), fid), name=f"nnconform-fence-{fid}")
        kwargs = dict(
            measure_timing=measure_timing,
            deadline=deadline,
            loop_timeout=loop_timeout,
            timeout_after_fence=timeout_after_fence,
        )
        placement = pools.plan(request, pools.output_specs(self._model, request), **host.pools.layout())
        if not pools.ENABLED or not (placement.inputs or placement.outputs):
            v, _ = self._call("execute_fenced", {"request": request, "fences": fences, "kwargs": kwargs})
            return RemoteFencedHandle(self._device, host, _handle(v))
        seg = host.pools.acquire(placement.total)
        pools.fill(seg.buf, placement, request)
        try:
            v, _ = self._call(
                "execute_fenced",
                {
                    "request": _strip(request, placement),
                    "fences": fences,
                    "kwargs": kwargs,
                    "pool": placement.describe(seg),
                },
            )
        except DriverError as e:
            try:
                pools.check_inputs(seg.buf, placement)
                pools.check_guards(seg.buf, placement)
                pools.check_untouched(seg.buf, placement, e)
            finally:
                host.pools.release(seg)
            raise
        except BaseException as e:
            try:
                if isinstance(e, HostCrash):  # read the pool before it goes back
                    raise _explain_fault(e, placement, seg.buf) from None
                raise
            finally:
                host.pools.release(seg)
        handle = RemoteFencedHandle(self._device, host, _handle(v))
        handle._pool = (seg, placement)
        return handle

    def configure_burst(self) -> Burst:
        v, _ = self._call("configure_burst", {})
        memory = isinstance(v, dict) and "BurstMemory" in _list(v.get("ifaces", []), 4)
        burst = (RemoteMemoryBurst if memory else RemoteBurst)(self._device, self._host, _handle(v))
        burst._model = self._model
        return burst


def _forward_fence(event: threading.Event, host_ref: weakref.ref[_Host], fid: int) -> None:
    # The suite's fence is a threading.Event here; the driver waits on its twin in the host.
    event.wait()
    host = host_ref()
    if host is not None:
        host.notify("signal_fence", {"fence": fid})


class RemoteFencedHandle(_Remote, FencedExecutionHandle):
    #: the pool segment of its execution and where the operands are, until the first wait
    #: returns (a handle never waited for keeps its segment out of reuse; it is freed with it)
    _pool: tuple[pools.Segment, pools.Placement] | None = None

    def wait(self, timeout: float | None = None) -> ExecutionResult:
        bound = self._device.call_timeout + (timeout or 0)
        pool, self._pool = self._pool, None
        if pool is None:
            v, bufs = self._call("fenced_wait", {"timeout": timeout}, bound)
            return _decode_result(v, bufs)
        seg, placement = pool
        try:
            try:
                v, bufs = self._call("fenced_wait", {"timeout": timeout}, bound)
            except DriverError as e:
                pools.check_inputs(seg.buf, placement)
                pools.check_guards(seg.buf, placement)
                pools.check_untouched(seg.buf, placement, e)
                raise
            except HostCrash as e:
                raise _explain_fault(e, placement, seg.buf) from None
            pools.check_inputs(seg.buf, placement)
            pools.check_guards(seg.buf, placement)
            result, inplace = _decode_pooled(v, bufs, placement, seg.buf)
            for o in placement.outputs:
                if inplace.get(o.index):
                    a = result.outputs[o.index]
                    idx = pools.unwritten(seg.buf, o, a.nbytes)
                    # integer poison cannot be confirmed here (a fenced execution is not re-run)
                    if idx.size and not pools.needs_confirmation(o.dtype):
                        raise pools._violation(pools.unwritten_message(o, idx, a.size))
            return result
        finally:
            self._host.pools.release(seg)

    def get_execution_info(self) -> FencedExecutionInfo:
        v, _ = self._call("fenced_info", {})
        if (
            not isinstance(v, dict)
            or type(v.get("status")) is not int
            or v["status"] not in ErrorStatus._value2member_map_
        ):
            raise DriverProtocolError("get_execution_info returned a malformed FencedExecutionInfo")
        return FencedExecutionInfo(
            ErrorStatus(v["status"]), _decode_timing(v.get("launched")), _decode_timing(v.get("fenced"))
        )


class RemoteBurst(_Remote, Burst):
    aliased_outputs: list[int] = []
    _model: Model | None = None

    def execute(
        self,
        request: Request,
        *,
        measure_timing: bool = False,
        deadline: float | None = None,
        loop_timeout: float | None = None,
    ) -> ExecutionResult:
        kwargs = dict(measure_timing=measure_timing, deadline=deadline, loop_timeout=loop_timeout)
        result, v = _pooled_execute(self, "burst_execute", request, kwargs)
        self.aliased_outputs = _aliased(v)
        return result

    def release(self) -> None:
        self._call("release", {})


class RemoteMemoryBurst(RemoteBurst, BurstMemory):
    def cache_memory(self, token: int) -> int:
        v, _ = self._call("burst_cache_memory", {"token": token})
        if type(v) is not int:
            raise DriverProtocolError(f"cache_memory returned {_text(v, 80) or 'a malformed reply'}, not a slot")
        return v

    def free_memory(self, slot: int) -> None:
        self._call("burst_free_memory", {"slot": slot})


class RemoteBuffer(_Remote, DeviceBuffer):
    def copy_from(self, array: np.ndarray) -> None:
        self._call("copy_from", {"array": np.array(array, copy=True)})

    def copy_to(self) -> np.ndarray:
        v, bufs = self._call("copy_to", {})
        return wire.decode_array(v, bufs)


_PM_IFACES = {"AsyncExecution": AsyncExecution, "FencedExecution": FencedExecution, "BurstExecution": BurstExecution}
_DEV_IFACES = {"CompilationCaching": CompilationCaching, "MemoryDomains": MemoryDomains}
_pm_classes: dict[frozenset[str], type] = {}


def _pm_class(ifaces: frozenset[str]) -> type:
    """The proxy class declaring exactly the interfaces the driver's prepared model declares."""
    cls = _pm_classes.get(ifaces)
    if cls is None:
        bases = tuple(_PM_IFACES[n] for n in sorted(ifaces))
        cls = _pm_classes[ifaces] = type("RemotePreparedModel", (RemotePreparedModel, *bases), {})
    return cls


class IsolatedDevice(Device):
    """The driver under test, in a host process.  Declares CompilationCaching / MemoryDomains
    when the driver's device does (see ``open_isolated``)."""

    isolated = True

    def __init__(
        self,
        driver_spec: str,
        *,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        mem_limit: int | None = DEFAULT_MEM_LIMIT,
        startup_timeout: float = STARTUP_TIMEOUT,
        max_payload: int = wire.DEFAULT_MAX_PAYLOAD,
    ) -> None:
        self.driver_spec = driver_spec
        self.call_timeout, self.mem_limit = float(call_timeout), mem_limit
        self.startup_timeout, self.max_payload = startup_timeout, max_payload
        self.incidents: list[dict[str, Any]] = []
        self.dirty = False  # a reply said the driver host has child processes
        self.hosts_started = 0
        self._fence_ids = itertools.count(1)
        self._start_lock = threading.Lock()
        self._current: _Host | None = None
        # the model each cache token was last prepared with (a model prepared from a cache
        # then gets output regions sized by it, as the NNAPI runtime knows a compilation's
        # model); a bounded LRU, by token
        self._cached_models: collections.OrderedDict[bytes, Model] = collections.OrderedDict()
        info = self._host().info  # fail now, with the loader's one-line error, if the driver cannot load
        self.name, self.version, self.feature_level = info["name"], info["version"], info["feature_level"]
        self.interfaces = list(info["ifaces"])

    # -- host management ----------------------------------------------------------------------
    def _host(self) -> _Host:
        h = self._current
        if h is not None and h.death is None:
            return h
        with self._start_lock:
            h = self._current
            if h is None or h.death is not None:
                if h is not None:
                    h._close_pipes()  # the dead host's descriptors, before new pipes are opened
                self.hosts_started += 1
                h = self._current = _Host(self, self.hosts_started)
        return h

    def _incident(self, host: _Host, incident: HostIncident) -> None:
        self.incidents.append(
            {
                "verdict": incident.verdict,
                "message": str(incident),
                "host_pid": host.pid,
                "generation": host.generation,
                **incident.details,
            }
        )

    def liveness(self) -> str:
        """After a CRASH or HANG: does a fresh host load the driver and answer?"""
        t0 = time.monotonic()
        try:
            self._host().call("capabilities", {}, min(self.call_timeout, 30.0))
        except (NnError, DriverLoadError) as e:
            return f"liveness FAILED: a fresh driver host did not answer ({str(e)[:200]})"
        return f"liveness OK: a fresh driver host answered in {time.monotonic() - t0:.2f} s"

    def end_case(self) -> dict[str, Any]:
        """Ask the host which processes the driver left running since the last case (they are
        killed).  Only asked when a reply said the host has children."""
        h = self._current
        if h is None or h.death is not None or not self.dirty:
            return {"processes": []}
        self.dirty = False
        try:
            v, _ = h.call("end_case", {}, 30.0)
        except NnError:
            return {"processes": []}  # the host died meanwhile: recorded as an incident
        if not isinstance(v, dict):
            return {"processes": []}
        return {"processes": [_text(x, 200) for x in _list(v.get("processes", []), 100) if isinstance(x, str)]}

    def close(self) -> None:
        h, self._current = self._current, None
        if h is not None:
            h.close()

    def restart(self) -> None:
        """End the driver host; the next call starts a fresh one (state that must survive a
        process, such as a compilation cache in files, is checked across it)."""
        self.close()

    def busy_calls(self) -> list[str]:
        """Driver calls still unanswered (a suite gave up waiting on them)."""
        h = self._current
        if h is None or h.death is not None:
            return []
        with h.lock:
            return [s.what for s in h.pending.values()]

    def declare_hang(self, reason: str) -> None:
        h = self._current
        if h is not None and h.death is None:
            h.hang(reason)

    # -- the driver interface ---------------------------------------------------------------
    def capabilities(self) -> Capabilities:
        v, _ = self._host().call("capabilities", {})
        if not isinstance(v, dict):
            raise DriverProtocolError("capabilities returned a malformed Capabilities")
        perf: list[tuple[OperandType, PerformanceInfo]] = []
        for entry in _list(v.get("operand_performance", []), 256):
            if not (
                isinstance(entry, list)
                and len(entry) == 2
                and type(entry[0]) is int
                and entry[0] in OperandType._value2member_map_
            ):
                raise DriverProtocolError("capabilities listed an unknown operand type")
            perf.append((OperandType(entry[0]), _decode_perf(entry[1])))
        return Capabilities(
            _decode_perf(v.get("relaxed_scalar")),
            _decode_perf(v.get("relaxed_tensor")),
            tuple(perf),
            _decode_perf(v.get("if")),
            _decode_perf(v.get("while")),
        )

    def _device_info(self) -> dict[str, Any]:
        v, _ = self._host().call("device_info", {})
        if not isinstance(v, dict):
            raise wire.ProtocolViolation("malformed device_info reply")
        return v

    def status(self) -> Any:
        """The driver's answer as it came: an int (a DeviceStatus code or not) or a str
        describing what else it returned; the vts suite judges it."""
        return self._device_info().get("status")

    def device_type(self) -> Any:
        return self._device_info().get("type")

    def supported_extensions(self) -> Any:
        return self._device_info().get("extensions")

    def supported_operations(self, model: Model) -> list[bool]:
        v, _ = self._host().call("supported", {"model": model})
        if isinstance(v, list) and all(type(s) is bool for s in v):
            claims: list[bool] = v
            return claims
        if isinstance(v, dict) and isinstance(v.get("not_bools"), str):
            # a str on purpose, not the list[bool] the interface promises: run_case reports
            # "returned '...'; expected N bools"
            return v["not_bools"]  # type: ignore[no-any-return]  # the driver's garbage, passed on as its text
        raise wire.ProtocolViolation("malformed supported_operations reply")

    def reject_many(self, mutations: Sequence[Any]) -> list[list[tuple[str, Any]]]:
        """The supported_operations / prepare answers to invalid models
        (nnconform.vts.mutations.ModelMutation), many per round trip (the host's
        ``op_reject_many``); for each model, in order, its ``(what, answer)`` steps, an answer
        being True (accepted) or the exception the call raised (an INVALID_ARGUMENT rejection
        as a DriverError without the driver's message, which the check never reads).  May
        answer for only the first models (the host's time budget): the caller sends the rest
        again."""
        host = self._host()
        checks = [(m.model, bool(m.query_support), m.preference, m.priority) for m in mutations]
        v, _ = host.call(
            "reject_many", {"checks": checks, "budget": REJECT_BUDGET_S}, self.call_timeout + REJECT_BUDGET_S
        )
        out: list[list[tuple[str, Any]]] = []
        for steps in _list(v, len(checks)):
            decoded: list[tuple[str, Any]] = []
            for step in _list(steps, 2):
                if not (
                    isinstance(step, list)
                    and len(step) == 2
                    and step[0] in ("supported_operations", "prepare")
                    and isinstance(step[1], dict)
                ):
                    raise wire.ProtocolViolation("malformed reject_many reply")
                what, answer = step
                if "err" in answer:
                    decoded.append((what, _decode_error(answer["err"])))
                elif answer.get("rejected") is True:
                    decoded.append((what, DriverError(ErrorStatus.INVALID_ARGUMENT, _REJECTED_TEXT)))
                else:
                    decoded.append((what, True))
            if not decoded:
                raise wire.ProtocolViolation("reject_many answered a model with no steps")
            out.append(decoded)
        if not out and checks:
            raise wire.ProtocolViolation("reject_many answered no model")
        return out

    def _prepared(self, host: _Host, v: Any) -> PreparedModel:
        if not isinstance(v, dict) or type(v.get("handle")) is not int:
            raise DriverProtocolError("prepare returned a malformed reply")
        if not v.get("is_prepared_model"):
            raise DriverProtocolError(f"prepare returned {_text(v.get('type'), 80)}, not a PreparedModel")
        ifaces = frozenset(i for i in _list(v.get("ifaces", []), 8) if i in _PM_IFACES)
        pm: PreparedModel = _pm_class(ifaces)(self, host, v["handle"])
        return pm

    def prepare(
        self,
        model: Model,
        *,
        preference: ExecutionPreference | int = 1,
        priority: Priority | int = 1,
        deadline: float | None = None,
        cache_token: bytes | None = None,
        model_cache: Sequence[CacheFile] | None = None,
        data_cache: Sequence[CacheFile] | None = None,
    ) -> PreparedModel:
        host = self._host()
        kwargs: dict[str, Any] = dict(
            preference=preference, priority=priority, deadline=deadline, cache_token=cache_token
        )
        kwargs.update(_cache_files(model_cache, data_cache))
        v, _ = host.call("prepare", {"model": model, "kwargs": kwargs})
        pm = self._prepared(host, v)
        pm._model = model  # type: ignore[attr-defined]  # always a RemotePreparedModel
        if isinstance(cache_token, (bytes, bytearray)):
            token = bytes(cache_token)
            self._cached_models.pop(token, None)
            self._cached_models[token] = model
            while len(self._cached_models) > CACHED_MODELS:
                self._cached_models.popitem(last=False)
        return pm

    def prepare_from_cache(
        self,
        cache_token: bytes,
        *,
        model_cache: Sequence[CacheFile] | None = None,
        data_cache: Sequence[CacheFile] | None = None,
    ) -> PreparedModel:
        host = self._host()
        v, _ = host.call("prepare_from_cache", {"token": cache_token, "kwargs": _cache_files(model_cache, data_cache)})
        pm = self._prepared(host, v)
        # The model this token was compiled from, if it was compiled through this device:
        # the outputs get regions of its sizes.  A driver that loads another model's
        # compilation still writes that model's outputs, which either fit (copied in, judged
        # by their values) or do not (they travel through the pipe), so nothing is hidden.
        known = self._cached_models.get(bytes(cache_token)) if isinstance(cache_token, (bytes, bytearray)) else None
        if known is not None:
            pm._model = known  # type: ignore[attr-defined]  # always a RemotePreparedModel
        return pm

    def cache_file_counts(self) -> tuple[int, int]:
        v, _ = self._host().call("cache_file_counts", {})
        if isinstance(v, list) and len(v) == 2 and all(type(n) is int for n in v):
            return (v[0], v[1])
        raise DriverProtocolError(
            f"cache_file_counts returned {_text((v or {}).get('malformed') if isinstance(v, dict) else None, 120) or 'a malformed reply'}, not two ints"
        )

    def allocate(
        self,
        desc: BufferDesc,
        prepared_models: Sequence[PreparedModel],
        input_roles: Sequence[BufferRole],
        output_roles: Sequence[BufferRole],
    ) -> tuple[DeviceBuffer, int]:
        host = self._host()
        handles = []
        for pm in prepared_models:
            if not isinstance(pm, _Remote):
                raise DriverError(
                    ErrorStatus.INVALID_ARGUMENT, f"{type(pm).__name__} is not a prepared model of this driver"
                )
            handles.append(pm._handle)
        v, _ = host.call(
            "allocate",
            {"desc": desc, "models": handles, "input_roles": list(input_roles), "output_roles": list(output_roles)},
        )
        if not isinstance(v, dict) or type(v.get("token")) is not int:
            raise DriverProtocolError("allocate returned a malformed reply")
        return RemoteBuffer(self, host, _handle(v)), v["token"]


def _cache_files(
    model_cache: Sequence[CacheFile] | None, data_cache: Sequence[CacheFile] | None
) -> dict[str, list[CacheFile]]:
    """The cache-file keyword arguments, only those given (an adapter without file caching
    does not take them).  Files cross as CacheFile (a path and an access): open descriptors
    cannot be pickled, and a path is what the host process can open itself."""
    out: dict[str, list[CacheFile]] = {}
    for name, files in (("model_cache", model_cache), ("data_cache", data_cache)):
        if files is None:
            continue
        files = list(files)
        if not all(isinstance(f, CacheFile) for f in files):
            raise DriverError(ErrorStatus.INVALID_ARGUMENT, f"{name}: every cache file must be a CacheFile")
        out[name] = files
    return out


# ``nnconform run`` starts a host before pytest, to give a driver that cannot load its one-line
# error before the report directory is touched.  That host, with the run's call bound and memory
# limit, is handed to the run's session in the same process instead of being closed and
# started again (0.3-0.4 s of a run).  What nobody claims is closed when the run ends.
_handed: list[IsolatedDevice] = []


def hand_over(device: IsolatedDevice) -> None:
    _handed.append(device)


def claim(driver_spec: str, call_timeout: float, mem_limit: int | None) -> IsolatedDevice | None:
    """The handed-over device for exactly these options, if its host is still alive."""
    while _handed:
        d = _handed.pop()
        h = d._current
        if (
            (d.driver_spec, d.call_timeout, d.mem_limit) == (driver_spec, float(call_timeout), mem_limit)
            and h is not None
            and h.death is None
        ):
            close_unclaimed()
            return d
        d.close()
    return None


def close_unclaimed() -> None:
    while _handed:
        _handed.pop().close()


def open_isolated(driver_spec: str, **options: Any) -> IsolatedDevice:
    """Start a host for ``driver_spec`` and return the proxy; raises DriverLoadError with the
    loader's one-line message when the driver cannot be loaded."""
    probe = IsolatedDevice(driver_spec, **options)
    ifaces = tuple(_DEV_IFACES[n] for n in sorted(probe.interfaces) if n in _DEV_IFACES)
    if ifaces:
        probe.__class__ = type("IsolatedDevice", (IsolatedDevice, *ifaces), {})
    return probe


__all__ = [
    "IsolatedDevice",
    "open_isolated",
    "hand_over",
    "claim",
    "close_unclaimed",
    "HostIncident",
    "HostCrash",
    "HostHang",
    "DriverProtocolError",
    "StaleHandle",
    "RemoteException",
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_MEM_LIMIT",
]
