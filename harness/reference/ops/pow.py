"""POW (element-wise base ** exponent, with broadcasting).

Signature:
  input 0: tensor of TENSOR_FLOAT32 or TENSOR_FLOAT16 (rank >= 1), the base.
  input 1: tensor of input 0's type, the exponent; dimensions broadcast with input 0's.
  output 0: input 0's type, the broadcast shape.

Semantics: C's powf on float32 values (fp16 widened and narrowed once), so a negative base
with a non-integer exponent gives nan, 0 ** negative gives inf, and x ** 0 is 1 even for nan.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import broadcast
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)


def validate(v: OpView) -> None:
    v.expect_counts(2, 1)
    v.expect_types([TYPES, None], [TYPES])
    v.expect_same_type(("input", 0), ("input", 1), ("output", 0))
    broadcast.check_static(v, 0, 1)


@register(Op.POW, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    broadcast.output_shape(ctx)
    base = ctx.inputs[0].astype(np.float32)
    exponent = ctx.inputs[1].astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        r = np.power(base, exponent)
    return [r.astype(ctx.output_dtype(0))]
