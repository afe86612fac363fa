"""ARGMAX and ARGMIN: index of the largest / smallest element along one axis.

Signature (both):
  input 0: tensor of TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_INT32, TENSOR_QUANT8_ASYMM or
           TENSOR_QUANT8_ASYMM_SIGNED (HAL 1.3), rank >= 1, not zero-sized.
  input 1: axis, INT32 scalar in [-rank, rank) (negative counts from the end).
  output 0: TENSOR_INT32, the input's shape without the axis; [1] for a 1-D input.

Semantics (the reference scans the axis keeping the first element that is strictly
larger / smaller than the best so far):
- ties go to the lowest index;
- quantised inputs compare stored values (one scale and zero point, so the order is the real
  order);
- NaN: a NaN never compares larger or smaller, so it is skipped; if the first element is NaN
  nothing ever beats it and the answer is 0.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.reduce import reject_zero_sized
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


def validate(v: OpView) -> None:
    v.expect_counts(2, 1)
    v.expect_types([TYPES, T.INT32], [T.TENSOR_INT32])
    v.expect_rank(0, range(1, 1 << 16))
    rank = len(v.inputs[0].dimensions)
    axis = v.constant_scalar(1)
    if axis is not None and rank and not -rank <= axis < rank:
        v.fail(f"axis must be in [{-rank}, {rank}), got {axis}", input=1)


def _execute(ctx: OpContext, is_min: bool) -> list[np.ndarray]:
    x = ctx.inputs[0]
    if x.ndim < 1:
        ctx.fail("input must have rank >= 1")
    reject_zero_sized(ctx)
    axis = int(ctx.scalar(1))
    if not -x.ndim <= axis < x.ndim:
        ctx.fail(f"axis {axis} is out of range [{-x.ndim}, {x.ndim})")
    axis %= x.ndim
    if x.dtype.kind == "f":
        nan = np.isnan(x)
        filler = np.inf if is_min else -np.inf
        idx = (np.argmin if is_min else np.argmax)(np.where(nan, filler, x), axis=axis)
        # A leading NaN is never replaced; otherwise NaN (now +-inf) cannot beat a real value,
        # and ties with an actual +-inf resolve to the lower index either way.
        idx = np.where(np.take(nan, 0, axis=axis), 0, idx)
    else:
        idx = (np.argmin if is_min else np.argmax)(x, axis=axis)
    out = idx.astype(np.int32)
    return [out.reshape(out.shape if x.ndim > 1 else (1,))]


@register(Op.ARGMAX, data_types=TYPES, validate=validate)
def execute_argmax(ctx: OpContext) -> list[np.ndarray]:
    return _execute(ctx, is_min=False)


@register(Op.ARGMIN, data_types=TYPES, validate=validate)
def execute_argmin(ctx: OpContext) -> list[np.ndarray]:
    return _execute(ctx, is_min=True)
