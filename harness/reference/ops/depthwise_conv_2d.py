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

from nnconform.ir import OperationType as Op
from nnconform.reference.arith import activation, layout
from nnconform.reference.kernels import jit
from nnconform.reference.ops import conv_common as cc
from nnconform.reference.ops.registry import OpContext, OpView, register


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


# Output elements per block of the tap loop: the block and its product buffer stay in cache
# while the fh*fw taps are accumulated into it.
_BLOCK = 1 << 16


def _depthwise(
    xp: np.ndarray,
    w: np.ndarray,
    oh: int,
    ow: int,
    p: cc.ConvParams,
    bias: np.ndarray | None = None,
    zero_start: bool | None = None,
    unpadded: bool = False,
) -> np.ndarray:
    """Padded NHWC ``xp`` [N, H', W', C], filter taps ``w`` [fh, fw, C] (one filter per
    channel: a depth multiplier M > 1 is handled by the caller repeating each input channel M
    times) -> [N, OH, OW, C] in ``w``'s dtype, plus ``bias`` [C] when given.  ``unpadded``:
    ``xp`` is the input before ``p``'s zero padding (what the compiled kernel takes; see
    ``compiled_here``), padded here when the kernel is not used.

    Every output element is 0 + tap_0 * w_0 + tap_1 * w_1 + ... (+ bias), in tap order, over
    blocks of output rows that stay in cache.  The leading 0 + only turns a -0.0 first
    product into +0.0, and that sign survives to the output only when every later term is a
    zero too and the bias is -0.0; so it is skipped unless the bias holds a -0.0, and always
    without a bias (integer-valued quantised sums, whose zeros lose their sign anyway).  The weights are tiled across the output width
    so that each multiply runs over whole rows (a broadcast over only C channels would make
    numpy's inner loop C elements long)."""
    n, c = xp.shape[0], xp.shape[3]
    fh, fw = w.shape[:2]
    dtype = w.dtype
    if zero_start is None:  # (the caller may know it already: a constant bias's, per model)
        zero_start = _has_negative_zero(bias)
    # The same sums, compiled (nnconform.reference.kernels.jit), at any size (at=1): numpy's tap loop
    # costs ~60-100 us of calls however small the image (a MobileNet's 4x4x48 tail), the
    # compiled one ~10 us.
    if compiled_here(n * oh * ow * c):
        pads = (p.pad_top, p.pad_bottom, p.pad_left, p.pad_right) if unpadded else (0, 0, 0, 0)
        return jit.depthwise(xp, w, oh, ow, p.stride_h, p.stride_w, p.dil_h, p.dil_w, bias, zero_start, pads)
    if unpadded:
        xp = cc.padded(xp, p)
    wt = np.ascontiguousarray(np.broadcast_to(w[:, :, None, :], (fh, fw, ow, c)))
    bt = None if bias is None else np.ascontiguousarray(np.broadcast_to(bias.astype(dtype), (ow, c)))
    out = np.empty((n, oh, ow, c), dtype=dtype)
    image = oh * ow * c
    if image >= _BLOCK:  # blocks of rows within one image
        rows, images = max(1, _BLOCK // (ow * c)), 1
    else:  # blocks of whole images
        rows, images = oh, max(1, _BLOCK // image)
    tmp = np.empty((min(images, n), min(rows, oh), ow, c), dtype=dtype)
    sh, sw, dh, dw = p.stride_h, p.stride_w, p.dil_h, p.dil_w
    # With a column stride, a tap's view steps over whole pixels, so numpy's inner loop is
    # only C elements long.  Split the columns into their sw phases (column q, q + sw, ...),
    # each contiguous, once: every tap then reads whole rows of one phase (5x5 stride-2
    # depthwise in hand_landmark: a third less time).  The products and sums are the same.
    if sw > 1 and fw > 1:
        phases = [np.ascontiguousarray(xp[:, :, q::sw]) for q in range(sw)]
    else:
        phases = None
    for b0 in range(0, n, images):
        b1 = min(b0 + images, n)
        for r0 in range(0, oh, rows):
            r1 = min(r0 + rows, oh)
            acc = out[b0:b1, r0:r1]
            t = tmp[: b1 - b0, : r1 - r0]
            if zero_start:
                acc[...] = 0
            for i in range(fh):
                top = r0 * sh + i * dh
                for j in range(fw):
                    if phases is None:
                        left = j * dw
                        view = xp[b0:b1, top : top + (r1 - r0 - 1) * sh + 1 : sh, left : left + (ow - 1) * sw + 1 : sw]
                    else:  # columns j*dw + x*sw are phase (j*dw) % sw from (j*dw) // sw on
                        left, q = divmod(j * dw, sw)
                        view = phases[q][b0:b1, top : top + (r1 - r0 - 1) * sh + 1 : sh, left : left + ow]
                    if i == j == 0 and not zero_start:
                        np.multiply(view, wt[i, j], out=acc)
                    else:
                        np.multiply(view, wt[i, j], out=t)
                        acc += t
            if bt is not None:
                acc += bt
    return out


def compiled_here(outputs: int) -> bool:
    """Whether ``_depthwise`` runs the compiled kernel for this many outputs: callers then
    hand it the input unpadded (the kernel pads it in one compiled pass)."""
    return jit.worth(outputs, at=1)


def _has_negative_zero(bias: np.ndarray | None) -> bool:
    return bias is not None and bool(np.any(np.signbit(bias) & (bias == 0)))


def _repeat_channels(xp: np.ndarray, m: int) -> np.ndarray:
    """Output channel c*M + k reads input channel c: repeat each channel M times."""
    return xp if m == 1 else np.repeat(xp, m, axis=3)


def _filter_offsets(ctx: OpContext, zero_point: int, dtype) -> np.ndarray:
    """The taps [fh, fw, C] of the filter less its zero point, in ``dtype``: a constant
    filter's once per model (ctx.memo), read-only."""

    def taps() -> np.ndarray:
        t = cc.offsets_as(ctx.inputs[1][0], zero_point, dtype)
        t.setflags(write=False)
        return t

    return ctx.remember_of_constant(1, ("filter offsets", zero_point, np.dtype(dtype).str), taps)


def _checks(ctx: OpContext, p: cc.ConvParams) -> tuple[bool, np.ndarray, int, int]:
    """execute's run-time checks (the reference's prepare()): (quantised, the input NHWC,
    output height, output width).  A plan-time kernel runs them on the model's constants."""
    (m,) = p.extra
    quant = cc.check_conv_types(ctx)
    x, f, b = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    if x.ndim != 4 or f.ndim != 4 or b.ndim != 1:
        ctx.fail(f"input, filter and bias must be rank 4, 4 and 1, got {x.ndim}, {f.ndim}, {b.ndim}")
    x = layout.to_nhwc(x, p.nchw)
    c = x.shape[3]
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
    return quant, x, oh, ow


def prepare(v: OpView):
    """A plan-time kernel for an NHWC depthwise convolution, float32 or with an 8-bit input,
    with a constant filter and bias, constant parameters and known dimensions.  ``execute``'s
    own checks run here on the model's constants; the kernel keeps execute's arithmetic
    (``_float_taps`` or ``_quant_taps``, the compiled call or numpy's taps as the run
    decides): a MobileNet's small depthwise convolution spent ~10 us of its 20-45 us in the
    checks, parameter reads and copies around that call."""
    setup = cc.static_setup(v, _checks, n_extra=1)
    if setup is None:
        return None
    ctx, p, x, oh, ow, quantised = setup
    f, b = ctx.inputs[1], ctx.inputs[2]
    _, fh, fw, o = f.shape
    slot, dims, outputs = v.operation.inputs[0], v.inputs[0].dimensions, x.shape[0] * oh * ow * o
    if not quantised:
        w, zero_start = np.ascontiguousarray(f[0]), _has_negative_zero(b)

        def kernel(values: list):
            x = values[slot]
            if x is None or x.shape != dims:
                return None
            y = _float_taps(x, w, b, zero_start, oh, ow, p, compiled_here(outputs))
            return [activation.apply_float(y, p.activation, in_place=True)]

        return kernel
    quant = cc.prepared_quant(ctx, fh * fw, o)
    if quant is None:
        return None
    xz, offsets, mult, shift, acc_bound = quant
    w, out = np.ascontiguousarray(offsets[0]), v.outputs[0]

    def kernel_quant(values: list):
        x = values[slot]
        if x is None or x.shape != dims:
            return None
        y = _quant_taps(x, xz, w, oh, ow, p, compiled_here(outputs))
        return [cc.requantize(y, b, mult, shift, out, p.activation, acc_bound=acc_bound)]

    return kernel_quant


def _float_taps(
    x: np.ndarray, w: np.ndarray, bias: np.ndarray, zero_start: bool, oh: int, ow: int, p: cc.ConvParams, compiled: bool
) -> np.ndarray:
    """execute's float sums (no activation) for NHWC ``x``, taps ``w`` [fh, fw, C] and
    ``bias``.  The compiled kernel pads the input itself; numpy's taps read it padded, or as
    it is when unpadded (VALID, or after an explicit PAD, as TFLite models have it)."""
    unpadded = compiled or not (p.pad_top or p.pad_bottom or p.pad_left or p.pad_right)
    x32 = cc.to_float32(x)  # (fp16 widened before the padded copy: numpy's conversion is slow)
    xp = np.ascontiguousarray(x32) if unpadded else cc.padded_offsets(x32, p, 0, np.float32)
    return _depthwise(
        _repeat_channels(xp, p.extra[0]), w, oh, ow, p, bias=bias, zero_start=zero_start, unpadded=unpadded
    )


def _quant_taps(
    x: np.ndarray, xz: int, w: np.ndarray, oh: int, ow: int, p: cc.ConvParams, compiled: bool
) -> np.ndarray:
    """execute's quantised sums for 8-bit NHWC ``x`` less ``xz`` and the filter's offsets
    ``w`` [fh, fw, C], in ``w``'s exact float dtype (see execute)."""
    dt = w.dtype.type
    xp = cc.offsets_as(x, xz, dt) if compiled else cc.padded_offsets(x, p, xz, dt)
    return _depthwise(_repeat_channels(xp, p.extra[0]), w, oh, ow, p, unpadded=compiled)


@register(Op.DEPTHWISE_CONV_2D, data_types=cc.TYPES, validate=validate, prepare=prepare)
def execute(ctx: OpContext) -> list[np.ndarray]:
    p = cc.planned_params(ctx, n_extra=1)
    quant, x, oh, ow = _checks(ctx, p)
    f, b = ctx.inputs[1], ctx.inputs[2]
    n = x.shape[0]
    _, fh, fw, o = f.shape
    out = ctx.out_operands[0]
    if n == 0:
        return [layout.from_nhwc(np.zeros((0, oh, ow, o), out.info.dtype), p.nchw)]
    compiled = compiled_here(n * oh * ow * o)
    if not quant:
        bias = cc.widened_constant(ctx, 2)
        # whether the bias holds a -0.0 (see _depthwise): a constant bias's once per model
        zero_start = ctx.remember_of_constant(2, ("bias -0",), lambda: _has_negative_zero(bias))
        y = _float_taps(x, cc.widened_constant(ctx, 1)[0], bias, zero_start, oh, ow, p, compiled)
        return [layout.from_nhwc(cc.finish_float(y, p.activation, out), p.nchw)]
    xo, fo = ctx.in_operands[0], ctx.in_operands[1]
    xz, fz = xo.zero_point, cc.filter_zero_point(fo)
    # Exact integer sums in floating point: every partial sum of fh*fw products of offsets is
    # an integer below the dtype's exact range (float32 for 8-bit 3x3 filters).
    bmax = cc.input_bound(ctx, 1, fz)
    amax, dt = cc.bound_and_dtype(x, xz, fh * fw, bmax)
    y = _quant_taps(x, xz, _filter_offsets(ctx, fz, dt), oh, ow, p, compiled)
    mult, shift = cc.output_multipliers(ctx, xo, fo, ctx.in_operands[2], out, o)
    return [
        layout.from_nhwc(cc.requantize(y, b, mult, shift, out, p.activation, acc_bound=fh * fw * amax * bmax), p.nchw)
    ]
