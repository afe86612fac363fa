"""QUANTIZE: float tensor -> 8-bit asymmetric quantised tensor.

Signature:
  input 0   TENSOR_FLOAT32 or TENSOR_FLOAT16, any rank (from 1), may be zero-sized.
  output 0  TENSOR_QUANT8_ASYMM or TENSOR_QUANT8_ASYMM_SIGNED (HAL 1.3), same shape as input 0,
            with its own scale and zero point (the ones quantised to).

Semantics (CPU reference, bit for bit):
  q = clamp(zeroPoint + std::round(x / scale), qmin, qmax)
  - the division is a float32 division (fp16 inputs are widened to float32 first), not a
    multiply by the reciprocal;
  - std::round rounds halves away from zero;
  - the clamp is a float std::min/std::max pair, so NaN becomes qmax (std::min(255, NaN)
    keeps 255), +inf qmax and -inf qmin.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import quant
from nnconform.reference.arith.quant import QUANT_RANGE
from nnconform.reference.ops.registry import OpContext, OpView, register

INPUT_TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
OUTPUT_TYPES = (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


def validate(v: OpView) -> None:
    v.expect_counts(1, 1)
    v.expect_types([INPUT_TYPES], [OUTPUT_TYPES])
    out = v.outputs[0]
    if not out.scale > 0:
        v.fail(f"scale must be > 0, got {out.scale:g}", output=0)


@register(Op.QUANTIZE, data_types=INPUT_TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    out = ctx.out_operands[0]
    lo, hi = QUANT_RANGE[out.type]
    x = ctx.inputs[0].astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        scaled = x / np.float32(out.scale)
        q = quant.round_half_away_array(scaled).astype(np.float64) + out.zero_point
    # np.clip would keep NaN; the reference's std::min(qmax, NaN) yields qmax.
    q = np.where(np.isnan(q), hi, np.clip(q, lo, hi))
    return [q.astype(out.info.dtype)]
