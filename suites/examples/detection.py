"""Detection-family examples: AXIS_ALIGNED_BBOX_TRANSFORM, BOX_WITH_NMS_LIMIT, GENERATE_PROPOSALS,
DETECTION_POSTPROCESSING, ROI_ALIGN, ROI_POOLING, HEATMAP_MAX_KEYPOINT.

Every expected value is worked out by hand in the comment above it (box arithmetic, IoUs,
bilinear samples of the linear ramp v = 4y + x, which make the averages easy), never by running
the executor.
"""

import numpy as np

from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.suites.examples import Example

F32, F16, U8, I8 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
I32, Q16A, Q16S = T.TENSOR_INT32, T.TENSOR_QUANT16_ASYMM, T.TENSOR_QUANT16_SYMM


def _model(op, tensors, scalars, outputs, chain=None):
    """tensors/outputs: (type, dims[, scale, zero_point]); scalars: (builder method, value)."""
    b = ModelBuilder()
    ins = [
        b.input(t[0], t[1], scale=t[2] if len(t) > 2 else 0.0, zero_point=t[3] if len(t) > 3 else 0) for t in tensors
    ]
    consts = [getattr(b, kind)(v) for kind, v in scalars]
    outs = [
        b.output(t[0], t[1], scale=t[2] if len(t) > 2 else 0.0, zero_point=t[3] if len(t) > 3 else 0) for t in outputs
    ]
    b.operation(op, ins + consts, outs)
    return b.build()


def _a(values, dtype):
    return np.array(values, dtype=dtype)


EXAMPLES: list[Example] = []

# --- AXIS_ALIGNED_BBOX_TRANSFORM --------------------------------------------------------------
# roi0 [0,0,10,10] (w=h=10, centre (5,5)), image 0 is 9 high, 10 wide:
#   class 0 deltas 0 -> [0,0,10,10], y2 clipped to the height 9 -> [0,0,10,9];
#   class 1 (dx 0.1, dy -0.2) -> centre (6,3) -> [1,-2,11,8], clipped to x in [0,10], y in [0,9]
#   -> [1,0,10,8].
# roi1 [2,2,4,6] (w=2, h=4, centre (3,4)) on image 1 (100x100), class 0 (dx .5, dy .25) ->
#   centre (4,5) -> [3,3,5,7];  class 1:
#   fp32: dh ln2 -> h 8 -> [2,0,4,8];  fp16 (ln2 is not exact there): dw = dh = 0 -> [2,2,4,6].
_LN2 = 0.6931472
_dt: type[np.generic]  # the loops below reuse it for float and quantised element types
for _t, _dt, _name, _e in ((F32, np.float32, "fp32", _LN2), (F16, np.float16, "fp16", 0.0)):
    EXAMPLES.append(
        Example(
            f"axis_aligned_bbox_transform_{_name}",
            _model(
                Op.AXIS_ALIGNED_BBOX_TRANSFORM,
                [(_t, [2, 4]), (_t, [2, 8]), (I32, [2]), (_t, [2, 2])],
                [],
                [(_t, [2, 8])],
            ),
            [
                _a([[0, 0, 10, 10], [2, 2, 4, 6]], _dt),
                _a([[0, 0, 0, 0, 0.1, -0.2, 0, 0], [0.5, 0.25, 0, 0, 0, 0, 0, _e]], _dt),
                _a([0, 1], np.int32),
                _a([[9, 10], [100, 100]], _dt),
            ],
            [_a([[0, 0, 10, 9, 1, 0, 10, 8], [3, 3, 5, 7] + ([2, 0, 4, 8] if _e else [2, 2, 4, 6])], _dt)],
        )
    )

# Quantised: boxes in 1/8 pixels; deltas scale 0.01 zp 128 (signed: zp 0).  roi [0,0,10,10] =
# [0,0,80,80]; image 20x20 = [160,160].  class 0: dx 0.01 -> centre x 5.1 -> x1 0.1, x2 10.1 ->
# 0.8, 80.8 eighths -> round 1, 81.  class 1: dy -0.1 -> centre y 4 -> y1 -1 clipped to 0,
# y2 9 -> 72.
for _dt_t, _zp, _ddt in ((U8, 128, np.uint8), (I8, 0, np.int8)):
    EXAMPLES.append(
        Example(
            f"axis_aligned_bbox_transform_quant16_{'signed_' if _dt_t == I8 else ''}deltas",
            _model(
                Op.AXIS_ALIGNED_BBOX_TRANSFORM,
                [(Q16A, [1, 4], 0.125, 0), (_dt_t, [1, 8], 0.01, _zp), (I32, [1]), (Q16A, [1, 2], 0.125, 0)],
                [],
                [(Q16A, [1, 8], 0.125, 0)],
            ),
            [
                _a([[0, 0, 80, 80]], np.uint16),
                _a([[_zp + 1, _zp, _zp, _zp, _zp, _zp - 10, _zp, _zp]], _ddt),
                _a([0], np.int32),
                _a([[160, 160]], np.uint16),
            ],
            [_a([[1, 0, 81, 80, 0, 0, 80, 72]], np.uint16)],
        )
    )

# --- BOX_WITH_NMS_LIMIT ---------------------------------------------------------------------------
# Three rois, classes {background, 1}; class-1 boxes: A [0,0,10,10], B [1,1,11,11], C [20,20,30,30].
# IoU(A, B) = 81 / (100 + 100 - 81) = 81/119 = 0.68; C overlaps nothing.  Class-1 scores
# .9, .8, .7 (all above the 0.5 score threshold).
_NMS_BOXES = [[0, 0, 10, 10] * 2, [1, 1, 11, 11] * 2, [20, 20, 30, 30] * 2]
_NMS_SCORES = [[0.1, 0.9], [0.2, 0.8], [0.3, 0.7]]


def _nms_model(
    t, box_t, kernel, iou, sigma, nms_thr, max_det=-1, score_thr=0.5, n=3, classes=2, score_q=(0.0, 0), box_q=(0.0, 0)
):
    s = "f16" if t == F16 else "f32"
    return _model(
        Op.BOX_WITH_NMS_LIMIT,
        [(t, [n, classes], *score_q), (box_t, [n, 4 * classes], *box_q), (I32, [n])],
        [(s, score_thr), ("i32", max_det), ("i32", kernel), (s, iou), (s, sigma), (s, nms_thr)],
        [(t, [0], *score_q), (box_t, [0, 4], *box_q), (I32, [0]), (I32, [0])],
    )


# Hard kernel, IoU threshold 0.5: A kept, B suppressed (0.68 >= 0.5), C kept.
for _t, _dt, _name in ((F32, np.float32, "fp32"), (F16, np.float16, "fp16")):
    EXAMPLES.append(
        Example(
            f"box_with_nms_limit_hard_{_name}",
            _nms_model(_t, _t, 0, 0.5, 0.5, 0.3),
            [_a(_NMS_SCORES, _dt), _a(_NMS_BOXES, _dt), _a([0, 0, 0], np.int32)],
            [
                _a([0.9, 0.7], _dt),
                _a([[0, 0, 10, 10], [20, 20, 30, 30]], _dt),
                _a([1, 1], np.int32),
                _a([0, 0], np.int32),
            ],
        )
    )

# Linear kernel: B is rescaled by 1 - 81/119 = 38/119 -> 0.8 * 38/119 = 0.25546, above the NMS
# score threshold 0.2, so it survives, last.
EXAMPLES.append(
    Example(
        "box_with_nms_limit_linear_fp32",
        _nms_model(F32, F32, 1, 0.5, 0.5, 0.2),
        [_a(_NMS_SCORES, np.float32), _a(_NMS_BOXES, np.float32), _a([0, 0, 0], np.int32)],
        [
            _a([0.9, 0.7, 0.8 * 38 / 119], np.float32),
            _a([[0, 0, 10, 10], [20, 20, 30, 30], [1, 1, 11, 11]], np.float32),
            _a([1, 1, 1], np.int32),
            _a([0, 0, 0], np.int32),
        ],
    )
)

# Gaussian kernel, sigma 0.5: B -> 0.8 * exp(-(81/119)^2 / 0.5) = 0.31670; C is untouched
# (IoU 0 -> weight 1), and B does not overlap C.
EXAMPLES.append(
    Example(
        "box_with_nms_limit_gaussian_fp32",
        _nms_model(F32, F32, 2, 0.5, 0.5, 0.2),
        [_a(_NMS_SCORES, np.float32), _a(_NMS_BOXES, np.float32), _a([0, 0, 0], np.int32)],
        [
            _a([0.9, 0.7, 0.8 * np.exp(-((81 / 119) ** 2) / 0.5)], np.float32),
            _a([[0, 0, 10, 10], [20, 20, 30, 30], [1, 1, 11, 11]], np.float32),
            _a([1, 1, 1], np.int32),
            _a([0, 0, 0], np.int32),
        ],
    )
)

# Quantised: scores scale 0.01 (zp 0, signed zp -128); boxes 1/8 pixels, copied through.
for _t, _zp, _dt in ((U8, 0, np.uint8), (I8, -128, np.int8)):
    EXAMPLES.append(
        Example(
            f"box_with_nms_limit_hard_{'quant8_signed' if _t == I8 else 'quant8'}",
            _nms_model(_t, Q16A, 0, 0.5, 0.5, 0.3, score_q=(0.01, _zp), box_q=(0.125, 0)),
            [
                _a(np.array([[10, 90], [20, 80], [30, 70]]) + _zp, _dt),
                _a(np.array(_NMS_BOXES) * 8, np.uint16),
                _a([0, 0, 0], np.int32),
            ],
            [
                _a(np.array([90, 70]) + _zp, _dt),
                _a([[0, 0, 80, 80], [160, 160, 240, 240]], np.uint16),
                _a([1, 1], np.int32),
                _a([0, 0], np.int32),
            ],
        )
    )

# Score threshold 0.95: nothing qualifies -> every output has zero rows.
EXAMPLES.append(
    Example(
        "box_with_nms_limit_zero_sized_output",
        _nms_model(F32, F32, 0, 0.5, 0.5, 0.3, score_thr=0.95),
        [_a(_NMS_SCORES, np.float32), _a(_NMS_BOXES, np.float32), _a([0, 0, 0], np.int32)],
        [np.zeros(0, np.float32), np.zeros((0, 4), np.float32), np.zeros(0, np.int32), np.zeros(0, np.int32)],
    )
)

# Two images, three classes, max 2 detections per image; boxes far apart (no suppression).
# Image 0 (rois 0, 1): class 1 scores .6, .8; class 2 scores .9, .1 (.1 below threshold).
#   Top 2 by score: (roi0, c2, .9), (roi1, c1, .8); then ordered by class: c1 .8, c2 .9.
# Image 1 (roi 2): class 1 .7, class 2 .2 -> (roi2, c1, .7).
_MC_BOXES = [
    [0, 0, 1, 1, 0, 0, 2, 2, 0, 0, 3, 3],
    [5, 5, 6, 6, 5, 5, 7, 7, 5, 5, 8, 8],
    [0, 0, 1, 1, 0, 0, 4, 4, 0, 0, 5, 5],
]
EXAMPLES.append(
    Example(
        "box_with_nms_limit_multiclass_batches_fp32",
        _nms_model(F32, F32, 0, 0.5, 0.5, 0.3, max_det=2, classes=3),
        [
            _a([[0, 0.6, 0.9], [0, 0.8, 0.1], [0, 0.7, 0.2]], np.float32),
            _a(_MC_BOXES, np.float32),
            _a([0, 0, 1], np.int32),
        ],
        [
            _a([0.8, 0.9, 0.7], np.float32),
            _a([[5, 5, 7, 7], [0, 0, 3, 3], [0, 0, 4, 4]], np.float32),
            _a([1, 2, 1], np.int32),
            _a([0, 0, 1], np.int32),
        ],
    )
)


def _nms_into_roi_align():
    """BOX_WITH_NMS_LIMIT selecting nothing feeds ROI_ALIGN a zero-row roi tensor (the CTS
    "zero_sized" pattern): ROI_ALIGN's output has zero rows too."""
    b = ModelBuilder()
    scores = b.input(F32, [1, 2])
    boxes = b.input(F32, [1, 8])
    feat = b.input(F32, [1, 2, 2, 1])
    s_out = b.output(F32, [0])
    r_out = b.temp(F32, [0, 4])
    c_out = b.temp(I32, [0])
    bt_out = b.temp(I32, [0])
    b.operation(
        Op.BOX_WITH_NMS_LIMIT,
        [scores, boxes, b.const(I32, [1], [0]), b.f32(0.3), b.i32(-1), b.i32(0), b.f32(0.4), b.f32(1.0), b.f32(0.3)],
        [s_out, r_out, c_out, bt_out],
    )
    y = b.output(F32, [0, 2, 2, 1])
    b.operation(
        Op.ROI_ALIGN,
        [feat, r_out, bt_out, b.i32(2), b.i32(2), b.f32(1.0), b.f32(1.0), b.i32(0), b.i32(0), b.bool(False)],
        [y],
    )
    return b.build()


# The class-1 score 0.2 is below the 0.3 threshold: no box survives.
EXAMPLES.append(
    Example(
        "box_with_nms_limit_zero_sized_into_roi_align",
        _nms_into_roi_align(),
        [
            _a([[0.9, 0.2]], np.float32),
            _a([[0, 0, 1, 1, 0, 0, 1, 1]], np.float32),
            _a([1, 2, 3, 4], np.float32).reshape(1, 2, 2, 1),
        ],
        [np.zeros(0, np.float32), np.zeros((0, 2, 2, 1), np.float32)],
    )
)

# --- GENERATE_PROPOSALS -----------------------------------------------------------------------------
# One image 4 high x 8 wide, feature map 1 x 3, one anchor [0,0,4,4], width stride 2: anchor boxes
# [0,0,4,4], [2,0,6,4], [4,0,8,4].  Scores .3, .9, .5.  The third box has dx 0.5 -> moved by 2 ->
# [6,0,10,4], clipped to [6,0,8,4] (centre x 7 < 8, kept).  NMS (IoU 0.3): [2,0,6,4] (.9) first;
# IoU with [0,0,4,4] = 8/24 = 1/3 >= 0.3 -> suppressed; IoU with [6,0,8,4] = 0 -> kept (.5).
_GP_SCORES = [0.3, 0.9, 0.5]
_GP_DELTAS = [[0, 0, 0, 0], [0, 0, 0, 0], [0.5, 0, 0, 0]]


def _gp_model(t, nchw, score_q=(0.0, 0), delta_q=(0.0, 0), pre=-1, post=-1, min_size=1.0):
    quant = t in (U8, I8)
    anchor = (Q16S, [1, 4], 0.125, 0) if quant else (t, [1, 4])
    info = (Q16A, [1, 2], 0.125, 0) if quant else (t, [1, 2])
    box_out = (Q16A, [0, 4], 0.125, 0) if quant else (t, [0, 4])
    s = "f16" if t == F16 else "f32"
    sdims, ddims = ([1, 1, 1, 3], [1, 4, 1, 3]) if nchw else ([1, 1, 3, 1], [1, 1, 3, 4])
    return _model(
        Op.GENERATE_PROPOSALS,
        [(t, sdims, *score_q), (t, ddims, *delta_q), anchor, info],
        [(s, 2.0), (s, 2.0), ("i32", pre), ("i32", post), (s, 0.3), (s, min_size), ("bool", nchw)],
        [(t, [0], *score_q), box_out, (I32, [0])],
    )


for _t, _dt, _name in ((F32, np.float32, "fp32"), (F16, np.float16, "fp16")):
    for _nchw in (False, True):
        _d = np.array(_GP_DELTAS, np.float32)
        EXAMPLES.append(
            Example(
                f"generate_proposals_{_name}_{'nchw' if _nchw else 'nhwc'}",
                _gp_model(_t, _nchw),
                [
                    _a(_GP_SCORES, _dt).reshape([1, 1, 1, 3] if _nchw else [1, 1, 3, 1]),
                    (_d.T.reshape(1, 4, 1, 3) if _nchw else _d.reshape(1, 1, 3, 4)).astype(_dt),
                    _a([[0, 0, 4, 4]], _dt),
                    _a([[4, 8]], _dt),
                ],
                [_a([0.9, 0.5], _dt), _a([[2, 0, 6, 4], [6, 0, 8, 4]], _dt), _a([0, 0], np.int32)],
            )
        )

# Quantised: scores scale 0.01, deltas scale 0.5 (0.5 = one step), anchors/image/boxes in 1/8.
for _t, _zp, _dt in ((U8, 0, np.uint8), (I8, -128, np.int8)):
    _dzp = 128 if _t == U8 else 0
    EXAMPLES.append(
        Example(
            f"generate_proposals_{'quant8_signed' if _t == I8 else 'quant8'}",
            _gp_model(_t, False, score_q=(0.01, _zp), delta_q=(0.5, _dzp)),
            [
                _a(np.array([30, 90, 50]) + _zp, _dt).reshape(1, 1, 3, 1),
                _a(np.array(_GP_DELTAS) * 2 + _dzp, _dt).reshape(1, 1, 3, 4),
                _a([[0, 0, 32, 32]], np.int16),
                _a([[32, 64]], np.uint16),
            ],
            [
                _a(np.array([90, 50]) + _zp, _dt),
                _a([[16, 0, 48, 32], [48, 0, 64, 32]], np.uint16),
                _a([0, 0], np.int32),
            ],
        )
    )

# pre_nms 1 keeps only the best-scoring box [2,0,6,4]; min size 4 then rejects everything
# (width 4 is not > 4): zero rows.
EXAMPLES.append(
    Example(
        "generate_proposals_pre_nms_top1",
        _gp_model(F32, False, pre=1),
        [
            _a(_GP_SCORES, np.float32).reshape(1, 1, 3, 1),
            _a(_GP_DELTAS, np.float32).reshape(1, 1, 3, 4),
            _a([[0, 0, 4, 4]], np.float32),
            _a([[4, 8]], np.float32),
        ],
        [_a([0.9], np.float32), _a([[2, 0, 6, 4]], np.float32), _a([0], np.int32)],
    )
)
EXAMPLES.append(
    Example(
        "generate_proposals_min_size_rejects_all",
        _gp_model(F32, False, min_size=4.0),
        [
            _a(_GP_SCORES, np.float32).reshape(1, 1, 3, 1),
            _a(_GP_DELTAS, np.float32).reshape(1, 1, 3, 4),
            _a([[0, 0, 4, 4]], np.float32),
            _a([[4, 8]], np.float32),
        ],
        [np.zeros(0, np.float32), np.zeros((0, 4), np.float32), np.zeros(0, np.int32)],
    )
)

# --- DETECTION_POSTPROCESSING -----------------------------------------------------------------------
# Anchors [yc, xc, h, w]: a0 (.5,.5,1,1), a1 (.5,.6,1,1), a2 (2.5,2.5,1,1); zero deltas (except
# below) decode to [y1,x1,y2,x2] a0 [0,0,1,1], a1 [0,.1,1,1.1], a2 [2,2,3,3].
# IoU(a0, a1) = .9 / 1.1 = .82.  Scores (bg, c1, c2): a0 (0,.9,.2), a1 (0,.8,.7), a2 (0,.1,.6).
_DP_ANCHORS = [[0.5, 0.5, 1, 1], [0.5, 0.6, 1, 1], [2.5, 2.5, 1, 1]]
_DP_SCORES = [[[0, 0.9, 0.2], [0, 0.8, 0.7], [0, 0.1, 0.6]]]


def _dp_model(t, regular, max_det, max_cls, per_cls, bg_in_label, scale_y=1.0):
    s = "f16" if t == F16 else "f32"
    n = max_det if regular else max_det * max_cls
    return _model(
        Op.DETECTION_POSTPROCESSING,
        [(t, [1, 3, 3]), (t, [1, 3, 4]), (t, [3, 4])],
        [
            (s, scale_y),
            (s, 1.0),
            (s, 1.0),
            (s, 1.0),
            ("bool", regular),
            ("i32", max_det),
            ("i32", max_cls),
            ("i32", per_cls),
            (s, 0.5),
            (s, 0.5),
            ("bool", bg_in_label),
        ],
        [(t, [1, n]), (t, [1, n, 4]), (I32, [1, n]), (I32, [1])],
    )


# Regular NMS, 2 per class, 3 in all: class 1 candidates a0 .9, a1 .8 -> a1 suppressed by a0;
# class 2 candidates a1 .7, a2 .6 -> both kept.  By score: (a0,c1,.9), (a1,c2,.7), (a2,c2,.6).
# Labels without background: c - 1.
for _t, _dt, _name in ((F32, np.float32, "fp32"), (F16, np.float16, "fp16")):
    EXAMPLES.append(
        Example(
            f"detection_postprocessing_regular_{_name}",
            _dp_model(_t, True, 3, 1, 2, False),
            [_a(_DP_SCORES, _dt), np.zeros((1, 3, 4), _dt), _a(_DP_ANCHORS, _dt)],
            [
                _a([[0.9, 0.7, 0.6]], _dt),
                _a([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [2, 2, 3, 3]]], _dt),
                _a([[0, 1, 1]], np.int32),
                _a([3], np.int32),
            ],
        )
    )

# Fast path, 2 classes per detection, background counted in labels; a2 has ty = 1 with
# scale_y 10 -> y centre 2.6 -> [2.1, 2, 3.1, 3].  Best scores a0 .9, a1 .8, a2 .6: a1 is
# suppressed by a0.  a0 emits (c1 .9, c2 .2), a2 emits (c2 .6, c1 .1); 3 * 2 slots, 4 used.
EXAMPLES.append(
    Example(
        "detection_postprocessing_fast_fp32",
        _dp_model(F32, False, 3, 2, 1, True, scale_y=10.0),
        [
            _a(_DP_SCORES, np.float32),
            _a([[[0, 0, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0]]], np.float32),
            _a(_DP_ANCHORS, np.float32),
        ],
        [
            _a([[0.9, 0.2, 0.6, 0.1, 0, 0]], np.float32),
            _a(
                [[[0, 0, 1, 1], [0, 0, 1, 1], [2.1, 2, 3.1, 3], [2.1, 2, 3.1, 3], [0, 0, 0, 0], [0, 0, 0, 0]]],
                np.float32,
            ),
            _a([[1, 2, 2, 1, 0, 0]], np.int32),
            _a([4], np.int32),
        ],
    )
)

# --- ROI_ALIGN ------------------------------------------------------------------------------------
# Feature map 4x4, channel 0 the ramp v = 4y + x, channel 1 its negative; image 1 adds 100 to
# channel 0.  Bilinear sampling reproduces a linear ramp exactly, except where a coordinate
# reaches the last row/column (clamped to 3).
# roi0 [0,0,8,8] on image 0 with stride 2 -> [0,0,4,4], 2x2 bins of 2x2 pixels, adaptive ratio
# ceil(2) = 2 -> samples at .5 and 1.5 (bin 0) or 2.5 and 3.5->3 (bin 1) per axis:
#   bin(0,0): ramp at centre (1,1) = 5;  bin(0,1): x in {2.5, 3}, y in {.5, 1.5} -> 4*1 + 2.75 = 6.75;
#   bin(1,0): y in {2.5, 3} -> 4*2.75 + 1 = 12;  bin(1,1): 4*2.75 + 2.75 = 13.75.
# roi1 [2,2,4,4] on image 1 -> [1,1,2,2], size 1, step .5, adaptive ratio ceil(.5) = 1: samples at
#   1.25 / 1.75 -> 4*1.25+1.25 = 6.25, 6.75, 8.25, 8.75 (+100 on channel 0).
_RAMP = (4 * np.arange(4)[:, None] + np.arange(4)[None, :]).astype(np.float64)
_FEAT = np.stack([np.stack([_RAMP, -_RAMP], -1), np.stack([_RAMP + 100, -_RAMP], -1)])  # [2,4,4,2]
_RA0 = np.array([[5, 6.75], [12, 13.75]])
_RA1 = np.array([[6.25, 6.75], [8.25, 8.75]])
_RA_OUT = np.stack([np.stack([_RA0, -_RA0], -1), np.stack([_RA1 + 100, -_RA1], -1)])  # [2,2,2,2]


def _ra_model(t, nchw, n_rois=2, in_q=(0.0, 0), out_q=(0.0, 0), ratio=0):
    quant = t in (U8, I8)
    roi = (Q16A, [n_rois, 4], 0.125, 0) if quant else (t, [n_rois, 4])
    s = "f16" if t == F16 else "f32"
    dims_in = [2, 2, 4, 4] if nchw else [2, 4, 4, 2]
    dims_out = [n_rois, 2, 2, 2]
    return _model(
        Op.ROI_ALIGN,
        [(t, dims_in, *in_q), roi, (I32, [n_rois])],
        [("i32", 2), ("i32", 2), (s, 2.0), (s, 2.0), ("i32", ratio), ("i32", ratio), ("bool", nchw)],
        [(t, dims_out, *out_q)],
    )


for _t, _dt, _name in ((F32, np.float32, "fp32"), (F16, np.float16, "fp16")):
    for _nchw in (False, True):
        _tr = (lambda a: a.transpose(0, 3, 1, 2)) if _nchw else (lambda a: a)
        EXAMPLES.append(
            Example(
                f"roi_align_{_name}_{'nchw' if _nchw else 'nhwc'}",
                _ra_model(_t, _nchw),
                [_tr(_FEAT).astype(_dt), _a([[0, 0, 8, 8], [2, 2, 4, 4]], _dt), _a([0, 1], np.int32)],
                [_tr(_RA_OUT).astype(_dt)],
            )
        )

# Quantised, roi0 only, explicit ratio 2 (same samples as above).  Input and output scale .25, so
# stored = 4 * real (+ zero point); channel 1 is replaced by the ramp + 1 to stay non-negative.
# The bilinear weights .25 / .5 quantise to round(63.75) = 64 and round(127.5) = 128 (1/255
# units), so each bin is the float average times 256/255: 20 -> 20.08, 27 -> 27.1, 48 -> 48.2,
# 55 -> 55.2 (channel 1: 24.1, 31.1, 52.2, 59.2), all rounding to the float answer.
_QFEAT = np.stack([_RAMP, _RAMP + 1], -1)[None] * 4  # [1,4,4,2]
_QOUT = np.stack([_RA0, _RA0 + 1], -1)[None] * 4  # [1,2,2,2]
for _t, _zp, _dt in ((U8, 0, np.uint8), (I8, -100, np.int8)):
    EXAMPLES.append(
        Example(
            f"roi_align_{'quant8_signed' if _t == I8 else 'quant8'}",
            _model(
                Op.ROI_ALIGN,
                [(_t, [1, 4, 4, 2], 0.25, _zp), (Q16A, [1, 4], 0.125, 0), (I32, [1])],
                [("i32", 2), ("i32", 2), ("f32", 2.0), ("f32", 2.0), ("i32", 2), ("i32", 2), ("bool", False)],
                [(_t, [1, 2, 2, 2], 0.25, _zp)],
            ),
            [_a(_QFEAT + _zp, _dt), _a([[0, 0, 64, 64]], np.uint16), _a([0], np.int32)],
            [_a(_QOUT + _zp, _dt)],
        )
    )

# --- ROI_POOLING ----------------------------------------------------------------------------------
# One 4x4 map, the ramp v = 4y + x; output 2x2.
# roi0 [0,0,5,5], stride 2 -> [0,0,2.5,2.5] -> rounded [0,0,3,3] (2.5 rounds away from zero): span 4,
#   step 2, bins [0,2) and [2,4): maxima at (1,1) 5, (1,3) 7, (3,1) 13, (3,3) 15.
# roi1 [0,0,4,4] -> [0,0,2,2]: span 3, step 1.5, bins [0,2) and [floor 1.5, ceil 3) = [1,3):
#   maxima (1,1) 5, (1,2) 6, (2,1) 9, (2,2) 10.
# roi2 [8,0,8,6] -> x [4,4], y [0,3]: span 1 in x, bins [4,5) clipped to [4,4): empty, so the
#   value is the zero point (0 for floats).
_RP_OUT = np.array([[[5, 7], [13, 15]], [[5, 6], [9, 10]], [[0, 0], [0, 0]]], np.float64)[..., None]
_RP_ROIS = [[0, 0, 5, 5], [0, 0, 4, 4], [8, 0, 8, 6]]


def _rp_model(t, nchw, q=(0.0, 0)):
    quant = t in (U8, I8)
    roi = (Q16A, [3, 4], 0.125, 0) if quant else (t, [3, 4])
    s = "f16" if t == F16 else "f32"
    return _model(
        Op.ROI_POOLING,
        [(t, [1, 1, 4, 4] if nchw else [1, 4, 4, 1], *q), roi, (I32, [3])],
        [("i32", 2), ("i32", 2), (s, 2.0), (s, 2.0), ("bool", nchw)],
        [(t, [3, 1, 2, 2] if nchw else [3, 2, 2, 1], *q)],
    )


for _t, _dt, _name in ((F32, np.float32, "fp32"), (F16, np.float16, "fp16")):
    for _nchw in (False, True):
        _tr = (lambda a: a.transpose(0, 3, 1, 2)) if _nchw else (lambda a: a)
        EXAMPLES.append(
            Example(
                f"roi_pooling_{_name}_{'nchw' if _nchw else 'nhwc'}",
                _rp_model(_t, _nchw),
                [_tr(_RAMP[None, :, :, None]).astype(_dt), _a(_RP_ROIS, _dt), _a([0, 0, 0], np.int32)],
                [_tr(_RP_OUT).astype(_dt)],
            )
        )

# Quantised, scale 1 and zero point 10 (signed: -20): values are stored + zp, and the empty bin
# gives the zero point.
for _t, _zp, _dt in ((U8, 10, np.uint8), (I8, -20, np.int8)):
    EXAMPLES.append(
        Example(
            f"roi_pooling_{'quant8_signed' if _t == I8 else 'quant8'}",
            _rp_model(_t, False, (1.0, _zp)),
            [_a(_RAMP[None, :, :, None] + _zp, _dt), _a(np.array(_RP_ROIS) * 8, np.uint16), _a([0, 0, 0], np.int32)],
            [_a(_RP_OUT + _zp, _dt)],
        )
    )

# --- HEATMAP_MAX_KEYPOINT ------------------------------------------------------------------------
# One box [0,0,6,6], 3x3 heatmaps, two keypoints.
# Keypoint 0: [[0,0,0],[1,4,2],[0,0,0]], max 4 at (1,1).  b = (-(2-1)/2, 0) = (-.5, 0);
#   A = [[1-8+2, 0], [0, 0-8+0]] = [[-5,0],[0,-8]], det 40; delta = (-8*-.5/40, 0) = (.1, 0);
#   score = 4 + .5*.1 + (-5*.1*.1)/2 = 4.025; x = (1 + .1 + .5)/3*6 = 3.2, y = 1.5/3*6 = 3.
# Keypoint 1: [[5,1,0],[1,0,0],[0,0,0]], max 5 at (0,0); mirrored grid [[0,1,0],[1,5,1],[0,1,0]]
#   is symmetric: delta 0, score 5; x = y = .5/3*6 = 1.
_HM = np.stack([np.array([[0, 0, 0], [1, 4, 2], [0, 0, 0]]), np.array([[5, 1, 0], [1, 0, 0], [0, 0, 0]])], -1)[None]


def _hm_model(t, nchw, q=(0.0, 0), out_q=(0.0, 0)):
    quant = t in (U8, I8)
    box = (Q16A, [1, 4], 0.125, 0) if quant else (t, [1, 4])
    kp = (Q16A, [1, 2, 2], 0.125, 0) if quant else (t, [1, 2, 2])
    return _model(
        Op.HEATMAP_MAX_KEYPOINT,
        [(t, [1, 2, 3, 3] if nchw else [1, 3, 3, 2], *q), box],
        [("bool", nchw)],
        [(t, [1, 2], *out_q), kp],
    )


for _t, _dt, _name in ((F32, np.float32, "fp32"), (F16, np.float16, "fp16")):
    for _nchw in (False, True):
        EXAMPLES.append(
            Example(
                f"heatmap_max_keypoint_{_name}_{'nchw' if _nchw else 'nhwc'}",
                _hm_model(_t, _nchw),
                [(_HM.transpose(0, 3, 1, 2) if _nchw else _HM).astype(_dt), _a([[0, 0, 6, 6]], _dt)],
                [_a([[4.025, 5]], _dt), _a([[[3.2, 3], [1, 1]]], _dt)],
            )
        )

# Quantised: heatmap scale .5 (stored 2x real + zp), score out scale .1: 40.25 -> 40, 50;
# keypoints in eighths: 3.2 -> 25.6 -> 26, 3 -> 24, 1 -> 8.
for _t, _zp, _dt in ((U8, 3, np.uint8), (I8, -7, np.int8)):
    EXAMPLES.append(
        Example(
            f"heatmap_max_keypoint_{'quant8_signed' if _t == I8 else 'quant8'}",
            _hm_model(_t, False, (0.5, _zp), (0.1, _zp)),
            [_a(_HM * 2 + _zp, _dt), _a([[0, 0, 48, 48]], np.uint16)],
            [_a(np.array([[40, 50]]) + _zp, _dt), _a([[[26, 24], [8, 8]]], np.uint16)],
        )
    )
