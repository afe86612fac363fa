"""GENERATE_PROPOSALS: region proposals from anchor scores and deltas (Faster R-CNN RPN).

Signature:
  0: scores [batches, height, width, num_anchors] (NCHW: [batches, num_anchors, height, width]):
     TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM or TENSOR_QUANT8_ASYMM_SIGNED
  1: deltas [batches, height, width, num_anchors * 4] (NCHW likewise), [dx, dy, dw, dh]: the
     scores' type (own quantisation)
  2: anchors [num_anchors, 4], corner encoding: the float type, or TENSOR_QUANT16_SYMM
     (scale 0.125 required for TENSOR_QUANT8_ASYMM scores)
  3: image info [batches, 2] = (height, width): the float type, or TENSOR_QUANT16_ASYMM
     (scale 0.125, zero point 0 required for TENSOR_QUANT8_ASYMM scores)
  4, 5: height, width stride (FLOAT16 for fp16, FLOAT32 otherwise)
  6: INT32 pre-NMS top N (<= 0 or >= the anchor count: keep all)
  7: INT32 post-NMS top N (< 0: keep all)
  8: IoU threshold, 9: minimum box size (FLOAT16 / FLOAT32)
  10: BOOL NCHW flag
Outputs (num_out may be 0):
  0: scores [num_out], the scores' type and quantisation
  1: boxes [num_out, 4], the float type or TENSOR_QUANT16_ASYMM (scale 0.125, zero point 0 for
     TENSOR_QUANT8_ASYMM; the operand's own for the signed variant)
  2: batch index [num_out] TENSOR_INT32
No input may be zero-sized.

Semantics (float32 throughout, fp16 widened, quantised dequantised): the anchor boxes are laid
on every feature-map pixel, shifted by (w * width_stride, h * height_stride), in (h, w, anchor)
order; per image the deltas are applied and the boxes clipped (bbox_common.bbox_transform).
If 0 < pre_nms < count, the candidates are sorted by descending score (stable) and cut.  Boxes
are then kept only if width > min_size, height > min_size, and their centre x1 + w / 2,
y1 + h / 2 lies inside the image (< width, < height), in candidate order.  Hard NMS
(bbox_common.nms_single_class, IoU >= threshold suppresses) keeps at most post_nms boxes.
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


def validate(v: OpView) -> None:
    v.expect_counts(11, 3)
    v.expect_types([TYPES])
    t = v.input_type(0)
    s = bb.scalar_type(t)
    quant = t in bb.QUANT8_TYPES
    anchor_t = T.TENSOR_QUANT16_SYMM if quant else t
    info_t = T.TENSOR_QUANT16_ASYMM if quant else t
    v.expect_types([t, t, anchor_t, info_t, s, s, T.INT32, T.INT32, s, s, T.BOOL], [t, info_t, T.TENSOR_INT32])
    for i, r in enumerate((4, 4, 2, 2)):
        v.expect_rank(i, [r])
    if quant:
        v.expect_same_quant(("input", 0), ("output", 0))
    if t == T.TENSOR_QUANT8_ASYMM:
        if v.inputs[2].scale != bb.BOX_SCALE:
            v.fail(f"quantised anchors need scale 0.125, got {v.inputs[2].scale:g}", input=2)
        bb.expect_box_quant(v, input=3)
        bb.expect_box_quant(v, output=1)


@register(Op.GENERATE_PROPOSALS, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    nchw = bool(ctx.scalar(10))
    scores_in, deltas_in, anchors_in, image_in = ctx.inputs[:4]
    if scores_in.ndim != 4 or deltas_in.ndim != 4 or anchors_in.ndim != 2 or image_in.ndim != 2:
        ctx.fail("scores and deltas must have rank 4, anchors and image info rank 2")
    if min(a.size for a in (scores_in, deltas_in, anchors_in, image_in)) == 0:
        ctx.fail("zero-sized inputs are not allowed")
    scores = to_nhwc(bb.to_f32(scores_in, ctx.in_operands[0]), nchw)
    deltas = to_nhwc(bb.to_f32(deltas_in, ctx.in_operands[1]), nchw)
    anchors = bb.to_f32(anchors_in, ctx.in_operands[2])
    image = bb.to_f32(image_in, ctx.in_operands[3])
    n, h, w, a = scores.shape
    if deltas.shape != (n, h, w, 4 * a) or image.shape != (n, 2) or anchors.shape != (a, 4):
        ctx.fail(
            f"inconsistent shapes (NHWC): scores {list(scores.shape)}, deltas {list(deltas.shape)}, "
            f"anchors {list(anchors.shape)}, image info {list(image.shape)}"
        )
    h_stride, w_stride = F32(ctx.scalar(4)), F32(ctx.scalar(5))
    pre_nms, post_nms = int(ctx.scalar(6)), int(ctx.scalar(7))
    discard = bb.hard_discard(ctx.scalar(8))
    min_size = F32(ctx.scalar(9))

    hs = np.arange(h, dtype=F32) * h_stride
    ws = np.arange(w, dtype=F32) * w_stride
    shift = np.zeros((h, w, 1, 4), F32)
    shift[..., 0] = shift[..., 2] = ws[None, :, None]
    shift[..., 1] = shift[..., 3] = hs[:, None, None]
    rois = (anchors[None, None] + shift).reshape(-1, 4)
    if bb.bad_boxes(rois).size:
        ctx.fail("an anchor is malformed (x2 < x1 or y2 < y1)")
    count = rois.shape[0]

    out_scores, out_rois, out_batches = [], [], []
    for b in range(n):
        img = np.broadcast_to(image[b], (count, 2))
        boxes = bb.bbox_transform(rois, deltas[b].reshape(count, 1, 4), img)[:, 0]
        sc = scores[b].reshape(-1)
        select = np.arange(count)
        if 0 < pre_nms < count:
            select = bb.sort_by_score_desc(select, sc)[:pre_nms]
        cand = boxes[select]
        bw, bh = cand[:, 2] - cand[:, 0], cand[:, 3] - cand[:, 1]
        ok = (
            (bw > min_size)
            & (bh > min_size)
            & (cand[:, 0] + bw / F32(2) < image[b, 1])
            & (cand[:, 1] + bh / F32(2) < image[b, 0])
        )
        kept = bb.nms_single_class(sc, boxes, select[ok], post_nms, discard)
        out_scores.append(sc[kept])
        out_rois.append(boxes[kept])
        out_batches.append(np.full(len(kept), b, np.int32))
    return [
        bb.from_f32(np.concatenate(out_scores), ctx.out_operands[0]),
        bb.from_f32(np.concatenate(out_rois).reshape(-1, 4), ctx.out_operands[1]),
        np.concatenate(out_batches).astype(np.int32),
    ]
