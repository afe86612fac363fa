"""The TFLite device: nnconform's driver interface over a LiteRT ``Interpreter``.

prepare() validates the model, writes it as a .tflite flatbuffer once (convert.py) and builds
the interpreter; tensors are allocated there when every input shape is known, else on the
first execution.  execute() only resizes inputs whose shape changed, sets them, invokes and
reads the outputs.  Errors map to NNAPI statuses: an invalid model or request is
INVALID_ARGUMENT; anything the interpreter raises while building, allocating or invoking is
GENERAL_FAILURE (with the interpreter's first message line).

Options (constructor arguments, or environment variables for the registered name):
  kernels   which TFLite kernels run the graph ($NNCONFORM_TFLITE_KERNELS):
            "auto"    - the Python default: optimised builtin kernels plus the XNNPACK
                        delegate for what it takes (what an app gets);
            "builtin" - optimised builtin kernels, no default delegate;
            "ref"     - TFLite's reference kernels.
  threads   interpreter threads (default 1: many small models, deterministic reductions)
"""
from __future__ import annotations

import os
import threading
import time

import numpy as np
from ai_edge_litert import interpreter as litert

from nnconform import __version__
from nnconform import driver_support as support
from nnconform.driver import (Capabilities, Device, DriverError, ErrorStatus, ExecutionPreference,
                              ExecutionResult, PreparedModel, Priority)
from nnconform.errors import DriverLoadError
from nnconform.ir import Model, Request

from . import convert

_RESOLVERS = {
    "auto": litert.OpResolverType.AUTO,
    "builtin": litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    "ref": litert.OpResolverType.BUILTIN_REF,
}


def _litert_version() -> str:
    try:
        from importlib.metadata import version
        return version("ai-edge-litert")
    except Exception:  # metadata missing in an unusual install: the name still works
        return "unknown"


class TflitePreparedModel(PreparedModel):
    def __init__(self, model: Model, interpreter, flatbuffer: bytes, inputs: list[int], outputs: list[int]):
        self.model = model
        self.interpreter = interpreter
        self.flatbuffer = flatbuffer
        self._inputs = inputs
        self._outputs = outputs
        self._shapes: list[tuple[int, ...] | None] = [None] * len(inputs)
        self._allocated = False
        self._released = False
        self._lock = threading.Lock()   # one interpreter: executions take turns

    def allocate_if_known(self) -> None:
        """Allocate now when every input shape is known from the model."""
        shapes = []
        for idx in self.model.main.input_indexes:
            o = self.model.main.operands[idx]
            if not o.info.is_scalar and not o.fully_specified:
                return
            shapes.append(tuple(o.dimensions))
        self.interpreter.allocate_tensors()
        self._shapes = shapes
        self._allocated = True

    def execute(self, request: Request, *, measure_timing: bool = False, deadline: float | None = None,
                loop_timeout: float | None = None) -> ExecutionResult:
        t_driver = time.perf_counter_ns()
        support.begin_execution(self.model, request, deadline, self._released)
        values = [np.ascontiguousarray(v) for v in support.request_values(self.model, request, "TFLite")]
        with self._lock:
            it = self.interpreter
            try:
                t_device = time.perf_counter_ns()
                shapes = [tuple(v.shape) for v in values]
                if not self._allocated or shapes != self._shapes:
                    for t, shape, old in zip(self._inputs, shapes, self._shapes):
                        if shape != old:
                            it.resize_tensor_input(t, list(shape), strict=False)
                    it.allocate_tensors()
                    self._shapes, self._allocated = shapes, True
                for t, v in zip(self._inputs, values):
                    it.set_tensor(t, v)
                it.invoke()
                outputs = [np.array(it.get_tensor(t)) for t in self._outputs]
                device_us = (time.perf_counter_ns() - t_device) // 1000
            except (RuntimeError, ValueError) as e:
                raise DriverError(ErrorStatus.GENERAL_FAILURE, f"TFLite: {support.first_line(e)}") from None
        return support.finish_execution(self.model, request, outputs, deadline=deadline,
                                        measure_timing=measure_timing, device_us=device_us, t_driver_ns=t_driver)

    def release(self) -> None:
        self._released = True
        self.interpreter = None


class TfliteDevice(support.ConverterDevice, Device):
    """NNAPI semantics on the LiteRT interpreter.  Honest support: see convert.CONVERTERS."""

    feature_level = 30
    converter = convert

    def __init__(self, kernels: str | None = None, threads: int = 1):
        kernels = kernels or os.environ.get("NNCONFORM_TFLITE_KERNELS", "auto")
        if kernels not in _RESOLVERS:
            raise DriverLoadError(f"tflite driver: kernels must be one of {', '.join(_RESOLVERS)}, got {kernels!r}")
        self.kernels = kernels
        self.threads = threads
        self.name = "tflite" if kernels == "auto" else f"tflite-{kernels}"
        self.version = f"{__version__}+litert{_litert_version()}"

    def capabilities(self) -> Capabilities:
        return support.uniform_capabilities(convert.TFL_TYPE)

    def prepare(self, model: Model, *, preference: ExecutionPreference = ExecutionPreference.FAST_SINGLE_ANSWER,
                priority: Priority = Priority.MEDIUM, deadline: float | None = None,
                cache_token: bytes | None = None) -> PreparedModel:
        support.check_prepare_args(model, preference, priority, deadline, cache_token)
        with support.converting("cannot convert to TFLite"):
            flatbuffer, ins, outs = convert.to_tflite(model)
        try:
            it = litert.Interpreter(model_content=flatbuffer, num_threads=self.threads,
                                    experimental_op_resolver_type=_RESOLVERS[self.kernels])
            prepared = TflitePreparedModel(model, it, flatbuffer, ins, outs)
            prepared.allocate_if_known()
        except (RuntimeError, ValueError) as e:
            raise DriverError(ErrorStatus.GENERAL_FAILURE, f"TFLite rejected the model: {support.first_line(e)}") from None
        return prepared


__all__ = ["TfliteDevice", "TflitePreparedModel"]
