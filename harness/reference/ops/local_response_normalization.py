"""LOCAL_RESPONSE_NORMALIZATION: normalise each element by the squares of its neighbours
along one axis.

Signature:
  0: input, rank 1..4, TENSOR_FLOAT32 or TENSOR_FLOAT16
  1: INT32 radius of the window (the window is [i - radius, i + radius], cut at the edges)
  2: bias, 3: alpha, 4: beta: FLOAT32 scalars for TENSOR_FLOAT32, FLOAT16 for TENSOR_FLOAT16
  5: optional INT32 axis, default -1, in [-rank, rank)
Output 0: same type and shape.

    sqr_sum[..., i, ...] = sum over d in the window of input[..., d, ...]^2
    output = input * (bias + alpha * sqr_sum) ** -beta

No quantised form exists.  FLOAT16 (tensor and scalars) is widened to float32 and the result
narrowed back, as the reference does.  The reference accepts any radius and bias; a negative
radius simply gives an empty window (sqr_sum = 0).
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
_SCALAR = {T.TENSOR_FLOAT32: T.FLOAT32, T.TENSOR_FLOAT16: T.FLOAT16}


def validate(v: OpView) -> None:
    v.expect_counts((5, 6), 1)
    v.expect_types([TYPES], [TYPES])
    s = _SCALAR[v.inputs[0].type]
    v.expect_types([None, T.INT32, s, s, s, T.INT32])
    v.expect_same_type(("input", 0), ("output", 0))
    v.expect_rank(0, range(1, 5))
    axis = v.constant_scalar(5) if len(v.inputs) == 6 else -1
    rank = len(v.inputs[0].dimensions)
    if axis is not None and rank and not -rank <= axis < rank:
        v.fail(f"axis must be in [{-rank}, {rank}), got {axis}", input=5)


@register(Op.LOCAL_RESPONSE_NORMALIZATION, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    rank = x.ndim
    axis = ctx.scalar(5, -1) if len(ctx.inputs) == 6 else -1
    if not 1 <= rank <= 4:
        ctx.fail(f"input rank must be 1..4, got {rank}")
    if not -rank <= axis < rank:
        ctx.fail(f"axis must be in [{-rank}, {rank}), got {axis}")
    radius = int(ctx.scalar(1))
    bias, alpha, beta = (np.float32(ctx.scalar(i)) for i in (2, 3, 4))
    xf = np.moveaxis(x.astype(np.float32), axis, -1)
    n = xf.shape[-1]
    # Window sums from a prefix sum of squares: sum[i] = P[min(n, i+r+1)] - P[max(0, i-r)].
    sq = xf.astype(np.float64) ** 2
    prefix = np.concatenate([np.zeros(sq.shape[:-1] + (1,)), np.cumsum(sq, axis=-1)], axis=-1)
    i = np.arange(n)
    hi = np.clip(i + radius + 1, 0, n)
    lo = np.clip(i - radius, 0, n)
    sqr_sum = np.where(hi > lo, prefix[..., hi] - prefix[..., lo], 0.0)
    scale = (np.float64(bias) + np.float64(alpha) * sqr_sum) ** -np.float64(beta)
    y = (xf * scale).astype(np.float32)
    return [np.moveaxis(y, -1, axis).astype(ctx.output_dtype(0))]
