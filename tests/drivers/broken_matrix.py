"""DELIBERATELY BROKEN DRIVERS, for testing the harness itself.  Never use them as references.

Each is the reference driver with one defect that only one part of the vectors suite's
execution matrix (nnconform.cases.variants) can see; the plain synchronous run of every golden
vector still passes:

    AsyncWrongResults          execute_async returns every output perturbed
    BurstIgnoresTiming         a burst always measures and reports timing, asked or not
    WrongDynamicShapes         when the model leaves an output's dimensions unknown, the reported
                               output shape is one too big in its first dimension
    AsyncAcceptsInsufficient   execute_async ignores the callers' buffer sizes, so a too-small
                               output succeeds instead of OUTPUT_INSUFFICIENT_SIZE
    AsyncIgnoresDeadline       execute_async drops the deadline (sync honours it)
    RefusesSignedTwin          reports operations with TENSOR_QUANT8_ASYMM_SIGNED operands as
                               unsupported, although it runs their quant8-asymm originals
    AcceptsUnorderedBigModels  on models of more than 3 operations it sorts the operations
                               itself instead of rejecting an out-of-order model, so the
                               execution_order mutations of big models are accepted
    BurstAcceptsMissingInput   a burst fills the inputs missing from a request with zeros
                               instead of rejecting it (sync, async and fenced reject it)
    AcceptsRank5Conv           takes a CONV_2D whose input and filter are rank 5 with a last
                               dimension of 1 by dropping that dimension, instead of rejecting
                               the model (CONV_2D needs rank 4)
    AsyncAborts                execute_async aborts the driver's process (a crash only the
                               async cells see; the cells after it need a new driver host)
    MixedRejections            answers invalid models in every wrong way at once, chosen by
                               the model's operand and operation counts (so the mutations of one
                               model get different answers): raises from supported_operations,
                               claims support for anything, returns a non-PreparedModel from
                               prepare, fails prepare with GENERAL_FAILURE, aborts the process
                               when asked for an execution preference that does not exist

Name them on the command line as ``tests/drivers/broken_matrix.py:AsyncWrongResults``.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses

import numpy as np

from nnconform.driver import DriverError, ErrorStatus, ExecutionResult, OutputShape
from nnconform.drivers.reference import ReferenceBurst, ReferenceDevice, ReferencePreparedModel
from nnconform.ir import Model, OperandType, OperationType, Request, RequestArgument


def _async(pm: ReferencePreparedModel, fn):
    with pm._lock:
        if pm._pool is None:
            pm._pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="nnbroken")
    return pm._pool.submit(fn)


class _Device(ReferenceDevice):
    """The reference with its prepared models made of ``PREPARED``."""

    PREPARED = ReferencePreparedModel

    def prepare(self, model: Model, **kw):
        return self.PREPARED(super().prepare(model, **kw).model)

    def prepare_from_cache(self, cache_token: bytes):
        return self.PREPARED(super().prepare_from_cache(cache_token).model)


# ---- wrong results on the async path --------------------------------------------------


def _perturbed(a: np.ndarray) -> np.ndarray:
    if a.dtype == np.bool_:
        return ~a
    if np.issubdtype(a.dtype, np.floating):
        return (a + 1 + np.abs(a) * 0.5).astype(a.dtype)
    return (a.astype(np.int64) + 1).astype(a.dtype)


class _AsyncWrongPrepared(ReferencePreparedModel):
    def execute_async(self, request, **kw):
        def run():
            r = self.execute(request, **kw)
            return ExecutionResult(tuple(_perturbed(o) for o in r.outputs), r.output_shapes, r.timing)

        return _async(self, run)


class AsyncWrongResults(_Device):
    name = "broken-async-wrong-results"
    PREPARED = _AsyncWrongPrepared


# ---- a crash on the async path -----------------------------------------------------------


class _AsyncAbortPrepared(ReferencePreparedModel):
    def execute_async(self, request, **kw):
        import os

        os.abort()


class AsyncAborts(_Device):
    name = "broken-async-aborts"
    PREPARED = _AsyncAbortPrepared


# ---- a burst that ignores measure_timing -----------------------------------------------


class _TimingBurst(ReferenceBurst):
    def execute(self, request, *, measure_timing: bool = False, **kw):
        return super().execute(request, measure_timing=True, **kw)  # the defect


class _BurstTimingPrepared(ReferencePreparedModel):
    def configure_burst(self):
        super().configure_burst()  # the reference's checks (released model)
        return _TimingBurst(self)


class BurstIgnoresTiming(_Device):
    name = "broken-burst-ignores-timing"
    PREPARED = _BurstTimingPrepared


# ---- wrong output shapes for unknown dimensions -----------------------------------------


class _WrongDynamicPrepared(ReferencePreparedModel):
    def execute(self, request, **kw):
        r = super().execute(request, **kw)
        sg = self.model.main
        unknown = [
            not sg.operands[k].info.is_scalar and (not sg.operands[k].dimensions or 0 in sg.operands[k].dimensions)
            for k in sg.output_indexes
        ]
        if not any(unknown) or not r.output_shapes:
            return r
        shapes = tuple(
            OutputShape((s.dimensions[0] + 1, *s.dimensions[1:]), s.is_sufficient) if u and s.dimensions else s
            for s, u in zip(r.output_shapes, unknown)
        )
        return ExecutionResult(r.outputs, shapes, r.timing)


class WrongDynamicShapes(_Device):
    name = "broken-wrong-dynamic-shapes"
    PREPARED = _WrongDynamicPrepared


# ---- an insufficient buffer accepted on the async path ----------------------------------


class _AsyncSizePrepared(ReferencePreparedModel):
    def execute_async(self, request: Request, **kw):
        # the defect: the caller's buffer sizes are dropped, so the outputs always "fit"
        roomy = dataclasses.replace(
            request,
            outputs=tuple(dataclasses.replace(a, capacity=None) if a.memory is None else a for a in request.outputs),
        )
        return super().execute_async(roomy, **kw)


class AsyncAcceptsInsufficient(_Device):
    name = "broken-async-accepts-insufficient"
    PREPARED = _AsyncSizePrepared


# ---- deadlines ignored on the async path ------------------------------------------------


class _AsyncDeadlinePrepared(ReferencePreparedModel):
    def execute_async(self, request, *, deadline=None, **kw):
        return super().execute_async(request, **kw)  # the defect: the deadline is dropped


class AsyncIgnoresDeadline(_Device):
    name = "broken-async-ignores-deadline"
    PREPARED = _AsyncDeadlinePrepared


# ---- the quant8-signed twin refused -----------------------------------------------------


class RefusesSignedTwin(ReferenceDevice):
    name = "broken-refuses-signed-twin"

    def supported_operations(self, model: Model) -> list[bool]:
        out = super().supported_operations(model)
        sg = model.main
        return [
            ok
            and not any(
                sg.operands[k].type == OperandType.TENSOR_QUANT8_ASYMM_SIGNED for k in (*op.inputs, *op.outputs)
            )
            for ok, op in zip(out, sg.operations)
        ]


# ---- execution order not checked on big models ------------------------------------------


def _sorted_operations(model: Model) -> Model:
    """The model with its operations in an order where every operand is written before it is
    read (the lowest-numbered ready operation first, so a valid order is kept as it is); the
    model unchanged when no such order exists."""
    sg = model.main
    written = {k for op in sg.operations for k in op.outputs}
    ready = set(range(len(sg.operands))) - written
    left = list(range(len(sg.operations)))
    order = []
    while left:
        nxt = next((n for n in left if all(k in ready or k < 0 for k in sg.operations[n].inputs)), None)
        if nxt is None:
            return model
        order.append(nxt)
        left.remove(nxt)
        ready.update(sg.operations[nxt].outputs)
    if order == sorted(order):
        return model
    ops = tuple(sg.operations[n] for n in order)
    return dataclasses.replace(model, main=dataclasses.replace(sg, operations=ops))


class AcceptsUnorderedBigModels(ReferenceDevice):
    name = "broken-accepts-unordered-big-models"

    @staticmethod
    def _fixed(model: Model) -> Model:
        try:
            return _sorted_operations(model) if len(model.main.operations) > 3 else model
        except (IndexError, TypeError, AttributeError):  # a malformed model: let validation say so
            return model

    def supported_operations(self, model: Model) -> list[bool]:
        return super().supported_operations(self._fixed(model))

    def prepare(self, model: Model, **kw):
        return super().prepare(self._fixed(model), **kw)


# ---- a burst that fills missing inputs ----------------------------------------------------


class _MissingInputBurst(ReferenceBurst):
    def execute(self, request: Request, **kw):
        sg = self._prepared.model.main
        missing = sg.input_indexes[len(request.inputs) :]
        if missing:  # the defect: a request one input short runs with zeros for it
            zeros = tuple(
                RequestArgument(
                    np.zeros(
                        () if sg.operands[k].info.is_scalar else sg.operands[k].dimensions, sg.operands[k].info.dtype
                    )
                )
                for k in missing
            )
            request = dataclasses.replace(request, inputs=(*request.inputs, *zeros))
        return super().execute(request, **kw)


class _MissingInputPrepared(ReferencePreparedModel):
    def configure_burst(self):
        super().configure_burst()
        return _MissingInputBurst(self)


class BurstAcceptsMissingInput(_Device):
    name = "broken-burst-accepts-missing-input"
    PREPARED = _MissingInputPrepared


# ---- CONV_2D of rank 5 accepted --------------------------------------------------------------


def _conv_rank4(model: Model) -> Model:
    """The model with each rank-5 CONV_2D input and filter whose last dimension is 1 reshaped
    to rank 4 (what a lax driver does instead of checking the rank)."""
    sg = model.main
    operands = list(sg.operands)
    for op in sg.operations:
        if op.type != OperationType.CONV_2D or len(op.inputs) < 2:
            continue
        for k in op.inputs[:2]:
            o = operands[k]
            if len(o.dimensions) == 5 and o.dimensions[-1] == 1:
                value = o.value.reshape(o.dimensions[:4]) if isinstance(o.value, np.ndarray) else o.value
                operands[k] = dataclasses.replace(o, dimensions=o.dimensions[:4], value=value)
    if operands == list(sg.operands):
        return model
    return dataclasses.replace(model, main=dataclasses.replace(sg, operands=tuple(operands)))


class AcceptsRank5Conv(ReferenceDevice):
    name = "broken-accepts-rank5-conv"

    @staticmethod
    def _fixed(model: Model) -> Model:
        try:
            return _conv_rank4(model)
        except (IndexError, TypeError, AttributeError, ValueError):  # a malformed model: validation says so
            return model

    def supported_operations(self, model: Model) -> list[bool]:
        return super().supported_operations(self._fixed(model))

    def prepare(self, model: Model, **kw):
        return super().prepare(self._fixed(model), **kw)


class MixedRejections(ReferenceDevice):
    name = "broken-mixed-rejections"

    def supported_operations(self, model: Model) -> list[bool]:
        n = len(model.main.operands) % 4
        if n == 1:
            raise ValueError("supported_operations blew up")
        if n == 2:
            return [True] * len(model.main.operations)  # claims whatever it is given
        return super().supported_operations(model)

    def prepare(self, model: Model, **kw):
        if kw.get("preference") not in (0, 1, 2):
            import os

            os.abort()
        k = len(model.main.operations) % 3
        if k == 1:
            return "not a prepared model"
        if k == 2:
            raise DriverError(ErrorStatus.GENERAL_FAILURE, "prepare gave up")
        return super().prepare(model, **kw)


__all__ = [
    "AsyncWrongResults",
    "BurstIgnoresTiming",
    "WrongDynamicShapes",
    "AsyncAcceptsInsufficient",
    "AsyncIgnoresDeadline",
    "RefusesSignedTwin",
    "AcceptsUnorderedBigModels",
    "BurstAcceptsMissingInput",
    "AcceptsRank5Conv",
    "MixedRejections",
]
