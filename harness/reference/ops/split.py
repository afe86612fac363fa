"""SPLIT: cut a tensor into equal parts along one axis.

inputs:  0 tensor of TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_INT32, TENSOR_QUANT8_ASYMM or
           TENSOR_QUANT8_ASYMM_SIGNED, rank >= 1;
         1 axis, INT32 scalar in [-rank, rank) (negative counts from the end);
         2 num_splits, INT32 scalar: must equal the number of outputs and divide the axis.
outputs: 0 .. num_splits - 1, the input's type, the input's shape with the axis divided by
           num_splits.  Quantised outputs carry the input's scale and zero point.

Zero-sized inputs are rejected at run time.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


def validate(v: OpView) -> None:
    if len(v.outputs) < 1:
        v.fail("needs at least 1 output")
    v.expect_counts(3, len(v.outputs))
    v.expect_types([TYPES, T.INT32, T.INT32], [TYPES] * len(v.outputs))
    v.expect_same_type(("input", 0), *[("output", j) for j in range(len(v.outputs))])
    v.expect_rank(0, range(1, 1 << 16))
    rank = len(v.inputs[0].dimensions)
    axis = v.constant_scalar(1)
    if axis is not None and rank and not -rank <= axis < rank:
        v.fail(f"axis must be in [{-rank}, {rank}), got {axis}", input=1)
    n = v.constant_scalar(2)
    if n is not None and n != len(v.outputs):
        v.fail(f"num_splits is {n} but the operation has {len(v.outputs)} outputs", input=2)
    if v.inputs[0].info.is_quant:
        v.expect_same_quant(("input", 0), *[("output", j) for j in range(len(v.outputs))])


@register(Op.SPLIT, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    axis, n = int(ctx.scalar(1)), int(ctx.scalar(2))
    if x.ndim < 1:
        ctx.fail("input must have rank >= 1")
    if x.size == 0:
        ctx.fail(f"input is zero-sized {list(x.shape)}; SPLIT does not accept zero-sized tensors")
    if not -x.ndim <= axis < x.ndim:
        ctx.fail(f"axis {axis} is out of range for rank {x.ndim}")
    if n != len(ctx.out_operands):
        ctx.fail(f"num_splits is {n} but the operation has {len(ctx.out_operands)} outputs")
    if n <= 0 or x.shape[axis] % n:
        ctx.fail(f"num_splits {n} does not evenly divide dimension {axis % x.ndim} of size {x.shape[axis]}")
    return [
        np.ascontiguousarray(part).astype(ctx.output_dtype(j), copy=False)
        for j, part in enumerate(np.split(x, n, axis=axis))
    ]
