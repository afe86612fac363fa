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

import json
import os
import select
import signal
import threading
import time

import numpy as np
from ai_edge_litert import interpreter as litert

from nnconform import __version__
from nnconform.driver import DriverError, ErrorStatus, support
from nnconform.drivers.common.device import RuntimeDevice, RuntimePreparedModel, runtime_errors
from nnconform.drivers.tflite import convert  # first: it registers control_flow (which imports it)

# isort: split
from nnconform.drivers.tflite import control_flow, recurrent
from nnconform.errors import DriverLoadError
from nnconform.ir import Model, Request
from nnconform.reference.executor import clamp_loop_timeout

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


_CHILD_BOUND_S = 10.0  # a child that cannot start, or send its outputs, is a device failure


def invoke_bounded(it, tensors: list[int], timeout_s: float) -> list[np.ndarray]:
    """Invoke ``it`` in a forked child and return the values of ``tensors``; kill the child and
    raise MISSED_DEADLINE_TRANSIENT when it runs longer than ``timeout_s``.

    Why a child: the loop timeout is NNAPI's guard against a WHILE that never ends, and
    neither TFLite's WHILE kernel nor the Python interpreter can be stopped from outside (no
    clock op, no cancellation hook in the wrapper).  A thread would leave the loop spinning a
    core forever; a killed child leaves nothing behind.  The timeout is measured over the whole
    invoke rather than per WHILE (NNAPI measures each loop from its first condition), which is
    the same for a graph that is one loop and at most stricter otherwise; the 2 s default and
    the 15 s cap are the NNAPI ones (executor.clamp_loop_timeout).

    The child writes "S" before and "D" after the invoke, so fork and transfer are not counted.
    The child sends each output as a JSON header (dtype, shape) and its raw bytes; the parent
    decodes plain numeric bytes only.  The parent's interpreter is not changed by the child."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: invoke, send, exit without running the parent's cleanup handlers
        status = 0
        try:
            os.close(read_fd)
            os.write(write_fd, b"S")  # the loop timeout runs from here, not from the fork
            try:
                it.invoke()
            finally:
                os.write(write_fd, b"D")  # ... to here: sending the outputs is not part of it
            arrays = [np.ascontiguousarray(it.get_tensor(t)) for t in tensors]
            head = [{"dtype": a.dtype.str, "shape": list(a.shape)} for a in arrays]
            payload = [b"OK", json.dumps(head).encode()] + [a.tobytes() for a in arrays]
        except BaseException as e:  # reported to the parent, which raises GENERAL_FAILURE
            payload, status = [b"ER", str(e).encode(errors="replace")[:4000]], 1
        try:
            blob = b"".join(len(p).to_bytes(8, "little") + p for p in payload)
            view = memoryview(blob)
            while view:
                view = view[os.write(write_fd, view) :]
        finally:
            os._exit(status)
    os.close(write_fd)
    # Phases by the bytes received: 0 = forked, 1 = invoking ("S"), 2 = sending ("D").
    received = bytearray()
    phase, t_end = 0, time.monotonic() + _CHILD_BOUND_S
    try:
        while True:
            left = t_end - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                if phase == 1:
                    raise DriverError(
                        ErrorStatus.MISSED_DEADLINE_TRANSIENT,
                        f"loop timeout of {timeout_s * 1e3:g} ms passed (WHILE still running)",
                    )
                raise DriverError(
                    ErrorStatus.GENERAL_FAILURE,
                    "the invoking child did not "
                    f"{'start' if phase == 0 else 'send its outputs'} within {_CHILD_BOUND_S:g} s",
                )
            ready, _, _ = select.select([read_fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(read_fd, 1 << 20)
            if not chunk:
                break
            received += chunk
            if phase == 0 and len(received) >= 1:
                phase, t_end = 1, time.monotonic() + timeout_s
            if phase == 1 and len(received) >= 2:
                phase, t_end = 2, time.monotonic() + _CHILD_BOUND_S
    finally:
        os.close(read_fd)
        os.waitpid(pid, 0)
    chunks = [bytes(received[2:])]
    parts, blob, pos = [], b"".join(chunks), 0
    while pos + 8 <= len(blob):
        n = int.from_bytes(blob[pos : pos + 8], "little")
        parts.append(blob[pos + 8 : pos + 8 + n])
        pos += 8 + n
    if not parts or parts[0] != b"OK":
        why = parts[1].decode(errors="replace") if len(parts) > 1 else "the invoking child died"
        raise RuntimeError(why)
    head = json.loads(parts[1])
    if len(head) != len(tensors) or len(parts) != 2 + len(tensors):
        raise RuntimeError("the invoking child sent a malformed answer")
    return [
        np.frombuffer(raw, dtype=np.dtype(h["dtype"])).reshape(h["shape"]).copy() for h, raw in zip(head, parts[2:])
    ]


class TflitePreparedModel(RuntimePreparedModel):
    runtime = "TFLite"

    def __init__(self, model: Model, interpreter, flatbuffer: bytes, inputs: list[int], outputs: list[int]):
        super().__init__(model)
        self.interpreter = interpreter
        self.flatbuffer = flatbuffer
        self._inputs = inputs
        self._outputs = outputs
        self._shapes: list[tuple[int, ...] | None] = [None] * len(inputs)
        self._allocated = False
        self._lock = threading.Lock()  # one interpreter: executions take turns
        # A WHILE may never end: such models are invoked in a child that the loop timeout kills.
        self._loop_bounded = control_flow.has_while(model)
        # Recurrent states are TFLite variable tensors: zeroed, then fed, before every invoke.
        self._stateful = recurrent.has_state(model)
        self._make = None  # model -> TflitePreparedModel (the device's prepare)
        self._variants: dict[tuple[int, ...], TflitePreparedModel] = {}

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

    def feed(self, request: Request) -> tuple["TflitePreparedModel", list[np.ndarray]]:
        """The interpreter for the inputs this request gives a value (this one, or a variant
        without the omitted inputs), and the values."""
        omitted = tuple(k for k, arg in enumerate(request.inputs) if arg.has_no_value)
        target = self._variant(omitted) if omitted else self
        # np.require, not np.ascontiguousarray: that one turns a scalar (0-d) into shape [1],
        # which TFLite then resizes the rank-0 input to (FILL's value must stay rank 0).
        values = [
            np.require(v, requirements="C")
            for v in support.request_values(self.model, request, self.runtime, omitted=True)
            if v is not None
        ]
        return target, values

    def timed_run(self, feed, deadline: float | None, loop_timeout: float | None) -> tuple[list, int]:
        # the interpreter's lock is waited for first: only the invoke is time on the device
        target, values = feed
        return target._invoke(values, loop_timeout)

    def _variant(self, omitted: tuple[int, ...]) -> "TflitePreparedModel":
        """This model with the inputs at positions ``omitted`` turned into omitted operands.

        NNAPI lets a request leave an optional model input without a value (the AOSP LSTM
        vectors omit CIFG's input-gate weights that way); TFLite has no run-time optional
        input, and which kernel variant runs follows from what is omitted.  So each set of
        omitted inputs gets its own flatbuffer and interpreter, built once."""
        with self._lock:
            variant = self._variants.get(omitted)
            if variant is None:
                if self._make is None:
                    raise DriverError(ErrorStatus.INVALID_ARGUMENT, "an omitted model input cannot be fed to TFLite")
                variant = self._variants[omitted] = self._make(support.with_omitted_inputs(self.model, omitted))
        return variant

    def _invoke(self, values: list[np.ndarray], loop_timeout: float | None) -> tuple[list[np.ndarray], int]:
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
                if self._stateful:
                    it.reset_all_variables()
                for t, v in zip(self._inputs, values):
                    it.set_tensor(t, v)
                if self._loop_bounded:
                    outputs = invoke_bounded(it, self._outputs, clamp_loop_timeout(loop_timeout))
                else:
                    it.invoke()
                    outputs = [np.array(it.get_tensor(t)) for t in self._outputs]
                device_us = (time.perf_counter_ns() - t_device) // 1000
            except (RuntimeError, ValueError) as e:
                raise DriverError(ErrorStatus.GENERAL_FAILURE, f"TFLite: {support.first_line(e)}") from None
        return outputs, device_us

    def drop(self) -> None:
        self.interpreter = None
        for variant in self._variants.values():
            variant.release()
        self._variants.clear()


class TfliteDevice(RuntimeDevice):
    """NNAPI semantics on the LiteRT interpreter.  Honest support: see convert.CONVERTERS."""

    converter = convert
    operand_types = convert.TFL_TYPE

    def __init__(self, kernels: str | None = None, threads: int = 1):
        kernels = kernels or os.environ.get("NNCONFORM_TFLITE_KERNELS", "auto")
        if kernels not in _RESOLVERS:
            raise DriverLoadError(f"tflite driver: kernels must be one of {', '.join(_RESOLVERS)}, got {kernels!r}")
        self.kernels = kernels
        self.threads = threads
        # NNAPI getName: "<vendor>-<device>" (vts/device/basics checks it)
        self.name = "tflite-cpu" if kernels == "auto" else f"tflite-{kernels}"
        self.version = f"{__version__}+litert{_litert_version()}"

    def prepare_model(self, model: Model) -> TflitePreparedModel:
        return self._build(model)

    def _build(self, model: Model) -> "TflitePreparedModel":
        with support.converting("cannot convert to TFLite"):
            flatbuffer, ins, outs = convert.to_tflite(model)
        with runtime_errors("TFLite rejected the model", types=(RuntimeError, ValueError)):
            it = litert.Interpreter(
                model_content=flatbuffer,
                num_threads=self.threads,
                experimental_op_resolver_type=_RESOLVERS[self.kernels],
            )
            prepared = TflitePreparedModel(model, it, flatbuffer, ins, outs)
            prepared._make = self._build
            prepared.allocate_if_known()
        return prepared


__all__ = ["TfliteDevice", "TflitePreparedModel"]
