"""The reference (sample) driver: the reference executor behind the driver interface.

It is the driver every suite must pass, and it is honest: an operation is reported supported
only when the executor implements it for the operation's data type.  It also implements every
optional interface (async, fenced and burst execution, compilation caching, memory domains) the
way AOSP's sample driver does, so those suites really run.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import threading
import time
import weakref
from typing import Sequence

import numpy as np

from nnconform import __version__
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
    DeviceType,
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
    support,
)
from nnconform.drivers import reference_cache as cache_files
from nnconform.errors import DeadlineMissed, NotImplementedOperation, OpFailure, ValidationError
from nnconform.ir import Model, Operand, OperandType, OperationType, Request
from nnconform.reference.executor import Executor
from nnconform.reference.ops.registry import REGISTRY, load_all

_CONTROL_FLOW = (OperationType.IF, OperationType.WHILE)


def operation_supported(model: Model, subgraph_index: int, op_index: int, _seen=None) -> bool:
    """True when the executor implements this operation for its data type.  IF/WHILE are
    supported only when every operation of every subgraph they reference is (IDevice 1.3)."""
    load_all()
    sg = model.main if subgraph_index < 0 else model.referenced[subgraph_index]
    op = sg.operations[op_index]
    try:
        opdef = REGISTRY[OperationType(op.type)]
    except (KeyError, ValueError):
        return False
    if op.type in _CONTROL_FLOW:
        seen = set() if _seen is None else _seen
        for i in op.inputs:
            operand = sg.operands[i]
            if operand.type == OperandType.SUBGRAPH and operand.value is not None:
                ref = int(operand.value)
                if ref in seen:
                    continue
                seen.add(ref)
                if not all(
                    operation_supported(model, ref, k, seen) for k in range(len(model.referenced[ref].operations))
                ):
                    return False
        return True
    if not op.inputs or opdef.primary_input >= len(op.inputs):
        return True
    return sg.operands[op.inputs[opdef.primary_input]].type in opdef.data_types


def _us_since(t0: int) -> int:
    return (time.perf_counter_ns() - t0) // 1000


def _combine_dims(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """Merge two dimension lists where 0 means unknown and () an unknown rank; None if they
    disagree."""
    if not a:
        return tuple(b)
    if not b:
        return tuple(a)
    if len(a) != len(b) or any(x and y and x != y for x, y in zip(a, b)):
        return None
    return tuple(x or y for x, y in zip(a, b))


class ReferenceBuffer(DeviceBuffer):
    """One driver-managed buffer: a numpy array once initialised, None before."""

    def __init__(self, operand: Operand, dims: tuple[int, ...], roles: frozenset):
        self.operand = operand  # type, scale, zero point, channel quant of every role
        self.dims = dims  # fully specified (allocate refuses anything else)
        self.roles = roles  # {(prepared model serial, "in"/"out", io index)}
        self._data: np.ndarray | None = None
        self._lock = threading.Lock()

    def _fit(self, array, where: str) -> np.ndarray:
        arr = np.asarray(array)
        dtype = self.operand.info.dtype
        assert dtype is not None  # a buffer holds a tensor or scalar, never a subgraph reference
        if arr.dtype != dtype and not np.can_cast(arr.dtype, dtype, casting="same_kind"):
            raise DriverError(
                ErrorStatus.INVALID_ARGUMENT, f"{where}: dtype {arr.dtype} cannot hold {self.operand.type.name}"
            )
        if tuple(arr.shape) != self.dims and not (self.operand.info.is_scalar and arr.size == 1):
            raise DriverError(
                ErrorStatus.INVALID_ARGUMENT,
                f"{where}: shape {list(arr.shape)} differs from the buffer's {list(self.dims)}",
            )
        out = np.array(arr, dtype=dtype).reshape(self.dims)
        out.setflags(write=False)
        return out

    def copy_from(self, array) -> None:
        data = self._fit(array, "copy_from")
        with self._lock:
            self._data = data

    def copy_to(self) -> np.ndarray:
        with self._lock:
            data = self._data
        if data is None:
            raise DriverError(ErrorStatus.GENERAL_FAILURE, "copy_to from an uninitialised buffer")
        return data.copy()

    # used by executions --------------------------------------------------------------
    def read(self) -> np.ndarray:
        with self._lock:
            data = self._data
        if data is None:
            raise DriverError(ErrorStatus.GENERAL_FAILURE, "an input buffer is not initialised")
        return data

    def write(self, array: np.ndarray) -> None:
        if tuple(array.shape) != self.dims:
            # an output whose real shape the buffer cannot hold (AOSP: GENERAL_FAILURE)
            raise DriverError(
                ErrorStatus.GENERAL_FAILURE,
                f"output of shape {list(array.shape)} does not fit the device buffer of shape {list(self.dims)}",
            )
        self.copy_from(array)


class _BufferTracker:
    """Tokens -> live buffers.  One tracker serves every reference device and prepared model of
    the process (drivers built on the reference create prepared models directly); a buffer is
    usable only by the prepared models its roles name, so sharing tokens leaks nothing.  A
    buffer the caller drops is freed and its token forgotten (weak values)."""

    def __init__(self):
        self._buffers: "weakref.WeakValueDictionary[int, ReferenceBuffer]" = weakref.WeakValueDictionary()
        self._tokens = itertools.count(1)
        self._lock = threading.Lock()

    def add(self, buf: ReferenceBuffer) -> int:
        with self._lock:
            token = next(self._tokens)
            self._buffers[token] = buf
        return token

    def get(self, token: int) -> ReferenceBuffer | None:
        with self._lock:
            return self._buffers.get(token)


_TRACKER = _BufferTracker()
_SERIALS = itertools.count(1)


class ReferencePreparedModel(PreparedModel, AsyncExecution, FencedExecution, BurstExecution):
    def __init__(self, model: Model):
        self.model = model
        self.serial = next(_SERIALS)  # names this prepared model in buffer roles
        self._buffers = _TRACKER
        self._released = False
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def new_executor(self) -> Executor:
        """One executor per execution, so concurrent executions share no scratch state."""
        return Executor(self.model)

    # ---- the one execution path every interface shares -------------------------------
    def _check(self, request: Request) -> None:
        if self._released:
            raise DriverError(ErrorStatus.GENERAL_FAILURE, "prepared model was released")
        support.check_request(self.model, request)

    def _device_memory(self, request: Request) -> tuple[dict[int, ReferenceBuffer], dict[int, ReferenceBuffer]]:
        """The buffers a request names, by input/output position, with the role rules checked."""
        found: list[dict[int, ReferenceBuffer]] = [{}, {}]
        for side, (kind, args) in enumerate((("in", request.inputs), ("out", request.outputs))):
            for pos, arg in enumerate(args):
                if arg.memory is None:
                    continue
                buf = self._buffers.get(int(arg.memory))
                if buf is None:
                    raise DriverError(ErrorStatus.INVALID_ARGUMENT, f"unknown device memory token {arg.memory}")
                if (self.serial, kind, pos) not in buf.roles:
                    raise DriverError(
                        ErrorStatus.INVALID_ARGUMENT,
                        f"device memory {arg.memory} was not allocated for {kind}put {pos} of this prepared model",
                    )
                if arg.dimensions and _combine_dims(tuple(arg.dimensions), buf.dims) != buf.dims:
                    raise DriverError(
                        ErrorStatus.INVALID_ARGUMENT,
                        f"{kind}put {pos}: dimensions {list(arg.dimensions)} disagree with "
                        f"device memory {arg.memory} ({list(buf.dims)})",
                    )
                found[side][pos] = buf
        ins, outs = found
        written = [id(b) for b in outs.values()]
        if len(set(written)) != len(written) or set(written) & {id(b) for b in ins.values()}:
            raise DriverError(
                ErrorStatus.INVALID_ARGUMENT, "one device memory is used as two outputs, or as an input and an output"
            )
        return ins, outs

    def _run(
        self, request: Request, deadline: float | None, loop_timeout: float | None
    ) -> tuple[tuple[np.ndarray, ...], tuple[OutputShape, ...], int]:
        """Execute a checked request: (outputs, output shapes, microseconds on the device)."""
        in_bufs, out_bufs = self._device_memory(request)
        if deadline is not None and time.monotonic() > deadline:
            raise DriverError(ErrorStatus.MISSED_DEADLINE_TRANSIENT, "deadline passed before execution")
        inputs = [
            None if a.has_no_value else in_bufs[i].read() if i in in_bufs else a.value
            for i, a in enumerate(request.inputs)
        ]
        t_device = time.perf_counter_ns()
        try:
            outputs = self.new_executor().run(inputs, deadline=deadline, loop_timeout=loop_timeout)
        except DeadlineMissed as e:
            raise DriverError(ErrorStatus.MISSED_DEADLINE_TRANSIENT, str(e)) from None
        except ValidationError as e:
            raise DriverError(ErrorStatus.INVALID_ARGUMENT, str(e)) from None
        except (OpFailure, NotImplementedOperation) as e:
            raise DriverError(ErrorStatus.GENERAL_FAILURE, str(e)) from None
        device_us = _us_since(t_device)
        shapes = support.output_shapes(request, outputs)
        outputs = list(outputs)
        for pos, buf in out_bufs.items():
            buf.write(outputs[pos])  # the buffer is initialised only by a successful execution
            outputs[pos] = np.empty((0,), outputs[pos].dtype)
        return tuple(outputs), tuple(shapes), device_us

    # ---- PreparedModel / AsyncExecution ------------------------------------------------
    def execute(
        self,
        request: Request,
        *,
        measure_timing: bool = False,
        deadline: float | None = None,
        loop_timeout: float | None = None,
    ) -> ExecutionResult:
        t_driver = time.perf_counter_ns()
        self._check(request)
        outputs, shapes, device_us = self._run(request, deadline, loop_timeout)
        return ExecutionResult(outputs, shapes, support.timing(measure_timing, device_us, t_driver))

    def execute_async(
        self,
        request: Request,
        *,
        measure_timing: bool = False,
        deadline: float | None = None,
        loop_timeout: float | None = None,
    ):
        with self._lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="nnref")
        return self._pool.submit(
            self.execute, request, measure_timing=measure_timing, deadline=deadline, loop_timeout=loop_timeout
        )

    # ---- FencedExecution ---------------------------------------------------------------
    def _fenced_output_problem(self, request: Request) -> str | None:
        """Fenced execution cannot report shapes: every output must be fully specified and
        its buffer large enough."""
        sg = self.model.main
        for pos, (arg, k) in enumerate(zip(request.outputs, sg.output_indexes)):
            operand = sg.operands[k]
            if operand.info.is_scalar:
                continue
            dims = _combine_dims(operand.dimensions, tuple(arg.dimensions or ()))
            if arg.memory is not None:
                buf = self._buffers.get(int(arg.memory))
                dims = _combine_dims(dims or (), buf.dims) if buf is not None else dims
            if not dims or 0 in dims:
                return f"output {pos} has unspecified dimensions {list(dims or ())}"
            dtype = operand.info.dtype
            assert dtype is not None  # an output is never a subgraph reference
            need = int(np.prod(dims)) * dtype.itemsize
            if arg.capacity is not None and arg.capacity < need:
                return f"output {pos} needs {need} bytes, its buffer has {arg.capacity}"
        return None

    def execute_fenced(
        self,
        request: Request,
        wait_for: Sequence[threading.Event],
        *,
        measure_timing: bool = False,
        deadline: float | None = None,
        loop_timeout: float | None = None,
        timeout_after_fence: float | None = None,
    ) -> FencedExecutionHandle:
        t_launch = time.perf_counter_ns()
        self._check(request)
        why = self._fenced_output_problem(request)
        if why:
            raise DriverError(ErrorStatus.INVALID_ARGUMENT, f"fenced execution: {why}")
        fences = list(wait_for)
        if any(f is None or not callable(getattr(f, "wait", None)) for f in fences):
            raise DriverError(ErrorStatus.INVALID_ARGUMENT, "a wait fence is None or not an event")
        if deadline is not None and time.monotonic() > deadline:
            raise DriverError(ErrorStatus.MISSED_DEADLINE_PERSISTENT, "deadline passed before the launch")
        handle = ReferenceFencedHandle()

        def run() -> None:
            try:
                for f in fences:
                    f.wait()
                t_fenced = time.perf_counter_ns()
                closest = deadline
                if timeout_after_fence is not None:
                    after = time.monotonic() + timeout_after_fence
                    closest = after if closest is None else min(closest, after)
                outputs, shapes, device_us = self._run(request, closest, loop_timeout)
            except DriverError as e:
                if e.status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE:  # fenced has no such status
                    e = DriverError(ErrorStatus.INVALID_ARGUMENT, f"fenced execution: {e}")
                handle.finish(None, e, FencedExecutionInfo(e.status))
                return
            except Exception as e:  # a harness-side bug must still release whoever waits
                err = DriverError(ErrorStatus.GENERAL_FAILURE, f"{type(e).__name__}: {e}")
                handle.finish(None, err, FencedExecutionInfo(err.status))
                return
            launched = fenced = Timing()
            if measure_timing:
                launched = Timing(device_us, max(device_us, _us_since(t_launch)))
                fenced = Timing(device_us, max(device_us, _us_since(t_fenced)))
            handle.finish(
                ExecutionResult(outputs, shapes, launched),
                None,
                FencedExecutionInfo(ErrorStatus.NONE, launched, fenced),
            )

        # its own thread: a fence that is signalled late must not hold a pooled worker
        threading.Thread(target=run, name="nnref-fenced", daemon=True).start()
        return handle

    # ---- BurstExecution ----------------------------------------------------------------
    def configure_burst(self) -> Burst:
        if self._released:
            raise DriverError(ErrorStatus.GENERAL_FAILURE, "prepared model was released")
        return ReferenceBurst(self)

    def release(self) -> None:
        self._released = True
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


class ReferenceFencedHandle(FencedExecutionHandle):
    """The sync fence and the fenced-execution callback of one fenced execution."""

    def __init__(self):
        self._done = threading.Event()
        self._result: ExecutionResult | None = None
        self._error: DriverError | None = None
        self._info = FencedExecutionInfo(ErrorStatus.GENERAL_FAILURE)

    def finish(self, result: ExecutionResult | None, error: DriverError | None, info: FencedExecutionInfo) -> None:
        self._result, self._error, self._info = result, error, info
        self._done.set()

    def wait(self, timeout: float | None = None) -> ExecutionResult:
        if not self._done.wait(timeout):
            raise TimeoutError(f"fenced execution not finished within {timeout} s")
        if self._error is not None:
            raise self._error
        assert self._result is not None  # finish() gives a result or an error
        return self._result

    def get_execution_info(self) -> FencedExecutionInfo:
        self._done.wait()
        return self._info


class ReferenceBurst(Burst, BurstMemory):
    """A burst over one prepared model.  The sample driver's burst caches memory mappings;
    there is nothing to map here, so it executes through the prepared model while open."""

    def __init__(self, prepared: ReferencePreparedModel):
        self._prepared = prepared
        self._open = True
        self._slots: dict[int, int] = {}  # slot -> device memory token
        self._next_slot = itertools.count()
        self._lock = threading.Lock()

    def _check_open(self) -> None:
        if not self._open:
            raise DriverError(ErrorStatus.GENERAL_FAILURE, "the burst was released")

    def execute(
        self,
        request: Request,
        *,
        measure_timing: bool = False,
        deadline: float | None = None,
        loop_timeout: float | None = None,
    ) -> ExecutionResult:
        self._check_open()
        return self._prepared.execute(
            request, measure_timing=measure_timing, deadline=deadline, loop_timeout=loop_timeout
        )

    # BurstMemory: a slot table checked on every use, so a stale slot is an error, not a crash
    def cache_memory(self, token: int) -> int:
        self._check_open()
        if not isinstance(token, (int, np.integer)) or _TRACKER.get(int(token)) is None:
            raise DriverError(ErrorStatus.INVALID_ARGUMENT, f"unknown device memory token {token!r:.40}")
        with self._lock:
            slot = next(self._next_slot)
            self._slots[slot] = int(token)
        return slot

    def free_memory(self, slot: int) -> None:
        self._check_open()
        with self._lock:
            if not isinstance(slot, (int, np.integer)) or self._slots.pop(int(slot), None) is None:
                raise DriverError(ErrorStatus.INVALID_ARGUMENT, f"burst memory slot {slot!r:.40} is not in use")

    def release(self) -> None:
        self._open = False
        with self._lock:
            self._slots.clear()


class ReferenceDevice(Device, CompilationCaching, MemoryDomains):
    name = "nnconform-reference"  # <vendor>-<device>, as NNAPI names devices
    version = __version__
    feature_level = 8  # every golden vector folder nnconform ships (levels 1 to 4, 6 and 7) is in scope

    def device_type(self) -> DeviceType:
        return DeviceType.CPU

    def __init__(self):
        self._cache: dict[bytes, Model] = {}

    def capabilities(self) -> Capabilities:
        perf = PerformanceInfo(1.0, 1.0)
        types = tuple(
            (t, perf)
            for t in OperandType
            if t not in (OperandType.SUBGRAPH, OperandType.OEM, OperandType.TENSOR_OEM_BYTE)
        )
        return Capabilities(perf, perf, types, perf, perf)

    def supported_operations(self, model: Model) -> list[bool]:
        support.check_model(model)
        return [operation_supported(model, -1, i) for i in range(len(model.main.operations))]

    def cache_file_counts(self) -> tuple[int, int]:
        return (cache_files.NUM_MODEL_CACHE, cache_files.NUM_DATA_CACHE)

    def prepare(
        self,
        model: Model,
        *,
        preference: ExecutionPreference = ExecutionPreference.FAST_SINGLE_ANSWER,
        priority: Priority = Priority.MEDIUM,
        deadline: float | None = None,
        cache_token: bytes | None = None,
        model_cache: Sequence[CacheFile] | None = None,
        data_cache: Sequence[CacheFile] | None = None,
    ) -> PreparedModel:
        support.check_prepare_args(model, preference, priority, deadline, cache_token)
        if cache_token is not None:
            if model_cache is None and data_cache is None:
                # token-only callers (older harness code, adapters' tests): an in-process cache
                self._cache[bytes(cache_token)] = model
            else:
                cache_files.save(model, bytes(cache_token), list(model_cache or ()), list(data_cache or ()))
        return ReferencePreparedModel(model)

    def prepare_from_cache(
        self,
        cache_token: bytes,
        *,
        model_cache: Sequence[CacheFile] | None = None,
        data_cache: Sequence[CacheFile] | None = None,
    ) -> PreparedModel:
        if model_cache is None and data_cache is None:
            model = self._cache.get(bytes(cache_token))
            if model is None:
                raise DriverError(ErrorStatus.GENERAL_FAILURE, "nothing cached under this token")
            return ReferencePreparedModel(model)
        model = cache_files.load(bytes(cache_token), list(model_cache or ()), list(data_cache or ()))
        try:
            support.check_model(model)
        except DriverError as e:  # authentic but not valid: not something we ever saved
            raise DriverError(ErrorStatus.GENERAL_FAILURE, f"cached model is invalid: {e}") from None
        return ReferencePreparedModel(model)

    def allocate(
        self,
        desc: BufferDesc,
        prepared_models: Sequence[PreparedModel],
        input_roles: Sequence[BufferRole],
        output_roles: Sequence[BufferRole],
    ) -> tuple[DeviceBuffer, int]:
        def bad(why: str) -> DriverError:
            return DriverError(ErrorStatus.INVALID_ARGUMENT, f"allocate: {why}")

        if not input_roles and not output_roles:
            raise bad("no roles")
        models: list[ReferencePreparedModel] = []
        for i, pm in enumerate(prepared_models):
            if not isinstance(pm, ReferencePreparedModel):
                raise bad(f"prepared_models[{i}] is not a prepared model of this driver")
            models.append(pm)
        roles: set[tuple[int, str, int]] = set()
        first: Operand | None = None
        dims: tuple[int, ...] = tuple(int(d) for d in desc.dimensions)
        for kind, group in (("in", input_roles), ("out", output_roles)):
            for r in group:
                if not 0 <= r.model_index < len(models):
                    raise bad(f"{kind}put role model_index {r.model_index} is out of range")
                pm = models[r.model_index]
                sg = pm.model.main
                indexes = sg.input_indexes if kind == "in" else sg.output_indexes
                if not 0 <= r.io_index < len(indexes):
                    raise bad(f"{kind}put role io_index {r.io_index}: the model has {len(indexes)} {kind}puts")
                if not 0.0 < r.frequency <= 1.0:
                    raise bad(f"role frequency {r.frequency} is not in (0, 1]")
                key = (pm.serial, kind, r.io_index)
                if key in roles:
                    raise bad(f"the role {kind}put {r.io_index} of model {r.model_index} is given twice")
                roles.add(key)
                operand = sg.operands[indexes[r.io_index]]
                if first is None:
                    first = operand
                elif (operand.type, operand.scale, operand.zero_point, operand.channel_quant) != (
                    first.type,
                    first.scale,
                    first.zero_point,
                    first.channel_quant,
                ):
                    raise bad("the roles differ in operand type or quantisation")
                if operand.info.is_scalar:
                    if desc.dimensions:
                        raise bad("a scalar role with dimensions in the description")
                    continue
                combined = _combine_dims(dims, operand.dimensions)
                if combined is None:
                    raise bad("the roles' (and the description's) dimensions do not combine")
                dims = combined
        assert first is not None
        if not first.info.is_scalar and (not dims or 0 in dims):
            # valid, but like the sample driver this one allocates only known sizes
            raise DriverError(ErrorStatus.GENERAL_FAILURE, f"allocate: dimensions {list(dims)} are not fully known")
        buf = ReferenceBuffer(first, () if first.info.is_scalar else dims, frozenset(roles))
        return buf, _TRACKER.add(buf)
