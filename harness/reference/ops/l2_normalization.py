"""L2_NORMALIZATION: divide each 1-D slice along an axis by its L2 norm.

Signature:
  0: input, rank 1..4, TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM or
     TENSOR_QUANT8_ASYMM_SIGNED
  1: optional INT32 axis, default -1, in [-rank, rank)
Output 0: same type and shape.  TENSOR_QUANT8_ASYMM output has scale 1/128 and zero point 128;
  TENSOR_QUANT8_ASYMM_SIGNED has scale 1/128 and zero point 0 (the result lies in [-1, 1]).

Semantics of the CPU reference:
- Float: out = x / max(sqrt(sum x^2), 1e-6), so an all-zero slice gives zeros.  FLOAT16 is
  computed in float32.
- Quantised: the sum of squared (x - zero_point) is an int32; its inverse square root becomes a
  fixed-point multiplier through TFLite's Newton-Raphson routine (GetInvSqrtQuantizedMultiplierExp,
  reproduced here bit for bit), which treats sums 0 and 1 as 1 so an all-zero slice gives
  logical zero.  uint8 (any axis) and int8 on a non-last axis then compute
  RoundingDivideByPOT(SRDHM(128 * d, mult), shift) (+128 for uint8); int8 on the last axis uses
  TFLite's integer kernel, MultiplyByQuantizedMultiplier(d, mult, 7 - shift), which may round
  differently in the last bit.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith.quant import (
    INT32_MAX,
    INT32_MIN,
    multiply_by_quantized_multiplier,
    rounding_divide_by_pot,
)
from nnconform.reference.arith.quant import saturating_rounding_doubling_high_mul as srdhm
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
OUTPUT_QUANT = {T.TENSOR_QUANT8_ASYMM: (1.0 / 128.0, 128), T.TENSOR_QUANT8_ASYMM_SIGNED: (1.0 / 128.0, 0)}
EPSILON = np.float32(1e-6)


def validate(v: OpView) -> None:
    v.expect_counts((1, 2), 1)
    v.expect_types([TYPES, T.INT32], [TYPES])
    v.expect_same_type(("input", 0), ("output", 0))
    v.expect_rank(0, range(1, 5))
    out = v.outputs[0]
    if out.type in OUTPUT_QUANT:
        scale, zp = OUTPUT_QUANT[out.type]
        if out.scale != np.float32(scale) or out.zero_point != zp:
            v.fail(
                f"{out.type.name} output must have scale 1/128 and zero point {zp}, "
                f"got scale {out.scale:g} zero point {out.zero_point}",
                output=0,
            )
    axis = v.constant_scalar(1) if len(v.inputs) == 2 else -1
    rank = len(v.inputs[0].dimensions)
    if axis is not None and rank and not -rank <= axis < rank:
        v.fail(f"axis must be in [{-rank}, {rank}), got {axis}", input=1)


def _saturating_shift_left(x: np.ndarray, exponent: int) -> np.ndarray:
    """gemmlowp SaturatingRoundingMultiplyByPOT for a positive exponent."""
    threshold = (1 << (31 - exponent)) - 1
    return np.where(x > threshold, INT32_MAX, np.where(x < -threshold, INT32_MIN, x << exponent))


def _wrap32(x: np.ndarray) -> np.ndarray:
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def inv_sqrt_multiplier(sums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TFLite GetInvSqrtQuantizedMultiplierExp with reverse_shift -1, vectorised over int32
    sums >= 0: returns (multiplier, left_shift) with 1/sqrt(sum) ~= multiplier * 2**(left_shift - 31)."""
    x = np.asarray(sums, dtype=np.int64).copy()
    small = x <= 1
    x = np.where(small, 4, x)  # any value > 1 keeps the arithmetic below in range; replaced at the end
    shift = np.full(x.shape, 11, np.int64)
    while np.any(big := x >= (1 << 29)):
        x = np.where(big, x // 4, x)
        shift = shift + big
    # Normalise x into [2**27, 2**29) by an even left shift (keeps sqrt exact in the exponent).
    bit_length = np.frexp(x.astype(np.float64))[1].astype(np.int64)
    clz = 32 - bit_length
    pairs = (clz - 1) // 2 - 1
    shift = shift - pairs
    x = x << (2 * pairs)
    # Newton-Raphson for 1/sqrt on Q3.28 fixed point, exactly as gemmlowp computes it.
    half_input = rounding_divide_by_pot(x >> 1, 1)  # F3
    half_three = (1 << 28) + (1 << 27)  # 1.5 in F3
    r = np.full(x.shape, 1 << 28, np.int64)  # 1.0 in F3
    for _ in range(5):
        r3 = _saturating_shift_left(srdhm(srdhm(r, r), r), 6)  # F9 -> F3
        r = _saturating_shift_left(_wrap32(srdhm(half_three, r) - srdhm(half_input, r3)), 3)  # F6 -> F3
    mult = srdhm(r, 1518500250)  # times sqrt(2)/2 in F0
    neg = shift < 0
    mult = np.where(neg, _wrap32(mult << np.where(neg, -shift, 0)), mult)
    shift = np.where(neg, 0, shift)
    mult = np.where(small, INT32_MAX, mult)
    shift = np.where(small, 0, shift)
    return mult, -shift


@register(Op.L2_NORMALIZATION, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    rank = x.ndim
    axis = ctx.scalar(1, -1) if len(ctx.inputs) == 2 else -1
    if not 1 <= rank <= 4:
        ctx.fail(f"input rank must be 1..4, got {rank}")
    if not -rank <= axis < rank:
        ctx.fail(f"axis must be in [{-rank}, {rank}), got {axis}")
    axis %= rank
    in_op, out_op = ctx.in_operands[0], ctx.out_operands[0]
    if in_op.info.is_float:
        xf = x.astype(np.float32)
        sumsq = np.sum(xf.astype(np.float64) ** 2, axis=axis, keepdims=True)
        norm = np.maximum(np.sqrt(sumsq).astype(np.float32), EPSILON)
        return [(xf / norm).astype(ctx.output_dtype(0))]
    d = x.astype(np.int64) - in_op.zero_point
    sums = np.sum(d * d, axis=axis, keepdims=True)
    mult, shift = inv_sqrt_multiplier(sums)
    if out_op.type == T.TENSOR_QUANT8_ASYMM_SIGNED and axis == rank - 1:
        y = multiply_by_quantized_multiplier(d, mult, shift + 7)
        return [np.clip(y, -128, 127).astype(np.int8)]
    y = rounding_divide_by_pot(srdhm(d * 128, mult), -shift)
    if out_op.type == T.TENSOR_QUANT8_ASYMM:
        return [np.clip(y + 128, 0, 255).astype(np.uint8)]
    return [np.clip(y, -128, 127).astype(np.int8)]
