"""The driver host: the process a driver lives in during a conformance run.

Android runs every driver as its own HAL service process; nnconform does the same.  The harness
starts ``python -X faulthandler -m nnconform.isolation.host --driver X`` (see nnconform.isolation.proxy) as a
nnconform.isolation.childproc.Child: in its own session and process group, with ``RLIMIT_AS`` set, as the
harness's child subreaper descendant.  The host loads the driver once and then serves calls read
from a pipe: each call runs on a thread of its own, so concurrent executions stay concurrent,
and its answer (or the exception it raised, whatever its type, BaseException included) goes
back as JSON + raw bytes (nnconform.isolation.hostproto).  Objects the driver hands out (prepared models,
bursts, fenced handles, device buffers) stay here, named by an integer handle.

What the driver does to this process (crash, exit, patch nnconform, scribble on its copies of
the inputs) cannot reach the harness: the harness sees only what comes back through the pipe,
checks it, and treats a dead or silent host as a CRASH or HANG verdict.
"""

from __future__ import annotations

import concurrent.futures
import os
import queue
import sys
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from nnconform.isolation import childproc, pools, reaper
from nnconform.isolation import hostproto as wire
from nnconform.reference.ops.feature_levels import NEWEST_FEATURE_LEVEL

if TYPE_CHECKING:
    from nnconform.ir import Model, Request

# The harness spells interfaces by these names; the host reports which ones an object has.
_PM_INTERFACES = ("AsyncExecution", "FencedExecution", "BurstExecution")
_DEVICE_INTERFACES = ("CompilationCaching", "MemoryDomains")
# Objects the harness released, kept reachable so that a use after release still reaches the
# driver (whose error it is to give); the oldest go once there are more.  Only releases count:
# objects whose proxies the harness dropped can never be called again and go at once.
_RELEASED_KEEP = 16


def _exc_reply(e: BaseException) -> dict[str, Any]:
    from nnconform.driver import DriverError

    if isinstance(e, DriverError):
        text = str(e)
        prefix = f"{e.status.name}: "
        return {
            "kind": "driver_error",
            "status": int(e.status),
            "message": text[len(prefix) :] if text.startswith(prefix) else ("" if text == e.status.name else text),
            "output_shapes": [_shape(s) for s in getattr(e, "output_shapes", ())],
        }
    try:
        text = str(e)
    except BaseException as inner:  # a driver's exception whose __str__ itself raises
        text = f"<str() of the exception raised {type(inner).__name__}>"
    tb = traceback.extract_tb(e.__traceback__)
    # the innermost frame of the driver's own code when there is one (a MemoryError raised
    # inside numpy is the driver's allocation; fuzz buckets are keyed by where it came from)
    own = [f for f in tb if "/site-packages/numpy/" not in f.filename and "/lib/python3" not in f.filename] or tb
    where = f"{own[-1].filename}:{own[-1].lineno}" if own else ""
    if isinstance(e, MemoryError):
        limit = os.environ.get("NNCONFORM_HOST_MEM_LIMIT", "")
        text += f" (the driver host's memory limit is {limit})" if limit else ""
    return {
        "kind": "exception",
        "type": type(e).__name__[:80],
        "message": text[:2000],
        "where": where[:300],
        "base": not isinstance(e, Exception),
    }


def _shape(s: Any) -> dict[str, Any]:
    return {"dimensions": [int(d) for d in s.dimensions], "is_sufficient": bool(s.is_sufficient)}


def _timing(t: Any) -> list[int | None]:
    return [
        None if t.time_on_device is None else int(t.time_on_device),
        None if t.time_in_driver is None else int(t.time_in_driver),
    ]


class _Garbage(Exception):
    """The driver returned something that is not what the interface promises."""


class _InputWritten(Exception):
    """The driver tried to write a read-only input of the pool (numpy refused it)."""


def _result(
    result: object, bufs: list[bytes], regions: dict[int, tuple[np.ndarray, int]] | None = None
) -> dict[str, Any]:
    """The reply of an execution.  An output with a pool region (``regions``: index -> its
    view, its size) stays there: written in place by the driver, or copied in here."""
    from nnconform.driver import ExecutionResult

    if not isinstance(result, ExecutionResult):
        raise _Garbage(f"execute returned {type(result).__name__}, not an ExecutionResult")
    outs = result.outputs
    if not isinstance(outs, (list, tuple)) or not all(isinstance(a, np.ndarray) for a in outs):
        raise _Garbage(f"execute returned outputs of type {type(outs).__name__} (need a sequence of numpy arrays)")
    encoded = []
    for i, a in enumerate(outs):
        base = np.asarray(a)
        if base.dtype.str not in wire.ALLOWED_DTYPES:
            raise _Garbage(f"execute returned output {i} of dtype {base.dtype}, not a tensor storage type")
        if regions and i in regions:
            how = pools.place_output(base, *regions[i])
            if how:
                encoded.append({"pool": i, "dtype": base.dtype.str, "shape": [int(d) for d in base.shape], "how": how})
                continue
        encoded.append(wire.encode_array(base, bufs))
    try:
        shapes = [_shape(s) for s in result.output_shapes]
        timing = _timing(result.timing)
    except (AttributeError, TypeError, ValueError) as e:
        raise _Garbage(f"execute returned malformed output shapes or timing ({type(e).__name__})") from None
    return {"outputs": encoded, "output_shapes": shapes, "timing": timing}


class _Workers:
    """The threads that serve calls: a call goes to an idle thread, or to a new one while
    fewer than ``limit`` exist (a driver may block a call for good: a hang the harness is
    about to judge, or an execution waiting on a fence the next call signals).

    What concurrent.futures.ThreadPoolExecutor does, without a Future, a work item and a
    semaphore per call, which cost about as much as serving a small call: every call of
    every cell comes through here."""

    def __init__(self, limit: int, name: str) -> None:
        self.limit, self.name = limit, name
        self.queue: queue.SimpleQueue[tuple[Callable[..., None], tuple[Any, ...]]] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.threads = self.idle = 0

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        with self.lock:
            if self.idle:
                self.idle -= 1  # that thread's next get takes this call
                spawn = False
            else:
                spawn = self.threads < self.limit
                self.threads += spawn
        self.queue.put((fn, args))
        if spawn:
            threading.Thread(target=self._work, name=f"{self.name}-{self.threads}", daemon=True).start()

    def _work(self) -> None:
        while True:
            fn, args = self.queue.get()
            try:
                fn(*args)
            except BaseException:  # serve answers what the driver raises; this is a host bug
                traceback.print_exc()  # (to the host's stderr file, which the harness reads on a crash)
            with self.lock:
                self.idle += 1


class Host:
    # ``device`` and everything it hands out are the driver's objects, untrusted: what they
    # answer is checked here, so they are typed Any
    def __init__(self, device: Any, res_fd: int) -> None:
        self.device = device
        self.res_fd = res_fd
        self.write_lock = threading.Lock()
        self.objects: dict[int, Any] = {0: device}
        self.released: list[int] = []
        self.fences: dict[int, threading.Event] = {}
        self.next_id = 1
        self.lock = threading.Lock()
        self.pool = _Workers(64, "nnconform-host-call")
        # handle -> (the arrays of its last result, their bytes then): the aliasing watch
        self.held: dict[int, tuple[list[np.ndarray], list[bytes]]] = {}
        self.maps = pools.HostMaps()  # the harness's request pools, mapped here
        # fenced handle -> (its output regions, the request the driver was given) until waited
        self.fenced_regions: dict[int, tuple[dict[int, tuple[np.ndarray, int]], Any]] = {}

    # -- plumbing -------------------------------------------------------------------------
    def send(self, header: dict[str, Any], bufs: Sequence[bytes] = ()) -> None:
        with self.write_lock:
            wire.write_frame(self.res_fd, header, list(bufs))

    def keep(self, obj: Any) -> int:
        with self.lock:
            k = self.next_id
            self.next_id += 1
            self.objects[k] = obj
        return k

    def get(self, k: int) -> Any:
        obj = self.objects.get(k)
        if obj is None:
            raise LookupError(f"handle {k} is unknown to the driver host (dropped or never made)")
        return obj

    def forget(self, k: int) -> None:
        """The harness dropped its proxy of ``k``: nothing can call it again."""
        with self.lock:
            self.held.pop(k, None)
            if k != 0 and self.objects.pop(k, None) is not None and k in self.released:
                self.released.remove(k)

    def retire(self, k: int) -> None:
        """``k`` was released: keep it reachable for a use after release, among the last few."""
        with self.lock:
            self.held.pop(k, None)
            if k in self.objects and k != 0 and k not in self.released:
                self.released.append(k)
                while len(self.released) > _RELEASED_KEEP:
                    self.objects.pop(self.released.pop(0), None)

    # -- calls --------------------------------------------------------------------------
    def serve(self, call_id: int, op: str, args: dict[str, Any]) -> None:
        bufs: list[bytes] = []
        for k in args.pop("_drop", ()):  # objects the harness no longer references
            self.forget(k)
        self.maps.forget(args.pop("_unmap", ()))  # pool segments the harness has removed
        try:
            value = getattr(self, "op_" + op)(bufs=bufs, **args)
            header: dict[str, Any] = {"id": call_id, "ok": value}
        except _Garbage as e:
            header, bufs = {"id": call_id, "err": {"kind": "garbage", "message": str(e)}}, []
        except _InputWritten as e:
            header, bufs = {"id": call_id, "err": {"kind": "input_written", "message": str(e)}}, []
        except BaseException as e:  # everything a driver raises is that call's answer
            header, bufs = {"id": call_id, "err": _exc_reply(e)}, []
        if call_id == 0:
            return  # a notice: nobody waits for an answer
        if self.dirty():
            header["dirty"] = True
        try:
            self.send(header, bufs)
        except (TypeError, ValueError) as e:  # a value that JSON cannot carry: the driver's garbage
            self.send(
                {
                    "id": call_id,
                    "err": {"kind": "garbage", "message": f"{op} returned an unencodable value ({e})"[:300]},
                }
            )

    def dirty(self) -> bool:
        """Has the driver left a child process behind (alive or not yet reaped; as a
        subreaper, orphans of double forks are our children too)?  One waitid, cheap enough
        to ask on every reply; only then does the harness pay for the /proc walk of
        ``end_case``.  (/dev/shm is not judged here: its entries carry no creator, and other
        processes of the machine create them too; the stress sandbox watches it per case.)"""
        try:
            os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            return True
        except ChildProcessError:
            return False  # ECHILD: no children at all

    def op_capabilities(self, bufs: list[bytes]) -> dict[str, Any]:
        c = self.device.capabilities()

        def perf(p: Any) -> list[float]:
            return [float(p.exec_time), float(p.power_usage)]

        return {
            "relaxed_scalar": perf(c.relaxed_float32_to_float16_scalar),
            "relaxed_tensor": perf(c.relaxed_float32_to_float16_tensor),
            "operand_performance": [[int(t), perf(p)] for t, p in c.operand_performance],
            "if": perf(c.if_performance),
            "while": perf(c.while_performance),
        }

    def op_supported(self, bufs: list[bytes], model: Model) -> Any:
        got = self.device.supported_operations(model)
        if isinstance(got, (list, tuple)) and all(isinstance(s, (bool, np.bool_)) for s in got):
            return [bool(s) for s in got]
        return {"not_bools": repr(got)[:120]}

    def _prepared(self, pm: Any) -> dict[str, Any]:
        from nnconform import driver as d

        return {
            "handle": self.keep(pm),
            "type": type(pm).__name__[:80],
            "ifaces": [n for n in _PM_INTERFACES if isinstance(pm, getattr(d, n))],
            "is_prepared_model": isinstance(pm, d.PreparedModel),
        }

    def op_prepare(self, bufs: list[bytes], model: Model, kwargs: dict[str, Any]) -> dict[str, Any]:
        return self._prepared(self.device.prepare(model, **kwargs))

    def op_reject_many(self, bufs: list[bytes], checks: Any, budget: float) -> list[Any]:
        """The model-mutation check (nnconform.vts.checks.not_rejected) for many invalid
        models in one round trip: each ``(model, query_support, preference, priority)`` is
        given to supported_operations (when asked) and then prepare, stopping at the first
        answer that is not INVALID_ARGUMENT, exactly the calls the one-at-a-time check makes.
        A prepared model the driver should not have made is released here.  Stops after
        ``budget`` seconds (at least one model done), so one reply never waits on many slow
        models; the harness sends the rest again.  Per model: a list of step answers, each
        ``[what, {"accepted": true}]`` or ``[what, {"err": ...}]``."""
        from nnconform import driver as d

        out: list[list[list[Any]]] = []
        t0 = time.monotonic()
        for model, query_support, preference, priority in checks:
            steps: list[list[Any]] = []
            calls: list[tuple[str, Callable[[], Any]]] = (
                [("supported_operations", lambda: self.device.supported_operations(model))] if query_support else []
            )
            calls.append(("prepare", lambda: self.device.prepare(model, preference=preference, priority=priority)))
            for what, fn in calls:
                try:
                    got = fn()
                except BaseException as e:  # the driver's answer, whatever it raised
                    if isinstance(e, d.DriverError) and e.status == d.ErrorStatus.INVALID_ARGUMENT:
                        # the answer the check wants: its message is never read, so it does not
                        # travel (a mutation cell has ~13 models, two answers each, ~136 for
                        # operation_operand_type)
                        steps.append([what, {"rejected": True}])
                        continue
                    steps.append([what, {"err": _exc_reply(e)}])
                    break
                if what == "prepare":
                    if not isinstance(got, d.PreparedModel):
                        steps.append(
                            [
                                what,
                                {
                                    "err": {
                                        "kind": "garbage",
                                        "message": f"prepare returned {type(got).__name__[:80]}, not a PreparedModel",
                                    }
                                },
                            ]
                        )
                        break
                    release_failed = False
                    try:
                        got.release()
                    except BaseException:
                        release_failed = True
                    steps.append([what, {"accepted": True, "release_failed": release_failed}])
                    break
                steps.append([what, {"accepted": True}])
                break
            out.append(steps)
            if time.monotonic() - t0 > budget:
                break
        return out

    def op_prepare_from_cache(
        self, bufs: list[bytes], token: Any, kwargs: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        return self._prepared(self.device.prepare_from_cache(token, **(kwargs or {})))

    def op_device_info(self, bufs: list[bytes]) -> dict[str, Any]:
        """getStatus, getType, getSupportedExtensions in one call; values checked harness-side."""

        def plain(v: Any, limit: int = 64) -> str | int:
            if isinstance(v, bool) or not isinstance(v, (int, str)):
                return repr(v)[:limit]
            return int(v) if isinstance(v, int) else v[:limit]

        ext = self.device.supported_extensions()
        return {
            "status": plain(self.device.status()),
            "type": plain(self.device.device_type()),
            "extensions": [plain(x, 200) for x in ext] if isinstance(ext, (list, tuple)) else repr(ext)[:200],
        }

    def op_cache_file_counts(self, bufs: list[bytes]) -> Any:
        got = self.device.cache_file_counts()
        if isinstance(got, (list, tuple)) and len(got) == 2 and all(type(n) is int for n in got):
            return [int(n) for n in got]
        return {"malformed": repr(got)[:120]}

    def _watch(self, handle: int, result: Any, reply: dict[str, Any], given: Request | None = None) -> dict[str, Any]:
        """The aliasing watch.  Replies are decoded into fresh arrays on the harness side, so a
        driver that hands out its output arrays and overwrites them on the next execution
        harms no harness reference; here, in the driver's own process, that is visible: the
        arrays of this handle's previous result no longer hold what they held when returned.
        The indices of those outputs ride along with the reply as ``aliased``."""
        # An output written in place is the pool's, which the harness refills for the next call;
        # so is an output the driver returned as a view of a pooled input (a whole-tensor SLICE,
        # a reshape): its values were copied out at once, and the next request's inputs
        # overwrite that region by design, not because the driver reuses its arrays.
        pooled_inputs = [
            a.value for a in (given.inputs if given is not None else ()) if isinstance(a.value, np.ndarray)
        ]
        placed = [
            (isinstance(r, dict) and r.get("how") == "inplace")
            or (isinstance(a, np.ndarray) and any(np.may_share_memory(a, v) for v in pooled_inputs))
            for a, r in zip(result.outputs, reply["outputs"])
        ]
        outs = [np.zeros(0) if p else np.asarray(a) for a, p in zip(result.outputs, placed)]
        with self.lock:
            before = self.held.get(handle)
            self.held[handle] = (outs, [a.tobytes() for a in outs])
        if before is not None:
            changed = [i for i, (a, snap) in enumerate(zip(*before)) if a.tobytes() != snap]
            if changed:
                reply["aliased"] = changed
        return reply

    def _pooled(
        self, fn: Callable[..., Any], request: Request, kwargs: dict[str, Any], pool: dict[str, Any] | None
    ) -> tuple[Any, dict[int, tuple[np.ndarray, int]] | None, Request]:
        """Call ``fn(request)`` with the request's pooled operands as views into the pool;
        returns its answer, the output regions (view, size) and the request it was given."""
        if pool is None:
            return fn(request, **kwargs), None, request
        req, regions = self.maps.request(request, pool)
        try:
            return fn(req, **kwargs), regions, req
        except ValueError as e:
            if "read-only" not in str(e):
                raise
            raise _InputWritten(pools.read_only_message(e, req)) from None

    def op_execute(
        self,
        bufs: list[bytes],
        handle: int,
        request: Request,
        kwargs: dict[str, Any],
        pool: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        result, regions, given = self._pooled(self.get(handle).execute, request, kwargs, pool)
        return self._watch(handle, result, _result(result, bufs, regions), given if regions is not None else None)

    def op_execute_async(
        self,
        bufs: list[bytes],
        handle: int,
        request: Request,
        kwargs: dict[str, Any],
        pool: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        def run(req: Request, **kw: Any) -> Any:
            fut = self.get(handle).execute_async(req, **kw)
            if not isinstance(fut, concurrent.futures.Future):
                raise _Garbage(f"execute_async returned {type(fut).__name__}, not a concurrent.futures.Future")
            return fut.result()

        result, regions, _ = self._pooled(run, request, kwargs, pool)
        return _result(result, bufs, regions)

    def op_release(self, bufs: list[bytes], handle: int) -> None:
        try:
            self.get(handle).release()
        finally:
            self.retire(handle)

    def _fence(self, fence: int) -> threading.Event:
        """The twin of the harness's fence ``fence``: set when the harness signals it."""
        with self.lock:
            return self.fences.setdefault(fence, threading.Event())

    def op_execute_fenced(
        self,
        bufs: list[bytes],
        handle: int,
        request: Request,
        fences: list[int | None],
        kwargs: dict[str, Any],
        pool: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        events = [None if f is None else self._fence(f) for f in fences]
        h, regions, given = self._pooled(
            lambda req, **kw: self.get(handle).execute_fenced(req, events, **kw), request, kwargs, pool
        )
        k = self.keep(h)
        if regions is not None:
            with self.lock:
                self.fenced_regions[k] = (regions, given)
        return {"handle": k}

    def signal_fence(self, fence: int) -> None:
        self._fence(fence).set()

    def op_fenced_wait(self, bufs: list[bytes], handle: int, timeout: Any) -> dict[str, Any]:
        # the pool regions of a fenced execution serve its first wait only: the harness then
        # gives the segment to other executions
        with self.lock:
            regions, req = self.fenced_regions.pop(handle, (None, None))
        try:
            result = self.get(handle).wait(timeout)
        except ValueError as e:
            if req is None or "read-only" not in str(e):
                raise
            raise _InputWritten(pools.read_only_message(e, req)) from None
        return _result(result, bufs, regions)

    def op_fenced_info(self, bufs: list[bytes], handle: int) -> dict[str, Any]:
        info = self.get(handle).get_execution_info()
        return {
            "status": int(info.status),
            "launched": _timing(info.timing_launched),
            "fenced": _timing(info.timing_fenced),
        }

    def op_configure_burst(self, bufs: list[bytes], handle: int) -> dict[str, Any]:
        from nnconform.driver import BurstMemory

        burst = self.get(handle).configure_burst()
        return {"handle": self.keep(burst), "ifaces": ["BurstMemory"] if isinstance(burst, BurstMemory) else []}

    def op_burst_cache_memory(self, bufs: list[bytes], handle: int, token: Any) -> Any:
        slot = self.get(handle).cache_memory(token)
        return int(slot) if isinstance(slot, int) and not isinstance(slot, bool) else repr(slot)[:80]

    def op_burst_free_memory(self, bufs: list[bytes], handle: int, slot: Any) -> None:
        self.get(handle).free_memory(slot)

    def op_burst_execute(
        self,
        bufs: list[bytes],
        handle: int,
        request: Request,
        kwargs: dict[str, Any],
        pool: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        result, regions, given = self._pooled(self.get(handle).execute, request, kwargs, pool)
        return self._watch(handle, result, _result(result, bufs, regions), given if regions is not None else None)

    def op_allocate(
        self, bufs: list[bytes], desc: Any, models: list[int], input_roles: Any, output_roles: Any
    ) -> dict[str, Any]:
        buf, token = self.device.allocate(desc, [self.get(m) for m in models], input_roles, output_roles)
        return {"handle": self.keep(buf), "token": int(token)}

    def op_copy_from(self, bufs: list[bytes], handle: int, array: Any) -> None:
        self.get(handle).copy_from(array)

    def op_copy_to(self, bufs: list[bytes], handle: int) -> dict[str, Any]:
        got = self.get(handle).copy_to()
        if not isinstance(got, np.ndarray) or np.asarray(got).dtype.str not in wire.ALLOWED_DTYPES:
            raise _Garbage(f"copy_to returned {type(got).__name__}, not a tensor array")
        return wire.encode_array(got, bufs)

    def op_drop(self, bufs: list[bytes], handles: list[int]) -> None:
        for k in handles:
            self.forget(k)

    def op_end_case(self, bufs: list[bytes]) -> dict[str, Any]:
        """The processes the driver left running since the last case, killed now whatever
        session or process group they moved to."""
        return {"processes": reaper.kill_descendants(os.getpid())[:20]}


def main(argv: list[str]) -> int:
    t0 = time.perf_counter()
    a = childproc.child_start("nnconform.isolation.host", argv, "--driver")
    if a.mem_limit > 0:
        # named in a MemoryError's reply (_exc_reply)
        os.environ["NNCONFORM_HOST_MEM_LIMIT"] = f"{a.mem_limit / 2**30:g} GiB RLIMIT_AS"
    reader = wire.FrameReader(a.req_fd)

    from nnconform import driver as d
    from nnconform.driver.loader import load_driver
    from nnconform.errors import NnError

    try:
        device = load_driver(a.driver)
    except NnError as e:
        wire.write_frame(a.res_fd, {"error": str(e)[:2000]})
        return 3
    except BaseException as e:  # a driver whose import itself blows up (SystemExit included)
        wire.write_frame(a.res_fd, {"error": f"driver '{a.driver}' failed to load: {type(e).__name__}: {str(e)[:500]}"})
        return 3
    host = Host(device, a.res_fd)

    def info(name: str, default: Any, kind: type) -> Any:
        v = getattr(device, name, default)
        return v if isinstance(v, kind) else default

    host.send(
        {
            "ready": True,
            "pid": os.getpid(),
            "startup_s": time.perf_counter() - t0,
            "name": str(info("name", "unnamed", str))[:100],
            "version": str(info("version", "0", str))[:100],
            "feature_level": int(info("feature_level", NEWEST_FEATURE_LEVEL, int)),
            "ifaces": [n for n in _DEVICE_INTERFACES if isinstance(device, getattr(d, n))],
        }
    )
    for call_id, op, args in reader.calls():
        if op == "quit":
            break
        if op == "signal_fence":  # fire and forget: must not wait behind a busy pool
            host.signal_fence(args["fence"])
            continue
        host.pool.submit(host.serve, call_id, op, args)
    reaper.kill_descendants(os.getpid())
    os._exit(0)  # a driver's non-daemon threads must not keep a finished host alive


if __name__ == "__main__":
    # Run the importable module's copy, so the driver and this loop share one nnconform.
    from nnconform.isolation.host import main as _main

    sys.exit(_main(sys.argv[1:]))
