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

import jax
import numpy as np

from nnconform import __version__
from nnconform.driver import DriverError, ErrorStatus, PreparedModel, support
from nnconform.drivers.common.device import RuntimeDevice, RuntimePreparedModel, runtime_errors
from nnconform.drivers.jax import convert
from nnconform.drivers.jax.quant_ops import x64_scope
from nnconform.ir import Model, Request


def _compile(model: Model, fn, shapes: tuple[tuple[int, ...], ...]):
    """Trace, lower and compile ``fn`` for these input shapes (the expensive step)."""
    sg = model.main
    args = [jax.ShapeDtypeStruct(s, sg.operands[i].info.dtype) for i, s in zip(sg.input_indexes, shapes)]
    # jax raises TypeError/ValueError/XlaRuntimeError for graphs it refuses
    with runtime_errors("jax rejected the graph"), support.converting("cannot map to jax"), x64_scope(model):
        return jax.jit(fn).lower(*args).compile()


def model_input_shapes(model: Model) -> tuple[tuple[int, ...], ...] | None:
    """The input shapes when the model fixes them all, else None (compiled per request)."""
    shapes = []
    for i in model.main.input_indexes:
        o = model.main.operands[i]
        if not o.fully_specified:
            return None
        shapes.append(() if o.info.is_scalar else tuple(o.dimensions))
    return tuple(shapes)


class JaxPreparedModel(RuntimePreparedModel):
    runtime = "XLA"

    def __init__(self, model: Model, fn, compiled: dict):
        super().__init__(model)
        self._fn = fn
        self._compiled = compiled  # input shapes -> compiled executable
        self._lock = threading.Lock()

    def _executable(self, shapes):
        with self._lock:
            exe = self._compiled.get(shapes)
            if exe is None:
                exe = _compile(self.model, self._fn, shapes)
                self._compiled[shapes] = exe
            return exe

    def feed(self, request: Request):
        # The executable for these input shapes is compiled (on first use) before the run is timed.
        values = super().feed(request)
        return self._executable(tuple(tuple(int(d) for d in v.shape) for v in values)), values

    def run(self, feed, deadline: float | None, loop_timeout: float | None) -> list:
        exe, values = feed
        with runtime_errors("jax"):  # XlaRuntimeError and friends
            return [np.asarray(o) for o in exe(*values)]

    def drop(self) -> None:
        self._compiled = {}


class JaxDevice(RuntimeDevice):
    """NNAPI semantics on jax / XLA CPU.  Honest support: see convert.CONVERTERS."""

    converter = convert
    operand_types = convert.TYPES

    def __init__(self):
        self.name = "jax-xla_cpu"  # NNAPI getName: "<vendor>-<device>"
        self.version = f"{__version__}+jax{jax.__version__}"
        if not any(d.platform == "cpu" for d in jax.devices()):
            raise DriverError(ErrorStatus.DEVICE_UNAVAILABLE, "jax has no CPU device")

    def prepare_model(self, model: Model) -> PreparedModel:
        with support.converting("cannot map to jax"):
            fn = convert.build_function(model)
        compiled = {}
        shapes = model_input_shapes(model)
        if shapes is not None:
            compiled[shapes] = _compile(model, fn, shapes)
        return JaxPreparedModel(model, fn, compiled)


__all__ = ["JaxDevice", "JaxPreparedModel"]
