"""TOPK_V2: the k largest entries of each last-dimension slice, with their indices.

Signature:
  input 0: tensor of TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_INT32, TENSOR_QUANT8_ASYMM or
           TENSOR_QUANT8_ASYMM_SIGNED (HAL 1.3), rank >= 1, not zero-sized.
  input 1: k, INT32 scalar, 1 <= k <= size of the last dimension.
  outputs: 0 values, input 0's type (quantised: input 0's scale and zero point), the input's
             shape with the last dimension k;
           1 indices, TENSOR_INT32, the same shape: positions within the last dimension.

Semantics: each slice is ordered by (value, index) pairs, largest first.  So values come out
in descending order and, among equal values, the larger index comes first (the reference
sorts the pairs ascending and reverses them; NNAPI's documentation says the same).
Quantised inputs order by stored value, which is the real order.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.reduce import reject_zero_sized
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


def validate(v: OpView) -> None:
    v.expect_counts(2, 2)
    v.expect_types([TYPES, T.INT32], [TYPES, T.TENSOR_INT32])
    v.expect_same_type(("input", 0), ("output", 0))
    v.expect_rank(0, range(1, 1 << 16))
    if v.inputs[0].info.is_quant:
        v.expect_same_quant(("input", 0), ("output", 0))
    k = v.constant_scalar(1)
    if k is not None:
        last = v.inputs[0].dimensions[-1] if v.inputs[0].dimensions else 0
        if k < 1 or (last and k > last):
            v.fail(f"k must be in [1, {last or 'last dimension'}], got {k}", input=1)


@register(Op.TOPK_V2, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    if x.ndim < 1:
        ctx.fail("input must have rank >= 1")
    reject_zero_sized(ctx)
    k = int(ctx.scalar(1))
    n = x.shape[-1]
    if not 1 <= k <= n:
        ctx.fail(f"k must be in [1, {n}] (the last dimension), got {k}")
    # A stable ascending sort orders equal values by index; reversed, it is the reference's
    # descending (value, index) order.
    order = np.argsort(x, axis=-1, kind="stable")[..., ::-1][..., :k]
    values = np.take_along_axis(x, order, axis=-1)
    return [values.astype(ctx.output_dtype(0)), order.astype(np.int32)]
