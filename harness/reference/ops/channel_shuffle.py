"""CHANNEL_SHUFFLE: interleave channel groups along one axis (ShuffleNet).

inputs:  0 tensor of TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM or
           TENSOR_QUANT8_ASYMM_SIGNED, rank 1..4;
         1 num_groups, INT32 scalar > 0 that divides the axis size;
         2 axis, INT32 scalar in [-rank, rank) (negative counts from the end).
output:  0 the input's type and shape; quantised outputs carry the input's scale and zero point.

With G groups of size S = dim / G along the axis, output channel i * G + j is input channel
j * S + i: the axis viewed as a [G, S] matrix is transposed to [S, G].  Zero-sized inputs are
rejected at run time.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


def validate(v: OpView) -> None:
    v.expect_counts(3, 1)
    v.expect_types([TYPES, T.INT32, T.INT32], [TYPES])
    v.expect_same_type(("input", 0), ("output", 0))
    v.expect_rank(0, range(1, 5))
    groups = v.constant_scalar(1)
    if groups is not None and groups <= 0:
        v.fail(f"num_groups must be > 0, got {groups}", input=1)
    rank = len(v.inputs[0].dimensions)
    axis = v.constant_scalar(2)
    if axis is not None and rank and not -rank <= axis < rank:
        v.fail(f"axis must be in [{-rank}, {rank}), got {axis}", input=2)
    if v.inputs[0].info.is_quant:
        v.expect_same_quant(("input", 0), ("output", 0))


@register(Op.CHANNEL_SHUFFLE, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    groups, axis = int(ctx.scalar(1)), int(ctx.scalar(2))
    if not 1 <= x.ndim <= 4:
        ctx.fail(f"input rank must be 1..4, got {x.ndim}")
    if x.size == 0:
        ctx.fail(f"input is zero-sized {list(x.shape)}; CHANNEL_SHUFFLE does not accept zero-sized tensors")
    if not -x.ndim <= axis < x.ndim:
        ctx.fail(f"axis {axis} is out of range for rank {x.ndim}")
    axis %= x.ndim
    size = x.shape[axis]
    if groups <= 0 or size % groups:
        ctx.fail(f"num_groups {groups} must be > 0 and divide dimension {axis} of size {size}")
    outer, inner = int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis + 1 :]))
    y = x.reshape(outer, groups, size // groups, inner).transpose(0, 2, 1, 3).reshape(x.shape)
    return [y.astype(ctx.output_dtype(0), copy=False)]
