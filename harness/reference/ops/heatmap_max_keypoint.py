"""HEATMAP_MAX_KEYPOINT: the most likely keypoint location in each heatmap (Mask R-CNN).

Signature:
  0: heatmaps [num_boxes, size, size, num_keypoints] (NCHW: [num_boxes, num_keypoints, size,
     size]), size >= 2: TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM or
     TENSOR_QUANT8_ASYMM_SIGNED
  1: boxes [num_boxes, 4], [x1, y1, x2, y2]: the float type, or TENSOR_QUANT16_ASYMM (scale
     0.125, zero point 0) for quantised heatmaps
  2: BOOL NCHW flag
Outputs:
  0: scores [num_boxes, num_keypoints], the heatmaps' type (quantised: the output operand's own
     scale and zero point)
  1: keypoints [num_boxes, num_keypoints, 2] = (x, y), the boxes' type (quant16: scale 0.125,
     zero point 0)
No input may be zero-sized.

Semantics (float32; fp16 widened, quantised dequantised, results re-quantised as
round(x / scale + zero_point)): per box and keypoint, the first maximum of the heatmap (start
value -FLT_MAX) at (row, col); the 3x3 grid around it (out-of-range rows/columns mirrored: -1 ->
1, size -> size - 2) gives a quadratic Taylor fit: b = -(central differences) / 2, A = the
Hessian; if |det A| < atol + rtol * A00 * A11 (1e-5 each, 1e-3 for fp16) the offset is 0 and
the score the maximum, else offset = A^-1 b (scaled down so neither component exceeds 1.5) and
score = g11 - b.d + d'Ad / 2.  The keypoint is box_start + (index + offset + 0.5) / size * box
size.  A box with x2 < x1 or y2 < y1 fails the execution.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith.layout import to_nhwc
from nnconform.reference.ops import bbox_common as bb
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
F32 = np.float32
FLT_MAX = F32(np.finfo(F32).max)


def validate(v: OpView) -> None:
    v.expect_counts(3, 2)
    v.expect_types([TYPES])
    t = v.input_type(0)
    box_t = T.TENSOR_QUANT16_ASYMM if t in bb.QUANT8_TYPES else t
    v.expect_types([t, box_t, T.BOOL], [t, box_t])
    v.expect_rank(0, [4])
    v.expect_rank(1, [2])
    if t in bb.QUANT8_TYPES:
        bb.expect_box_quant(v, input=1)
        bb.expect_box_quant(v, output=1)


def _solve(g: np.ndarray, max_score: np.ndarray, tol: F32):
    """Vectorised Taylor refinement on grids g [..., 3, 3] -> (dx, dy, score), float32."""
    two = F32(2)
    b0 = -(g[..., 1, 2] - g[..., 1, 0]) / two
    b1 = -(g[..., 2, 1] - g[..., 0, 1]) / two
    a00 = (g[..., 1, 0] - two * g[..., 1, 1]) + g[..., 1, 2]
    a01 = (((g[..., 2, 2] - g[..., 2, 0]) - g[..., 0, 2]) + g[..., 0, 0]) / F32(4)
    a11 = (g[..., 0, 1] - two * g[..., 1, 1]) + g[..., 2, 1]
    cross1 = a00 * a11
    det = cross1 - a01 * a01
    solvable = ~(np.abs(det) < tol + tol * cross1)
    with np.errstate(divide="ignore", invalid="ignore"):
        d0 = np.where(solvable, (a11 * b0 - a01 * b1) / det, F32(0)).astype(F32)
        d1 = np.where(solvable, (a00 * b1 - a01 * b0) / det, F32(0)).astype(F32)
        big = np.maximum(np.abs(d0), np.abs(d1))
        clip = (np.abs(d0) > F32(1.5)) | (np.abs(d1) > F32(1.5))
        scale = np.where(clip, F32(1.5) / big, F32(1)).astype(F32)
    d0 = np.where(clip, d0 * scale, d0)
    d1 = np.where(clip, d1 * scale, d1)
    quad = ((a00 * d0 + a01 * d1) * d0 + (a01 * d0 + a11 * d1) * d1) / two
    score = ((g[..., 1, 1] - b0 * d0) - b1 * d1) + quad
    return d0, d1, np.where(solvable, score, max_score).astype(F32)


@register(Op.HEATMAP_MAX_KEYPOINT, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    heat_in, boxes_in = ctx.inputs[0], ctx.inputs[1]
    nchw = bool(ctx.scalar(2))
    if heat_in.ndim != 4 or boxes_in.ndim != 2:
        ctx.fail("heatmaps must have rank 4 and boxes rank 2")
    if heat_in.size == 0 or boxes_in.size == 0:
        ctx.fail("zero-sized inputs are not allowed")
    heat = to_nhwc(bb.to_f32(heat_in, ctx.in_operands[0]), nchw)
    n, size, size_w, k = heat.shape
    if size_w != size or size < 2 or boxes_in.shape != (n, 4):
        ctx.fail(
            f"heatmaps must be square with size >= 2 and boxes [{n}, 4], got heatmaps "
            f"{list(heat.shape)} (NHWC) and boxes {list(boxes_in.shape)}"
        )
    boxes = bb.to_f32(boxes_in, ctx.in_operands[1])
    bad = bb.bad_boxes(boxes)
    if bad.size:
        ctx.fail(f"box {int(bad[0])} is malformed (x2 < x1 or y2 < y1)")
    tol = F32(1e-3) if ctx.in_operands[0].type == T.TENSOR_FLOAT16 else F32(1e-5)

    flat = heat.reshape(n, size * size, k)
    # First strict maximum above -FLT_MAX (index 0 if nothing beats it), as the reference scans.
    cand = np.where(np.isnan(flat), -np.inf, flat)
    idx = np.argmax(cand, axis=1)  # [n, k]
    best = np.take_along_axis(cand, idx[:, None, :], axis=1)[:, 0, :]
    beaten = best > -FLT_MAX
    idx = np.where(beaten, idx, 0)
    max_score = np.where(beaten, best, -FLT_MAX).astype(F32)
    row, col = idx // size, idx % size

    off = np.array([-1, 0, 1])
    rows = row[..., None] + off  # [n, k, 3]
    cols = col[..., None] + off
    rows = np.where(rows < 0, 1, np.where(rows >= size, size - 2, rows))
    cols = np.where(cols < 0, 1, np.where(cols >= size, size - 2, cols))
    bi = np.arange(n)[:, None, None, None]
    ki = np.arange(k)[None, :, None, None]
    grid = heat[bi, rows[..., :, None], cols[..., None, :], ki]  # [n, k, 3, 3]
    d0, d1, score = _solve(grid, max_score, tol)

    x1, y1 = boxes[:, None, 0], boxes[:, None, 1]
    bw, bh = boxes[:, None, 2] - x1, boxes[:, None, 3] - y1
    fs = F32(size)
    wrel = ((col.astype(F32) + d0) + F32(0.5)) / fs
    hrel = ((row.astype(F32) + d1) + F32(0.5)) / fs
    keypoints = np.stack([wrel * bw + x1, hrel * bh + y1], axis=-1)
    return [bb.from_f32(score, ctx.out_operands[0]), bb.from_f32(keypoints, ctx.out_operands[1])]
