"""EMBEDDING_LOOKUP: select rows of a table by index.

inputs:  0 lookups, TENSOR_INT32 [k]: row indices into input 1, each in [0, n);
         1 values, tensor of TENSOR_FLOAT32, TENSOR_FLOAT16 (HAL 1.3), TENSOR_INT32 (1.2),
           TENSOR_QUANT8_ASYMM (1.2) or TENSOR_QUANT8_ASYMM_SIGNED (1.3), shape [n, ...] with
           rank >= 2.
output:  0 values' type, shape [k, ...]: row i is values[lookups[i]].  Quantised outputs carry
           the values' scale and zero point.

The data type is that of input 1.  An out-of-range lookup is a run-time failure; zero-sized
inputs are rejected at run time.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


def validate(v: OpView) -> None:
    v.expect_counts(2, 1)
    v.expect_types([T.TENSOR_INT32, TYPES], [TYPES])
    v.expect_same_type(("input", 1), ("output", 0))
    v.expect_rank(0, (1,))
    v.expect_rank(1, range(2, 1 << 16))
    if v.inputs[1].info.is_quant:
        v.expect_same_quant(("input", 1), ("output", 0))


@register(Op.EMBEDDING_LOOKUP, data_types=TYPES, validate=validate, primary_input=1)
def execute(ctx: OpContext) -> list[np.ndarray]:
    lookups, values = ctx.inputs
    if lookups.ndim != 1:
        ctx.fail(f"lookups must be 1-D, got rank {lookups.ndim}")
    if values.ndim < 2:
        ctx.fail(f"values must have rank >= 2, got {values.ndim}")
    for i in (0, 1):
        if ctx.inputs[i].size == 0:
            ctx.fail(
                f"input {i} is zero-sized {list(ctx.inputs[i].shape)}; EMBEDDING_LOOKUP does not "
                "accept zero-sized tensors"
            )
    rows = values.shape[0]
    bad = (lookups < 0) | (lookups >= rows)
    if np.any(bad):
        ctx.fail(f"lookup {int(lookups[bad][0])} is outside [0, {rows})")
    return [values[lookups.astype(np.intp)].astype(ctx.output_dtype(0), copy=False)]
