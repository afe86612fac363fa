"""TILE: repeats a tensor along each axis.

Signature:
  input 0   TENSOR_FLOAT16, TENSOR_FLOAT32, TENSOR_INT32, TENSOR_QUANT8_ASYMM or
            TENSOR_QUANT8_ASYMM_SIGNED (HAL 1.3), rank n from 1.
  input 1   TENSOR_INT32, 1-D of length n: multiples (>= 0).
  output 0  same type, rank and quantisation; dimension i is input.dims[i] * multiples[i], and
            the whole input block is repeated (a b c d tiled by 2 is a b c d a b c d).
The reference reads n multiples without checking the length; we require exactly n.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.registry import OpContext, OpView, register
from nnconform.reference.ops.reshape import check_1d_int32, check_same_type_and_quant

TYPES = (T.TENSOR_FLOAT16, T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


def validate(v: OpView) -> None:
    v.expect_counts(2, 1)
    v.expect_types([TYPES, T.TENSOR_INT32], [TYPES])
    check_same_type_and_quant(v)
    check_1d_int32(v, 1, "multiples")
    x, m = v.inputs[0], v.inputs[1]
    if x.dimensions and m.dimensions and m.dimensions[0] and m.dimensions[0] != len(x.dimensions):
        v.fail(f"{m.dimensions[0]} multiples for a rank-{len(x.dimensions)} input", input=1)
    mult = v.constant(1)
    if mult is not None and (mult < 0).any():
        v.fail(f"multiples {mult.tolist()} have a negative entry", input=1)


@register(Op.TILE, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x, mult = ctx.inputs
    if mult.ndim != 1 or mult.size != x.ndim:
        ctx.fail(f"multiples of shape {list(mult.shape)} for a rank-{x.ndim} input")
    if (mult < 0).any():
        ctx.fail(f"multiples {mult.tolist()} have a negative entry")
    return [np.tile(x, tuple(int(m) for m in mult))]
