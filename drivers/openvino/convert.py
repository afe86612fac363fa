"""nnconform model -> OpenVINO graph (openvino.opsetN), one small function per NNAPI operation.

Each converter receives an :class:`OpCtx` and builds OpenVINO nodes for the operation's
outputs.  When the mapping would not compute what NNAPI specifies for the operation's data
types and parameters, it raises :class:`Unsupported` (the device reports the operation
unsupported and the suites skip it, or a partitioned run gives it to the reference): nothing
here approximates a semantics it cannot match.

Conventions:
- Tensors keep NNAPI's storage types: TENSOR_QUANT8_ASYMM is u8, TENSOR_QUANT8_ASYMM_SIGNED /
  _SYMM / _SYMM_PER_CHANNEL are i8, BOOL8 is boolean.
- Scalar parameters (padding scheme, strides, activation, axis, ...) must be constants: they
  become node attributes or constants.  A parameter fed at run time is unsupported.
- FLOAT16 arithmetic is widened to f32 and narrowed once, as the NNAPI CPU reference does;
  pure data movement stays in f16.
- Images: NNAPI is NHWC by default, OpenVINO's Convolution/Pool are NCHW: we transpose around
  them.
- Quantised data: only what is exact on the stored integers (data movement with the same
  scale and zero point, clamps for RELU*/fused activations, MAX_POOL, REDUCE_MAX/MIN,
  ARGMAX/ARGMIN, QUANTIZE, DEQUANTIZE, CAST).  Quantised arithmetic needs NNAPI's fixed-point
  requantisation (int64 products, round half away from zero), which the CPU plugin's
  integer kernels do not reproduce: unsupported.
- int32 arithmetic runs only where the CPU plugin has exact integer kernels (element-wise
  add/sub/mul/floor-division, min/max, abs/neg, comparisons); int32 MatMul is computed in
  float by the plugin, so BATCH_MATMUL on int32 is unsupported.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import openvino as ov
import openvino.opset16 as ops  # the newest complete opset (opset17 holds only its two new ops)

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
from nnconform.ir import Model, Operand, Subgraph
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.ir import nnapi_params as params
from nnconform.reference.arith import activation as nn_activation

__all__ = ["Unsupported", "Rejected", "OV_TYPE", "CONVERTERS", "operation_supported", "to_openvino"]

OPSET = "opset16"

OV_TYPE = storage_table(ov.Type.f32, ov.Type.f16, ov.Type.i32, ov.Type.boolean, ov.Type.u8, ov.Type.i8)


def _out(node) -> ov.Output:
    """A node's single output (Output objects pass through)."""
    return node if isinstance(node, ov.Output) else node.output(0)


def c_(value, dtype=None) -> ov.Output:
    """A constant node from a numpy value."""
    return _out(ops.constant(np.asarray(value, dtype=dtype)))


def i64s(values) -> ov.Output:
    return c_(np.asarray(list(values), dtype=np.int64).reshape(-1))


# ---------------------------------------------------------------------------------------
# Graph building
# ---------------------------------------------------------------------------------------


class GraphBuilder:
    """The OpenVINO value of every converted operand of one subgraph."""

    def __init__(self, subgraph: Subgraph, with_inputs: bool = True, referenced: tuple = (), root=None):
        self.sg = subgraph
        self.referenced = referenced  # the model's referenced subgraphs (IF branches)
        self.root = subgraph if root is None else root  # the main graph
        self.const_derived = _const_derived(subgraph)
        self.values: dict[int, ov.Output] = {}
        self.parameters: list = []
        # Boolean scalars that must hold at run time (e.g. GATHER indices in range): extra
        # results the prepared model reads after each inference and fails the execution on.
        self.run_checks: list[tuple[ov.Output, str]] = []
        if with_inputs:
            for i in subgraph.input_indexes:
                o = subgraph.operands[i]
                p = ops.parameter(_partial_shape(o), OV_TYPE[o.type], name=f"o{i}")
                self.parameters.append(p)
                self.values[i] = _out(p)

    def operand_value(self, index: int) -> ov.Output:
        if index in self.values:
            return self.values[index]
        op = self.sg.operands[index]
        if op.is_constant:
            if op.type not in OV_TYPE:
                raise Unsupported(f"constant operand of type {op.type.name}")
            v = c_(np.asarray(op.value, dtype=op.info.dtype))
            self.values[index] = v
            return v
        if index not in self.values:
            # operation_supported() converts one operation alone: stand in a parameter.
            if op.type not in OV_TYPE:
                raise Unsupported(f"operand of type {op.type.name}")
            p = ops.parameter(_partial_shape(op), OV_TYPE[op.type], name=f"o{index}")
            self.values[index] = _out(p)
        return self.values[index]


def _partial_shape(o: Operand) -> ov.PartialShape:
    if o.info.is_scalar:
        return ov.PartialShape([])
    if not o.dimensions:
        return ov.PartialShape.dynamic()
    return ov.PartialShape([d if d > 0 else -1 for d in o.dimensions])


class OpCtx(conversion.OperationContext):
    """One operation seen by its converter, building into ``g``."""

    def __init__(self, g: GraphBuilder, index: int):
        super().__init__(g.sg, index)
        self.g = g

    def x(self, k: int) -> ov.Output:
        return self.g.operand_value(self.op.inputs[k])

    def set(self, value, k: int = 0) -> None:
        """Output k of the operation is ``value`` (converted to the output's storage type
        when the graph computed it in another one, e.g. f32 for an f16 output)."""
        v = _out(value)
        want = OV_TYPE[self.outs[k].type]
        if v.get_element_type() != want:
            if want == ov.Type.f16 and self.op.outputs[k] in self.g.const_derived:
                # OpenVINO folds constant-only subgraphs at compile time, and its folded
                # Convert to f16 saturates an overflow to +-65504 where the CPU kernel (and
                # NNAPI) give +-inf (docs/findings_openvino.md#constant-folding).
                raise Unsupported(
                    "a float16 result computed from constants only (OpenVINO's "
                    "constant folding saturates f16 overflow instead of giving inf)"
                )
            v = _out(ops.convert(v, want))
        self.g.values[self.op.outputs[k]] = v

    def f32(self, k: int) -> ov.Output:
        """Input k in f32 (f16 widened)."""
        v = self.x(k)
        if self.ins[k].type in (T.TENSOR_FLOAT16, T.FLOAT16):
            return _out(ops.convert(v, ov.Type.f32))
        return v


def _const_derived(sg: Subgraph) -> set[int]:
    """Operands computed from constants only: OpenVINO folds them at compile time."""
    derived: set[int] = set()
    for op in sg.operations:
        if all(sg.operands[i].is_constant or sg.operands[i].is_omitted or i in derived for i in op.inputs):
            derived.update(op.outputs)
    return derived


def float_activation(v, act: int) -> ov.Output:
    """NNAPI's fused activation on a float tensor."""
    bounds = activation.float_bounds(act)
    if bounds is None:
        return _out(v)
    if act == activation.RELU:
        return _out(ops.relu(v))
    lo, hi = bounds
    et = _out(v).get_element_type()
    dt = np.float16 if et == ov.Type.f16 else np.float32
    return _out(ops.minimum(ops.maximum(v, c_(lo, dt)), c_(hi, dt)))


def quant_activation(v, act: int, out: Operand) -> ov.Output:
    """Clamp stored quantised values to NNAPI's activation bounds (exact on integers)."""
    bounds = activation.quant_bounds(act, out)
    v = _out(v)
    if bounds is None:
        return v
    lo, hi = bounds
    dt = out.info.dtype
    full = np.iinfo(dt)
    if lo > full.min:
        v = _out(ops.maximum(v, c_(lo, dt)))
    if hi < full.max:
        v = _out(ops.minimum(v, c_(hi, dt)))
    return v


# ---------------------------------------------------------------------------------------
# Element-wise arithmetic
# ---------------------------------------------------------------------------------------

_INT32_ARITH = {"add": ops.add, "subtract": ops.subtract, "multiply": ops.multiply}


def _binary_arith(fn, int32_ok: bool = True):
    def convert(c: OpCtx):
        a = c.ins[0]
        act = int(c.scalar(2))
        if a.type in FLOATS:
            c.set(float_activation(fn(c.f32(0), c.f32(1)), act))
        elif a.type == T.TENSOR_INT32 and int32_ok:
            if act != nn_activation.NONE:
                raise Unsupported("int32 arithmetic with a fused activation")
            c.set(fn(c.x(0), c.x(1)))
        else:
            raise Unsupported(
                f"{a.type.name} (quantised arithmetic needs NNAPI's fixed-point requantisation)"
                if a.type in QUANT8
                else a.type.name
            )

    return convert


def conv_div(c: OpCtx):
    a = c.ins[0]
    act = int(c.scalar(2))
    if a.type not in FLOATS:
        # The CPU plugin's int32 Divide truncates (it ignores m_pythondiv) and divides in
        # float32 (2**31 - 1 // 3 comes out 715827904); its FloorMod is float too.  NNAPI
        # floors exactly: docs/findings_openvino.md#int32-divide.
        raise Unsupported(f"{a.type.name} (the CPU plugin's integer Divide is neither floor nor exact)")
    c.set(float_activation(ops.divide(c.f32(0), c.f32(1)), act))


def _minmax(fn):
    def convert(c: OpCtx):
        a = c.ins[0]
        if a.type in FLOATS or a.type == T.TENSOR_INT32:
            c.set(fn(c.x(0), c.x(1)))
        elif a.type in QUANT8 and same_quant(c.ins[0], c.outs[0]) and same_quant(c.ins[1], c.outs[0]):
            c.set(fn(c.x(0), c.x(1)))  # same parameters: the order of stored values is the real order
        else:
            raise Unsupported(f"{a.type.name} with requantisation")

    return convert


def conv_pow(c: OpCtx):
    c.require(0, FLOATS)
    c.set(ops.power(c.f32(0), c.f32(1)))


def conv_prelu(c: OpCtx):
    c.require(0, FLOATS)
    xf, af = c.f32(0), c.f32(1)
    # NNAPI broadcasts alpha both ways (OpenVINO PRelu only alpha to x); Select broadcasts all three.
    c.set(ops.select(ops.less(xf, c_(0, np.float32)), ops.multiply(xf, af), xf))


# ---------------------------------------------------------------------------------------
# Activations and unary math
# ---------------------------------------------------------------------------------------


def _relu(act: int):
    def convert(c: OpCtx):
        x, out = c.ins[0], c.outs[0]
        if x.type in FLOATS:
            c.set(float_activation(c.x(0), act))
        elif x.type in QUANT8:
            if not same_quant(x, out):
                raise Unsupported("quantised RELU with different input and output parameters")
            c.set(quant_activation(c.x(0), act, out))
        else:
            raise Unsupported(x.type.name)

    return convert


def _unary_float(fn, int32_fn=None):
    def convert(c: OpCtx):
        x = c.ins[0]
        if x.type in FLOATS:
            c.set(fn(c.f32(0)))
        elif x.type == T.TENSOR_INT32 and int32_fn is not None:
            c.set(int32_fn(c.x(0)))
        else:
            raise Unsupported(x.type.name)

    return convert


def conv_rsqrt(c: OpCtx):
    c.require(0, FLOATS)
    c.set(ops.divide(c_(1, np.float32), ops.sqrt(c.f32(0))))


def conv_elu(c: OpCtx):
    c.require(0, FLOATS)
    alpha = float(np.float32(c.scalar(1)))
    # ELU: x for x > 0, alpha * (exp(x) - 1) otherwise, written out (the Elu node takes alpha
    # as a double attribute the plugin rounds its own way).
    xf = c.f32(0)
    neg = ops.multiply(ops.subtract(ops.exp(xf), c_(1, np.float32)), c_(alpha, np.float32))
    c.set(ops.select(ops.greater(xf, c_(0, np.float32)), xf, neg))


def conv_hard_swish(c: OpCtx):
    c.require(0, FLOATS)
    xf = c.f32(0)
    relu6 = ops.minimum(ops.maximum(ops.add(xf, c_(3, np.float32)), c_(0, np.float32)), c_(6, np.float32))
    c.set(ops.divide(ops.multiply(xf, relu6), c_(6, np.float32)))


def _softmax(log: bool):
    def convert(c: OpCtx):
        x = c.require(0, FLOATS)
        beta = float(c.scalar(1))
        axis = int(c.scalar(2, -1)) if len(c.ins) > 2 else -1
        xf = c.f32(0)
        if beta != 1.0:
            xf = ops.multiply(xf, c_(np.float32(beta)))
        r = c.rank(x)
        c.set(ops.log_softmax(xf, axis % r) if log else ops.softmax(xf, axis % r))

    return convert


def conv_l2_normalization(c: OpCtx):
    x = c.require(0, FLOATS)
    r = c.rank(x)
    axis = int(c.scalar(1, -1)) if len(c.ins) > 1 else -1
    xf = c.f32(0)
    ss = ops.reduce_sum(ops.multiply(xf, xf), i64s([axis % r]), keep_dims=True)
    norm = ops.maximum(ops.sqrt(ss), c_(1e-6, np.float32))
    c.set(ops.divide(xf, norm))


# ---------------------------------------------------------------------------------------
# Comparisons, logical, select
# ---------------------------------------------------------------------------------------


def _int_less(a, b) -> ov.Output:
    """a < b on int32, exactly: the CPU plugin compares int32 in float32 (16777217 == 16777216
    there), but its Minimum and wrapping Subtract are exact, and min(a, b) - b is zero exactly
    when b <= a (a wrapped non-zero difference stays non-zero in float)."""
    return _out(ops.not_equal(ops.subtract(ops.minimum(a, b), b), c_(0, np.int32)))


def _int_equal(a, b) -> ov.Output:
    return _out(ops.equal(ops.subtract(a, b), c_(0, np.int32)))


_INT_COMPARE = {
    "equal": _int_equal,
    "not_equal": lambda a, b: ops.logical_not(_int_equal(a, b)),
    "less": _int_less,
    "greater": lambda a, b: _int_less(b, a),
    "less_equal": lambda a, b: ops.logical_not(_int_less(b, a)),
    "greater_equal": lambda a, b: ops.logical_not(_int_less(a, b)),
}


def _compare(name: str):
    fn = getattr(ops, name)

    def convert(c: OpCtx):
        a, b = c.ins[0], c.ins[1]
        if a.type in QUANT8:
            if not same_quant(a, b):
                # NNAPI compares float32(q - zero_point) * float32(scale); the plugin rewrites
                # (q - zp) * s into its own scale-shift form, which rounds differently on real
                # ties (tried: 2 of 64 ties wrong), so this is not mapped.
                raise Unsupported("quantised comparison of operands with different parameters")
            # same scale and zero point: the order of stored values is the real order (and
            # 8-bit values are exact in the plugin's float comparison)
            c.set(fn(c.x(0), c.x(1)))
        elif a.type in FLOATS:
            c.set(fn(c.x(0), c.x(1)))
        elif a.type == T.TENSOR_INT32:
            c.set(_INT_COMPARE[name](c.x(0), c.x(1)))
        elif a.type == T.TENSOR_BOOL8:
            # false < true as integers
            c.set(fn(ops.convert(c.x(0), ov.Type.i32), ops.convert(c.x(1), ov.Type.i32)))
        else:
            raise Unsupported(a.type.name)

    return convert


def _logical(fn, arity: int):
    def convert(c: OpCtx):
        c.require(0, (T.TENSOR_BOOL8,))
        c.set(fn(*[c.x(k) for k in range(arity)]))

    return convert


def conv_select(c: OpCtx):
    c.require(1, NUMERIC, "SELECT's input 1")
    require_same_quant(c, (1, 2), "SELECT")
    c.set(ops.select(c.x(0), c.x(1), c.x(2)))


# ---------------------------------------------------------------------------------------
# Convolutions, fully connected, pooling
# ---------------------------------------------------------------------------------------


def _conv_args(c: OpCtx, n_extra: int, **kw):
    """(pads_begin [t, l], pads_end [b, r], strides, dilations, extra, act, nchw)."""
    p = params.conv_params(c, n_extra, **kw)
    return list(p.pads_begin), list(p.pads_end), list(p.strides), list(p.dilations), p.extra, p.activation, p.nchw


def _check_float_conv(c: OpCtx):
    x, f = c.ins[0], c.ins[1]
    if x.type not in FLOATS:
        raise Unsupported(f"{x.type.name} (quantised convolutions need NNAPI's fixed-point requantisation)")
    if f.type != x.type:
        raise Unsupported("mixed filter type")


def _filter(c: OpCtx, k: int, perm, shape=None) -> ov.Output:
    """Filter input k in f32, permuted (and reshaped) into OpenVINO's layout."""
    o = c.ins[k]
    if o.is_constant:
        v = np.ascontiguousarray(np.transpose(np.asarray(o.value, np.float32), perm))
        return c_(v.reshape(shape) if shape is not None else v)
    v = _out(ops.transpose(c.f32(k), i64s(perm)))
    return _out(ops.reshape(v, i64s(shape), special_zero=False)) if shape is not None else v


def _finish_conv(c: OpCtx, y, act: int, nchw: bool, bias_k: int = 2):
    """Add the bias along the channel axis, apply the activation, back to the model's layout."""
    if not c.omitted(bias_k):
        bias = _out(ops.reshape(c.f32(bias_k), i64s([1, -1, 1, 1]), special_zero=False))
        y = ops.add(y, bias)
    y = float_activation(y, act)
    if not nchw:
        y = ops.transpose(y, i64s(TO_NHWC))
    c.set(y)


def _nchw_input(c: OpCtx, nchw: bool) -> ov.Output:
    xf = c.f32(0)
    return xf if nchw else _out(ops.transpose(xf, i64s(TO_NCHW)))


def conv_conv_2d(c: OpCtx):
    _check_float_conv(c)
    pb, pe, strides, dil, _, act, nchw = _conv_args(c, 0)
    w = _filter(c, 1, (0, 3, 1, 2))  # [O, H, W, I] -> [O, I, H, W]
    y = ops.convolution(_nchw_input(c, nchw), w, strides, pb, pe, dil)
    _finish_conv(c, y, act, nchw)


def conv_grouped_conv_2d(c: OpCtx):
    _check_float_conv(c)
    pb, pe, strides, dil, (groups,), act, nchw = _conv_args(c, 1, dilation=False)
    fd = c.dims(c.ins[1])
    o, fh, fw, ig = fd
    if groups <= 0 or o % groups:
        raise Unsupported(f"{o} output channels in {groups} groups")
    w = _filter(c, 1, (0, 3, 1, 2), (groups, o // groups, ig, fh, fw))
    y = ops.group_convolution(_nchw_input(c, nchw), w, strides, pb, pe, dil)
    _finish_conv(c, y, act, nchw)


def conv_depthwise_conv_2d(c: OpCtx):
    _check_float_conv(c)
    pb, pe, strides, dil, (mult,), act, nchw = _conv_args(c, 1)
    channels = op_params.depthwise_channels(c, mult, nchw)
    fd = c.dims(c.ins[1])
    # [1, fh, fw, C*mult] -> [C, mult, 1, fh, fw]: output channel c*mult + m belongs to group c.
    w = _filter(c, 1, (3, 0, 1, 2), (channels, mult, 1, fd[1], fd[2]))
    y = ops.group_convolution(_nchw_input(c, nchw), w, strides, pb, pe, dil)
    _finish_conv(c, y, act, nchw)


def conv_fully_connected(c: OpCtx):
    x, w, out = c.ins[0], c.ins[1], c.outs[0]
    act = int(c.scalar(3))
    if x.type not in FLOATS:
        raise Unsupported(f"{x.type.name} (quantised FULLY_CONNECTED needs NNAPI's requantisation)")
    if w.type != x.type:
        raise Unsupported("mixed weight type")
    _, k = c.dims(w)
    x2 = ops.reshape(c.f32(0), i64s([-1, k]), special_zero=False)
    y = ops.matmul(x2, c.f32(1), False, True)
    if not c.omitted(2):
        y = ops.add(y, c.f32(2))
    y = float_activation(y, act)
    od = c.dims(out)
    if len(od) != 2:
        y = ops.reshape(y, i64s(od), special_zero=False)
    c.set(y)


def conv_transpose_conv_2d(c: OpCtx):
    _check_float_conv(c)
    p = params.transpose_conv_params(c)
    bp = op_params.backprop_padding(p)
    w = _filter(c, 1, (3, 0, 1, 2))  # [O, H, W, I] -> [I, O, H, W]
    y = ops.convolution_backprop_data(
        _nchw_input(c, p.nchw),
        w,
        list(p.strides),
        pads_begin=list(bp.begin),
        pads_end=list(bp.end),
        dilations=[1, 1],
        output_padding=list(bp.output_padding),
    )
    _finish_conv(c, y, p.activation, p.nchw)


def _pool_args(c: OpCtx):
    p = params.pool_params(c)
    if max(p.pad_left, p.pad_right) >= p.filter_w or max(p.pad_top, p.pad_bottom) >= p.filter_h:
        # a window wholly in the padding: NNAPI averages nothing; OpenVINO divides by zero
        raise Unsupported("padding as large as the window")
    return (
        dict(
            strides=list(p.strides),
            pads_begin=list(p.pads_begin),
            pads_end=list(p.pads_end),
            kernel_shape=list(p.window),
        ),
        p.activation,
        p.nchw,
    )


def _pool(kind: str):
    def convert(c: OpCtx):
        x, out = c.ins[0], c.outs[0]
        a, act, nchw = _pool_args(c)
        quant = x.type in QUANT8
        if quant:
            if kind == "l2" or not same_quant(x, out):
                raise Unsupported("quantised L2 pooling, or pooling with requantisation")
            if kind == "avg":
                _quant_average_pool(c, a, act, nchw)
                return
        elif x.type not in FLOATS:
            raise Unsupported(x.type.name)
        xin = c.x(0) if quant else c.f32(0)
        if not nchw:
            xin = ops.transpose(xin, i64s(TO_NCHW))
        if kind == "max":
            y = _out(ops.max_pool(xin, a["strides"], [1, 1], a["pads_begin"], a["pads_end"], a["kernel_shape"]))
        else:
            if kind == "l2":
                xin = ops.multiply(xin, xin)
            y = ops.avg_pool(
                xin,
                a["strides"],
                a["pads_begin"],
                a["pads_end"],
                a["kernel_shape"],
                exclude_pad=True,
                rounding_type="floor",
                auto_pad="explicit",
                dilations=[1, 1],
            )
            if kind == "l2":
                y = ops.sqrt(y)
        if not nchw:
            y = ops.transpose(y, i64s(TO_NHWC))
        c.set(quant_activation(y, act, out) if quant else float_activation(y, act))

    return convert


_MAX_INT_COUNT = 4096


def _int_quotient(total, count, offset: float | np.ndarray = 0.0) -> ov.Output:
    """sign(total) * ((|total| + offset) // count) in float32, for integer-valued ``total``
    (|total| < 2**24) and counts up to _MAX_INT_COUNT: the 0.5 keeps the exact quotient at
    least 0.5 / count away from an integer, far beyond float32 division's error, so the floor
    is the integer division's."""
    q = ops.floor(ops.divide(ops.add(ops.abs(total), c_(np.asarray(offset, np.float32) + np.float32(0.5))), count))
    return _out(ops.multiply(ops.sign(total), q))


def _quant_average_pool(c: OpCtx, a: dict, act: int, nchw: bool):
    """NNAPI's quantised AVERAGE_POOL_2D: the integer sum of the stored values in the window
    (padding excluded), divided by the in-bounds count rounding half away from zero.  Sums of
    8-bit values are exact in float32; the sum is a depthwise convolution with ones."""
    x, out = c.ins[0], c.outs[0]
    (fh, fw), (sh, sw) = a["kernel_shape"], a["strides"]
    (pt, pl), (pb, pr) = a["pads_begin"], a["pads_end"]
    if fh * fw > _MAX_INT_COUNT:
        raise Unsupported(f"quantised average over {fh * fw} elements")
    xd = c.dims(x)
    ch, h, w = (xd[1], xd[2], xd[3]) if nchw else (xd[3], xd[1], xd[2])
    oh, ow = (h + pt + pb - fh) // sh + 1, (w + pl + pr - fw) // sw + 1
    if oh <= 0 or ow <= 0:
        raise Unsupported("empty output")

    def per_axis(n_out, stride, pad, k, size):
        start = np.arange(n_out) * stride - pad
        return np.minimum(start + k, size) - np.maximum(start, 0)

    count = (per_axis(oh, sh, pt, fh, h)[:, None] * per_axis(ow, sw, pl, fw, w)[None, :]).astype(np.float32)
    xin = _out(ops.convert(c.x(0), ov.Type.f32))
    if not nchw:
        xin = ops.transpose(xin, i64s(TO_NCHW))
    total = ops.group_convolution(
        xin, c_(np.ones((ch, 1, 1, fh, fw), np.float32)), [sh, sw], [pt, pl], [pb, pr], [1, 1]
    )
    count = count.reshape(1, 1, oh, ow)
    y = _int_quotient(total, c_(count), np.floor(count / 2))
    lo, hi = nn_activation.quant_bounds(act, out)
    y = ops.minimum(ops.maximum(y, c_(lo, np.float32)), c_(hi, np.float32))
    if not nchw:
        y = ops.transpose(y, i64s(TO_NHWC))
    c.set(ops.convert(y, OV_TYPE[out.type]))


# ---------------------------------------------------------------------------------------
# Quantisation and casts
# ---------------------------------------------------------------------------------------


def conv_quantize(c: OpCtx):
    # NNAPI: zero_point + round_half_away(x / scale) with a correctly rounded float32 division.
    # The CPU plugin turns a division by the constant scale into a multiplication by its
    # reciprocal, which lands on the other side of .5 ties (scale 0.3: 132 of 4000 values off
    # by one; docs/findings_openvino.md#divide-by-constant): not mapped.
    raise Unsupported("QUANTIZE (the plugin divides by the constant scale as a multiplication by its reciprocal)")


def conv_dequantize(c: OpCtx):
    d = op_params.dequantize(c)
    diff = ops.convert(ops.subtract(ops.convert(c.x(0), ov.Type.i32), c_(d.zero_point, np.int32)), ov.Type.f32)
    c.set(ops.multiply(diff, c_(d.scale_for(c.ins[0]))))


def _trunc(xf) -> ov.Output:
    """Round toward zero, in float (exact)."""
    return _out(ops.multiply(ops.sign(xf), ops.floor(ops.abs(xf))))


def conv_cast(c: OpCtx):
    x, out = c.ins[0], c.outs[0]
    if x.type == out.type and x.type in OV_TYPE:
        if x.type in QUANT8 and not same_quant(x, out):
            raise Unsupported("quantised CAST with other parameters")
        c.set(c.x(0))
        return
    if x.type not in CASTABLE or out.type not in CASTABLE:
        raise Unsupported(f"{x.type.name} -> {out.type.name}")
    if out.type == T.TENSOR_FLOAT16 and c.op.outputs[0] in c.g.const_derived:
        raise Unsupported(
            "a CAST to float16 of constants only (OpenVINO's constant folding "
            "saturates f16 overflow instead of giving inf)"
        )
    src = c.x(0)
    if out.type == T.TENSOR_QUANT8_ASYMM:
        # NNAPI saturates into 0..255 and truncates toward zero (NaN: undefined, not in CTS).
        if x.type in FLOATS:
            src = ops.minimum(ops.maximum(_trunc(c.f32(0)), c_(0, np.float32)), c_(255, np.float32))
        else:
            src = ops.minimum(ops.maximum(src, c_(0, np.int32)), c_(255, np.int32))
    elif out.type == T.TENSOR_INT32 and x.type in FLOATS:
        # Saturate, truncate, and 0 for NaN (the reference's ARM64 conversion).
        xf = c.f32(0)
        xf = ops.select(ops.is_nan(xf), c_(0, np.float32), xf)
        safe = ops.minimum(ops.maximum(_trunc(xf), c_(-(2.0**31), np.float32)), c_(2.0**31 - 128, np.float32))
        y = ops.convert(safe, ov.Type.i32)
        too_big = ops.greater_equal(xf, c_(2.0**31, np.float32))
        c.set(ops.select(too_big, c_(2**31 - 1, np.int32), y))
        return
    c.set(ops.convert(src, OV_TYPE[out.type]))


# ---------------------------------------------------------------------------------------
# Data movement
# ---------------------------------------------------------------------------------------


def conv_reshape(c: OpCtx):
    movable(c)
    if not c.ins[1].is_constant:
        raise Unsupported("a run-time shape")
    shape = [int(v) for v in c.const(1).reshape(-1)]
    c.set(ops.reshape(c.x(0), i64s(shape), special_zero=False))


def conv_squeeze(c: OpCtx):
    movable(c)
    axes = op_params.squeeze_axes(c)
    if axes and len(axes) == c.rank(c.ins[0]):
        c.set(ops.reshape(c.x(0), i64s([1]), special_zero=False))
    elif axes:
        c.set(ops.squeeze(c.x(0), i64s(axes)))
    else:
        c.set(c.x(0))


def conv_expand_dims(c: OpCtx):
    movable(c)
    r = c.rank(c.ins[0])
    axis = int(c.scalar(1))
    c.set(ops.unsqueeze(c.x(0), i64s([axis % (r + 1)])))


def conv_transpose(c: OpCtx):
    movable(c)
    c.set(ops.transpose(c.x(0), i64s(op_params.transpose_perm(c))))


def conv_concatenation(c: OpCtx):
    out = c.outs[0]
    n = len(c.ins) - 1
    axis = int(c.scalar(n))
    r = c.rank(out) if out.dimensions else c.rank(c.ins[0])
    for k in range(n):
        c.require(k, NUMERIC)
    require_same_quant(c, range(n), "CONCATENATION", out)
    c.set(ops.concat([c.x(k) for k in range(n)], axis % r))


def _indices_in_range(c: OpCtx, data_k: int, indices_k: int, axis: int, what: str) -> None:
    """NNAPI fails an execution whose indices fall outside the axis; OpenVINO's Gather gives
    zeros (negative ones count from the back).  Constant indices are checked here, run-time
    ones by a check the prepared model reads after each inference."""
    idx = c.ins[indices_k]
    data = c.ins[data_k]
    if idx.is_constant and data.dimensions and data.dimensions[axis] > 0:
        v = np.asarray(idx.value)
        if v.size and (v.min() < 0 or v.max() >= data.dimensions[axis]):
            raise Rejected(f"{what} index out of range [0, {data.dimensions[axis]})")
        return
    size = ops.gather(ops.shape_of(c.x(data_k), "i32"), c_(axis, np.int64), c_(0, np.int64))
    i = c.x(indices_k)
    ok = ops.logical_and(ops.greater_equal(i, c_(0, np.int32)), _int_less(i, size))
    c.g.run_checks.append((_out(ops.reduce_logical_and(ok, _all_axes(i), False)), f"{what} index out of range"))


def _all_axes(v) -> ov.Output:
    """Every axis of ``v`` (rank known or not), for a full reduction."""
    return _out(
        ops.range(c_(0, np.int64), ops.squeeze(ops.shape_of(ops.shape_of(v, "i64")), i64s([0])), c_(1, np.int64), "i64")
    )


def conv_gather(c: OpCtx):
    x = movable(c, 0, NUMERIC)
    axis = int(c.scalar(1)) % c.rank(x)
    _indices_in_range(c, 0, 2, axis, "GATHER")
    c.set(ops.gather(c.x(0), c.x(2), c_(axis, np.int64)))


def conv_pad(c: OpCtx):
    x = movable(c, 0, DATA)
    pads = op_params.paddings(c)
    value = c_(pad_fill(c, x, 2 if c.op.type == Op.PAD_V2 else None))
    c.set(ops.pad(c.x(0), i64s(pads[:, 0]), i64s(pads[:, 1]), "constant", value))


def conv_mirror_pad(c: OpCtx):
    movable(c, 0, NUMERIC)
    pads, mode = op_params.mirror_pad(c)
    c.set(ops.pad(c.x(0), i64s(pads[:, 0]), i64s(pads[:, 1]), mode))


def conv_slice(c: OpCtx):
    movable(c, 0, NUMERIC)
    xd = c.dims(c.ins[0])
    begin, end = params.slice_bounds(c, xd)
    c.set(ops.slice(c.x(0), i64s(begin), i64s(end), i64s([1] * len(xd)), i64s(range(len(xd)))))


def conv_strided_slice(c: OpCtx):
    movable(c, 0, DATA)
    xd = c.dims(c.ins[0])
    s = params.strided_slice(c, xd)
    y = ops.slice(c.x(0), i64s(s.starts), i64s(s.stops), i64s(s.strides), i64s(range(len(xd))))
    shrunk = list(s.shrunk_axes)
    if shrunk and len(shrunk) == len(xd):
        y = ops.reshape(y, i64s([1]), special_zero=False)
    elif shrunk:
        y = ops.squeeze(y, i64s(shrunk))
    c.set(y)


def conv_split(c: OpCtx):
    movable(c, 0, NUMERIC)
    axis, n = op_params.split(c)
    node = ops.split(c.x(0), c_(axis, np.int64), n)
    for k in range(n):
        c.set(node.output(k), k)


def conv_tile(c: OpCtx):
    movable(c, 0, NUMERIC)
    c.set(ops.tile(c.x(0), i64s(c.const(1).reshape(-1))))


def conv_reverse(c: OpCtx):
    x = movable(c, 0, NUMERIC)
    axes = [int(a) % c.rank(x) for a in c.const(1).reshape(-1)]
    if len(axes) != 1:
        raise Unsupported("REVERSE over several axes")
    big = np.iinfo(np.int64)
    c.set(ops.slice(c.x(0), i64s([-1]), i64s([big.min]), i64s([-1]), i64s(axes)))


def conv_depth_to_space(c: OpCtx):
    movable(c, 0, DATA)
    bs, nchw = op_params.depth_space(c)
    x = c.x(0) if nchw else ops.transpose(c.x(0), i64s(TO_NCHW))
    # TensorFlow's (and NNAPI's) order: the block index is the outer part of the depth.
    if c.op.type == Op.DEPTH_TO_SPACE:
        y = ops.depth_to_space(x, "blocks_first", bs)
    else:
        y = ops.space_to_depth(x, "blocks_first", bs)
    c.set(y if nchw else ops.transpose(y, i64s(TO_NHWC)))


def conv_batch_space(c: OpCtx):
    x = movable(c, 0, DATA)
    p = op_params.batch_space(c)
    y = ops.transpose(c.x(0), i64s(TO_NHWC)) if p.nchw else c.x(0)
    if p.to_batch:
        pt, pb, pl, pr = p.pads
        if any(p.pads):
            y = ops.pad(y, i64s([0, pt, pl, 0]), i64s([0, pb, pr, 0]), "constant", c_(pad_fill(c, x, None)))
        view, perm, shape = p.space_to_batch_shapes()
    else:
        view, perm, shape = p.batch_to_space_shapes()
    y = ops.transpose(ops.reshape(y, i64s(view), special_zero=False), i64s(perm))
    y = ops.reshape(y, i64s(shape), special_zero=False)
    c.set(ops.transpose(y, i64s(TO_NCHW)) if p.nchw else y)


def conv_argminmax(c: OpCtx):
    x = c.require(0, NUMERIC)
    r = c.rank(x)
    axis = int(c.scalar(1)) % r
    mode = "max" if c.op.type == Op.ARGMAX else "min"
    # TopK k=1, stable: the first index among ties, as NNAPI's arg-min/max keeps.  The CPU
    # plugin honours `stable` only when sorting by value (with sort="index" it returns a
    # later tie on longer axes: docs/findings_openvino.md#topk-stable).
    tk = ops.topk(c.x(0), c_(1, np.int64), axis, mode, "value", "i32", stable=True)
    y = tk.output(1)
    y = ops.squeeze(y, i64s([axis])) if r > 1 else y
    c.set(y)


def _reduce(fn, types, bool_via=None):
    def convert(c: OpCtx):
        x, red = op_params.reduction(c, types)
        xin = c.f32(0) if x.type in FLOATS else c.x(0)
        c.set(_reduced(fn(xin, i64s(red.axes), red.keep), red))

    return convert


def _reduced(y, red: op_params.Reduction):
    return ops.reshape(y, i64s([1]), special_zero=False) if red.to_one else y


def _nan_skipping(fn, start: float):
    """REDUCE_MAX/MIN as the reference folds them: from the lowest/highest finite value, NaN
    skipped (OpenVINO's reduction propagates or drops NaN its own way)."""

    def reduce(xf, axes, keep):
        et = xf.get_element_type() if isinstance(xf, ov.Output) else _out(xf).get_element_type()
        if et != ov.Type.f32:
            return fn(xf, axes, keep)
        xf = ops.select(ops.is_nan(xf), c_(start, np.float32), xf)
        return fn(xf, axes, keep)

    return reduce


def conv_mean(c: OpCtx):
    x, red = op_params.reduction(c, DATA, "MEAN")
    out, axes, keep = c.outs[0], red.axes, red.keep
    if x.type in FLOATS:
        y = ops.reduce_mean(c.f32(0), i64s(axes), keep)
    else:
        # NNAPI: trunc(sum of stored values / count) in integers, no requantisation.
        xd = c.dims(x)
        count = int(np.prod([xd[a] for a in axes]))
        if count > _MAX_INT_COUNT:
            raise Unsupported(f"quantised MEAN over {count} elements")
        total = ops.reduce_sum(ops.convert(c.x(0), ov.Type.f32), i64s(axes), keep)
        q = _int_quotient(total, c_(np.float32(count)))
        y = ops.convert(q, OV_TYPE[out.type])
    c.set(_reduced(y, red))


def conv_topk(c: OpCtx):
    """TOPK_V2: values descending, and among equal values the larger index first.  TopK's
    stable mode keeps the smaller index first, so it runs on the last axis reversed and the
    indices are mapped back."""
    x = c.require(0, NUMERIC)
    if not same_quant(x, c.outs[0]):
        raise Unsupported("quantised TOPK_V2 with other output parameters")
    xd = c.dims(x)
    k = int(c.scalar(1))
    n = xd[-1]
    if not 1 <= k <= n:
        raise Rejected(f"k {k} outside [1, {n}]")
    big = np.iinfo(np.int64)
    rev = ops.slice(c.x(0), i64s([-1]), i64s([big.min]), i64s([-1]), i64s([len(xd) - 1]))
    tk = ops.topk(rev, c_(k, np.int64), len(xd) - 1, "max", "value", "i32", stable=True)
    c.set(tk.output(0), 0)
    c.set(ops.subtract(c_(n - 1, np.int32), tk.output(1)), 1)


def conv_embedding_lookup(c: OpCtx):
    movable(c, 1, NUMERIC)
    _indices_in_range(c, 1, 0, 0, "EMBEDDING_LOOKUP")
    c.set(ops.gather(c.x(1), c.x(0), c_(0, np.int64)))


def conv_pack(c: OpCtx):
    axis = int(c.scalar(0))
    r = c.rank(c.ins[1]) + 1
    parts = []
    for k in range(1, len(c.ins)):
        movable(c, k, NUMERIC)
        parts.append(ops.unsqueeze(c.x(k), i64s([axis % r])))
    c.set(ops.concat(parts, axis % r))


def conv_batch_matmul(c: OpCtx):
    a = c.require(0, FLOATS, "input 0 (int32 MatMul runs in float on the CPU plugin)")
    adj = [bool(c.scalar(2, False)), bool(c.scalar(3, False))]
    if c.ins[1].type != a.type:
        raise Unsupported("mixed types")
    c.set(ops.matmul(c.f32(0), c.f32(1), adj[0], adj[1]))


def conv_instance_normalization(c: OpCtx):
    x = c.require(0, FLOATS)
    gamma, beta, eps, nchw = op_params.instance_norm(c)
    c.dims(x)
    axes = [2, 3] if nchw else [1, 2]
    y = ops.mvn(c.f32(0), i64s(axes), True, eps, "inside_sqrt")
    y = ops.add(ops.multiply(y, c_(np.float32(gamma))), c_(np.float32(beta)))
    c.set(y)


def conv_local_response_normalization(c: OpCtx):
    x = c.require(0, FLOATS)
    xd = c.dims(x)
    r = len(xd)
    p = op_params.lrn(c, r)
    radius, bias, alpha, beta, axis = p.radius, p.bias, p.alpha, p.beta, p.axis
    # NNAPI: x / (bias + alpha * sum of squares over [i - radius, i + radius]) ^ beta, written
    # out: the window sum is a zero-padded running sum along the axis (no LRN node whose
    # alpha scaling and axis conventions differ).
    xf = c.f32(0)
    sq = ops.multiply(xf, xf)
    begin, end = [0] * r, [0] * r
    begin[axis], end[axis] = radius, radius
    padded = _out(ops.pad(sq, i64s(begin), i64s(end), "constant", c_(0, np.float32)))
    total = None
    n = xd[axis]
    # slice k covers [k - radius, k - radius + n): only those overlapping the data add terms
    for k in range(max(0, radius - n + 1), min(2 * radius, radius + n - 1) + 1):
        part = ops.slice(padded, i64s([k]), i64s([k + n]), i64s([1]), i64s([axis]))
        total = part if total is None else ops.add(total, part)
    denom = ops.power(ops.add(ops.multiply(total, c_(np.float32(alpha))), c_(np.float32(bias))), c_(np.float32(beta)))
    c.set(ops.divide(xf, denom))


def conv_rank(c: OpCtx):
    c.set(ops.convert(ops.squeeze(ops.shape_of(ops.shape_of(c.x(0))), i64s([0])), ov.Type.i32))


def conv_fill(c: OpCtx):
    out = c.outs[0]
    if out.type not in FILLABLE:
        raise Unsupported(out.type.name)
    value = c_(np.asarray(c.scalar(1), dtype=out.info.dtype))
    c.set(ops.broadcast(value, ops.convert(c.x(0), ov.Type.i64)))


def conv_channel_shuffle(c: OpCtx):
    movable(c, 0, DATA)
    s = op_params.channel_shuffle(c)
    y = ops.transpose(ops.reshape(c.x(0), i64s(s.grouped), special_zero=False), i64s(s.perm))
    c.set(ops.reshape(y, i64s(s.dims), special_zero=False))


# ---------------------------------------------------------------------------------------
# Resize: the source rows/columns are computed here, from NNAPI's float32 coordinate rules,
# and the graph gathers them (Interpolate's coordinate modes round and clamp their own way).
# ---------------------------------------------------------------------------------------


def _gather_axis(v, index: np.ndarray, axis: int) -> ov.Output:
    return _out(ops.gather(v, c_(index.astype(np.int32)), c_(axis, np.int64)))


def conv_resize_nearest(c: OpCtx):
    movable(c, 0, DATA)
    r = op_params.resize(c)
    v = c.x(0)
    for axis, idx in zip((2, 3) if r.nchw else (1, 2), r.nearest()):
        v = _gather_axis(v, idx, axis)
    c.set(v)


def conv_resize_bilinear(c: OpCtx):
    """Float RESIZE_BILINEAR: the four neighbours blended with NNAPI's weights in its order.
    Quantised inputs are unsupported (NNAPI truncates the float blend, or for int8 runs
    TFLite's 1/1024-step integer kernel: bit-exact only with the same float operation order,
    which the plugin's fusions do not promise)."""
    c.require(0, FLOATS)
    r = op_params.resize(c)
    nchw, oh, ow = r.nchw, r.out_h, r.out_w
    (y0, y1, fy), (x0, x1, fx) = r.bilinear()
    ya, xa = (2, 3) if nchw else (1, 2)
    shape_y = [1, 1, oh, 1] if nchw else [1, oh, 1, 1]
    shape_x = [1, 1, 1, ow] if nchw else [1, 1, ow, 1]
    fy_, fx_ = c_(fy.reshape(shape_y)), c_(fx.reshape(shape_x))
    gy_, gx_ = c_((1 - fy).reshape(shape_y)), c_((1 - fx).reshape(shape_x))
    xf = c.f32(0)
    rows0, rows1 = _gather_axis(xf, y0, ya), _gather_axis(xf, y1, ya)
    terms = [
        ops.multiply(ops.multiply(_gather_axis(rows0, x0, xa), gy_), gx_),
        ops.multiply(ops.multiply(_gather_axis(rows1, x0, xa), fy_), gx_),
        ops.multiply(ops.multiply(_gather_axis(rows0, x1, xa), gy_), fx_),
        ops.multiply(ops.multiply(_gather_axis(rows1, x1, xa), fy_), fx_),
    ]
    c.set(ops.add(ops.add(ops.add(terms[0], terms[1]), terms[2]), terms[3]))


def _sequential_prod(xf, x: Operand, c: OpCtx, axes, keep: bool) -> ov.Output:
    """REDUCE_PROD as the reference folds it: in row-major order, and a zero on either side of
    a step gives 0 (an underflow to 0 sticks even against inf).  ReduceProd promises no order
    and no zero rule, so the fold is unrolled (small groups only)."""
    fold = op_params.sequential_fold(c.dims(x), axes, keep)
    k = fold.count
    v = ops.transpose(xf, i64s(fold.perm))
    v = ops.reshape(v, i64s([-1, k]), special_zero=False)
    et = _out(xf).get_element_type()
    zero = c_(0, np.float16 if et == ov.Type.f16 else np.float32)
    parts = ops.split(v, c_(1, np.int64), k) if k > 1 else None
    acc = parts.output(0) if parts is not None else _out(v)
    for j in range(1, k):
        p = parts.output(j)
        either = ops.logical_or(ops.equal(acc, zero), ops.equal(p, zero))
        acc = _out(ops.select(either, zero, ops.multiply(acc, p)))
    return _out(ops.reshape(acc, i64s(fold.shape), special_zero=False))


def conv_reduce_prod(c: OpCtx):
    x = c.require(0, FLOATS)
    r = c.rank(x)
    axes, keep = params.reduce_axes(c, r)
    # The fold runs in the storage type (f16 products round to f16 at each step).
    c.set(_sequential_prod(c.x(0), x, c, axes, keep))


def conv_rnn(c: OpCtx):
    """RNN (one Elman step): act(input . W^T + state . R^T + bias), written to both outputs.
    float32 only: the reference runs the fp16 cell as a sequential fp16 accumulation."""
    for k in range(5):
        c.require(k, (T.TENSOR_FLOAT32,))
    act = int(c.scalar(5))
    y = ops.add(ops.add(ops.matmul(c.x(0), c.x(1), False, True), ops.matmul(c.x(4), c.x(2), False, True)), c.x(3))
    y = float_activation(y, act)
    c.set(y, 0)
    c.set(ops.convert(y, ov.Type.f32), 1)  # a node of its own: two outputs, two tensors


_MAX_STEPS = 64


def conv_unidirectional_rnn(c: OpCtx):
    """UNIDIRECTIONAL_SEQUENCE_RNN (float32): the RNN step unrolled over the known time axis."""
    for k in range(5):
        c.require(k, (T.TENSOR_FLOAT32,))
    act, time_major = int(c.scalar(5)), bool(c.scalar(6))
    xd = c.dims(c.ins[0])
    steps = xd[0] if time_major else xd[1]
    if not 1 <= steps <= _MAX_STEPS:
        raise Unsupported(f"{steps} time steps (unrolled up to {_MAX_STEPS})")
    t_axis = 0 if time_major else 1
    xs = ops.split(c.x(0), c_(t_axis, np.int64), steps)
    h = c.x(4)
    states = []
    for t in range(steps):
        xt = ops.squeeze(xs.output(t), i64s([t_axis]))
        y = ops.add(ops.add(ops.matmul(xt, c.x(1), False, True), ops.matmul(h, c.x(2), False, True)), c.x(3))
        h = float_activation(y, act)
        states.append(ops.unsqueeze(h, i64s([t_axis])))
    c.set(ops.concat(states, t_axis) if steps > 1 else states[0], 0)
    if len(c.outs) > 1:
        c.set(ops.convert(h, ov.Type.f32), 1)


# ---------------------------------------------------------------------------------------
# Control flow
# ---------------------------------------------------------------------------------------


def _branch(c: OpCtx, k: int) -> tuple[ov.Model, list, list]:
    """Referenced subgraph of input k as an OpenVINO body: (model, parameters, results)."""
    o = c.ins[k]
    if o.type != T.SUBGRAPH or o.value is None:
        raise Unsupported(f"input {k} is not a subgraph reference")
    sub = c.g.referenced[int(np.asarray(o.value).reshape(-1)[0])]
    conversion.check_types(sub, (*sub.input_indexes, *sub.output_indexes), OV_TYPE)
    g = GraphBuilder(sub, referenced=c.g.referenced, root=c.g.root)
    for j in range(len(sub.operations)):
        convert_operation(g, j)
    if g.run_checks:
        # a failing check inside a branch cannot reach the prepared model's list
        raise Unsupported("a branch with run-time index checks (GATHER, EMBEDDING_LOOKUP)")
    results = [ops.result(g.operand_value(i)) for i in sub.output_indexes]
    return ov.Model(results, g.parameters, f"branch{k}"), g.parameters, results


def conv_if(c: OpCtx):
    """IF as OpenVINO's If: only the chosen branch runs, its outputs (and their shapes)
    become the operation's."""
    if c.ins[0].type != T.TENSOR_BOOL8:
        raise Unsupported(c.ins[0].type.name)
    if c.g.sg is not c.g.root or c.op.inputs[0] not in c.g.sg.input_indexes:
        # The CPU plugin's If takes the else branch whenever its condition is computed by
        # another node (even logical_not(logical_not(p)) of a true p): only a condition fed
        # straight from a model input works (docs/findings_openvino.md#if-condition).
        raise Unsupported(
            "an IF condition that is not a model input (the CPU plugin's If then always takes the else branch)"
        )
    then_m, then_p, then_r = _branch(c, 1)
    else_m, else_p, else_r = _branch(c, 2)
    node = ops.if_op(c.x(0))  # the [1] condition as it is: a Reshape to a scalar is a computed one
    node.set_then_body(then_m)
    node.set_else_body(else_m)
    for k, (tp, ep) in enumerate(zip(then_p, else_p)):
        node.set_input(c.x(3 + k), tp, ep)
    for j, (tr, er) in enumerate(zip(then_r, else_r)):
        c.set(node.set_output(tr, er), j)


_F32_MAX = float(np.finfo(np.float32).max)

# Every conv_<operation> function above converts that operation (conversion.by_name); the
# table lists the others: factory-built converters and converters shared by several operations.
CONVERTERS: dict[Op, Callable[[OpCtx], None]] = conversion.by_name(
    globals(),
    {
        Op.ADD: _binary_arith(ops.add),
        Op.SUB: _binary_arith(ops.subtract),
        Op.MUL: _binary_arith(ops.multiply),
        Op.MAXIMUM: _minmax(ops.maximum),
        Op.MINIMUM: _minmax(ops.minimum),
        Op.RELU: _relu(nn_activation.RELU),
        Op.RELU1: _relu(nn_activation.RELU1),
        Op.RELU6: _relu(nn_activation.RELU6),
        Op.LOGISTIC: _unary_float(ops.sigmoid),
        Op.TANH: _unary_float(ops.tanh),
        Op.ABS: _unary_float(ops.abs, ops.abs),
        Op.NEG: _unary_float(ops.negative, ops.negative),
        Op.EXP: _unary_float(ops.exp),
        Op.LOG: _unary_float(ops.log),
        Op.SQRT: _unary_float(ops.sqrt),
        Op.SIN: _unary_float(ops.sin),
        Op.FLOOR: _unary_float(ops.floor),
        Op.SOFTMAX: _softmax(False),
        Op.LOG_SOFTMAX: _softmax(True),
        Op.EQUAL: _compare("equal"),
        Op.NOT_EQUAL: _compare("not_equal"),
        Op.GREATER: _compare("greater"),
        Op.GREATER_EQUAL: _compare("greater_equal"),
        Op.LESS: _compare("less"),
        Op.LESS_EQUAL: _compare("less_equal"),
        Op.LOGICAL_AND: _logical(ops.logical_and, 2),
        Op.LOGICAL_OR: _logical(ops.logical_or, 2),
        Op.LOGICAL_NOT: _logical(ops.logical_not, 1),
        Op.BATCH_TO_SPACE_ND: conv_batch_space,
        Op.SPACE_TO_BATCH_ND: conv_batch_space,
        Op.AVERAGE_POOL_2D: _pool("avg"),
        Op.MAX_POOL_2D: _pool("max"),
        Op.L2_POOL_2D: _pool("l2"),
        Op.PAD_V2: conv_pad,
        Op.SPACE_TO_DEPTH: conv_depth_to_space,
        Op.ARGMAX: conv_argminmax,
        Op.ARGMIN: conv_argminmax,
        Op.REDUCE_SUM: _reduce(ops.reduce_sum, FLOATS),
        Op.REDUCE_MAX: _reduce(_nan_skipping(ops.reduce_max, -_F32_MAX), DATA),
        Op.REDUCE_MIN: _reduce(_nan_skipping(ops.reduce_min, _F32_MAX), DATA),
        Op.REDUCE_ALL: _reduce(ops.reduce_logical_and, (T.TENSOR_BOOL8,)),
        Op.REDUCE_ANY: _reduce(ops.reduce_logical_or, (T.TENSOR_BOOL8,)),
        Op.RESIZE_NEAREST_NEIGHBOR: conv_resize_nearest,
        Op.TOPK_V2: conv_topk,
        Op.UNIDIRECTIONAL_SEQUENCE_RNN: conv_unidirectional_rnn,
    },
)


# ---------------------------------------------------------------------------------------
# Whole models
# ---------------------------------------------------------------------------------------


def _check_no_subnormal_constants(sg: Subgraph, indexes) -> None:
    """The CPU plugin flushes subnormal float32 values in constants to zero (at run time it
    keeps them): an operation reading such a constant would compute with 0 instead
    (docs/findings_openvino.md#subnormal-constants)."""
    tiny = np.finfo(np.float32).tiny
    for i in indexes:
        o = sg.operands[i]
        if o.is_constant and o.type in (T.TENSOR_FLOAT32, T.FLOAT32):
            v = np.abs(np.asarray(o.value, np.float32))
            if ((v > 0) & (v < tiny)).any():
                raise Unsupported("constant input with subnormal float32 values (the CPU plugin flushes them to zero)")


def convert_operation(g: GraphBuilder, index: int) -> None:
    """Build one operation into ``g``; raise Unsupported when it cannot be mapped faithfully."""
    op = g.sg.operations[index]
    fn = conversion.lookup(CONVERTERS, op, "OpenVINO")
    conversion.check_operation_types(g.sg, op, OV_TYPE)
    _check_no_subnormal_constants(g.sg, op.inputs)
    if op.outputs and all(i in g.const_derived for i in op.outputs):
        # OpenVINO folds constant-only subgraphs at compile time, and the folding is not the
        # kernels' arithmetic: Abs(Add(-236, -255)) folds to -491, an f16 overflow to -+65504
        # (docs/findings_openvino.md#constant-folding).  Such operations run elsewhere.
        raise Unsupported(
            "computed from constants only (OpenVINO's compile-time constant folding does not compute NNAPI's answer)"
        )
    try:
        fn(OpCtx(g, index))
    except (Unsupported, Rejected):
        raise
    except RuntimeError as e:
        # OpenVINO's shape inference refuses the node: the operation is not mappable as built.
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise Unsupported(f"OpenVINO refused the node: {first[:200]}") from None


def operation_supported(model: Model, index: int) -> tuple[bool, str]:
    g = GraphBuilder(model.main, with_inputs=False, referenced=model.referenced)
    return conversion.supported(lambda: convert_operation(g, index))


def to_openvino(model: Model) -> tuple[ov.Model, list[str]]:
    """The whole main graph as an OpenVINO model (raises Unsupported on the first unmappable op),
    and the messages of its run-time checks (results after the model's outputs, in order)."""
    sg = model.main
    conversion.check_types(sg, (*sg.input_indexes, *sg.output_indexes), OV_TYPE)
    g = GraphBuilder(sg, referenced=model.referenced)
    conversion.convert_all(sg, lambda k: convert_operation(g, k))
    results = []
    for i in sg.output_indexes:
        v = g.operand_value(i)
        # A Result of its own per output: two outputs never share one tensor.
        results.append(ops.result(ops.convert(v, v.get_element_type()) if i in sg.input_indexes else v))
    checks = [msg for _, msg in g.run_checks]
    results += [ops.result(ok) for ok, _ in g.run_checks]
    m = ov.Model(results, g.parameters, sg.name or "main")
    return m, checks
