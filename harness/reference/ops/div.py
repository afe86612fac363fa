"""DIV (element-wise quotient, with broadcasting and a fused activation).

Signature:
  input 0: tensor, rank <= 4, of TENSOR_FLOAT32, TENSOR_FLOAT16 or TENSOR_INT32.
  input 1: tensor of input 0's type, dimensions broadcasting with input 0's.
  input 2: INT32 scalar, fused activation 0..3; must be NONE for TENSOR_INT32.
  output 0: input 0's type, the broadcast shape.
There is no quantised DIV.  (The reference's validation lets TENSOR_QUANT8_ASYMM_SIGNED
through, but its execution has no kernel for it; NeuralNetworks.h does not list it, so it is
rejected here.)

Semantics:
- Floats: a / b in float32 (fp16 widened and narrowed once), then the activation clamp.
  Division by zero follows IEEE (inf, or nan for 0/0).
- TENSOR_INT32: floor division (rounds toward negative infinity: -5 / 2 = -3), and a divisor
  of 0 gives 0 (NNAPI leaves it undefined; the reference returns 0 rather than trap).
  INT32_MIN / -1 wraps to INT32_MIN.
- A zero-sized output skips the computation.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import broadcast
from nnconform.reference.ops.add_sub import empty_output, float_arith, fused_activation, int32_arith, validate_arith
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32)


def validate(v: OpView) -> None:
    validate_arith(v, TYPES)


def _floor_div_or_zero(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    zero = b == 0
    return np.where(zero, 0, np.floor_divide(a, np.where(zero, 1, b)))


@register(Op.DIV, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    shape = broadcast.output_shape(ctx)
    act = fused_activation(ctx)
    empty = empty_output(ctx, shape)
    if empty is not None:
        return [empty]
    if ctx.in_operands[0].type == T.TENSOR_INT32:
        return [int32_arith(ctx, _floor_div_or_zero)]
    return [float_arith(ctx, np.divide, act)]
