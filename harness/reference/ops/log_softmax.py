"""LOG_SOFTMAX: ``(x - max) * beta - log(sum(exp((x - max) * beta)))`` along one axis.

  input 0: TENSOR_FLOAT32 or TENSOR_FLOAT16, any rank >= 1 (zero-sized tensors are refused,
           as by the reference).
  input 1: beta, FLOAT32 (FLOAT16 for a TENSOR_FLOAT16 input).  No range restriction.
  input 2: axis, INT32 in [-rank, rank).
  output 0: same type and shape as input 0.

The reference computes in the tensor's own element type: for TENSOR_FLOAT16 every
subtraction and product is rounded to half precision, each exponential is taken in double
and accumulated into a half-precision sum (in element order), and the log of the sum is
rounded to half.  This module does the same, rounding at the same points; float32 likewise.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.registry import OpContext, OpView, register
from nnconform.reference.ops.softmax import beta_type, resolve_axis, validate_axis_constant

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)


def validate(v: OpView) -> None:
    v.expect_counts(3, 1)
    t = v.input_type(0)
    if t not in TYPES:
        v.fail(f"must be {' or '.join(x.name for x in TYPES)}, got {t.name}", input=0)
    v.expect_types([t, beta_type(t), T.INT32], [t])
    validate_axis_constant(v, 2)


@register(Op.LOG_SOFTMAX, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    if 0 in x.shape:
        ctx.fail("zero-sized input is not supported")
    axis = resolve_axis(ctx, ctx.scalar(2), x.ndim)
    dt = x.dtype.type  # float32 or float16: the arithmetic type
    beta = dt(ctx.scalar(1))
    xs = np.moveaxis(x, axis, -1)
    scaled = ((xs - xs.max(axis=-1, keepdims=True)).astype(dt) * beta).astype(dt)
    exps = np.exp(scaled.astype(np.float64))
    total = np.zeros(xs.shape[:-1], dtype=dt)
    for i in range(xs.shape[-1]):  # sequential, rounding the running sum as the reference does
        total = (total.astype(np.float64) + exps[..., i]).astype(dt)
    log_sum = np.log(total.astype(np.float64)).astype(dt)
    out = (scaled - log_sum[..., None]).astype(dt)
    return [np.ascontiguousarray(np.moveaxis(out, -1, axis))]
