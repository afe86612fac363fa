"""PRELU (parametric ReLU: x for x >= 0, alpha * x otherwise; alpha broadcasts).

Signature:
  input 0: tensor of TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM or
           TENSOR_QUANT8_ASYMM_SIGNED (rank >= 1), the input x.
  input 1: tensor of input 0's type, alpha; dimensions broadcast with input 0's.  Quantised:
           its own scale and zero point.
  output 0: input 0's type, the broadcast shape.  Quantised: its own scale and zero point.

Semantics:
- Floats: x >= 0 ? x : x * alpha (fp16: the product of two halves rounded once to half).
- Quantised (the reference's kernel): with X = qx - zx and A = qa - za as int32,
  X >= 0 -> zo + X rescaled by float32(sx / so),
  X <  0 -> zo + X * A rescaled by float32(sx * sa) / so (the division in double),
  each rescale the TFLite MultiplyByQuantizedMultiplier of a QuantizeMultiplier factor (any
  size; shift > 0 shifts left first), then saturated into the output type.  No activation.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import broadcast, quant, select_bits
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


def validate(v: OpView) -> None:
    v.expect_counts(2, 1)
    v.expect_types([TYPES, None], [TYPES])
    v.expect_same_type(("input", 0), ("input", 1), ("output", 0))
    broadcast.check_static(v, 0, 1)


@register(Op.PRELU, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    shape = broadcast.output_shape(ctx)
    x, alpha = ctx.inputs[0], ctx.inputs[1]
    xo, ao, out = ctx.in_operands[0], ctx.in_operands[1], ctx.out_operands[0]
    if not out.info.is_quant:
        # float32 as it is (no copies: zoo models run dozens of these); a per-channel alpha
        # widened so that numpy's loops run over whole rows
        xf, af = x.astype(np.float32, copy=False), alpha.astype(np.float32, copy=False)
        if xf.shape == tuple(shape):
            af = broadcast.widen_inner(af, shape)
        with np.errstate(invalid="ignore", over="ignore"):
            r = select_bits.where(xf >= 0, xf, xf * af, b_scratch=True)
        return [r.astype(out.info.dtype, copy=False)]
    sx, sa, so = np.float32(xo.scale), np.float32(ao.scale), np.float32(out.scale)
    m_pos, e_pos = quant.quantize_multiplier(float(sx / so))
    m_neg, e_neg = quant.quantize_multiplier(float(sx * sa) / float(so))
    xi = x.astype(np.int64) - xo.zero_point
    ai = alpha.astype(np.int64) - ao.zero_point
    pos = quant.multiply_by_quantized_multiplier(xi, m_pos, e_pos)
    neg = quant.multiply_by_quantized_multiplier(xi * ai, m_neg, e_neg)
    return [quant.saturate(np.where(xi >= 0, pos, neg) + out.zero_point, out)]
