"""DEPTHWISE_CONV_2D: each input channel c is convolved with its own depth_multiplier filters:
output[b, y, x, c*M + m] = bias[c*M + m] + sum over (i, j) of
input[b, y*sh + i*dh - pad_top, x*sw + j*dw - pad_left, c] * filter[0, i, j, c*M + m],
then the fused activation (M = depth_multiplier).

Inputs (implicit padding, 8, 9 or 11 inputs):
  0 input  [batches, height, width, depth_in] (NHWC; NCHW when the layout flag is true)
  1 filter [1, filter_height, filter_width, depth_out], depth_out = depth_in * M
  2 bias   [depth_out]
  3 INT32 padding scheme (1 SAME, 2 VALID); 4 stride_width; 5 stride_height;
  6 INT32 depth_multiplier; 7 INT32 fused activation
  8 BOOL layout (optional); 9, 10 INT32 dilation width/height (optional, both)
Inputs (explicit padding, 11, 12 or 14 inputs): 3..6 padding left, right, top, bottom;
  7 stride_width; 8 stride_height; 9 depth_multiplier; 10 activation; 11 BOOL layout;
  12, 13 dilation factors.
Output 0: [batches, out_height, out_width, depth_out] (NCHW: [b, depth_out, h, w]).

Types: as CONV_2D, except that a TENSOR_QUANT8_SYMM_PER_CHANNEL filter is quantised along
dimension 3 (channel_dim 3).  Quantised accumulation is exact integer arithmetic; the
requantisation uses (input_scale * filter_scale[c]) / output_scale per output channel.
"""
from __future__ import annotations

import numpy as np

from ..ir import OperationType as Op
from . import conv_common as cc
from . import layout
from .registry import OpContext, OpView, register


def validate(v: OpView) -> None:
    v.expect_counts((8, 9, 11, 12, 14), 1)
    lay = cc.view_layout(v, n_extra=1)
    cc.validate_tensor_types(v, filter_channel_dim=3)
    cc.validate_scalars(v, lay)
    (m_idx,) = lay.extra
    m = v.constant_scalar(m_idx)
    if m is not None and m < 1:
        v.fail(f"depth multiplier must be >= 1, got {m}", input=m_idx)
    x, f, b = v.inputs[:3]
    if cc.known_dim(f, 0) not in (0, 1):
        v.fail(f"filter must be [1, height, width, depth_out], got {list(f.dimensions)}", input=1)
    nchw = v.constant_scalar(lay.layout) if lay.layout is not None else False
    c, fo = (cc.known_dim(x, 1 if nchw else 3) if nchw is not None else 0), cc.known_dim(f, 3)
    if c and fo and m is not None and c * m != fo:
        v.fail(f"filter depth {fo} must equal input depth {c} x depth multiplier {m}", input=1)
    bl = cc.known_dim(b, 0)
    if fo and bl and fo != bl:
        v.fail(f"bias has {bl} values for {fo} output channels", input=2)


def _depthwise(xp: np.ndarray, w: np.ndarray, m: int, oh: int, ow: int, p: cc.ConvParams,
               acc_dtype) -> np.ndarray:
    """Padded NHWC ``xp`` [N, H', W', C], filter taps ``w`` [fh, fw, C*M] -> [N, OH, OW, C*M].
    One multiply-add per filter tap, each over the whole output."""
    n, c = xp.shape[0], xp.shape[3]
    fh, fw = w.shape[:2]
    w = w.astype(acc_dtype).reshape(fh, fw, c, m)
    acc = np.zeros((n, oh, ow, c, m), dtype=acc_dtype)
    tmp = np.empty_like(acc)
    for i in range(fh):
        for j in range(fw):
            t = cc.tap(xp, i, j, oh, ow, p)[..., None]
            np.multiply(t, w[i, j], out=tmp)
            acc += tmp
    return acc.reshape(n, oh, ow, c * m)


@register(Op.DEPTHWISE_CONV_2D, data_types=cc.TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    p = cc.ctx_params(ctx, cc.ctx_layout(ctx, n_extra=1))
    (m,) = p.extra
    quant = cc.check_conv_types(ctx)
    x, f, b = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    if x.ndim != 4 or f.ndim != 4 or b.ndim != 1:
        ctx.fail(f"input, filter and bias must be rank 4, 4 and 1, got {x.ndim}, {f.ndim}, {b.ndim}")
    x = layout.to_nhwc(x, p.nchw)
    n, c = x.shape[0], x.shape[3]
    _, fh, fw, o = f.shape
    if f.shape[0] != 1:
        ctx.fail(f"filter must be [1, height, width, depth_out], got {list(f.shape)}")
    if m < 1:
        ctx.fail(f"depth multiplier must be >= 1, got {m}")
    if c * m != o:
        ctx.fail(f"filter depth {o} must equal input depth {c} x depth multiplier {m}")
    if b.shape[0] != o:
        ctx.fail(f"bias has {b.shape[0]} values for {o} output channels")
    oh, ow = cc.check_shapes(ctx, x, fh, fw, p)
    out = ctx.out_operands[0]
    if n == 0:
        return [layout.from_nhwc(np.zeros((0, oh, ow, o), out.info.dtype), p.nchw)]
    if not quant:
        y = _depthwise(cc.padded(cc.to_float32(x), p), cc.to_float32(f[0]), m, oh, ow, p, np.float32)
        y += cc.to_float32(b)
        return [layout.from_nhwc(cc.finish_float(y, p.activation, out), p.nchw)]
    xo, fo = ctx.in_operands[0], ctx.in_operands[1]
    xz, fz = xo.zero_point, cc.filter_zero_point(fo)
    # Exact integer sums: int32 while fh*fw products of offsets cannot overflow it.
    bound = fh * fw * cc.offset_bound(x, xz) * cc.offset_bound(f, fz)
    dt = np.int32 if bound < (1 << 31) else np.int64
    y = _depthwise(cc.padded(cc.offsets_as(x, xz, dt), p), cc.offsets_as(f[0], fz, dt), m, oh, ow, p, dt)
    mult, shift = cc.output_multipliers(ctx, xo, fo, ctx.in_operands[2], out, o)
    return [layout.from_nhwc(cc.requantize(y.astype(np.int64), b, mult, shift, out, p.activation), p.nchw)]
