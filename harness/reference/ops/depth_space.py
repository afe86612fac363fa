"""DEPTH_TO_SPACE and SPACE_TO_DEPTH: move blocks of pixels between depth and space.

Both:    inputs  0 4-D tensor of TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM or
                   TENSOR_QUANT8_ASYMM_SIGNED, NHWC (or NCHW with the flag);
                 1 block_size, INT32 scalar >= 1;
                 2 optional BOOL scalar, true for NCHW (HAL 1.2+).
         output  0 the input's type; quantised outputs carry the input's scale and zero point.
DEPTH_TO_SPACE: [b, h, w, c] -> [b, h * bs, w * bs, c / (bs * bs)]; bs * bs must divide c.
  Output pixel (y * bs + dy, x * bs + dx), channel k comes from input pixel (y, x), channel
  (dy * bs + dx) * c_out + k.
SPACE_TO_DEPTH: [b, h, w, c] -> [b, h / bs, w / bs, c * bs * bs]; bs must divide h and w.
  The exact inverse of DEPTH_TO_SPACE.
Zero-sized inputs are rejected at run time.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import layout
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


def validate(v: OpView) -> None:
    v.expect_counts((2, 3), 1)
    v.expect_types([TYPES, T.INT32, T.BOOL], [TYPES])
    v.expect_same_type(("input", 0), ("output", 0))
    v.expect_rank(0, (4,))
    v.expect_rank(0, (4,), output=True)
    bs = v.constant_scalar(1)
    if bs is not None and bs < 1:
        v.fail(f"block_size must be >= 1, got {bs}", input=1)
    if v.inputs[0].info.is_quant:
        v.expect_same_quant(("input", 0), ("output", 0))


def _prologue(ctx: OpContext) -> tuple[np.ndarray, int, bool]:
    nchw = bool(ctx.scalar(2, False))
    x = ctx.inputs[0]
    if x.ndim != 4:
        ctx.fail(f"input must be 4-D, got rank {x.ndim}")
    if x.size == 0:
        ctx.fail(f"input is zero-sized {list(x.shape)}; this operation does not accept zero-sized tensors")
    bs = int(ctx.scalar(1))
    if bs < 1:
        ctx.fail(f"block_size must be >= 1, got {bs}")
    return layout.to_nhwc(x, nchw), bs, nchw


@register(Op.DEPTH_TO_SPACE, data_types=TYPES, validate=validate)
def execute_depth_to_space(ctx: OpContext) -> list[np.ndarray]:
    x, bs, nchw = _prologue(ctx)
    b, h, w, c = x.shape
    if c % (bs * bs):
        ctx.fail(f"depth {c} is not a multiple of block_size^2 = {bs * bs}")
    oc = c // (bs * bs)
    y = x.reshape(b, h, w, bs, bs, oc).transpose(0, 1, 3, 2, 4, 5).reshape(b, h * bs, w * bs, oc)
    return [layout.from_nhwc(y, nchw).astype(ctx.output_dtype(0), copy=False)]


@register(Op.SPACE_TO_DEPTH, data_types=TYPES, validate=validate)
def execute_space_to_depth(ctx: OpContext) -> list[np.ndarray]:
    x, bs, nchw = _prologue(ctx)
    b, h, w, c = x.shape
    if h % bs or w % bs:
        ctx.fail(f"height {h} and width {w} must be multiples of block_size {bs}")
    y = x.reshape(b, h // bs, bs, w // bs, bs, c).transpose(0, 1, 3, 2, 4, 5)
    y = y.reshape(b, h // bs, w // bs, bs * bs * c)
    return [layout.from_nhwc(y, nchw).astype(ctx.output_dtype(0), copy=False)]
