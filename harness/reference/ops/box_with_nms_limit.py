"""BOX_WITH_NMS_LIMIT: per-class (soft) non-maximum suppression with a detection limit.

Signature:
  0: scores [num_rois, num_classes] (num_classes > 1; num_rois may be 0): TENSOR_FLOAT32,
     TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM or TENSOR_QUANT8_ASYMM_SIGNED
  1: boxes [num_rois, num_classes * 4], corner encoding [x1, y1, x2, y2] per class: same float
     type as the scores, or TENSOR_QUANT16_ASYMM (scale 0.125, zero point 0) for quantised scores
  2: batch index of each roi [num_rois], TENSOR_INT32; rois of one batch must be contiguous
  3: score threshold (FLOAT16 for fp16, FLOAT32 otherwise): candidates need score > it
  4: INT32 maximum number of detections per image, and per class (< 0: unlimited)
  5: INT32 NMS kernel: 0 hard, 1 linear, 2 gaussian
  6: IoU threshold (FLOAT16/FLOAT32), for kernels 0 and 1
  7: sigma (FLOAT16/FLOAT32), for the gaussian kernel
  8: NMS score threshold (FLOAT16/FLOAT32): a candidate whose rescaled score falls below it is
     dropped
Outputs (num_out can be 0, the reason many CTS "zero_sized" models start with this op):
  0: scores [num_out], the scores' type; quantised: the input scores' scale and zero point
  1: boxes [num_out, 4], the boxes' type (TENSOR_QUANT16_ASYMM: scale 0.125, zero point 0)
  2: classes [num_out] TENSOR_INT32
  3: batch index [num_out] TENSOR_INT32

Semantics (reference order): everything runs on float32 copies (fp16 widened, quantised values
dequantised).  Rois are split into runs of equal consecutive batch index.  In each run, for
every class c >= 1 (class 0 is background): the rois whose class-c score > threshold, in roi
order, go through soft NMS (bbox_common.nms_single_class with the kernel's weight, limit
``max_detections``; the hard kernel is the weight-0 case, so a suppressed box with NMS score
threshold <= 0 survives with score 0).  The survivors of all classes are sorted by descending
(rescaled) score, cut to max_detections, and sorted again by class, then descending score
(stable sorts; the reference's std::sort is stable at the sizes CTS uses).  Output scores are
the rescaled ones (quantised as round(x / scale + zero_point)); boxes are copied unchanged from
the input; the batch index is that of the run's first roi.  The reference only checks the first
num_rois_in_run boxes of each run's flat box list for x1 <= x2, y1 <= y2.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops import bbox_common as bb
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


def validate(v: OpView) -> None:
    v.expect_counts(9, 4)
    v.expect_types([TYPES])
    t = v.input_type(0)
    box_t = T.TENSOR_QUANT16_ASYMM if t in bb.QUANT8_TYPES else t
    s = bb.scalar_type(t)
    v.expect_types([t, box_t, T.TENSOR_INT32, s, T.INT32, T.INT32, s, s, s], [t, box_t, T.TENSOR_INT32, T.TENSOR_INT32])
    v.expect_rank(0, [2])
    v.expect_rank(1, [2])
    v.expect_rank(2, [1])
    v.expect_scalar_in(5, [0, 1, 2], "NMS kernel")
    if t in bb.QUANT8_TYPES:
        bb.expect_box_quant(v, input=1)
        bb.expect_box_quant(v, output=1)
        v.expect_same_quant(("input", 0), ("output", 0))


@register(Op.BOX_WITH_NMS_LIMIT, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    scores_in, boxes_in, batches = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    if scores_in.ndim != 2 or boxes_in.ndim != 2 or batches.ndim != 1:
        ctx.fail("scores and boxes must have rank 2, batch indices rank 1")
    num_rois, num_classes = scores_in.shape
    if num_classes <= 1:
        ctx.fail(f"needs more than one class (class 0 is background), got {num_classes}")
    if boxes_in.shape != (num_rois, 4 * num_classes) or batches.shape != (num_rois,):
        ctx.fail(
            f"boxes {list(boxes_in.shape)} and batch indices {list(batches.shape)} must be "
            f"[{num_rois}, {4 * num_classes}] and [{num_rois}]"
        )
    score_thr = bb.F32(ctx.scalar(3))
    max_det = int(ctx.scalar(4))
    kernel = int(ctx.scalar(5))
    if kernel not in (0, 1, 2):
        ctx.fail(f"unsupported NMS kernel {kernel}")
    iou_thr, sigma, nms_score_thr = ctx.scalar(6), ctx.scalar(7), ctx.scalar(8)

    scores = bb.to_f32(scores_in, ctx.in_operands[0]).reshape(-1).copy()  # rescaled in place
    boxes = bb.to_f32(boxes_in, ctx.in_operands[1]).reshape(-1, 4)
    starts = np.concatenate([[0], np.nonzero(np.diff(batches))[0] + 1]) if num_rois else np.zeros(0, int)
    ends = np.append(starts[1:], num_rois)

    picked, picked_batch = [], []
    for s, e in zip(starts.tolist(), ends.tolist()):
        run_scores = scores[s * num_classes : e * num_classes]  # a view: soft NMS writes here
        run_boxes = boxes[s * num_classes : e * num_classes]
        if bb.bad_boxes(run_boxes[: e - s]).size:
            ctx.fail(f"malformed box (x2 < x1 or y2 < y1) in the rois of batch {int(batches[s])}")
        discard = bb.soft_discard(run_scores, kernel, iou_thr, sigma, nms_score_thr)
        per_class = run_scores.reshape(e - s, num_classes)
        kept = []
        for c in range(1, num_classes):
            cand = np.nonzero(per_class[:, c] > score_thr)[0] * num_classes + c
            kept.append(bb.nms_single_class(run_scores, run_boxes, cand, max_det, discard))
        result = bb.sort_by_score_desc(np.concatenate(kept), run_scores)
        if 0 <= max_det < len(result):
            result = result[:max_det]
        result = result[np.lexsort((-run_scores[result], result % num_classes))]
        picked.append(result + s * num_classes)
        picked_batch.append(np.full(len(result), batches[s], np.int32))

    idx = np.concatenate(picked) if picked else np.zeros(0, np.int64)
    out_scores = bb.from_f32(scores[idx], ctx.out_operands[0])
    out_boxes = boxes_in.reshape(-1, 4)[idx].astype(ctx.output_dtype(1))
    out_classes = (idx % num_classes).astype(np.int32)
    out_batches = np.concatenate(picked_batch) if picked_batch else np.zeros(0, np.int32)
    return [out_scores, out_boxes, out_classes, out_batches.astype(np.int32)]
