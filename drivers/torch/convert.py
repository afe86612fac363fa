"""nnconform model -> a plan of torch operations, one small converter per NNAPI operation.

A converter reads the operation's parameters (constants, at conversion time) and returns a
*kernel*: a function from the operation's input tensors (``None`` for an omitted optional
input) to its output tensors, made only of torch operations.  The plan is the kernels in
model order; the device runs it eagerly, or hands the whole plan to ``torch.compile``.

When a mapping would not compute what NNAPI specifies for the operation's data types and
parameters, the converter raises :class:`Unsupported` (the device then reports the operation
unsupported and the suites skip it): nothing here approximates a semantics it cannot match.

Conventions:
- Tensors keep NNAPI's storage types: TENSOR_QUANT8_ASYMM is uint8, the signed and symmetric
  8-bit types are int8, TENSOR_BOOL8 is bool (scale and zero point live in the converter).
- FLOAT16 arithmetic is widened to float32 and narrowed once, as the NNAPI CPU reference does;
  pure data movement stays in the storage type.
- Images: NNAPI is NHWC by default, torch's conv / pool are NCHW: we permute around them.
  NNAPI's explicit paddings may be asymmetric: they are applied with F.pad.
- TENSOR_INT32 arithmetic is done in int64 and narrowed (wrap-around like two's complement).
- Quantised arithmetic is supported only where the integer arithmetic is reproduced exactly:
  data movement and clamps on stored values with unchanged parameters, max pooling,
  arg-max/min, QUANTIZE / DEQUANTIZE, MEAN and the element-wise ADD / SUB / MUL through
  gemmlowp's fixed-point requantisation in int64 (quantfixed.py).
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from nnconform.driver.support import Rejected, Unsupported
from nnconform.drivers.common import activation, op_params
from nnconform.drivers.common import converter as conversion
from nnconform.drivers.common.layout import TO_NCHW, TO_NHWC
from nnconform.drivers.common.types import (
    CASTABLE,
    DATA,
    FILLABLE,
    FLOATS,
    NUMERIC,
    QUANT8,
    movable,
    pad_fill,
    require_same_quant,
    same_quant,
    storage_table,
)
from nnconform.drivers.torch import control_flow, quantfixed
from nnconform.ir import Model, Operand, Subgraph
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.ir import nnapi_params as params
from nnconform.reference.arith import activation as nn_activation
from nnconform.reference.arith.quant import QUANT_RANGE

__all__ = ["Unsupported", "Rejected", "Plan", "build_plan", "operation_supported", "TORCH_DTYPE"]

TORCH_DTYPE = storage_table(torch.float32, torch.float16, torch.int32, torch.bool, torch.uint8, torch.int8)

Kernel = Callable[..., "torch.Tensor | Sequence[torch.Tensor]"]


# ---------------------------------------------------------------------------------------
# Per-operation context and tensor helpers
# ---------------------------------------------------------------------------------------


class OpCtx(conversion.OperationContext):
    """One operation seen by its converter."""

    def __init__(self, sg: Subgraph, index: int, model: Model | None = None, clock: "control_flow.Clock | None" = None):
        super().__init__(sg, index)
        self.sg = sg
        self.model = model  # for IF / WHILE: the referenced subgraphs
        self.clock = clock or control_flow.Clock()

    def out_dtype(self, k: int = 0) -> torch.dtype:
        return TORCH_DTYPE[self.outs[k].type]


def wide(t: torch.Tensor) -> torch.Tensor:
    """A float tensor in float32 (fp16 widened: the reference computes fp16 in float32)."""
    return t.float() if t.dtype == torch.float16 else t


def float_act(t: torch.Tensor, act: int) -> torch.Tensor:
    # Runs inside kernels, which torch.compile traces: the reference's bound table is read
    # directly, as going through activation.float_bounds here made dynamo compile extra graphs
    # (test_compiled_device_compiles_in_prepare_and_execute_only_runs saw it).
    if act == nn_activation.NONE:
        return t
    lo, hi = nn_activation.float_bounds(act)
    return torch.clamp(t, min=None if np.isinf(lo) else lo, max=None if np.isinf(hi) else hi)


check_act = activation.check


def quant_clamp(out: Operand, act: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """Clamp stored quantised values to NNAPI's activation bounds (exact on integers)."""
    bounds = activation.quant_bounds(act, out)
    return (lambda t: t) if bounds is None else (lambda t: torch.clamp(t, *bounds))


# ---------------------------------------------------------------------------------------
# Element-wise arithmetic
# ---------------------------------------------------------------------------------------

_TORCH_ARITH = {Op.ADD: torch.add, Op.SUB: torch.sub, Op.MUL: torch.mul, Op.DIV: torch.div}


def conv_arith(c: OpCtx) -> Kernel:
    a = c.ins[0]
    act = check_act(int(c.scalar(2)))
    fn = _TORCH_ARITH[Op(c.op.type)]
    dt = c.out_dtype()
    if a.type in FLOATS:
        return lambda x, y, _a=None: float_act(fn(wide(x), wide(y)), act).to(dt)
    if a.type == T.TENSOR_INT32:
        if act != nn_activation.NONE:
            raise Unsupported("int32 arithmetic with a fused activation")
        if c.op.type == Op.DIV:
            return _int32_floor_div
        # int64 holds every exact result; narrowing wraps as two's-complement int32 does.
        return lambda x, y, _a=None: fn(x.long(), y.long()).to(torch.int32)
    if a.type in QUANT8 and c.op.type != Op.DIV:
        return quantfixed.arith_kernel(c, Op(c.op.type), act)
    raise Unsupported(a.type.name)


def _int32_floor_div(x, y, _a=None):
    # NNAPI: floor division, a zero divisor gives 0.
    zero = y == 0
    safe = torch.where(zero, torch.ones_like(y), y).long()
    q = torch.div(x.long(), safe, rounding_mode="floor")
    return torch.where(zero, torch.zeros_like(q), q).to(torch.int32)


def conv_minmax(c: OpCtx) -> Kernel:
    a, out = c.ins[0], c.outs[0]
    if a.type in QUANT8 and not (same_quant(a, out) and same_quant(c.ins[1], out)):
        raise Unsupported("quantised MAXIMUM/MINIMUM with requantisation")
    if a.type not in NUMERIC:
        raise Unsupported(a.type.name)
    # std::max(a, b) = a < b ? b : a; std::min(a, b) = b < a ? b : a: ties and NaN as in C++.
    if c.op.type == Op.MAXIMUM:
        return lambda x, y: torch.where(x < y, y, x)
    return lambda x, y: torch.where(y < x, y, x)


def conv_pow(c: OpCtx) -> Kernel:
    c.require(0, FLOATS)
    dt = c.out_dtype()
    return lambda x, y: torch.pow(wide(x), wide(y)).to(dt)


def conv_prelu(c: OpCtx) -> Kernel:
    c.require(0, FLOATS)
    dt = c.out_dtype()

    def kernel(x, alpha):
        xf = wide(x)
        return torch.where(xf < 0, xf * wide(alpha), xf).to(dt)

    return kernel


# ---------------------------------------------------------------------------------------
# Activations and unary math
# ---------------------------------------------------------------------------------------


def _relu(act: int):
    def convert(c: OpCtx) -> Kernel:
        x, out = c.ins[0], c.outs[0]
        if x.type in FLOATS:
            dt = c.out_dtype()
            return lambda t: float_act(wide(t), act).to(dt)
        if x.type in QUANT8:
            if not same_quant(x, out):
                raise Unsupported("quantised RELU with different input and output parameters")
            return quant_clamp(out, act)
        raise Unsupported(x.type.name)

    return convert


def _rsqrt(t):
    return 1.0 / torch.sqrt(t)


def _hard_swish(t):
    return t * torch.clamp(t + 3.0, 0.0, 6.0) / 6.0


_UNARY_FLOAT = {
    Op.LOGISTIC: torch.sigmoid,
    Op.TANH: torch.tanh,
    Op.ABS: torch.abs,
    Op.NEG: torch.neg,
    Op.EXP: torch.exp,
    Op.LOG: torch.log,
    Op.SQRT: torch.sqrt,
    Op.SIN: torch.sin,
    Op.FLOOR: torch.floor,
    Op.RSQRT: _rsqrt,
    Op.HARD_SWISH: _hard_swish,
}


def conv_unary(c: OpCtx) -> Kernel:
    x = c.ins[0]
    fn = _UNARY_FLOAT[Op(c.op.type)]
    if x.type in FLOATS:
        dt = c.out_dtype()
        return lambda t: fn(wide(t)).to(dt)
    if x.type == T.TENSOR_INT32 and c.op.type in (Op.ABS, Op.NEG):
        return lambda t: fn(t.long()).to(torch.int32)  # -INT32_MIN wraps to INT32_MIN
    raise Unsupported(x.type.name)


def conv_elu(c: OpCtx) -> Kernel:
    c.require(0, FLOATS)
    alpha = float(c.scalar(1))
    dt = c.out_dtype()

    def kernel(t, _alpha=None):
        xf = wide(t)
        return torch.where(xf < 0, alpha * torch.expm1(xf), xf).to(dt)

    return kernel


def _softmax(log: bool):
    def convert(c: OpCtx) -> Kernel:
        c.require(0, FLOATS)
        beta = float(c.scalar(1))
        axis = int(c.scalar(2, -1))
        dt = c.out_dtype()
        fn = torch.log_softmax if log else torch.softmax

        def kernel(t, *_):
            return fn(wide(t) * beta, dim=axis).to(dt)

        return kernel

    return convert


def conv_l2_normalization(c: OpCtx) -> Kernel:
    x = c.require(0, DATA)
    axis = int(c.scalar(1, -1))
    if x.type in QUANT8:
        xd = c.dims(x)
        if xd[axis % len(xd)] > (1 << 16):
            raise Unsupported("a slice of more than 2**16 elements (the exact fold is unrolled)")
        return quantfixed.l2_normalization_kernel(c, axis)
    dt = c.out_dtype()

    def kernel(t, *_):
        xf = wide(t)
        norm = torch.sqrt(torch.sum(xf * xf, dim=axis, keepdim=True))
        return (xf / torch.clamp(norm, min=1e-6)).to(dt)

    return kernel


# ---------------------------------------------------------------------------------------
# Comparisons, logical, select
# ---------------------------------------------------------------------------------------

_COMPARE = {
    Op.EQUAL: torch.eq,
    Op.NOT_EQUAL: torch.ne,
    Op.GREATER: torch.gt,
    Op.GREATER_EQUAL: torch.ge,
    Op.LESS: torch.lt,
    Op.LESS_EQUAL: torch.le,
}


def conv_compare(c: OpCtx) -> Kernel:
    a, b = c.ins[0], c.ins[1]
    fn = _COMPARE[Op(c.op.type)]
    if a.type in QUANT8:
        # Stored values order like real values only under the same scale and zero point.
        if not same_quant(a, b):
            raise Unsupported("quantised comparison with different parameters")
        return lambda x, y: fn(x, y)
    if a.type in FLOATS or a.type == T.TENSOR_INT32:
        return lambda x, y: fn(x, y)
    if a.type == T.TENSOR_BOOL8:  # false < true, as integers
        return lambda x, y: fn(x.to(torch.int32), y.to(torch.int32))
    raise Unsupported(a.type.name)


def conv_logical(c: OpCtx) -> Kernel:
    c.require(0, (T.TENSOR_BOOL8,))
    if c.op.type == Op.LOGICAL_NOT:
        return torch.logical_not
    return torch.logical_and if c.op.type == Op.LOGICAL_AND else torch.logical_or


def conv_select(c: OpCtx) -> Kernel:
    c.require(1, NUMERIC, "SELECT's input 1")
    require_same_quant(c, (1, 2), "SELECT")
    return lambda cond, x, y: torch.where(cond, x, y)


# ---------------------------------------------------------------------------------------
# Convolutions, fully connected, pooling (floats)
# ---------------------------------------------------------------------------------------


def conv_args(c: OpCtx, n_extra: int):
    """(pads (left, right, top, bottom) as F.pad takes them, strides (h, w), dilations (h, w),
    extra, act, nchw).  GROUPED_CONV_2D has no dilation inputs."""
    p = params.conv_params(c, n_extra, dilation=c.op.type != Op.GROUPED_CONV_2D)
    return (p.pad_left, p.pad_right, p.pad_top, p.pad_bottom), p.strides, p.dilations, p.extra, p.activation, p.nchw


def _float_conv(c: OpCtx, n_extra: int, filter_perm, groups_of) -> Kernel:
    """CONV_2D / DEPTHWISE / GROUPED on floats: F.conv2d on an NCHW input padded with F.pad."""
    x, f = c.ins[0], c.ins[1]
    if x.type not in FLOATS:
        if x.type in QUANT8:
            return quantfixed.conv_kernel(c, n_extra, filter_perm, groups_of)
        raise Unsupported(x.type.name)
    if f.type != x.type or c.ins[2].type != x.type:
        raise Unsupported("mixed filter or bias type")
    pads, strides, dil, extra, act, nchw = conv_args(c, n_extra)
    groups = groups_of(c, extra, nchw)
    dt = c.out_dtype()

    def kernel(t, w, b, *_):
        xin = wide(t) if nchw else wide(t).permute(TO_NCHW)
        y = F.conv2d(
            F.pad(xin, pads), wide(w).permute(filter_perm), wide(b), stride=strides, dilation=dil, groups=groups
        )
        y = float_act(y, act)
        return (y if nchw else y.permute(TO_NHWC)).contiguous().to(dt)

    return kernel


def _groups_conv(c, extra, nchw):
    return 1


def _groups_grouped(c, extra, nchw):
    return extra[0]


def _groups_depthwise(c, extra, nchw):
    return op_params.depthwise_channels(c, extra[0], nchw)


def conv_conv_2d(c: OpCtx) -> Kernel:
    return _float_conv(c, 0, (0, 3, 1, 2), _groups_conv)


def conv_grouped_conv_2d(c: OpCtx) -> Kernel:
    return _float_conv(c, 1, (0, 3, 1, 2), _groups_grouped)


def conv_depthwise_conv_2d(c: OpCtx) -> Kernel:
    # [1, fh, fw, C*mult] -> [C*mult, 1, fh, fw]: output channel c*mult + m belongs to group c.
    return _float_conv(c, 1, (3, 0, 1, 2), _groups_depthwise)


def conv_fully_connected(c: OpCtx) -> Kernel:
    x, w, out = c.ins[0], c.ins[1], c.outs[0]
    act = check_act(int(c.scalar(3)))
    n_units, k = c.dims(w)
    out_shape = c.dims(out)
    if x.type not in FLOATS:
        if x.type in QUANT8:
            return quantfixed.fully_connected_kernel(c, act)
        raise Unsupported(x.type.name)
    if w.type != x.type:
        raise Unsupported("mixed weight type")
    dt = c.out_dtype()

    def kernel(t, wt, b, *_):
        y = wide(t).reshape(-1, k) @ wide(wt).t()
        if b is not None:
            y = y + wide(b)
        return float_act(y, act).reshape(out_shape).to(dt)

    return kernel


def transpose_conv_args(c: OpCtx):
    """((left, right, top, bottom) paddings, strides (h, w), act, nchw)."""
    p = params.transpose_conv_params(c)
    return (p.pad_left, p.pad_right, p.pad_top, p.pad_bottom), p.strides, p.activation, p.nchw


def conv_transpose_conv_2d(c: OpCtx) -> Kernel:
    x, f = c.ins[0], c.ins[1]
    if x.type in QUANT8:
        return quantfixed.transpose_conv_kernel(c)
    if x.type not in FLOATS:
        raise Unsupported(x.type.name)
    if f.type != x.type:
        raise Unsupported("mixed filter type")
    (pl, pr, pt, pb), strides, act, nchw = transpose_conv_args(c)
    dt = c.out_dtype()
    # The full transposed convolution, then NNAPI's paddings cropped from it (a negative tail
    # padding grows the output, where only the bias lands): F.pad with negated paddings.
    crop = (-pl, -pr, -pt, -pb)

    def kernel(t, w, b, *_):
        xin = wide(t) if nchw else wide(t).permute(TO_NCHW)
        y = F.conv_transpose2d(xin, wide(w).permute(3, 0, 1, 2), stride=strides)
        y = F.pad(y, crop) + wide(b).reshape(1, -1, 1, 1)
        y = float_act(y, act)
        return (y if nchw else y.permute(TO_NHWC)).contiguous().to(dt)

    return kernel


def pool_args(c: OpCtx):
    p = params.pool_params(c)
    return (p.pad_left, p.pad_right, p.pad_top, p.pad_bottom), p.strides, p.window, p.activation, p.nchw


def _pool(kind: str):
    def convert(c: OpCtx) -> Kernel:
        x, out = c.ins[0], c.outs[0]
        pads, strides, window, act, nchw = pool_args(c)
        if x.type in QUANT8:
            if kind == "l2" or not same_quant(x, out):
                raise Unsupported("quantised L2 pooling or pooling with other output parameters")
            clamp = quant_clamp(out, act)
            if kind == "avg":

                def qavg(t, *_):
                    # The stored values summed over the in-image cells (exact in float64),
                    # divided by their count rounding half away from zero, as integers.
                    xin = (t if nchw else t.permute(TO_NCHW)).double()
                    acc = F.avg_pool2d(F.pad(xin, pads), window, strides, divisor_override=1).long()
                    ones = F.pad(torch.ones_like(xin[:1, :1]), pads)
                    count = F.avg_pool2d(ones, window, strides, divisor_override=1).long()
                    avg = torch.sign(acc) * torch.div(torch.abs(acc) + count // 2, count, rounding_mode="floor")
                    y = clamp(avg).to(t.dtype)
                    return (y if nchw else y.permute(TO_NHWC)).contiguous()

                return qavg
            low = float(QUANT_RANGE[x.type][0]) - 1.0

            def qmax(t, *_):
                # Stored values order like real values; padding never wins (below qmin).
                xin = (t if nchw else t.permute(TO_NCHW)).float()
                y = F.max_pool2d(F.pad(xin, pads, value=low), window, strides)
                y = clamp(y.to(t.dtype))
                return (y if nchw else y.permute(TO_NHWC)).contiguous()

            return qmax
        if x.type not in FLOATS:
            raise Unsupported(x.type.name)
        dt = c.out_dtype()

        def kernel(t, *_):
            xin = wide(t) if nchw else wide(t).permute(TO_NCHW)
            if kind == "max":
                y = F.max_pool2d(F.pad(xin, pads, value=-float("inf")), window, strides)
            else:
                v = xin * xin if kind == "l2" else xin
                # NNAPI averages over the window's cells inside the image only.
                total = F.avg_pool2d(F.pad(v, pads), window, strides, divisor_override=1)
                ones = F.pad(torch.ones_like(v[:1, :1]), pads)
                count = F.avg_pool2d(ones, window, strides, divisor_override=1)
                y = total / count
                if kind == "l2":
                    y = torch.sqrt(y)
            y = float_act(y, act)
            return (y if nchw else y.permute(TO_NHWC)).contiguous().to(dt)

        return kernel

    return convert


# ---------------------------------------------------------------------------------------
# Quantisation and casts
# ---------------------------------------------------------------------------------------


def round_half_away(t: torch.Tensor) -> torch.Tensor:
    """std::round, exact for every finite float (x - trunc(x) is exact)."""
    tr = torch.trunc(t)
    return tr + torch.where(torch.abs(t - tr) >= 0.5, torch.sign(t), torch.zeros_like(t))


def conv_quantize(c: OpCtx) -> Kernel:
    c.require(0, FLOATS)
    out = c.outs[0]
    if out.type not in QUANT8:
        raise Unsupported(out.type.name)
    lo, hi = QUANT_RANGE[out.type]
    scale, zp = float(np.float32(out.scale)), out.zero_point
    dt = c.out_dtype()

    def kernel(t):
        # float32 division (not a reciprocal multiply), round half away, clamp with NaN -> qmax.
        q = round_half_away(wide(t) / torch.tensor(scale, dtype=torch.float32)).double() + zp
        q = torch.where(torch.isnan(q), torch.full_like(q, hi), torch.clamp(q, lo, hi))
        return q.to(dt)

    return kernel


def conv_dequantize(c: OpCtx) -> Kernel:
    d = op_params.dequantize(c)
    dt = c.out_dtype()
    scale, zp = torch.tensor(d.scale_for(c.ins[0])), d.zero_point
    return lambda t: ((t.to(torch.int32) - zp).float() * scale).to(dt)


def conv_cast(c: OpCtx) -> Kernel:
    x, out = c.ins[0], c.outs[0]
    if x.type == out.type and x.type in TORCH_DTYPE:
        if x.type in QUANT8 and not same_quant(x, out):
            raise Unsupported("quantised CAST with other parameters")
        return lambda t: t.clone()
    if x.type not in CASTABLE or out.type not in CASTABLE:
        raise Unsupported(f"{x.type.name} -> {out.type.name}")
    dt = c.out_dtype()
    if out.type == T.TENSOR_QUANT8_ASYMM:
        # NNAPI saturates into 0..255 (truncating floats toward zero); torch's cast wraps.
        if x.type in FLOATS:
            return lambda t: torch.trunc(torch.clamp(wide(t), 0.0, 255.0)).to(dt)
        return lambda t: torch.clamp(t, 0, 255).to(dt)
    if out.type == T.TENSOR_INT32 and x.type in FLOATS:
        # NNAPI (ARM64) saturates out-of-range floats and gives 0 for NaN.
        def kernel(t):
            xf = wide(t).double()
            xf = torch.where(torch.isnan(xf), torch.zeros_like(xf), xf)
            return torch.trunc(torch.clamp(xf, -(2.0**31), 2.0**31 - 1)).to(torch.int32)

        return kernel
    if out.type == T.TENSOR_FLOAT16 and x.type == T.TENSOR_INT32:
        return lambda t: t.float().to(dt)  # int32 -> float32 -> float16, as the reference
    return lambda t: t.to(dt)


# ---------------------------------------------------------------------------------------
# Data movement
# ---------------------------------------------------------------------------------------


def conv_reshape(c: OpCtx) -> Kernel:
    movable(c)
    if not c.ins[1].is_constant:
        raise Unsupported("a run-time shape")
    shape = [int(v) for v in c.const(1).reshape(-1)]
    return lambda t, _s: t.reshape(shape).clone()


def conv_squeeze(c: OpCtx) -> Kernel:
    movable(c)
    axes = op_params.squeeze_axes(c)
    rank = c.rank(c.ins[0])

    def kernel(t, _a=None):
        shape = [d for i, d in enumerate(t.shape) if i not in axes]
        return t.reshape(shape or [1]).clone()

    return kernel if len(axes) < rank else (lambda t, _a=None: t.reshape([1]).clone())


def conv_expand_dims(c: OpCtx) -> Kernel:
    movable(c)
    axis = int(c.scalar(1))
    return lambda t, _a: t.unsqueeze(axis).clone()


def conv_transpose(c: OpCtx) -> Kernel:
    movable(c)
    perm = op_params.transpose_perm(c)
    return lambda t, _p=None: t.permute(perm).contiguous()


def conv_concatenation(c: OpCtx) -> Kernel:
    out = c.outs[0]
    n = len(c.ins) - 1
    axis = int(c.scalar(n))
    for k in range(n):
        c.require(k, NUMERIC)
    require_same_quant(c, range(n), "CONCATENATION", out)
    return lambda *ts: torch.cat(list(ts[:n]), dim=axis)


def conv_gather(c: OpCtx) -> Kernel:
    movable(c, 0, NUMERIC)
    axis = int(c.scalar(1))
    r = c.rank(c.ins[0])
    axis %= r

    def kernel(t, _a, idx):
        flat = torch.index_select(t, axis, idx.reshape(-1).long())
        return flat.reshape(list(t.shape[:axis]) + list(idx.shape) + list(t.shape[axis + 1 :]))

    return kernel


def _pad_list(pads: np.ndarray) -> list[int]:
    """NNAPI [[before, after] per dimension] -> F.pad's last-dimension-first list."""
    out = []
    for before, after in pads[::-1]:
        out += [int(before), int(after)]
    return out


def conv_pad(c: OpCtx) -> Kernel:
    v2 = c.op.type == Op.PAD_V2
    x = movable(c, 0, NUMERIC if v2 else DATA)
    pads = op_params.paddings(c)
    v = pad_fill(c, x, 2 if v2 else None).item()
    plist = _pad_list(pads)

    def kernel(t, *_):
        if t.dtype in (torch.float32, torch.float16):
            return F.pad(t, plist, value=float(v))
        # F.pad's constant mode takes integer tensors through a float fill: pad explicitly.
        shape = [d + int(b) + int(a) for d, (b, a) in zip(t.shape, pads)]
        y = torch.full(shape, int(v), dtype=t.dtype)
        index = tuple(slice(int(b), int(b) + d) for d, (b, _a) in zip(t.shape, pads))
        y[index] = t
        return y

    return kernel


def conv_mirror_pad(c: OpCtx) -> Kernel:
    movable(c, 0, NUMERIC)
    pads, mode_name = op_params.mirror_pad(c)
    mode = 0 if mode_name == "reflect" else 1
    xd = c.dims(c.ins[0])
    # Index maps per dimension, computed once: REFLECT skips the edge, SYMMETRIC repeats it.
    index = []
    for d, (b, a) in zip(xd, pads):
        b, a = int(b), int(a)
        limit = d - 1 if mode == 0 else d
        if b > limit or a > limit:
            raise Unsupported(f"padding {b, a} beyond the mirror of a dimension of {d}")
        pos = np.arange(-b, d + a)
        if mode == 0:
            pos = np.abs(pos)
            pos = np.where(pos >= d, 2 * (d - 1) - pos, pos)
        else:
            pos = np.where(pos < 0, -pos - 1, pos)
            pos = np.where(pos >= d, 2 * d - 1 - pos, pos)
        index.append(torch.tensor(pos, dtype=torch.long))

    def kernel(t, *_):
        for axis, idx in enumerate(index):
            t = torch.index_select(t, axis, idx)
        return t

    return kernel


def conv_slice(c: OpCtx) -> Kernel:
    movable(c, 0, NUMERIC)
    begin, end = params.slice_bounds(c, c.dims(c.ins[0]))
    index = tuple(slice(b, e) for b, e in zip(begin, end))
    return lambda t, *_: t[index].clone()


def conv_strided_slice(c: OpCtx) -> Kernel:
    movable(c, 0, DATA)
    xd = c.dims(c.ins[0])
    s = params.strided_slice(c, xd)
    index = [torch.tensor(s.positions(i), dtype=torch.long) for i in range(len(xd))]
    out_shape = s.out_shape

    def kernel(t, *_):
        for axis, idx in enumerate(index):  # negative strides too: an explicit index list
            t = torch.index_select(t, axis, idx)
        return t.reshape(out_shape)

    return kernel


def conv_split(c: OpCtx) -> Kernel:
    movable(c, 0, NUMERIC)
    axis, n = op_params.split(c)
    return lambda t, *_: [p.clone() for p in torch.chunk(t, n, dim=axis)]


def conv_tile(c: OpCtx) -> Kernel:
    movable(c, 0, NUMERIC)
    if not c.ins[1].is_constant:
        raise Unsupported("run-time multiples")
    mult = [int(m) for m in c.const(1).reshape(-1)]
    return lambda t, _m: t.repeat(mult)


def conv_reverse(c: OpCtx) -> Kernel:
    movable(c, 0, NUMERIC)
    axes = [int(a) for a in c.const(1).reshape(-1)]
    if len(axes) != 1:
        raise Unsupported("REVERSE over several axes")
    return lambda t, _a: torch.flip(t, axes)


def conv_depth_space(c: OpCtx) -> Kernel:
    movable(c, 0, DATA)
    bs, nchw = op_params.depth_space(c)
    fn = F.pixel_shuffle if c.op.type == Op.DEPTH_TO_SPACE else F.pixel_unshuffle
    to_space = c.op.type == Op.DEPTH_TO_SPACE

    def kernel(t, *_):
        x = t if nchw else t.permute(TO_NCHW)
        n, ch, h, w = x.shape
        if to_space:
            # NNAPI (TF) orders the depth as (block row, block col, channel): DCR, which is
            # pixel_shuffle after regrouping the channels.
            x = x.reshape(n, bs * bs, ch // (bs * bs), h, w).transpose(1, 2).reshape(n, ch, h, w)
            y = fn(x, bs)
        else:
            y = fn(x, bs)
            oc = y.shape[1]
            y = (
                y.reshape(n, oc // (bs * bs), bs * bs, h // bs, w // bs)
                .transpose(1, 2)
                .reshape(n, oc, h // bs, w // bs)
            )
        return (y if nchw else y.permute(TO_NHWC)).contiguous()

    return kernel


def conv_batch_space(c: OpCtx) -> Kernel:
    x = movable(c, 0, DATA)
    p = op_params.batch_space(c)
    nchw, fill = p.nchw, pad_fill(c, x, None).item()
    view, perm, shape = p.space_to_batch_shapes() if p.to_batch else p.batch_to_space_shapes()
    pt, _, pl, _ = p.pads
    hp, wp = p.padded

    def kernel(t, *_):
        y = t.permute(TO_NHWC) if nchw else t
        if p.to_batch:  # torch's constant pad fills integers through a float: pad by hand
            padded = torch.full((p.batch, hp, wp, p.channels), fill, dtype=t.dtype)
            padded[:, pt : pt + p.height, pl : pl + p.width, :] = y
            y = padded
        y = y.reshape(view).permute(perm).reshape(shape)
        return (y.permute(TO_NCHW) if nchw else y).contiguous()

    return kernel


def conv_channel_shuffle(c: OpCtx) -> Kernel:
    movable(c, 0, DATA)
    s = op_params.channel_shuffle(c)
    return lambda t, *_: t.reshape(s.grouped).permute(s.perm).reshape(s.dims).contiguous()


def conv_embedding_lookup(c: OpCtx) -> Kernel:
    movable(c, 1, NUMERIC)
    return lambda idx, table: torch.index_select(table, 0, idx.long())


def conv_pack(c: OpCtx) -> Kernel:
    axis = int(c.scalar(0))
    for k in range(1, len(c.ins)):
        movable(c, k, NUMERIC)
    return lambda _a, *ts: torch.stack(list(ts), dim=axis)


# ---------------------------------------------------------------------------------------
# Resize (index and weight tables computed once, as the reference computes them)
# ---------------------------------------------------------------------------------------


def _tensors(*tables):
    return [tuple(torch.tensor(a) for a in t) for t in tables]


def conv_resize_bilinear(c: OpCtx) -> Kernel:
    x, out = c.ins[0], c.outs[0]
    if x.type in QUANT8:
        if not same_quant(x, out):
            raise Unsupported("quantised RESIZE_BILINEAR with other output parameters")
    elif x.type not in FLOATS:
        raise Unsupported(x.type.name)
    r = op_params.resize(c)
    nchw = r.nchw
    dt = TORCH_DTYPE[x.type]
    if x.type == T.TENSOR_QUANT8_ASYMM_SIGNED:
        return _bilinear_int8(r)
    (ylo, yhi, fy), (xlo, xhi, fx) = _tensors(*r.bilinear())
    fy, fx = fy.reshape(1, -1, 1, 1), fx.reshape(1, 1, -1, 1)
    truncate = x.type == T.TENSOR_QUANT8_ASYMM

    def kernel(t, *_):
        v = (t.permute(TO_NHWC) if nchw else t).float()
        top, bottom = v[:, ylo], v[:, yhi]
        # The reference's blend: the same association and order, in float32 (so that the
        # quantised truncation toward zero lands on the same integers).
        y = (
            top[:, :, xlo] * (1 - fy) * (1 - fx)
            + bottom[:, :, xlo] * fy * (1 - fx)
            + top[:, :, xhi] * (1 - fy) * fx
            + bottom[:, :, xhi] * fy * fx
        )
        if truncate:
            y = torch.trunc(y)
        y = y.to(dt)
        return (y.permute(TO_NCHW) if nchw else y).contiguous()

    return kernel


def _bilinear_int8(r: op_params.Resize) -> Kernel:
    """TFLite's int8 kernel (the reference's for TENSOR_QUANT8_ASYMM_SIGNED): source
    coordinates in 1/1024 pixel units."""
    nchw = r.nchw
    (ylo, yhi, wy), (xlo, xhi, wx) = _tensors(*r.bilinear_fixed())
    wy, wx = wy.reshape(1, -1, 1, 1), wx.reshape(1, 1, -1, 1)
    one = 1 << 10

    def kernel(t, *_):
        v = (t.permute(TO_NHWC) if nchw else t).long()
        top, bottom = v[:, ylo], v[:, yhi]
        acc = (
            top[:, :, xlo] * (one - wy) * (one - wx)
            + bottom[:, :, xlo] * wy * (one - wx)
            + top[:, :, xhi] * (one - wy) * wx
            + bottom[:, :, xhi] * wy * wx
        )
        # round half away from zero from 1/2**20 units (C division truncates toward zero)
        nudged = acc + torch.where(acc > 0, 1 << 19, -(1 << 19))
        y = torch.div(nudged, 1 << 20, rounding_mode="trunc").to(torch.int8)
        return (y.permute(TO_NCHW) if nchw else y).contiguous()

    return kernel


def conv_resize_nearest(c: OpCtx) -> Kernel:
    movable(c, 0, DATA)
    r = op_params.resize(c)
    yi, xi = (torch.tensor(idx, dtype=torch.long) for idx in r.nearest())
    hd, wd = (2, 3) if r.nchw else (1, 2)
    return lambda t, *_: torch.index_select(torch.index_select(t, hd, yi), wd, xi)


# ---------------------------------------------------------------------------------------
# Reductions, arg-max/min
# ---------------------------------------------------------------------------------------


def conv_argminmax(c: OpCtx) -> Kernel:
    x = c.require(0, NUMERIC)
    axis = int(c.scalar(1)) % c.rank(x)
    is_max = c.op.type == Op.ARGMAX
    # The reference's loop: ties go to the lowest index (as torch's argmax / argmin), a NaN
    # never beats the best so far, and a leading NaN is never replaced (the answer is 0).
    fill = -float("inf") if is_max else float("inf")

    def kernel(t, _a):
        v = t.long() if t.dtype in (torch.uint8, torch.int8, torch.int32) else wide(t)
        if v.is_floating_point():
            nan = torch.isnan(v)
            v = torch.where(nan, torch.full_like(v, fill), v)
            r = torch.argmax(v, dim=axis) if is_max else torch.argmin(v, dim=axis)
            r = torch.where(nan.select(axis, 0), torch.zeros_like(r), r)
        else:
            r = torch.argmax(v, dim=axis) if is_max else torch.argmin(v, dim=axis)
        r = r.to(torch.int32)
        return r.reshape([1]) if r.dim() == 0 else r

    return kernel


def _reduce(kind: str, types):
    def convert(c: OpCtx) -> Kernel:
        x, red = op_params.reduction(c, types)
        axes, keep = red.axes, red.keep
        dt = c.out_dtype()
        finish = _reduced_shape(red)
        if kind == "prod":
            return _sequential_prod(c, x, axes, keep)
        if kind in ("all", "any"):
            fn = torch.all if kind == "all" else torch.any

            def boolean(t, *_):
                y = t
                for a in reversed(axes):
                    y = fn(y, dim=a, keepdim=keep)
                return finish(y)

            return boolean
        if kind == "sum":
            return lambda t, *_: finish(torch.sum(wide(t), dim=axes, keepdim=keep).to(dt))
        is_max = kind == "max"
        if x.type in QUANT8:
            return lambda t, *_: finish(
                torch.amax(t, dim=axes, keepdim=keep) if is_max else torch.amin(t, dim=axes, keepdim=keep)
            )
        # The reference folds from the lowest (highest) finite value and skips NaN.
        finite = float(np.finfo(np.float16 if x.type == T.TENSOR_FLOAT16 else np.float32).max)
        start = -finite if is_max else finite

        def kernel(t, *_):
            v = wide(t)
            v = torch.where(torch.isnan(v), torch.full_like(v, start), v)
            y = torch.amax(v, dim=axes, keepdim=keep) if is_max else torch.amin(v, dim=axes, keepdim=keep)
            y = torch.clamp(y, min=start) if is_max else torch.clamp(y, max=start)
            return finish(y.to(dt))

        return kernel

    return convert


def _reduced_shape(red: op_params.Reduction):
    return (lambda y: y.reshape([1])) if red.to_one else (lambda y: y)


def _sequential_prod(c: OpCtx, x: Operand, axes, keep: bool) -> Kernel:
    """REDUCE_PROD as the reference folds it: in row-major order, in the storage type, and a
    zero on either side of a step gives 0 (an underflow to 0 sticks even against inf).
    torch.prod has no defined order or zero rule, so the fold is unrolled (small groups)."""
    fold = op_params.sequential_fold(c.dims(x), axes, keep)
    k, shape, perm = fold.count, fold.shape, fold.perm

    def kernel(t, *_):
        v = t.permute(perm).reshape(-1, k)
        acc = v[:, 0]
        for j in range(1, k):
            p = v[:, j]
            zero = (acc == 0) | (p == 0)
            acc = torch.where(zero, torch.zeros_like(acc), acc * p)
        return acc.reshape(shape)

    return kernel


def conv_mean(c: OpCtx) -> Kernel:
    x, red = op_params.reduction(c, DATA, "MEAN")
    axes, keep = red.axes, red.keep
    finish = _reduced_shape(red)
    dt = c.out_dtype()
    if x.type in FLOATS:
        return lambda t, *_: finish(torch.mean(wide(t), dim=axes, keepdim=keep).to(dt))
    xd = c.dims(x)
    count = int(np.prod([xd[a] for a in axes]))
    # trunc(sum of stored values / count) in integers.
    return lambda t, *_: finish(
        torch.div(torch.sum(t.long(), dim=axes, keepdim=keep), count, rounding_mode="trunc").to(dt)
    )


# ---------------------------------------------------------------------------------------
# Matrix products, normalisations, shapes
# ---------------------------------------------------------------------------------------


def conv_batch_matmul(c: OpCtx) -> Kernel:
    a = c.ins[0]
    if a.type not in FLOATS + (T.TENSOR_INT32,):
        raise Unsupported(a.type.name)
    adj_a, adj_b = bool(c.scalar(2, False)), bool(c.scalar(3, False))
    dt = c.out_dtype()

    def kernel(x, y, *_):
        if a.type == T.TENSOR_INT32:
            x, y = x.long(), y.long()  # int64 products and sums, narrowed: two's complement
        else:
            x, y = wide(x), wide(y)
        if adj_a:
            x = x.transpose(-1, -2)
        if adj_b:
            y = y.transpose(-1, -2)
        return torch.matmul(x, y).to(dt)

    return kernel


def conv_instance_normalization(c: OpCtx) -> Kernel:
    c.require(0, FLOATS)
    gamma, beta, eps, nchw = op_params.instance_norm(c)
    dims = (2, 3) if nchw else (1, 2)
    dt = c.out_dtype()

    def kernel(t, *_):
        xf = wide(t)
        mean = torch.mean(xf, dim=dims, keepdim=True)
        var = torch.mean((xf - mean) ** 2, dim=dims, keepdim=True)
        return ((xf - mean) * gamma / torch.sqrt(var + eps) + beta).to(dt)

    return kernel


def conv_local_response_normalization(c: OpCtx) -> Kernel:
    x = c.require(0, FLOATS)
    p = op_params.lrn(c, c.rank(x))
    radius, bias, alpha, beta, axis = p.radius, p.bias, p.alpha, p.beta, p.axis
    size = 2 * radius + 1
    dt = c.out_dtype()

    def kernel(t, *_):
        xf = wide(t).movedim(axis, -1)
        sq = F.pad(xf * xf, (radius, radius))
        total = sq.unfold(-1, size, 1).sum(-1)
        y = xf / torch.pow(bias + alpha * total, beta)
        return y.movedim(-1, axis).contiguous().to(dt)

    return kernel


def conv_rank(c: OpCtx) -> Kernel:
    return lambda t: torch.tensor(t.dim(), dtype=torch.int32)


def conv_fill(c: OpCtx) -> Kernel:
    out = c.outs[0]
    if out.type not in FILLABLE:
        raise Unsupported(out.type.name)
    if not c.ins[0].is_constant:
        raise Unsupported("a run-time shape")
    shape = [int(v) for v in c.const(0).reshape(-1)]
    value = c.scalar(1)
    dt = c.out_dtype()
    return lambda *_: torch.full(shape, value, dtype=dt)


# ---------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------

# Every conv_<operation> function above converts that operation (conversion.by_name); the
# table lists the others: factory-built converters and converters shared by several operations.
CONVERTERS: dict[Op, Callable[[OpCtx], Kernel]] = conversion.by_name(
    globals(),
    {
        Op.ADD: conv_arith,
        Op.SUB: conv_arith,
        Op.MUL: conv_arith,
        Op.DIV: conv_arith,
        Op.MAXIMUM: conv_minmax,
        Op.MINIMUM: conv_minmax,
        Op.RELU: _relu(nn_activation.RELU),
        Op.RELU1: _relu(nn_activation.RELU1),
        Op.RELU6: _relu(nn_activation.RELU6),
        **{op: conv_unary for op in _UNARY_FLOAT},
        Op.SOFTMAX: _softmax(False),
        Op.LOG_SOFTMAX: _softmax(True),
        **{op: conv_compare for op in _COMPARE},
        Op.LOGICAL_AND: conv_logical,
        Op.LOGICAL_OR: conv_logical,
        Op.LOGICAL_NOT: conv_logical,
        Op.BATCH_TO_SPACE_ND: conv_batch_space,
        Op.SPACE_TO_BATCH_ND: conv_batch_space,
        Op.AVERAGE_POOL_2D: _pool("avg"),
        Op.MAX_POOL_2D: _pool("max"),
        Op.L2_POOL_2D: _pool("l2"),
        Op.PAD_V2: conv_pad,
        Op.DEPTH_TO_SPACE: conv_depth_space,
        Op.SPACE_TO_DEPTH: conv_depth_space,
        Op.ARGMAX: conv_argminmax,
        Op.ARGMIN: conv_argminmax,
        Op.RESIZE_NEAREST_NEIGHBOR: conv_resize_nearest,
        Op.REDUCE_SUM: _reduce("sum", FLOATS),
        Op.REDUCE_PROD: _reduce("prod", FLOATS),
        Op.REDUCE_MAX: _reduce("max", DATA),
        Op.REDUCE_MIN: _reduce("min", DATA),
        Op.REDUCE_ALL: _reduce("all", (T.TENSOR_BOOL8,)),
        Op.REDUCE_ANY: _reduce("any", (T.TENSOR_BOOL8,)),
        Op.IF: control_flow.conv_if,
        Op.WHILE: control_flow.conv_while,
    },
)


# ---------------------------------------------------------------------------------------
# Whole models
# ---------------------------------------------------------------------------------------


def convert_operation(
    sg: Subgraph, index: int, model: Model | None = None, clock: "control_flow.Clock | None" = None
) -> Kernel:
    """The kernel of one operation; Unsupported when it cannot be mapped faithfully."""
    op = sg.operations[index]
    fn = conversion.lookup(CONVERTERS, op, "torch")
    conversion.check_operation_types(sg, op, TORCH_DTYPE)
    return fn(OpCtx(sg, index, model, clock))


def operation_supported(model: Model, index: int) -> tuple[bool, str]:
    return conversion.supported(lambda: convert_operation(model.main, index, model))


def _const_tensor(o: Operand) -> torch.Tensor:
    return torch.tensor(np.array(o.value, dtype=o.info.dtype))


class Plan:
    """A subgraph's operations as torch kernels, in model order (the main graph unless told
    otherwise).  ``run`` maps the subgraph's input tensors to its output tensors; it only
    calls torch and Python control flow (compilable).  ``clock`` holds the loop timeout and
    deadline of the current execution for WHILE."""

    def __init__(self, model: Model, sg: Subgraph | None = None, clock: "control_flow.Clock | None" = None):
        sg = model.main if sg is None else sg
        self.clock = clock or control_flow.Clock()
        conversion.check_types(sg, (*sg.input_indexes, *sg.output_indexes), TORCH_DTYPE)
        self.steps: list[tuple[Kernel, tuple[int, ...], tuple[int, ...]]] = []
        self.constants: dict[int, torch.Tensor | None] = {}
        for k, op in enumerate(sg.operations):
            with conversion.operation_context(sg, k):
                kernel = convert_operation(sg, k, model, self.clock)
            self.steps.append((kernel, tuple(op.inputs), tuple(op.outputs)))
            for i in op.inputs:
                o = sg.operands[i]
                if o.is_constant and o.type in TORCH_DTYPE and i not in self.constants:
                    self.constants[i] = _const_tensor(o)
                elif o.is_omitted or o.type == T.SUBGRAPH or o.is_constant:
                    self.constants.setdefault(i, None)  # read at conversion time, or absent
        for i in sg.output_indexes:  # an output may be a constant no operation reads
            if sg.operands[i].is_constant and sg.operands[i].type in TORCH_DTYPE:
                self.constants.setdefault(i, _const_tensor(sg.operands[i]))
        self.inputs = tuple(sg.input_indexes)
        self.outputs = tuple(sg.output_indexes)

    def run(self, *inputs: torch.Tensor) -> list[torch.Tensor]:
        env: dict[int, torch.Tensor | None] = dict(self.constants)
        env.update(zip(self.inputs, inputs))
        for kernel, ins, outs in self.steps:
            result = kernel(*[env[i] for i in ins])
            if len(outs) == 1:
                env[outs[0]] = result[0] if isinstance(result, (list, tuple)) else result
            else:
                env.update(zip(outs, result))
        return [env[i] for i in self.outputs]


def build_plan(model: Model) -> Plan:
    return Plan(model)
