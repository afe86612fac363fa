"""Checks of one driver answer against the HAL 1.3 execution rules, shared by the vts suite
(hand-made example models) and the vectors variant matrix (every golden vector).

Each ``*_problem`` / ``*_verdict`` function returns None when the answer is right, else one
line saying what is wrong; the callers decide how to record it.  Nothing here calls a driver.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence, cast

import numpy as np

from nnconform.driver import DriverError, ErrorStatus, ExecutionResult, OutputShape, Timing
from nnconform.ir import Model
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.isolation.watchdog import HangError
from nnconform.verdict.criteria import compare

MISSED_DEADLINE = (ErrorStatus.MISSED_DEADLINE_TRANSIENT, ErrorStatus.MISSED_DEADLINE_PERSISTENT)
CONTROL_FLOW = (Op.IF, Op.WHILE)
# VTS leaves these out of the dynamic-output-shape kind: RANK's output is a scalar whose
# "shape" cannot be made unknown, and control flow resolves shapes across subgraphs.
NOT_DYNAMIC = (Op.RANK, Op.IF, Op.WHILE)


def describe(e: BaseException) -> str:
    if isinstance(e, DriverError):
        return e.status.name
    if isinstance(e, HangError):
        return str(e)
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def fully_specified(model: Model) -> bool:
    """Every main output has known rank and dimensions (what fenced execution requires)."""
    sg = model.main
    return all(
        sg.operands[k].info.is_scalar or (sg.operands[k].dimensions and 0 not in sg.operands[k].dimensions)
        for k in sg.output_indexes
    )


def result_problem(model: Model, got, expected=None, *, ignored=None) -> str | None:
    """None when ``got`` is a well-formed result (and matches ``expected`` if given)."""
    if isinstance(got, BaseException):
        return f"failed: {describe(got)}"
    if not isinstance(got, ExecutionResult):
        return f"returned {type(got).__name__}, not an ExecutionResult"
    if not isinstance(got.outputs, (list, tuple)) or not all(isinstance(a, np.ndarray) for a in got.outputs):
        return "outputs are not a sequence of numpy arrays"
    if expected is not None:
        cmp = compare(model, list(expected), list(got.outputs), ignored=ignored)
        if not cmp.passed:
            return cmp.message
    return None


def timing_problem(timing, asked: bool) -> str | None:
    """No timing unless asked; when asked, None or microseconds with on-device <= in-driver."""
    if not isinstance(timing, Timing):
        return f"timing is {timing!r:.60}, not a Timing"
    dev, drv = timing.time_on_device, timing.time_in_driver
    if not asked:
        if dev is not None or drv is not None:
            return f"timing {timing} reported although measure_timing was False (must be None)"
        return None
    for name, v in (("time_on_device", dev), ("time_in_driver", drv)):
        if v is not None and (not isinstance(v, (int, np.integer)) or v < 0):
            return f"{name} = {v!r} (must be None or microseconds >= 0)"
    if dev is not None and drv is not None and dev > drv:
        return f"time_on_device {dev} us > time_in_driver {drv} us (on-device must be <= in-driver)"
    return None


def shapes_problem(
    model: Model, got: ExecutionResult, *, required: bool = False, dims: Sequence[Sequence[int]] | None = None
) -> str | None:
    """output_shapes of a successful execution: empty, or one sufficient entry per output
    giving that output's real dimensions, which must agree with the model's known ones.
    ``required``: the model has unspecified outputs, so the entries must be there.  ``dims``:
    the dimensions to hold the outputs to (default: the model's own; a dynamic-shape variant
    passes the original model's)."""
    n = len(model.main.output_indexes)
    shapes = got.output_shapes
    if not isinstance(shapes, (list, tuple)):
        return f"output_shapes is {type(shapes).__name__}, not a sequence"
    if len(got.outputs) != n:
        return f"{len(got.outputs)} outputs, the model has {n}"
    if not shapes and not required:
        return None
    if len(shapes) != n:
        return f"{len(shapes)} output shapes for {n} outputs"
    for i, (s, arr) in enumerate(zip(shapes, got.outputs)):
        if not isinstance(s, OutputShape):
            return f"output shape {i} is {type(s).__name__}, not an OutputShape"
        if tuple(s.dimensions) != tuple(arr.shape):
            return f"output {i}: reported dimensions {list(s.dimensions)}, the output is {list(arr.shape)}"
        if not s.is_sufficient:
            return f"output {i}: reported insufficient on a successful execution"
    wanted = dims if dims is not None else [model.main.operands[k].dimensions for k in model.main.output_indexes]
    for i, (want, s) in enumerate(zip(wanted, shapes)):
        got_dims = tuple(s.dimensions)
        if want and (len(got_dims) != len(want) or any(d and d != g for d, g in zip(want, got_dims))):
            return f"output {i}: reported dimensions {list(got_dims)}, the model says {list(want)}"
    return None


def request_verdict(got, allowed: Sequence[ErrorStatus], n_outputs: int, output: int | None) -> str | None:
    """A rejected request: a DriverError with an allowed status; OUTPUT_INSUFFICIENT_SIZE
    with one shape per output (``output`` marked insufficient); any other status with none."""
    if isinstance(got, ExecutionResult):
        return "executed it (returned outputs)"
    if not isinstance(got, DriverError):
        return f"raised {describe(got)} instead of a DriverError"
    if got.status not in allowed:
        return f"gave {got.status.name}, expected {' or '.join(s.name for s in allowed)}"
    if got.status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE:
        if len(got.output_shapes) != n_outputs:
            return f"OUTPUT_INSUFFICIENT_SIZE with {len(got.output_shapes)} output shapes, the model has {n_outputs}"
        if output is not None and got.output_shapes[output].is_sufficient:
            return f"OUTPUT_INSUFFICIENT_SIZE but output {output} is reported sufficient"
    elif got.output_shapes:
        return f"{got.status.name} came with output shapes {list(got.output_shapes)} (must be empty)"
    return None


def insufficient_problem(got, real: Sequence[tuple[int, ...]], output: int = 0) -> str | None:
    """Output ``output`` was given a buffer too small: OUTPUT_INSUFFICIENT_SIZE, that output
    marked insufficient, every other one sufficient, and each reported shape of the right
    rank with every dimension it gives equal to the real one (0 = not resolved)."""
    if not isinstance(got, DriverError) or got.status != ErrorStatus.OUTPUT_INSUFFICIENT_SIZE:
        what = "succeeded" if isinstance(got, ExecutionResult) else describe(got)
        return f"{what}, expected OUTPUT_INSUFFICIENT_SIZE"
    shapes = got.output_shapes
    if len(shapes) != len(real):
        return f"OUTPUT_INSUFFICIENT_SIZE with {len(shapes)} output shapes for {len(real)} outputs"
    for i, (s, want) in enumerate(zip(shapes, real)):
        if i == output and s.is_sufficient:
            return f"output {i} (the short one) reported sufficient"
        if i != output and not s.is_sufficient:
            return f"output {i} reported insufficient although its buffer was big enough"
        d = tuple(s.dimensions)
        if len(d) != len(want) or any(g and g != w for g, w in zip(d, want)):
            return f"output {i} reported as {list(d)}, its real shape is {list(want)}"
    return None


def verdict(got, status: ErrorStatus, what: str) -> str | None:
    """None when ``got`` is a DriverError with ``status`` (and, unless that is
    OUTPUT_INSUFFICIENT_SIZE, no output shapes: a rejected execution reports none); else what
    happened instead."""
    if isinstance(got, DriverError) and got.status == status:
        if got.output_shapes and status != ErrorStatus.OUTPUT_INSUFFICIENT_SIZE:
            return f"{what} gave {status.name} with output shapes {list(got.output_shapes)} (must be empty)"
        return None
    did = describe(got) if isinstance(got, BaseException) else "a result"
    return f"{what} gave {did}, expected {status.name}"


def dynamic_variant(model: Model) -> Model | None:
    """The model with every tensor output's dimensions unknown (0), rank kept; None when no
    output has a known dimension to hide."""
    sg = model.main
    ops = list(sg.operands)
    changed = False
    for k in sg.output_indexes:
        o = ops[k]
        if not o.info.is_scalar and o.dimensions and any(o.dimensions):
            ops[k] = dataclasses.replace(o, dimensions=tuple(0 for _ in o.dimensions))
            changed = True
    if not changed:
        return None
    return dataclasses.replace(model, main=dataclasses.replace(sg, operands=tuple(ops)))


def _shift(arr) -> np.ndarray:
    out = (np.asarray(arr).astype(np.int16) - 128).astype(np.int8)
    out.setflags(write=False)
    return out


def to_signed(model: Model, inputs: Sequence, outputs: Sequence) -> tuple[Model, list, list]:
    """quant8-asymm -> quant8-asymm-signed: same scale, zero point and every value minus 128
    (the quantised values mean the same reals, so the expected outputs shift the same way)."""
    sg = model.main
    ops = []
    for o in sg.operands:
        if o.type == T.TENSOR_QUANT8_ASYMM:
            o = dataclasses.replace(
                o,
                type=T.TENSOR_QUANT8_ASYMM_SIGNED,
                zero_point=o.zero_point - 128,
                value=None if o.value is None else _shift(o.value),
            )
        ops.append(o)
    signed = dataclasses.replace(model, main=dataclasses.replace(sg, operands=tuple(ops)))
    ins = [
        _shift(v) if v is not None and sg.operands[k].type == T.TENSOR_QUANT8_ASYMM else v
        for k, v in zip(sg.input_indexes, inputs)
    ]
    outs = [
        _shift(v) if sg.operands[k].type == T.TENSOR_QUANT8_ASYMM else v for k, v in zip(sg.output_indexes, outputs)
    ]
    return signed, ins, outs


_REJECTED = object()  # a step answered INVALID_ARGUMENT: the check goes on to the next call


def _step_verdict(what: str, got) -> object:
    """One call of a mutation check: _REJECTED, or what the driver did instead (a line)."""
    if isinstance(got, DriverError):
        return (
            _REJECTED
            if got.status == ErrorStatus.INVALID_ARGUMENT
            else f"{what} gave {got.status.name}, expected INVALID_ARGUMENT"
        )
    if isinstance(got, HangError):
        return str(got)
    if isinstance(got, BaseException):  # a crash is not a rejection
        return f"{what} raised {describe(got)} instead of DriverError(INVALID_ARGUMENT)"
    return f"{what} accepted it"


def not_rejected(device, m, call) -> str | None:
    """None if the driver rejects the model mutation ``m`` (nnconform.vts.mutations.ModelMutation)
    as VTS requires: INVALID_ARGUMENT from supported_operations (unless the mutation is of the
    preference or priority) and from prepare.  Else what it did instead.  The one function here
    that talks to the driver (with ``rejections``): each call goes through ``call(what, fn)``,
    which may bound it in time; a HangError it raises is reported, other exceptions of the
    caller's own kind (not Exception subclasses) pass through."""
    calls = []
    if m.query_support:
        calls.append(("supported_operations", lambda: device.supported_operations(m.model)))
    calls.append(("prepare", lambda: device.prepare(m.model, preference=m.preference, priority=m.priority)))
    for what, fn in calls:
        try:
            got = call(what, fn)
        except Exception as e:  # the driver's answer (DriverError, a hang, a crash), judged below
            got = e
        verdict = _step_verdict(what, got)
        if verdict is _REJECTED:
            continue
        if what == "prepare" and not isinstance(got, BaseException):
            try:
                call("release", got.release)
            except Exception:  # the verdict is already made: the invalid model was accepted
                pass
        return cast(str, verdict)  # not _REJECTED: a line saying what the driver did
    return None


def rejections(device, mutations: Sequence, call) -> list[str | None]:
    """``not_rejected`` of every mutation, in order.  A driver host (``reject_many``) checks
    many per round trip: the same calls in the same order, but a mutated model costs about
    0.2 ms instead of two round trips (~3 ms); with ~1.1M mutated models in the full vectors
    matrix that is most of its time.  A hang of the batch call sends the rest one at a time
    (to name the model that hangs); a host incident passes to ``call``'s caller as it would
    from a single call."""
    batch = getattr(device, "reject_many", None)
    if batch is None:
        return [not_rejected(device, m, call) for m in mutations]
    out: list[str | None] = []
    while len(out) < len(mutations):
        rest = list(mutations[len(out) :])
        try:
            answers = call("supported_operations/prepare", lambda: batch(rest))
        except HangError:
            # which model hung is not known (answers come per reply): check the rest one by one
            return out + [not_rejected(device, m, call) for m in rest]
        for steps in answers:
            verdict = None
            for what, got in steps:
                v = _step_verdict(what, got)
                if v is not _REJECTED:
                    verdict = cast(str, v)  # not _REJECTED: a line
                    break
            out.append(verdict)
    return out
