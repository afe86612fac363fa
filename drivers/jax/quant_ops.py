"""Quantised NNAPI arithmetic in jax.numpy, bit for bit with the reference's integer kernels.

The reference (nnconform.ops.quant) follows gemmlowp/TFLite: a real multiplier becomes an
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

from nnconform.driver_support import Unsupported
from nnconform.ir import Model, Operand, OperandType as T
from nnconform.ops import activation as nn_activation
from nnconform.ops.quant import QUANT_RANGE

QUANT_TYPES = (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_QUANT8_SYMM,
               T.TENSOR_QUANT8_SYMM_PER_CHANNEL)
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
    o = c.ins[k]
    diff = (c.x(k).astype(jnp.int32) - jnp.int32(o.zero_point)).astype(F32)
    if o.type == T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        cq = o.channel_quant
        if cq is None:
            raise Unsupported("per-channel operand without channel parameters")
        shape = [1] * diff.ndim
        shape[cq.channel_dim] = -1
        return jnp.asarray(np.asarray(cq.scales, np.float32)).reshape(shape) * diff
    if o.type not in QUANT_TYPES:
        raise Unsupported(o.type.name)
    return F32(o.scale) * diff


def _not_mapped(what: str):
    def fn(*_a, **_kw):
        raise Unsupported(f"quantised {what} is not reproduced bit for bit by this adapter")
    return fn


quant_arith = _not_mapped("ADD/SUB/MUL/DIV")
requantize_to = _not_mapped("requantisation")
requantize_values = _not_mapped("requantisation")
quant_logistic_tanh = _not_mapped("LOGISTIC/TANH")
dequantize_exact = _not_mapped("comparison")
quant_conv = _not_mapped("convolution")
quant_fully_connected = _not_mapped("FULLY_CONNECTED")
quant_transpose_conv = _not_mapped("TRANSPOSE_CONV_2D")
quant_pool = _not_mapped("pooling")
quant_mean = _not_mapped("MEAN")
