"""MAXIMUM and MINIMUM (element-wise, with broadcasting).

Signature (both):
  input 0: tensor of TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_INT32, TENSOR_QUANT8_ASYMM or
           TENSOR_QUANT8_ASYMM_SIGNED, rank >= 1.
  input 1: tensor of input 0's type, dimensions broadcasting with input 0's.  Quantised: its
           own scale and zero point.
  output 0: input 0's type, the broadcast shape.  Quantised: its own scale and zero point.

Semantics:
- Non-quantised: std::max(a, b) = (a < b ? b : a) and std::min(a, b) = (b < a ? b : a), so
  ties and NaN resolve as in C++ (a NaN in input 0 is kept, a NaN in input 1 is not).
- Quantised: each input is first requantised to the output's parameters the way the
  reference's ``requantize`` does (real = float32((q - zp) * scale); then
  real / out_scale + out_zp in double, clamped to the type's range and rounded half away from
  zero), and the larger (smaller) stored value is taken.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import Operand
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import broadcast, quant
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


def validate(v: OpView) -> None:
    v.expect_counts(2, 1)
    v.expect_types([TYPES, None], [TYPES])
    v.expect_same_type(("input", 0), ("input", 1), ("output", 0))
    broadcast.check_static(v, 0, 1)


def _requantize(q: np.ndarray, src: Operand, dst: Operand) -> np.ndarray:
    real = ((q.astype(np.int64) - src.zero_point).astype(np.float32) * np.float32(src.scale)).astype(np.float64)
    stored = real / np.float64(np.float32(dst.scale)) + dst.zero_point
    lo, hi = quant.quant_range(dst)
    # Clamping before or after the rounding gives the same integer: lo and hi are integers.
    return np.clip(quant.round_half_away_array(stored), lo, hi).astype(np.int64)


def _execute(ctx: OpContext, minimum: bool) -> list[np.ndarray]:
    broadcast.output_shape(ctx)
    a, b = ctx.inputs[0], ctx.inputs[1]
    out = ctx.out_operands[0]
    if out.info.is_quant:
        a = _requantize(a, ctx.in_operands[0], out)
        b = _requantize(b, ctx.in_operands[1], out)
    r = np.where(b < a, b, a) if minimum else np.where(a < b, b, a)
    return [r.astype(out.info.dtype)]


@register(Op.MAXIMUM, data_types=TYPES, validate=validate)
def execute_maximum(ctx: OpContext) -> list[np.ndarray]:
    return _execute(ctx, minimum=False)


@register(Op.MINIMUM, data_types=TYPES, validate=validate)
def execute_minimum(ctx: OpContext) -> list[np.ndarray]:
    return _execute(ctx, minimum=True)
