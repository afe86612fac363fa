"""The OpenVINO device: nnconform's driver interface over an OpenVINO CompiledModel.

prepare() validates the model, builds the OpenVINO graph once (convert.py) and compiles it;
execute() only runs an infer request.  Errors map to NNAPI statuses: an invalid model or
request is INVALID_ARGUMENT, anything the runtime raises while compiling or inferring is
GENERAL_FAILURE (with OpenVINO's first message line).

Options (constructor arguments, or environment variables for the registered name):
  device    OpenVINO device, default CPU ($NNCONFORM_OV_DEVICE)
  threads   inference threads (default 1: many small models, deterministic reductions)

The CPU plugin is compiled with INFERENCE_PRECISION_HINT f32: left alone it runs float32
graphs in bf16 (or fp16) on CPUs that have those units, which NNAPI's float32 does not allow
(relaxed computation is the model's choice, not the driver's).
"""

from __future__ import annotations

import os

import numpy as np
import openvino as ov

from nnconform import __version__
from nnconform.driver import DriverError, ErrorStatus, PreparedModel, support
from nnconform.drivers.common.device import RuntimeDevice, RuntimePreparedModel, runtime_errors
from nnconform.drivers.openvino import convert
from nnconform.errors import DriverLoadError
from nnconform.ir import Model, Request


class OpenVinoPreparedModel(RuntimePreparedModel):
    runtime = "OpenVINO"

    def __init__(self, model: Model, compiled: ov.CompiledModel, run_checks: list[str]):
        super().__init__(model)
        self.compiled = compiled
        self.run_checks = run_checks

    def feed(self, request: Request) -> list[np.ndarray]:
        return [np.ascontiguousarray(v) for v in super().feed(request)]

    def run(self, feed, deadline: float | None, loop_timeout: float | None) -> list:
        # OpenVINO raises RuntimeError (and others) from C++
        with runtime_errors("openvino", 300):
            # An infer request per execution: executions of one prepared model may run
            # concurrently (NNAPI allows it), and a request holds one set of tensors.
            infer = self.compiled.create_infer_request()
            infer.infer(feed, share_inputs=False)
            # Copies: the request's output tensors are reused by the next inference.
            n = len(self.model.main.output_indexes)
            outputs = [np.array(infer.get_output_tensor(k).data, copy=True) for k in range(n)]
            failed = [msg for k, msg in enumerate(self.run_checks) if not bool(infer.get_output_tensor(n + k).data)]
        if failed:
            # NNAPI fails the execution (the reference does too); OpenVINO would return zeros.
            raise DriverError(ErrorStatus.GENERAL_FAILURE, failed[0])
        return outputs

    def drop(self) -> None:
        self.compiled = None


class OpenVinoDevice(RuntimeDevice):
    """NNAPI semantics on OpenVINO.  Honest support: see convert.CONVERTERS."""

    converter = convert
    operand_types = convert.OV_TYPE

    def __init__(self, device: str | None = None, threads: int = 1):
        self.device = device or os.environ.get("NNCONFORM_OV_DEVICE", "CPU")
        self.core = ov.Core()
        if self.device not in self.core.available_devices:
            raise DriverLoadError(
                f"OpenVINO has no {self.device} device here (available: {', '.join(self.core.available_devices)})"
            )
        self.threads = threads
        self.name = f"openvino-{self.device.lower()}"  # NNAPI's "<vendor>-<device>"
        self.version = f"{__version__}+ov{ov.__version__.split('-')[0]}"

    def _config(self) -> dict:
        config = {"INFERENCE_NUM_THREADS": self.threads}
        if self.device == "CPU":
            config["INFERENCE_PRECISION_HINT"] = "f32"
        return config

    def prepare_model(self, model: Model) -> PreparedModel:
        with support.converting("cannot convert to OpenVINO"):
            ov_model, run_checks = convert.to_openvino(model)
        # OpenVINO's C++ exceptions surface as RuntimeError and others
        with runtime_errors("OpenVINO rejected the graph", 300):
            compiled = self.core.compile_model(ov_model, self.device, self._config())
        return OpenVinoPreparedModel(model, compiled, run_checks)


__all__ = ["OpenVinoDevice", "OpenVinoPreparedModel"]
