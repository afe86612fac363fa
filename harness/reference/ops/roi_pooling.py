"""ROI_POOLING: max over each output bin of each region of interest (Fast R-CNN).

Signature:
  0: input [batches, height, width, depth] (NCHW with the flag): TENSOR_FLOAT32,
     TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM or TENSOR_QUANT8_ASYMM_SIGNED
  1: rois [num_rois, 4], [x1, y1, x2, y2] in original-image pixels: the input's float type, or
     TENSOR_QUANT16_ASYMM (scale 0.125, zero point 0) for quantised inputs
  2: batch index of each roi [num_rois], TENSOR_INT32
  3, 4: INT32 output height, width (> 0)
  5, 6: height, width stride (FLOAT16 for fp16, FLOAT32 otherwise; > 0)
  7: BOOL NCHW flag
Output 0: [num_rois, out_h, out_w, depth] (NCHW with the flag), the input's type; quantised
  outputs must keep the input's scale and zero point (values are copied).
No input may be zero-sized.

Semantics (reference): the roi corners are scaled by 1/stride and rounded half away from zero
to integers; the roi spans round(x2) - round(x1) + 1 pixels (at least 1), split into out_w bins
of step = span / out_w.  Bin j covers [floor(step * j + x1), ceil(step * (j + 1) + x1)),
clipped to the feature map; its value is the maximum over that window, or the zero point (0 for
floats) if the window is empty.  Roi arithmetic is float32 (quantised rois dequantised first),
and half precision for fp16 inputs, as in the reference.  Rois with a bad batch index,
negative or out-of-map coordinates, or x2 < x1 / y2 < y1 fail the execution.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith.layout import from_nhwc, to_nhwc
from nnconform.reference.arith.quant import round_half_away_array
from nnconform.reference.ops import bbox_common as bb
from nnconform.reference.ops.registry import OpContext, OpView, register
from nnconform.reference.ops.roi_align import check_rois

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
F32 = np.float32


def validate(v: OpView) -> None:
    v.expect_counts(8, 1)
    v.expect_types([TYPES])
    t = v.input_type(0)
    roi_t = T.TENSOR_QUANT16_ASYMM if t in bb.QUANT8_TYPES else t
    s = bb.scalar_type(t)
    v.expect_types([t, roi_t, T.TENSOR_INT32, T.INT32, T.INT32, s, s, T.BOOL], [t])
    v.expect_rank(0, [4])
    v.expect_rank(1, [2])
    v.expect_rank(2, [1])
    v.expect_rank(0, [4], output=True)
    if t in bb.QUANT8_TYPES:
        bb.expect_box_quant(v, input=1)
        v.expect_same_quant(("input", 0), ("output", 0))
    for i, what in ((3, "output height"), (4, "output width"), (5, "height stride"), (6, "width stride")):
        value = v.constant_scalar(i)
        if value is not None and not value > 0:
            v.fail(f"{what} must be > 0, got {value}", input=i)


def _bins(start: np.ndarray, end: np.ndarray, n_out: int, size: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    """[R, n_out] window bounds along one axis from the integer roi start/end."""
    span = np.maximum(end - start + 1, 1).astype(dtype)
    step = (span / dtype(n_out)).astype(dtype)[:, None]
    j = np.arange(n_out + 1, dtype=dtype)[None, :]
    edges = (step * j).astype(dtype) + start.astype(dtype)[:, None]
    lo = np.floor(edges[:, :-1].astype(F32)).astype(np.int64)
    hi = np.ceil(edges[:, 1:].astype(F32)).astype(np.int64)
    return np.minimum(lo, size), np.minimum(hi, size)


@register(Op.ROI_POOLING, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x, rois, batch = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    nchw = bool(ctx.scalar(7))
    out_h, out_w = int(ctx.scalar(3)), int(ctx.scalar(4))
    h_stride, w_stride = F32(ctx.scalar(5)), F32(ctx.scalar(6))
    if x.ndim != 4 or rois.ndim != 2:
        ctx.fail("input must have rank 4 and rois rank 2")
    if min(x.size, rois.size, batch.size) == 0:
        ctx.fail("zero-sized inputs are not allowed")
    x = to_nhwc(x, nchw)
    num_batches, in_h, in_w, depth = x.shape
    num_rois = rois.shape[0]
    if rois.shape[1] != 4 or batch.shape != (num_rois,):
        ctx.fail(
            f"rois must be [num_rois, 4] with one batch index each, got {list(rois.shape)} and {list(batch.shape)}"
        )
    if out_h <= 0 or out_w <= 0 or not (h_stride > 0 and w_stride > 0):
        ctx.fail("output size and strides must be > 0")

    in_op = ctx.in_operands[0]
    dtype = np.float16 if in_op.type == T.TENSOR_FLOAT16 else F32
    r = bb.to_f32(rois, ctx.in_operands[1]).astype(dtype)
    h_scale, w_scale = dtype(F32(1) / h_stride), dtype(F32(1) / w_stride)
    start = np.stack([r[:, 0] * w_scale, r[:, 1] * h_scale], 1).astype(dtype)
    end = np.stack([r[:, 2] * w_scale, r[:, 3] * h_scale], 1).astype(dtype)
    check_rois(ctx, start, end, batch, num_batches, in_h, in_w, r)
    start_i = round_half_away_array(start.astype(F32)).astype(np.int64)
    end_i = round_half_away_array(end.astype(F32)).astype(np.int64)
    w0, w1 = _bins(start_i[:, 0], end_i[:, 0], out_w, in_w, dtype)
    h0, h1 = _bins(start_i[:, 1], end_i[:, 1], out_h, in_h, dtype)

    # Max over variable windows as two masked reductions (width, then height).
    is_float = in_op.info.is_float
    vals = x[batch].astype(np.float64 if is_float else np.int64)
    low = -np.inf if is_float else np.iinfo(np.int64).min
    cols = np.arange(in_w)[None, None, :]
    rows = np.arange(in_h)[None, None, :]
    mask_w = (cols >= w0[:, :, None]) & (cols < w1[:, :, None])  # [R, out_w, W]
    mask_h = (rows >= h0[:, :, None]) & (rows < h1[:, :, None])  # [R, out_h, H]
    by_col = np.where(mask_w[:, None, :, :, None], vals[:, :, None, :, :], low).max(axis=3)
    pooled = np.where(mask_h[:, :, :, None, None], by_col[:, None, :, :, :], low).max(axis=2)
    empty = ~(mask_h.any(axis=2)[:, :, None] & mask_w.any(axis=2)[:, None, :])
    pooled = np.where(empty[..., None], in_op.zero_point, pooled)
    return [from_nhwc(pooled.astype(ctx.output_dtype(0)), nchw)]
