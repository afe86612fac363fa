"""The JAX device: nnconform's driver interface over one jitted, ahead-of-time compiled XLA
function per prepared model.

prepare() validates the model, builds a Python function over the main graph (convert.py) and
lowers and compiles it with ``jax.jit(...).lower(...).compile()`` for the model's input
shapes; execute() only runs the compiled executable.  A model with unknown input dimensions
is compiled once per distinct set of request shapes (XLA needs static shapes), on the first
execution that brings them.  Errors map to NNAPI statuses: an invalid model or request is
INVALID_ARGUMENT; a graph the adapter cannot map, or one NNAPI says must fail, or anything XLA
raises, is GENERAL_FAILURE with the first message line.

XLA's CPU backend flushes float32 denormals to zero (docs/findings_jax.md): results that
NNAPI's reference would give as subnormal numbers come back as 0.
"""
from __future__ import annotations

import threading
import time

import jax
import numpy as np

from nnconform import __version__
from nnconform import driver_support as support
from nnconform.driver import (Capabilities, Device, DriverError, ErrorStatus, ExecutionPreference,
                              ExecutionResult, PerformanceInfo, PreparedModel, Priority)
from nnconform.ir import Model, Request

from . import convert
from .quant_ops import x64_scope


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def _compile(model: Model, fn, shapes: tuple[tuple[int, ...], ...]):
    """Trace, lower and compile ``fn`` for these input shapes (the expensive step)."""
    sg = model.main
    args = [jax.ShapeDtypeStruct(s, sg.operands[i].info.dtype) for i, s in zip(sg.input_indexes, shapes)]
    try:
        with x64_scope(model):
            return jax.jit(fn).lower(*args).compile()
    except convert.Unsupported as e:
        raise DriverError(ErrorStatus.GENERAL_FAILURE, f"cannot map to jax: {e}") from None
    except convert.Rejected as e:
        raise DriverError(ErrorStatus.GENERAL_FAILURE, f"the operation must fail: {e}") from None
    except Exception as e:  # jax raises TypeError/ValueError/XlaRuntimeError for graphs it refuses
        raise DriverError(ErrorStatus.GENERAL_FAILURE, f"jax rejected the graph: {_first_line(e)}") from None


def model_input_shapes(model: Model) -> tuple[tuple[int, ...], ...] | None:
    """The input shapes when the model fixes them all, else None (compiled per request)."""
    shapes = []
    for i in model.main.input_indexes:
        o = model.main.operands[i]
        if not o.fully_specified:
            return None
        shapes.append(() if o.info.is_scalar else tuple(o.dimensions))
    return tuple(shapes)


class JaxPreparedModel(PreparedModel):
    def __init__(self, model: Model, fn, compiled: dict):
        self.model = model
        self._fn = fn
        self._compiled = compiled          # input shapes -> compiled executable
        self._lock = threading.Lock()
        self._released = False

    def _executable(self, shapes):
        with self._lock:
            exe = self._compiled.get(shapes)
            if exe is None:
                exe = _compile(self.model, self._fn, shapes)
                self._compiled[shapes] = exe
            return exe

    def execute(self, request: Request, *, measure_timing: bool = False, deadline: float | None = None,
                loop_timeout: float | None = None) -> ExecutionResult:
        t_driver = time.perf_counter_ns()
        if self._released:
            raise DriverError(ErrorStatus.GENERAL_FAILURE, "prepared model was released")
        support.check_request(self.model, request)
        if deadline is not None and time.monotonic() > deadline:
            raise DriverError(ErrorStatus.MISSED_DEADLINE_TRANSIENT, "deadline passed before execution")
        feed = []
        for idx, arg in zip(self.model.main.input_indexes, request.inputs):
            if arg.has_no_value:
                raise DriverError(ErrorStatus.INVALID_ARGUMENT, "an omitted model input cannot be fed to XLA")
            operand = self.model.main.operands[idx]
            value = np.asarray(arg.value, dtype=operand.info.dtype)
            if arg.dimensions is not None and tuple(value.shape) != tuple(arg.dimensions):
                value = value.reshape(arg.dimensions)
            feed.append(value)
        exe = self._executable(tuple(tuple(int(d) for d in v.shape) for v in feed))
        t_device = time.perf_counter_ns()
        try:
            outputs = [np.asarray(o) for o in exe(*feed)]
        except Exception as e:  # XlaRuntimeError and friends
            raise DriverError(ErrorStatus.GENERAL_FAILURE, f"jax: {_first_line(e)}") from None
        device_us = (time.perf_counter_ns() - t_device) // 1000
        return support.finish_execution(self.model, request, outputs, deadline=deadline,
                                        measure_timing=measure_timing, device_us=device_us, t_driver_ns=t_driver)

    def release(self) -> None:
        self._released = True
        self._compiled = {}


class JaxDevice(Device):
    """NNAPI semantics on jax / XLA CPU.  Honest support: see convert.CONVERTERS."""

    feature_level = 30

    def __init__(self):
        self.name = "jax-xla_cpu"   # NNAPI getName: "<vendor>-<device>"
        self.version = f"{__version__}+jax{jax.__version__}"
        if not any(d.platform == "cpu" for d in jax.devices()):
            raise DriverError(ErrorStatus.DEVICE_UNAVAILABLE, "jax has no CPU device")

    def capabilities(self) -> Capabilities:
        perf = PerformanceInfo(1.0, 1.0)
        tensor_types = sorted(set(convert.TYPES), key=int)  # HAL: sorted by type, no repeats
        return Capabilities(perf, perf, tuple((t, perf) for t in tensor_types), perf, perf)

    def supported_operations(self, model: Model) -> list[bool]:
        support.check_model(model)
        return [convert.operation_supported(model, i)[0] for i in range(len(model.main.operations))]

    def unsupported_reasons(self, model: Model) -> list[str]:
        """Why each operation is unsupported ("" when it is supported): for humans and tests."""
        return [convert.operation_supported(model, i)[1] for i in range(len(model.main.operations))]

    def prepare(self, model: Model, *, preference: ExecutionPreference = ExecutionPreference.FAST_SINGLE_ANSWER,
                priority: Priority = Priority.MEDIUM, deadline: float | None = None,
                cache_token: bytes | None = None) -> PreparedModel:
        support.check_prepare_args(model, preference, priority, deadline, cache_token)
        try:
            fn = convert.build_function(model)
        except convert.Unsupported as e:
            raise DriverError(ErrorStatus.GENERAL_FAILURE, f"cannot map to jax: {e}") from None
        compiled = {}
        shapes = model_input_shapes(model)
        if shapes is not None:
            compiled[shapes] = _compile(model, fn, shapes)
        return JaxPreparedModel(model, fn, compiled)


__all__ = ["JaxDevice", "JaxPreparedModel"]
