"""PACK (operation 103, NNAPI feature level 6, after HAL 1.3): stacks N same-shaped tensors
along a new axis.

Signature (packages/modules/NeuralNetworks, NeuralNetworksTypes.h and Pack.cpp):
  input 0     INT32 scalar: the new axis, in [0, R + 1) (no negative axes).
  inputs 1..N N >= 1 tensors of rank R >= 1, all the same shape and type: TENSOR_FLOAT16,
              TENSOR_FLOAT32, TENSOR_QUANT8_ASYMM, TENSOR_QUANT8_ASYMM_SIGNED or TENSOR_INT32.
              Quantised inputs must all have the output's scale and zero point.
  output 0    rank R + 1: input dims with N inserted at `axis`; output[..., k, ...] (k on the
              axis) is input k+1.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT16, T.TENSOR_FLOAT32, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_INT32)


def validate(v: OpView) -> None:
    if len(v.inputs) < 2:
        v.fail(f"takes the axis and at least one tensor, got {len(v.inputs)} inputs")
    v.expect_counts(range(2, len(v.inputs) + 1), 1)
    v.expect_types([T.INT32], [TYPES])
    out = v.outputs[0]
    want_rank = len(out.dimensions) - 1 if out.dimensions else None
    for i in range(1, len(v.inputs)):
        v.expect_same_type(("output", 0), ("input", i))
        if out.info.is_quant:
            v.expect_same_quant(("output", 0), ("input", i))
        dims = v.inputs[i].dimensions
        if dims:
            if want_rank is not None and len(dims) != want_rank:
                v.fail(f"rank {len(dims)} does not match rank {want_rank} implied by the output", input=i)
            want_rank = len(dims)
    axis = v.constant_scalar(0)
    if axis is not None and want_rank is not None and not 0 <= axis < want_rank + 1:
        v.fail(f"axis {axis} is outside [0, {want_rank + 1})", input=0)


@register(Op.PACK, data_types=TYPES, validate=validate, primary_input=1)
def execute(ctx: OpContext) -> list[np.ndarray]:
    axis = ctx.scalar(0)
    xs = ctx.inputs[1:]
    shape = xs[0].shape
    if len(shape) < 1:
        ctx.fail("the input tensors must have rank >= 1")
    for i, x in enumerate(xs[1:], start=2):
        if x.shape != shape:
            ctx.fail(f"input {i} has shape {list(x.shape)}, input 1 has {list(shape)}")
    if not 0 <= axis < len(shape) + 1:
        ctx.fail(f"axis {axis} is outside [0, {len(shape) + 1})")
    return [np.stack(xs, axis=axis)]
