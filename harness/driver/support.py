"""Helpers for driver adapters: the checks every NNAPI driver must make, in one place.

An adapter (the reference driver, onnxruntime, TFLite, or yours) calls these so that invalid
models, bad prepare arguments, invalid requests and undersized output buffers are answered
with the ErrorStatus NNAPI prescribes, the same way in every driver:

    check_model(model)                          -> INVALID_ARGUMENT
    check_prepare_args(model, preference, priority, deadline, cache_token)
                                                -> INVALID_ARGUMENT / MISSED_DEADLINE_PERSISTENT
    check_request(model, request)               -> INVALID_ARGUMENT
    output_shapes(request, outputs)             -> OUTPUT_INSUFFICIENT_SIZE (with the shapes)
    timing(measure, device_us, t_driver_ns)     -> Timing (None fields unless measured)

and, for adapters to runtimes, the parts of device.py that are the same for every runtime:
begin_execution / request_values (the start of execute()), converting (conversion errors as
GENERAL_FAILURE), uniform_capabilities, first_line, and the ConverterDevice mixin
(supported_operations / unsupported_reasons from the converter's operation_supported).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from types import ModuleType
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence, cast

import numpy as np

from nnconform.driver import (
    Capabilities,
    DriverError,
    ErrorStatus,
    ExecutionPreference,
    OutputShape,
    PerformanceInfo,
    Priority,
    Timing,
)
from nnconform.errors import ValidationError
from nnconform.ir import Lifetime, Model, Operand, OperandType, Request
from nnconform.ir.validation import validate_model, validate_request

if TYPE_CHECKING:
    from nnconform.driver import ExecutionResult

_PREFERENCES = {int(p) for p in ExecutionPreference}
_PRIORITIES = {int(p) for p in Priority}


def check_model(model: Model) -> None:
    try:
        validate_model(model)
    except ValidationError as e:
        raise DriverError(ErrorStatus.INVALID_ARGUMENT, str(e)) from None


def check_prepare_args(
    model: Model,
    preference: ExecutionPreference | int,
    priority: Priority | int,
    deadline: float | None,
    cache_token: bytes | None,
) -> None:
    """prepareModel's argument rules: a valid preference and priority, a 32-byte cache token,
    a valid model, and a deadline not already passed."""
    if int(preference) not in _PREFERENCES:
        raise DriverError(ErrorStatus.INVALID_ARGUMENT, f"bad execution preference {preference}")
    if int(priority) not in _PRIORITIES:
        raise DriverError(ErrorStatus.INVALID_ARGUMENT, f"bad priority {priority}")
    if cache_token is not None and len(cache_token) != 32:
        raise DriverError(ErrorStatus.INVALID_ARGUMENT, "cache token must be 32 bytes")
    check_model(model)
    if deadline is not None and time.monotonic() > deadline:
        raise DriverError(ErrorStatus.MISSED_DEADLINE_PERSISTENT, "deadline passed before preparation")


def check_request(model: Model, request: Request) -> None:
    try:
        validate_request(model, request)
    except ValidationError as e:
        raise DriverError(ErrorStatus.INVALID_ARGUMENT, str(e)) from None


def as_output_dtypes(model: Model, outputs: Sequence[Any]) -> list[np.ndarray]:
    """A runtime's raw outputs in each output operand's storage dtype (scalars as 0-d)."""
    results = []
    for idx, out in zip(model.main.output_indexes, outputs):
        operand = model.main.operands[idx]
        arr = np.asarray(out).astype(operand.info.dtype, copy=False)
        results.append(arr.reshape(()) if operand.info.is_scalar else arr)
    return results


def output_shapes(request: Request, outputs: Sequence[np.ndarray]) -> tuple[OutputShape, ...]:
    """One OutputShape per output; raises OUTPUT_INSUFFICIENT_SIZE (carrying the shapes, with
    is_sufficient false where the caller's buffer is too small) as NNAPI prescribes."""
    shapes, insufficient = [], False
    for arg, out in zip(request.outputs, outputs):
        ok = arg.capacity is None or out.nbytes <= arg.capacity
        insufficient |= not ok
        shapes.append(OutputShape(tuple(int(d) for d in out.shape), ok))
    if insufficient:
        raise DriverError(ErrorStatus.OUTPUT_INSUFFICIENT_SIZE, "an output buffer is too small", shapes)
    return tuple(shapes)


def us_since(t_ns: int) -> int:
    return (time.perf_counter_ns() - t_ns) // 1000


def timing(measure: bool, device_us: int, t_driver_ns: int) -> Timing:
    """Timing is reported only when asked for; time on device never exceeds time in driver."""
    if not measure:
        return Timing()
    return Timing(device_us, max(device_us, us_since(t_driver_ns)))


def finish_execution(
    model: Model,
    request: Request,
    outputs: Sequence[Any],
    *,
    deadline: float | None,
    measure_timing: bool,
    device_us: int,
    t_driver_ns: int,
) -> ExecutionResult:
    """What an adapter does after its runtime returned: a result that arrived after the
    deadline is MISSED_DEADLINE_TRANSIENT; otherwise outputs in storage dtypes, their shapes
    (OUTPUT_INSUFFICIENT_SIZE for small buffers) and timing."""
    from nnconform.driver import ExecutionResult

    if deadline is not None and time.monotonic() > deadline:
        raise DriverError(ErrorStatus.MISSED_DEADLINE_TRANSIENT, "execution finished after the deadline")
    results = as_output_dtypes(model, outputs)
    shapes = output_shapes(request, results)
    return ExecutionResult(tuple(results), shapes, timing(measure_timing, device_us, t_driver_ns))


# ---------------------------------------------------------------------------------------
# Runtime adapters' device boilerplate
# ---------------------------------------------------------------------------------------


def first_line(e: BaseException, limit: int | None = None) -> str:
    """A runtime exception's first non-blank message line (C++ runtimes append pages of
    context), at most ``limit`` characters; the exception type when the message is empty."""
    text = [line for line in str(e).strip().splitlines() if line.strip()]
    return text[0][:limit] if text else type(e).__name__


def begin_execution(model: Model, request: Request, deadline: float | None, released: bool) -> None:
    """What every execute() checks before it touches the runtime: the prepared model is not
    released (GENERAL_FAILURE), the request is valid (INVALID_ARGUMENT), the deadline has not
    passed already (MISSED_DEADLINE_TRANSIENT)."""
    if released:
        raise DriverError(ErrorStatus.GENERAL_FAILURE, "prepared model was released")
    check_request(model, request)
    if deadline is not None and time.monotonic() > deadline:
        raise DriverError(ErrorStatus.MISSED_DEADLINE_TRANSIENT, "deadline passed before execution")


def request_values(
    model: Model, request: Request, runtime: str, *, copy: bool = False, omitted: bool = False
) -> list[np.ndarray | None]:
    """The request's input values in each input operand's storage dtype and in the request's
    dimensions (which may specify what the model leaves unknown).  An input the request leaves
    without a value is None when the adapter handles ``omitted`` inputs (by converting the
    model with those operands omitted); otherwise no runtime graph could take it:
    INVALID_ARGUMENT.  ``copy``: private writable arrays (for runtimes that wrap the memory
    instead of copying it)."""
    values: list[np.ndarray | None] = []
    for idx, arg in zip(model.main.input_indexes, request.inputs):
        if arg.has_no_value:
            if omitted:
                values.append(None)
                continue
            raise DriverError(ErrorStatus.INVALID_ARGUMENT, f"an omitted model input cannot be fed to {runtime}")
        operand = model.main.operands[idx]
        value = (np.array if copy else np.asarray)(arg.value, dtype=operand.info.dtype)
        if arg.dimensions is not None and tuple(value.shape) != tuple(arg.dimensions):
            value = value.reshape(arg.dimensions)
        values.append(value)
    return values


def with_omitted_inputs(model: Model, positions: tuple[int, ...]) -> Model:
    """``model`` with the main-graph inputs at ``positions`` turned into omitted (NO_VALUE)
    operands and dropped from the input list: what an execution that gives them no value
    computes (NNAPI's omitted optional inputs), for runtimes whose converted graph depends on
    which optional inputs are present."""
    main = model.main
    gone = {main.input_indexes[k] for k in positions}
    operands = tuple(
        dataclasses.replace(o, lifetime=Lifetime.NO_VALUE) if i in gone else o for i, o in enumerate(main.operands)
    )
    inputs = tuple(i for i in main.input_indexes if i not in gone)
    return dataclasses.replace(model, main=dataclasses.replace(main, operands=operands, input_indexes=inputs))


@contextlib.contextmanager
def converting(what: str) -> Iterator[None]:
    """Converting a model at prepare(): an operation the converter cannot map faithfully
    (Unsupported, ``what``: e.g. "cannot convert to ONNX") or one NNAPI says must fail
    (Rejected) fails the preparation with GENERAL_FAILURE."""
    try:
        yield
    except Unsupported as e:
        raise DriverError(ErrorStatus.GENERAL_FAILURE, f"{what}: {e}") from None
    except Rejected as e:
        raise DriverError(ErrorStatus.GENERAL_FAILURE, f"the operation must fail: {e}") from None


def uniform_capabilities(types: Iterable[OperandType]) -> Capabilities:
    """Capabilities with one performance figure for everything, listing the operand types
    the adapter maps (the HAL wants them sorted by type code, without repeats)."""
    perf = PerformanceInfo(1.0, 1.0)
    return Capabilities(perf, perf, tuple((t, perf) for t in sorted(set(types), key=int)), perf, perf)


class ConverterDevice:
    """Mixin for a Device whose ``converter`` module answers, per operation,
    ``operation_supported(model, index) -> (supported, reason)``."""

    converter: ModuleType

    def supported_operations(self, model: Model) -> list[bool]:
        check_model(model)
        return [self.converter.operation_supported(model, i)[0] for i in range(len(model.main.operations))]

    def unsupported_reasons(self, model: Model) -> list[str]:
        """Why each operation is unsupported ("" when it is supported): for humans and tests."""
        return [self.converter.operation_supported(model, i)[1] for i in range(len(model.main.operations))]


class Unsupported(Exception):
    """A converter cannot map an operation faithfully (for these types / parameters): the
    adapter reports the operation unsupported instead of approximating it."""


class Rejected(Exception):
    """NNAPI says this operation must fail with these (constant) parameters: the operation is
    supported, but preparing the model fails, as the reference fails the execution."""


def known_dims(operand: Operand) -> tuple[int, ...]:
    """The operand's dimensions when all are known (NNAPI writes an unknown one as 0)."""
    if not operand.dimensions or any(d == 0 for d in operand.dimensions):
        raise Unsupported(f"needs known dimensions, got {list(operand.dimensions)}")
    return operand.dimensions


def known_rank(operand: Operand) -> int:
    """The operand's rank when known (NNAPI writes an unknown rank as no dimensions)."""
    if not operand.dimensions:
        raise Unsupported("needs a known rank")
    return len(operand.dimensions)


class ParameterAccess:
    """Mixin for a converter's per-operation context (``self.ins``: the operation's input
    operands): NNAPI parameters read as Python values.  A runtime graph needs them at
    conversion time, so a parameter that is not a constant makes the operation Unsupported.
    Decoding whole parameter lists (padding, strides, slices, axes) is nnapi_params' job."""

    ins: list[Operand]

    def dims(self, operand: Operand) -> tuple[int, ...]:
        return known_dims(operand)

    def rank(self, operand: Operand) -> int:
        return known_rank(operand)

    def require(self, k: int, types: Iterable[OperandType], what: str = "") -> Operand:
        """Input ``k``'s operand when its type is one of ``types``, else Unsupported."""
        o = self.ins[k]
        if o.type not in types:
            raise Unsupported(f"{what or f'input {k}'} of type {o.type.name}")
        return o

    def omitted(self, k: int) -> bool:
        return k >= len(self.ins) or self.ins[k].is_omitted

    def scalar(self, k: int, default: Any = None) -> Any:
        if self.omitted(k):
            if default is None:
                raise Unsupported(f"input {k} is missing")
            return default
        o = self.ins[k]
        if not o.is_constant:
            raise Unsupported(f"input {k} (a parameter) is not a constant")
        return cast(np.ndarray, o.value).reshape(-1)[0].item()  # a constant's value is an array

    def const(self, k: int) -> np.ndarray:
        o = self.ins[k]
        if not o.is_constant:
            raise Unsupported(f"input {k} (a parameter tensor) is not a constant")
        return np.asarray(o.value)
