"""LOGICAL_AND, LOGICAL_OR (element-wise, broadcasting) and LOGICAL_NOT.

Signatures:
  LOGICAL_AND / LOGICAL_OR:
    input 0: TENSOR_BOOL8, rank >= 1.
    input 1: TENSOR_BOOL8, dimensions broadcasting with input 0's.
    output 0: TENSOR_BOOL8, the broadcast shape.
  LOGICAL_NOT:
    input 0: TENSOR_BOOL8, rank >= 1.
    output 0: TENSOR_BOOL8, input 0's shape.

Zero-sized inputs fail at run time (the reference does not opt these operations in).
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import broadcast
from nnconform.reference.ops.reduce import reject_zero_sized
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_BOOL8,)


def validate_binary(v: OpView) -> None:
    v.expect_counts(2, 1)
    v.expect_types([T.TENSOR_BOOL8, T.TENSOR_BOOL8], [T.TENSOR_BOOL8])
    v.expect_rank(0, range(1, 1 << 16))
    v.expect_rank(1, range(1, 1 << 16))
    broadcast.check_static(v, 0, 1)


def validate_not(v: OpView) -> None:
    v.expect_counts(1, 1)
    v.expect_types([T.TENSOR_BOOL8], [T.TENSOR_BOOL8])
    v.expect_rank(0, range(1, 1 << 16))


@register(Op.LOGICAL_AND, Op.LOGICAL_OR, data_types=TYPES, validate=validate_binary)
def execute_binary(ctx: OpContext) -> list[np.ndarray]:
    a, b = ctx.inputs
    if a.ndim < 1 or b.ndim < 1:
        ctx.fail("inputs must have rank >= 1")
    reject_zero_sized(ctx)
    shape = broadcast.output_shape(ctx)
    fn = np.logical_and if ctx.operation.type == Op.LOGICAL_AND else np.logical_or
    return [np.broadcast_to(fn(a, b), shape).astype(np.bool_)]


@register(Op.LOGICAL_NOT, data_types=TYPES, validate=validate_not)
def execute_not(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    if x.ndim < 1:
        ctx.fail("input must have rank >= 1")
    reject_zero_sized(ctx)
    return [np.logical_not(x)]
