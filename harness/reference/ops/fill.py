"""FILL: a tensor of a given shape with every element set to one scalar (HAL 1.3).

Signature:
  input 0   TENSOR_INT32, 1-D: the output shape (entries >= 0).
  input 1   the fill value: FLOAT16 for a TENSOR_FLOAT16 output, FLOAT32 for TENSOR_FLOAT32,
            INT32 for TENSOR_INT32.
  output 0  TENSOR_FLOAT16, TENSOR_FLOAT32 or TENSOR_INT32 of the given shape (rank from 1).

The operation's data type is the output's; for coverage we key it on input 1, whose scalar
type maps one to one onto it.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.registry import OpContext, OpView, register
from nnconform.reference.ops.reshape import check_1d_int32

VALUE_TYPE = {T.TENSOR_FLOAT16: T.FLOAT16, T.TENSOR_FLOAT32: T.FLOAT32, T.TENSOR_INT32: T.INT32}
TYPES = tuple(VALUE_TYPE)


def validate(v: OpView) -> None:
    v.expect_counts(2, 1)
    v.expect_types([T.TENSOR_INT32, tuple(VALUE_TYPE.values())], [TYPES])
    want = VALUE_TYPE[v.outputs[0].type]
    if v.input_type(1) != want:
        v.fail(f"must be {want.name} for a {v.outputs[0].type.name} output, got {v.input_type(1).name}", input=1)
    check_1d_int32(v, 0, "the shape")
    dims = v.constant(0)
    if dims is not None and (dims < 0).any():
        v.fail(f"shape {dims.tolist()} has a negative entry", input=0)


@register(Op.FILL, data_types=(T.FLOAT16, T.FLOAT32, T.INT32), validate=validate, primary_input=1)
def execute(ctx: OpContext) -> list[np.ndarray]:
    dims = ctx.inputs[0]
    if dims.ndim != 1:
        ctx.fail(f"the shape must be a 1-D tensor, got rank {dims.ndim}")
    if (dims < 0).any():
        ctx.fail(f"shape {dims.tolist()} has a negative entry")
    return [np.full(tuple(int(d) for d in dims), ctx.inputs[1], dtype=ctx.output_dtype(0))]
