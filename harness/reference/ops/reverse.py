"""REVERSE (operation 105, NNAPI feature level 7, after HAL 1.3): reverses one axis.

Signature (packages/modules/NeuralNetworks, NeuralNetworksTypes.h and Reverse.cpp):
  input 0   TENSOR_FLOAT16, TENSOR_FLOAT32, TENSOR_QUANT8_ASYMM, TENSOR_QUANT8_ASYMM_SIGNED or
            TENSOR_INT32, rank 1..8.
  input 1   TENSOR_INT32 of shape [1]: the axis, in [0, rank) (no negative axes).
  output 0  same type, shape, scale and zero point as input 0.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.registry import OpContext, OpView, register
from nnconform.reference.ops.reshape import check_same_type_and_quant

TYPES = (T.TENSOR_FLOAT16, T.TENSOR_FLOAT32, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_INT32)


def validate(v: OpView) -> None:
    v.expect_counts(2, 1)
    v.expect_types([TYPES, T.TENSOR_INT32], [TYPES])
    check_same_type_and_quant(v)
    axis_op = v.inputs[1]
    if axis_op.dimensions and (len(axis_op.dimensions) != 1 or axis_op.dimensions[0] not in (0, 1)):
        v.fail(f"the axis must be a tensor of shape [1], got {list(axis_op.dimensions)}", input=1)
    v.expect_rank(0, range(1, 9))
    din, dout = v.inputs[0].dimensions, v.outputs[0].dimensions
    if din and dout and len(din) != len(dout):
        v.fail(f"rank {len(dout)} differs from the input's {len(din)}", output=0)
    axis = v.constant(1)
    if axis is not None and axis.size == 1 and din and not 0 <= int(axis.reshape(-1)[0]) < len(din):
        v.fail(f"axis {int(axis.reshape(-1)[0])} is outside [0, {len(din)})", input=1)


@register(Op.REVERSE, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x, axis = ctx.inputs
    if not 1 <= x.ndim <= 8:
        ctx.fail(f"input rank must be 1..8, got {x.ndim}")
    if axis.shape != (1,):
        ctx.fail(f"the axis must be a tensor of shape [1], got {list(axis.shape)}")
    a = int(axis[0])
    if not 0 <= a < x.ndim:
        ctx.fail(f"axis {a} is outside [0, {x.ndim})")
    return [np.flip(x, a).copy()]
