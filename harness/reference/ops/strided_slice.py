"""STRIDED_SLICE: a strided sub-tensor, with begin/end masks and axis shrinking.

inputs:  0 tensor of TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM or
           TENSOR_QUANT8_ASYMM_SIGNED, rank 1..4;
         1 begin, 2 end, 3 strides: TENSOR_INT32 [rank]; strides must be non-zero;
         4 begin_mask, 5 end_mask, 6 shrink_axis_mask: INT32 scalars, bit i for dimension i.
output:  0 the input's type, rank = rank - popcount(shrink_axis_mask), or shape [1] when every
           dimension shrinks.  Quantised outputs carry the input's scale and zero point.

Per dimension (dim = its size), following the reference's index clamping:
- stride > 0: begin/end < -dim clamp to 0, negatives add dim, values >= dim clamp to dim.
- stride < 0: begin/end < -dim become -1 ("before the start"), negatives add dim, values
  >= dim clamp to dim - 1.
- a set begin_mask bit uses 0 (stride > 0) or dim - 1 (stride < 0); a set end_mask bit uses
  dim (stride > 0) or -1 (stride < 0).
- the dimension keeps max(0, ceil((end - begin) / stride)) elements begin, begin + stride, ...
- a shrunk dimension must have stride > 0 and exactly one element.
Zero-sized inputs are rejected at run time.
"""

from __future__ import annotations

import math

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


def validate(v: OpView) -> None:
    v.expect_counts(7, 1)
    v.expect_types([TYPES, T.TENSOR_INT32, T.TENSOR_INT32, T.TENSOR_INT32, T.INT32, T.INT32, T.INT32], [TYPES])
    v.expect_same_type(("input", 0), ("output", 0))
    v.expect_rank(0, range(1, 5))
    rank = len(v.inputs[0].dimensions)
    for i, what in ((1, "begin"), (2, "end"), (3, "strides")):
        v.expect_rank(i, (1,))
        dims = v.inputs[i].dimensions
        if rank and dims and dims[0] and dims[0] != rank:
            v.fail(f"{what} has {dims[0]} entries, the input has rank {rank}", input=i)
    strides = v.constant(3)
    if strides is not None and np.any(strides == 0):
        v.fail(f"strides must be non-zero, got {strides.tolist()}", input=3)
    if v.inputs[0].info.is_quant:
        v.expect_same_quant(("input", 0), ("output", 0))


def _clamped_index(index: int, dim: int, positive_stride: bool) -> int:
    if positive_stride:
        return dim if index >= dim else min(max(index, -dim), dim) % dim
    return -1 if index < -dim else min(max(index, -dim), dim - 1) % dim


def slice_plan(shape, begin, end, strides, begin_mask, end_mask, shrink_mask):
    """Per dimension (start, stride, count, shrink), or raise ValueError with the reason."""
    plan = []
    for d, dim in enumerate(shape):
        stride = int(strides[d])
        if stride == 0:
            raise ValueError(f"stride of dimension {d} is 0")
        pos = stride > 0
        b = (0 if pos else dim - 1) if begin_mask & (1 << d) else _clamped_index(int(begin[d]), dim, pos)
        e = (dim if pos else -1) if end_mask & (1 << d) else _clamped_index(int(end[d]), dim, pos)
        count = max(0, math.ceil((e - b) / stride))
        shrink = bool(shrink_mask & (1 << d))
        if shrink and (stride < 0 or count != 1):
            raise ValueError(
                f"dimension {d} is shrunk but its slice has stride {stride} and "
                f"{count} elements (needs stride > 0 and exactly 1)"
            )
        plan.append((b, stride, count, shrink))
    return plan


@register(Op.STRIDED_SLICE, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    if not 1 <= x.ndim <= 4:
        ctx.fail(f"input rank must be 1..4, got {x.ndim}")
    if x.size == 0:
        ctx.fail(f"input is zero-sized {list(x.shape)}; STRIDED_SLICE does not accept zero-sized tensors")
    for i, what in ((1, "begin"), (2, "end"), (3, "strides")):
        if ctx.inputs[i].shape != (x.ndim,):
            ctx.fail(f"{what} must have shape [{x.ndim}], got {list(ctx.inputs[i].shape)}")
    try:
        plan = slice_plan(
            x.shape,
            ctx.inputs[1],
            ctx.inputs[2],
            ctx.inputs[3],
            int(ctx.scalar(4)),
            int(ctx.scalar(5)),
            int(ctx.scalar(6)),
        )
    except ValueError as e:
        ctx.fail(str(e))
    index = np.ix_(*[b + s * np.arange(n, dtype=np.int64) for b, s, n, _ in plan])
    out_shape = [n for _, _, n, shrink in plan if not shrink] or [1]
    return [x[index].reshape(out_shape).astype(ctx.output_dtype(0), copy=False)]
