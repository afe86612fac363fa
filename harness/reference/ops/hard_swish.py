"""HARD_SWISH: ``x * relu6(x + 3) / 6``.

  input 0: TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM or TENSOR_QUANT8_ASYMM_SIGNED
           (HAL 1.3), any rank; zero-sized tensors allowed (the output is empty).
  output 0: same type and shape; a quantised output has its own scale and zero point.

Floats: float32 ``x * min(6, max(0, x + 3)) / 6`` (fp16 widened first, as the reference).

Quantised: bit-faithful to the TFLite kernel the reference calls, which works in int16
fixed point.  Two multipliers are derived in float32 then quantised to an int32 mantissa and
exponent and cut down to int16 mantissas (rounding, saturating at 32767):
  output multiplier  = (input_scale / 128) / output_scale   (its exponent must be <= 0:
                       an output scale below input_scale / 64 fails the execution),
  "reluish" multiplier = (input_scale / 128) / (3 / 32768).
Per element: v = (q - zp_in) * 128; p = v on the output scale (rounding doubling high
multiply); r = v on a scale where 3.0 is 32768 (saturating shifts for a positive exponent,
a rounding shift for a negative one), mapped from [-1, 1] to [0, 1]; the result is
``r * p`` with a truncating doubling high multiply, shifted right (rounding) by the output
exponent, plus zp_out, clamped to the type's range.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import quant
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
I16_MIN, I16_MAX = -(1 << 15), (1 << 15) - 1


def validate(v: OpView) -> None:
    v.expect_counts(1, 1)
    v.expect_types([TYPES], [TYPES])
    v.expect_same_type(("input", 0), ("output", 0))


def _to_int16_multiplier(m: int) -> int:
    if m >= quant.INT32_MAX - (1 << 15):
        return I16_MAX
    return (m + (1 << 15)) >> 16


def _srdhm16(a, b) -> np.ndarray:
    """gemmlowp SaturatingRoundingDoublingHighMul on int16 (C division truncates)."""
    ab = np.asarray(a, np.int64) * np.asarray(b, np.int64)
    num = ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    out = np.where(num >= 0, num >> 15, -((-num) >> 15))
    return np.where((np.asarray(a) == I16_MIN) & (np.asarray(b) == I16_MIN), I16_MAX, out)


def _sdhm16(a, b) -> np.ndarray:
    """TFLite SaturatingDoublingHighMul on int16: like the above but truncating, no nudge."""
    ab = np.asarray(a, np.int64) * np.asarray(b, np.int64)
    out = np.where(ab >= 0, ab >> 15, -((-ab) >> 15))
    return np.where((np.asarray(a) == I16_MIN) & (np.asarray(b) == I16_MIN), I16_MAX, out)


def _saturating_left_shift16(x, amount: int) -> np.ndarray:
    return np.clip(np.asarray(x, np.int64) << amount, I16_MIN, I16_MAX)


def _hard_swish_quant(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    in_op, out_op = ctx.in_operands[0], ctx.out_operands[0]
    f32 = np.float32
    hires_input_scale = f32(1.0 / 128.0) * f32(in_op.scale)
    out_real = hires_input_scale / f32(out_op.scale)
    reluish_real = hires_input_scale / (f32(3.0) / f32(32768.0))
    out_m32, out_exp = quant.quantize_multiplier(float(out_real))
    if out_exp > 0:
        ctx.fail(
            f"output scale {out_op.scale:g} is too small for input scale {in_op.scale:g} "
            "(the output multiplier must be < 1)"
        )
    rel_m32, rel_exp = quant.quantize_multiplier(float(reluish_real))
    out_m16, rel_m16 = _to_int16_multiplier(out_m32), _to_int16_multiplier(rel_m32)

    v = (x.astype(np.int64) - in_op.zero_point) * 128  # fits int16: |q - zp| <= 255
    preshift_out = _srdhm16(v, out_m16)
    r = v
    if rel_exp > 0:
        # shift all but one bit first, so saturation only ever happens in the last shift
        r = _saturating_left_shift16(r, rel_exp - 1)
    r = _srdhm16(r, rel_m16)
    if rel_exp > 0:
        r = _saturating_left_shift16(r, 1)
    elif rel_exp < 0:
        r = quant.rounding_divide_by_pot(r, -rel_exp)
    r = (r + (1 << 15)) >> 1  # [-1, 1] -> [0, 1]
    y = quant.rounding_divide_by_pot(_sdhm16(r, preshift_out), -out_exp) + out_op.zero_point
    y = ((y + (1 << 15)) & 0xFFFF) - (1 << 15)  # the reference adds the zero point in int16
    return quant.saturate(y, out_op)


@register(Op.HARD_SWISH, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    out_dtype = ctx.output_dtype(0)
    if x.size == 0:
        return [np.empty(x.shape, out_dtype)]
    if ctx.in_operands[0].info.is_float:
        xf = x.astype(np.float32)
        y = xf * np.minimum(np.float32(6), np.maximum(np.float32(0), xf + np.float32(3))) / np.float32(6)
        return [y.astype(out_dtype)]
    return [_hard_swish_quant(ctx, x)]
