"""Unary element-wise math: ABS, NEG, EXP, LOG, SQRT, RSQRT, SIN, FLOOR.

Every one: input 0 a tensor, output 0 the same type and shape.
  ABS:   TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_INT32 (HAL 1.3); any rank.
  NEG:   TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_INT32; any rank.
  EXP, LOG, SQRT, SIN: TENSOR_FLOAT32, TENSOR_FLOAT16; any rank.
  RSQRT (``1 / sqrt(x)``): TENSOR_FLOAT32, TENSOR_FLOAT16, and since NNAPI feature level 7
         TENSOR_QUANT8_ASYMM and TENSOR_QUANT8_ASYMM_SIGNED, whose output keeps the type but
         has its own scale and zero point; any rank.
  FLOOR: TENSOR_FLOAT32, TENSOR_FLOAT16; rank <= 4.

None of them accepts a zero-sized input (the reference fails the execution).  Float results
are computed in float32 and narrowed for fp16, as the reference does.  Out-of-domain inputs
give what C's math library gives: NaN for LOG/SQRT/RSQRT of a negative, -inf for LOG(0),
+inf for RSQRT(0).  On TENSOR_INT32, ABS and NEG wrap like two's complement: both leave
INT32_MIN unchanged.

Quantised RSQRT works element by element in float32, as the CPU reference does: the input is
dequantised to (q - zero_point) * scale, r = 1 / sqrt of it, and the output is
clamp(zero_point_out + round_half_away(r / scale_out)).  An input at the zero point gives
+inf, which clamps to the type's maximum; an input below it gives NaN, which the reference's
std::min/std::max clamp also turns into the maximum.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith.quant import dequantize, quant_range, round_half_away_array
from nnconform.reference.ops.registry import OpContext, OpView, register

FLOATS = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
WITH_INT32 = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32)
RSQRT_TYPES = FLOATS + (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)

_FUNCS = {
    Op.ABS: np.abs,
    Op.NEG: np.negative,
    Op.EXP: np.exp,
    Op.LOG: np.log,
    Op.SQRT: np.sqrt,
    Op.RSQRT: lambda x: np.float32(1) / np.sqrt(x),
    Op.SIN: np.sin,
    Op.FLOOR: np.floor,
}


def _validator(types: tuple[T, ...], max_rank: int | None = None):
    def validate(v: OpView) -> None:
        v.expect_counts(1, 1)
        v.expect_types([types], [types])
        v.expect_same_type(("input", 0), ("output", 0))
        if max_rank is not None:
            v.expect_rank(0, range(0, max_rank + 1))

    return validate


def _compute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    op = ctx.operation.type
    if 0 in x.shape:
        ctx.fail("zero-sized input is not supported")
    if op == Op.FLOOR and x.ndim > 4:
        ctx.fail(f"input rank {x.ndim} exceeds 4")
    out_dtype = ctx.output_dtype(0)
    if ctx.in_operands[0].info.is_quant:
        return [_rsqrt_quant(ctx)]
    if x.dtype == np.int32:
        return [_FUNCS[op](x).astype(out_dtype)]  # int32 wrap-around, as in C
    with np.errstate(all="ignore"):
        return [_FUNCS[op](x.astype(np.float32)).astype(out_dtype)]


def _rsqrt_quant(ctx: OpContext) -> np.ndarray:
    """RSQRT of TENSOR_QUANT8_ASYMM(_SIGNED): dequantise, 1/sqrt, requantise with the output's
    own parameters (float32 throughout; NaN and +inf saturate to the maximum)."""
    inp, out = ctx.in_operands[0], ctx.out_operands[0]
    with np.errstate(all="ignore"):
        r = np.float32(1) / np.sqrt(dequantize(ctx.inputs[0], inp))
        q = round_half_away_array(r / np.float32(out.scale)) + np.float32(out.zero_point)
    lo, hi = quant_range(out)
    q = np.where(np.isnan(q), np.float32(hi), np.clip(q, lo, hi))
    return q.astype(out.info.dtype)


for _op, _types, _rank in (
    (Op.ABS, WITH_INT32, None),
    (Op.NEG, WITH_INT32, None),
    (Op.EXP, FLOATS, None),
    (Op.LOG, FLOATS, None),
    (Op.SQRT, FLOATS, None),
    (Op.RSQRT, RSQRT_TYPES, None),
    (Op.SIN, FLOATS, None),
    (Op.FLOOR, FLOATS, 4),
):
    register(_op, data_types=_types, validate=_validator(_types, _rank))(_compute)
