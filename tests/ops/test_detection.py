"""AXIS_ALIGNED_BBOX_TRANSFORM, BOX_WITH_NMS_LIMIT, GENERATE_PROPOSALS, DETECTION_POSTPROCESSING,
ROI_ALIGN, ROI_POOLING, HEATMAP_MAX_KEYPOINT: hand-checked examples, signature validation, the
NMS bookkeeping against a literal transcription of the reference loop, and the AOSP golden
vectors that use only these operations."""

import numpy as np
import pytest
from helpers import assert_examples_cover, assert_vector_passes, check_example, vector_params

from nnconform.errors import OpFailure, ValidationError
from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.executor import execute
from nnconform.reference.ops import bbox_common as bb
from nnconform.reference.ops.registry import OpView, get_op
from nnconform.suites.examples.detection import EXAMPLES

OPS = {
    "AXIS_ALIGNED_BBOX_TRANSFORM",
    "BOX_WITH_NMS_LIMIT",
    "GENERATE_PROPOSALS",
    "DETECTION_POSTPROCESSING",
    "ROI_ALIGN",
    "ROI_POOLING",
    "HEATMAP_MAX_KEYPOINT",
}
F32, F16, U8, I8 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
I32, Q16A = T.TENSOR_INT32, T.TENSOR_QUANT16_ASYMM


# --- (a) hand-checked examples ---------------------------------------------------------


@pytest.mark.parametrize("ex", [e for e in EXAMPLES if not e.expect_failure], ids=lambda e: e.name)
def test_example(ex):
    check_example(ex)


def test_every_op_and_type_has_an_example():
    assert {name for e in EXAMPLES for name in e.operations} >= OPS
    assert_examples_cover(OPS, EXAMPLES)


# --- NMS bookkeeping ------------------------------------------------------------------------


def _reference_nms(scores, boxes, select, max_det, discard_one):
    """Literal transcription of the reference's in-place loop (swap the best to the front, swap
    each dropped candidate with the last live one and look at the same slot again)."""
    sel = list(select)
    start, end, n = 0, len(sel), 0
    limit = len(sel) if max_det < 0 else max_det
    while start < end and n < limit:
        best = max(range(start, end), key=lambda i: (scores[sel[i]], -i))
        sel[start], sel[best] = sel[best], sel[start]
        i = start + 1
        while i < end:
            if discard_one(sel[i], sel[start]):
                end -= 1
                sel[i], sel[end] = sel[end], sel[i]
            else:
                i += 1
        start += 1
        n += 1
    return sel[:start]


@pytest.mark.parametrize("seed", range(40))
def test_nms_matches_reference_loop(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 25))
    # Few distinct scores, so ties (and therefore the survivors' order) matter.
    scores = rng.integers(0, 4, n).astype(np.float32) / 4
    xy = rng.integers(0, 6, (n, 2)).astype(np.float32)
    boxes = np.concatenate([xy, xy + rng.integers(1, 5, (n, 2))], 1).astype(np.float32)
    select = rng.permutation(n)[: int(rng.integers(0, n + 1))]
    max_det = int(rng.integers(-1, n + 1))
    thr = np.float32(0.3)
    got = bb.nms_single_class(scores, boxes, select, max_det, bb.hard_discard(thr))
    want = _reference_nms(scores, boxes, select, max_det, lambda i, k: bb.iou(boxes[i][None], boxes[k])[0] >= thr)
    assert got.tolist() == want

    soft = scores.copy()
    got = bb.nms_single_class(soft, boxes, select, max_det, bb.soft_discard(soft, 1, 0.3, 0.5, 0.1))
    soft_ref = scores.copy()

    def linear(i, k):
        v = bb.iou(boxes[i][None], boxes[k])[0]
        soft_ref[i] = soft_ref[i] * (np.float32(1) if v < thr else np.float32(1) - v)
        return soft_ref[i] < np.float32(0.1)

    want = _reference_nms(soft_ref, boxes, select, max_det, linear)
    assert got.tolist() == want
    np.testing.assert_array_equal(soft, soft_ref)


# --- layout and zero-size behaviour -----------------------------------------------------------


def _roi_model(op, nchw, dims, n_rois, extra):
    b = ModelBuilder()
    x = b.input(F32, dims)
    r = b.input(F32, [n_rois, 4])
    bi = b.input(I32, [n_rois])
    y = b.output(F32, [0, 0, 0, 0])
    b.operation(op, [x, r, bi, b.i32(3), b.i32(2), b.f32(2.0), b.f32(1.0), *extra(b), b.bool(nchw)], [y])
    return b.build()


@pytest.mark.parametrize("op", [Op.ROI_ALIGN, Op.ROI_POOLING])
def test_roi_ops_nchw_matches_nhwc(op):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 5, 6, 3)).astype(np.float32)
    rois = np.array([[0, 0, 5, 4], [1, 2, 6, 5], [3, 1, 3, 1]], np.float32)
    batch = np.array([1, 0, 1], np.int32)
    extra = (lambda b: [b.i32(2), b.i32(0)]) if op == Op.ROI_ALIGN else (lambda b: [])
    nhwc = execute(_roi_model(op, False, [2, 5, 6, 3], 3, extra), [x, rois, batch])[0]
    nchw = execute(_roi_model(op, True, [2, 3, 5, 6], 3, extra), [x.transpose(0, 3, 1, 2), rois, batch])[0]
    assert nhwc.shape == (3, 3, 2, 3)
    np.testing.assert_array_equal(nchw.transpose(0, 2, 3, 1), nhwc)


def test_roi_align_matches_brute_force_float32():
    """Loop-per-bin transcription of the float path on random data and adaptive ratios."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 6, 7, 2)).astype(np.float32)
    rois = np.array([[0.5, 1, 6, 9], [3, 0, 4, 12], [0, 0, 6.5, 11.5]], np.float32)
    batch = np.zeros(3, np.int32)
    got = execute(_roi_model(Op.ROI_ALIGN, False, [1, 6, 7, 2], 3, lambda b: [b.i32(0), b.i32(0)]), [x, rois, batch])[0]
    f = np.float32
    for r, roi in enumerate(rois):
        ws, hs, we, he = roi[0] * f(1), roi[1] * f(0.5), roi[2] * f(1), roi[3] * f(0.5)
        rw, rh = max(we - ws, f(1)), max(he - hs, f(1))
        sw, sh = rw / f(2), rh / f(3)
        nw, nh = int(np.ceil(sw)), int(np.ceil(sh))
        for i in range(3):
            for j in range(2):
                acc = np.zeros(2, f)
                for yi in range(nh):
                    for xi in range(nw):
                        y = sh * f(i) + hs + (sh / f(nh)) / f(2) + (sh / f(nh)) * f(yi)
                        xx = sw * f(j) + ws + (sw / f(nw)) / f(2) + (sw / f(nw)) * f(xi)
                        y0, x0 = int(np.floor(y)), int(np.floor(xx))
                        dy, dx = y - f(y0), xx - f(x0)
                        y1, x1 = y0 + 1, x0 + 1
                        if y0 >= 5:
                            y0 = y1 = 5
                            dy = f(0)
                        if x0 >= 6:
                            x0 = x1 = 6
                            dx = f(0)
                        acc += (
                            (f(1) - dx) * (f(1) - dy) * x[0, y0, x0]
                            + dx * (f(1) - dy) * x[0, y0, x1]
                            + (f(1) - dx) * dy * x[0, y1, x0]
                            + dx * dy * x[0, y1, x1]
                        )
                np.testing.assert_allclose(got[r, i, j], acc / f(nh * nw), rtol=1e-5, atol=1e-6)


def _run_single(op, tensors, scalars, outputs, values):
    b = ModelBuilder()
    ins = [b.input(*t[:2], scale=t[2] if len(t) > 2 else 0.0, zero_point=t[3] if len(t) > 3 else 0) for t in tensors]
    outs = [b.output(*t[:2], scale=t[2] if len(t) > 2 else 0.0, zero_point=t[3] if len(t) > 3 else 0) for t in outputs]
    b.operation(op, ins + [getattr(b, k)(v) for k, v in scalars], outs)
    return execute(b.build(), values)


def test_bbox_transform_rejects_bad_roi_and_batch():
    for rois, batch in (([[5, 0, 1, 1]], [0]), ([[0, 0, 1, 1]], [2])):
        with pytest.raises(OpFailure, match="AXIS_ALIGNED_BBOX_TRANSFORM"):
            _run_single(
                Op.AXIS_ALIGNED_BBOX_TRANSFORM,
                [(F32, [1, 4]), (F32, [1, 4]), (I32, [1]), (F32, [1, 2])],
                [],
                [(F32, [1, 4])],
                [
                    np.array(rois, np.float32),
                    np.zeros((1, 4), np.float32),
                    np.array(batch, np.int32),
                    np.array([[5, 5]], np.float32),
                ],
            )


def test_roi_align_rejects_roi_outside_feature_map():
    with pytest.raises(OpFailure, match="ROI_ALIGN.*roi 0"):
        execute(
            _roi_model(Op.ROI_ALIGN, False, [1, 4, 4, 1], 1, lambda b: [b.i32(0), b.i32(0)]),
            [np.zeros((1, 4, 4, 1), np.float32), np.array([[0, 0, 20, 2]], np.float32), np.zeros(1, np.int32)],
        )


def test_roi_pooling_rejects_zero_sized_input():
    with pytest.raises(OpFailure, match="ROI_POOLING.*zero-sized"):
        execute(
            _roi_model(Op.ROI_POOLING, False, [1, 4, 4, 1], 0, lambda b: []),
            [np.zeros((1, 4, 4, 1), np.float32), np.zeros((0, 4), np.float32), np.zeros(0, np.int32)],
        )


# Zero-row inputs cannot come from a request (NNAPI wants fully specified input dimensions), so
# these run on the executor directly; the examples reach zero rows through BOX_WITH_NMS_LIMIT.
def test_bbox_transform_zero_rois():
    got = _run_single(
        Op.AXIS_ALIGNED_BBOX_TRANSFORM,
        [(F32, [0, 4]), (F32, [0, 8]), (I32, [0]), (F32, [1, 2])],
        [],
        [(F32, [0, 8])],
        [
            np.zeros((0, 4), np.float32),
            np.zeros((0, 8), np.float32),
            np.zeros(0, np.int32),
            np.array([[9, 9]], np.float32),
        ],
    )
    assert got[0].shape == (0, 8) and got[0].dtype == np.float32


def test_roi_align_zero_rois_nchw():
    got = execute(
        _roi_model(Op.ROI_ALIGN, True, [1, 3, 4, 4], 0, lambda b: [b.i32(0), b.i32(0)]),
        [np.zeros((1, 3, 4, 4), np.float32), np.zeros((0, 4), np.float32), np.zeros(0, np.int32)],
    )
    assert got[0].shape == (0, 3, 3, 2)


def test_box_with_nms_limit_zero_rois():
    scalars = [("f32", 0.1), ("i32", -1), ("i32", 0), ("f32", 0.5), ("f32", 1.0), ("f32", 0.1)]
    got = _run_single(
        Op.BOX_WITH_NMS_LIMIT,
        [(F32, [0, 2]), (F32, [0, 8]), (I32, [0])],
        scalars,
        [(F32, [0]), (F32, [0, 4]), (I32, [0]), (I32, [0])],
        [np.zeros((0, 2), np.float32), np.zeros((0, 8), np.float32), np.zeros(0, np.int32)],
    )
    assert [g.shape for g in got] == [(0,), (0, 4), (0,), (0,)]


# --- (b) validation ---------------------------------------------------------------------


def _view(op, tensors, scalars, outputs):
    b = ModelBuilder()
    ins = [b.input(*t[:2], scale=t[2] if len(t) > 2 else 0.0, zero_point=t[3] if len(t) > 3 else 0) for t in tensors]
    outs = [b.output(*t[:2], scale=t[2] if len(t) > 2 else 0.0, zero_point=t[3] if len(t) > 3 else 0) for t in outputs]
    b.operation(op, ins + [getattr(b, k)(v) for k, v in scalars], outs)
    m = b.build()
    return OpView(m, m.main, 0)


_NMS_SCALARS = [("f32", 0.1), ("i32", -1), ("i32", 0), ("f32", 0.5), ("f32", 1.0), ("f32", 0.1)]
_NMS_OUT_Q = [(U8, [0], 0.01, 0), (Q16A, [0, 4], 0.125, 0), (I32, [0]), (I32, [0])]
_RA_SCALARS = [("i32", 2), ("i32", 2), ("f32", 1.0), ("f32", 1.0), ("i32", 0), ("i32", 0), ("bool", False)]

BAD = [
    # (operation, tensors, scalars, outputs, expected message pattern)
    (
        Op.BOX_WITH_NMS_LIMIT,
        [(F32, [2, 2]), (F32, [2, 8]), (I32, [2])],
        _NMS_SCALARS[:-1],
        [(F32, [0]), (F32, [0, 4]), (I32, [0]), (I32, [0])],
        r"BOX_WITH_NMS_LIMIT.*takes 9 inputs",
    ),
    (
        Op.BOX_WITH_NMS_LIMIT,
        [(F32, [2, 2]), (F16, [2, 8]), (I32, [2])],
        _NMS_SCALARS,
        [(F32, [0]), (F32, [0, 4]), (I32, [0]), (I32, [0])],
        r"BOX_WITH_NMS_LIMIT\) input 1: must be TENSOR_FLOAT32",
    ),
    (
        Op.BOX_WITH_NMS_LIMIT,
        [(F32, [2, 2]), (F32, [2, 8]), (I32, [2])],
        _NMS_SCALARS[:2] + [("i32", 3)] + _NMS_SCALARS[3:],
        [(F32, [0]), (F32, [0, 4]), (I32, [0]), (I32, [0])],
        r"BOX_WITH_NMS_LIMIT\) input 5: NMS kernel",
    ),
    (
        Op.BOX_WITH_NMS_LIMIT,
        [(U8, [2, 2], 0.01, 0), (Q16A, [2, 8], 0.25, 0), (I32, [2])],
        _NMS_SCALARS,
        _NMS_OUT_Q,
        r"BOX_WITH_NMS_LIMIT\) input 1: quantised boxes need scale 0.125",
    ),
    (
        Op.BOX_WITH_NMS_LIMIT,
        [(U8, [2, 2], 0.01, 0), (Q16A, [2, 8], 0.125, 0), (I32, [2])],
        _NMS_SCALARS,
        [(U8, [0], 0.02, 0)] + _NMS_OUT_Q[1:],
        r"BOX_WITH_NMS_LIMIT\) output 0: scale/zero point",
    ),
    (
        Op.BOX_WITH_NMS_LIMIT,
        [(F16, [2, 2]), (F16, [2, 8]), (I32, [2])],
        _NMS_SCALARS,
        [(F16, [0]), (F16, [0, 4]), (I32, [0]), (I32, [0])],
        r"BOX_WITH_NMS_LIMIT\) input 3: must be FLOAT16",
    ),
    (
        Op.AXIS_ALIGNED_BBOX_TRANSFORM,
        [(Q16A, [1, 4], 0.125, 0), (F32, [1, 4]), (I32, [1]), (Q16A, [1, 2], 0.125, 0)],
        [],
        [(Q16A, [1, 4], 0.125, 0)],
        r"AXIS_ALIGNED_BBOX_TRANSFORM\) input 1: must be TENSOR_QUANT8_ASYMM",
    ),
    (
        Op.AXIS_ALIGNED_BBOX_TRANSFORM,
        [(F32, [1, 4]), (F32, [1, 4]), (I32, [1]), (F32, [1, 2])],
        [],
        [(F16, [1, 4])],
        r"AXIS_ALIGNED_BBOX_TRANSFORM\) output 0",
    ),
    (
        Op.AXIS_ALIGNED_BBOX_TRANSFORM,
        [(F32, [1, 4, 1]), (F32, [1, 4]), (I32, [1]), (F32, [1, 2])],
        [],
        [(F32, [1, 4])],
        r"AXIS_ALIGNED_BBOX_TRANSFORM\) input 0: rank",
    ),
    (
        Op.ROI_ALIGN,
        [(U8, [1, 4, 4, 1], 0.1, 0), (F32, [1, 4]), (I32, [1])],
        _RA_SCALARS,
        [(U8, [1, 2, 2, 1], 0.1, 0)],
        r"ROI_ALIGN\) input 1: must be TENSOR_QUANT16_ASYMM",
    ),
    (
        Op.ROI_ALIGN,
        [(F32, [1, 4, 4, 1]), (F32, [1, 4]), (I32, [1])],
        [("i32", 0)] + _RA_SCALARS[1:],
        [(F32, [1, 2, 2, 1])],
        r"ROI_ALIGN\) input 3: output height must be > 0",
    ),
    (
        Op.ROI_ALIGN,
        [(F32, [1, 4, 4, 1]), (F32, [1, 4]), (I32, [1])],
        _RA_SCALARS[:4] + [("i32", -1)] + _RA_SCALARS[5:],
        [(F32, [1, 2, 2, 1])],
        r"ROI_ALIGN\) input 7: height sampling ratio must be >= 0",
    ),
    (
        Op.ROI_POOLING,
        [(F32, [1, 4, 4, 1]), (F32, [1, 4]), (I32, [1])],
        _RA_SCALARS[:4],
        [(F32, [1, 2, 2, 1])],
        r"ROI_POOLING.*takes 8 inputs",
    ),
    (
        Op.ROI_POOLING,
        [(U8, [1, 4, 4, 1], 0.1, 0), (Q16A, [1, 4], 0.125, 0), (I32, [1])],
        _RA_SCALARS[:4] + [("bool", False)],
        [(U8, [1, 2, 2, 1], 0.2, 0)],
        r"ROI_POOLING\) output 0: scale/zero point",
    ),
    (
        Op.HEATMAP_MAX_KEYPOINT,
        [(U8, [1, 3, 3, 1], 0.1, 0), (Q16A, [1, 4], 0.5, 0)],
        [("bool", False)],
        [(U8, [1, 1], 0.1, 0), (Q16A, [1, 1, 2], 0.125, 0)],
        r"HEATMAP_MAX_KEYPOINT\) input 1: quantised boxes",
    ),
    (
        Op.HEATMAP_MAX_KEYPOINT,
        [(F32, [1, 3, 3, 1]), (F32, [1, 4])],
        [("i32", 0)],
        [(F32, [1, 1]), (F32, [1, 1, 2])],
        r"HEATMAP_MAX_KEYPOINT\) input 2: must be BOOL",
    ),
    (
        Op.GENERATE_PROPOSALS,
        [
            (U8, [1, 1, 1, 1], 0.1, 0),
            (U8, [1, 1, 1, 4], 0.1, 0),
            (T.TENSOR_QUANT16_SYMM, [1, 4], 0.5),
            (Q16A, [1, 2], 0.125, 0),
        ],
        [("f32", 1.0), ("f32", 1.0), ("i32", -1), ("i32", -1), ("f32", 0.5), ("f32", 1.0), ("bool", False)],
        [(U8, [0], 0.1, 0), (Q16A, [0, 4], 0.125, 0), (I32, [0])],
        r"GENERATE_PROPOSALS\) input 2: .*scale 0.125",
    ),
    (
        Op.GENERATE_PROPOSALS,
        [(F32, [1, 1, 1, 1]), (F32, [1, 1, 1, 4]), (F32, [1, 4]), (F32, [1, 2])],
        [("f32", 1.0), ("f32", 1.0), ("i32", -1), ("i32", -1), ("f32", 0.5), ("f32", 1.0), ("bool", False)],
        [(F32, [0]), (F32, [0, 4]), (F32, [0])],
        r"GENERATE_PROPOSALS\) output 2: must be TENSOR_INT32",
    ),
    (
        Op.DETECTION_POSTPROCESSING,
        [(F32, [1, 2, 3]), (F32, [1, 2, 4]), (F32, [2, 4])],
        [
            ("f32", 0.0),
            ("f32", 1.0),
            ("f32", 1.0),
            ("f32", 1.0),
            ("bool", True),
            ("i32", 3),
            ("i32", 1),
            ("i32", 1),
            ("f32", 0.5),
            ("f32", 0.5),
            ("bool", False),
        ],
        [(F32, [1, 3]), (F32, [1, 3, 4]), (I32, [1, 3]), (I32, [1])],
        r"DETECTION_POSTPROCESSING\) input 3: scale y",
    ),
    (
        Op.DETECTION_POSTPROCESSING,
        [(F32, [1, 2, 3]), (F32, [1, 2, 4]), (F32, [2, 4])],
        [
            ("f32", 1.0),
            ("f32", 1.0),
            ("f32", 1.0),
            ("f32", 1.0),
            ("bool", True),
            ("i32", 3),
            ("i32", 1),
            ("i32", 0),
            ("f32", 0.5),
            ("f32", 0.5),
            ("bool", False),
        ],
        [(F32, [1, 3]), (F32, [1, 3, 4]), (I32, [1, 3]), (I32, [1])],
        r"DETECTION_POSTPROCESSING\) input 10: max detections per class",
    ),
    (
        Op.DETECTION_POSTPROCESSING,
        [(U8, [1, 2, 3], 0.1, 0), (U8, [1, 2, 4], 0.1, 0), (U8, [2, 4], 0.1, 0)],
        [("f32", 1.0)] * 4
        + [("bool", True), ("i32", 3), ("i32", 1), ("i32", 1), ("f32", 0.5), ("f32", 0.5), ("bool", False)],
        [(U8, [1, 3], 0.1, 0), (U8, [1, 3, 4], 0.1, 0), (I32, [1, 3]), (I32, [1])],
        r"DETECTION_POSTPROCESSING\) input 0: must be TENSOR_FLOAT32",
    ),
]


@pytest.mark.parametrize("op,tensors,scalars,outputs,pattern", BAD, ids=lambda x: getattr(x, "name", None))
def test_validate_rejects(op, tensors, scalars, outputs, pattern):
    v = _view(op, tensors, scalars, outputs)
    with pytest.raises(ValidationError, match=pattern):
        get_op(op).validate(v)


# --- (c) AOSP golden vectors ------------------------------------------------------------------


@pytest.mark.parametrize("case", vector_params(OPS, also={"ADD"}))
def test_aosp_vector(case):
    assert_vector_passes(case)
