"""DELIBERATELY BROKEN DRIVERS for the value domains and verdicts of issue 20.  Never use them
as references.

Each is the reference driver with one defect that only shows on inputs the suites used never
to draw, or that the CTS tolerances let through.  The tests in ``tests/test_domains.py`` prove
that the default suites catch each of them, and by what:

    IntDivTruncates       TENSOR_INT32 DIV rounds toward zero (-7 / 2 = -3; NNAPI floors: -4)
                          -> value class int32 ``negative`` / ``div_rounding`` + exact int32
    FlushToZero           every float kernel flushes subnormal inputs and results to zero
                          -> value class float ``subnormal`` + exact data movement / compares
    Int32ViaFloat32       int32 MAXIMUM / MINIMUM / comparisons computed in float32: wrong
                          at the int32 limits -> value class int32 ``limit`` + exact verdicts
    BitwiseFloatEquality  EQUAL / NOT_EQUAL of floats compare bit patterns (-0.0 != 0.0,
                          NaN == NaN) -> value classes ``signed_zero`` / ``nan``
    QuantRescaleWraps     quantised ADD wraps around instead of saturating when the input
                          to output scale ratio is extreme (an overflowing 32-bit
                          multiplier) -> quantisation class ``scale_huge`` / ``ratio_extreme``
    ArgmaxOffByOne        ARGMAX / ARGMIN indices one too high (last index kept): passes CTS's
                          int32 atol 1 -> exact comparison of indices
    AliasedOutputs        returns the same output arrays from every execution and overwrites
                          them on the next one -> the aliasing check (in-process runs; behind
                          the driver host the reply is a copy, so no client can see it)
    LoopTimeoutOnlySync   honours the loop timeout on the synchronous path only; the async
                          path uses the 2 s default -> the loop-timeout bound
    IfSizesFromThenBranch sizes every IF output from the then branch's declared shape (cuts
                          or zero-pads the else branch's result) -> random IF cases whose
                          branches give different shapes, and the generated examples
                          if_branch_dependent_shape_*
    WhileCannotShrink     allocates each WHILE loop variable once, at its initial size: a
                          variable that shrinks comes back zero-padded -> random WHILE cases
                          with a shrinking loop variable
    EmptyBatchAsOne       RELU / ADD size every output dimension at least 1: an empty input
                          gives one row of zeros -> shape class ``zero_sized``
    Rank1AsScalar         broadcasting ADD / MUL / MAXIMUM use a rank-1 operand's first
                          element everywhere when the other operand is 3 ranks higher
                          -> shape class ``broadcast_ranks``
    LongDimTiled          RELU and ADD work in tiles of 512 along a dimension and drop the
                          last partial tile of a longer one (rank >= 2; the input passes
                          through) -> shape class ``max_dim``
    UnknownDimsUnresolved reports the model's own (unknown, 0) output dimensions instead of
                          the real ones -> shape class ``unknown_dims`` (output shapes are
                          required when the model leaves them unknown)

Stress (``nnconform stress``, tests/test_stress_soak.py):

    LeaksPerCompilation   keeps 256 KiB for every prepare -> compile-leak
    CrashesAfter65536     aborts the process on execution 65,537 of one prepared model (a
                          16-bit request counter) -> execution-soak (CRASH)
    CachesEveryModel      keeps 4 MiB per distinct model it ever prepared, never evicted:
                          no single test sees it -> the whole-life leak verdict

Name them on the command line as ``tests/drivers/broken_domains.py:IntDivTruncates``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nnconform.driver import OutputShape
from nnconform.driver.loader import import_driver_file
from nnconform.drivers.reference import ReferenceDevice, ReferencePreparedModel
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.registry import get_op, load_all

# The test drivers are files, not a package: the shared base class comes from broken.py
# loaded by path, as the loader loads any driver file (one module per file, one class).
_OverridingDevice = import_driver_file(Path(__file__).with_name("broken.py"))._OverridingDevice


# -- integer division that truncates ------------------------------------------------------


def _div_truncating(ctx):
    if ctx.in_operands[0].type != T.TENSOR_INT32:
        return get_op(Op.DIV).execute(ctx)
    a, b = np.broadcast_arrays(ctx.inputs[0].astype(np.int64), ctx.inputs[1].astype(np.int64))
    safe = np.where(b == 0, 1, b)
    q = np.where(b == 0, 0, np.trunc(a / safe)).astype(np.int64)
    return [q.astype(np.int32)]


class IntDivTruncates(_OverridingDevice):
    name = "broken-int-div-truncates"
    overrides = {Op.DIV: _div_truncating}


# -- flush to zero ----------------------------------------------------------------------------


def _ftz(a):
    if isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.size:
        tiny = np.finfo(a.dtype).tiny
        return np.where(np.abs(a) < tiny, np.zeros((), a.dtype), a).astype(a.dtype)
    return a


def _flushing(op: Op):
    fn = get_op(op).execute

    def run(ctx):
        ctx.inputs = [_ftz(x) for x in ctx.inputs]
        return [_ftz(np.asarray(o)) if isinstance(o, np.ndarray) else o for o in fn(ctx)]

    return run


class FlushToZero(_OverridingDevice):
    name = "broken-flush-to-zero"
    overrides = {o: _flushing(o) for o in load_all() if o not in (Op.IF, Op.WHILE)}


# -- int32 computed through float32 -------------------------------------------------------------

_VIA_F32 = {
    Op.MAXIMUM: np.maximum,
    Op.MINIMUM: np.minimum,
    Op.EQUAL: np.equal,
    Op.NOT_EQUAL: np.not_equal,
    Op.GREATER: np.greater,
    Op.GREATER_EQUAL: np.greater_equal,
    Op.LESS: np.less,
    Op.LESS_EQUAL: np.less_equal,
}


def _via_float32(op: Op):
    def run(ctx):
        if ctx.in_operands[0].type != T.TENSOR_INT32:
            return get_op(op).execute(ctx)
        a, b = (x.astype(np.float32) for x in ctx.inputs[:2])
        r = _VIA_F32[op](a, b)
        if r.dtype == np.bool_:
            return [r]
        return [np.clip(r.astype(np.float64), -(2**31), 2**31 - 1).astype(np.int32)]

    return run


class Int32ViaFloat32(_OverridingDevice):
    name = "broken-int32-via-float32"
    overrides = {o: _via_float32(o) for o in _VIA_F32}


# -- float equality on bit patterns --------------------------------------------------------------


def _bitwise_equal(op: Op):
    def run(ctx):
        a, b = ctx.inputs[:2]
        if a.dtype.kind != "f":
            return get_op(op).execute(ctx)
        view = np.int32 if a.dtype == np.float32 else np.int16
        a2, b2 = np.broadcast_arrays(np.ascontiguousarray(a).view(view), np.ascontiguousarray(b).view(view))
        eq = a2 == b2
        return [eq if op == Op.EQUAL else ~eq]

    return run


class BitwiseFloatEquality(_OverridingDevice):
    name = "broken-bitwise-float-equality"
    overrides = {Op.EQUAL: _bitwise_equal(Op.EQUAL), Op.NOT_EQUAL: _bitwise_equal(Op.NOT_EQUAL)}


# -- quantised rescaling that wraps at extreme ratios -------------------------------------------


def _quant_add_wrapping(ctx):
    (out,) = get_op(Op.ADD).execute(ctx)
    o = ctx.out_operands[0]
    if not o.info.is_quant:
        return [out]
    s_in = max(ctx.in_operands[0].scale, ctx.in_operands[1].scale)
    if s_in / o.scale < 64:
        return [out]
    # the "fixed-point" path: an unsaturated result that wraps around the stored range
    x0 = (ctx.inputs[0].astype(np.float64) - ctx.in_operands[0].zero_point) * ctx.in_operands[0].scale
    x1 = (ctx.inputs[1].astype(np.float64) - ctx.in_operands[1].zero_point) * ctx.in_operands[1].scale
    q = np.round((x0 + x1) / o.scale) + o.zero_point
    q = np.clip(q, -(2.0**62), 2.0**62).astype(np.int64)
    info = np.iinfo(out.dtype)
    span = int(info.max) - int(info.min) + 1
    wrapped = (q - int(info.min)) % span + int(info.min)
    return [np.broadcast_to(wrapped, out.shape).astype(out.dtype)]


class QuantRescaleWraps(_OverridingDevice):
    name = "broken-quant-rescale-wraps"
    overrides = {Op.ADD: _quant_add_wrapping}


# -- indices off by one ---------------------------------------------------------------------------


def _arg_off_by_one(op: Op):
    def run(ctx):
        (idx,) = get_op(op).execute(ctx)
        axis = int(ctx.scalar(1))
        n = ctx.inputs[0].shape[axis]
        return [np.minimum(idx + 1, n - 1).astype(np.int32)]

    return run


class ArgmaxOffByOne(_OverridingDevice):
    name = "broken-argmax-off-by-one"
    overrides = {Op.ARGMAX: _arg_off_by_one(Op.ARGMAX), Op.ARGMIN: _arg_off_by_one(Op.ARGMIN)}


# -- outputs aliased across executions ---------------------------------------------------------------


class _AliasingPrepared(ReferencePreparedModel):
    def __init__(self, model):
        super().__init__(model)
        self._buffers = None

    def execute(self, request, **kw):
        result = super().execute(request, **kw)
        if self._buffers is None or [b.shape for b in self._buffers] != [o.shape for o in result.outputs]:
            self._buffers = [np.array(o, copy=True) for o in result.outputs]
        else:
            for b, o in zip(self._buffers, result.outputs):
                b[...] = o  # the previous execution's result changes under the client
        return type(result)(tuple(self._buffers), result.output_shapes, result.timing)


class AliasedOutputs(ReferenceDevice):
    name = "broken-aliased-outputs"

    def prepare(self, model, **kw):
        super().prepare(model, **kw)
        return _AliasingPrepared(model)


# -- loop timeout ignored on one path -----------------------------------------------------------------


class _SyncOnlyTimeout(ReferencePreparedModel):
    def execute_async(self, request, *, measure_timing=False, deadline=None, loop_timeout=None):
        return super().execute_async(
            request, measure_timing=measure_timing, deadline=deadline, loop_timeout=None
        )  # the async path forgets it: 2 s default


class LoopTimeoutOnlySync(ReferenceDevice):
    name = "broken-loop-timeout-only-sync"

    def prepare(self, model, **kw):
        super().prepare(model, **kw)
        return _SyncOnlyTimeout(model)


# -- stress: memory per compilation, a wrapping counter, a cache that never forgets ---------

_KEPT: list = []


class LeaksPerCompilation(ReferenceDevice):
    name = "broken-leaks-per-compilation"

    def prepare(self, model, **kw):
        _KEPT.append(np.ones(256 * 1024, np.uint8))  # touched, so it counts in RSS
        return super().prepare(model, **kw)


class _CountingPrepared(ReferencePreparedModel):
    LIMIT = 2**16

    def __init__(self, model):
        super().__init__(model)
        self._request_id = 0

    def execute(self, request, **kw):
        self._request_id += 1
        if self._request_id > self.LIMIT:  # a 16-bit request id wrapped onto a freed slot
            import os

            os.abort()
        return super().execute(request, **kw)


class CrashesAfter65536(ReferenceDevice):
    name = "broken-crashes-after-65536"

    def prepare(self, model, **kw):
        super().prepare(model, **kw)
        return _CountingPrepared(model)


class CachesEveryModel(ReferenceDevice):
    name = "broken-caches-every-model"

    def __init__(self):
        super().__init__()
        self._seen: dict = {}

    def prepare(self, model, **kw):
        import json

        from nnconform.ir.spec import model_to_dict

        key = hash(json.dumps(model_to_dict(model), sort_keys=True, default=str))
        if key not in self._seen:
            self._seen[key] = np.ones(4 * 2**20, np.uint8)
        return super().prepare(model, **kw)


# -- IF outputs sized from the then branch ---------------------------------------------------------


def _if_then_sized(ctx):
    from nnconform.reference.ops import control_flow as cf

    outs = get_op(Op.IF).execute(ctx)
    then = cf.subgraph_at(ctx, 1)
    fixed = []
    for o, idx in zip(outs, then.output_indexes):
        dims = then.operands[idx].dimensions
        if len(dims) != o.ndim or 0 in dims or tuple(dims) == o.shape:
            fixed.append(o)
            continue
        buf = np.zeros(dims, o.dtype)  # the buffer allocated for the then branch's shape
        region = tuple(slice(0, min(a, b)) for a, b in zip(dims, o.shape))
        buf[region] = o[region]
        fixed.append(buf)
    return fixed


class IfSizesFromThenBranch(_OverridingDevice):
    name = "broken-if-sizes-from-then-branch"
    overrides = {Op.IF: _if_then_sized}


# -- WHILE loop variables that cannot shrink -------------------------------------------------------


def _while_no_shrink(ctx):
    outs = get_op(Op.WHILE).execute(ctx)
    fixed = []
    for j, o in enumerate(outs):
        start = ctx.inputs[2 + j] if 2 + j < len(ctx.inputs) else None
        if (
            isinstance(start, np.ndarray)
            and start.ndim == o.ndim
            and o.ndim
            and all(a <= b for a, b in zip(o.shape, start.shape))
            and o.shape != start.shape
        ):
            buf = np.zeros(start.shape, o.dtype)  # the buffer sized once from the initial value
            buf[tuple(slice(0, d) for d in o.shape)] = o
            fixed.append(buf)
        else:
            fixed.append(o)
    return fixed


class WhileCannotShrink(_OverridingDevice):
    name = "broken-while-cannot-shrink"
    overrides = {Op.WHILE: _while_no_shrink}


# -- shape classes ---------------------------------------------------------------------------


def _empty_as_one(op: Op):
    def run(ctx):
        outs = get_op(op).execute(ctx)
        if not any(isinstance(x, np.ndarray) and x.ndim and x.size == 0 for x in ctx.inputs):
            return outs
        # the buffer allocated with every dimension at least 1
        return [np.zeros(tuple(max(1, d) for d in o.shape), o.dtype) for o in outs]

    return run


class EmptyBatchAsOne(_OverridingDevice):
    name = "broken-empty-batch-as-one"
    overrides = {Op.RELU: _empty_as_one(Op.RELU), Op.ADD: _empty_as_one(Op.ADD)}


def _rank1_as_scalar(op: Op):
    def run(ctx):
        a, b = ctx.inputs[0], ctx.inputs[1]
        # the rank-1 operand's first element everywhere (its shape kept)
        if a.ndim - b.ndim >= 3 and b.ndim == 1 and b.size:
            ctx.inputs = [a, np.full_like(b, b[0])] + list(ctx.inputs[2:])
        elif b.ndim - a.ndim >= 3 and a.ndim == 1 and a.size:
            ctx.inputs = [np.full_like(a, a[0]), b] + list(ctx.inputs[2:])
        return get_op(op).execute(ctx)

    return run


class Rank1AsScalar(_OverridingDevice):
    name = "broken-rank1-as-scalar"
    overrides = {o: _rank1_as_scalar(o) for o in (Op.ADD, Op.MUL, Op.MAXIMUM)}


_TILE = 512


def _long_dim_tiled(op: Op):
    def run(ctx):
        (out,) = get_op(op).execute(ctx)
        x = ctx.inputs[0]
        if out.ndim < 2 or out.shape != x.shape or max(out.shape) <= _TILE:
            return [out]
        axis = int(np.argmax(out.shape))
        n = out.shape[axis]
        tail = [slice(None)] * out.ndim
        tail[axis] = slice(n - n % _TILE if n % _TILE else n, n)
        out = np.array(out, copy=True)
        out[tuple(tail)] = x[tuple(tail)].astype(out.dtype)  # the partial tile is never computed
        return [out]

    return run


class LongDimTiled(_OverridingDevice):
    name = "broken-long-dim-tiled"
    overrides = {Op.RELU: _long_dim_tiled(Op.RELU), Op.ADD: _long_dim_tiled(Op.ADD)}


class _UnresolvedPrepared(ReferencePreparedModel):
    def execute(self, request, **kw):
        result = super().execute(request, **kw)
        sg = self.model.main
        declared = [sg.operands[k].dimensions for k in sg.output_indexes]
        if not any(0 in d for d in declared):
            return result
        shapes = tuple(OutputShape(tuple(d), True) for d in declared)  # never worked out
        return type(result)(result.outputs, shapes, result.timing)


class UnknownDimsUnresolved(ReferenceDevice):
    name = "broken-unknown-dims-unresolved"

    def prepare(self, model, **kw):
        super().prepare(model, **kw)
        return _UnresolvedPrepared(model)


# -- an honest driver whose output is a view of its input --------------------------------------------


class _InputViewPrepared(ReferencePreparedModel):
    def execute(self, request, **kw):
        result = super().execute(request, **kw)
        # a RESHAPE computed as a view of the input (as numpy's reshape gives): legitimate,
        # the values are copied into the output at once
        view = np.asarray(request.inputs[0].value).reshape(result.outputs[0].shape)
        return type(result)((view,), result.output_shapes, result.timing)


class ReshapeAsInputView(ReferenceDevice):
    """Not broken: its RESHAPE output is a view of the input the harness gave it."""

    name = "reshape-as-input-view"

    def prepare(self, model, **kw):
        super().prepare(model, **kw)
        return _InputViewPrepared(model)
