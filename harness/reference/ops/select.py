"""SELECT: elementwise choice between two tensors by a boolean mask (HAL 1.2).

Signature:
  input 0   TENSOR_BOOL8 mask, same shape as input 1 (no broadcasting).
  input 1   TENSOR_FLOAT16, TENSOR_FLOAT32, TENSOR_INT32, TENSOR_QUANT8_ASYMM or
            TENSOR_QUANT8_ASYMM_SIGNED (HAL 1.3), rank from 1: taken where the mask is true.
  input 2   same type and shape as input 1: taken where the mask is false.
  output 0  same type and shape as input 1.

Quantised inputs and output may all have different scales and zero points.  Both candidates
are requantised to the output with the reference's double-precision helper:
  real = float32((q - zp_in) * scale_in);  r = real / scale_out + zp_out   (in double)
  q_out = clamp(std::round(r), qmin, qmax)
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import Operand
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith.quant import QUANT_RANGE
from nnconform.reference.arith.quant import round_half_away_array as round_half_away
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT16, T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


def validate(v: OpView) -> None:
    v.expect_counts(3, 1)
    v.expect_types([T.TENSOR_BOOL8, TYPES, TYPES], [TYPES])
    v.expect_same_type(("input", 1), ("input", 2), ("output", 0))
    known = [(i, v.inputs[i].dimensions) for i in range(3) if v.inputs[i].fully_specified]
    for i, dims in known[1:]:
        if dims != known[0][1]:
            v.fail(f"shape {list(dims)} differs from input {known[0][0]}'s {list(known[0][1])}", input=i)
    for i in (1, 2):
        if v.inputs[i].info.is_quant and not v.inputs[i].scale > 0:
            v.fail(f"scale must be > 0, got {v.inputs[i].scale:g}", input=i)
    if v.outputs[0].info.is_quant and not v.outputs[0].scale > 0:
        v.fail(f"scale must be > 0, got {v.outputs[0].scale:g}", output=0)


def requantize(q: np.ndarray, src: Operand, dst: Operand) -> np.ndarray:
    real = (q.astype(np.int64) - src.zero_point).astype(np.float32) * np.float32(src.scale)
    r = real.astype(np.float64) / np.float64(np.float32(dst.scale)) + dst.zero_point
    lo, hi = QUANT_RANGE[dst.type]
    return np.clip(round_half_away(r), lo, hi).astype(dst.info.dtype)


@register(Op.SELECT, data_types=TYPES, validate=validate, primary_input=1)
def execute(ctx: OpContext) -> list[np.ndarray]:
    cond, a, b = ctx.inputs
    if cond.shape != a.shape or b.shape != a.shape:
        ctx.fail(f"shapes {list(cond.shape)}, {list(a.shape)}, {list(b.shape)} must all be equal")
    out = ctx.out_operands[0]
    if out.info.is_quant:
        a = requantize(a, ctx.in_operands[1], out)
        b = requantize(b, ctx.in_operands[2], out)
    return [np.where(cond, a, b)]
