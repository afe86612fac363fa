"""LOGISTIC (sigmoid), plus the gemmlowp fixed-point transcendental functions that the
quantised LOGISTIC, TANH and SOFTMAX paths share.

LOGISTIC
  input 0: TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM or TENSOR_QUANT8_ASYMM_SIGNED,
           rank <= 4 (zero-sized tensors allowed: the output is empty).
  output 0: same type and shape, ``1 / (1 + exp(-x))``.
  Quantised outputs have a fixed encoding: scale 1/256 with zero point 0 (QUANT8_ASYMM) or
  -128 (QUANT8_ASYMM_SIGNED); any other output quantisation is rejected.

Floats: computed in float32 (fp16 is widened first and narrowed at the end), as the reference.
Quantised: bit-faithful to the TFLite kernels the reference calls.  The centred input
``q - zp`` is rescaled to a Q4.27 fixed-point value with the multiplier
``input_scale * 2**27`` (always > 1; a left shift plus an int32 mantissa), values whose
magnitude reaches the "input radius" saturate to the ends of the output range, and the rest
go through gemmlowp's fixed-point ``logistic`` (Q0.31 result) and a rounding shift by 23.
A result of 256 (only reachable for uint8) is clamped to 255.

The fixed-point helpers live in ``fixedpoint.py``.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import quant
from nnconform.reference.arith.fixedpoint import (
    calculate_input_radius,
    f32,
    fixed_logistic,
    quantize_multiplier_greater_than_one,
)
from nnconform.reference.arith.quant import rounding_divide_by_pot
from nnconform.reference.arith.quant import saturating_rounding_doubling_high_mul as _srdhm
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)

# ---------------------------------------------------------------------------------------
# Shared checks for the fixed-output-encoding activations (LOGISTIC, TANH).
# ---------------------------------------------------------------------------------------


def validate_fixed_output_activation(v: OpView, encodings: dict) -> None:
    """One tensor in, one out, same type, rank <= 4; quantised outputs must use the fixed
    (scale, zero point) of ``encodings[type]``."""
    v.expect_counts(1, 1)
    v.expect_types([TYPES], [TYPES])
    v.expect_same_type(("input", 0), ("output", 0))
    v.expect_rank(0, range(0, 5))
    out = v.outputs[0]
    if out.type in encodings:
        check_fixed_output_quant(out.scale, out.zero_point, encodings[out.type], lambda msg: v.fail(msg, output=0))


def check_fixed_output_quant(scale: float, zero_point: int, wanted: tuple[float, int], fail) -> None:
    w_scale, w_zp = wanted
    # the reference compares the float scale for exact equality
    if np.float32(scale) != np.float32(w_scale) or zero_point != w_zp:
        fail(
            f"quantised output must have scale {w_scale:g} and zero point {w_zp}, "
            f"got scale {scale:g} and zero point {zero_point}"
        )


def input_rescale_params(ctx: OpContext, integer_bits: int = 4) -> tuple[int, int, int]:
    """(multiplier, left_shift, radius) mapping centred quantised inputs onto Q4.27."""
    scale = ctx.in_operands[0].scale
    params = quantize_multiplier_greater_than_one(f32(scale) * float(1 << (31 - integer_bits)))
    if params is None:
        ctx.fail(f"input scale {scale:g} is too small for the fixed-point kernel")
    multiplier, left_shift = params
    return multiplier, left_shift, calculate_input_radius(integer_bits, left_shift)


# ---------------------------------------------------------------------------------------
# LOGISTIC
# ---------------------------------------------------------------------------------------

OUTPUT_ENCODING = {T.TENSOR_QUANT8_ASYMM: (1.0 / 256, 0), T.TENSOR_QUANT8_ASYMM_SIGNED: (1.0 / 256, -128)}


def validate(v: OpView) -> None:
    validate_fixed_output_activation(v, OUTPUT_ENCODING)


@register(Op.LOGISTIC, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    in_op, out_op = ctx.in_operands[0], ctx.out_operands[0]
    if x.ndim > 4:
        ctx.fail(f"input rank {x.ndim} exceeds 4")
    if in_op.info.is_float:
        xf = x.astype(np.float32)
        with np.errstate(over="ignore"):
            y = np.float32(1) / (np.float32(1) + np.exp(-xf))
        return [y.astype(out_op.info.dtype)]
    check_fixed_output_quant(out_op.scale, out_op.zero_point, OUTPUT_ENCODING[out_op.type], ctx.fail)
    if x.size == 0:
        return [np.empty(x.shape, out_op.info.dtype)]
    multiplier, left_shift, radius = input_rescale_params(ctx)
    centred = x.astype(np.int64) - in_op.zero_point
    inside = np.clip(centred, -radius, radius)  # keeps the shifted value in int32
    q4 = _srdhm(inside << left_shift, multiplier)
    # Q0.31 -> units of 1/256, rounding; a result of exactly 1.0 is clamped below.
    y = rounding_divide_by_pot(fixed_logistic(q4, 4), 23)
    lo, hi = quant.quant_range(out_op)
    # The zero-point code is exactly 0.0 whatever the scale: logistic(0) = 0.5.  With an input
    # scale of about 8 or more the radius is 0, and AOSP's `<= -radius` test sends that code to
    # the bottom of the range too (found by the exhaustive sweep; NNAPI defines 0.5).
    edge = centred != 0
    y = np.where(edge & (centred <= -radius), 0, np.where(edge & (centred >= radius), 255, np.minimum(y, 255)))
    return [np.clip(y + out_op.zero_point, lo, hi).astype(out_op.info.dtype)]
