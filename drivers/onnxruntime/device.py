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
import threading
import time
from typing import Callable

import onnxruntime as ort

from nnconform import __version__
from nnconform.driver import DriverError, ErrorStatus, PreparedModel, support
from nnconform.drivers.common.device import RuntimeDevice, RuntimePreparedModel, runtime_errors
from nnconform.drivers.onnxruntime import control_flow, convert
from nnconform.errors import DriverLoadError
from nnconform.ir import Model, Request
from nnconform.reference.executor import clamp_loop_timeout

_LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


class OnnxRuntimePreparedModel(RuntimePreparedModel):
    runtime = "onnxruntime"

    def __init__(
        self,
        model: Model,
        session: ort.InferenceSession,
        onnx_model,
        build_session: Callable[[Model], tuple[ort.InferenceSession, object]] | None = None,
    ):
        super().__init__(model)
        self.session = session
        self.onnx_model = onnx_model
        self._inputs = [f"o{i}" for i in model.main.input_indexes]
        self._outputs = [f"o{i}" for i in model.main.output_indexes]
        self._build_session = build_session
        # request inputs left without a value -> the session of the model with those operands
        # omitted (built on first use; an omitted optional input changes the converted graph)
        self._variants: dict[tuple[int, ...], ort.InferenceSession] = {}
        self._has_while = control_flow.has_while(model)
        self._running: set[ort.RunOptions] = set()
        self._lock = threading.Lock()

    def _session_for(self, omitted: tuple[int, ...]) -> ort.InferenceSession:
        if not omitted:
            if self.session is None:  # prepare could not build it (see OnnxRuntimeDevice.prepare)
                self.session, self.onnx_model = self._build_session(self.model)
            return self.session
        if omitted not in self._variants:
            if self._build_session is None:
                raise DriverError(ErrorStatus.INVALID_ARGUMENT, "an omitted model input cannot be fed to onnxruntime")
            self._variants[omitted], _ = self._build_session(support.with_omitted_inputs(self.model, omitted))
        return self._variants[omitted]

    def feed(self, request: Request) -> tuple[ort.InferenceSession, dict]:
        """The session for the inputs this request gives a value, and its feed."""
        omitted = tuple(k for k, arg in enumerate(request.inputs) if arg.has_no_value)
        session = self._session_for(omitted)
        values = support.request_values(self.model, request, self.runtime, omitted=True)
        return session, {name: v for name, v in zip(self._inputs, values) if v is not None}

    def run(self, feed: tuple[ort.InferenceSession, dict], deadline: float | None, loop_timeout: float | None) -> list:
        """session.run, stopped through RunOptions.terminate when the execution deadline passes
        or, for a model with a WHILE, when the run outlasts the loop timeout (control_flow.py
        explains why per run).  Either is MISSED_DEADLINE_TRANSIENT, as NNAPI's CPU path says."""
        now = time.monotonic()
        limits = []
        if self._has_while:
            limits.append((clamp_loop_timeout(loop_timeout), "the WHILE loop timeout"))
        if deadline is not None:
            limits.append((max(deadline - now, 0.0), "the execution deadline"))
        ro = ort.RunOptions()
        ro.log_severity_level = 4  # a terminated run is reported as MISSED_DEADLINE, not logged
        fired: list[str] = []
        timer = None
        if limits:
            wait, why = min(limits)

            def stop():
                fired.append(
                    f"{why} ({wait * 1e3:g} ms) passed; run stopped after {(time.monotonic() - now) * 1e3:.1f} ms"
                )
                ro.terminate = True

            timer = threading.Timer(wait, stop)
            timer.daemon = True
            timer.start()
        with self._lock:
            self._running.add(ro)
        session, values = feed
        try:
            return session.run(self._outputs, values, ro)
        except Exception as e:  # onnxruntime raises its own exception types from C++
            if fired:
                raise DriverError(ErrorStatus.MISSED_DEADLINE_TRANSIENT, fired[0]) from None
            if self._released:
                raise DriverError(ErrorStatus.GENERAL_FAILURE, "prepared model was released during the run") from None
            raise DriverError(ErrorStatus.GENERAL_FAILURE, f"onnxruntime: {support.first_line(e)}") from None
        finally:
            if timer is not None:
                timer.cancel()
            with self._lock:
                self._running.discard(ro)

    def drop(self) -> None:
        # a run still going (a hung WHILE the harness gave up on) is asked to stop
        with self._lock:
            for ro in self._running:
                ro.terminate = True
        self.session = None
        self._build_session = None
        self._variants.clear()


class OnnxRuntimeDevice(RuntimeDevice):
    """NNAPI semantics on onnxruntime.  Honest support: see convert.CONVERTERS."""

    converter = convert
    operand_types = convert.ONNX_TYPE

    def __init__(self, provider: str | None = None, optimization: str | None = None, threads: int = 1):
        self.provider = provider or os.environ.get("NNCONFORM_ORT_PROVIDER", "CPUExecutionProvider")
        level = optimization or os.environ.get("NNCONFORM_ORT_OPTIMIZATION", "all")
        if level not in _LEVELS:
            raise DriverLoadError(
                f"onnxruntime driver: optimization must be one of {', '.join(_LEVELS)}, got {level!r}"
            )
        if self.provider not in ort.get_available_providers():
            raise DriverLoadError(
                f"onnxruntime has no {self.provider} here (available: {', '.join(ort.get_available_providers())})"
            )
        self.optimization = level
        self.threads = threads
        # NNAPI getName: "<vendor>-<device>" (vts/device/basics checks it)
        self.name = "onnxruntime-cpu" if self.provider == "CPUExecutionProvider" else f"onnxruntime-{self.provider}"
        self.version = f"{__version__}+ort{ort.__version__}"

    def _session_options(self) -> ort.SessionOptions:
        so = ort.SessionOptions()
        so.graph_optimization_level = _LEVELS[self.optimization]
        so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        return so

    def prepare_model(self, model: Model) -> PreparedModel:
        try:
            session, onnx_model = self._build(model)
        except DriverError:
            # A model input of unknown size may be an optional operand the requests will omit
            # (CTS LSTM vectors declare unused weights [0] and pass no value): as given, the
            # graph may not type-check, yet each request's variant may.  Those are built and
            # checked per request; any other model fails here.
            if not any(not model.main.operands[i].fully_specified for i in model.main.input_indexes):
                raise
            session = onnx_model = None
        return OnnxRuntimePreparedModel(model, session, onnx_model, self._build)

    def _build(self, model: Model) -> tuple[ort.InferenceSession, object]:
        with support.converting("cannot convert to ONNX"):
            onnx_model = convert.to_onnx(model)
        # onnxruntime's C++ exceptions surface as several Python types
        with runtime_errors("onnxruntime rejected the graph"):
            session = ort.InferenceSession(
                onnx_model.SerializeToString(),
                self._session_options(),
                providers=[self.provider],
                disabled_optimizers=control_flow.disabled_optimizers(model),
            )
        return session, onnx_model


__all__ = ["OnnxRuntimeDevice", "OnnxRuntimePreparedModel"]
