"""EQUAL, NOT_EQUAL, GREATER, GREATER_EQUAL, LESS, LESS_EQUAL (element-wise, broadcasting).

Signature (all six):
  input 0: tensor of TENSOR_BOOL8, TENSOR_FLOAT16, TENSOR_FLOAT32, TENSOR_INT32,
           TENSOR_QUANT8_ASYMM or TENSOR_QUANT8_ASYMM_SIGNED (HAL 1.3), rank >= 1.
  input 1: tensor of input 0's type, dimensions broadcasting with input 0's.  Quantised: its
           own scale and zero point (they may differ from input 0's).
  output 0: TENSOR_BOOL8, the broadcast shape.

Semantics:
- Quantised inputs are compared as real values, each computed in float32 from its own
  parameters: float32(q - zero_point) * float32(scale).  No requantisation to a common scale
  happens, so nothing saturates (the reference's "overflow if requantized" tests).
- float16 values compare directly; floats follow IEEE (NaN is unequal to everything, and only
  NOT_EQUAL is true for it).  TENSOR_BOOL8 compares false < true.
- Zero-sized inputs fail at run time.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import Operand
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import broadcast
from nnconform.reference.ops.reduce import reject_zero_sized
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (
    T.TENSOR_BOOL8,
    T.TENSOR_FLOAT16,
    T.TENSOR_FLOAT32,
    T.TENSOR_INT32,
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
)

_FUNCS = {
    Op.EQUAL: np.equal,
    Op.NOT_EQUAL: np.not_equal,
    Op.GREATER: np.greater,
    Op.GREATER_EQUAL: np.greater_equal,
    Op.LESS: np.less,
    Op.LESS_EQUAL: np.less_equal,
}


def validate(v: OpView) -> None:
    v.expect_counts(2, 1)
    v.expect_types([TYPES, TYPES], [T.TENSOR_BOOL8])
    v.expect_same_type(("input", 0), ("input", 1))
    v.expect_rank(0, range(1, 1 << 16))
    v.expect_rank(1, range(1, 1 << 16))
    broadcast.check_static(v, 0, 1)


def _real(q: np.ndarray, op: Operand) -> np.ndarray:
    return (q.astype(np.int32) - np.int32(op.zero_point)).astype(np.float32) * np.float32(op.scale)


@register(*_FUNCS, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    a, b = ctx.inputs
    if a.ndim < 1 or b.ndim < 1:
        ctx.fail("inputs must have rank >= 1")
    reject_zero_sized(ctx)
    shape = broadcast.output_shape(ctx)
    if ctx.in_operands[0].info.is_quant:
        a, b = _real(a, ctx.in_operands[0]), _real(b, ctx.in_operands[1])
    out = _FUNCS[ctx.operation.type](a, b)
    return [np.broadcast_to(out, shape).astype(np.bool_)]
