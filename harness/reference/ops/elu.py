"""ELU: exponential linear unit, ``max(0, x) + min(0, alpha * (exp(x) - 1))``.

  input 0: TENSOR_FLOAT32 or TENSOR_FLOAT16 (HAL 1.3), any rank; zero-sized tensors are
           refused, as by the reference.
  input 1: alpha, FLOAT32 (FLOAT16 for a TENSOR_FLOAT16 input).  No range restriction.
  output 0: same type and shape as input 0.

Computed in float32 (fp16 input and alpha widened first, the result narrowed), as the
reference does.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)


def validate(v: OpView) -> None:
    v.expect_counts(2, 1)
    t = v.input_type(0)
    if t not in TYPES:
        v.fail(f"must be {' or '.join(x.name for x in TYPES)}, got {t.name}", input=0)
    v.expect_types([t, T.FLOAT16 if t == T.TENSOR_FLOAT16 else T.FLOAT32], [t])


@register(Op.ELU, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    if 0 in x.shape:
        ctx.fail("zero-sized input is not supported")
    xf = x.astype(np.float32)
    alpha = np.float32(ctx.scalar(1))
    zero = np.float32(0)
    with np.errstate(over="ignore", invalid="ignore"):
        y = np.maximum(zero, xf) + np.minimum(zero, alpha * (np.exp(xf) - np.float32(1)))
    return [y.astype(ctx.output_dtype(0))]
