"""DETECTION_POSTPROCESSING: SSD box decoding plus NMS (TFLite's detection postprocess).

Signature:
  0: class scores [batches, num_anchors, num_classes] (num_classes > 1, class 0 background):
     TENSOR_FLOAT32 or TENSOR_FLOAT16
  1: box deltas [batches, num_anchors, length >= 4], [ty, tx, th, tw, ...]: the same type
  2: anchors [num_anchors, 4], [y_center, x_center, h, w]: the same type
  3..6: scale y, x, h, w (FLOAT16 for fp16, FLOAT32 otherwise; > 0)
  7: BOOL use regular (per-class) NMS
  8: INT32 max detections (> 0)
  9: INT32 max classes per detection (> 0 for the fast path)
  10: INT32 max detections per class (> 0 for regular NMS)
  11: score threshold (>= 0), 12: IoU threshold (>= 0) (FLOAT16 / FLOAT32)
  13: BOOL background class is counted in the output labels
Outputs, with num_out = max_detections (regular) or max_detections * max_classes (fast):
  0: scores [batches, num_out], the scores' type
  1: boxes [batches, num_out, 4], [y1, x1, y2, x2], the anchors' type
  2: classes [batches, num_out] TENSOR_INT32 (class index, minus 1 unless 13 is true)
  3: detection count [batches] TENSOR_INT32
Unused output slots are 0.  No input may be zero-sized.

Semantics (float32; fp16 widened):  y_c = ay + ah * ty / scale_y, x_c = ax + aw * tx / scale_x,
half_h = ah * exp(th / scale_h) * 0.5, half_w likewise; box = (y_c - half_h, x_c - half_w,
y_c + half_h, x_c + half_w).
  regular: for each class c >= 1, anchors with score > threshold (anchor order) go through hard
  NMS (IoU >= threshold suppresses, bbox_common.nms_single_class) keeping max_per_class; all
  survivors are sorted by descending score (stable) and cut to max_detections.
  fast: each anchor's best non-background score; anchors above the threshold go through hard
  NMS on that score keeping max_detections; each kept anchor emits its
  min(num_classes - 1, max_classes) best classes in descending score (stable).
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops import bbox_common as bb
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
F32 = np.float32


def validate(v: OpView) -> None:
    v.expect_counts(14, 4)
    v.expect_types([TYPES])
    t = v.input_type(0)
    s = bb.scalar_type(t)
    v.expect_types(
        [t, t, t, s, s, s, s, T.BOOL, T.INT32, T.INT32, T.INT32, s, s, T.BOOL], [t, t, T.TENSOR_INT32, T.TENSOR_INT32]
    )
    for i, r in enumerate((3, 3, 2)):
        v.expect_rank(i, [r])
    for i, what in ((3, "scale y"), (4, "scale x"), (5, "scale h"), (6, "scale w"), (8, "max detections")):
        value = v.constant_scalar(i)
        if value is not None and not value > 0:
            v.fail(f"{what} must be > 0, got {value}", input=i)
    for i, what in ((11, "score threshold"), (12, "IoU threshold")):
        value = v.constant_scalar(i)
        if value is not None and not value >= 0:
            v.fail(f"{what} must be >= 0, got {value}", input=i)
    regular = v.constant_scalar(7)
    if regular is not None:
        i, what = (10, "max detections per class") if regular else (9, "max classes per detection")
        value = v.constant_scalar(i)
        if value is not None and value <= 0:
            v.fail(f"{what} must be > 0, got {value}", input=i)


def decode(anchors: np.ndarray, deltas: np.ndarray, scales: tuple) -> np.ndarray:
    """[..., num_anchors, 4] boxes [y1, x1, y2, x2] from anchors [num_anchors, 4] and deltas."""
    sy, sx, sh, sw = (F32(s) for s in scales)
    ay, ax, ah, aw = (anchors[:, i] for i in range(4))
    y = ay + ah * deltas[..., 0] / sy
    x = ax + aw * deltas[..., 1] / sx
    with np.errstate(over="ignore"):
        hh = ah * np.exp(deltas[..., 2] / sh) * F32(0.5)
        hw = aw * np.exp(deltas[..., 3] / sw) * F32(0.5)
    return np.stack([y - hh, x - hw, y + hh, x + hw], axis=-1).astype(F32)


@register(Op.DETECTION_POSTPROCESSING, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    scores_in, deltas_in, anchors_in = ctx.inputs[:3]
    if scores_in.ndim != 3 or deltas_in.ndim != 3 or anchors_in.ndim != 2:
        ctx.fail("scores and deltas must have rank 3, anchors rank 2")
    if min(scores_in.size, deltas_in.size, anchors_in.size) == 0:
        ctx.fail("zero-sized inputs are not allowed")
    nb, na, nc = scores_in.shape
    if deltas_in.shape[:2] != (nb, na) or deltas_in.shape[2] < 4 or anchors_in.shape != (na, 4):
        ctx.fail(
            f"inconsistent shapes: scores {list(scores_in.shape)}, deltas {list(deltas_in.shape)}, "
            f"anchors {list(anchors_in.shape)}"
        )
    if nc <= 1:
        ctx.fail(f"needs more than one class (class 0 is background), got {nc}")
    scales = tuple(ctx.scalar(i) for i in range(3, 7))
    if not all(s > 0 for s in scales):
        ctx.fail(f"box scales must be > 0, got {list(scales)}")
    regular = bool(ctx.scalar(7))
    max_det, max_classes, max_per_class = (int(ctx.scalar(i)) for i in (8, 9, 10))
    score_thr, iou_thr = F32(ctx.scalar(11)), ctx.scalar(12)
    label_offset = 0 if bool(ctx.scalar(13)) else 1
    if max_det <= 0 or (regular and max_per_class <= 0) or (not regular and max_classes <= 0):
        ctx.fail("max detections (and per class / classes per detection) must be > 0")
    num_out = max_det if regular else max_det * max_classes

    scores = bb.to_f32(scores_in, ctx.in_operands[0])
    boxes = decode(bb.to_f32(anchors_in, ctx.in_operands[2]), bb.to_f32(deltas_in, ctx.in_operands[1])[..., :4], scales)
    out_scores = np.zeros((nb, num_out), F32)
    out_boxes = np.zeros((nb, num_out, 4), F32)
    out_classes = np.zeros((nb, num_out), np.int32)
    out_count = np.zeros(nb, np.int32)
    discard = bb.hard_discard(iou_thr)
    for b in range(nb):
        sc = scores[b]
        if regular:
            flat = sc.reshape(-1)
            by_index = np.repeat(boxes[b], nc, axis=0)  # score index a * nc + c -> box of anchor a
            kept = [
                bb.nms_single_class(
                    flat, by_index, np.nonzero(sc[:, c] > score_thr)[0] * nc + c, max_per_class, discard
                )
                for c in range(1, nc)
            ]
            sel = bb.sort_by_score_desc(np.concatenate(kept), flat)[:max_det]
            m = len(sel)
            out_scores[b, :m] = flat[sel]
            out_boxes[b, :m] = boxes[b][sel // nc]
            out_classes[b, :m] = sel % nc - label_offset
        else:
            n_cls = min(nc - 1, max_classes)
            best = sc[:, 1:].max(axis=1)
            sel = bb.nms_single_class(best, boxes[b], np.nonzero(best > score_thr)[0], max_det, discard)
            order = np.argsort(-sc[sel, 1:], axis=1, kind="stable")[:, :n_cls] + 1  # [len(sel), n_cls]
            m = len(sel) * n_cls
            out_scores[b, :m] = np.take_along_axis(sc[sel], order, axis=1).reshape(-1)
            out_boxes[b, :m] = np.repeat(boxes[b][sel], n_cls, axis=0)
            out_classes[b, :m] = (order - label_offset).reshape(-1)
        out_count[b] = m
    dtype = ctx.output_dtype(0)
    return [out_scores.astype(dtype), out_boxes.astype(ctx.output_dtype(1)), out_classes, out_count]
