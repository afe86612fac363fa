"""Quantised NNAPI arithmetic in jax.numpy, bit for bit with the reference's integer kernels.

The reference (nnconform.reference.arith.quant) follows gemmlowp/TFLite: a real multiplier becomes an
int32 mantissa and a power-of-two shift, products round with "saturating rounding doubling
high multiply" and shifts round half away from zero.  Those need 64-bit products, so every
model holding a quantised operand is traced with jax's 64-bit types enabled (``x64_scope``);
the compiled executable keeps them, nothing outside the trace sees the switch.

Multipliers and shifts are computed at trace time, in Python, with the reference's own
helpers (they depend only on the operands' scales), so the two sides cannot drift apart.
Operations whose quantised kernel is not reproduced here raise Unsupported.
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from nnconform.driver.support import Rejected, Unsupported
from nnconform.drivers.common.op_params import dequantization
from nnconform.drivers.common.quant_rules import ADD_LEFT_SHIFT, add_sub_multipliers, mul_multiplier
from nnconform.ir import Model, Operand
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import activation as nn_activation
from nnconform.reference.arith.quant import QUANT_RANGE
from nnconform.reference.ops.conv_common import _output_multipliers

QUANT_TYPES = (
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
    T.TENSOR_QUANT8_SYMM,
    T.TENSOR_QUANT8_SYMM_PER_CHANNEL,
)
F32 = jnp.float32


def needs_x64(model: Model) -> bool:
    return any(o.type in QUANT_TYPES for sg in model.subgraphs() for o in sg.operands)


def x64_scope(model: Model):
    """64-bit types while tracing a model with quantised operands, nothing otherwise (the
    float paths must not silently widen to float64)."""
    return jax.enable_x64(True) if needs_x64(model) else contextlib.nullcontext()


def quant_clamp(v: jax.Array, act: int, out: Operand) -> jax.Array:
    """Clamp stored quantised values (any integer dtype) to NNAPI's activation bounds."""
    lo, hi = nn_activation.quant_bounds(act, out)
    return jnp.clip(v, lo, hi).astype(out.info.dtype)


def _round_half_away(x: jax.Array) -> jax.Array:
    """std::round on float32, exact for every input (x - trunc(x) is exact)."""
    t = jnp.trunc(x)
    return t + jnp.where(jnp.abs(x - t) >= F32(0.5), jnp.sign(x), F32(0))


def quantize_float(x: jax.Array, out: Operand) -> jax.Array:
    """QUANTIZE: clamp(zp + round(x / scale)) with a float32 division; NaN -> qmax (the
    reference's std::min/std::max pair)."""
    lo, hi = QUANT_RANGE[out.type]
    r = _round_half_away(x / F32(out.scale))
    # Compare in float32 before adding the zero point: float32 holds every integer this close
    # to the range exactly, and huge values must saturate, not wrap in an integer conversion.
    v = jnp.clip(r + F32(out.zero_point), F32(lo), F32(hi))
    v = jnp.where(jnp.isnan(r), F32(hi), v)
    return v.astype(out.info.dtype)


def dequantize_float(c, k: int) -> jax.Array:
    """DEQUANTIZE: scale * (q - zp) in float32 (per-channel scales along channel_dim)."""
    d = dequantization(c.ins[k])
    diff = (c.x(k).astype(jnp.int32) - jnp.int32(d.zero_point)).astype(F32)
    if d.axis is None:
        return F32(d.scale) * diff
    shape = [1] * diff.ndim  # the traced rank: the model's may be unknown
    shape[d.axis] = -1
    return jnp.asarray(d.scale).reshape(shape) * diff


# ---------------------------------------------------------------------------------------
# gemmlowp fixed point, on int64 jax arrays (values that fit int32)
# ---------------------------------------------------------------------------------------

I64 = jnp.int64
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def srdhm(a: jax.Array, b) -> jax.Array:
    """SaturatingRoundingDoublingHighMul: (a*b + nudge) / 2**31 truncated toward zero."""
    a = a.astype(I64)
    b = jnp.asarray(b, I64)
    ab = a * b
    nudge = jnp.where(ab >= 0, I64(1 << 30), I64(1 - (1 << 30)))
    num = ab + nudge
    # C++ division truncates toward zero; an arithmetic shift floors, so add 2**31 - 1 first
    # for negative numerators.
    high = (num + jnp.where(num < 0, I64((1 << 31) - 1), I64(0))) >> 31
    return jnp.where((a == INT32_MIN) & (b == INT32_MIN), I64(INT32_MAX), high)


def rounding_divide_by_pot(x: jax.Array, exponent) -> jax.Array:
    """RoundingDivideByPOT: x / 2**exponent, ties away from zero."""
    e = jnp.asarray(exponent, I64)
    mask = (I64(1) << e) - 1
    threshold = (mask >> 1) + (x < 0).astype(I64)
    return (x >> e) + ((x & mask) > threshold).astype(I64)


def mbqm(x: jax.Array, multiplier, shift) -> jax.Array:
    """TFLite MultiplyByQuantizedMultiplier (shift > 0 shifts left first; arrays broadcast
    against x, for per-channel multipliers)."""
    shift = np.asarray(shift, np.int64)
    left = jnp.asarray(np.maximum(shift, 0))
    right = jnp.asarray(np.maximum(-shift, 0))
    return rounding_divide_by_pot(srdhm(x.astype(I64) << left, jnp.asarray(np.asarray(multiplier, np.int64))), right)


def _offsets(c, k: int) -> jax.Array:
    o = c.ins[k]
    return c.x(k).astype(I64) - I64(o.zero_point)


# ---------------------------------------------------------------------------------------
# Element-wise
# ---------------------------------------------------------------------------------------


def quant_arith(c, kind, act: int) -> jax.Array:
    in1, in2, out = c.ins[0], c.ins[1], c.outs[0]
    if kind in (Op.ADD, Op.SUB):
        (m1, e1), (m2, e2), (mo, eo) = add_sub_multipliers(in1, in2, out, kind == Op.SUB)
        total = mbqm(_offsets(c, 0) << ADD_LEFT_SHIFT, m1, e1) + mbqm(_offsets(c, 1) << ADD_LEFT_SHIFT, m2, e2)
        return quant_clamp(mbqm(total, mo, eo) + I64(out.zero_point), act, out)
    if kind == Op.MUL:
        m, shift = mul_multiplier(in1, in2, out)
        prod = _offsets(c, 0) * _offsets(c, 1)
        return quant_clamp(mbqm(prod, m, shift) + I64(out.zero_point), act, out)
    raise Unsupported(f"quantised {kind.name}")


def requantize_to(c, k: int, dst: Operand) -> jax.Array:
    """The reference's SELECT / MAXIMUM / MINIMUM requantisation: real = float32(q - zp) *
    float32(scale), then real / out_scale + out_zp in double, rounded half away, clamped."""
    src = c.ins[k]
    real = (c.x(k).astype(jnp.int32) - jnp.int32(src.zero_point)).astype(F32) * F32(src.scale)
    r = real.astype(jnp.float64) / jnp.float64(np.float32(dst.scale)) + jnp.float64(dst.zero_point)
    t = jnp.trunc(r)
    r = t + jnp.where(jnp.abs(r - t) >= 0.5, jnp.sign(r), 0.0)
    lo, hi = QUANT_RANGE[dst.type]
    return jnp.clip(r, lo, hi).astype(I64)


def requantize_values(c, v: jax.Array, out: Operand) -> jax.Array:
    return v.astype(out.info.dtype)


def concat_requantize(c, k: int, dst: Operand) -> jax.Array:
    """CONCATENATION's float32 requantisation (TFLite ConcatenationWithScaling), signed
    values shifted into the uint8 domain as the reference does.  Each float32 step is done
    in float64 and rounded back, so no fused multiply-add can change the rounding."""
    src = c.ins[k]
    shift = 128 if src.type == T.TENSOR_QUANT8_ASYMM_SIGNED else 0
    in_zp, out_zp = src.zero_point + shift, dst.zero_point + shift
    inv = np.float32(1.0) / np.float32(dst.scale)
    s = np.float32(src.scale) * inv
    b = np.float32(-in_zp) * s
    q64 = (c.x(k).astype(I64) + shift).astype(jnp.float64)
    prod = (q64 * jnp.float64(s)).astype(F32)
    val = (prod.astype(jnp.float64) + jnp.float64(b)).astype(F32)
    t = jnp.trunc(val)
    r = t + jnp.where(jnp.abs(val - t) >= F32(0.5), jnp.sign(val), F32(0))
    y = jnp.clip(r.astype(I64) + out_zp, 0, 255) - shift
    return y.astype(dst.info.dtype)


def dequantize_exact(c, k: int) -> jax.Array:
    """COMPARISONS' real values: float32(q - zp) * float32(scale), compared as floats."""
    o = c.ins[k]
    return (c.x(k).astype(jnp.int32) - jnp.int32(o.zero_point)).astype(F32) * F32(o.scale)


# ---------------------------------------------------------------------------------------
# Convolutions and fully connected: exact integer accumulation, then requantisation
# ---------------------------------------------------------------------------------------


def _requantize_acc(c, acc: jax.Array, channel_axis: int, act: int) -> jax.Array:
    """int64 accumulators (+ bias, input 2) -> output 0's stored values, per-channel or
    per-tensor multipliers computed by the reference's own helper."""
    inp, flt, bias, out = c.ins[0], c.ins[1], c.ins[2], c.outs[0]
    n_out = acc.shape[channel_axis]
    per_channel = flt.type == T.TENSOR_QUANT8_SYMM_PER_CHANNEL
    scales = tuple(flt.channel_quant.scales) if per_channel and flt.channel_quant is not None else None
    result = _output_multipliers(
        float(inp.scale), per_channel, float(flt.scale), scales, float(bias.scale), float(out.scale), n_out
    )
    if isinstance(result, str):
        raise Rejected(result)
    mult, shift = result
    shape = [1] * acc.ndim
    shape[channel_axis] = -1
    if not c.omitted(2):
        acc = acc + c.x(2).astype(I64).reshape(shape)
    if np.all(mult == mult[0]) and np.all(shift == shift[0]):
        y = mbqm(acc, int(mult[0]), int(shift[0]))
    else:
        y = mbqm(acc, np.asarray(mult).reshape(shape), np.asarray(shift).reshape(shape))
    return quant_clamp(y + I64(out.zero_point), act, out)


def _filter_offsets(c, filter_spec_channel_dim: int) -> jax.Array:
    x, f = c.ins[0], c.ins[1]
    if f.type == T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        cq = f.channel_quant
        if cq is None or cq.channel_dim != filter_spec_channel_dim:
            raise Unsupported("per-channel filter quantised along another dimension")
        return c.x(1).astype(I64)
    if f.type != x.type:
        raise Unsupported(f"filter of type {f.type.name}")
    return _offsets(c, 1)


def _exact(v: jax.Array) -> jax.Array:
    """Integer offsets as float64: every product and partial sum of 8-bit offsets stays far
    below 2**53, so XLA's float64 convolution/matmul is exact; back to int64 after."""
    return v.astype(jnp.float64)


def quant_conv(c, filter_spec: str, groups: int, pads, strides, dil, act: int, lhs: str) -> jax.Array:
    channel_dim = filter_spec.index("O")
    w = _filter_offsets(c, channel_dim)
    acc = lax.conv_general_dilated(
        _exact(_offsets(c, 0)),
        _exact(w),
        strides,
        pads,
        rhs_dilation=dil,
        dimension_numbers=(lhs, filter_spec, lhs),
        feature_group_count=groups,
        precision=lax.Precision.HIGHEST,
    )
    return _requantize_acc(c, jnp.round(acc).astype(I64), lhs.index("C"), act)


def quant_transpose_conv(c, pads, strides, act: int, lhs: str) -> jax.Array:
    """The transposed convolution as a plain one over the stride-dilated input with the filter
    flipped (convert.conv_transpose_conv_2d), on exact offsets, then the conv requantisation."""
    w = jnp.flip(_filter_offsets(c, 0), axis=(1, 2))
    acc = lax.conv_general_dilated(
        _exact(_offsets(c, 0)),
        _exact(w),
        (1, 1),
        pads,
        lhs_dilation=strides,
        dimension_numbers=(lhs, "OHWI", lhs),
        precision=lax.Precision.HIGHEST,
    )
    return _requantize_acc(c, jnp.round(acc).astype(I64), lhs.index("C"), act)


def quant_fully_connected(c, act: int) -> jax.Array:
    x, w = c.ins[0], c.ins[1]
    if w.type != x.type:
        raise Unsupported(f"{x.type.name} with {w.type.name} weights")
    n_units, k = c.x(1).shape
    acc = jnp.matmul(_exact(_offsets(c, 0).reshape(-1, k)), _exact(_offsets(c, 1)).T, precision=lax.Precision.HIGHEST)
    return _requantize_acc(c, jnp.round(acc).astype(I64), 1, act)


# ---------------------------------------------------------------------------------------
# Pooling and MEAN on stored values
# ---------------------------------------------------------------------------------------


def quant_pool(c, kind: str, window, strides, pads, act: int) -> jax.Array:
    out = c.outs[0]
    v = c.x(0)
    if kind == "max":
        lo = np.iinfo(v.dtype).min
        y = lax.reduce_window(v, jnp.asarray(lo, v.dtype), lax.max, window, strides, pads)
        return quant_clamp(y, act, out)
    if kind != "avg":
        raise Unsupported(f"quantised {kind} pooling")
    acc = lax.reduce_window(v.astype(I64), I64(0), lax.add, window, strides, pads)
    count = lax.reduce_window(jnp.ones(v.shape, I64), I64(0), lax.add, window, strides, pads)
    # the raw sum divided by the in-bounds count, rounding half away from zero
    avg = jnp.sign(acc) * ((jnp.abs(acc) + count // 2) // count)
    return quant_clamp(avg, act, out)


def quant_mean(c, axes, keep: bool) -> jax.Array:
    """Stored values summed in integers and divided by the count truncating toward zero (no
    requantisation: the output must share the input's parameters)."""
    x, out = c.ins[0], c.outs[0]
    if np.float32(x.scale) != np.float32(out.scale) or x.zero_point != out.zero_point:
        raise Unsupported("quantised MEAN with other output parameters")
    v = c.x(0)
    count = int(np.prod([v.shape[a] for a in axes], dtype=np.int64))
    total = jnp.sum(v.astype(I64), axis=axes, keepdims=keep)
    return (jnp.sign(total) * (jnp.abs(total) // count)).astype(out.info.dtype)


def _not_mapped(what: str):
    def fn(*_a, **_kw):
        raise Unsupported(f"quantised {what} is not reproduced bit for bit by this adapter")

    return fn


quant_logistic_tanh = _not_mapped("LOGISTIC/TANH")
