"""The torch device: nnconform's driver interface over a plan of torch operations.

prepare() validates the model and converts it once (convert.py) into a plan of torch kernels;
the ``torch-compile`` device also hands the whole plan to ``torch.compile`` (inductor) there
and runs it once on zeros of the model's input shapes, so that compilation happens in
prepare and execute() only runs.  Errors map to NNAPI statuses: an invalid model or request is
INVALID_ARGUMENT; anything torch raises while compiling or running is GENERAL_FAILURE (with
torch's first message line).

Eager and compiled runs are separate devices because they differ in practice (inductor fuses
and reorders float arithmetic, and generates its own C++ kernels).

Options (constructor arguments, or environment variables for the registered names):
  compile   False (``torch``) or True (``torch-compile``)
  backend   torch.compile backend, default inductor ($NNCONFORM_TORCH_BACKEND)
  threads   intra-op threads (default 1: many small models, deterministic reductions)
"""

from __future__ import annotations

import os

import numpy as np
import torch

from nnconform import __version__
from nnconform.driver import DriverError, ErrorStatus, PreparedModel, support
from nnconform.drivers.common.device import RuntimeDevice, RuntimePreparedModel, runtime_errors
from nnconform.drivers.torch import control_flow, convert
from nnconform.ir import Model, Request


class TorchPreparedModel(RuntimePreparedModel):
    runtime = "torch"

    def __init__(self, model: Model, plan: convert.Plan, runner):
        super().__init__(model)
        self.plan = plan
        self._run = runner

    def feed(self, request: Request) -> list[torch.Tensor]:
        # torch.from_numpy shares the memory: private, writable copies.
        return [torch.from_numpy(v) for v in support.request_values(self.model, request, self.runtime, copy=True)]

    def run(self, feed, deadline: float | None, loop_timeout: float | None) -> list:
        self.plan.clock.set(loop_timeout, deadline)
        try:
            # torch raises many types (RuntimeError, IndexError, backend errors)
            with runtime_errors("torch", passes=(control_flow.LoopTimeout,)), torch.no_grad():
                return [np.array(t.detach().numpy()) for t in self._run(*feed)]
        except control_flow.LoopTimeout as e:
            raise DriverError(ErrorStatus.MISSED_DEADLINE_TRANSIENT, str(e)) from None

    def drop(self) -> None:
        self._run = None


class TorchDevice(RuntimeDevice):
    """NNAPI semantics on torch, eager.  Honest support: see convert.CONVERTERS."""

    compiled = False
    converter = convert
    operand_types = convert.TORCH_DTYPE

    def __init__(self, compile: bool | None = None, backend: str | None = None, threads: int = 1):
        if compile is not None:
            self.compiled = bool(compile)
        self.backend = backend or os.environ.get("NNCONFORM_TORCH_BACKEND", "inductor")
        self.threads = threads
        torch.set_num_threads(threads)
        # NNAPI getName is "<vendor>-<device>" (VTS checks it): pytorch-eager, pytorch-inductor.
        self.name = f"pytorch-{self.backend}" if self.compiled else "pytorch-eager"
        self.version = f"{__version__}+torch{torch.__version__}"

    def prepare_model(self, model: Model) -> PreparedModel:
        with support.converting("cannot map to torch"):
            plan = convert.build_plan(model)
        runner = self._compile(model, plan) if self.compiled else plan.run
        return TorchPreparedModel(model, plan, runner)

    def _compile(self, model: Model, plan: convert.Plan):
        """torch.compile the whole plan once and warm it with the model's input shapes (when
        they are all known), so that execute() only runs the compiled code."""
        # dynamo / inductor raise many types (BackendCompilerFailed, ...)
        with runtime_errors("torch.compile failed"):
            compiled = torch.compile(plan.run, backend=self.backend, dynamic=False, fullgraph=False)
            sample = _sample_inputs(model)
            if sample is not None:
                # Zeros may keep a WHILE loop going: a short loop timeout ends the warm-up
                # (what ran is compiled; the rest compiles when first reached).
                plan.clock.set(0.2, None)
                try:
                    with torch.no_grad():
                        compiled(*sample)
                except control_flow.LoopTimeout:
                    pass  # the warm-up's own bound, not a failure of the model
        return compiled


class TorchCompileDevice(TorchDevice):
    """The same mapping, run through torch.compile (inductor)."""

    compiled = True


def _sample_inputs(model: Model) -> list[torch.Tensor] | None:
    """Zeros shaped like the main graph's inputs, or None when a dimension is unknown."""
    sample = []
    for i in model.main.input_indexes:
        o = model.main.operands[i]
        if not o.fully_specified:
            return None
        sample.append(torch.zeros(tuple(o.dimensions), dtype=convert.TORCH_DTYPE[o.type]))
    return sample


__all__ = ["TorchCompileDevice", "TorchDevice", "TorchPreparedModel"]
