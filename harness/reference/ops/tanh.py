"""TANH: hyperbolic tangent.

  input 0: TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM or TENSOR_QUANT8_ASYMM_SIGNED,
           rank <= 4 (zero-sized tensors allowed).
  output 0: same type and shape.
  Quantised outputs have a fixed encoding: scale 1/128 with zero point 128 (QUANT8_ASYMM) or
  0 (QUANT8_ASYMM_SIGNED); any other output quantisation is rejected.

Floats: float32 ``tanh`` (fp16 widened first).  Quantised: bit-faithful to the TFLite kernels
the reference calls: the centred input is rescaled to Q4.27 by ``input_scale * 2**27``,
inputs at or beyond the input radius saturate to the ends of the output range, the rest go
through gemmlowp's fixed-point ``tanh`` (Q0.31) and a rounding shift by 24 (units of 1/128),
then the output zero point is added; 256 (uint8 only) is clamped to 255.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import quant
from nnconform.reference.arith.fixedpoint import fixed_tanh
from nnconform.reference.arith.quant import rounding_divide_by_pot, saturating_rounding_doubling_high_mul
from nnconform.reference.ops.logistic import (
    TYPES,
    check_fixed_output_quant,
    input_rescale_params,
    validate_fixed_output_activation,
)
from nnconform.reference.ops.registry import OpContext, OpView, register

OUTPUT_ENCODING = {T.TENSOR_QUANT8_ASYMM: (1.0 / 128, 128), T.TENSOR_QUANT8_ASYMM_SIGNED: (1.0 / 128, 0)}


def validate(v: OpView) -> None:
    validate_fixed_output_activation(v, OUTPUT_ENCODING)


@register(Op.TANH, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    in_op, out_op = ctx.in_operands[0], ctx.out_operands[0]
    if x.ndim > 4:
        ctx.fail(f"input rank {x.ndim} exceeds 4")
    if in_op.info.is_float:
        return [np.tanh(x.astype(np.float32)).astype(out_op.info.dtype)]
    check_fixed_output_quant(out_op.scale, out_op.zero_point, OUTPUT_ENCODING[out_op.type], ctx.fail)
    if x.size == 0:
        return [np.empty(x.shape, out_op.info.dtype)]
    multiplier, left_shift, radius = input_rescale_params(ctx)
    centred = x.astype(np.int64) - in_op.zero_point
    inside = np.clip(centred, -radius, radius)  # keeps the shifted value in int32
    q4 = saturating_rounding_doubling_high_mul(inside << left_shift, multiplier)
    y = rounding_divide_by_pot(fixed_tanh(q4, 4), 24) + out_op.zero_point
    lo, hi = quant.quant_range(out_op)
    # uint8 only: +1.0 rounds to 256, one past the top code
    y = np.where(y == 256, 255, y)
    # tanh(0) = 0 at the zero-point code, also when a coarse input scale makes the radius 0
    # (AOSP's `<= -radius` test gives -1 there; see logistic.py)
    edge = centred != 0
    y = np.where(edge & (centred <= -radius), lo, np.where(edge & (centred >= radius), hi, y))
    return [np.clip(y, lo, hi).astype(out_op.info.dtype)]
