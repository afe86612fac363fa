"""nnconform model -> one Python function over jax.numpy / jax.lax, one small function per
NNAPI operation.

Each converter receives an :class:`OpCtx` (the operation's operands and the traced values of
its inputs) and returns its outputs as jax arrays in the outputs' storage dtypes.  When the
mapping would not compute what NNAPI specifies for the operation's data types and parameters
it raises :class:`Unsupported` (the device then reports the operation unsupported): nothing
here approximates a semantics it cannot match.

Conventions:
- Tensors keep NNAPI's storage types: TENSOR_QUANT8_ASYMM is uint8, the signed and symmetric
  quantised types are int8.  Shapes are static while tracing, so SAME padding and the like are
  computed from the traced input shapes (a model with unknown dimensions is compiled for the
  request's shapes).
- Scalar parameters (padding scheme, strides, activation, axis, ...) must be constants: a
  parameter fed at run time is unsupported (XLA needs them at trace time).
- FLOAT16 arithmetic is widened to float32 and narrowed once, as the NNAPI CPU reference does;
  pure data movement stays in fp16.
- Quantised arithmetic reproduces the reference's integer kernels (gemmlowp fixed point,
  quant_ops.py) in int64, so it is traced with 64-bit types enabled (device.py scopes that to
  models holding quantised operands).
"""

from __future__ import annotations

import math
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from nnconform.driver.support import Rejected, Unsupported
from nnconform.drivers.common import converter as conversion
from nnconform.drivers.common import op_params
from nnconform.drivers.common.layout import TO_NCHW, TO_NHWC
from nnconform.drivers.common.types import (
    CASTABLE,
    DATA,
    FILLABLE,
    FLOATS,
    NUMERIC,
    QUANT8,
    STORED_TYPES,
    movable,
    pad_fill,
    same_quant,
)
from nnconform.drivers.jax import quant_ops as q
from nnconform.ir import Model, Operand, Subgraph
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.ir import nnapi_params as params
from nnconform.reference.arith import activation as nn_activation

__all__ = ["CONVERTERS", "Rejected", "Unsupported", "build_function", "operation_supported", "TYPES"]

# Operand types the adapter can carry (as model inputs, outputs or intermediate values).
TYPES = STORED_TYPES
F32 = jnp.float32
HIGHEST = lax.Precision.HIGHEST


# ---------------------------------------------------------------------------------------
# The per-operation context
# ---------------------------------------------------------------------------------------


class OpCtx(conversion.OperationContext):
    """One operation seen by its converter: operands (``ins``/``outs``) and traced values."""

    def __init__(self, sg: Subgraph, index: int, values: dict[int, jax.Array]):
        super().__init__(sg, index)
        self._values = values
        self._sg = sg

    def x(self, k: int) -> jax.Array:
        """Input k's value (a constant as a jax constant), in its storage dtype."""
        i = self.op.inputs[k]
        o = self.ins[k]
        if o.is_omitted:
            raise Unsupported(f"input {k} is omitted")
        if o.is_constant:
            return jnp.asarray(np.asarray(o.value, dtype=o.info.dtype))
        return self._values[i]

    def f(self, k: int) -> jax.Array:
        """A float input in float32 (fp16 widened)."""
        return self.x(k).astype(F32)

    def out(self, value, k: int = 0) -> jax.Array:
        """``value`` narrowed to output k's storage dtype."""
        return value.astype(self.outs[k].info.dtype)

    def act(self, k: int) -> int:
        return params.fused_activation(self, k)

    def shape(self, k: int) -> tuple[int, ...]:
        """Input k's traced shape: JAX traces per request shape, so unknown model dimensions
        are known here (nnapi_params' ``shape=``)."""
        return self.x(k).shape


# XLA's CPU backend runs with denormals flushed (FTZ/DAZ), and LLVM folds integer tests on a
# float's bits back into float compares and max/min instructions, which then read denormals
# as zero.  The exact operations below therefore compare *and select* on the bits as
# integers, and only reinterpret the chosen bits as floats at the end.


def _bits(v: jax.Array) -> jax.Array:
    return lax.bitcast_convert_type(v, jnp.int16 if v.dtype == jnp.float16 else jnp.int32)


def _float_of(bits: jax.Array) -> jax.Array:
    return lax.bitcast_convert_type(bits, jnp.float16 if bits.dtype == jnp.int16 else F32)


def _key_and_nan(bits: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(an int32 with the float's order, -0 and +0 equal; whether the float is NaN)."""
    if bits.dtype == jnp.int16:
        b = bits.astype(jnp.int32)
        mag, inf = b & 0x7FFF, 0x7C00
    else:
        b, mag, inf = bits, bits & 0x7FFFFFFF, 0x7F800000
    return jnp.where(b < 0, -mag, mag), mag > inf


def clip_exact(v: jax.Array, lo: float, hi: float) -> jax.Array:
    """np.clip(v, lo, hi), bit-exact with denormals, NaN kept."""
    bits = _bits(v)
    k, _ = _key_and_nan(bits)
    for bound, below in ((lo, True), (hi, False)):
        if np.isinf(bound) and (bound < 0) == below:
            continue
        b_bits = _bits(jnp.asarray(bound, v.dtype))
        b_key, _ = _key_and_nan(b_bits)
        # NaN's key is above +inf's: only the upper clamp needs to spare it
        hit = k < b_key if below else (k > b_key) & ~_key_and_nan(bits)[1]
        bits = jnp.where(hit, b_bits, bits)
    return _float_of(bits)


def float_act(y: jax.Array, act: int) -> jax.Array:
    """NNAPI's fused activation (np.clip: NaN stays NaN) on a float tensor, denormals kept."""
    if act == nn_activation.NONE:
        return y
    lo, hi = nn_activation.float_bounds(act)
    return clip_exact(y, lo, hi)


def _float_pick(a: jax.Array, b: jax.Array, take_b_if_b_greater: bool) -> jax.Array:
    a, b = jnp.broadcast_arrays(a, b)
    ab, bb = _bits(a), _bits(b)
    (ka, na), (kb, nb) = _key_and_nan(ab), _key_and_nan(bb)
    less = (ka < kb) if take_b_if_b_greater else (kb < ka)
    return _float_of(jnp.where(less & ~(na | nb), bb, ab))


def float_max(a: jax.Array, b: jax.Array) -> jax.Array:
    """std::max(a, b) = a < b ? b : a, bit-exact: a NaN in a is kept, one in b is not."""
    return _float_pick(a, b, True)


def float_min(a: jax.Array, b: jax.Array) -> jax.Array:
    """std::min(a, b) = b < a ? b : a."""
    return _float_pick(a, b, False)


def float_compare(fn, a: jax.Array, b: jax.Array) -> jax.Array:
    """``fn`` on two float tensors with IEEE semantics (NaN unordered, -0 == +0), denormals
    kept."""
    a, b = jnp.broadcast_arrays(a, b)
    (ka, na), (kb, nb) = _key_and_nan(_bits(a)), _key_and_nan(_bits(b))
    return jnp.where(na | nb, fn is jnp.not_equal, fn(ka, kb))


# ---------------------------------------------------------------------------------------
# Element-wise arithmetic
# ---------------------------------------------------------------------------------------


def _int32_floor_div(a: jax.Array, b: jax.Array) -> jax.Array:
    """NNAPI's int32 DIV: floor division, a zero divisor gives 0 (no trap)."""
    a, b = jnp.broadcast_arrays(a, b)
    zero = b == 0
    safe = jnp.where(zero, jnp.int32(1), b)
    return jnp.where(zero, jnp.int32(0), jnp.floor_divide(a, safe))


_FLOAT_BINARY = {Op.ADD: jnp.add, Op.SUB: jnp.subtract, Op.MUL: jnp.multiply, Op.DIV: jnp.divide}
_INT_BINARY = {Op.ADD: jnp.add, Op.SUB: jnp.subtract, Op.MUL: jnp.multiply, Op.DIV: _int32_floor_div}


def conv_arith(c: OpCtx):
    a = c.ins[0]
    act = c.act(2)
    kind = Op(c.op.type)
    if a.type in FLOATS:
        return [c.out(float_act(_FLOAT_BINARY[kind](c.f(0), c.f(1)), act))]
    if a.type == T.TENSOR_INT32:
        if act != nn_activation.NONE:
            raise Rejected("int32 arithmetic with a fused activation")
        return [_INT_BINARY[kind](c.x(0), c.x(1))]
    if a.type in QUANT8:
        return [q.quant_arith(c, kind, act)]
    raise Unsupported(a.type.name)


def _minmax(fn, float_fn):
    def convert(c: OpCtx):
        a, out = c.ins[0], c.outs[0]
        if a.type in FLOATS:
            return [float_fn(c.x(0), c.x(1))]
        if a.type == T.TENSOR_INT32:
            return [fn(c.x(0), c.x(1))]
        if a.type in QUANT8:
            return [q.requantize_values(c, fn(q.requantize_to(c, 0, out), q.requantize_to(c, 1, out)), out)]
        raise Unsupported(a.type.name)

    return convert


def conv_pow(c: OpCtx):
    c.require(0, FLOATS)
    return [c.out(jnp.power(c.f(0), c.f(1)))]


def conv_prelu(c: OpCtx):
    c.require(0, FLOATS)
    x, a = c.f(0), c.f(1)
    return [c.out(jnp.where(x < 0, x * a, x))]


# ---------------------------------------------------------------------------------------
# Activations and unary math
# ---------------------------------------------------------------------------------------


def _relu(act: int):
    def convert(c: OpCtx):
        x, out = c.ins[0], c.outs[0]
        if x.type in FLOATS:
            return [float_act(c.x(0), act)]  # in the storage type: a clamp needs no widening
        if x.type in QUANT8:
            if not same_quant(x, out):
                raise Unsupported("quantised RELU with different input and output parameters")
            return [q.quant_clamp(c.x(0), act, out)]
        raise Unsupported(x.type.name)

    return convert


def _unary(fn, int32_fn=None):
    def convert(c: OpCtx):
        x = c.ins[0]
        if x.type in FLOATS:
            return [c.out(fn(c.f(0)))]
        if x.type == T.TENSOR_INT32 and int32_fn is not None:
            return [int32_fn(c.x(0))]
        raise Unsupported(x.type.name)

    return convert


def _floor(x):
    """floor, with denormals seen (XLA CPU reads them as zero: floor(-1e-40) must be -1)."""
    bits = lax.bitcast_convert_type(x, jnp.int32)
    mag = bits & 0x7FFFFFFF
    denormal = (mag != 0) & (mag < 0x00800000)
    return jnp.where(denormal, jnp.where(bits < 0, F32(-1), F32(0)), jnp.floor(x))


def _rsqrt(x):
    return F32(1) / jnp.sqrt(x)


def _sigmoid(x):
    return F32(1) / (F32(1) + jnp.exp(-x))


def conv_logistic(c: OpCtx):
    if c.ins[0].type in QUANT8:
        return [q.quant_logistic_tanh(c, tanh=False)]
    return _unary(_sigmoid)(c)


def conv_tanh(c: OpCtx):
    if c.ins[0].type in QUANT8:
        return [q.quant_logistic_tanh(c, tanh=True)]
    return _unary(jnp.tanh)(c)


def conv_elu(c: OpCtx):
    c.require(0, FLOATS)
    alpha = F32(c.scalar(1))
    x = c.f(0)
    return [c.out(jnp.where(x < 0, alpha * jnp.expm1(x), x))]


def conv_hard_swish(c: OpCtx):
    x = c.ins[0]
    if x.type not in FLOATS:
        raise Unsupported(x.type.name)
    v = c.f(0)
    return [c.out(v * jnp.clip(v + F32(3), F32(0), F32(6)) / F32(6))]


def _softmax(log: bool):
    def convert(c: OpCtx):
        x = c.ins[0]
        if x.type not in FLOATS:
            raise Unsupported(x.type.name)
        beta = F32(c.scalar(1))
        axis = int(c.scalar(2, -1))
        v = c.f(0) * beta
        m = jnp.max(v, axis=axis, keepdims=True)
        e = v - m
        if log:
            return [c.out(e - jnp.log(jnp.sum(jnp.exp(e), axis=axis, keepdims=True)))]
        ex = jnp.exp(e)
        return [c.out(ex / jnp.sum(ex, axis=axis, keepdims=True))]

    return convert


def conv_l2_normalization(c: OpCtx):
    c.require(0, FLOATS)
    axis = int(c.scalar(1, -1))
    v = c.f(0)
    norm = jnp.maximum(jnp.sqrt(jnp.sum(v * v, axis=axis, keepdims=True)), F32(1e-6))
    return [c.out(v / norm)]


# ---------------------------------------------------------------------------------------
# Comparisons, logical, select
# ---------------------------------------------------------------------------------------


def _compare(fn):
    def convert(c: OpCtx):
        a = c.ins[0]
        if a.type in QUANT8:
            return [fn(q.dequantize_exact(c, 0), q.dequantize_exact(c, 1))]
        if a.type in FLOATS:
            return [float_compare(fn, c.x(0), c.x(1))]
        if a.type == T.TENSOR_INT32:
            return [fn(c.x(0), c.x(1))]
        if a.type == T.TENSOR_BOOL8:  # false < true, as integers
            return [fn(c.x(0).astype(jnp.int32), c.x(1).astype(jnp.int32))]
        raise Unsupported(a.type.name)

    return convert


def _logical(fn, arity: int):
    def convert(c: OpCtx):
        c.require(0, (T.TENSOR_BOOL8,))
        return [fn(*(c.x(k) for k in range(arity)))]

    return convert


def conv_select(c: OpCtx):
    a, out = c.require(1, NUMERIC, "SELECT's input 1"), c.outs[0]
    if a.type in QUANT8:
        return [jnp.where(c.x(0), q.requantize_to(c, 1, out), q.requantize_to(c, 2, out)).astype(out.info.dtype)]
    return [jnp.where(c.x(0), c.x(1), c.x(2))]


# ---------------------------------------------------------------------------------------
# Convolutions, fully connected, pooling
# ---------------------------------------------------------------------------------------


def conv_args(c: OpCtx, n_extra: int, **kw):
    """(pads ((t, b), (l, r)), strides (h, w), dilations (h, w), extra, act, nchw)."""
    p = params.conv_params(c, n_extra, shape=c.shape, **kw)
    return tuple(zip(p.pads_begin, p.pads_end)), p.strides, p.dilations, p.extra, p.activation, p.nchw


def _conv(c: OpCtx, filter_spec: str, groups_of, n_extra: int, **kw):
    x, f = c.ins[0], c.ins[1]
    pads, strides, dil, extra, act, nchw = conv_args(c, n_extra, **kw)
    lhs = "NCHW" if nchw else "NHWC"
    channels = c.x(0).shape[1 if nchw else 3]
    groups = groups_of(extra, channels)
    if x.type in FLOATS:
        if f.type != x.type:
            raise Unsupported("mixed filter type")
        y = lax.conv_general_dilated(
            c.f(0),
            c.f(1),
            strides,
            pads,
            rhs_dilation=dil,
            dimension_numbers=(lhs, filter_spec, lhs),
            feature_group_count=groups,
            precision=HIGHEST,
        )
        bias = c.f(2).reshape((1, -1, 1, 1) if nchw else (1, 1, 1, -1))
        return [c.out(float_act(y + bias, act))]
    if x.type in QUANT8:
        return [q.quant_conv(c, filter_spec, groups, pads, strides, dil, act, lhs)]
    raise Unsupported(x.type.name)


def conv_conv_2d(c: OpCtx):
    return _conv(c, "OHWI", lambda extra, ch: 1, 0)


def conv_grouped_conv_2d(c: OpCtx):
    return _conv(c, "OHWI", lambda extra, ch: extra[0], 1, dilation=False)


def conv_depthwise_conv_2d(c: OpCtx):
    def groups(extra, channels):
        # the traced shapes: channels is the input's, from the layout the signature gives
        return op_params.depthwise_channels(c, extra[0], False, dims=(1, 1, 1, channels), filter_depth=c.x(1).shape[3])

    # [1, fh, fw, C*mult] read as IHWO: output channel c*mult + m belongs to group c.
    return _conv(c, "IHWO", groups, 1)


def conv_fully_connected(c: OpCtx):
    x, w = c.ins[0], c.ins[1]
    act = c.act(3)
    n_units, k = c.x(1).shape
    if x.type in FLOATS:
        if w.type != x.type:
            raise Unsupported("mixed weight type")
        x2 = c.f(0).reshape(-1, k)
        y = jnp.matmul(x2, c.f(1).T, precision=HIGHEST)
        if not c.omitted(2):
            y = y + c.f(2)
        return [c.out(float_act(y, act))]
    if x.type in QUANT8:
        return [q.quant_fully_connected(c, act)]
    raise Unsupported(x.type.name)


def conv_transpose_conv_2d(c: OpCtx):
    x, f = c.ins[0], c.ins[1]
    p = params.transpose_conv_params(c, shape=c.shape)
    pl, pr, pt, pb, sw, sh, act, nchw = (
        p.pad_left,
        p.pad_right,
        p.pad_top,
        p.pad_bottom,
        p.stride_w,
        p.stride_h,
        p.activation,
        p.nchw,
    )
    fh, fw = c.x(1).shape[1:3]
    # A transposed convolution is a plain one over the stride-dilated input with the filter
    # flipped; negative padding (lax crops) covers NNAPI paddings larger than the filter.
    pads = ((fh - 1 - pt, fh - 1 - pb), (fw - 1 - pl, fw - 1 - pr))
    lhs = "NCHW" if nchw else "NHWC"
    if x.type in FLOATS:
        if f.type != x.type:
            raise Unsupported("mixed filter type")
        w = jnp.flip(c.f(1), axis=(1, 2))
        y = lax.conv_general_dilated(
            c.f(0), w, (1, 1), pads, lhs_dilation=(sh, sw), dimension_numbers=(lhs, "OHWI", lhs), precision=HIGHEST
        )
        bias = c.f(2).reshape((1, -1, 1, 1) if nchw else (1, 1, 1, -1))
        return [c.out(float_act(y + bias, act))]
    if x.type in QUANT8:
        return [q.quant_transpose_conv(c, pads, (sh, sw), act, lhs)]
    raise Unsupported(x.type.name)


def pool_args(c: OpCtx):
    p = params.pool_params(c, shape=c.shape)
    pl, pr, pt, pb, sw, sh, fw, fh, act, nchw = (
        p.pad_left,
        p.pad_right,
        p.pad_top,
        p.pad_bottom,
        p.stride_w,
        p.stride_h,
        p.filter_w,
        p.filter_h,
        p.activation,
        p.nchw,
    )
    if nchw:
        window, strides, pads = (1, 1, fh, fw), (1, 1, sh, sw), ((0, 0), (0, 0), (pt, pb), (pl, pr))
    else:
        window, strides, pads = (1, fh, fw, 1), (1, sh, sw, 1), ((0, 0), (pt, pb), (pl, pr), (0, 0))
    return window, strides, pads, act


def window_sum(v, window, strides, pads):
    return lax.reduce_window(v, jnp.zeros((), v.dtype), lax.add, window, strides, pads)


def window_count(shape, window, strides, pads, dtype):
    """How many in-bounds elements each window covers (NNAPI divides by this, not the window)."""
    return window_sum(jnp.ones(shape, dtype), window, strides, pads)


def _pool(kind: str):
    def convert(c: OpCtx):
        x, out = c.ins[0], c.outs[0]
        window, strides, pads, act = pool_args(c)
        if x.type in QUANT8:
            if kind == "l2" or not same_quant(x, out):
                raise Unsupported("quantised L2 pooling or pooling with requantisation")
            return [q.quant_pool(c, kind, window, strides, pads, act)]
        if x.type not in FLOATS:
            raise Unsupported(x.type.name)
        v = c.f(0)
        if kind == "max":
            y = lax.reduce_window(v, F32(-np.inf), lax.max, window, strides, pads)
        else:
            count = window_count(v.shape, window, strides, pads, F32)
            if kind == "l2":
                y = jnp.sqrt(window_sum(v * v, window, strides, pads) / count)
            else:
                y = window_sum(v, window, strides, pads) / count
        return [c.out(float_act(y, act))]

    return convert


# ---------------------------------------------------------------------------------------
# Quantisation and casts
# ---------------------------------------------------------------------------------------


def conv_quantize(c: OpCtx):
    c.require(0, FLOATS)
    if c.outs[0].type not in QUANT8:
        raise Unsupported(c.outs[0].type.name)
    return [q.quantize_float(c.f(0), c.outs[0])]


def conv_dequantize(c: OpCtx):
    out = c.outs[0]
    if out.type not in FLOATS:
        raise Unsupported(out.type.name)
    return [c.out(q.dequantize_float(c, 0))]


def conv_cast(c: OpCtx):
    x, out = c.ins[0], c.outs[0]
    if x.type == out.type and x.type in TYPES:
        return [c.x(0)]
    if x.type not in CASTABLE or out.type not in CASTABLE:
        raise Unsupported(f"{x.type.name} -> {out.type.name}")
    v = c.x(0)
    if out.type == T.TENSOR_QUANT8_ASYMM:
        # NNAPI saturates into 0..255 and truncates floats toward zero.
        if x.type in FLOATS:
            v = jnp.trunc(jnp.clip(v.astype(F32), F32(0), F32(255)))
        else:
            v = jnp.clip(v, 0, 255)
        return [v.astype(jnp.uint8)]
    if out.type == T.TENSOR_INT32 and x.type in FLOATS:
        # NNAPI (ARM64) saturates and gives 0 for NaN; 2**31 is the first float32 above INT32_MAX.
        f = v.astype(F32)
        f = jnp.where(jnp.isnan(f), F32(0), f)
        y = jnp.clip(f, F32(-(2.0**31)), F32(2.0**31 - 128)).astype(jnp.int32)
        return [jnp.where(f >= F32(2.0**31), jnp.int32(2**31 - 1), y)]
    if out.type == T.TENSOR_FLOAT16 and x.type == T.TENSOR_INT32:
        return [v.astype(F32).astype(jnp.float16)]
    return [v.astype(out.info.dtype)]


# ---------------------------------------------------------------------------------------
# Data movement
# ---------------------------------------------------------------------------------------


def _out_shape(c: OpCtx, y: jax.Array) -> jax.Array:
    """NNAPI has no 0-d tensors: a result that lost every dimension is [1]."""
    return y.reshape(1) if y.ndim == 0 else y


def conv_reshape(c: OpCtx):
    movable(c)
    shape = [int(s) for s in c.const(1).reshape(-1)]
    return [c.x(0).reshape(shape)]


def conv_squeeze(c: OpCtx):
    movable(c)
    v = c.x(0)
    return [_out_shape(c, jnp.squeeze(v, axis=tuple(op_params.squeeze_axes(c, v.shape))))]


def conv_expand_dims(c: OpCtx):
    movable(c)
    return [jnp.expand_dims(c.x(0), int(c.scalar(1)))]


def conv_transpose(c: OpCtx):
    movable(c)
    return [jnp.transpose(c.x(0), op_params.transpose_perm(c))]


def conv_concatenation(c: OpCtx):
    out = c.outs[0]
    n = len(c.ins) - 1
    axis = int(c.scalar(n))
    parts = []
    for k in range(n):
        x = c.require(k, NUMERIC)
        parts.append(c.x(k) if same_quant(x, out) else q.concat_requantize(c, k, out))
    return [jnp.concatenate(parts, axis=axis)]


def conv_gather(c: OpCtx):
    movable(c, 0, NUMERIC)
    v, idx = c.x(0), c.x(2)
    axis = int(c.scalar(1)) % v.ndim
    # Out-of-range indices fail the execution in NNAPI; XLA would clamp, so refuse them when
    # the indices are constant and give no mapping for run-time ones that could be out of range.
    if c.ins[2].is_constant:
        iv = c.const(2)
        if iv.size and (iv.min() < 0 or iv.max() >= v.shape[axis]):
            raise Rejected("GATHER index out of range")
    else:
        raise Unsupported("GATHER with run-time indices (XLA clamps out-of-range ones, NNAPI fails)")
    return [jnp.take(v, idx, axis=axis)]


def conv_pad(c: OpCtx):
    v2 = c.op.type == Op.PAD_V2
    x = movable(c, 0, NUMERIC if v2 else DATA)
    pads = op_params.paddings(c).tolist()
    return [jnp.pad(c.x(0), pads, constant_values=jnp.asarray(pad_fill(c, x, 2 if v2 else None)))]


def conv_mirror_pad(c: OpCtx):
    movable(c, 0, NUMERIC)
    pads, mode = op_params.mirror_pad(c)
    return [jnp.pad(c.x(0), pads.tolist(), mode=mode)]


def conv_slice(c: OpCtx):
    movable(c, 0, NUMERIC)
    v = c.x(0)
    begin, end = params.slice_bounds(c, v.shape)
    return [v[tuple(slice(b, e) for b, e in zip(begin, end))]]


def conv_strided_slice(c: OpCtx):
    movable(c, 0, NUMERIC)
    v = c.x(0)
    s = params.strided_slice(c, v.shape)
    y = v[tuple(slice(b, e, st) for b, e, st in zip(s.starts, s.stops, s.strides))]
    shrunk = s.shrunk_axes
    return [_out_shape(c, jnp.squeeze(y, axis=shrunk) if shrunk else y)]


def conv_split(c: OpCtx):
    movable(c, 0, NUMERIC)
    v = c.x(0)
    axis, n = op_params.split(c, v.shape)
    return list(jnp.split(v, n, axis=axis))


def conv_tile(c: OpCtx):
    movable(c, 0, NUMERIC)
    return [jnp.tile(c.x(0), [int(m) for m in c.const(1).reshape(-1)])]


def conv_reverse(c: OpCtx):
    movable(c, 0, NUMERIC)
    v = c.x(0)
    axes = tuple(int(a) % v.ndim for a in c.const(1).reshape(-1))
    return [jnp.flip(v, axis=axes)]


def _to_nhwc(v, nchw):
    return jnp.transpose(v, TO_NHWC) if nchw else v


def _from_nhwc(v, nchw):
    return jnp.transpose(v, TO_NCHW) if nchw else v


def conv_depth_to_space(c: OpCtx):
    movable(c, 0, DATA)
    bs, nchw = op_params.depth_space(c)
    v = _to_nhwc(c.x(0), nchw)
    n, h, w, ch = v.shape
    if c.op.type == Op.DEPTH_TO_SPACE:
        if ch % (bs * bs):
            raise Rejected("depth not divisible by block size squared")
        y = v.reshape(n, h, w, bs, bs, ch // (bs * bs)).transpose(0, 1, 3, 2, 4, 5)
        y = y.reshape(n, h * bs, w * bs, ch // (bs * bs))
    else:
        if h % bs or w % bs:
            raise Rejected("height or width not divisible by block size")
        y = v.reshape(n, h // bs, bs, w // bs, bs, ch).transpose(0, 1, 3, 2, 4, 5)
        y = y.reshape(n, h // bs, w // bs, bs * bs * ch)
    return [_from_nhwc(y, nchw)]


def conv_batch_space(c: OpCtx):
    x = movable(c, 0, DATA)
    p = op_params.batch_space(c, c.shape(0))
    y = _to_nhwc(c.x(0), p.nchw)
    if p.to_batch:
        pt, pb, pl, pr = p.pads
        y = jnp.pad(y, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=jnp.asarray(pad_fill(c, x, None)))
        view, perm, shape = p.space_to_batch_shapes()
    else:
        view, perm, shape = p.batch_to_space_shapes()
    return [_from_nhwc(y.reshape(view).transpose(perm).reshape(shape), p.nchw)]


def conv_channel_shuffle(c: OpCtx):
    movable(c, 0, DATA)
    v = c.x(0)
    s = op_params.channel_shuffle(c, v.shape)
    return [jnp.transpose(v.reshape(s.grouped), s.perm).reshape(v.shape)]


def conv_embedding_lookup(c: OpCtx):
    movable(c, 1, NUMERIC)
    if not c.ins[0].is_constant:
        raise Unsupported("EMBEDDING_LOOKUP with run-time indices (XLA clamps out-of-range ones, NNAPI fails)")
    iv = c.const(0)
    v = c.x(1)
    if iv.size and (iv.min() < 0 or iv.max() >= v.shape[0]):
        raise Rejected("EMBEDDING_LOOKUP index out of range")
    return [jnp.take(v, c.x(0), axis=0)]


def conv_pack(c: OpCtx):
    axis = int(c.scalar(0))
    for k in range(1, len(c.ins)):
        movable(c, k, NUMERIC)
    return [jnp.stack([c.x(k) for k in range(1, len(c.ins))], axis=axis)]


def conv_argminmax(c: OpCtx):
    c.require(0, NUMERIC)
    v = c.x(0)
    axis = int(c.scalar(1)) % v.ndim
    is_max = c.op.type == Op.ARGMAX
    fn = jnp.argmax if is_max else jnp.argmin
    if c.ins[0].type not in FLOATS:
        return [_out_shape(c, fn(v, axis=axis).astype(jnp.int32))]
    # The reference scans with a strict comparison: a NaN never wins, and a NaN in first place
    # is never beaten (index 0).  XLA's argmax picks the first NaN instead, and reads denormals
    # as zero: the scan runs on the floats' order keys (integers), NaN keyed below (above)
    # every number.
    key, nan = _key_and_nan(_bits(v))
    key = jnp.where(nan, jnp.int32(np.iinfo(np.int32).min if is_max else np.iinfo(np.int32).max), key)
    idx = fn(key, axis=axis)
    first_nan = jnp.take(nan, 0, axis=axis)
    return [_out_shape(c, jnp.where(first_nan, 0, idx).astype(jnp.int32))]


def conv_rank(c: OpCtx):
    return [jnp.asarray(np.int32(c.x(0).ndim))]


def conv_fill(c: OpCtx):
    out = c.outs[0]
    if out.type not in FILLABLE:
        raise Unsupported(out.type.name)
    shape = [int(s) for s in c.const(0).reshape(-1)]
    return [jnp.full(shape, np.asarray(c.scalar(1), out.info.dtype), dtype=out.info.dtype)]


# ---------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------


def _reduce(kind: str):
    def convert(c: OpCtx):
        x, out = c.ins[0], c.outs[0]
        v = c.x(0)
        axes, keep = params.reduce_axes(c, v.ndim)
        axes = tuple(axes)
        if kind in ("all", "any"):
            c.require(0, (T.TENSOR_BOOL8,))
            y = (jnp.all if kind == "all" else jnp.any)(v, axis=axes, keepdims=keep)
        elif x.type in QUANT8 and kind in ("max", "min"):
            if not same_quant(x, out):
                raise Unsupported("quantised reduction with other output parameters")
            y = (jnp.max if kind == "max" else jnp.min)(v, axis=axes, keepdims=keep)
        elif x.type in FLOATS:
            y = c.out(_float_reduce(kind, c.f(0), x, axes, keep))
        else:
            raise Unsupported(x.type.name)
        return [_out_shape(c, y)]

    return convert


def _float_reduce(kind: str, v, x: Operand, axes, keep: bool):
    """The reference's folds: MAX/MIN start from the lowest/highest finite value and skip NaN;
    PROD multiplies in the storage type in row-major order and a zero on either side of a step
    gives 0 (so an underflow to 0 sticks even against inf)."""
    if kind in ("max", "min"):
        finite = float(np.finfo(np.float16 if x.type == T.TENSOR_FLOAT16 else np.float32).max)
        start = F32(-finite if kind == "max" else finite)
        v = jnp.where(jnp.isnan(v), start, v)
        fn, clamp = (jnp.max, jnp.maximum) if kind == "max" else (jnp.min, jnp.minimum)
        return clamp(fn(v, axis=axes, keepdims=keep), start)
    if kind == "sum":
        return jnp.sum(v, axis=axes, keepdims=keep)
    if kind == "prod":
        dt = jnp.float16 if x.type == T.TENSOR_FLOAT16 else F32
        kept = [i for i in range(v.ndim) if i not in axes]
        moved = jnp.transpose(v.astype(dt), kept + list(axes))
        k = math.prod(v.shape[a] for a in axes)
        flat = moved.reshape(-1, k)

        def step(acc, p):
            zero = (acc == 0) | (p == 0)
            return jnp.where(zero, jnp.zeros_like(acc), acc * p), None

        acc, _ = lax.scan(step, flat[:, 0], flat.T[1:]) if k > 1 else (flat[:, 0], None)
        return acc.reshape(op_params.reduced_shape(v.shape, axes, keep)).astype(F32)
    raise Unsupported(kind)


def conv_mean(c: OpCtx):
    x = c.require(0, DATA)
    v = c.x(0)
    axes, keep = params.reduce_axes(c, v.ndim)
    axes = tuple(axes)
    if x.type in FLOATS:
        y = c.out(jnp.mean(c.f(0), axis=axes, keepdims=keep))
    else:
        y = q.quant_mean(c, axes, keep)
    return [_out_shape(c, y)]


# ---------------------------------------------------------------------------------------
# Matrix products, normalisation, resizing
# ---------------------------------------------------------------------------------------


def conv_batch_matmul(c: OpCtx):
    a, b = c.ins[0], c.ins[1]
    if a.type not in FLOATS + (T.TENSOR_INT32,):
        raise Unsupported(a.type.name)
    adj = [bool(c.scalar(2, False)), bool(c.scalar(3, False))]
    vals = []
    for k, o in enumerate((a, b)):
        v = c.f(k) if o.type in FLOATS else c.x(k)
        vals.append(jnp.swapaxes(v, -1, -2) if adj[k] else v)
    if a.type == T.TENSOR_INT32:
        # two's-complement products and sums, like the reference's int32 arithmetic
        return [jnp.matmul(vals[0], vals[1], preferred_element_type=jnp.int32)]
    return [c.out(jnp.matmul(vals[0], vals[1], precision=HIGHEST))]


def conv_instance_normalization(c: OpCtx):
    c.require(0, FLOATS)
    *floats, nchw = op_params.instance_norm(c)
    gamma, beta, eps = (F32(f) for f in floats)
    axes = (2, 3) if nchw else (1, 2)
    v = c.f(0)
    mean = jnp.mean(v, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(v - mean), axis=axes, keepdims=True)
    return [c.out((v - mean) * gamma / jnp.sqrt(var + eps) + beta)]


def conv_local_response_normalization(c: OpCtx):
    c.require(0, FLOATS)
    v = c.f(0)
    p = op_params.lrn(c, v.ndim)
    radius, axis = p.radius, p.axis
    bias, alpha, beta = F32(p.bias), F32(p.alpha), F32(p.beta)
    moved = jnp.moveaxis(v, axis, -1)
    window = (1,) * (v.ndim - 1) + (2 * radius + 1,)
    pads = ((0, 0),) * (v.ndim - 1) + ((radius, radius),)
    sq = lax.reduce_window(moved * moved, F32(0), lax.add, window, (1,) * v.ndim, pads)
    y = moved / jnp.power(bias + alpha * sq, beta)
    return [c.out(jnp.moveaxis(y, -1, axis))]


def conv_resize_bilinear(c: OpCtx):
    """The reference's blend (resize.py), float32 coordinates and weights computed at trace
    time in numpy, the four-neighbour sum in the reference's order."""
    c.require(0, FLOATS)
    r = op_params.resize(c, c.shape(0))
    (ylo, yhi, fy), (xlo, xhi, fx) = r.bilinear()
    vf = _to_nhwc(c.x(0), r.nchw).astype(F32)
    fy = jnp.asarray(fy).reshape(1, -1, 1, 1)
    fx = jnp.asarray(fx).reshape(1, 1, -1, 1)

    def at(ys, xs):
        return vf[:, ys][:, :, xs]

    one = F32(1)
    y = (
        at(ylo, xlo) * (one - fy) * (one - fx)
        + at(yhi, xlo) * fy * (one - fx)
        + at(ylo, xhi) * (one - fy) * fx
        + at(yhi, xhi) * fy * fx
    )
    return [_from_nhwc(c.out(y), r.nchw)]


def conv_resize_nearest(c: OpCtx):
    movable(c, 0, DATA)
    r = op_params.resize(c, c.shape(0))
    rows, cols = r.nearest()
    return [_from_nhwc(_to_nhwc(c.x(0), r.nchw)[:, rows][:, :, cols], r.nchw)]


# ---------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------

# Every conv_<operation> function above converts that operation (conversion.by_name); the
# table lists the others: factory-built converters and converters shared by several operations.
CONVERTERS: dict[Op, Callable[[OpCtx], list]] = conversion.by_name(
    globals(),
    {
        Op.ADD: conv_arith,
        Op.SUB: conv_arith,
        Op.MUL: conv_arith,
        Op.DIV: conv_arith,
        Op.MAXIMUM: _minmax(jnp.maximum, float_max),
        Op.MINIMUM: _minmax(jnp.minimum, float_min),
        Op.RELU: _relu(nn_activation.RELU),
        Op.RELU1: _relu(nn_activation.RELU1),
        Op.RELU6: _relu(nn_activation.RELU6),
        Op.ABS: _unary(jnp.abs, jnp.abs),
        Op.NEG: _unary(jnp.negative, jnp.negative),
        Op.EXP: _unary(jnp.exp),
        Op.LOG: _unary(jnp.log),
        Op.SQRT: _unary(jnp.sqrt),
        Op.SIN: _unary(jnp.sin),
        Op.FLOOR: _unary(_floor),
        Op.RSQRT: _unary(_rsqrt),
        Op.SOFTMAX: _softmax(False),
        Op.LOG_SOFTMAX: _softmax(True),
        Op.EQUAL: _compare(jnp.equal),
        Op.NOT_EQUAL: _compare(jnp.not_equal),
        Op.GREATER: _compare(jnp.greater),
        Op.GREATER_EQUAL: _compare(jnp.greater_equal),
        Op.LESS: _compare(jnp.less),
        Op.LESS_EQUAL: _compare(jnp.less_equal),
        Op.LOGICAL_AND: _logical(jnp.logical_and, 2),
        Op.LOGICAL_OR: _logical(jnp.logical_or, 2),
        Op.LOGICAL_NOT: _logical(jnp.logical_not, 1),
        Op.BATCH_TO_SPACE_ND: conv_batch_space,
        Op.SPACE_TO_BATCH_ND: conv_batch_space,
        Op.AVERAGE_POOL_2D: _pool("avg"),
        Op.MAX_POOL_2D: _pool("max"),
        Op.L2_POOL_2D: _pool("l2"),
        Op.PAD_V2: conv_pad,
        Op.SPACE_TO_DEPTH: conv_depth_to_space,
        Op.ARGMAX: conv_argminmax,
        Op.ARGMIN: conv_argminmax,
        Op.RESIZE_NEAREST_NEIGHBOR: conv_resize_nearest,
        Op.REDUCE_SUM: _reduce("sum"),
        Op.REDUCE_PROD: _reduce("prod"),
        Op.REDUCE_MAX: _reduce("max"),
        Op.REDUCE_MIN: _reduce("min"),
        Op.REDUCE_ALL: _reduce("all"),
        Op.REDUCE_ANY: _reduce("any"),
    },
)


# ---------------------------------------------------------------------------------------
# Whole models
# ---------------------------------------------------------------------------------------


def run_operation(sg: Subgraph, index: int, values: dict[int, jax.Array]) -> None:
    """Trace one operation: its outputs land in ``values``.  Raises Unsupported / Rejected."""
    op = sg.operations[index]
    fn = conversion.lookup(CONVERTERS, op, "jax")
    conversion.check_types(sg, op.outputs, TYPES)
    conversion.check_types(sg, [i for i in op.inputs if not sg.operands[i].is_omitted], TYPES)
    outs = fn(OpCtx(sg, index, values))
    if len(outs) != len(op.outputs):
        raise AssertionError(f"{op.name} converter returned {len(outs)} outputs for {len(op.outputs)}")
    for i, v in zip(op.outputs, outs):
        o = sg.operands[i]
        values[i] = jnp.asarray(v).astype(o.info.dtype)


def build_function(model: Model) -> Callable:
    """The main graph as one Python function ``f(*inputs) -> tuple(outputs)`` (jit-able)."""
    if model.referenced:
        raise Unsupported("referenced subgraphs (IF/WHILE) are not mapped")
    sg = model.main
    conversion.check_types(sg, (*sg.input_indexes, *sg.output_indexes), TYPES)

    def fn(*inputs):
        values = dict(zip(sg.input_indexes, inputs))
        conversion.convert_all(sg, lambda k: run_operation(sg, k, values))
        outs = []
        for i in sg.output_indexes:
            o = sg.operands[i]
            outs.append(jnp.asarray(np.asarray(o.value, o.info.dtype)) if o.is_constant else values[i])
        return tuple(outs)

    return fn


def abstract(o: Operand) -> jax.ShapeDtypeStruct:
    """A stand-in value for tracing one operation alone (unknown dimensions read as 1)."""
    dims = () if o.info.is_scalar else tuple(d if d > 0 else 1 for d in o.dimensions)
    return jax.ShapeDtypeStruct(dims, o.info.dtype)


def operation_supported(model: Model, index: int) -> tuple[bool, str]:
    """Whether operation ``index`` of the main graph maps exactly: trace it alone, abstractly."""
    sg = model.main
    op = sg.operations[index]
    fed = [i for i in dict.fromkeys(op.inputs) if not sg.operands[i].is_constant and not sg.operands[i].is_omitted]
    for i in fed:
        if sg.operands[i].type not in TYPES:
            return False, f"operand of type {sg.operands[i].type.name}"
        if not sg.operands[i].info.is_scalar and not sg.operands[i].dimensions:
            # unknown rank: the mapping depends on it; an honest answer needs it known
            return False, "input of unknown rank"

    def trace(*vals):
        values = dict(zip(fed, vals))
        run_operation(sg, index, values)
        return tuple(values[i] for i in op.outputs)

    def trace_abstractly():
        with q.x64_scope(model):
            jax.eval_shape(trace, *(abstract(sg.operands[i]) for i in fed))

    return conversion.supported(trace_abstractly)
