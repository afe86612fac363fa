"""RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR: resize the spatial dimensions of an image.

Signature (both):
  0: input, rank 4, TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM or
     TENSOR_QUANT8_ASYMM_SIGNED, NHWC or NCHW; zero batches allowed
  1: output width, 2: output height.  Either both INT32 (the output size, > 0), or both scales
     (FLOAT16 for a TENSOR_FLOAT16 input, FLOAT32 otherwise) giving out = floor(in * scale),
     computed in float32.
  3: BOOL NCHW flag: optional for RESIZE_BILINEAR (3..6 inputs), required for
     RESIZE_NEAREST_NEIGHBOR (4..6 inputs)
  4: optional BOOL align_corners (HAL 1.3), default false
  5: optional BOOL half_pixel_centers (HAL 1.3), default false; may not be set together with
     align_corners
Output 0: [batches, out_height, out_width, depth] in the input's layout, same type; quantised
  outputs keep the input's scale and zero point.

Source coordinate of output index i (float32 arithmetic, as the reference):
  scale = (in - 1) / (out - 1) if align_corners and out > 1, else in / out
  bilinear: src = (i + 0.5) * scale - 0.5 with half_pixel_centers, else i * scale;
            lo = max(floor(src), 0), hi = min(ceil(src), in - 1), f = src - lo; the four
            neighbours are blended with weights (1 - fy)(1 - fx), fy(1 - fx), (1 - fy)fx, fy fx,
            summed in that order in float32.  TENSOR_QUANT8_ASYMM blends the stored integers
            the same way and converts back by truncation toward zero (the reference's
            static_cast; CTS allows the resulting off-by-one against its rounded goldens).
            TENSOR_QUANT8_ASYMM_SIGNED uses TFLite's integer kernel instead: coordinates in
            1/1024 steps (scale_10 = round-half-up(1024 * in / out)), products in int64,
            result rounded half away from zero from 1/2**20 units.  That kernel matches the
            CTS goldens exactly where float truncation misses by one on negative values.
  nearest:  src = (i + 0.5) * scale with half_pixel_centers, else i * scale; index =
            round-half-away(src) with align_corners, else floor(src); clamped to in - 1 (and to
            0 with half_pixel_centers).
FLOAT16 is widened to float32 and narrowed back.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith.layout import from_nhwc, to_nhwc
from nnconform.reference.kernels import jit
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
_F32 = np.float32


def _scale_type(tensor_type: T) -> T:
    return T.FLOAT16 if tensor_type == T.TENSOR_FLOAT16 else T.FLOAT32


def _validate(v: OpView, min_inputs: int) -> None:
    v.expect_counts(range(min_inputs, 7), 1)
    v.expect_types([TYPES], [TYPES])
    size_type = v.inputs[2].type
    allowed = (T.INT32, _scale_type(v.inputs[0].type))
    if size_type not in allowed:
        v.fail(f"must be {' or '.join(t.name for t in allowed)} (output size or scale), got {size_type.name}", input=2)
    v.expect_types([None, size_type, size_type, T.BOOL, T.BOOL, T.BOOL])
    v.expect_same_type(("input", 0), ("output", 0))
    v.expect_rank(0, [4])
    v.expect_rank(0, [4], output=True)
    if v.inputs[0].info.is_quant:
        v.expect_same_quant(("input", 0), ("output", 0))
    if size_type == T.INT32:
        for i, name in ((1, "output width"), (2, "output height")):
            value = v.constant_scalar(i)
            if value is not None and value <= 0:
                v.fail(f"{name} must be > 0, got {value}", input=i)
    if len(v.inputs) == 6 and v.constant_scalar(4) and v.constant_scalar(5):
        v.fail("half_pixel_centers cannot be true together with align_corners", input=5)


def validate_bilinear(v: OpView) -> None:
    _validate(v, 3)


def validate_nearest(v: OpView) -> None:
    _validate(v, 4)


def _flag(ctx: OpContext, i: int) -> bool:
    return bool(ctx.scalar(i, False)) if i < len(ctx.inputs) else False


def _prepare(ctx: OpContext):
    x = ctx.inputs[0]
    if x.ndim != 4:
        ctx.fail(f"input must have rank 4, got {x.ndim}")
    nchw, align, half = _flag(ctx, 3), _flag(ctx, 4), _flag(ctx, 5)
    if align and half:
        ctx.fail("half_pixel_centers cannot be true together with align_corners")
    x = to_nhwc(x, nchw)
    _, in_h, in_w, depth = x.shape
    if in_h <= 0 or in_w <= 0 or depth <= 0:
        ctx.fail(f"height, width and depth must be > 0 (only batches may be 0), got {list(x.shape)} NHWC")
    size_type = ctx.in_operands[2].type
    if size_type == T.INT32:
        out_w, out_h = int(ctx.scalar(1)), int(ctx.scalar(2))
    else:
        # The scale scalar is widened to float32 (from float16 if need be), multiplied in float32.
        out_w = int(np.floor(_F32(in_w) * _F32(ctx.scalar(1))))
        out_h = int(np.floor(_F32(in_h) * _F32(ctx.scalar(2))))
    if out_h <= 0 or out_w <= 0:
        ctx.fail(f"output size must be > 0, got height {out_h} width {out_w}")
    return x, nchw, align, half, out_h, out_w


# resize_scale, bilinear_axis, bilinear_axis_fixed and nearest_axis are public: the runtime
# adapters (nnconform.drivers.common.op_params) build their gather tables with them, so an
# adapter's source pixels and weights are the reference's by construction.
def resize_scale(in_size: int, out_size: int, align: bool) -> np.float32:
    if align and out_size > 1:
        return _F32(in_size - 1) / _F32(out_size - 1)
    return _F32(in_size) / _F32(out_size)


def bilinear_axis(in_size: int, out_size: int, align: bool, half: bool):
    scale = resize_scale(in_size, out_size, align)
    i = np.arange(out_size, dtype=_F32)
    src = ((i + _F32(0.5)) * scale - _F32(0.5)) if half else i * scale
    lo = np.maximum(np.floor(src), 0).astype(np.int64)
    hi = np.minimum(np.ceil(src).astype(np.int64), in_size - 1)
    frac = (src - lo.astype(_F32)).astype(_F32)
    return lo, hi, frac


@register(Op.RESIZE_BILINEAR, data_types=TYPES, validate=validate_bilinear)
def execute_bilinear(ctx: OpContext) -> list[np.ndarray]:
    x, nchw, align, half, out_h, out_w = _prepare(ctx)
    _, in_h, in_w, _ = x.shape
    if ctx.in_operands[0].type == T.TENSOR_QUANT8_ASYMM_SIGNED:
        return [from_nhwc(_bilinear_int8(x, out_h, out_w, align, half), nchw)]
    y0, y1, fy = bilinear_axis(in_h, out_h, align, half)
    x0, x1, fx = bilinear_axis(in_w, out_w, align, half)
    xf = x.astype(_F32, copy=False)  # only read
    dtype = ctx.output_dtype(0)
    if jit.worth(x.shape[0] * out_h * out_w * x.shape[3]):
        val = jit.bilinear(xf, (y0, y1, fy), (x0, x1, fx))
        if not ctx.in_operands[0].info.is_float:
            np.trunc(val, out=val)
        return [from_nhwc(val.astype(dtype, copy=False), nchw)]
    fy = fy[None, :, None, None]
    fx = fx[None, None, :, None]
    one = _F32(1)
    rows0, rows1 = xf[:, y0], xf[:, y1]
    # Same association and order as the reference, so that quantised truncation matches.
    val = (
        rows0[:, :, x0] * (one - fy) * (one - fx)
        + rows1[:, :, x0] * fy * (one - fx)
        + rows0[:, :, x1] * (one - fy) * fx
        + rows1[:, :, x1] * fy * fx
    )
    if not ctx.in_operands[0].info.is_float:
        val = np.trunc(val)
    return [from_nhwc(val.astype(dtype), nchw)]


def _c_div(a: np.ndarray, b: int) -> np.ndarray:
    """C integer division (truncates toward zero)."""
    q = np.abs(a) // b
    return np.where(a < 0, -q, q)


def bilinear_axis_fixed(in_size: int, out_size: int, align: bool, half: bool):
    """Source coordinates in 1/1024 pixel units for the int8 kernel."""
    if align and out_size > 1:
        scale = ((1 << 10) * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    else:
        scale = ((1 << 10) * in_size + out_size // 2) // out_size
    i = np.arange(out_size, dtype=np.int64)
    src = i * scale + scale // 2 - (1 << 9) if half else i * scale
    lo = np.maximum(_c_div(src, 1 << 10), 0)
    hi = np.minimum(_c_div(src + (1 << 10) - 1, 1 << 10), in_size - 1)
    return lo, hi, src - (1 << 10) * lo


def _bilinear_int8(x: np.ndarray, out_h: int, out_w: int, align: bool, half: bool) -> np.ndarray:
    y0, y1, wy = bilinear_axis_fixed(x.shape[1], out_h, align, half)
    x0, x1, wx = bilinear_axis_fixed(x.shape[2], out_w, align, half)
    wy = wy[None, :, None, None]
    wx = wx[None, None, :, None]
    one = 1 << 10
    xi = x.astype(np.int64)
    rows0, rows1 = xi[:, y0], xi[:, y1]
    acc = (
        rows0[:, :, x0] * (one - wy) * (one - wx)
        + rows1[:, :, x0] * wy * (one - wx)
        + rows0[:, :, x1] * (one - wy) * wx
        + rows1[:, :, x1] * wy * wx
    )
    rounded = _c_div(acc + np.where(acc > 0, 1 << 19, -(1 << 19)), 1 << 20)
    return rounded.astype(np.int8)


def nearest_axis(in_size: int, out_size: int, align: bool, half: bool) -> np.ndarray:
    scale = resize_scale(in_size, out_size, align)
    i = np.arange(out_size, dtype=_F32)
    src = ((i + _F32(0.5)) * scale) if half else i * scale
    idx = (np.sign(src) * np.floor(np.abs(src) + _F32(0.5))) if align else np.floor(src)
    idx = np.minimum(idx.astype(np.int64), in_size - 1)
    return np.maximum(idx, 0) if half else idx


@register(Op.RESIZE_NEAREST_NEIGHBOR, data_types=TYPES, validate=validate_nearest)
def execute_nearest(ctx: OpContext) -> list[np.ndarray]:
    x, nchw, align, half, out_h, out_w = _prepare(ctx)
    _, in_h, in_w, _ = x.shape
    ys = nearest_axis(in_h, out_h, align, half)
    xs = nearest_axis(in_w, out_w, align, half)
    return [from_nhwc(x[:, ys][:, :, xs], nchw)]
