"""Examples for the pools (AVERAGE/MAX/L2_POOL_2D), L2_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION,
INSTANCE_NORMALIZATION and RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR.

Every expected value was worked out by hand (the working is in the comment beside it) or by
an independent one-line numpy formula written in place.  Zero-batch cases are not here: NNAPI
requires fully specified request inputs, so a zero batch can only arise inside a model; the
op tests run them on the executor directly.
"""

import numpy as np

from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.suites.examples import Example

F32, F16 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16
U8, I8 = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
SAME, VALID = 1, 2
NONE, RELU, RELU1, RELU6 = 0, 1, 2, 3


def _f32(*v):
    return np.array(v, np.float32)


# ---------------------------------------------------------------------------------------
# Pools
# ---------------------------------------------------------------------------------------


def _pool(op, t, in_dims, out_dims, params, *, scale=0.0, zp=0, nchw=None):
    """``params``: 6 ints (implicit: scheme, stride w, h, filter w, h, activation) or 9 ints
    (explicit: pad l, r, t, b, stride w, h, filter w, h, activation)."""
    b = ModelBuilder()
    x = b.input(t, in_dims, scale=scale, zero_point=zp)
    y = b.output(t, out_dims, scale=scale, zero_point=zp)
    ins = [x] + [b.i32(p) for p in params]
    if nchw is not None:
        ins.append(b.bool(nchw))
    b.operation(op, ins, [y])
    return b.build()


_POOL_EXAMPLES = [
    # 2x2 filter, stride 2, VALID: (1+2+5+6)/4 = 3.5, (3+4+7+8)/4 = 5.5.
    Example(
        "average_pool_2d_fp32_valid_stride2",
        _pool(Op.AVERAGE_POOL_2D, F32, [1, 2, 4, 1], [1, 1, 2, 1], [VALID, 2, 2, 2, 2, NONE]),
        [np.arange(1, 9, dtype=np.float32).reshape(1, 2, 4, 1)],
        [_f32(3.5, 5.5).reshape(1, 1, 2, 1)],
    ),
    # Even 2x2 filter, SAME, stride 1 on 3x3 = 1..9: SAME pads 1 pixel at the bottom/right only.
    # Windows at the edge average only their in-bounds pixels: (3+6)/2 = 4.5, 9/1 = 9, ...
    Example(
        "average_pool_2d_fp32_same_even_kernel_counts_in_bounds",
        _pool(Op.AVERAGE_POOL_2D, F32, [1, 3, 3, 1], [1, 3, 3, 1], [SAME, 1, 1, 2, 2, NONE]),
        [np.arange(1, 10, dtype=np.float32).reshape(1, 3, 3, 1)],
        [_f32(3, 4, 4.5, 6, 7, 7.5, 7.5, 8.5, 9).reshape(1, 3, 3, 1)],
    ),
    # Explicit padding 1 on every side, odd 3x3 filter, stride 2, NCHW, RELU6.  Each window
    # covers a 2x2 block of the input: (1+2+4+5)/4=3, (2+3+5+6)/4=4, (4+5+7+8)/4=6,
    # (5+6+8+9)/4=7 -> RELU6 -> 6.
    Example(
        "average_pool_2d_fp32_explicit_pad_nchw_relu6",
        _pool(Op.AVERAGE_POOL_2D, F32, [1, 1, 3, 3], [1, 1, 2, 2], [1, 1, 1, 1, 2, 2, 3, 3, RELU6], nchw=True),
        [np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3)],
        [_f32(3, 4, 6, 6).reshape(1, 1, 2, 2)],
    ),
    # (1+2+3+5)/4 = 2.75, exact in fp16.
    Example(
        "average_pool_2d_fp16",
        _pool(Op.AVERAGE_POOL_2D, F16, [1, 2, 2, 1], [1, 1, 1, 1], [VALID, 1, 1, 2, 2, NONE]),
        [np.array([1, 2, 3, 5], np.float16).reshape(1, 2, 2, 1)],
        [np.array([2.75], np.float16).reshape(1, 1, 1, 1)],
    ),
    # uint8: raw sums 3, 9, 21 over 2 elements = 1.5, 4.5, 10.5 -> ties round up to 2, 5, 11.
    Example(
        "average_pool_2d_quant8_rounds_ties_up",
        _pool(Op.AVERAGE_POOL_2D, U8, [1, 1, 6, 1], [1, 1, 3, 1], [VALID, 2, 1, 2, 1, NONE], scale=0.5, zp=0),
        [np.array([1, 2, 4, 5, 10, 11], np.uint8).reshape(1, 1, 6, 1)],
        [np.array([2, 5, 11], np.uint8).reshape(1, 1, 3, 1)],
    ),
    # uint8, 3 elements per window: 4/3 = 1.33 -> 1, 5/3 = 1.67 -> 2.
    Example(
        "average_pool_2d_quant8_count3",
        _pool(Op.AVERAGE_POOL_2D, U8, [1, 1, 6, 1], [1, 1, 2, 1], [VALID, 3, 1, 3, 1, NONE], scale=1.0, zp=3),
        [np.array([1, 1, 2, 2, 2, 1], np.uint8).reshape(1, 1, 6, 1)],
        [np.array([1, 2], np.uint8).reshape(1, 1, 2, 1)],
    ),
    # int8: raw sums -3, -9, 3 over 2 = -1.5, -4.5, 1.5 -> half away from zero: -2, -5, 2.
    Example(
        "average_pool_2d_quant8_signed_rounds_ties_away",
        _pool(Op.AVERAGE_POOL_2D, I8, [1, 1, 6, 1], [1, 1, 3, 1], [VALID, 2, 1, 2, 1, NONE], scale=0.5, zp=0),
        [np.array([-1, -2, -4, -5, 1, 2], np.int8).reshape(1, 1, 6, 1)],
        [np.array([-2, -5, 2], np.int8).reshape(1, 1, 3, 1)],
    ),
    # int8 zp -10 with RELU (real 0 is stored -10): -19, -11.5 -> -12, 0.5 -> 1; clamp >= -10.
    Example(
        "average_pool_2d_quant8_signed_relu",
        _pool(Op.AVERAGE_POOL_2D, I8, [1, 1, 6, 1], [1, 1, 3, 1], [VALID, 2, 1, 2, 1, RELU], scale=0.5, zp=-10),
        [np.array([-20, -18, -12, -11, 0, 1], np.int8).reshape(1, 1, 6, 1)],
        [np.array([-10, -10, 1], np.int8).reshape(1, 1, 3, 1)],
    ),
    # Odd 3x3 filter, SAME, stride 2 on 3x3 = -1..-9: SAME pads 1 on each side; the max is
    # over real pixels only (padding is not 0): max(-1,-2,-4,-5)=-1, max(-2,-3,-5,-6)=-2,
    # max(-4,-5,-7,-8)=-4, max(-5,-6,-8,-9)=-5.
    Example(
        "max_pool_2d_fp32_same_odd_kernel_negative",
        _pool(Op.MAX_POOL_2D, F32, [1, 3, 3, 1], [1, 2, 2, 1], [SAME, 2, 2, 3, 3, NONE]),
        [-np.arange(1, 10, dtype=np.float32).reshape(1, 3, 3, 1)],
        [_f32(-1, -2, -4, -5).reshape(1, 2, 2, 1)],
    ),
    # 2-wide, 1-high filter, stride 1: max(-3, 0.5) = 0.5, max(0.25, 2) = 2 -> RELU1 -> 1.
    Example(
        "max_pool_2d_fp16_relu1",
        _pool(Op.MAX_POOL_2D, F16, [1, 2, 2, 1], [1, 2, 1, 1], [VALID, 1, 1, 2, 1, RELU1]),
        [np.array([-3, 0.5, 0.25, 2], np.float16).reshape(1, 2, 2, 1)],
        [np.array([0.5, 1], np.float16).reshape(1, 2, 1, 1)],
    ),
    # uint8 scale 0.5 zp 100, RELU6 clamps stored values to [100, 112] (real 0 and 6):
    # channel 0 max 99 -> 100, channel 1 max 120 -> 112.
    Example(
        "max_pool_2d_quant8_relu6",
        _pool(Op.MAX_POOL_2D, U8, [1, 2, 2, 2], [1, 1, 1, 2], [VALID, 1, 1, 2, 2, RELU6], scale=0.5, zp=100),
        [np.array([90, 120, 95, 101, 99, 113, 98, 50], np.uint8).reshape(1, 2, 2, 2)],
        [np.array([100, 112], np.uint8).reshape(1, 1, 1, 2)],
    ),
    # int8 NCHW, explicit padding left 1 (others 0), 2x2 filter, stride 2 on [[-5,3,-7],[2,-1,4]]:
    # out width (3-2+2+1)/2 = 2; windows cover column 0 -> max(-5, 2) = 2, columns 1..2 -> 4.
    Example(
        "max_pool_2d_quant8_signed_explicit_nchw",
        _pool(
            Op.MAX_POOL_2D, I8, [1, 1, 2, 3], [1, 1, 1, 2], [1, 0, 0, 0, 2, 2, 2, 2, NONE], scale=0.25, zp=0, nchw=True
        ),
        [np.array([-5, 3, -7, 2, -1, 4], np.int8).reshape(1, 1, 2, 3)],
        [np.array([2, 4], np.int8).reshape(1, 1, 1, 2)],
    ),
    # 2-wide filter, SAME, stride 1 on [3, 4, 12]: pad 1 at the right.  sqrt((9+16)/2),
    # sqrt((16+144)/2) = sqrt(80), and the last window has one real pixel: sqrt(144/1) = 12.
    Example(
        "l2_pool_2d_fp32_same_counts_in_bounds",
        _pool(Op.L2_POOL_2D, F32, [1, 1, 3, 1], [1, 1, 3, 1], [SAME, 1, 1, 2, 1, NONE]),
        [_f32(3, 4, 12).reshape(1, 1, 3, 1)],
        [np.sqrt(_f32(12.5, 80, 144)).reshape(1, 1, 3, 1)],
    ),
    # Explicit padding, RELU: the same windows as above but spelled out (pad right 1).
    Example(
        "l2_pool_2d_fp32_explicit_relu",
        _pool(Op.L2_POOL_2D, F32, [1, 1, 3, 1], [1, 1, 2, 1], [0, 1, 0, 0, 2, 1, 2, 1, RELU]),
        [_f32(3, 4, 12).reshape(1, 1, 3, 1)],
        [np.sqrt(_f32(12.5, 144)).reshape(1, 1, 2, 1)],
    ),
    # fp16 NCHW: sqrt((36+64)/2) = sqrt(50), narrowed to fp16.
    Example(
        "l2_pool_2d_fp16_nchw",
        _pool(Op.L2_POOL_2D, F16, [1, 1, 1, 2], [1, 1, 1, 1], [VALID, 1, 1, 2, 1, NONE], nchw=True),
        [np.array([6, 8], np.float16).reshape(1, 1, 1, 2)],
        [np.array([np.sqrt(50.0)], np.float16).reshape(1, 1, 1, 1)],
    ),
]


# ---------------------------------------------------------------------------------------
# L2_NORMALIZATION
# ---------------------------------------------------------------------------------------


def _l2norm(t, dims, axis=None, scale=0.0, zp=0):
    out_q = {U8: (1 / 128, 128), I8: (1 / 128, 0)}.get(t, (0.0, 0))
    b = ModelBuilder()
    x = b.input(t, dims, scale=scale, zero_point=zp)
    y = b.output(t, dims, scale=out_q[0], zero_point=out_q[1])
    b.operation(Op.L2_NORMALIZATION, [x] if axis is None else [x, b.i32(axis)], [y])
    return b.build()


_L2NORM_EXAMPLES = [
    # [3, 4] / 5; an all-zero row gives zeros (the norm is floored at 1e-6).
    Example(
        "l2_normalization_fp32_default_axis_zero_row",
        _l2norm(F32, [2, 2]),
        [_f32(3, 4, 0, 0).reshape(2, 2)],
        [_f32(0.6, 0.8, 0, 0).reshape(2, 2)],
    ),
    # axis 0: column [3, 4] -> [0.6, 0.8], column [1, 0] -> [1, 0].
    Example(
        "l2_normalization_fp32_axis0",
        _l2norm(F32, [2, 2], axis=0),
        [_f32(3, 1, 4, 0).reshape(2, 2)],
        [_f32(0.6, 1, 0.8, 0).reshape(2, 2)],
    ),
    # axis -2 on rank 3 is axis 1: [[1],[1],[1],[1]] / 2.
    Example(
        "l2_normalization_fp16_negative_axis",
        _l2norm(F16, [1, 4, 1], axis=-2),
        [np.ones((1, 4, 1), np.float16)],
        [np.full((1, 4, 1), 0.5, np.float16)],
    ),
    # uint8 zp 128: differences [3, 4], [-3, -4], [0, 0]; output = 128 + round(128 * d / 5):
    # 76.8 -> 77, 102.4 -> 102, so 205, 230, 51, 26; the zero row stays at 128.
    Example(
        "l2_normalization_quant8",
        _l2norm(U8, [3, 2], scale=0.1, zp=128),
        [np.array([131, 132, 125, 124, 128, 128], np.uint8).reshape(3, 2)],
        [np.array([205, 230, 51, 26, 128, 128], np.uint8).reshape(3, 2)],
    ),
    # int8, last axis: 128 * [3, 4] / 5 = 76.8, 102.4 -> 77, 102; a lone value is 128 * 1
    # = 128, which saturates at 127 (the output range is [-1, 127/128]).
    Example(
        "l2_normalization_quant8_signed_last_axis",
        _l2norm(I8, [4, 2], scale=0.5, zp=1),
        [np.array([4, 5, -2, -3, 1, 1, 6, 1], np.int8).reshape(4, 2)],
        [np.array([77, 102, -77, -102, 0, 0, 127, 0], np.int8).reshape(4, 2)],
    ),
    # int8 along axis 0: [6, -8] / 10 * 128 = 76.8 -> 77, -102.4 -> -102.
    Example(
        "l2_normalization_quant8_signed_axis0",
        _l2norm(I8, [2, 1], axis=0, scale=1.0, zp=0),
        [np.array([6, -8], np.int8).reshape(2, 1)],
        [np.array([77, -102], np.int8).reshape(2, 1)],
    ),
]


# ---------------------------------------------------------------------------------------
# LOCAL_RESPONSE_NORMALIZATION
# ---------------------------------------------------------------------------------------


def _lrn(t, dims, radius, bias, alpha, beta, axis=None):
    b = ModelBuilder()
    mk = b.f16 if t == F16 else b.f32
    x = b.input(t, dims)
    y = b.output(t, dims)
    ins = [x, b.i32(radius), mk(bias), mk(alpha), mk(beta)]
    if axis is not None:
        ins.append(b.i32(axis))
    b.operation(Op.LOCAL_RESPONSE_NORMALIZATION, ins, [y])
    return b.build()


_LRN_EXAMPLES = [
    # radius 1 along depth of [1, 2, 3, 4]: square sums 1+4=5, 1+4+9=14, 4+9+16=29, 9+16=25;
    # bias 1, alpha 1, beta 0.5: out = x / sqrt(1 + sum).
    Example(
        "local_response_normalization_fp32_depth",
        _lrn(F32, [1, 1, 1, 4], 1, 1.0, 1.0, 0.5),
        [_f32(1, 2, 3, 4).reshape(1, 1, 1, 4)],
        [_f32(1 / np.sqrt(6), 2 / np.sqrt(15), 3 / np.sqrt(30), 4 / np.sqrt(26)).reshape(1, 1, 1, 4)],
    ),
    # axis 0, radius 1 on columns [1, 0, 2] and [0, 1, 0]: sums (1, 5, 4) and (1, 1, 1);
    # bias 1, alpha 1, beta 1: out = x / (1 + sum) = [1/2, 0, 2/5] and [0, 1/2, 0].
    Example(
        "local_response_normalization_fp32_axis0",
        _lrn(F32, [3, 2], 1, 1.0, 1.0, 1.0, axis=0),
        [_f32(1, 0, 0, 1, 2, 0).reshape(3, 2)],
        [_f32(0.5, 0, 0, 0.5, 0.4, 0).reshape(3, 2)],
    ),
    # fp16, radius 2 covers both values: (1 + 0.5 * 2) ** -2 = 0.25.
    Example(
        "local_response_normalization_fp16",
        _lrn(F16, [1, 1, 1, 2], 2, 1.0, 0.5, 2.0),
        [np.ones((1, 1, 1, 2), np.float16)],
        [np.full((1, 1, 1, 2), 0.25, np.float16)],
    ),
]


# ---------------------------------------------------------------------------------------
# INSTANCE_NORMALIZATION
# ---------------------------------------------------------------------------------------


def _instance_norm(t, dims, gamma, beta, eps, nchw):
    b = ModelBuilder()
    mk = b.f16 if t == F16 else b.f32
    x = b.input(t, dims)
    y = b.output(t, dims)
    b.operation(Op.INSTANCE_NORMALIZATION, [x, mk(gamma), mk(beta), mk(eps), b.bool(nchw)], [y])
    return b.build()


# Channel 0 is [1, 2, 3, 4] (mean 2.5, population variance 1.25); channel 1 is constant 7
# (variance 0: only epsilon keeps the division finite, the output is beta).
_IN_X = np.array([1, 7, 2, 7, 3, 7, 4, 7], np.float32).reshape(1, 2, 2, 2)
_INSTANCE_EXAMPLES = [
    Example(
        "instance_normalization_fp32_nhwc",
        _instance_norm(F32, [1, 2, 2, 2], 2.0, 1.0, 1e-3, False),
        [_IN_X],
        [
            np.stack([(np.arange(1, 5) - 2.5) * 2 / np.sqrt(1.25 + 1e-3) + 1, np.ones(4)], axis=-1)
            .astype(np.float32)
            .reshape(1, 2, 2, 2)
        ],
    ),
    # NCHW, channels [1, 3] and [4, 8]: (x - mean) / std = [-1, 1] for both; * 0.5 + 2.
    Example(
        "instance_normalization_fp16_nchw",
        _instance_norm(F16, [1, 2, 1, 2], 0.5, 2.0, 0.0, True),
        [np.array([1, 3, 4, 8], np.float16).reshape(1, 2, 1, 2)],
        [np.array([1.5, 2.5, 1.5, 2.5], np.float16).reshape(1, 2, 1, 2)],
    ),
]


# ---------------------------------------------------------------------------------------
# RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR
# ---------------------------------------------------------------------------------------


def _resize(op, t, in_dims, out_dims, w, h, *, scale=0.0, zp=0, by="shape", nchw=None, align=None, half=None):
    b = ModelBuilder()
    x = b.input(t, in_dims, scale=scale, zero_point=zp)
    y = b.output(t, out_dims, scale=scale, zero_point=zp)
    if by == "shape":
        size = [b.i32(w), b.i32(h)]
    else:
        mk = b.f16 if t == F16 else b.f32
        size = [mk(w), mk(h)]
    ins = [x, *size]
    for flag in (nchw, align, half):
        if flag is None:
            break
        ins.append(b.bool(flag))
    b.operation(op, ins, [y])
    return b.build()


_IMG = np.array([1, 2, 3, 4], np.float32).reshape(1, 2, 2, 1)
# 2x2 -> 3x3 without flags: source coordinates 0, 2/3, 4/3 (the last clamps to pixel 1).
_BILINEAR_3X3 = np.array([[1, 5 / 3, 2], [7 / 3, 3, 10 / 3], [3, 11 / 3, 4]]).reshape(1, 3, 3, 1)
_RESIZE_EXAMPLES = [
    Example(
        "resize_bilinear_fp32_shape",
        _resize(Op.RESIZE_BILINEAR, F32, [1, 2, 2, 1], [1, 3, 3, 1], 3, 3),
        [_IMG],
        [_BILINEAR_3X3.astype(np.float32)],
    ),
    # align_corners: coordinates 0, 0.5, 1.
    Example(
        "resize_bilinear_fp32_align_corners",
        _resize(Op.RESIZE_BILINEAR, F32, [1, 2, 2, 1], [1, 3, 3, 1], 3, 3, nchw=False, align=True),
        [_IMG],
        [_f32(1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4).reshape(1, 3, 3, 1)],
    ),
    # half_pixel_centers, width 2 -> 4: coordinates (i + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75,
    # 1.25; the outer two clamp to the edge pixels: [0, 1, 3, 4].
    Example(
        "resize_bilinear_fp32_half_pixel_centers",
        _resize(Op.RESIZE_BILINEAR, F32, [1, 1, 2, 1], [1, 1, 4, 1], 4, 1, nchw=False, align=False, half=True),
        [_f32(0, 4).reshape(1, 1, 2, 1)],
        [_f32(0, 1, 3, 4).reshape(1, 1, 4, 1)],
    ),
    # By scale (FLOAT16 scalars): floor(2 * 1.5) = 3, so the same grid as the shape example.
    Example(
        "resize_bilinear_fp16_scale",
        _resize(Op.RESIZE_BILINEAR, F16, [1, 2, 2, 1], [1, 3, 3, 1], 1.5, 1.5, by="scale"),
        [_IMG.astype(np.float16)],
        [_BILINEAR_3X3.astype(np.float16)],
    ),
    # uint8 by scale (FLOAT32): width 2 -> 3, coordinate 2/3 between 10 and 20 gives 16.67,
    # which the reference truncates to 16 (static_cast), not 17.
    Example(
        "resize_bilinear_quant8_truncates",
        _resize(Op.RESIZE_BILINEAR, U8, [1, 1, 2, 1], [1, 1, 3, 1], 1.5, 1.0, scale=0.5, zp=0, by="scale"),
        [np.array([10, 20], np.uint8).reshape(1, 1, 2, 1)],
        [np.array([10, 16, 20], np.uint8).reshape(1, 1, 3, 1)],
    ),
    # int8 kernel in 1/1024 steps: scale_10 = (2048 + 1) // 3 = 683.  Pixel 1: weights
    # 341 and 683 of 1024 -> (-10*341 - 20*683) / 1024 = -16.67 -> -17 (half away from zero);
    # pixel 2 sits at 1366/1024, lower and upper both clamp to pixel 1 -> -20.
    Example(
        "resize_bilinear_quant8_signed_fixed_point",
        _resize(Op.RESIZE_BILINEAR, I8, [1, 1, 2, 1], [1, 1, 3, 1], 3, 1, scale=0.5, zp=0),
        [np.array([-10, -20], np.int8).reshape(1, 1, 2, 1)],
        [np.array([-10, -17, -20], np.int8).reshape(1, 1, 3, 1)],
    ),
    # Nearest, 2x2 -> 3x3 legacy: floor(0, 2/3, 4/3) = 0, 0, 1.
    Example(
        "resize_nearest_neighbor_fp32",
        _resize(Op.RESIZE_NEAREST_NEIGHBOR, F32, [1, 2, 2, 1], [1, 3, 3, 1], 3, 3, nchw=False),
        [_IMG],
        [_f32(1, 1, 2, 1, 1, 2, 3, 3, 4).reshape(1, 3, 3, 1)],
    ),
    # align_corners: coordinates 0, 0.5, 1 rounded half away from zero: 0, 1, 1.
    Example(
        "resize_nearest_neighbor_fp32_align_corners",
        _resize(Op.RESIZE_NEAREST_NEIGHBOR, F32, [1, 2, 2, 1], [1, 3, 3, 1], 3, 3, nchw=False, align=True),
        [_IMG],
        [_f32(1, 2, 2, 3, 4, 4, 3, 4, 4).reshape(1, 3, 3, 1)],
    ),
    # half_pixel_centers, downscale 4 -> 2: floor((i + 0.5) * 2) = 1, 3 (legacy would pick 0, 2).
    Example(
        "resize_nearest_neighbor_fp32_half_pixel_downscale",
        _resize(Op.RESIZE_NEAREST_NEIGHBOR, F32, [1, 1, 4, 1], [1, 1, 2, 1], 2, 1, nchw=False, align=False, half=True),
        [_f32(1, 2, 3, 4).reshape(1, 1, 4, 1)],
        [_f32(2, 4).reshape(1, 1, 2, 1)],
    ),
    # fp16 by scale 2, NCHW, 1x2 -> 2x4: floor(i / 2) duplicates each pixel.
    Example(
        "resize_nearest_neighbor_fp16_scale_nchw",
        _resize(Op.RESIZE_NEAREST_NEIGHBOR, F16, [1, 1, 1, 2], [1, 1, 2, 4], 2.0, 2.0, by="scale", nchw=True),
        [np.array([5, 6], np.float16).reshape(1, 1, 1, 2)],
        [np.array([5, 5, 6, 6, 5, 5, 6, 6], np.float16).reshape(1, 1, 2, 4)],
    ),
    # quant8 copies stored values: 2 -> 1 by shape picks pixel floor(0 * 2) = 0.
    Example(
        "resize_nearest_neighbor_quant8",
        _resize(Op.RESIZE_NEAREST_NEIGHBOR, U8, [1, 2, 1, 2], [1, 1, 1, 2], 1, 1, scale=0.5, zp=3, nchw=False),
        [np.array([7, 8, 9, 10], np.uint8).reshape(1, 2, 1, 2)],
        [np.array([7, 8], np.uint8).reshape(1, 1, 1, 2)],
    ),
    # int8, width 3 -> 2 with half pixel: floor((i + 0.5) * 1.5) = 0, 2.
    Example(
        "resize_nearest_neighbor_quant8_signed_half_pixel",
        _resize(
            Op.RESIZE_NEAREST_NEIGHBOR,
            I8,
            [1, 1, 3, 1],
            [1, 1, 2, 1],
            2,
            1,
            scale=1.0,
            zp=0,
            nchw=False,
            align=False,
            half=True,
        ),
        [np.array([-1, -2, -3], np.int8).reshape(1, 1, 3, 1)],
        [np.array([-1, -3], np.int8).reshape(1, 1, 2, 1)],
    ),
    # align_corners and half_pixel_centers together are invalid.
    Example(
        "resize_bilinear_fp32_align_and_half_pixel_fails",
        _resize(Op.RESIZE_BILINEAR, F32, [1, 2, 2, 1], [1, 3, 3, 1], 3, 3, nchw=False, align=True, half=True),
        [_IMG],
        [np.zeros((1, 3, 3, 1), np.float32)],
        expect_failure=True,
    ),
]

EXAMPLES = _POOL_EXAMPLES + _L2NORM_EXAMPLES + _LRN_EXAMPLES + _INSTANCE_EXAMPLES + _RESIZE_EXAMPLES
