"""Shared pieces of the convolution family (CONV_2D, DEPTHWISE_CONV_2D, GROUPED_CONV_2D,
TRANSPOSE_CONV_2D) and FULLY_CONNECTED.

- Argument layouts: the "implicit padding" signature (padding scheme SAME/VALID) and the
  "explicit padding" signature (left, right, top, bottom), both followed by strides, the
  op-specific integers (depth multiplier, number of groups), the fused activation, an optional
  NCHW flag and optional dilation factors.  Which one a model uses is told, as in NNAPI, by the
  input count and by the type of the input just after the implicit form's activation (BOOL:
  layout flag of the implicit form, INT32: the explicit form's strides).
- im2col over NHWC (a strided view of the taps made contiguous) plus one matmul per group.
- Quantised accumulation: offsets (value - zero point) are multiplied in floating point.  The
  products and partial sums are integers, and a float matmul is exact while every partial
  sum fits the mantissa, so we pick float32 when K * max|a| * max|b| < 2**24 and float64
  otherwise (8-bit offsets summed over any realistic K stay far below 2**53).
- Requantisation of int accumulators with one multiplier or one per output channel, exactly
  as the reference does: real multiplier (input_scale * filter_scale computed in float32, then
  divided in double by output_scale), QuantizeMultiplier, MultiplyByQuantizedMultiplier.
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass
from typing import Callable

import numpy as np
from numpy.lib.stride_tricks import as_strided

from nnconform.errors import OpFailure
from nnconform.ir import TYPE_INFO, Operand
from nnconform.ir import OperandType as T
from nnconform.reference.arith import activation, half, layout
from nnconform.reference.arith.padding import PADDING_SAME, PADDING_VALID, WindowPairs, explicit_padding, output_size
from nnconform.reference.arith.quant import QUANT_RANGE, multiply_by_quantized_multiplier, quantize_multiplier
from nnconform.reference.kernels import int16_conv, jit
from nnconform.reference.ops.registry import OpContext, OpView

FLOAT_TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
QUANT_TYPES = (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
TYPES = FLOAT_TYPES + QUANT_TYPES
PER_CHANNEL = T.TENSOR_QUANT8_SYMM_PER_CHANNEL


# ---------------------------------------------------------------------------------------
# Argument layouts
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ArgLayout:
    """Input indexes of the scalar arguments of one convolution signature."""

    explicit: bool
    padding: tuple[int, ...]  # (scheme,) or (left, right, top, bottom)
    stride_w: int
    stride_h: int
    extra: tuple[int, ...]  # depth multiplier (DEPTHWISE) or groups (GROUPED)
    activation: int
    layout: int | None
    dilation: tuple[int, int] | None  # (width factor, height factor)

    @property
    def int_inputs(self) -> tuple[int, ...]:
        d = self.dilation or ()
        return (*self.padding, self.stride_w, self.stride_h, *self.extra, self.activation, *d)


class LayoutError(ValueError):
    def __init__(self, message: str, input: int | None = None):
        super().__init__(message)
        self.input = input


def parse_layout(
    count: int, type_at: Callable[[int], T], n_extra: int = 0, *, dilation: bool = True, layout_required: bool = False
) -> ArgLayout:
    """Which signature ``count`` inputs form.  Raises LayoutError (naming the input when one is
    to blame) otherwise."""
    k = 7 + n_extra  # input count of the shortest implicit-padding form
    if count == k or (count > k and type_at(k) == T.BOOL):
        pads, sw, first_extra = (3,), 4, 6
        explicit = False
    elif count >= k + 3 and type_at(k) == T.INT32:
        pads, sw, first_extra = (3, 4, 5, 6), 7, 9
        explicit = True
    elif count > k:
        wanted = "BOOL (layout flag)" + (" or INT32 (explicit padding's stride)" if count >= k + 3 else "")
        raise LayoutError(f"must be {wanted} with {count} inputs, got {type_at(k).name}", k)
    else:
        raise LayoutError(f"{count} inputs match neither the implicit nor the explicit padding signature")
    act = first_extra + n_extra
    rest = count - act - 1
    allowed = (1,) if layout_required else ((0, 1, 3) if dilation else (0, 1))
    if rest not in allowed:
        if rest == 2 and dilation:
            raise LayoutError("gives one dilation factor; both width and height factors are required")
        counts = sorted(act + 1 + r for r in allowed)
        form = "explicit" if explicit else "implicit"
        raise LayoutError(f"the {form} padding signature takes {' or '.join(map(str, counts))} inputs, got {count}")
    return ArgLayout(
        explicit,
        pads,
        sw,
        sw + 1,
        tuple(range(first_extra, act)),
        act,
        act + 1 if rest >= 1 else None,
        (act + 2, act + 3) if rest == 3 else None,
    )


def view_layout(v: OpView, n_extra: int = 0, **kw) -> ArgLayout:
    try:
        return parse_layout(len(v.inputs), v.input_type, n_extra, **kw)
    except LayoutError as e:
        v.fail(str(e), input=e.input)


def ctx_layout(ctx: OpContext, n_extra: int = 0, **kw) -> ArgLayout:
    try:
        return parse_layout(len(ctx.in_operands), lambda i: ctx.in_operands[i].type, n_extra, **kw)
    except LayoutError as e:
        ctx.fail(str(e) if e.input is None else f"input {e.input} {e}")


# ---------------------------------------------------------------------------------------
# Validation helpers
# ---------------------------------------------------------------------------------------


def known_dim(op: Operand, axis: int) -> int:
    """Size of ``axis`` when the rank and that dimension are known, else 0."""
    return op.dimensions[axis] if len(op.dimensions) > axis else 0


def validate_tensor_types(v: OpView, filter_channel_dim: int | None) -> None:
    """Input/filter/bias/output types and quantisation rules of the convolution family.
    ``filter_channel_dim``: the per-channel filter's required channel dim (None: per-channel
    filters are not allowed)."""
    inp, flt, bias = v.inputs[0], v.inputs[1], v.inputs[2]
    if inp.type not in TYPES:
        v.fail(f"must be {' or '.join(t.name for t in TYPES)}, got {inp.type.name}", input=0)
    quant = inp.type in QUANT_TYPES
    allowed_filter = (inp.type, PER_CHANNEL) if quant and filter_channel_dim is not None else (inp.type,)
    v.expect_types([None, allowed_filter, T.TENSOR_INT32 if quant else inp.type], [inp.type])
    for i in (0, 1):
        v.expect_rank(i, (4,))
    v.expect_rank(2, (1,))
    v.expect_rank(0, (4,), output=True)
    if not quant:
        return
    if flt.type == PER_CHANNEL:
        cq = flt.channel_quant
        if cq is None:
            v.fail("a TENSOR_QUANT8_SYMM_PER_CHANNEL filter needs per-channel scales", input=1)
        if cq.channel_dim != filter_channel_dim:
            v.fail(
                f"per-channel quantisation must be along dimension {filter_channel_dim}, got {cq.channel_dim}", input=1
            )
        n = known_dim(flt, filter_channel_dim)
        if n and len(cq.scales) != n:
            v.fail(f"has {len(cq.scales)} channel scales for {n} channels", input=1)
        if any(not s > 0 for s in cq.scales):
            v.fail("channel scales must be positive", input=1)
    else:
        check_bias_scale(v, inp, flt, bias)


def check_bias_scale(v: OpView, inp: Operand, flt: Operand, bias: Operand) -> None:
    product = product_scale(inp.scale, flt.scale)
    if not bias_scale_ok(product, bias.scale):
        v.fail(f"bias scale {bias.scale:g} must equal input scale x filter scale = {product:g}", input=2)


def validate_scalars(v: OpView, lay: ArgLayout) -> None:
    """Types and (when constant) ranges of the scalar arguments."""
    for i in lay.int_inputs:
        if v.input_type(i) != T.INT32:
            v.fail(f"must be INT32, got {v.input_type(i).name}", input=i)
    if lay.layout is not None and v.input_type(lay.layout) != T.BOOL:
        v.fail(f"(layout flag) must be BOOL, got {v.input_type(lay.layout).name}", input=lay.layout)
    if lay.explicit:
        for i in lay.padding:
            _expect_min(v, i, 0, "explicit padding")
    else:
        v.expect_scalar_in(lay.padding[0], (PADDING_SAME, PADDING_VALID), "padding scheme")
    for i in (lay.stride_w, lay.stride_h, *(lay.dilation or ())):
        _expect_min(v, i, 1, "stride" if i in (lay.stride_w, lay.stride_h) else "dilation factor")
    v.expect_scalar_in(lay.activation, activation.FUSED_ACTIVATIONS, "fused activation")


def _expect_min(v: OpView, i: int, lo: int, what: str) -> None:
    val = v.constant_scalar(i)
    if val is not None and val < lo:
        v.fail(f"{what} must be >= {lo}, got {val}", input=i)


# ---------------------------------------------------------------------------------------
# Run-time parameters
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConvParams(WindowPairs):
    pad_top: int
    pad_bottom: int
    pad_left: int
    pad_right: int
    stride_h: int
    stride_w: int
    dil_h: int
    dil_w: int
    activation: int
    nchw: bool
    extra: tuple[int, ...]

    @property
    def dilations(self) -> tuple[int, int]:
        return self.dil_h, self.dil_w

    @property
    def unpadded(self) -> bool:
        return not (self.pad_top or self.pad_bottom or self.pad_left or self.pad_right)

    def pointwise(self, fh: int, fw: int) -> bool:
        """A 1x1 filter at stride 1 without padding: each input pixel is its own patch."""
        return fh == fw == 1 and self.stride_h == self.stride_w == 1 and self.unpadded


def ctx_params(ctx: OpContext, lay: ArgLayout) -> ConvParams:
    """Scalar arguments with implicit padding resolved against the input and filter sizes
    (filter is [*, height, width, *] for every op of the family but TRANSPOSE_CONV_2D)."""
    nchw = bool(ctx.scalar(lay.layout)) if lay.layout is not None else False
    sw, sh = ctx.scalar(lay.stride_w), ctx.scalar(lay.stride_h)
    dw, dh = (ctx.scalar(lay.dilation[0]), ctx.scalar(lay.dilation[1])) if lay.dilation else (1, 1)
    act = ctx.scalar(lay.activation)
    if sw < 1 or sh < 1:
        ctx.fail(f"strides must be positive, got ({sw}, {sh})")
    if dw < 1 or dh < 1:
        ctx.fail(f"dilation factors must be positive, got ({dw}, {dh})")
    if act not in activation.FUSED_ACTIVATIONS:
        ctx.fail(f"fused activation must be 0..3, got {act}")
    if lay.explicit:
        pl, pr, pt, pb = (ctx.scalar(i) for i in lay.padding)
        if min(pl, pr, pt, pb) < 0:
            ctx.fail(f"explicit padding must be >= 0, got {[pl, pr, pt, pb]}")
    else:
        scheme = ctx.scalar(lay.padding[0])
        if scheme not in (PADDING_SAME, PADDING_VALID):
            ctx.fail(f"padding scheme must be 1 (SAME) or 2 (VALID), got {scheme}")
        x, f = ctx.in_operands[0], ctx.in_operands[1]
        if x.rank != 4 or f.rank != 4:
            ctx.fail(f"input and filter must be rank 4, got {x.rank} and {f.rank}")
        h, w = (x.dimensions[2], x.dimensions[3]) if nchw else (x.dimensions[1], x.dimensions[2])
        pl, pr = explicit_padding(w, sw, f.dimensions[2], scheme, dw)
        pt, pb = explicit_padding(h, sh, f.dimensions[1], scheme, dh)
    return ConvParams(pt, pb, pl, pr, sh, sw, dh, dw, act, nchw, tuple(ctx.scalar(i) for i in lay.extra))


def planned_params(ctx: OpContext, n_extra: int = 0, **layout_kw) -> ConvParams:
    """ctx_params(ctx, ctx_layout(ctx, ...)), parsed once per model and input shape when every
    scalar argument is a model constant (a MobileNet's small convolutions spent ~15-20 us a
    call on it); otherwise parsed each run, as a runtime scalar may change."""

    def parse() -> ConvParams:
        return ctx_params(ctx, ctx_layout(ctx, n_extra, **layout_kw))

    known = ctx.constant_scalars or ()
    if len(known) <= 3 or any(v is None for v in known[3:]):
        return parse()
    # the parameters read only the scalars and the input and filter dimensions
    return ctx.remember(("conv params", ctx.in_operands[0].dimensions, ctx.in_operands[1].dimensions), parse)


def check_shapes(ctx: OpContext, x: np.ndarray, fh: int, fw: int, p: ConvParams) -> tuple[int, int]:
    """The reference's prepare() checks shared by CONV_2D, DEPTHWISE and GROUPED; returns the
    output height and width.  ``x`` is NHWC."""
    _, h, w, c = x.shape
    if h <= 0 or w <= 0 or c <= 0:
        ctx.fail(f"input height, width and depth must be positive (only the batch may be 0), got {list(x.shape)}")
    eh, ew = (fh - 1) * p.dil_h + 1, (fw - 1) * p.dil_w + 1
    if not (eh > p.pad_top and eh > p.pad_bottom and ew > p.pad_left and ew > p.pad_right):
        ctx.fail(
            f"padding {[p.pad_left, p.pad_right, p.pad_top, p.pad_bottom]} must be smaller than the "
            f"(dilated) filter size {ew}x{eh}"
        )
    oh = output_size(h, fh, p.stride_h, p.pad_top, p.pad_bottom, p.dil_h)
    ow = output_size(w, fw, p.stride_w, p.pad_left, p.pad_right, p.dil_w)
    if oh <= 0 or ow <= 0:
        ctx.fail(f"output would be {oh}x{ow}: the filter does not fit the padded input")
    return oh, ow


# ---------------------------------------------------------------------------------------
# Arithmetic
# ---------------------------------------------------------------------------------------


def padded(x: np.ndarray, p: ConvParams) -> np.ndarray:
    """NHWC ``x`` with zero padding (callers subtract the zero point first)."""
    if p.pad_top or p.pad_bottom or p.pad_left or p.pad_right:
        return np.pad(x, ((0, 0), (p.pad_top, p.pad_bottom), (p.pad_left, p.pad_right), (0, 0)))
    return x


def padded_offsets(x: np.ndarray, p: ConvParams, zero_point: int, dtype) -> np.ndarray:
    """NHWC ``x - zero_point`` in ``dtype`` (exact: small integers, or float32 widening)
    surrounded by zeros: the same values as ``padded(offsets_as(x, zero_point, dtype), p)``
    in one pass over a fresh buffer."""
    n, h, w, c = x.shape
    xp = np.empty((n, h + p.pad_top + p.pad_bottom, w + p.pad_left + p.pad_right, c), dtype)
    if p.pad_top:
        xp[:, : p.pad_top] = 0
    if p.pad_bottom:
        xp[:, p.pad_top + h :] = 0
    if p.pad_left:
        xp[:, p.pad_top : p.pad_top + h, : p.pad_left] = 0
    if p.pad_right:
        xp[:, p.pad_top : p.pad_top + h, p.pad_left + w :] = 0
    inner = xp[:, p.pad_top : p.pad_top + h, p.pad_left : p.pad_left + w]
    if zero_point:
        np.subtract(x, dtype(zero_point), out=inner, dtype=dtype, casting="unsafe")
    else:
        inner[...] = x
    return xp


def tap(xp: np.ndarray, i: int, j: int, oh: int, ow: int, p: ConvParams) -> np.ndarray:
    """Strided view [N, OH, OW, C] of padded NHWC ``xp`` seen by filter tap (i, j)."""
    r0, c0 = i * p.dil_h, j * p.dil_w
    return xp[:, r0 : r0 + (oh - 1) * p.stride_h + 1 : p.stride_h, c0 : c0 + (ow - 1) * p.stride_w + 1 : p.stride_w, :]


def im2col(x: np.ndarray, fh: int, fw: int, oh: int, ow: int, p: ConvParams) -> np.ndarray:
    """Patches as a contiguous [N, OH, OW, fh, fw, C] array (C innermost, like the filters)."""
    return im2col_padded(padded(x, p), fh, fw, oh, ow, p)


def im2col_padded(xp: np.ndarray, fh: int, fw: int, oh: int, ow: int, p: ConvParams) -> np.ndarray:
    """im2col of an input already padded as ``p`` says."""
    if fh == fw == 1 and p.stride_h == p.stride_w == 1 and xp.shape[1:3] == (oh, ow) and xp.flags.c_contiguous:
        # a pointwise convolution (most of a MobileNet-style model's CONV_2D): every pixel is
        # its own patch, so the input already is the patch matrix; no copy
        return xp.reshape(xp.shape[0], oh, ow, 1, 1, xp.shape[3])
    # The read-only view [N, OH, OW, fh, fw, C] of every output pixel's taps, straight from
    # the strides (sliding_window_view builds the same view through ~100 us of Python), then
    # one copy.  Tap (i, j) of output (y, x) is xp[:, y*sh + i*dh, x*sw + j*dw, :].
    n, hp, wp, c = xp.shape
    if (oh - 1) * p.stride_h + (fh - 1) * p.dil_h >= hp or (ow - 1) * p.stride_w + (fw - 1) * p.dil_w >= wp:
        raise ValueError(f"im2col: {fh}x{fw} taps of a {oh}x{ow} output run past the padded {hp}x{wp} input")
    s0, s1, s2, s3 = xp.strides
    win = as_strided(
        xp,
        shape=(n, oh, ow, fh, fw, c),
        strides=(s0, s1 * p.stride_h, s2 * p.stride_w, s1 * p.dil_h, s2 * p.dil_w, s3),
        writeable=False,
    )
    return np.ascontiguousarray(win)


def conv_patches(
    x: np.ndarray, p: ConvParams, zero_point: int, dtype, fh: int, fw: int, oh: int, ow: int
) -> np.ndarray:
    """The patch matrix [N, OH, OW, fh, fw, C] of NHWC ``x - zero_point`` in ``dtype`` with
    ``p``'s zero padding.  A pointwise convolution's is the input itself.  Otherwise, with the
    compiled kernels, one compiled pass makes it from the unpadded input: numpy's strided copy
    runs an inner loop C values long, ~100 us for a 3-channel image's first convolution
    (MobileNet's 64x64x3), as much as the rest of the operation."""
    if not p.pointwise(fh, fw) and jit.worth(x.shape[0] * oh * ow * fh * fw * x.shape[3], at=1):
        src = x if x.dtype == dtype and not zero_point else offsets_as(x, zero_point, dtype)
        return jit.im2col(src, fh, fw, oh, ow, p.stride_h, p.stride_w, p.dil_h, p.dil_w, p.pad_top, p.pad_left)
    if p.unpadded and x.dtype == dtype and not zero_point:
        xp = np.ascontiguousarray(x)
    else:
        xp = padded_offsets(x, p, zero_point, dtype)
    return im2col_padded(xp, fh, fw, oh, ow, p)


def input_bound(ctx: OpContext, i: int, zero_point: int) -> int:
    """offset_bound of input ``i``: a model constant's (a filter) once per model."""
    return ctx.remember_of_constant(i, ("offset bound", i, zero_point), lambda: offset_bound(ctx.inputs[i], zero_point))


# The stored range of the quantised input types, by storage dtype (np.iinfo builds an
# object per call: ~4 us, paid by every quantised convolution).
_RANGE_OF_DTYPE = {TYPE_INFO[t].dtype: QUANT_RANGE[t] for t in QUANT_TYPES}


def offset_bound(values: np.ndarray, zero_point: int) -> int:
    """max |value - zero_point| over ``values`` (0 when empty)."""
    if values.size == 0:
        return 0
    return max(abs(int(values.max()) - zero_point), abs(int(values.min()) - zero_point))


def bound_and_dtype(x: np.ndarray, zero_point: int, k: int, other: int) -> tuple[int, type]:
    """(a bound on |x - zero_point|, exact_float_dtype(k, that bound, other)).  From x's 8-bit
    storage type when that bound already allows float32 (a 1x1 convolution of up to 258
    channels, any 3x3 depthwise): no scan of x, which cost ~10-20 us of a small operation.
    Otherwise from x's values, which may still allow float32.  A bound only picks a path;
    every path gives the same bits."""
    typed = typed_float32_bound(x.dtype, zero_point, k, other)
    if typed is not None:
        return typed, np.float32
    amax = offset_bound(x, zero_point)
    return amax, exact_float_dtype(k, amax, other)


def typed_float32_bound(dtype, zero_point: int, k: int, other: int) -> int | None:
    """bound_and_dtype's bound from the 8-bit storage type alone, when it allows float32
    sums (known from the model: a plan-time kernel's case); else None."""
    lohi = _RANGE_OF_DTYPE.get(dtype)
    if lohi is not None:
        typed = max(zero_point - lohi[0], lohi[1] - zero_point)
        if k * typed * other < 1 << 24:
            return typed
    return None


def static_setup(v: OpView, checks: Callable, n_extra: int = 0) -> tuple | None:
    """For a convolution's plan-time kernel: (static context, parameters, the input NHWC,
    output height, output width, quantised) from the model alone, after the operation's own
    run-time ``checks(ctx, params)``.  None unless the convolution is float32 throughout or
    has an 8-bit input, with a constant filter and bias and one output; and None when the
    checks need a run (or NCHW) or would fail it (execute then fails with its own message)."""
    x_op, f_op, b_op = v.inputs[:3]
    float32 = all(o.type == T.TENSOR_FLOAT32 for o in (x_op, f_op, b_op, v.outputs[0]))
    if not (float32 or x_op.type in QUANT_TYPES) or not (f_op.is_constant and b_op.is_constant) or len(v.outputs) != 1:
        return None
    ctx = v.static_context()
    if ctx is None:
        return None
    try:
        p = planned_params(ctx, n_extra=n_extra)
        if p.nchw:
            return None
        _, x, oh, ow = checks(ctx, p)
    except OpFailure:
        return None
    return (ctx, p, x, oh, ow, not float32) if x.shape[0] else None


def prepared_quant(ctx: OpContext, k: int, n_out: int) -> tuple | None:
    """For a quantised convolution's plan-time kernel, what execute derives from the model
    each run: (input zero point, the filter's offsets in float32 (read-only), the output
    multipliers and shifts, the accumulators' bound); None when the storage type does not
    bound the sums within float32 (execute then scans the input) or the multipliers fail."""
    x_op, f_op = ctx.in_operands[0], ctx.in_operands[1]
    xz, fz = x_op.zero_point, filter_zero_point(f_op)
    bmax = offset_bound(ctx.inputs[1], fz)
    amax = typed_float32_bound(x_op.info.dtype, xz, k, bmax)
    if amax is None:
        return None
    try:
        mult, shift = output_multipliers(ctx, x_op, f_op, ctx.in_operands[2], ctx.out_operands[0], n_out)
    except OpFailure:
        return None
    offsets = offsets_as(ctx.inputs[1], fz, np.float32)
    offsets.setflags(write=False)
    return xz, offsets, mult, shift, k * amax * bmax


def exact_float_dtype(k: int, amax: int, bmax: int) -> type:
    """float32 when every k-term integer dot product of values bounded by ``amax`` and
    ``bmax`` stays below 2**24 in magnitude (so every partial sum is exact), else float64
    (exact below 2**53)."""
    bound = k * amax * bmax
    if bound >= 1 << 53:
        raise OverflowError(f"integer accumulation bound {bound} exceeds float64's exact range")
    return np.float32 if bound < (1 << 24) else np.float64


def offsets_as(values: np.ndarray, zero_point: int, dtype) -> np.ndarray:
    """``values - zero_point`` in ``dtype`` (exact: small integers)."""
    out = values.astype(dtype)
    if zero_point:
        out -= dtype(zero_point)
    return out


# Offsets of constant filters/weights, reused across executions: converting FULLY_CONNECTED's
# weights alone costs more than its matmul.  Keyed by id() of the model's read-only constant
# array; the weak reference both confirms that the id still names the same array and drops
# the entry when the model goes away.
_OFFSET_CACHE: dict[int, tuple] = {}
_OFFSET_CACHE_SIZE = 32


def constant_offsets(ctx: OpContext, i: int, zero_point: int, dtype) -> tuple[np.ndarray, int]:
    """(input ``i`` - ``zero_point`` in ``dtype``, max |offset|), cached for constants.  Only
    model constants (read-only arrays) are cached: a runtime input may change between runs."""
    values = ctx.inputs[i]
    cacheable = ctx.in_operands[i].is_constant and not values.flags.writeable
    key = id(values)
    if cacheable:
        hit = _OFFSET_CACHE.get(key)
        if hit is not None and hit[0]() is values and hit[1] == zero_point and hit[2] == dtype:
            return hit[3], hit[4]
    off, bound = offsets_as(values, zero_point, dtype), offset_bound(values, zero_point)
    if cacheable:
        off.setflags(write=False)
        while len(_OFFSET_CACHE) >= _OFFSET_CACHE_SIZE:
            _OFFSET_CACHE.pop(next(iter(_OFFSET_CACHE)))

        def forget(ref, key=key):
            if _OFFSET_CACHE.get(key, (None,))[0] is ref:
                _OFFSET_CACHE.pop(key, None)

        _OFFSET_CACHE[key] = (weakref.ref(values, forget), zero_point, dtype, off, bound)
    return off, bound


def exact_matmul(a: np.ndarray, b: np.ndarray, amax: int, bmax: int) -> np.ndarray:
    """a [M, K] @ b[N, K].T for float32 arrays of integers bounded by ``amax`` and ``bmax``,
    exactly: one float32 matmul when every partial sum stays within 2**24, else float32
    matmuls over slices of K short enough for that, summed in float64 (exact below 2**53)."""
    k = a.shape[1]
    per = amax * bmax
    if a.shape[0] == 1:
        # one row (a classifier's FULLY_CONNECTED): a matrix-vector product, about twice as
        # fast as the 1-row matrix product; the sums are exact, so the order does not matter
        def mm(x, y):
            return (y @ x[0])[None, :]
    else:

        def mm(x, y):
            return x @ y.T

    if k * per <= (1 << 24):  # every integer up to 2**24 is a float32
        return mm(a, b)
    if k * per >= (1 << 53):
        raise OverflowError(f"integer accumulation bound {k * per} exceeds float64's exact range")
    chunks = -(-k * per // ((1 << 24) - 1))  # ceil: slices of about equal length
    step = -(-k // chunks)
    while step * per > (1 << 24):
        chunks += 1
        step = -(-k // chunks)
    acc = np.zeros((a.shape[0], b.shape[0]), np.float64)
    for k0 in range(0, k, step):
        acc += mm(a[:, k0 : k0 + step], b[:, k0 : k0 + step])
    return acc


def filter_zero_point(op: Operand) -> int:
    return 0 if op.type == PER_CHANNEL else op.zero_point


def grouped_matmul_conv(cols: np.ndarray, wmat: np.ndarray, groups: int = 1) -> np.ndarray:
    """cols [N, OH, OW, fh, fw, C], filters [O, fh, fw, C/groups] -> [N, OH, OW, O]."""
    n, oh, ow, fh, fw, c = cols.shape
    o = wmat.shape[0]
    if groups == 1:
        return (cols.reshape(-1, fh * fw * c) @ wmat.reshape(o, -1).T).reshape(n, oh, ow, o)
    cg, og = c // groups, o // groups
    out = np.empty((n * oh * ow, o), dtype=np.result_type(cols, wmat))
    for g in range(groups):
        a = cols[..., g * cg : (g + 1) * cg].reshape(-1, fh * fw * cg)
        out[:, g * og : (g + 1) * og] = a @ wmat[g * og : (g + 1) * og].reshape(og, -1).T
    return out.reshape(n, oh, ow, o)


def product_scale(input_scale: float, filter_scale: float) -> float:
    # The reference multiplies the two float scales in single precision before widening.
    return float(np.float32(input_scale) * np.float32(filter_scale))


def bias_scale_ok(product: float, bias_scale: float) -> bool:
    """GetQuantizedConvolutionMultipler's rule: bias scale within 1e-6 (relative) of
    input_scale * filter_scale."""
    return (
        abs(product - float(np.float32(bias_scale))) <= 1e-6 * min(product, float(np.float32(bias_scale)))
        and product >= 0
    )


def output_multipliers(
    ctx: OpContext, inp: Operand, flt: Operand, bias: Operand, out: Operand, n_out: int
) -> tuple[np.ndarray, np.ndarray]:
    """(multiplier, shift) per output channel (arrays of length ``n_out``; shift > 0 is left;
    read-only: they are cached per quantisation parameters, as a model asks each run; and
    per model step, which skips even the cache's key of per-channel scales)."""
    # a step's per-channel filter scales never change; its other scales are in the key in
    # case an operation asks for more than one set
    key = ("output multipliers", n_out, inp.scale, flt.type, flt.scale, bias.scale, out.scale)
    return ctx.remember(key, lambda: _multipliers_of(ctx, inp, flt, bias, out, n_out))


def _multipliers_of(
    ctx: OpContext, inp: Operand, flt: Operand, bias: Operand, out: Operand, n_out: int
) -> tuple[np.ndarray, np.ndarray]:
    scales = tuple(flt.channel_quant.scales) if flt.type == PER_CHANNEL and flt.channel_quant is not None else None
    result = _output_multipliers(
        float(inp.scale), flt.type == PER_CHANNEL, float(flt.scale), scales, float(bias.scale), float(out.scale), n_out
    )
    if isinstance(result, str):
        ctx.fail(result)
    return result


@functools.lru_cache(maxsize=512)
def _output_multipliers(
    inp_scale: float,
    per_channel: bool,
    flt_scale: float,
    channel_scales,
    bias_scale: float,
    out_scale_raw: float,
    n_out: int,
):
    """output_multipliers' arithmetic: the arrays, or the reason the execution fails."""
    out_scale = float(np.float32(out_scale_raw))
    if out_scale <= 0:
        return f"output scale must be positive, got {out_scale_raw}"
    if per_channel:
        if channel_scales is None or len(channel_scales) != n_out:
            return f"per-channel filter needs {n_out} channel scales"
        products = [product_scale(inp_scale, s) for s in channel_scales]
    else:
        product = product_scale(inp_scale, flt_scale)
        if not bias_scale_ok(product, bias_scale):
            return f"bias scale {bias_scale:g} differs from input scale x filter scale = {product:g}"
        products = [product]
    pairs = [quantize_multiplier(pr / out_scale) for pr in products]
    mult = np.array([m for m, _ in pairs], dtype=np.int64)
    shift = np.array([s for _, s in pairs], dtype=np.int64)
    if len(pairs) == 1 and n_out != 1:
        mult, shift = np.repeat(mult, n_out), np.repeat(shift, n_out)
    mult.setflags(write=False)
    shift.setflags(write=False)
    return mult, shift


def requantize(
    acc: np.ndarray,
    bias: np.ndarray,
    mult: np.ndarray,
    shift: np.ndarray,
    out: Operand,
    act: int,
    acc_bound: int | None = None,
) -> np.ndarray:
    """Accumulators [..., channels] (integers held in any int or float dtype) + bias -> stored
    output values of ``out``.  ``acc_bound`` (optional) bounds |acc|; it lets the fused path
    below prove that its int64 intermediates cannot overflow without scanning ``acc``."""
    lo, hi = activation.quant_bounds(act, out)
    if acc.size:
        if acc_bound is None:
            acc_bound = max(abs(int(acc.max())), abs(int(acc.min())))
        fused = _fused_for(int(acc_bound), bias, mult, shift, out.zero_point)
        if fused is not None:
            return fused(acc, bias, lo, hi, out.info.dtype)
    scaled = acc.astype(np.int64) + bias.astype(np.int64)
    if np.all(mult == mult[0]) and np.all(shift == shift[0]):
        scaled = multiply_by_quantized_multiplier(scaled, int(mult[0]), int(shift[0]))
    else:
        scaled = multiply_by_quantized_multiplier(scaled, mult, shift)
    return np.clip(scaled + out.zero_point, lo, hi).astype(out.info.dtype)


# Elements per block of the fused requantisation: its two int64 work buffers stay in cache.
_REQUANT_BLOCK = 16384
# Built requantisers by (accumulator bound, bias, multipliers, shifts, zero point): building
# one costs more than running it on a classifier's 1,000 outputs.
_FUSED_CACHE: dict = {}
# The same requantisers by the identity of read-only bias/multiplier/shift arrays (a model's
# constant bias, output_multipliers' cached arrays): the content key above hashes ~20 KB for
# 1,000 per-channel values (~10 us a call), the identity key nothing.  Each entry holds the
# arrays themselves, so their ids cannot be reused while it lives.
_FUSED_BY_ID: dict = {}


def _fused_for(acc_bound: int, bias: np.ndarray, mult, shift, zero_point: int):
    """The cached fused requantiser (or None: take the step-by-step path)."""
    stable = all(type(a) is np.ndarray and not a.flags.writeable for a in (bias, mult, shift))
    if stable:
        id_key = (acc_bound, id(bias), id(mult), id(shift), zero_point)
        hit = _FUSED_BY_ID.get(id_key)
        if hit is not None and hit[0] is bias and hit[1] is mult and hit[2] is shift:
            return hit[3]
    key = (
        acc_bound,
        bias.dtype.str,
        bias.tobytes(),
        np.asarray(mult).dtype.str,
        np.asarray(mult).tobytes(),
        np.asarray(shift).dtype.str,
        np.asarray(shift).tobytes(),
        zero_point,
    )
    fused = _FUSED_CACHE.get(key, False)
    if fused is False:
        fused = _fused_requantizer(acc_bound, bias, mult, shift, zero_point)
        if len(_FUSED_CACHE) >= 256:
            _FUSED_CACHE.pop(next(iter(_FUSED_CACHE)), None)  # None: another thread may have evicted it
        _FUSED_CACHE[key] = fused
    if stable:
        if len(_FUSED_BY_ID) >= 256:
            _FUSED_BY_ID.pop(next(iter(_FUSED_BY_ID)), None)
        _FUSED_BY_ID[id_key] = (bias, mult, shift, fused)
    return fused


def _fused_requantizer(acc_bound: int, bias: np.ndarray, mult: np.ndarray, shift: np.ndarray, zero_point: int):
    """A function computing, for every accumulator x (bias added), exactly
    clip(RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x << left, m), e) + zp) in a
    handful of in-place int64 passes over cache-sized blocks; None when its intermediates
    could leave int64 (the caller then takes the step-by-step path).

    Why it is exact, with y = (x << left) * m:
      - SaturatingRoundingDoublingHighMul is floor((y + 2**30) / 2**31) for every sign: its
        nudge 1 - 2**30 and truncation toward zero for y < 0 come to the same floor (the
        saturating case needs m == INT32_MIN; multipliers are below 2**31).
      - RoundingDivideByPOT(h, e > 0) rounds half away from zero:
        floor((h + 2**(e-1) - [h < 0]) / 2**e), and h < 0 exactly when y + 2**30 < 0.
      - Nested floors of divisions by positive integers merge, and adding the integer zp
        inside a floor adds it outside, so the result plus zp is
        floor((y + 2**30 - 2**31 [y + 2**30 < 0] + 2**(30+e) + zp * 2**(31+e)) / 2**(31+e))
        (for e == 0: floor((y + 2**30 + zp * 2**31) / 2**31), no sign term)."""
    mult = np.asarray(mult, dtype=np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    if mult.size == 0 or int(mult.min()) < 0:
        return None
    left, e = np.maximum(shift, 0), np.maximum(-shift, 0)
    limit = 1 << 61
    bias_max = max(abs(int(bias.max())), abs(int(bias.min()))) if bias.size else 0
    x_bound = (acc_bound + bias_max) << int(left.max())
    if x_bound * int(mult.max()) >= limit or (abs(zero_point) + 1) << (31 + int(e.max())) >= limit:
        return None
    per_tensor = bool(np.all(mult == mult[0]) and np.all(shift == shift[0]))
    if per_tensor:
        m, lshift, ee = int(mult[0]), int(left[0]), int(e[0])
        offset = (1 << (30 + ee) if ee else 0) + (zero_point << (31 + ee))
        rshift = 31 + ee
        sign_mask = -(1 << 31) if ee else 0
    else:
        m, lshift = mult, (left if int(left.max()) else 0)
        offset = np.where(e > 0, np.int64(1) << (30 + e), 0) + (np.int64(zero_point) << (31 + e))
        rshift = 31 + e
        sign_mask = np.where(e > 0, np.int64(-(1 << 31)), np.int64(0))
    has_sign_term, has_left = bool(np.any(e)), bool(np.any(left))
    offset_with_nudge = offset + (1 << 30)
    m_eff = mult << left  # (x << left) * m == x * (m << left): one pass fewer

    def run_flat(acc: np.ndarray, bias: np.ndarray, lo: int, hi: int, dtype, xdtype) -> np.ndarray:
        """The same formula over flat blocks of whole rows, every per-channel value tiled to
        the block's length (numpy's inner loops then run over the whole block, not over C
        channels), with numpy's slow loops avoided: the bias is added in the accumulators'
        float dtype, or in float64 when that is needed (exact: |acc| + |bias| is within
        ``xdtype``'s integer range, checked by the caller) instead of a mixed float + int64
        addition, float32 widens through int32,
        the left shift is folded into the multiplier, and the clamp runs on int32 against
        arrays (numpy has no fast int64 min/max without AVX-512, nor against a scalar)."""
        channels = acc.shape[-1]
        flat = np.ascontiguousarray(acc).reshape(-1)
        result = np.empty(acc.shape, dtype=dtype)
        rflat = result.reshape(-1)
        rows = max(1, _REQUANT_BLOCK // max(channels, 1))
        length = min(rows * channels, flat.size)
        reps = -(-length // channels)

        def tile(v):
            return np.tile(np.asarray(v, dtype=np.int64), reps)[:length] if np.ndim(v) else v

        bias_t = np.tile(bias.astype(xdtype), reps)[:length]
        m_t, off_t, rs_t = tile(int(m_eff[0]) if per_tensor else m_eff), tile(offset), tile(rshift)
        sign_t = tile(sign_mask)
        lo_t, hi_t = np.full(length, lo, np.int32), np.full(length, hi, np.int32)
        xbuf = np.empty(length, xdtype)
        u = np.empty(length, np.int64)
        t = np.empty(length, np.int64) if has_sign_term else None
        i32 = np.empty(length, np.int32)
        via_i32 = xdtype == np.float32  # |x| <= 2**24: exact in int32

        def part(v, k):
            return v[:k] if np.ndim(v) else v

        for start in range(0, flat.size, length):
            k = min(length, flat.size - start)
            x, uu, v = xbuf[:k], u[:k], i32[:k]
            np.add(flat[start : start + k], bias_t[:k], out=x)
            if via_i32:
                np.copyto(v, x, casting="unsafe")
                np.copyto(uu, v)
            else:
                np.copyto(uu, x, casting="unsafe")
            uu *= part(m_t, k)
            if t is not None:
                uu += 1 << 30
                tt = t[:k]
                np.right_shift(uu, 63, out=tt)
                tt &= part(sign_t, k)
                uu += tt
                uu += part(off_t, k)
            else:
                uu += part(off_t, k) + (1 << 30)
            np.right_shift(uu, part(rs_t, k), out=uu)
            np.copyto(v, uu, casting="unsafe")  # |result| < 2**30: x * m < 2**61 (checked)
            np.maximum(v, lo_t[:k], out=v)
            np.minimum(v, hi_t[:k], out=v)
            np.copyto(rflat[start : start + k], v, casting="unsafe")
        return result

    per_channel: dict = {}  # channel count -> the compiled path's parameter arrays

    def run(acc: np.ndarray, bias: np.ndarray, lo: int, hi: int, dtype) -> np.ndarray:
        if jit.worth(acc.size, at=1) and (acc.dtype.kind in "iu" or acc_bound + bias_max <= 1 << 53):
            channels = acc.shape[-1]
            params = per_channel.get(channels)
            if params is None:
                params = per_channel[channels] = jit.requant_params(channels, m_eff, offset, rshift, sign_mask)
            return jit.requantize(acc, bias, params, lo, hi, dtype, acc_bound < 1 << 31)
        # (below one block, the setup of the flat variant costs more than it saves)
        if acc.dtype in (np.float32, np.float64) and acc_bound + bias_max <= 1 << 53 and acc.size >= _REQUANT_BLOCK:
            # float32 sums whose bias would leave float32's integers add it in float64
            wide = acc.dtype == np.float64 or acc_bound + bias_max > 1 << 24
            return run_flat(acc, bias, lo, hi, dtype, np.float64 if wide else np.float32)
        channels = acc.shape[-1]
        a2 = acc.reshape(-1, channels)
        result = np.empty(acc.shape, dtype=dtype)
        r2 = result.reshape(a2.shape)
        rows = max(1, _REQUANT_BLOCK // max(channels, 1))
        ubuf = np.empty((min(rows, a2.shape[0]), channels), np.int64)
        tbuf = np.empty_like(ubuf) if has_sign_term else None
        b64 = bias.astype(np.int64)
        for start in range(0, a2.shape[0], rows):
            block = a2[start : start + rows]
            u = ubuf[: block.shape[0]]
            # float accumulators hold exact integers: the float64 sum with the bias is exact
            np.add(block, b64, out=u, casting="unsafe")
            if has_left:
                u <<= lshift
            u *= m
            if tbuf is not None:
                u += 1 << 30
                t = tbuf[: block.shape[0]]
                np.right_shift(u, 63, out=t)
                t &= sign_mask
                u += t
                u += offset
            else:
                u += offset_with_nudge
            u >>= rshift
            np.maximum(u, lo, out=u)  # the ufuncs: np.clip's wrapper costs more per block
            np.minimum(u, hi, out=u)
            r2[start : start + block.shape[0]] = u
        return result

    return run


# Values in a tiled bias row: numpy's broadcast of a [C] bias over [..., C] runs an inner
# loop C elements long, at half the speed of one over whole rows for C = 16..32 (a
# 96x96x32 output: 133 against 75 us).  Below _BIAS_TILED_FROM outputs the two cost the same.
_BIAS_ROW = 1024
_BIAS_TILED_FROM = 1 << 13


def bias_row(bias: np.ndarray, size: int) -> np.ndarray | None:
    """The bias [C] tiled over k pixels for an output of ``size`` elements (k dividing the
    pixel count), read-only, for ``add_bias_row``; None when the bias is better added per
    pixel (a small output, or C alone is a long enough row)."""
    c = bias.shape[0]
    if size < _BIAS_TILED_FROM or c >= _BIAS_ROW:
        return None
    pixels = size // c
    k = min(pixels, -(-_BIAS_ROW // c))
    while pixels % k:
        k -= 1
    row = np.tile(bias, k)
    row.setflags(write=False)
    return row


def add_bias_row(y: np.ndarray, bias: np.ndarray, row: np.ndarray | None) -> None:
    """``y += bias`` for a fresh float ``y`` [..., C] and ``bias`` [C], over rows of k pixels
    with the tiled ``row`` (``bias_row``; None: per pixel): each element gets the same one
    addition, but numpy's inner loop runs over k * C values instead of C (twice the speed
    for C = 16-32)."""
    if row is None or not y.flags.c_contiguous:
        y += bias
        return
    flat = y.reshape(-1, row.shape[0])
    flat += row


def to_float32(values: np.ndarray) -> np.ndarray:
    """fp16 operands compute in float32, as the reference converts them."""
    return half.widen(values)


def widened_constant(ctx: OpContext, i: int) -> np.ndarray:
    """Input ``i`` in float32: an fp16 model constant (weights, bias) converted once per
    model step, anything else as ``to_float32`` gives it.  Read only: shared between runs."""
    x = ctx.inputs[i]
    if x.dtype == np.float32:
        return x

    def build() -> np.ndarray:
        w = to_float32(x)
        w.setflags(write=False)
        return w

    return ctx.remember_of_constant(i, ("float32", i), build)


def finish_float(y: np.ndarray, act: int, out: Operand) -> np.ndarray:
    """The fused activation and the output type; ``y`` is the caller's fresh float result
    (every caller's is), clamped in place."""
    return half.narrow(activation.apply_float(y, act, in_place=y.flags.writeable), out.info.dtype)


def check_conv_types(ctx: OpContext) -> bool:
    """The reference's prepare() type rules; returns True for a quantised convolution."""
    x, f, b = ctx.in_operands[:3]
    if f.type == PER_CHANNEL:
        if x.type not in QUANT_TYPES:
            ctx.fail(f"a per-channel filter needs a quantised input, got {x.type.name}")
    elif f.type != x.type:
        ctx.fail(f"filter type {f.type.name} differs from input type {x.type.name}")
    quant = x.type in QUANT_TYPES
    if b.type != (T.TENSOR_INT32 if quant else x.type):
        ctx.fail(f"bias type {b.type.name} does not fit input type {x.type.name}")
    if x.type not in TYPES:
        ctx.fail(f"input type {x.type.name} is not supported")
    return quant


def run_conv(ctx: OpContext, p: ConvParams, groups: int = 1) -> np.ndarray:
    """CONV_2D (groups == 1) and GROUPED_CONV_2D: filter [O, fh, fw, C/groups], bias [O]."""
    quant, x, oh, ow = conv_checks(ctx, p, groups)
    f, b = ctx.inputs[1], ctx.inputs[2]
    o, fh, fw, cf = f.shape
    n = x.shape[0]
    out = ctx.out_operands[0]
    if n == 0:
        return layout.from_nhwc(np.zeros((0, oh, ow, o), out.info.dtype), p.nchw)
    if not quant:
        bias, size = widened_constant(ctx, 2), n * oh * ow * o
        # the tiled bias: once per model step for a constant bias
        row = ctx.remember_of_constant(2, ("tiled bias", size), lambda: bias_row(bias, size))
        # (an fp16 input is widened once, not in each of the patch matrix's fh * fw copies)
        y = conv_float(to_float32(x), widened_constant(ctx, 1), bias, row, p, oh, ow, groups)
        return layout.from_nhwc(half.narrow(y, out.info.dtype), p.nchw)
    xo, fo = ctx.in_operands[0], ctx.in_operands[1]
    xz, fz = xo.zero_point, filter_zero_point(fo)
    bmax = input_bound(ctx, 1, fz)
    amax, dt = bound_and_dtype(x, xz, fh * fw * cf, bmax)
    mult, shift = output_multipliers(ctx, xo, fo, ctx.in_operands[2], out, o)
    acc_bound = fh * fw * cf * amax * bmax
    y = conv_quant(x, xz, constant_offsets(ctx, 1, fz, dt)[0], b, mult, shift, acc_bound, out, p, oh, ow, groups)
    return layout.from_nhwc(y, p.nchw)


def conv_float(
    x: np.ndarray,
    f: np.ndarray,
    bias: np.ndarray,
    row: np.ndarray | None,
    p: ConvParams,
    oh: int,
    ow: int,
    groups: int = 1,
) -> np.ndarray:
    """run_conv's float arithmetic, shared with CONV_2D's plan-time kernel: NHWC float32 ``x``,
    filter ``f``, ``bias`` and its tiled ``row`` (``bias_row``) -> the activated float32 output."""
    _, fh, fw, _ = f.shape
    y = grouped_matmul_conv(conv_patches(x, p, 0, np.float32, fh, fw, oh, ow), f, groups)
    add_bias_row(y, bias, row)
    return activation.apply_float(y, p.activation, in_place=y.flags.writeable)


def conv_quant(
    x: np.ndarray,
    xz: int,
    offsets: np.ndarray,
    bias: np.ndarray,
    mult: np.ndarray,
    shift: np.ndarray,
    acc_bound: int,
    out: Operand,
    p: ConvParams,
    oh: int,
    ow: int,
    groups: int = 1,
) -> np.ndarray:
    """run_conv's quantised arithmetic, shared with CONV_2D's plan-time kernel: NHWC 8-bit
    ``x`` less ``xz``, in the exact float dtype of the filter's ``offsets``, times them, then
    requantised into ``out``'s stored values."""
    _, fh, fw, _ = offsets.shape
    if int16_conv.usable(groups, acc_bound):  # the same integer sums, in int16 pairs
        acc = int16_conv.product(offsets_as(x, xz, np.int16), offsets, p, oh, ow)
    else:
        acc = grouped_matmul_conv(conv_patches(x, p, xz, offsets.dtype.type, fh, fw, oh, ow), offsets, groups)
    return requantize(acc, bias, mult, shift, out, p.activation, acc_bound=acc_bound)


def conv_checks(ctx: OpContext, p: ConvParams, groups: int) -> tuple[bool, np.ndarray, int, int]:
    """run_conv's run-time checks (the reference's prepare()): (quantised, the input NHWC,
    output height, output width).  A plan-time kernel runs them on the model's constants."""
    quant = check_conv_types(ctx)
    x, f, b = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    if x.ndim != 4 or f.ndim != 4 or b.ndim != 1:
        ctx.fail(f"input, filter and bias must be rank 4, 4 and 1, got {x.ndim}, {f.ndim}, {b.ndim}")
    x = layout.to_nhwc(x, p.nchw)
    o, fh, fw, cf = f.shape
    c = x.shape[3]
    if groups < 1:
        ctx.fail(f"number of groups must be positive, got {groups}")
    if cf * groups != c:
        ctx.fail(f"filter depth {cf} x {groups} group(s) does not match input depth {c}")
    if o % groups:
        ctx.fail(f"output depth {o} is not a multiple of the {groups} groups")
    if b.shape[0] != o:
        ctx.fail(f"bias has {b.shape[0]} values for {o} output channels")
    if o <= 0 or fh <= 0 or fw <= 0:
        ctx.fail(f"filter dimensions must be positive, got {list(f.shape)}")
    oh, ow = check_shapes(ctx, x, fh, fw, p)
    return quant, x, oh, ow
