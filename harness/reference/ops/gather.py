"""GATHER: pick slices along one axis by index.

inputs:  0 tensor of TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_INT32, TENSOR_QUANT8_ASYMM or
           TENSOR_QUANT8_ASYMM_SIGNED, rank n >= 1;
         1 axis, INT32 scalar in [-n, n) (negative counts from the end);
         2 indices, TENSOR_INT32 of any rank k (k = 0 allowed), each in [0, dim(axis)).
output:  0 the input's type, shape input.dims[:axis] + indices.dims + input.dims[axis + 1:]
           (rank n + k - 1).  Quantised outputs carry the input's scale and zero point.

An index outside the axis is a run-time failure; zero-sized inputs are rejected at run time.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


def validate(v: OpView) -> None:
    v.expect_counts(3, 1)
    v.expect_types([TYPES, T.INT32, T.TENSOR_INT32], [TYPES])
    v.expect_same_type(("input", 0), ("output", 0))
    v.expect_rank(0, range(1, 1 << 16))
    rank = len(v.inputs[0].dimensions)
    axis = v.constant_scalar(1)
    if axis is not None and rank and not -rank <= axis < rank:
        v.fail(f"axis must be in [{-rank}, {rank}), got {axis}", input=1)
    if v.inputs[0].info.is_quant:
        v.expect_same_quant(("input", 0), ("output", 0))


@register(Op.GATHER, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x, indices = ctx.inputs[0], ctx.inputs[2]
    axis = int(ctx.scalar(1))
    if x.ndim < 1:
        ctx.fail("input must have rank >= 1")
    if not -x.ndim <= axis < x.ndim:
        ctx.fail(f"axis {axis} is out of range for rank {x.ndim}")
    for i in (0, 2):
        if ctx.inputs[i].size == 0:
            ctx.fail(f"input {i} is zero-sized {list(ctx.inputs[i].shape)}; GATHER does not accept zero-sized tensors")
    size = x.shape[axis]
    bad = (indices < 0) | (indices >= size)
    if np.any(bad):
        ctx.fail(f"index {int(indices[bad].reshape(-1)[0])} is outside [0, {size}) on axis {axis}")
    return [np.take(x, indices.astype(np.intp), axis=axis).astype(ctx.output_dtype(0), copy=False)]
