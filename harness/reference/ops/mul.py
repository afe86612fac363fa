"""MUL (element-wise product, with broadcasting and a fused activation).

Signature:
  input 0: tensor, rank <= 4, of TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM,
           TENSOR_QUANT8_ASYMM_SIGNED or TENSOR_INT32.
  input 1: tensor of input 0's type, dimensions broadcasting with input 0's.  Quantised: its
           own scale and zero point.
  input 2: INT32 scalar, fused activation 0..3; must be NONE for TENSOR_INT32.
  output 0: input 0's type, the broadcast shape.  TENSOR_QUANT8_ASYMM requires
           output scale > input 0 scale * input 1 scale (the product taken in float32, as the
           reference's validation does).  The reference does not check this for
           TENSOR_QUANT8_ASYMM_SIGNED at validation, but its execution fails when the ratio
           is not below one, and so does ours.

Semantics:
- Floats: a * b in float32 (fp16 widened and narrowed once), then the activation clamp.
- TENSOR_INT32: two's-complement wrap-around, no activation.
- Quantised (TFLite's integer Mul kernel): (qa - za) * (qb - zb) as an int32, rescaled by the
  fixed-point form of float32(sa * sb) / so (below one, rounded half away from zero), plus the
  output zero point, clamped to the activation range.
- A zero-sized output skips the computation.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import activation, broadcast, quant
from nnconform.reference.kernels import lut
from nnconform.reference.ops.add_sub import (
    QUANT8,
    TYPES,
    empty_output,
    f32,
    float_arith,
    fused_activation,
    int32_arith,
    multiplier_below_one,
    validate_arith,
)
from nnconform.reference.ops.registry import OpContext, OpView, register


def validate(v: OpView) -> None:
    validate_arith(v, TYPES)
    if v.input_type(0) == T.TENSOR_QUANT8_ASYMM:
        product = np.float32(v.inputs[0].scale) * np.float32(v.inputs[1].scale)
        if not np.float32(v.outputs[0].scale) > product:
            v.fail(
                f"scale {v.outputs[0].scale:g} must exceed input 0 scale x input 1 scale ({float(product):g})", output=0
            )


def _quant_mul(ctx: OpContext, act: int) -> np.ndarray:
    # once per model and activation, as for ADD
    key, kernel = ctx.remember(("quant mul", act), lambda: _quant_mul_kernel(ctx, act))
    return lut.binary(key, kernel, ctx.inputs[0], ctx.inputs[1])


def _quant_mul_kernel(ctx: OpContext, act: int) -> tuple:
    """(table key, fixed-point kernel over two arrays of codes) of a quantised MUL."""
    in1, in2, out = ctx.in_operands[0], ctx.in_operands[1], ctx.out_operands[0]
    product_scale = float(np.float32(in1.scale) * np.float32(in2.scale))
    m, shift = multiplier_below_one(ctx, product_scale / f32(out.scale), "output")

    def kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        prod = (a.astype(np.int64) - in1.zero_point) * (b.astype(np.int64) - in2.zero_point)
        acc = quant.multiply_by_quantized_multiplier(prod, m, shift) + out.zero_point
        return activation.apply_quant(acc, act, out)

    key = ("mul", in1.zero_point, in2.zero_point, m, shift, out.zero_point, activation.quant_bounds(act, out), out.type)
    return key, kernel


@register(Op.MUL, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    shape = broadcast.output_shape(ctx)
    act = fused_activation(ctx)
    empty = empty_output(ctx, shape)
    if empty is not None:
        return [empty]
    t = ctx.in_operands[0].type
    if t in QUANT8:
        return [_quant_mul(ctx, act)]
    if t == T.TENSOR_INT32:
        return [int32_arith(ctx, np.multiply)]
    return [float_arith(ctx, np.multiply, act)]
