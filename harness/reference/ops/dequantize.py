"""DEQUANTIZE: 8-bit quantised tensor -> float tensor.

Signature:
  input 0   TENSOR_QUANT8_ASYMM, TENSOR_QUANT8_ASYMM_SIGNED (HAL 1.3), TENSOR_QUANT8_SYMM or
            TENSOR_QUANT8_SYMM_PER_CHANNEL (HAL 1.2); rank up to 4; may be zero-sized.
  output 0  TENSOR_FLOAT32 or TENSOR_FLOAT16 (HAL 1.2), same shape as input 0.

Semantics: out = scale * (q - zeroPoint), computed in float32 (the int difference converted to
float and multiplied by the float scale), then narrowed to fp16 (round to nearest even) for a
TENSOR_FLOAT16 output.  Per-channel inputs use scales[c] of the channel along channelDim and a
zero point of 0.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.registry import OpContext, OpView, register

INPUT_TYPES = (
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
    T.TENSOR_QUANT8_SYMM,
    T.TENSOR_QUANT8_SYMM_PER_CHANNEL,
)
OUTPUT_TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)


def validate(v: OpView) -> None:
    v.expect_counts(1, 1)
    v.expect_types([INPUT_TYPES], [OUTPUT_TYPES])
    v.expect_rank(0, range(0, 5))
    x = v.inputs[0]
    if x.type == T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        cq = x.channel_quant
        if cq is None:
            v.fail("TENSOR_QUANT8_SYMM_PER_CHANNEL needs per-channel scales", input=0)
        if x.dimensions and not 0 <= cq.channel_dim < len(x.dimensions):
            v.fail(f"channelDim {cq.channel_dim} is outside rank {len(x.dimensions)}", input=0)
        if x.dimensions and x.dimensions[cq.channel_dim] and len(cq.scales) != x.dimensions[cq.channel_dim]:
            v.fail(f"{len(cq.scales)} scales for {x.dimensions[cq.channel_dim]} channels", input=0)


@register(Op.DEQUANTIZE, data_types=INPUT_TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    op = ctx.in_operands[0]
    if x.ndim > 4:
        ctx.fail(f"input rank {x.ndim} is above 4")
    diff = (x.astype(np.int32) - np.int32(op.zero_point)).astype(np.float32)
    if op.type == T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        cq = op.channel_quant
        if len(cq.scales) != x.shape[cq.channel_dim]:
            ctx.fail(f"{len(cq.scales)} per-channel scales for {x.shape[cq.channel_dim]} channels")
        shape = [1] * x.ndim
        shape[cq.channel_dim] = -1
        scale = np.asarray(cq.scales, dtype=np.float32).reshape(shape)
    else:
        scale = np.float32(op.scale)
    return [(scale * diff).astype(ctx.output_dtype(0))]
