"""TRANSPOSE_CONV_2D (deconvolution): every input pixel scatters input . filter into the output:
output[b, y*sh + i - pad_top, x*sw + j - pad_left, o] += sum over c of input[b, y, x, c] *
filter[o, i, j, c] (contributions falling outside the output are dropped), then + bias[o] and
the fused activation.

Inputs (explicit padding, 11 inputs):
  0 input  [batches, height, width, depth_in] (NCHW when the layout flag is true)
  1 filter [depth_out, filter_height, filter_width, depth_in]
  2 bias   [depth_out]
  3..6 INT32 padding left, right, top, bottom; 7 stride_width; 8 stride_height;
  9 INT32 fused activation; 10 BOOL layout
Inputs (implicit padding, 9 inputs):
  3 TENSOR_INT32 [4] output shape (in the layout of the input); 4 INT32 padding scheme;
  5 stride_width; 6 stride_height; 7 activation; 8 BOOL layout.
  The padding comes from the requested output size: SAME pads (ceil(out/stride) - 1) * stride
  + filter - out in total, head = total // 2, and the tail takes the rest even when it is
  negative (so the output fits the last stride tightly); VALID pads nothing.
Output 0: [batches, out_height, out_width, depth_out] with
  out = in * stride + filter - stride - pad_head - pad_tail (NCHW: [b, depth_out, h, w]).
  Padding left/top must be >= 0; right/bottom may be negative (the output grows).

Types: as CONV_2D (per-channel filters along channel_dim 0, TENSOR_INT32 bias of scale
input_scale * filter_scale).  No dilation.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import activation, layout
from nnconform.reference.arith.padding import PADDING_SAME, PADDING_VALID
from nnconform.reference.ops import conv_common as cc
from nnconform.reference.ops.registry import OpContext, OpView, register


def validate(v: OpView) -> None:
    v.expect_counts((9, 11), 1)
    cc.validate_tensor_types(v, filter_channel_dim=0)
    if len(v.inputs) == 11:
        ints, flag = (3, 4, 5, 6, 7, 8, 9), 10
        for i in (3, 5):
            val = v.constant_scalar(i)
            if val is not None and val < 0:
                v.fail(f"padding must be >= 0, got {val}", input=i)
        strides, act = (7, 8), 9
    else:
        ints, flag = (4, 5, 6, 7), 8
        if v.input_type(3) != T.TENSOR_INT32:
            v.fail(f"(output shape) must be TENSOR_INT32, got {v.input_type(3).name}", input=3)
        v.expect_rank(3, (1,))
        if cc.known_dim(v.inputs[3], 0) not in (0, 4):
            v.fail(f"(output shape) must have 4 values, got {v.inputs[3].dimensions[0]}", input=3)
        v.expect_scalar_in(4, (PADDING_SAME, PADDING_VALID), "padding scheme")
        strides, act = (5, 6), 7
    for i in ints:
        if v.input_type(i) != T.INT32:
            v.fail(f"must be INT32, got {v.input_type(i).name}", input=i)
    if v.input_type(flag) != T.BOOL:
        v.fail(f"(layout flag) must be BOOL, got {v.input_type(flag).name}", input=flag)
    for i in strides:
        val = v.constant_scalar(i)
        if val is not None and val < 1:
            v.fail(f"stride must be >= 1, got {val}", input=i)
    v.expect_scalar_in(act, activation.FUSED_ACTIVATIONS, "fused activation")
    x, f, b = v.inputs[:3]
    nchw = v.constant_scalar(flag)
    c = cc.known_dim(x, 1 if nchw else 3) if nchw is not None else 0
    fc, o, bl = cc.known_dim(f, 3), cc.known_dim(f, 0), cc.known_dim(b, 0)
    if c and fc and c != fc:
        v.fail(f"filter depth {fc} differs from the input depth {c}", input=1)
    if o and bl and o != bl:
        v.fail(f"bias has {bl} values for {o} output channels", input=2)


def transpose_padding(out_size: int, stride: int, filter_size: int, scheme: int) -> tuple[int, int]:
    """Implicit padding of a transposed convolution, from the requested output size."""
    if scheme == PADDING_VALID:
        return 0, 0
    total = ((out_size + stride - 1) // stride - 1) * stride + filter_size - out_size
    head = total // 2 if total > 0 else 0
    return head, total - head


def _params(ctx: OpContext, f: np.ndarray) -> cc.ConvParams:
    if len(ctx.inputs) == 11:
        pl, pr, pt, pb, sw, sh, act = (ctx.scalar(i) for i in range(3, 10))
        nchw = bool(ctx.scalar(10))
    elif len(ctx.inputs) == 9:
        shape = ctx.inputs[3]
        if shape is None or shape.ndim != 1 or shape.shape[0] != 4:
            ctx.fail("the output shape input must be a TENSOR_INT32 of 4 values")
        scheme, sw, sh, act = (ctx.scalar(i) for i in range(4, 8))
        nchw = bool(ctx.scalar(8))
        if scheme not in (PADDING_SAME, PADDING_VALID):
            ctx.fail(f"padding scheme must be 1 (SAME) or 2 (VALID), got {scheme}")
        if sw < 1 or sh < 1:
            ctx.fail(f"strides must be positive, got ({sw}, {sh})")
        out_h, out_w = (int(shape[2]), int(shape[3])) if nchw else (int(shape[1]), int(shape[2]))
        pl, pr = transpose_padding(out_w, sw, f.shape[2], scheme)
        pt, pb = transpose_padding(out_h, sh, f.shape[1], scheme)
    else:
        ctx.fail(f"takes 9 or 11 inputs, got {len(ctx.inputs)}")
    if pl < 0 or pt < 0:
        ctx.fail(f"padding left and top must be >= 0, got {pl} and {pt}")
    if sw < 1 or sh < 1:
        ctx.fail(f"strides must be positive, got ({sw}, {sh})")
    if act not in activation.FUSED_ACTIVATIONS:
        ctx.fail(f"fused activation must be 0..3, got {act}")
    return cc.ConvParams(pt, pb, pl, pr, sh, sw, 1, 1, act, nchw, ())


def _scatter(x: np.ndarray, f: np.ndarray, oh: int, ow: int, p: cc.ConvParams, dtype) -> np.ndarray:
    """NHWC ``x`` [N, H, W, C] and filters [O, fh, fw, C] -> [N, OH, OW, O] sums in ``dtype``:
    one matmul for all (pixel, tap, o) products, then one strided add per filter tap."""
    n, h, w, c = x.shape
    o, fh, fw, _ = f.shape
    cols = (
        x.reshape(-1, c).astype(dtype, copy=False)
        @ f.transpose(1, 2, 0, 3).reshape(fh * fw * o, c).astype(dtype, copy=False).T
    )
    cols = cols.reshape(n, h, w, fh, fw, o)
    # The full (uncropped) result, extended when a negative tail padding asks for more.
    full_h = max((h - 1) * p.stride_h + fh, p.pad_top + oh)
    full_w = max((w - 1) * p.stride_w + fw, p.pad_left + ow)
    buf = np.zeros((n, full_h, full_w, o), dtype=dtype)
    for i in range(fh):
        for j in range(fw):
            buf[:, i : i + (h - 1) * p.stride_h + 1 : p.stride_h, j : j + (w - 1) * p.stride_w + 1 : p.stride_w, :] += (
                cols[:, :, :, i, j, :]
            )
    return buf[:, p.pad_top : p.pad_top + oh, p.pad_left : p.pad_left + ow, :]


@register(Op.TRANSPOSE_CONV_2D, data_types=cc.TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    quant = cc.check_conv_types(ctx)
    x, f, b = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    if x.ndim != 4 or f.ndim != 4 or b.ndim != 1:
        ctx.fail(f"input, filter and bias must be rank 4, 4 and 1, got {x.ndim}, {f.ndim}, {b.ndim}")
    p = _params(ctx, f)
    x = layout.to_nhwc(x, p.nchw)
    n, h, w, c = x.shape
    o, fh, fw, fc = f.shape
    if min(h, w, c, o, fh, fw) <= 0:
        ctx.fail(
            f"input {list(x.shape)} and filter {list(f.shape)} dimensions must be positive (only the batch may be 0)"
        )
    if c != fc:
        ctx.fail(f"filter depth {fc} differs from the input depth {c}")
    if b.shape[0] != o:
        ctx.fail(f"bias has {b.shape[0]} values for {o} output channels")
    oh = h * p.stride_h + fh - p.stride_h - p.pad_top - p.pad_bottom
    ow = w * p.stride_w + fw - p.stride_w - p.pad_left - p.pad_right
    if oh <= 0 or ow <= 0:
        ctx.fail(f"output would be {oh}x{ow}")
    out = ctx.out_operands[0]
    if n == 0:
        return [layout.from_nhwc(np.zeros((0, oh, ow, o), out.info.dtype), p.nchw)]
    if not quant:
        y = _scatter(cc.to_float32(x), cc.to_float32(f), oh, ow, p, np.float32) + cc.to_float32(b)
        return [layout.from_nhwc(cc.finish_float(y, p.activation, out), p.nchw)]
    xo, fo = ctx.in_operands[0], ctx.in_operands[1]
    xz, fz = xo.zero_point, cc.filter_zero_point(fo)
    # Each output sums at most fh*fw taps of c products.
    dt = cc.exact_float_dtype(c * fh * fw, cc.offset_bound(x, xz), cc.offset_bound(f, fz))
    acc = _scatter(cc.offsets_as(x, xz, dt), cc.offsets_as(f, fz, dt), oh, ow, p, dt).astype(np.int64)
    mult, shift = cc.output_multipliers(ctx, xo, fo, ctx.in_operands[2], out, o)
    return [layout.from_nhwc(cc.requantize(acc, b, mult, shift, out, p.activation), p.nchw)]
