"""RANK: the number of dimensions of a tensor, as an INT32 scalar (HAL 1.3).

Signature:
  input 0   a tensor of TENSOR_FLOAT16, TENSOR_FLOAT32, TENSOR_INT32, TENSOR_QUANT8_ASYMM,
            TENSOR_QUANT16_SYMM, TENSOR_BOOL8, TENSOR_QUANT8_SYMM_PER_CHANNEL,
            TENSOR_QUANT16_ASYMM, TENSOR_QUANT8_SYMM or TENSOR_QUANT8_ASYMM_SIGNED, rank from 1.
  output 0  INT32 scalar.
The values are never read: only the (run-time) shape matters.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (
    T.TENSOR_FLOAT16,
    T.TENSOR_FLOAT32,
    T.TENSOR_INT32,
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT16_SYMM,
    T.TENSOR_BOOL8,
    T.TENSOR_QUANT8_SYMM_PER_CHANNEL,
    T.TENSOR_QUANT16_ASYMM,
    T.TENSOR_QUANT8_SYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
)


def validate(v: OpView) -> None:
    v.expect_counts(1, 1)
    v.expect_types([TYPES], [T.INT32])


@register(Op.RANK, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    return [np.array(ctx.inputs[0].ndim, dtype=np.int32)]
