"""Box helpers shared by the detection operations (AXIS_ALIGNED_BBOX_TRANSFORM,
BOX_WITH_NMS_LIMIT, GENERATE_PROPOSALS, DETECTION_POSTPROCESSING, ROI_ALIGN, ROI_POOLING,
HEATMAP_MAX_KEYPOINT).

Box encodings: a "corner" box is [x1, y1, x2, y2] (DETECTION_POSTPROCESSING uses [y1, x1, y2, x2]
with the same arithmetic); a "center" box is (w, h, x_center, y_center).

All arithmetic is float32 in the reference's operation order, because NMS decisions
(``iou >= threshold``) and quantised outputs depend on the last bit:
  IoU(a, b) = inter / ((area_a + area_b) - inter), inter = max(x2 - x1, 0) * max(y2 - y1, 0)
  with x1 = max(a.x1, b.x1), x2 = min(a.x2, b.x2), ...;  a is the candidate, b the kept box.
  bbox transform (per roi and class):  w = x2 - x1, h = y2 - y1, cx = (x1 + x2) / 2,
      cy = (y1 + y2) / 2;  w' = exp(dw) * w, h' = exp(dh) * h, cx' = cx + dx * w,
      cy' = cy + dy * h;  corners cx' -/+ w'/2, cy' -/+ h'/2, each clipped to [0, image_w]
      (x) or [0, image_h] (y).

NMS ("hard" or "soft") follows the reference's in-place algorithm exactly, including the order
in which surviving candidates are left, since that order decides which of two equal scores is
picked next: the best remaining candidate (first one on ties) is swapped to the front; every
later candidate that is dropped is swapped with the last live candidate, so the survivors that
sat in the tail fill the holes in reverse order.

Quantised tensors are converted the way the reference converts them: to float32 as
(q - zero_point) * scale, and back as clamp(round_half_away(x / scale + zero_point)).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from nnconform.ir import Operand
from nnconform.ir import OperandType as T
from nnconform.reference.arith.quant import round_half_away_array

F32 = np.float32

# Quantised box coordinates (TENSOR_QUANT16_ASYMM) are fixed at 1/8 pixel.
BOX_SCALE = 0.125


# --- conversions ------------------------------------------------------------------------


def to_f32(x: np.ndarray, op: Operand) -> np.ndarray:
    """Stored values -> float32 (fp16 widened, quantised dequantised in float32)."""
    if op.info.is_float:
        return np.asarray(x).astype(F32)
    return (np.asarray(x).astype(F32) - F32(op.zero_point)) * F32(op.scale)


def quantize_f32(x: np.ndarray, scale: float, zero_point: int, dtype) -> np.ndarray:
    """The reference's convertFloat32ToQuant: round(x / scale + zero_point) in float32, clamped
    to the storage type (zero point added *before* rounding)."""
    v = np.asarray(x, dtype=F32) / F32(scale) + F32(zero_point)
    info = np.iinfo(dtype)
    return np.clip(round_half_away_array(v), info.min, info.max).astype(dtype)


def from_f32(x: np.ndarray, op: Operand) -> np.ndarray:
    """float32 results -> ``op``'s storage representation."""
    if op.info.is_float:
        return np.asarray(x, dtype=F32).astype(op.info.dtype)
    return quantize_f32(x, op.scale, op.zero_point, op.info.dtype)


def is_box_quant(op: Operand) -> bool:
    return op.scale == BOX_SCALE and op.zero_point == 0


# --- geometry ---------------------------------------------------------------------------


def iou(candidates: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """IoU of each candidate box [M, 4] against one kept box [4], float32, reference order.
    A zero-area union gives NaN, which compares false against any threshold (as in C)."""
    c = candidates.astype(F32, copy=False)
    k = kept.astype(F32, copy=False)
    area_c = (c[:, 2] - c[:, 0]) * (c[:, 3] - c[:, 1])
    area_k = (k[2] - k[0]) * (k[3] - k[1])
    w = np.maximum(np.minimum(c[:, 2], k[2]) - np.maximum(c[:, 0], k[0]), F32(0))
    h = np.maximum(np.minimum(c[:, 3], k[3]) - np.maximum(c[:, 1], k[1]), F32(0))
    inter = w * h
    with np.errstate(divide="ignore", invalid="ignore"):
        return inter / ((area_c + area_k) - inter)


def bbox_transform(rois: np.ndarray, deltas: np.ndarray, image_hw: np.ndarray) -> np.ndarray:
    """Apply [dx, dy, dw, dh] deltas to corner boxes and clip to the image.

    rois [N, 4] float32; deltas [N, K, 4] float32 (K classes); image_hw [N, 2] float32 (the
    height and width of each roi's image).  Returns [N, K, 4] float32."""
    r = rois.astype(F32, copy=False)[:, None, :]
    d = deltas.astype(F32, copy=False)
    w = r[..., 2] - r[..., 0]
    h = r[..., 3] - r[..., 1]
    cx = (r[..., 0] + r[..., 2]) / F32(2)
    cy = (r[..., 1] + r[..., 3]) / F32(2)
    with np.errstate(over="ignore"):
        nw = np.exp(d[..., 2]) * w
        nh = np.exp(d[..., 3]) * h
    ncx = cx + d[..., 0] * w
    ncy = cy + d[..., 1] * h
    img_h = image_hw[:, None, 0].astype(F32)
    img_w = image_hw[:, None, 1].astype(F32)
    out = np.empty(d.shape, F32)
    out[..., 0] = np.minimum(np.maximum(ncx - nw / F32(2), F32(0)), img_w)
    out[..., 1] = np.minimum(np.maximum(ncy - nh / F32(2), F32(0)), img_h)
    out[..., 2] = np.minimum(np.maximum(ncx + nw / F32(2), F32(0)), img_w)
    out[..., 3] = np.minimum(np.maximum(ncy + nh / F32(2), F32(0)), img_h)
    return out


def bad_boxes(boxes: np.ndarray) -> np.ndarray:
    """Indices of malformed corner boxes (x2 < x1 or y2 < y1), which the reference rejects."""
    return np.nonzero(~((boxes[:, 0] <= boxes[:, 2]) & (boxes[:, 1] <= boxes[:, 3])))[0]


# --- NMS --------------------------------------------------------------------------------

# discard(candidate_indices, ious) -> bool mask of candidates to drop (soft NMS also rescales
# the candidates' scores in place before deciding).
Discard = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _compact(rest: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Survivors of ``rest`` in the order the reference's swap-with-last loop leaves them:
    survivors among the first m (m = number kept) stay put, the holes there are filled by the
    survivors from the tail, last one first."""
    m = int(keep.sum())
    out = rest[:m].copy()
    out[np.nonzero(~keep[:m])[0]] = rest[m:][keep[m:]][::-1]
    return out


def nms_single_class(
    scores: np.ndarray, boxes: np.ndarray, select: np.ndarray, max_detections: int, discard: Discard
) -> np.ndarray:
    """Greedy NMS over the candidate indices ``select`` (into ``scores`` and ``boxes``).
    Returns the kept indices in selection order; at most ``max_detections`` (all if < 0)."""
    sel = np.array(select, dtype=np.int64)
    limit = len(sel) if max_detections < 0 else max_detections
    start, end = 0, len(sel)
    while start < end and start < limit:
        best = start + int(np.argmax(scores[sel[start:end]]))
        sel[start], sel[best] = sel[best], sel[start]
        rest = sel[start + 1 : end]
        if rest.size:
            survivors = _compact(rest, ~discard(rest, iou(boxes[rest], boxes[sel[start]])))
            end = start + 1 + len(survivors)
            sel[start + 1 : end] = survivors
        start += 1
    return sel[:start]


def hard_discard(iou_threshold: float) -> Discard:
    thr = F32(iou_threshold)
    return lambda idx, ious: ious >= thr


def soft_discard(
    scores: np.ndarray, kernel: int, iou_threshold: float, sigma: float, score_threshold: float
) -> Discard:
    """BOX_WITH_NMS_LIMIT's kernels: 0 hard (weight 0 at iou >= threshold), 1 linear
    (1 - iou at iou >= threshold), 2 gaussian exp(-iou^2 / sigma).  The candidate's score is
    multiplied by the weight; it is dropped if the new score is below ``score_threshold``."""
    thr, sig, keep_thr = F32(iou_threshold), F32(sigma), F32(score_threshold)

    def weight(ious: np.ndarray) -> np.ndarray:
        if kernel == 0:
            return np.where(ious < thr, F32(1), F32(0)).astype(F32)
        if kernel == 1:
            return np.where(ious < thr, F32(1), F32(1) - ious).astype(F32)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.exp((F32(-1) * ious) * ious / sig).astype(F32)

    def discard(idx: np.ndarray, ious: np.ndarray) -> np.ndarray:
        scores[idx] = scores[idx] * weight(ious)
        return scores[idx] < keep_thr

    return discard


def sort_by_score_desc(indices: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Indices ordered by descending score; equal scores keep their order."""
    return indices[np.argsort(-scores[indices], kind="stable")]


# --- shared validation helpers ------------------------------------------------------------

FLOAT_TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
QUANT8_TYPES = (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


def scalar_type(tensor_type: T) -> T:
    """FLOAT16 scalars go with TENSOR_FLOAT16; every other variant takes FLOAT32 scalars."""
    return T.FLOAT16 if tensor_type == T.TENSOR_FLOAT16 else T.FLOAT32


def expect_box_quant(v, *, input: int | None = None, output: int | None = None) -> None:
    """Quantised boxes (TENSOR_QUANT16_ASYMM) must have scale 0.125 and zero point 0."""
    op = v.inputs[input] if input is not None else v.outputs[output]
    if not is_box_quant(op):
        where = {"input": input} if input is not None else {"output": output}
        v.fail(f"quantised boxes need scale 0.125 and zero point 0, got ({op.scale:g}, {op.zero_point})", **where)
