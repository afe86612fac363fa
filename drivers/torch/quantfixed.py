"""Quantised operations on torch, bit for bit: gemmlowp's fixed-point requantisation in int64.

torch's own quantised kernels round differently from NNAPI (and its float path would be an
approximation), so the integer arithmetic of Android's CPU reference is rebuilt here from
int64 tensor operations:
- SaturatingRoundingDoublingHighMul: (a*b + nudge) / 2**31 truncated toward zero, nudge
  2**30 for a non-negative product and 1 - 2**30 for a negative one;
- RoundingDivideByPOT: a right shift rounding half away from zero;
- MultiplyByQuantizedMultiplier: a left shift for a positive exponent, then the two above.
Convolution and FULLY_CONNECTED accumulate offsets (value - zero point) in float64: every
product and partial sum is an integer far below 2**53, so the float64 sum is exact; the
accumulator is then an int64 tensor.  The multipliers come from the model's float32 scales
at conversion time (QuantizeMultiplier), as the reference computes them.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from nnconform.driver.support import Rejected, Unsupported
from nnconform.drivers.common.quant_rules import ADD_LEFT_SHIFT, add_sub_multipliers, f32, mul_multiplier
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import activation as nn_activation
from nnconform.reference.arith.quant import quantize_multiplier

_LOW31 = (1 << 31) - 1
_NEG_NUDGE = 1 - (1 << 31)  # masked onto negative products: nudge 1 - 2**30 instead of 2**30
INT32_MIN = -(1 << 31)
QUANT8 = (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
PER_CHANNEL = T.TENSOR_QUANT8_SYMM_PER_CHANNEL
TO_NCHW, TO_NHWC = (0, 3, 1, 2), (0, 2, 3, 1)


def srdhm(a: torch.Tensor, b) -> torch.Tensor:
    """SaturatingRoundingDoublingHighMul of int64 ``a`` (int32 values) by ``b`` (an int32
    multiplier, or an int64 tensor of them; never INT32_MIN, so no saturation case)."""
    ab = a * b
    ab = ab + ((ab >> 63) & _NEG_NUDGE) + (1 << 30)
    ab = ab + ((ab >> 63) & _LOW31)  # C++ division truncates toward zero
    return ab >> 31


def rounding_divide_by_pot(x: torch.Tensor, exponent) -> torch.Tensor:
    """x / 2**exponent rounded to nearest, ties away from zero (exponent >= 0)."""
    if isinstance(exponent, int):
        if exponent == 0:
            return x
        mask = (1 << exponent) - 1
    else:
        mask = (torch.ones_like(exponent) << exponent) - 1
    threshold = (mask >> 1) + (x < 0).long()
    return (x >> exponent) + ((x & mask) > threshold).long()


def multiply_by_quantized_multiplier(x: torch.Tensor, multiplier, shift) -> torch.Tensor:
    """TFLite MultiplyByQuantizedMultiplier; per-tensor (ints) or per-channel (tensors)."""
    if isinstance(shift, int):
        if shift > 0:
            x = x << shift
        return rounding_divide_by_pot(srdhm(x, multiplier), max(-shift, 0))
    left, right = torch.clamp(shift, min=0), torch.clamp(-shift, min=0)
    return rounding_divide_by_pot(srdhm(x << left, multiplier), right)


def _clamp_store(out, act: int):
    lo, hi = nn_activation.quant_bounds(act, out)
    dt = torch.uint8 if out.type == T.TENSOR_QUANT8_ASYMM else torch.int8
    return lambda acc: torch.clamp(acc + out.zero_point, lo, hi).to(dt)


# ---------------------------------------------------------------------------------------
# ADD, SUB, MUL
# ---------------------------------------------------------------------------------------


def arith_kernel(c, op: Op, act: int):
    in1, in2, out = c.ins[0], c.ins[1], c.outs[0]
    if in2.type != in1.type or out.type != in1.type:
        raise Unsupported("mixed quantised types")
    store = _clamp_store(out, act)
    z1, z2 = in1.zero_point, in2.zero_point
    if op == Op.MUL:
        m, shift = mul_multiplier(in1, in2, out)

        def mul(a, b, _act=None):
            prod = (a.long() - z1) * (b.long() - z2)
            return store(multiply_by_quantized_multiplier(prod, m, shift))

        return mul
    (m1, e1), (m2, e2), (mo, eo) = add_sub_multipliers(in1, in2, out, op == Op.SUB)

    def add(a, b, _act=None):
        x1 = (a.long() - z1) << ADD_LEFT_SHIFT
        x2 = (b.long() - z2) << ADD_LEFT_SHIFT
        total = multiply_by_quantized_multiplier(x1, m1, e1) + multiply_by_quantized_multiplier(x2, m2, e2)
        return store(multiply_by_quantized_multiplier(total, mo, eo))

    return add


# ---------------------------------------------------------------------------------------
# Convolutions and FULLY_CONNECTED
# ---------------------------------------------------------------------------------------


def _bias_scale_ok(product: float, bias_scale: float) -> bool:
    """The reference's rule: bias scale within 1e-6 (relative) of input_scale * filter_scale."""
    b = f32(bias_scale)
    return abs(product - b) <= 1e-6 * min(product, b) and product >= 0


def output_multipliers(x, f, bias, out, n_out: int, channel_dim: int):
    """(multiplier, shift) per output channel as int64 tensors, or ints when per tensor."""
    out_scale = f32(out.scale)
    if f.type == PER_CHANNEL:
        cq = f.channel_quant
        if cq is None or cq.channel_dim != channel_dim or len(cq.scales) != n_out:
            raise Unsupported("per-channel filter layout")
        products = [float(np.float32(x.scale) * np.float32(s)) for s in cq.scales]
    elif f.type == x.type:
        product = float(np.float32(x.scale) * np.float32(f.scale))
        if not _bias_scale_ok(product, bias.scale):
            raise Rejected(f"bias scale {bias.scale:g} differs from input scale x filter scale = {product:g}")
        m, s = quantize_multiplier(product / out_scale)
        return m, s
    else:
        raise Unsupported(f"filter of type {f.type.name}")
    pairs = [quantize_multiplier(p / out_scale) for p in products]
    return (
        torch.tensor([m for m, _ in pairs], dtype=torch.long),
        torch.tensor([s for _, s in pairs], dtype=torch.long),
    )


def _check_types(c):
    x, f, b, out = c.ins[0], c.ins[1], c.ins[2], c.outs[0]
    if out.type != x.type or b.type != T.TENSOR_INT32:
        raise Unsupported("quantised convolution with other output or bias types")
    if f.type not in (x.type, PER_CHANNEL):
        raise Unsupported(f"filter of type {f.type.name}")
    return x, f, b, out


def conv_kernel(c, n_extra: int, filter_perm, groups_of):
    from nnconform.drivers.torch.convert import conv_args  # the float converter's argument parsing (one place)

    x, f, b, out = _check_types(c)
    pads, strides, dil, extra, act, nchw = conv_args(c, n_extra)
    groups = groups_of(c, extra, nchw)
    fd = c.dims(f)
    n_out = fd[3] if filter_perm[0] == 3 else fd[0]
    mult, shift = output_multipliers(x, f, b, out, n_out, 3 if filter_perm[0] == 3 else 0)
    if not isinstance(shift, int):
        mult, shift = mult.reshape(1, -1, 1, 1), shift.reshape(1, -1, 1, 1)
    zx, zf = x.zero_point, 0 if f.type == PER_CHANNEL else f.zero_point
    store = _clamp_store(out, act)

    def kernel(t, w, bias, *_):
        xin = t if nchw else t.permute(TO_NCHW)
        # Padding holds the zero point, so the padded offsets are zeros.
        xo = F.pad((xin.long() - zx).double(), pads)
        wo = (w.long() - zf).double().permute(filter_perm)
        acc = F.conv2d(xo, wo, stride=strides, dilation=dil, groups=groups).long()
        acc = acc + bias.long().reshape(1, -1, 1, 1)
        y = store(multiply_by_quantized_multiplier(acc, mult, shift))
        return (y if nchw else y.permute(TO_NHWC)).contiguous()

    return kernel


def fully_connected_kernel(c, act: int):
    x, w, b, out = _check_types(c)
    if w.type != x.type:
        raise Unsupported("per-channel FULLY_CONNECTED weights")
    n_units, k = c.dims(w)
    out_shape = c.dims(out)
    mult, shift = output_multipliers(x, w, b, out, n_units, 0)
    zx, zw = x.zero_point, w.zero_point
    store = _clamp_store(out, act)

    def kernel(t, wt, bias, *_):
        xo = (t.long() - zx).double().reshape(-1, k)
        wo = (wt.long() - zw).double()
        acc = (xo @ wo.t()).long() + bias.long()
        return store(multiply_by_quantized_multiplier(acc, mult, shift)).reshape(out_shape)

    return kernel


def transpose_conv_kernel(c):
    """Quantised TRANSPOSE_CONV_2D: offsets scattered in float64 (exact integers), the
    NNAPI paddings cropped (or, for a negative tail, zero accumulators added), bias added in
    int64, then the convolution's requantisation."""
    from nnconform.drivers.torch.convert import transpose_conv_args

    x, f, b, out = _check_types(c)
    crop_pads, strides, act, nchw = transpose_conv_args(c)
    pl, pr, pt, pb = crop_pads
    n_out = c.dims(f)[0]
    mult, shift = output_multipliers(x, f, b, out, n_out, 0)
    if not isinstance(shift, int):
        mult, shift = mult.reshape(1, -1, 1, 1), shift.reshape(1, -1, 1, 1)
    zx, zf = x.zero_point, 0 if f.type == PER_CHANNEL else f.zero_point
    store = _clamp_store(out, act)
    crop = (-pl, -pr, -pt, -pb)

    def kernel(t, w, bias, *_):
        xin = t if nchw else t.permute(TO_NCHW)
        xo = (xin.long() - zx).double()
        wo = (w.long() - zf).double().permute(3, 0, 1, 2)
        acc = F.pad(F.conv_transpose2d(xo, wo, stride=strides), crop).long()
        acc = acc + bias.long().reshape(1, -1, 1, 1)
        y = store(multiply_by_quantized_multiplier(acc, mult, shift))
        return (y if nchw else y.permute(TO_NHWC)).contiguous()

    return kernel


# ---------------------------------------------------------------------------------------
# L2_NORMALIZATION
# ---------------------------------------------------------------------------------------

_INT32_MAX = (1 << 31) - 1


def _saturating_shift_left(x: torch.Tensor, exponent: int) -> torch.Tensor:
    """gemmlowp SaturatingRoundingMultiplyByPOT for a positive exponent."""
    threshold = (1 << (31 - exponent)) - 1
    return torch.where(
        x > threshold,
        torch.full_like(x, _INT32_MAX),
        torch.where(x < -threshold, torch.full_like(x, INT32_MIN), x << exponent),
    )


def _wrap32(x: torch.Tensor) -> torch.Tensor:
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def inv_sqrt_multiplier(sums: torch.Tensor):
    """TFLite GetInvSqrtQuantizedMultiplierExp (reverse shift -1) on int64 tensors of sums
    >= 0: (multiplier, shift) with 1/sqrt(sum) ~= multiplier * 2**(shift - 31); sums 0 and 1
    count as 1.  gemmlowp's Newton-Raphson on Q3.28, step for step."""
    small = sums <= 1
    x = torch.where(small, torch.full_like(sums, 4), sums)
    shift = torch.full_like(x, 11)
    # The reference divides by 4 while x >= 2**29; a slice has at most 2**16 squares of at
    # most 2**16 each (sums < 2**32), so 2 steps suffice and more are no-ops: unrolled to 3.
    for _ in range(3):
        big = x >= (1 << 29)
        x = torch.where(big, x // 4, x)
        shift = shift + big.long()
    bit_length = torch.frexp(x.double())[1].long()
    pairs = (32 - bit_length - 1) // 2 - 1
    shift = shift - pairs
    x = x << (2 * pairs)
    half_input = rounding_divide_by_pot(x >> 1, 1)
    half_three = (1 << 28) + (1 << 27)
    r = torch.full_like(x, 1 << 28)
    for _ in range(5):
        r3 = _saturating_shift_left(srdhm(srdhm(r, r), r), 6)
        r = _saturating_shift_left(_wrap32(srdhm(torch.full_like(r, half_three), r) - srdhm(half_input, r3)), 3)
    mult = srdhm(r, 1518500250)  # times sqrt(2)/2
    neg = shift < 0
    mult = torch.where(neg, _wrap32(mult << torch.where(neg, -shift, torch.zeros_like(shift))), mult)
    shift = torch.where(neg, torch.zeros_like(shift), shift)
    mult = torch.where(small, torch.full_like(mult, _INT32_MAX), mult)
    shift = torch.where(small, torch.zeros_like(shift), shift)
    return mult, -shift


def l2_normalization_kernel(c, axis: int):
    x, out = c.ins[0], c.outs[0]
    if out.type != x.type:
        raise Unsupported("mixed types")
    rank = c.rank(x)
    axis %= rank
    signed_last = out.type == T.TENSOR_QUANT8_ASYMM_SIGNED and axis == rank - 1
    zp = x.zero_point

    # Excluded from torch.compile: inductor 2.13 spends minutes on this unrolled int64
    # Newton-Raphson graph and then fails with a C++ compile error in its vectorised
    # int32 -> int64 conversions (docs/findings_torch.md, finding 2), so under torch-compile
    # this kernel runs eagerly between compiled pieces.
    @torch._dynamo.disable
    def kernel(t, *_):
        d = t.long() - zp
        mult, shift = inv_sqrt_multiplier(torch.sum(d * d, dim=axis, keepdim=True))
        if signed_last:  # TFLite's int8 kernel
            return torch.clamp(multiply_by_quantized_multiplier(d, mult, shift + 7), -128, 127).to(torch.int8)
        y = rounding_divide_by_pot(srdhm(d * 128, mult), -shift)
        if out.type == T.TENSOR_QUANT8_ASYMM:
            return torch.clamp(y + 128, 0, 255).to(torch.uint8)
        return torch.clamp(y, -128, 127).to(torch.int8)

    return kernel
