"""The reference (sample) driver: the reference executor behind the driver interface.

It is the driver every suite must pass, and it is honest: an operation is reported supported
only when the executor implements it for the operation's data type.  It also implements the
optional async-execution and compilation-caching interfaces so those suites really run.
"""
from __future__ import annotations

import concurrent.futures
import threading
import time


from nnconform import __version__
from nnconform.driver import (AsyncExecution, Capabilities, CompilationCaching, Device, DriverError,
                              ErrorStatus, ExecutionPreference, ExecutionResult, OutputShape,
                              PerformanceInfo, PreparedModel, Priority, Timing)
from nnconform.errors import DeadlineMissed, NotImplementedOperation, OpFailure, ValidationError
from nnconform.executor import Executor
from nnconform.ir import Model, OperandType, OperationType, Request
from nnconform.ops.registry import REGISTRY, load_all
from nnconform.validation import validate_model, validate_request

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
                if not all(operation_supported(model, ref, k, seen)
                           for k in range(len(model.referenced[ref].operations))):
                    return False
        return True
    if not op.inputs or opdef.primary_input >= len(op.inputs):
        return True
    return sg.operands[op.inputs[opdef.primary_input]].type in opdef.data_types


class ReferencePreparedModel(PreparedModel, AsyncExecution):
    def __init__(self, model: Model):
        self.model = model
        self._released = False
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def new_executor(self) -> Executor:
        """One executor per execution, so concurrent executions share no scratch state."""
        return Executor(self.model)

    def execute(self, request: Request, *, measure_timing: bool = False, deadline: float | None = None,
                loop_timeout: float | None = None) -> ExecutionResult:
        t_driver = time.perf_counter_ns()
        if self._released:
            raise DriverError(ErrorStatus.GENERAL_FAILURE, "prepared model was released")
        try:
            validate_request(self.model, request)
        except ValidationError as e:
            raise DriverError(ErrorStatus.INVALID_ARGUMENT, str(e)) from None
        if deadline is not None and time.monotonic() > deadline:
            raise DriverError(ErrorStatus.MISSED_DEADLINE_TRANSIENT, "deadline passed before execution")
        inputs = [None if a.has_no_value else a.value for a in request.inputs]
        t_device = time.perf_counter_ns()
        try:
            outputs = self.new_executor().run(inputs, deadline=deadline, loop_timeout=loop_timeout)
        except DeadlineMissed as e:
            raise DriverError(ErrorStatus.MISSED_DEADLINE_TRANSIENT, str(e)) from None
        except ValidationError as e:
            raise DriverError(ErrorStatus.INVALID_ARGUMENT, str(e)) from None
        except (OpFailure, NotImplementedOperation) as e:
            raise DriverError(ErrorStatus.GENERAL_FAILURE, str(e)) from None
        device_us = (time.perf_counter_ns() - t_device) // 1000
        shapes = []
        insufficient = False
        for arg, out in zip(request.outputs, outputs):
            ok = arg.capacity is None or out.nbytes <= arg.capacity
            insufficient |= not ok
            shapes.append(OutputShape(tuple(int(d) for d in out.shape), ok))
        if insufficient:
            raise DriverError(ErrorStatus.OUTPUT_INSUFFICIENT_SIZE, "an output buffer is too small", shapes)
        timing = Timing()
        if measure_timing:
            timing = Timing(device_us, max(device_us, (time.perf_counter_ns() - t_driver) // 1000))
        return ExecutionResult(tuple(outputs), tuple(shapes), timing)

    def execute_async(self, request: Request, *, measure_timing: bool = False, deadline: float | None = None,
                      loop_timeout: float | None = None):
        with self._lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="nnref")
        return self._pool.submit(self.execute, request, measure_timing=measure_timing, deadline=deadline,
                                 loop_timeout=loop_timeout)

    def release(self) -> None:
        self._released = True
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


class ReferenceDevice(Device, CompilationCaching):
    name = "reference"
    version = __version__
    feature_level = 30

    def __init__(self):
        self._cache: dict[bytes, Model] = {}

    def capabilities(self) -> Capabilities:
        perf = PerformanceInfo(1.0, 1.0)
        types = tuple((t, perf) for t in OperandType if t not in (OperandType.SUBGRAPH, OperandType.OEM,
                                                                  OperandType.TENSOR_OEM_BYTE))
        return Capabilities(perf, perf, types, perf, perf)

    def supported_operations(self, model: Model) -> list[bool]:
        try:
            validate_model(model)
        except ValidationError as e:
            raise DriverError(ErrorStatus.INVALID_ARGUMENT, str(e)) from None
        return [operation_supported(model, -1, i) for i in range(len(model.main.operations))]

    def prepare(self, model: Model, *, preference: ExecutionPreference = ExecutionPreference.FAST_SINGLE_ANSWER,
                priority: Priority = Priority.MEDIUM, deadline: float | None = None,
                cache_token: bytes | None = None) -> PreparedModel:
        if int(preference) not in {int(p) for p in ExecutionPreference}:
            raise DriverError(ErrorStatus.INVALID_ARGUMENT, f"bad execution preference {preference}")
        if int(priority) not in {int(p) for p in Priority}:
            raise DriverError(ErrorStatus.INVALID_ARGUMENT, f"bad priority {priority}")
        if cache_token is not None and len(cache_token) != 32:
            raise DriverError(ErrorStatus.INVALID_ARGUMENT, "cache token must be 32 bytes")
        try:
            validate_model(model)
        except ValidationError as e:
            raise DriverError(ErrorStatus.INVALID_ARGUMENT, str(e)) from None
        if deadline is not None and time.monotonic() > deadline:
            raise DriverError(ErrorStatus.MISSED_DEADLINE_PERSISTENT, "deadline passed before preparation")
        if cache_token is not None:
            self._cache[bytes(cache_token)] = model
        return ReferencePreparedModel(model)

    def prepare_from_cache(self, cache_token: bytes) -> PreparedModel:
        model = self._cache.get(bytes(cache_token))
        if model is None:
            raise DriverError(ErrorStatus.GENERAL_FAILURE, "nothing cached under this token")
        return ReferencePreparedModel(model)
