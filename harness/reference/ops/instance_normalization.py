"""INSTANCE_NORMALIZATION: normalise each (batch, channel) plane by its own mean and variance.

Signature:
  0: input, rank 4, TENSOR_FLOAT32 or TENSOR_FLOAT16, NHWC or NCHW
  1: gamma, 2: beta, 3: epsilon: FLOAT32 scalars for TENSOR_FLOAT32, FLOAT16 for TENSOR_FLOAT16
  4: BOOL, true for NCHW (required, not optional)
Output 0: same type and shape.

    mean[b, c] = mean over h, w of input[b, h, w, c]
    var[b, c]  = mean over h, w of (input[b, h, w, c] - mean[b, c])^2   (population variance)
    output     = (input - mean) * gamma / sqrt(var + epsilon) + beta

The reference accumulates FLOAT16 in half precision; we compute every type in float64 and
narrow to the output type, which stays within the fp16 comparison tolerance while being
independent of summation order.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith.layout import from_nhwc, to_nhwc
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
_SCALAR = {T.TENSOR_FLOAT32: T.FLOAT32, T.TENSOR_FLOAT16: T.FLOAT16}


def validate(v: OpView) -> None:
    v.expect_counts(5, 1)
    v.expect_types([TYPES], [TYPES])
    s = _SCALAR[v.inputs[0].type]
    v.expect_types([None, s, s, s, T.BOOL])
    v.expect_same_type(("input", 0), ("output", 0))
    v.expect_rank(0, [4])
    v.expect_rank(0, [4], output=True)


@register(Op.INSTANCE_NORMALIZATION, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    if x.ndim != 4:
        ctx.fail(f"input must have rank 4, got {x.ndim}")
    gamma, beta, epsilon = (float(ctx.scalar(i)) for i in (1, 2, 3))
    nchw = bool(ctx.scalar(4))
    if x.size == 0:  # an empty batch or plane: nothing to normalise (and no mean of nothing)
        return [x.astype(ctx.output_dtype(0))]
    xf = to_nhwc(x, nchw).astype(np.float64)
    mean = xf.mean(axis=(1, 2), keepdims=True)
    var = ((xf - mean) ** 2).mean(axis=(1, 2), keepdims=True)
    # The reference takes the square root in float32.
    sigma = np.sqrt((var + epsilon).astype(np.float32)).astype(np.float64)
    y = (xf - mean) * gamma / sigma + beta
    return [from_nhwc(y.astype(ctx.output_dtype(0)), nchw)]
