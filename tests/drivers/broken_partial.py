"""Drivers with PARTIAL support, for testing partitioned execution and the capability probe.

Each is the reference driver with a restricted or dishonest claim:

    HalfReferenceEven   claims only operations with an even operation code; computes them
                        exactly (partitioning must then be exact: every vector passes)
    HalfReferenceOdd    the same for odd codes (together the two put every operation on the
                        driver side of some partition)
    QuantConvOverClaim  claims CONV_2D on TENSOR_QUANT8_ASYMM but fails to prepare any model
                        with one (an over-claim: the probe must flag it)
    FloorUnderClaim     refuses FLOOR in supported_operations although it computes it right
                        (an under-claim: the probe must flag it)
    ReluIgnoresStrides  RELU reads a non-contiguous input array as if it were contiguous memory;
                        right on a case's own inputs, wrong on a boundary tensor handed over
                        from another partition (nnconform.verdict.partition passes those as strided
                        views into a pool).  Only in-process runs see it: behind a driver
                        host every array arrives contiguous.  It refuses ADD, so the helper
                        ADDs of the AOSP vectors run on the reference and feed its RELU.
    MirrorPadReflectOnly
                        claims MIRROR_PAD only in REFLECT mode (a parameter-dependent refusal
                        the probe's per-cell claims cannot see): the random suite redraws the
                        refused examples instead of skipping them

Name them on the command line as ``tests/drivers/broken_partial.py:FloorUnderClaim``.
"""

from __future__ import annotations

import numpy as np

from nnconform.driver import DriverError, ErrorStatus
from nnconform.drivers.reference import ReferenceDevice, ReferencePreparedModel
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.ir import Request, RequestArgument


class _Claiming(ReferenceDevice):
    """The reference, with ``claims(model, index)`` deciding each main-graph operation."""

    def claims(self, model, index: int) -> bool:
        return True

    def supported_operations(self, model):
        full = super().supported_operations(model)
        return [bool(s) and self.claims(model, n) for n, s in enumerate(full)]


class HalfReferenceEven(_Claiming):
    name = "reference-half-even"
    parity = 0

    def claims(self, model, index):
        return int(model.main.operations[index].type) % 2 == self.parity


class HalfReferenceOdd(HalfReferenceEven):
    name = "reference-half-odd"
    parity = 1


def _has_quant8_conv(model) -> bool:
    return any(
        op.type == Op.CONV_2D and sg.operands[op.inputs[0]].type == T.TENSOR_QUANT8_ASYMM
        for sg in model.subgraphs()
        for op in sg.operations
    )


class QuantConvOverClaim(ReferenceDevice):
    name = "broken-quant-conv-overclaim"

    def prepare(self, model, **kw):
        if _has_quant8_conv(model):
            raise DriverError(ErrorStatus.GENERAL_FAILURE, "quant8 CONV_2D kernel not available")
        return super().prepare(model, **kw)


class FloorUnderClaim(_Claiming):
    name = "broken-floor-underclaim"

    def claims(self, model, index):
        return model.main.operations[index].type != Op.FLOOR


def _as_if_contiguous(arr: np.ndarray) -> np.ndarray:
    """What a driver that ignores strides reads: ``arr.size`` elements straight from the
    start of its memory (within the base buffer, never past it)."""
    base = arr
    while isinstance(base.base, np.ndarray):
        base = base.base
    if arr.flags.c_contiguous or not base.flags.c_contiguous or base.dtype != arr.dtype:
        return arr
    start = (arr.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // arr.itemsize
    flat = base.reshape(-1)
    if start < 0 or start + arr.size > flat.size:
        return arr
    return flat[start : start + arr.size].reshape(arr.shape).copy()


class _StrideBlindPrepared(ReferencePreparedModel):
    def execute(self, request: Request, **kw):
        sg = self.model.main
        relu_inputs = {i for op in sg.operations if op.type == Op.RELU for i in op.inputs[:1]}
        args = []
        for arg, idx in zip(request.inputs, sg.input_indexes):
            if idx in relu_inputs and isinstance(arg.value, np.ndarray):
                arg = RequestArgument(
                    value=_as_if_contiguous(arg.value),
                    dimensions=arg.dimensions,
                    capacity=arg.capacity,
                    has_no_value=arg.has_no_value,
                    memory=arg.memory,
                )
            args.append(arg)
        return super().execute(Request(tuple(args), request.outputs), **kw)


class ReluIgnoresStrides(_Claiming):
    name = "broken-relu-strides"

    def claims(self, model, index):
        return model.main.operations[index].type != Op.ADD

    def prepare(self, model, **kw):
        super().prepare(model, **kw)  # the reference's checks
        return _StrideBlindPrepared(model)


class MirrorPadReflectOnly(_Claiming):
    """Refuses MIRROR_PAD in SYMMETRIC mode (input 2 == 1), honestly: it never claims it."""

    name = "reference-mirror-pad-reflect-only"

    def claims(self, model, index):
        op = model.main.operations[index]
        if op.type != Op.MIRROR_PAD:
            return True
        mode = model.main.operands[op.inputs[2]]
        return mode.value is not None and int(np.asarray(mode.value)) == 0
