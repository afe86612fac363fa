"""ROI_ALIGN: average of bilinearly sampled points in each output bin of each region of interest.

Signature:
  0: input [batches, height, width, depth] (NCHW with the flag): TENSOR_FLOAT32,
     TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM or TENSOR_QUANT8_ASYMM_SIGNED
  1: rois [num_rois, 4], [x1, y1, x2, y2] in original-image pixels: the input's float type, or
     TENSOR_QUANT16_ASYMM (scale 0.125, zero point 0) for quantised inputs; num_rois may be 0
  2: batch index of each roi [num_rois], TENSOR_INT32
  3, 4: INT32 output height, width (> 0)
  5, 6: height, width stride (FLOAT16 for fp16, FLOAT32 otherwise; > 0): image pixels per
     feature-map pixel
  7, 8: INT32 height, width sampling ratio (>= 0; 0: adaptive, ceil(bin size))
  9: BOOL NCHW flag
Output 0: [num_rois, out_h, out_w, depth] (NCHW with the flag), the input's type; quantised
  outputs carry their own scale and zero point.

Semantics (reference): a roi is scaled by 1/stride, its size clamped to >= 1, split into
out_h x out_w bins, and each bin sampled at ratio_h x ratio_w points at the centres of a
regular sub-grid.  A point's value is bilinear between floor(x), floor(x)+1 (clamped to the last
row/column, with weight 0 there).  The bin's value is the sum of the points, in row-major
sampling order, divided by their count.
  float32: all of this in float32.  float16: the reference computes everything, coordinates and
  sums included, in half precision; numpy float16 arithmetic rounds each operation the same way.
  quantised: coordinates in float32 (roi * (1/stride) * 0.125), bilinear weights quantised to
  round(w * 255) (1/255 units), products with (q - zero_point) summed in int32, then scaled by
  the fixed-point multiplier of input_scale / 255 / output_scale / num_points and offset by the
  output zero point, saturated.
The reference rejects rois with a bad batch index, negative or out-of-image coordinates, or
x2 < x1, y2 < y1.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import quant
from nnconform.reference.arith.layout import from_nhwc, to_nhwc
from nnconform.reference.ops import bbox_common as bb
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
F32 = np.float32
W_SCALE = F32(1.0) / F32(255.0)


def validate(v: OpView) -> None:
    v.expect_counts(10, 1)
    v.expect_types([TYPES])
    t = v.input_type(0)
    roi_t = T.TENSOR_QUANT16_ASYMM if t in bb.QUANT8_TYPES else t
    s = bb.scalar_type(t)
    v.expect_types([t, roi_t, T.TENSOR_INT32, T.INT32, T.INT32, s, s, T.INT32, T.INT32, T.BOOL], [t])
    v.expect_rank(0, [4])
    v.expect_rank(1, [2])
    v.expect_rank(2, [1])
    v.expect_rank(0, [4], output=True)
    if t in bb.QUANT8_TYPES:
        bb.expect_box_quant(v, input=1)
    for i, what in ((3, "output height"), (4, "output width"), (5, "height stride"), (6, "width stride")):
        value = v.constant_scalar(i)
        if value is not None and not value > 0:
            v.fail(f"{what} must be > 0, got {value}", input=i)
    for i, what in ((7, "height sampling ratio"), (8, "width sampling ratio")):
        value = v.constant_scalar(i)
        if value is not None and value < 0:
            v.fail(f"{what} must be >= 0, got {value}", input=i)


def check_rois(
    ctx: OpContext,
    start: np.ndarray,
    end: np.ndarray,
    batch: np.ndarray,
    num_batches: int,
    in_h: int,
    in_w: int,
    raw: np.ndarray | None = None,
) -> None:
    """The reference's malformed-roi checks.  start/end are [N, 2] (x, y) scaled coordinates;
    ``raw`` the unscaled rois (float variants also check them for >= 0)."""
    bad = (batch < 0) | (batch >= num_batches)
    if raw is not None:
        bad |= np.any(raw < 0, axis=1)
    bad |= (start[:, 0] > in_w) | (end[:, 0] > in_w) | (start[:, 1] > in_h) | (end[:, 1] > in_h)
    bad |= ~((start[:, 0] <= end[:, 0]) & (start[:, 1] <= end[:, 1]))
    if bad.any():
        i = int(np.nonzero(bad)[0][0])
        ctx.fail(
            f"roi {i} is malformed (batch index out of range, outside the {in_h}x{in_w} "
            f"feature map, or x2 < x1 / y2 < y1)"
        )


def _sample_axis(start, step, bin_size, n_out: int, ratio: int, dtype):
    """Sample coordinates [R, n_out, ratio] along one axis, in the reference's order:
    (step * j + start) + bin / 2 + bin * k."""
    j = np.arange(n_out, dtype=dtype)[None, :, None]
    k = np.arange(ratio, dtype=dtype)[None, None, :]
    s, st, b = start[:, None, None], step[:, None, None], bin_size[:, None, None]
    return (st * j + s) + b / dtype(2) + b * k


def _lerp_axis(pos, size: int, dtype):
    """Lower/upper neighbour and weight of the upper one; at or past the last pixel both
    neighbours are the last pixel and the weight is 0."""
    lo = np.floor(pos.astype(F32)).astype(np.int64)
    frac = (pos - lo.astype(dtype)).astype(dtype)
    edge = lo >= size - 1
    lo = np.where(edge, size - 1, lo)
    hi = np.where(edge, size - 1, lo + 1)
    return lo, hi, np.where(edge, dtype(0), frac).astype(dtype)


def _geometry(rois, is_quant, dtype, h_stride, w_stride, out_h, out_w, h_ratio, w_ratio):
    """Per roi: scaled start (x, y), end, step sizes, sampling ratios, bin sizes (in dtype)."""
    if is_quant:  # float32, raw eighths * (1/stride) * 0.125
        h_scale, w_scale = F32(1.0) / F32(h_stride), F32(1.0) / F32(w_stride)
        r = rois.astype(F32)
        start = np.stack([r[:, 0] * w_scale * F32(0.125), r[:, 1] * h_scale * F32(0.125)], 1)
        end = np.stack([r[:, 2] * w_scale * F32(0.125), r[:, 3] * h_scale * F32(0.125)], 1)
    else:
        h_scale = dtype(F32(1.0) / F32(h_stride))
        w_scale = dtype(F32(1.0) / F32(w_stride))
        start = np.stack([rois[:, 0] * w_scale, rois[:, 1] * h_scale], 1).astype(dtype)
        end = np.stack([rois[:, 2] * w_scale, rois[:, 3] * h_scale], 1).astype(dtype)
    size = np.maximum((end - start).astype(F32), F32(1)).astype(dtype)
    step = np.stack([size[:, 0] / dtype(out_w), size[:, 1] / dtype(out_h)], 1).astype(dtype)
    ratio = np.empty(step.shape, np.int64)
    ratio[:, 0] = w_ratio if w_ratio > 0 else np.ceil(step[:, 0].astype(F32))
    ratio[:, 1] = h_ratio if h_ratio > 0 else np.ceil(step[:, 1].astype(F32))
    bin_size = (step / ratio.astype(dtype)).astype(dtype)
    return start, end, step, ratio, bin_size


@register(Op.ROI_ALIGN, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x, rois, batch = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    nchw = bool(ctx.scalar(9))
    out_h, out_w = int(ctx.scalar(3)), int(ctx.scalar(4))
    h_stride, w_stride = float(ctx.scalar(5)), float(ctx.scalar(6))
    h_ratio, w_ratio = int(ctx.scalar(7)), int(ctx.scalar(8))
    if x.ndim != 4 or rois.ndim != 2:
        ctx.fail("input must have rank 4 and rois rank 2")
    x = to_nhwc(x, nchw)
    num_batches, in_h, in_w, depth = x.shape
    num_rois = rois.shape[0]
    if min(num_batches, in_h, in_w, depth) <= 0:
        ctx.fail(f"every input dimension must be > 0, got {list(x.shape)} NHWC")
    if rois.shape[1] != 4 or batch.shape != (num_rois,):
        ctx.fail(
            f"rois must be [num_rois, 4] with one batch index each, got {list(rois.shape)} and {list(batch.shape)}"
        )
    if out_h <= 0 or out_w <= 0 or not (h_stride > 0 and w_stride > 0) or h_ratio < 0 or w_ratio < 0:
        ctx.fail("output size and strides must be > 0, sampling ratios >= 0")
    out_dtype = ctx.output_dtype(0)
    if num_rois == 0:
        return [from_nhwc(np.zeros((0, out_h, out_w, depth), out_dtype), nchw)]

    is_quant = not ctx.in_operands[0].info.is_float
    dtype = F32 if is_quant else np.dtype(x.dtype).type
    start, end, step, ratio, bin_size = _geometry(
        rois, is_quant, dtype, h_stride, w_stride, out_h, out_w, h_ratio, w_ratio
    )
    check_rois(ctx, start, end, batch, num_batches, in_h, in_w, None if is_quant else rois)

    out = np.empty((num_rois, out_h, out_w, depth), out_dtype)
    # Rois sharing sampling ratios are computed together; the loop is over those few groups.
    groups = {}
    for i, key in enumerate(map(tuple, ratio.tolist())):
        groups.setdefault(key, []).append(i)
    for (rw, rh), members in groups.items():
        g = np.array(members)
        ys = _sample_axis(start[g, 1], step[g, 1], bin_size[g, 1], out_h, rh, dtype)
        xs = _sample_axis(start[g, 0], step[g, 0], bin_size[g, 0], out_w, rw, dtype)
        y0, y1, dy = _lerp_axis(ys, in_h, dtype)
        x0, x1, dx = _lerp_axis(xs, in_w, dtype)
        if is_quant:
            out[g] = _quant_group(ctx, x, batch[g], y0, y1, dy, x0, x1, dx, rh * rw)
        else:
            out[g] = _float_group(x, batch[g], y0, y1, dy, x0, x1, dx, rh * rw, dtype)
    return [from_nhwc(out, nchw)]


def _corners(x, b, y0, y1, x0, x1, yk, xk):
    """The four neighbours [R, out_h, out_w, depth] of sampling point (yk, xk) of every bin."""
    bi = b[:, None, None]
    ya, yb = y0[:, :, yk][:, :, None], y1[:, :, yk][:, :, None]
    xa, xb = x0[:, :, xk][:, None, :], x1[:, :, xk][:, None, :]
    return x[bi, ya, xa], x[bi, ya, xb], x[bi, yb, xa], x[bi, yb, xb]


def _weights(dy, dx, yk, xk, dtype):
    fy = dy[:, :, yk][:, :, None]
    fx = dx[:, :, xk][:, None, :]
    gy, gx = (dtype(1) - fy).astype(dtype), (dtype(1) - fx).astype(dtype)
    return gx * gy, fx * gy, gx * fy, fx * fy


def _float_group(x, b, y0, y1, dy, x0, x1, dx, count, dtype):
    acc = np.zeros((len(b), y0.shape[1], x0.shape[1], x.shape[3]), dtype)
    for yk in range(y0.shape[2]):
        for xk in range(x0.shape[2]):
            vals = _corners(x, b, y0, y1, x0, x1, yk, xk)
            ws = _weights(dy, dx, yk, xk, dtype)
            interp = np.zeros_like(acc)
            for w, v in zip(ws, vals):
                interp = interp + w[..., None] * v
            acc = acc + interp
    return acc / dtype(count)


def _quant_group(ctx, x, b, y0, y1, dy, x0, x1, dx, count):
    in_op, out_op = ctx.in_operands[0], ctx.out_operands[0]
    real = F32(in_op.scale) * W_SCALE / F32(out_op.scale) / F32(count)
    try:
        mult, shift = quant.quantize_multiplier_smaller_than_one(float(real))
    except ValueError:
        ctx.fail(f"output multiplier {real} is not in [0, 1)")
    xq = x.astype(np.int64) - in_op.zero_point
    acc = np.zeros((len(b), y0.shape[1], x0.shape[1], x.shape[3]), np.int64)
    for yk in range(y0.shape[2]):
        for xk in range(x0.shape[2]):
            vals = _corners(xq, b, y0, y1, x0, x1, yk, xk)
            ws = _weights(dy, dx, yk, xk, F32)
            for w, v in zip(ws, vals):
                wq = quant.round_half_away_array(w / W_SCALE).astype(np.int64)
                acc += wq[..., None] * v
    acc = acc.astype(np.int32).astype(np.int64)  # the reference accumulates in int32
    res = quant.multiply_by_quantized_multiplier(acc, mult, -shift) + out_op.zero_point
    return quant.saturate(res, out_op)
