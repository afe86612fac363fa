"""The onnxruntime device: nnconform's driver interface over an onnxruntime InferenceSession.

prepare() validates the model, converts it to ONNX once (convert.py) and builds the session;
execute() only feeds the request to the session.  Errors map to NNAPI statuses: an invalid
model or request is INVALID_ARGUMENT, anything the runtime raises while building or running
the session is GENERAL_FAILURE (with onnxruntime's first message line).

Options (constructor arguments, or environment variables for the registered name):
  provider      execution provider, default CPUExecutionProvider ($NNCONFORM_ORT_PROVIDER)
  optimization  graph optimisation level: disable, basic, extended, all (default all,
                onnxruntime's own default; $NNCONFORM_ORT_OPTIMIZATION)
  threads       intra-op threads (default 1: many small models, deterministic reductions)
"""
from __future__ import annotations

import os
import time

import onnxruntime as ort

from nnconform import __version__
from nnconform import driver_support as support
from nnconform.driver import (Capabilities, Device, DriverError, ErrorStatus, ExecutionPreference,
                              ExecutionResult, PreparedModel, Priority)
from nnconform.errors import DriverLoadError
from nnconform.ir import Model, Request

from . import convert

_LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


class OnnxRuntimePreparedModel(PreparedModel):
    def __init__(self, model: Model, session: ort.InferenceSession, onnx_model):
        self.model = model
        self.session = session
        self.onnx_model = onnx_model
        self._inputs = [f"o{i}" for i in model.main.input_indexes]
        self._outputs = [f"o{i}" for i in model.main.output_indexes]
        self._released = False

    def execute(self, request: Request, *, measure_timing: bool = False, deadline: float | None = None,
                loop_timeout: float | None = None) -> ExecutionResult:
        t_driver = time.perf_counter_ns()
        support.begin_execution(self.model, request, deadline, self._released)
        feed = dict(zip(self._inputs, support.request_values(self.model, request, "onnxruntime")))
        t_device = time.perf_counter_ns()
        try:
            outputs = self.session.run(self._outputs, feed)
        except Exception as e:  # onnxruntime raises its own exception types from C++
            raise DriverError(ErrorStatus.GENERAL_FAILURE, f"onnxruntime: {support.first_line(e)}") from None
        device_us = (time.perf_counter_ns() - t_device) // 1000
        return support.finish_execution(self.model, request, outputs, deadline=deadline,
                                        measure_timing=measure_timing, device_us=device_us, t_driver_ns=t_driver)

    def release(self) -> None:
        self._released = True
        self.session = None


class OnnxRuntimeDevice(support.ConverterDevice, Device):
    """NNAPI semantics on onnxruntime.  Honest support: see convert.CONVERTERS."""

    feature_level = 30
    converter = convert

    def __init__(self, provider: str | None = None, optimization: str | None = None, threads: int = 1):
        self.provider = provider or os.environ.get("NNCONFORM_ORT_PROVIDER", "CPUExecutionProvider")
        level = optimization or os.environ.get("NNCONFORM_ORT_OPTIMIZATION", "all")
        if level not in _LEVELS:
            raise DriverLoadError(f"onnxruntime driver: optimization must be one of {', '.join(_LEVELS)}, got {level!r}")
        if self.provider not in ort.get_available_providers():
            raise DriverLoadError(f"onnxruntime has no {self.provider} here (available: "
                             f"{', '.join(ort.get_available_providers())})")
        self.optimization = level
        self.threads = threads
        self.name = "onnxruntime" if self.provider == "CPUExecutionProvider" else f"onnxruntime-{self.provider}"
        self.version = f"{__version__}+ort{ort.__version__}"

    def capabilities(self) -> Capabilities:
        return support.uniform_capabilities(convert.ONNX_TYPE)

    def _session_options(self) -> ort.SessionOptions:
        so = ort.SessionOptions()
        so.graph_optimization_level = _LEVELS[self.optimization]
        so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        return so

    def prepare(self, model: Model, *, preference: ExecutionPreference = ExecutionPreference.FAST_SINGLE_ANSWER,
                priority: Priority = Priority.MEDIUM, deadline: float | None = None,
                cache_token: bytes | None = None) -> PreparedModel:
        support.check_prepare_args(model, preference, priority, deadline, cache_token)
        with support.converting("cannot convert to ONNX"):
            onnx_model = convert.to_onnx(model)
        try:
            session = ort.InferenceSession(onnx_model.SerializeToString(), self._session_options(),
                                           providers=[self.provider])
        except Exception as e:  # onnxruntime's C++ exceptions surface as several Python types
            raise DriverError(ErrorStatus.GENERAL_FAILURE, f"onnxruntime rejected the graph: {support.first_line(e)}") \
                from None
        return OnnxRuntimePreparedModel(model, session, onnx_model)


__all__ = ["OnnxRuntimeDevice", "OnnxRuntimePreparedModel"]
