"""BATCH_TO_SPACE_ND and SPACE_TO_BATCH_ND: move spatial blocks between batch and space.

BATCH_TO_SPACE_ND inputs: 0 4-D tensor of TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM
                            or TENSOR_QUANT8_ASYMM_SIGNED, NHWC (or NCHW with the flag);
                          1 block sizes, TENSOR_INT32 [2] = (bh, bw), each >= 1;
                          2 optional BOOL scalar, true for NCHW (HAL 1.2+).
  output 0: [B / (bh * bw), h * bh, w * bw, c]; bh * bw must divide B.  Input batch
  (i * bw + j) * B_out + n lands at output pixel (y * bh + i, x * bw + j) of batch n.
SPACE_TO_BATCH_ND inputs: 0, 1 as above;
                          2 paddings, TENSOR_INT32 [2, 2] = ((top, bottom), (left, right)),
                            each >= 0;
                          3 optional BOOL scalar, true for NCHW (HAL 1.2+).
  output 0: the spatially padded input (height hp, width wp, which bh and bw must divide)
  rearranged to [B * bh * bw, hp / bh, wp / bw, c], the inverse of BATCH_TO_SPACE_ND.  The
  padding is 0 for floats and the input's (= output's) zero point (the real value 0) for quantised tensors.
Quantised outputs carry the input's scale and zero point.  Zero-sized inputs are rejected at
run time.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import layout
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


def _common_checks(v: OpView) -> None:
    v.expect_same_type(("input", 0), ("output", 0))
    v.expect_rank(0, (4,))
    v.expect_rank(0, (4,), output=True)
    v.expect_rank(1, (1,))
    block = v.inputs[1]
    if block.dimensions and block.dimensions[0] not in (0, 2):
        v.fail(f"block sizes must have shape [2], got {list(block.dimensions)}", input=1)
    value = v.constant(1)
    if value is not None and np.any(value < 1):
        v.fail(f"block sizes must be >= 1, got {value.reshape(-1).tolist()}", input=1)
    if v.inputs[0].info.is_quant:
        v.expect_same_quant(("input", 0), ("output", 0))


def validate_batch_to_space(v: OpView) -> None:
    v.expect_counts((2, 3), 1)
    v.expect_types([TYPES, T.TENSOR_INT32, T.BOOL], [TYPES])
    _common_checks(v)


def validate_space_to_batch(v: OpView) -> None:
    v.expect_counts((3, 4), 1)
    v.expect_types([TYPES, T.TENSOR_INT32, T.TENSOR_INT32, T.BOOL], [TYPES])
    _common_checks(v)
    pads = v.inputs[2]
    if pads.dimensions and (len(pads.dimensions) != 2 or any(d not in (0, 2) for d in pads.dimensions)):
        v.fail(f"paddings must have shape [2, 2], got {list(pads.dimensions)}", input=2)
    value = v.constant(2)
    if value is not None and np.any(value < 0):
        v.fail(f"paddings must be >= 0, got {value.reshape(-1).tolist()}", input=2)


def _prologue(ctx: OpContext, layout_input: int) -> tuple[np.ndarray, int, int, bool]:
    nchw = bool(ctx.scalar(layout_input, False))
    x = ctx.inputs[0]
    if x.ndim != 4:
        ctx.fail(f"input must be 4-D, got rank {x.ndim}")
    if x.size == 0:
        ctx.fail(f"input is zero-sized {list(x.shape)}; this operation does not accept zero-sized tensors")
    block = ctx.inputs[1]
    if block.shape != (2,):
        ctx.fail(f"block sizes must have shape [2], got {list(block.shape)}")
    bh, bw = (int(b) for b in block)
    if bh < 1 or bw < 1:
        ctx.fail(f"block sizes must be >= 1, got {[bh, bw]}")
    return layout.to_nhwc(x, nchw), bh, bw, nchw


@register(Op.BATCH_TO_SPACE_ND, data_types=TYPES, validate=validate_batch_to_space)
def execute_batch_to_space(ctx: OpContext) -> list[np.ndarray]:
    x, bh, bw, nchw = _prologue(ctx, 2)
    batch, h, w, c = x.shape
    if batch % (bh * bw):
        ctx.fail(f"batch {batch} is not a multiple of the block area {bh} x {bw}")
    ob = batch // (bh * bw)
    y = x.reshape(bh, bw, ob, h, w, c).transpose(2, 3, 0, 4, 1, 5).reshape(ob, h * bh, w * bw, c)
    return [layout.from_nhwc(y, nchw).astype(ctx.output_dtype(0), copy=False)]


@register(Op.SPACE_TO_BATCH_ND, data_types=TYPES, validate=validate_space_to_batch)
def execute_space_to_batch(ctx: OpContext) -> list[np.ndarray]:
    x, bh, bw, nchw = _prologue(ctx, 3)
    pads = ctx.inputs[2]
    if pads.shape != (2, 2):
        ctx.fail(f"paddings must have shape [2, 2], got {list(pads.shape)}")
    (top, bottom), (left, right) = pads.astype(np.int64).tolist()
    if min(top, bottom, left, right) < 0:
        ctx.fail(f"paddings must be >= 0, got {pads.reshape(-1).tolist()}")
    # The reference fills with the zero point its prepare step copied from the input.
    src = ctx.in_operands[0]
    fill = src.zero_point if src.info.is_quant else 0
    x = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=x.dtype.type(fill))
    batch, hp, wp, c = x.shape
    if hp % bh or wp % bw:
        ctx.fail(f"padded height {hp} / width {wp} are not multiples of the block sizes {[bh, bw]}")
    y = x.reshape(batch, hp // bh, bh, wp // bw, bw, c).transpose(2, 4, 0, 1, 3, 5)
    y = y.reshape(bh * bw * batch, hp // bh, wp // bw, c)
    return [layout.from_nhwc(y, nchw).astype(ctx.output_dtype(0), copy=False)]
