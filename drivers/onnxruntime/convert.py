"""nnconform model -> ONNX graph, one small function per NNAPI operation.

Each converter receives an :class:`OpCtx` and emits ONNX nodes that write the operation's
outputs.  When the mapping would not compute what NNAPI specifies for the operation's data
types and parameters, it raises :class:`Unsupported` (the device then reports the operation
unsupported and the suites skip it): nothing here approximates a semantics it cannot match.

Conventions:
- Operand ``i`` of the converted subgraph is the ONNX value ``o{i}``.  Tensors keep NNAPI's
  storage types: TENSOR_QUANT8_ASYMM is uint8, TENSOR_QUANT8_ASYMM_SIGNED / _SYMM /
  _SYMM_PER_CHANNEL are int8 (the scale and zero point live in the converter, not the graph).
- Scalar parameters (padding scheme, strides, activation, axis, ...) must be constants: they
  become ONNX attributes or initialisers.  A parameter fed at run time is unsupported.
- Shapes: where NNAPI semantics depend on a dimension (SAME padding, FULLY_CONNECTED's
  flattening, SQUEEZE without axes) the model's dimension must be known.
- FLOAT16 arithmetic is widened to float32 and narrowed once, as the NNAPI CPU reference does;
  pure data movement stays in fp16.
- Images: NNAPI is NHWC by default, ONNX's Conv/Pool are NCHW: we transpose around them.
- Quantised arithmetic: convolutions and FULLY_CONNECTED use QLinearConv (the runtime's own
  integer kernel; its requantisation rounds half to even where NNAPI rounds half away from
  zero).  Element-wise quantised arithmetic goes through DequantizeLinear -> float op ->
  QuantizeLinear; fused activations on quantised outputs are an exact Clip on the stored
  values with NNAPI's quantised activation bounds.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from nnconform.drivers.common import activation, op_params
from nnconform.drivers.common import converter as conversion
from nnconform.drivers.common.layout import TO_NCHW, TO_NHWC, axis_last, nhwc_dims
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

OPSET = 21


from nnconform.driver.support import Rejected, Unsupported  # noqa: E402, F401  (re-exported for control_flow, recurrent)

ONNX_TYPE = storage_table(
    TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT32, TensorProto.BOOL, TensorProto.UINT8, TensorProto.INT8
)
F32, F16, I32, I64, BOOL = (
    TensorProto.FLOAT,
    TensorProto.FLOAT16,
    TensorProto.INT32,
    TensorProto.INT64,
    TensorProto.BOOL,
)


# ---------------------------------------------------------------------------------------
# Graph building
# ---------------------------------------------------------------------------------------


class GraphBuilder:
    """Nodes and initialisers of one ONNX graph, with fresh-name generation."""

    def __init__(self, subgraph: Subgraph, model: Model | None = None):
        self.sg = subgraph
        self.model = model  # the whole model: IF/WHILE look up their referenced subgraphs in it
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._const_operands: dict[int, str] = {}
        self._count = 0

    def fresh(self, hint: str = "t") -> str:
        self._count += 1
        return f"_{hint}{self._count}"

    def const(self, value, dtype=None, hint: str = "c") -> str:
        arr = np.asarray(value, dtype=dtype)
        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(arr, name))
        return name

    def node(self, op_type: str, inputs, outputs=None, n_out: int = 1, domain: str = "", **attrs):
        outs = list(outputs) if outputs is not None else [self.fresh(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, domain=domain or None, **attrs))
        return outs[0] if len(outs) == 1 else outs

    def operand_value(self, index: int) -> str:
        """ONNX name of operand ``index`` (constants become initialisers on first use)."""
        op = self.sg.operands[index]
        if op.is_omitted:
            return ""
        if op.is_constant:
            if index not in self._const_operands:
                if op.type not in ONNX_TYPE:
                    raise Unsupported(f"constant operand of type {op.type.name}")
                name = f"o{index}"
                self.initializers.append(numpy_helper.from_array(np.asarray(op.value), name))
                self._const_operands[index] = name
            return self._const_operands[index]
        return f"o{index}"


class OpCtx(conversion.OperationContext):
    """One operation seen by its converter, emitting into ``g``."""

    def __init__(self, g: GraphBuilder, index: int):
        super().__init__(g.sg, index)
        self.g = g

    # inputs / outputs --------------------------------------------------------------
    def x(self, k: int) -> str:
        return self.g.operand_value(self.op.inputs[k])

    def y(self, k: int = 0) -> str:
        return f"o{self.op.outputs[k]}"

    def node(self, *a, **kw):
        return self.g.node(*a, **kw)

    def const_value(self, value, dtype=None) -> str:
        return self.g.const(value, dtype)

    def int64s(self, values) -> str:
        return self.g.const(np.asarray(values, dtype=np.int64).reshape(-1), hint="i")

    # type helpers ------------------------------------------------------------------
    def to_f32(self, name: str, operand: Operand) -> str:
        """A float tensor in float32 (fp16 widened)."""
        if operand.type in (T.TENSOR_FLOAT16, T.FLOAT16):
            return self.node("Cast", [name], to=F32)
        return name

    def from_f32(self, name: str, out: Operand, target: str | None = None) -> str:
        """Write float32 ``name`` as ``out``'s type (into ``target`` when given)."""
        if out.type == T.TENSOR_FLOAT16:
            return self.node("Cast", [name], [target] if target else None, to=F16)
        if target:
            return self.node("Identity", [name], [target])
        return name

    def dequant(self, k: int) -> str:
        """Input k as float32 real values (a float input is widened, a quantised one dequantised)."""
        o = self.ins[k]
        if o.type in FLOATS:
            return self.to_f32(self.x(k), o)
        if o.type in QUANT8:
            return self.node("DequantizeLinear", [self.x(k), self.const_value(np.float32(o.scale)), zp_const(self, o)])
        raise Unsupported(f"input {k} of type {o.type.name}")

    def requant(self, real: str, out: Operand, act: int, target: str) -> str:
        """float32 real values -> ``out``'s stored values, with the fused activation."""
        if out.type in FLOATS:
            return self.from_f32(float_activation(self, real, act), out, target)
        if out.type in QUANT8:
            q = self.node("QuantizeLinear", [real, self.const_value(np.float32(out.scale)), zp_const(self, out)])
            return quant_activation(self, q, act, out, target)
        raise Unsupported(f"output of type {out.type.name}")


def zp_const(c: OpCtx, o: Operand) -> str:
    dt = np.uint8 if o.type == T.TENSOR_QUANT8_ASYMM else np.int8
    return c.const_value(np.asarray(o.zero_point, dtype=dt))


def float_activation(c: OpCtx, name: str, act: int, dtype=np.float32) -> str:
    """NNAPI's fused activation on a float tensor (float32 unless ``dtype`` says otherwise)."""
    bounds = activation.float_bounds(act)
    if bounds is None:
        return name
    if act == activation.RELU:
        return c.node("Relu", [name])
    lo, hi = bounds
    return c.node("Clip", [name, c.const_value(np.asarray(lo, dtype)), c.const_value(np.asarray(hi, dtype))])


def quant_activation(c: OpCtx, q: str, act: int, out: Operand, target: str | None) -> str:
    """Clamp stored quantised values to NNAPI's activation bounds (exact on integers)."""
    bounds = activation.quant_bounds(act, out)
    if bounds is None:
        return c.node("Identity", [q], [target] if target else None)
    lo, hi = bounds
    dt = out.info.dtype
    return c.node(
        "Clip", [q, c.const_value(np.asarray(lo, dt)), c.const_value(np.asarray(hi, dt))], [target] if target else None
    )


# ---------------------------------------------------------------------------------------
# Element-wise arithmetic
# ---------------------------------------------------------------------------------------


def _binary_arith(onnx_op: str, quant_ok: bool = True, int32_ok: bool = True):
    def convert(c: OpCtx):
        a, out = c.ins[0], c.outs[0]
        act = c.scalar(2)
        if a.type in FLOATS:
            y = c.node(onnx_op, [c.dequant(0), c.dequant(1)])
            c.requant(y, out, act, c.y())
        elif a.type == T.TENSOR_INT32 and int32_ok:
            if act != nn_activation.NONE:
                raise Unsupported("int32 arithmetic with a fused activation")
            c.node(onnx_op, [c.x(0), c.x(1)], [c.y()])
        elif a.type in QUANT8 and quant_ok:
            y = c.node(onnx_op, [c.dequant(0), c.dequant(1)])
            c.requant(y, out, act, c.y())
        else:
            raise Unsupported(f"{a.type.name}")

    return convert


def conv_div(c: OpCtx):
    a, out = c.ins[0], c.outs[0]
    act = c.scalar(2)
    if a.type in FLOATS:
        c.requant(c.node("Div", [c.dequant(0), c.dequant(1)]), out, act, c.y())
        return
    if a.type != T.TENSOR_INT32 or act != nn_activation.NONE:
        raise Unsupported(a.type.name)
    # NNAPI: floor division, and a zero divisor gives 0.  ONNX Div truncates and traps on 0,
    # so divide by a safe divisor and pick: floor(a / b) = (a - mod(a, b)) / b, mod with the
    # divisor's sign (fmod=0), an exact integer division.
    zero = c.node("Equal", [c.x(1), c.const_value(np.int32(0))])
    safe = c.node("Where", [zero, c.const_value(np.int32(1)), c.x(1)])
    rem = c.node("Mod", [c.x(0), safe], fmod=0)
    q = c.node("Div", [c.node("Sub", [c.x(0), rem]), safe])
    c.node("Where", [zero, c.const_value(np.int32(0)), q], [c.y()])


def _minmax(onnx_op: str):
    def convert(c: OpCtx):
        a, out = c.ins[0], c.outs[0]
        if a.type in FLOATS or a.type == T.TENSOR_INT32:
            # NaN handling differs (std::max keeps input 0's NaN); ONNX Max propagates NaN.
            c.node(onnx_op, [c.x(0), c.x(1)], [c.y()])
        elif a.type in QUANT8:
            c.requant(c.node(onnx_op, [c.dequant(0), c.dequant(1)]), out, nn_activation.NONE, c.y())
        else:
            raise Unsupported(a.type.name)

    return convert


def conv_pow(c: OpCtx):
    c.require(0, FLOATS)
    c.requant(c.node("Pow", [c.dequant(0), c.dequant(1)]), c.outs[0], 0, c.y())


def conv_prelu(c: OpCtx):
    x, out = c.ins[0], c.outs[0]
    if x.type not in FLOATS:
        raise Unsupported(x.type.name)
    xf, af = c.dequant(0), c.dequant(1)
    # NNAPI broadcasts alpha both ways (ONNX PRelu only alpha to x); Where broadcasts all three.
    negative = c.node("Less", [xf, c.const_value(np.float32(0))])
    y = c.node("Where", [negative, c.node("Mul", [xf, af]), xf])
    c.from_f32(y, out, c.y())


# ---------------------------------------------------------------------------------------
# Activations and unary math
# ---------------------------------------------------------------------------------------


def _relu(act: int):
    def convert(c: OpCtx):
        x, out = c.ins[0], c.outs[0]
        if x.type in FLOATS:
            c.from_f32(float_activation(c, c.to_f32(c.x(0), x), act), out, c.y())
        elif x.type in QUANT8:
            if not same_quant(x, out):
                raise Unsupported("quantised RELU with different input and output parameters")
            quant_activation(c, c.x(0), act, out, c.y())
        else:
            raise Unsupported(x.type.name)

    return convert


def _unary_float(onnx_op: str, int32_op: str | None = None, quant_ok: bool = False):
    def convert(c: OpCtx):
        x, out = c.ins[0], c.outs[0]
        if x.type in FLOATS:
            c.from_f32(c.node(onnx_op, [c.to_f32(c.x(0), x)]), out, c.y())
        elif x.type == T.TENSOR_INT32 and int32_op:
            c.node(int32_op, [c.x(0)], [c.y()])
        elif x.type in QUANT8 and quant_ok:
            c.requant(c.node(onnx_op, [c.dequant(0)]), out, 0, c.y())
        else:
            raise Unsupported(x.type.name)

    return convert


def conv_rsqrt(c: OpCtx):
    x = c.require(0, FLOATS)
    y = c.node("Div", [c.const_value(np.float32(1)), c.node("Sqrt", [c.to_f32(c.x(0), x)])])
    c.from_f32(y, c.outs[0], c.y())


def conv_elu(c: OpCtx):
    x = c.require(0, FLOATS)
    c.from_f32(c.node("Elu", [c.to_f32(c.x(0), x)], alpha=float(c.scalar(1))), c.outs[0], c.y())


def conv_hard_swish(c: OpCtx):
    x = c.require(0, FLOATS)
    c.from_f32(c.node("HardSwish", [c.to_f32(c.x(0), x)]), c.outs[0], c.y())


def _softmax(onnx_op: str, quant_ok: bool):
    def convert(c: OpCtx):
        x, out = c.ins[0], c.outs[0]
        if x.type not in FLOATS and not (quant_ok and x.type in QUANT8):
            raise Unsupported(x.type.name)
        beta = float(c.scalar(1))
        axis = int(c.scalar(2, -1))
        xf = c.dequant(0)
        if beta != 1.0:
            xf = c.node("Mul", [xf, c.const_value(np.float32(beta))])
        c.requant(c.node(onnx_op, [xf], axis=axis), out, 0, c.y())

    return convert


def conv_l2_normalization(c: OpCtx):
    out = c.outs[0]
    c.require(0, FLOATS)
    axis = int(c.scalar(1, -1))
    xf = c.dequant(0)
    ss = c.node("ReduceSumSquare", [xf, c.int64s([axis])], keepdims=1)
    norm = c.node("Max", [c.node("Sqrt", [ss]), c.const_value(np.float32(1e-6))])
    c.from_f32(c.node("Div", [xf, norm]), out, c.y())


# ---------------------------------------------------------------------------------------
# Comparisons, logical, select
# ---------------------------------------------------------------------------------------


def _compare(onnx_op: str, negate: bool = False):
    def convert(c: OpCtx):
        a = c.ins[0]
        if a.type in QUANT8:
            xa, xb = c.dequant(0), c.dequant(1)
        elif a.type in FLOATS or a.type == T.TENSOR_INT32:
            xa, xb = c.x(0), c.x(1)
        elif a.type == T.TENSOR_BOOL8:
            if onnx_op != "Equal":  # ONNX orders no booleans; false < true as integers
                xa, xb = c.node("Cast", [c.x(0)], to=I32), c.node("Cast", [c.x(1)], to=I32)
            else:
                xa, xb = c.x(0), c.x(1)
        else:
            raise Unsupported(a.type.name)
        if negate:
            c.node("Not", [c.node(onnx_op, [xa, xb])], [c.y()])
        else:
            c.node(onnx_op, [xa, xb], [c.y()])

    return convert


def _logical(onnx_op: str, arity: int):
    def convert(c: OpCtx):
        c.require(0, (T.TENSOR_BOOL8,))
        c.node(onnx_op, [c.x(k) for k in range(arity)], [c.y()])

    return convert


def conv_select(c: OpCtx):
    c.require(1, NUMERIC, "SELECT's input 1")
    require_same_quant(c, (1, 2), "SELECT")
    c.node("Where", [c.x(0), c.x(1), c.x(2)], [c.y()])


# ---------------------------------------------------------------------------------------
# Convolutions, fully connected, pooling
# ---------------------------------------------------------------------------------------


def _conv_args(c: OpCtx, n_extra: int, **kw):
    """(pads [t, l, b, r], strides, dilations, extra, act, nchw) in ONNX's order."""
    p = params.conv_params(c, n_extra, **kw)
    return [*p.pads_begin, *p.pads_end], list(p.strides), list(p.dilations), p.extra, p.activation, p.nchw


def _filter_oihw(c: OpCtx, k: int, perm) -> str:
    """Filter input k permuted into ONNX's [O, I, H, W] (at conversion time when constant)."""
    o = c.ins[k]
    if o.is_constant:
        return c.const_value(np.ascontiguousarray(np.transpose(o.value, perm)))
    return c.node("Transpose", [c.x(k)], perm=list(perm))


def _emit_conv(c: OpCtx, x_nchw: str, w_oihw: str, group: int, pads, strides, dil, act, nchw, w_axis_scales=None):
    """Float or QLinear conv of an NCHW input; writes output 0 in the model's layout."""
    x, f, out = c.ins[0], c.ins[1], c.outs[0]
    attrs = dict(pads=pads, strides=strides, dilations=dil, group=group)
    if x.type in FLOATS:
        bias = c.to_f32(c.x(2), c.ins[2])
        y = c.node("Conv", [c.to_f32(x_nchw, x), c.to_f32(w_oihw, f), bias], **attrs)
        y = float_activation(c, y, act)
        if not nchw:
            y = c.node("Transpose", [y], perm=TO_NHWC)
        c.from_f32(y, out, c.y())
        return
    if x.type not in QUANT8:
        raise Unsupported(x.type.name)
    if f.type == T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        w_scale = c.const_value(np.asarray(w_axis_scales, np.float32))
        w_zp = c.const_value(np.zeros(len(w_axis_scales), np.int8))
    elif f.type == x.type:
        w_scale, w_zp = c.const_value(np.float32(f.scale)), zp_const(c, f)
    else:
        raise Unsupported(f"filter of type {f.type.name}")
    inputs = [
        x_nchw,
        c.const_value(np.float32(x.scale)),
        zp_const(c, x),
        w_oihw,
        w_scale,
        w_zp,
        c.const_value(np.float32(out.scale)),
        zp_const(c, out),
    ]
    if not c.omitted(2):
        inputs.append(c.x(2))
    y = c.node("QLinearConv", inputs, **attrs)
    if not nchw:
        y = c.node("Transpose", [y], perm=TO_NHWC)
    quant_activation(c, y, act, out, c.y())


def _check_conv_types(c: OpCtx, allow_per_channel_dim: int | None):
    x, f = c.ins[0], c.ins[1]
    if x.type in FLOATS:
        if f.type != x.type:
            raise Unsupported("mixed filter type")
        return None
    if x.type not in QUANT8:
        raise Unsupported(x.type.name)
    if f.type == T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        if (
            allow_per_channel_dim is None
            or f.channel_quant is None
            or f.channel_quant.channel_dim != allow_per_channel_dim
        ):
            raise Unsupported("per-channel filter layout")
        return list(f.channel_quant.scales)
    return None


def conv_conv_2d(c: OpCtx):
    scales = _check_conv_types(c, 0)
    pads, strides, dil, _, act, nchw = _conv_args(c, 0)
    xin = c.x(0) if nchw else c.node("Transpose", [c.x(0)], perm=TO_NCHW)
    _emit_conv(c, xin, _filter_oihw(c, 1, (0, 3, 1, 2)), 1, pads, strides, dil, act, nchw, scales)


def conv_grouped_conv_2d(c: OpCtx):
    scales = _check_conv_types(c, 0)
    pads, strides, dil, (groups,), act, nchw = _conv_args(c, 1, dilation=False)
    xin = c.x(0) if nchw else c.node("Transpose", [c.x(0)], perm=TO_NCHW)
    _emit_conv(c, xin, _filter_oihw(c, 1, (0, 3, 1, 2)), groups, pads, strides, dil, act, nchw, scales)


def conv_depthwise_conv_2d(c: OpCtx):
    scales = _check_conv_types(c, 3)
    pads, strides, dil, (mult,), act, nchw = _conv_args(c, 1)
    channels = op_params.depthwise_channels(c, mult, nchw)
    xin = c.x(0) if nchw else c.node("Transpose", [c.x(0)], perm=TO_NCHW)
    # [1, fh, fw, C*mult] -> [C*mult, 1, fh, fw]: output channel c*mult + m belongs to group c.
    _emit_conv(c, xin, _filter_oihw(c, 1, (3, 0, 1, 2)), channels, pads, strides, dil, act, nchw, scales)


def conv_fully_connected(c: OpCtx):
    x, w, out = c.ins[0], c.ins[1], c.outs[0]
    act = int(c.scalar(3))
    wd = c.dims(w)
    n_units, k = wd
    if x.type in FLOATS:
        if w.type != x.type:
            raise Unsupported("mixed weight type")
        x2 = c.node("Reshape", [c.to_f32(c.x(0), x), c.int64s([-1, k])])
        inputs = [x2, c.to_f32(c.x(1), w)]
        if not c.omitted(2):
            inputs.append(c.to_f32(c.x(2), c.ins[2]))
        y = float_activation(c, c.node("Gemm", inputs, transB=1), act)
        y = c.node("Reshape", [y, c.int64s(c.dims(out))]) if len(c.dims(out)) != 2 else y
        c.from_f32(y, out, c.y())
        return
    if x.type not in QUANT8 or w.type != x.type:
        raise Unsupported(f"{x.type.name} with {w.type.name} weights")
    # A 1x1 QLinearConv: input [B, K, 1, 1], weights [N, K, 1, 1], bias [N].
    x4 = c.node("Reshape", [c.x(0), c.int64s([-1, k, 1, 1])])
    w4 = (
        c.const_value(np.asarray(w.value).reshape(n_units, k, 1, 1))
        if w.is_constant
        else c.node("Reshape", [c.x(1), c.int64s([n_units, k, 1, 1])])
    )
    inputs = [
        x4,
        c.const_value(np.float32(x.scale)),
        zp_const(c, x),
        w4,
        c.const_value(np.float32(w.scale)),
        zp_const(c, w),
        c.const_value(np.float32(out.scale)),
        zp_const(c, out),
    ]
    if not c.omitted(2):
        inputs.append(c.x(2))
    y = c.node("Reshape", [c.node("QLinearConv", inputs), c.int64s(c.dims(out))])
    quant_activation(c, y, act, out, c.y())


def conv_transpose_conv_2d(c: OpCtx):
    x, f, out = c.ins[0], c.ins[1], c.outs[0]
    p = params.transpose_conv_params(c)
    act, nchw = p.activation, p.nchw
    bp = op_params.backprop_padding(p)
    attrs = dict(pads=[*bp.begin, *bp.end], strides=list(p.strides), output_padding=list(bp.output_padding))
    xin = c.x(0) if nchw else c.node("Transpose", [c.x(0)], perm=TO_NCHW)
    if x.type in FLOATS:
        if f.type != x.type:
            raise Unsupported("mixed filter type")
        w = c.to_f32(_filter_oihw(c, 1, (3, 0, 1, 2)), f)
        y = c.node("ConvTranspose", [c.to_f32(xin, x), w, c.to_f32(c.x(2), c.ins[2])], **attrs)
        y = float_activation(c, y, act)
        y = y if nchw else c.node("Transpose", [y], perm=TO_NHWC)
        c.from_f32(y, out, c.y())
        return
    if x.type not in QUANT8:
        raise Unsupported(x.type.name)
    # Quantised: real-valued ConvTranspose between DequantizeLinear and QuantizeLinear (no
    # quantised ConvTranspose in the ONNX standard).
    xf = c.node("DequantizeLinear", [xin, c.const_value(np.float32(x.scale)), zp_const(c, x)])
    if f.type == T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        cq = f.channel_quant
        if cq is None or cq.channel_dim != 0:
            raise Unsupported("per-channel filter layout")
        scales = np.asarray(cq.scales, np.float32)
        wf = c.node(
            "DequantizeLinear", [c.x(1), c.const_value(scales), c.const_value(np.zeros(len(scales), np.int8))], axis=0
        )
        bias_scale = np.float32(x.scale) * scales
    elif f.type == x.type:
        wf = c.node("DequantizeLinear", [c.x(1), c.const_value(np.float32(f.scale)), zp_const(c, f)])
        bias_scale = np.float32(x.scale) * np.float32(f.scale)
    else:
        raise Unsupported(f"filter of type {f.type.name}")
    wf = c.node("Transpose", [wf], perm=[3, 0, 1, 2])
    bias = c.node("Mul", [c.node("Cast", [c.x(2)], to=F32), c.const_value(np.asarray(bias_scale, np.float32))])
    y = c.node("ConvTranspose", [xf, wf, bias], **attrs)
    y = y if nchw else c.node("Transpose", [y], perm=TO_NHWC)
    c.requant(y, out, act, c.y())


def conv_batch_space(c: OpCtx):
    x = movable(c, 0, DATA)
    p = op_params.batch_space(c)
    y = c.node("Transpose", [c.x(0)], perm=TO_NHWC) if p.nchw else c.x(0)
    if p.to_batch:
        pt, pb, pl, pr = p.pads
        if any(p.pads):
            fill = c.const_value(pad_fill(c, x, None))
            y = c.node("Pad", [y, c.int64s([0, pt, pl, 0, 0, pb, pr, 0]), fill], mode="constant")
        view, perm, shape = p.space_to_batch_shapes()
    else:
        view, perm, shape = p.batch_to_space_shapes()
    y = c.node("Reshape", [c.node("Transpose", [c.node("Reshape", [y, c.int64s(view)])], perm=perm), c.int64s(shape)])
    if p.nchw:
        c.node("Transpose", [y], [c.y()], perm=TO_NCHW)
    else:
        c.node("Identity", [y], [c.y()])


def _pool_args(c: OpCtx):
    p = params.pool_params(c)
    if max(p.pad_left, p.pad_right) >= p.filter_w or max(p.pad_top, p.pad_bottom) >= p.filter_h:
        raise Unsupported("padding as large as the window (ONNX rejects it)")
    return (
        dict(kernel_shape=list(p.window), pads=[*p.pads_begin, *p.pads_end], strides=list(p.strides)),
        p.activation,
        p.nchw,
    )


def _pool(kind: str):
    def convert(c: OpCtx):
        x, out = c.ins[0], c.outs[0]
        attrs, act, nchw = _pool_args(c)
        quant = x.type in QUANT8
        if quant:
            if kind == "l2" or not same_quant(x, out):
                raise Unsupported("quantised pooling")
        elif x.type not in FLOATS:
            raise Unsupported(x.type.name)
        xin = c.x(0) if nchw else c.node("Transpose", [c.x(0)], perm=TO_NCHW)
        if kind == "max":
            y = c.node("MaxPool", [xin if quant else c.to_f32(xin, x)], **attrs)
        else:
            xf = c.node("Cast", [xin], to=F32) if quant else c.to_f32(xin, x)
            if kind == "l2":
                xf = c.node("Mul", [xf, xf])
            y = c.node("AveragePool", [xf], count_include_pad=0, **attrs)
            if kind == "l2":
                y = c.node("Sqrt", [y])
            if quant:
                # NNAPI: the integer sum divided by the count rounding half up (never negative
                # for uint8); int8 sums can be negative and round half away from zero.
                if x.type == T.TENSOR_QUANT8_ASYMM:
                    y = c.node("Floor", [c.node("Add", [y, c.const_value(np.float32(0.5))])])
                else:
                    raise Unsupported("signed quantised average pooling")
                y = c.node("Cast", [y], to=ONNX_TYPE[out.type])
        if not nchw:
            y = c.node("Transpose", [y], perm=TO_NHWC)
        if quant:
            quant_activation(c, y, act, out, c.y())
        else:
            c.from_f32(float_activation(c, y, act), out, c.y())

    return convert


# ---------------------------------------------------------------------------------------
# Quantisation and casts
# ---------------------------------------------------------------------------------------


def conv_quantize(c: OpCtx):
    x, out = c.require(0, FLOATS), c.outs[0]
    if out.type not in QUANT8:
        raise Unsupported(out.type.name)
    xf = c.to_f32(c.x(0), x)
    # NNAPI clamps with std::min/std::max, which turns NaN into the type's maximum; ONNX
    # leaves NaN to the implementation.  Map NaN to +inf first (which saturates to qmax).
    xf = c.node("Where", [c.node("IsNaN", [xf]), c.const_value(np.float32(np.inf)), xf])
    c.requant(xf, out, 0, c.y())


def conv_dequantize(c: OpCtx):
    x, d = c.ins[0], op_params.dequantize(c)
    if d.axis is None:
        dq = c.node(
            "DequantizeLinear", [c.x(0), c.const_value(d.scale), c.const_value(np.asarray(d.zero_point, x.info.dtype))]
        )
    else:
        dq = c.node(
            "DequantizeLinear",
            [c.x(0), c.const_value(d.scale), c.const_value(np.zeros(len(d.scale), np.int8))],
            axis=d.axis,
        )
    c.from_f32(dq, c.outs[0], c.y())


def conv_cast(c: OpCtx):
    x, out = c.ins[0], c.outs[0]
    if x.type == out.type and x.type in ONNX_TYPE:
        c.node("Identity", [c.x(0)], [c.y()])
        return
    if x.type not in CASTABLE or out.type not in CASTABLE:
        raise Unsupported(f"{x.type.name} -> {out.type.name}")
    src = c.x(0)
    if out.type == T.TENSOR_QUANT8_ASYMM and x.type != T.TENSOR_QUANT8_ASYMM:
        # NNAPI saturates into 0..255 and truncates; ONNX Cast to uint8 wraps.  Clamp first
        # (in the source type), truncate floats toward zero, then cast.
        if x.type in FLOATS:
            src = c.node("Cast", [src], to=F32) if x.type == T.TENSOR_FLOAT16 else src
            src = c.node("Clip", [src, c.const_value(np.float32(0)), c.const_value(np.float32(255))])
            # NaN: the reference's static_cast is undefined; leave as ONNX does (unsupported
            # values are not in CTS).
        else:
            src = c.node("Clip", [src, c.const_value(np.int32(0)), c.const_value(np.int32(255))])
    elif out.type == T.TENSOR_INT32 and x.type in FLOATS:
        # ONNX leaves out-of-range float -> int32 undefined; NNAPI (ARM64) saturates and
        # gives 0 for NaN.  2**31 is the first float32 above INT32_MAX.
        xf = c.node("Cast", [src], to=F32) if x.type == T.TENSOR_FLOAT16 else src
        xf = c.node("Where", [c.node("IsNaN", [xf]), c.const_value(np.float32(0)), xf])
        low = c.const_value(np.float32(-(2.0**31)))
        safe = c.node("Clip", [xf, low, c.const_value(np.float32(2.0**31 - 128))])
        y = c.node("Cast", [safe], to=I32)
        too_big = c.node("GreaterOrEqual", [xf, c.const_value(np.float32(2.0**31))])
        c.node("Where", [too_big, c.const_value(np.int32(2**31 - 1)), y], [c.y()])
        return
    c.node("Cast", [src], [c.y()], to=ONNX_TYPE[out.type])


# ---------------------------------------------------------------------------------------
# Data movement
# ---------------------------------------------------------------------------------------


def conv_reshape(c: OpCtx):
    movable(c)
    shape = c.node("Cast", [c.x(1)], to=I64) if not c.ins[1].is_constant else c.int64s(c.const(1))
    c.node("Reshape", [c.x(0), shape], [c.y()], allowzero=1)


def conv_squeeze(c: OpCtx):
    movable(c)
    axes = op_params.squeeze_axes(c)
    if len(axes) == c.rank(c.ins[0]):
        c.node("Reshape", [c.x(0), c.int64s([1])], [c.y()])
    elif axes:
        c.node("Squeeze", [c.x(0), c.int64s(axes)], [c.y()])
    else:
        c.node("Identity", [c.x(0)], [c.y()])


def conv_expand_dims(c: OpCtx):
    movable(c)
    c.node("Unsqueeze", [c.x(0), c.int64s([int(c.scalar(1))])], [c.y()])


def conv_transpose(c: OpCtx):
    movable(c)
    c.node("Transpose", [c.x(0)], [c.y()], perm=op_params.transpose_perm(c))


def conv_concatenation(c: OpCtx):
    out = c.outs[0]
    n = len(c.ins) - 1
    axis = int(c.scalar(n))
    for k in range(n):
        c.require(k, DATA)
    require_same_quant(c, range(n), "CONCATENATION", out)
    c.node("Concat", [c.x(k) for k in range(n)], [c.y()], axis=axis)


def conv_gather(c: OpCtx):
    movable(c, 0, NUMERIC)
    c.node("Gather", [c.x(0), c.x(2)], [c.y()], axis=int(c.scalar(1)))


def _onnx_pads(c: OpCtx, pads: np.ndarray) -> str:
    # ONNX lists every dimension's begin, then every dimension's end.
    return c.int64s(list(pads[:, 0]) + list(pads[:, 1]))


def conv_pad(c: OpCtx):
    x = movable(c, 0, DATA)
    value = c.const_value(pad_fill(c, x, 2 if c.op.type == Op.PAD_V2 else None))
    c.node("Pad", [c.x(0), _onnx_pads(c, op_params.paddings(c)), value], [c.y()], mode="constant")


def conv_mirror_pad(c: OpCtx):
    movable(c, 0, NUMERIC)
    pads, mode = op_params.mirror_pad(c)
    if mode != "reflect":
        raise Unsupported("SYMMETRIC mirror padding (ONNX has only reflect and edge)")
    c.node("Pad", [c.x(0), _onnx_pads(c, pads)], [c.y()], mode="reflect")


def conv_slice(c: OpCtx):
    movable(c, 0, NUMERIC)
    xd = c.dims(c.ins[0])
    begin, end = params.slice_bounds(c, xd)
    c.node("Slice", [c.x(0), c.int64s(begin), c.int64s(end), c.int64s(range(len(xd)))], [c.y()])


def conv_strided_slice(c: OpCtx):
    movable(c, 0, DATA)
    xd = c.dims(c.ins[0])
    s = params.strided_slice(c, xd)
    y = c.node("Slice", [c.x(0), c.int64s(s.starts), c.int64s(s.stops), c.int64s(range(len(xd))), c.int64s(s.strides)])
    shrunk = list(s.shrunk_axes)
    if shrunk and len(shrunk) == len(xd):
        c.node("Reshape", [y, c.int64s([1])], [c.y()])
    elif shrunk:
        c.node("Squeeze", [y, c.int64s(shrunk)], [c.y()])
    else:
        c.node("Identity", [y], [c.y()])


def conv_split(c: OpCtx):
    movable(c, 0, NUMERIC)
    axis, n = op_params.split(c)
    c.node("Split", [c.x(0)], [c.y(k) for k in range(len(c.outs))], axis=axis, num_outputs=n)


def conv_tile(c: OpCtx):
    movable(c, 0, NUMERIC)
    mult = c.node("Cast", [c.x(1)], to=I64) if not c.ins[1].is_constant else c.int64s(c.const(1))
    c.node("Tile", [c.x(0), mult], [c.y()])


def conv_reverse(c: OpCtx):
    movable(c, 0, NUMERIC)
    axes = [int(a) for a in c.const(1).reshape(-1)]
    if len(axes) != 1:
        raise Unsupported("REVERSE over several axes")
    big = np.iinfo(np.int64)
    c.node("Slice", [c.x(0), c.int64s([-1]), c.int64s([big.min]), c.int64s(axes), c.int64s([-1])], [c.y()])


def conv_depth_to_space(c: OpCtx):
    movable(c, 0, DATA)
    bs, nchw = op_params.depth_space(c)
    x = c.x(0) if nchw else c.node("Transpose", [c.x(0)], perm=TO_NCHW)
    op = "DepthToSpace" if c.op.type == Op.DEPTH_TO_SPACE else "SpaceToDepth"
    attrs = dict(blocksize=bs, mode="DCR") if op == "DepthToSpace" else dict(blocksize=bs)
    if nchw:
        c.node(op, [x], [c.y()], **attrs)
    else:
        c.node("Transpose", [c.node(op, [x], **attrs)], [c.y()], perm=TO_NHWC)


def conv_resize_bilinear(c: OpCtx):
    """RESIZE_BILINEAR on floats as ONNX Resize (linear).  NNAPI's source coordinate is
    i * in/out (asymmetric), (i + 0.5) * in/out - 0.5 (half_pixel) or i * (in-1)/(out-1)
    (align_corners), with the neighbours clamped to the image: ONNX's linear Resize with the
    same coordinate mode clamps the coordinate instead, which gives the same blend (at a
    clamped border both neighbours are the same pixel, so the weights sum to 1 either way).
    The arithmetic order differs (the float criteria judge it).  Quantised inputs are
    unsupported: NNAPI truncates (QUANT8_ASYMM) or uses TFLite's 1/1024-step integer kernel
    (QUANT8_ASYMM_SIGNED), neither of which ONNX's integer Resize reproduces; align_corners
    with an output size of 1 (NNAPI falls back to in/out there) is unsupported too."""
    x_op = c.require(0, FLOATS)
    out = c.outs[0]
    r = op_params.resize(c)
    nchw, align, half, out_h, out_w = r.nchw, r.align, r.half, r.out_h, r.out_w
    n, _, _, ch = nhwc_dims(c.dims(x_op), nchw)
    if align and (out_w == 1 or out_h == 1):
        raise Unsupported("align_corners with an output dimension of 1")
    mode = "align_corners" if align else "half_pixel" if half else "asymmetric"
    xf = c.to_f32(c.x(0), x_op)
    x = xf if nchw else c.node("Transpose", [xf], perm=TO_NCHW)
    r = c.node(
        "Resize", [x, "", "", c.int64s([n, ch, out_h, out_w])], mode="linear", coordinate_transformation_mode=mode
    )
    if not nchw:
        r = c.node("Transpose", [r], perm=TO_NHWC)
    c.from_f32(r, out, c.y())


def conv_argminmax(c: OpCtx):
    x = c.require(0, NUMERIC)
    op = "ArgMax" if c.op.type == Op.ARGMAX else "ArgMin"
    axis = int(c.scalar(1))
    y = c.node(op, [c.x(0)], axis=axis, keepdims=0)
    if c.rank(x) == 1:
        y = c.node("Reshape", [y, c.int64s([1])])
    c.node("Cast", [y], [c.y()], to=I32)


def _reduce(onnx_op: str, types):
    def convert(c: OpCtx):
        x, red = op_params.reduction(c, types)
        out, axes, keep = c.outs[0], red.axes, int(red.keep)
        if x.type == T.TENSOR_BOOL8:
            y = c.node(onnx_op, [c.node("Cast", [c.x(0)], to=I32), c.int64s(axes)], keepdims=keep)
            y = c.node("Cast", [y], to=BOOL)
        elif x.type in FLOATS:
            y = _float_reduce(c, onnx_op, c.to_f32(c.x(0), x), x, axes, keep)
            y = c.from_f32(y, out)
        else:
            y = c.node(onnx_op, [c.x(0), c.int64s(axes)], keepdims=keep)
        _reduced_output(c, y, red)

    return convert


def _reduced_output(c: OpCtx, y: str, red: op_params.Reduction) -> None:
    if red.to_one:
        c.node("Reshape", [y, c.int64s([1])], [c.y()])
    else:
        c.node("Identity", [y], [c.y()])


def _float_reduce(c: OpCtx, onnx_op: str, xf: str, x: Operand, axes, keep: int) -> str:
    """The reference's folds: MAX/MIN start from the lowest/highest finite value and skip NaN;
    PROD gives 0 whenever the group holds a zero (even beside inf or NaN)."""
    ax = c.int64s(axes)
    if onnx_op in ("ReduceMax", "ReduceMin"):
        finite = float(np.finfo(np.float16 if x.type == T.TENSOR_FLOAT16 else np.float32).max)
        start = -finite if onnx_op == "ReduceMax" else finite
        xf = c.node("Where", [c.node("IsNaN", [xf]), c.const_value(np.float32(start)), xf])
        y = c.node(onnx_op, [xf, ax], keepdims=keep)
        return c.node("Max" if onnx_op == "ReduceMax" else "Min", [y, c.const_value(np.float32(start))])
    if onnx_op == "ReduceProd":
        return _sequential_prod(c, xf, x, axes, keep)
    return c.node(onnx_op, [xf, ax], keepdims=keep)


def _sequential_prod(c: OpCtx, xf: str, x: Operand, axes, keep: int) -> str:
    """REDUCE_PROD as the reference folds it: in row-major order, in the storage type, and a
    zero on either side of a step gives 0 (so an underflow to 0 sticks even against inf).
    ReduceProd has no defined order or zero rule, so the fold is unrolled (small groups only)."""
    fold = op_params.sequential_fold(c.dims(x), axes, keep)
    k = fold.count
    dt = x.info.dtype
    v = xf if dt == np.float32 else c.node("Cast", [xf], to=F16)
    v = c.node("Transpose", [v], perm=fold.perm)
    v = c.node("Reshape", [v, c.int64s([-1, k])])
    parts = c.node("Split", [v], n_out=k, axis=1, num_outputs=k) if k > 1 else [v]
    parts = [parts] if isinstance(parts, str) else parts
    zero = c.const_value(np.asarray(0, dt))
    acc = parts[0]
    for p in parts[1:]:
        either = c.node("Or", [c.node("Equal", [acc, zero]), c.node("Equal", [p, zero])])
        acc = c.node("Where", [either, zero, c.node("Mul", [acc, p])])
    y = c.node("Reshape", [acc, c.int64s(fold.shape)])
    return y if dt == np.float32 else c.node("Cast", [y], to=F32)


def conv_mean(c: OpCtx):
    x, red = op_params.reduction(c, DATA, "MEAN")
    out, axes, keep = c.outs[0], red.axes, int(red.keep)
    if x.type in FLOATS:
        y = c.from_f32(c.node("ReduceMean", [c.to_f32(c.x(0), x), c.int64s(axes)], keepdims=keep), out)
    else:
        # NNAPI: trunc(sum of stored values / count) in integers; ONNX int32 Div truncates too.
        xd = c.dims(x)
        count = int(np.prod([xd[a] for a in axes]))
        s = c.node("ReduceSum", [c.node("Cast", [c.x(0)], to=I32), c.int64s(axes)], keepdims=keep)
        y = c.node("Cast", [c.node("Div", [s, c.const_value(np.int32(count))])], to=ONNX_TYPE[out.type])
    _reduced_output(c, y, red)


def conv_embedding_lookup(c: OpCtx):
    movable(c, 1, NUMERIC)
    c.node("Gather", [c.x(1), c.x(0)], [c.y()], axis=0)


def conv_pack(c: OpCtx):
    axis = int(c.scalar(0))
    parts = []
    for k in range(1, len(c.ins)):
        movable(c, k, NUMERIC)
        parts.append(c.node("Unsqueeze", [c.x(k), c.int64s([axis])]))
    c.node("Concat", parts, [c.y()], axis=axis)


def conv_batch_matmul(c: OpCtx):
    a, b, out = c.ins[0], c.ins[1], c.outs[0]
    if a.type not in FLOATS + (T.TENSOR_INT32,):
        raise Unsupported(a.type.name)
    adj = [bool(c.scalar(2, False)), bool(c.scalar(3, False))]
    names = []
    for k, o in enumerate((a, b)):
        name = c.to_f32(c.x(k), o) if o.type in FLOATS else c.x(k)
        if adj[k]:
            r = c.rank(o)
            name = c.node("Transpose", [name], perm=list(range(r - 2)) + [r - 1, r - 2])
        names.append(name)
    if a.type == T.TENSOR_INT32:
        # ONNX MatMul's int32 kernel: two's-complement products and sums like NNAPI's.
        c.node("MatMul", names, [c.y()])
    else:
        c.from_f32(c.node("MatMul", names), out, c.y())


def conv_instance_normalization(c: OpCtx):
    x, out = c.require(0, FLOATS), c.outs[0]
    gamma, beta, eps, nchw = op_params.instance_norm(c)
    channels = c.dims(x)[1 if nchw else 3]
    xin = c.to_f32(c.x(0), x)
    xin = xin if nchw else c.node("Transpose", [xin], perm=TO_NCHW)
    y = c.node(
        "InstanceNormalization",
        [xin, c.const_value(np.full(channels, gamma, np.float32)), c.const_value(np.full(channels, beta, np.float32))],
        epsilon=eps,
    )
    y = y if nchw else c.node("Transpose", [y], perm=TO_NHWC)
    c.from_f32(y, out, c.y())


def conv_local_response_normalization(c: OpCtx):
    x, out = c.require(0, FLOATS), c.outs[0]
    xd = c.dims(x)
    p = op_params.lrn(c, len(xd))
    axis = p.axis
    # onnxruntime's LRN takes only [N, C, H, W] with the window along C, and ONNX divides
    # alpha by the window size.  Move the axis last, view the rest as N: [M, C, 1, 1].
    size = 2 * p.radius + 1
    perm, inv = axis_last(len(xd), axis)
    moved = [xd[i] for i in perm]
    xt = c.node("Transpose", [c.to_f32(c.x(0), x)], perm=perm)
    x4 = c.node("Reshape", [xt, c.int64s([-1, xd[axis], 1, 1])])
    y = c.node("LRN", [x4], size=size, alpha=p.alpha * size, beta=p.beta, bias=p.bias)
    y = c.node("Reshape", [y, c.int64s(moved)])
    c.from_f32(c.node("Transpose", [y], perm=inv), out, c.y())


def conv_rank(c: OpCtx):
    c.node("Cast", [c.node("Size", [c.node("Shape", [c.x(0)])])], [c.y()], to=I32)


def conv_fill(c: OpCtx):
    out = c.outs[0]
    if out.type not in FILLABLE:
        raise Unsupported(out.type.name)
    value = numpy_helper.from_array(np.asarray([c.scalar(1)], dtype=out.info.dtype), "value")
    shape = c.node("Cast", [c.x(0)], to=I64)
    c.node("ConstantOfShape", [shape], [c.y()], value=value)


def conv_channel_shuffle(c: OpCtx):
    movable(c, 0, DATA)
    s = op_params.channel_shuffle(c)
    y = c.node("Transpose", [c.node("Reshape", [c.x(0), c.int64s(s.grouped)])], perm=list(s.perm))
    c.node("Reshape", [y, c.int64s(s.dims)], [c.y()])


# ---------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------

# Every conv_<operation> function above converts that operation (conversion.by_name); the
# table lists the others: factory-built converters and converters shared by several operations.
CONVERTERS: dict[Op, Callable[[OpCtx], None]] = conversion.by_name(
    globals(),
    {
        Op.ADD: _binary_arith("Add"),
        Op.SUB: _binary_arith("Sub"),
        Op.MUL: _binary_arith("Mul"),
        Op.MAXIMUM: _minmax("Max"),
        Op.MINIMUM: _minmax("Min"),
        Op.RELU: _relu(nn_activation.RELU),
        Op.RELU1: _relu(nn_activation.RELU1),
        Op.RELU6: _relu(nn_activation.RELU6),
        Op.LOGISTIC: _unary_float("Sigmoid", quant_ok=True),
        Op.TANH: _unary_float("Tanh", quant_ok=True),
        Op.ABS: _unary_float("Abs", "Abs"),
        Op.NEG: _unary_float("Neg", "Neg"),
        Op.EXP: _unary_float("Exp"),
        Op.LOG: _unary_float("Log"),
        Op.SQRT: _unary_float("Sqrt"),
        Op.SIN: _unary_float("Sin"),
        Op.FLOOR: _unary_float("Floor"),
        Op.SOFTMAX: _softmax("Softmax", True),
        Op.LOG_SOFTMAX: _softmax("LogSoftmax", False),
        Op.EQUAL: _compare("Equal"),
        Op.NOT_EQUAL: _compare("Equal", negate=True),
        Op.GREATER: _compare("Greater"),
        Op.GREATER_EQUAL: _compare("GreaterOrEqual"),
        Op.LESS: _compare("Less"),
        Op.LESS_EQUAL: _compare("LessOrEqual"),
        Op.LOGICAL_AND: _logical("And", 2),
        Op.LOGICAL_OR: _logical("Or", 2),
        Op.LOGICAL_NOT: _logical("Not", 1),
        Op.BATCH_TO_SPACE_ND: conv_batch_space,
        Op.SPACE_TO_BATCH_ND: conv_batch_space,
        Op.AVERAGE_POOL_2D: _pool("avg"),
        Op.MAX_POOL_2D: _pool("max"),
        Op.L2_POOL_2D: _pool("l2"),
        Op.PAD_V2: conv_pad,
        Op.SPACE_TO_DEPTH: conv_depth_to_space,
        Op.ARGMAX: conv_argminmax,
        Op.ARGMIN: conv_argminmax,
        Op.REDUCE_SUM: _reduce("ReduceSum", FLOATS),
        Op.REDUCE_PROD: _reduce("ReduceProd", FLOATS),
        Op.REDUCE_MAX: _reduce("ReduceMax", DATA),
        Op.REDUCE_MIN: _reduce("ReduceMin", DATA),
        Op.REDUCE_ALL: _reduce("ReduceMin", (T.TENSOR_BOOL8,)),
        Op.REDUCE_ANY: _reduce("ReduceMax", (T.TENSOR_BOOL8,)),
    },
)

# IF/WHILE (ONNX If/Loop) and the RNN/LSTM families live in their own modules, which use the
# builders above; they add themselves to the table here.
from nnconform.drivers.onnxruntime import control_flow, recurrent  # noqa: E402

CONVERTERS.update(control_flow.CONVERTERS)
CONVERTERS.update(recurrent.CONVERTERS)


# ---------------------------------------------------------------------------------------
# Whole models
# ---------------------------------------------------------------------------------------


def convert_operation(g: GraphBuilder, index: int) -> None:
    """Emit one operation into ``g``; raise Unsupported when it cannot be mapped faithfully."""
    op = g.sg.operations[index]
    fn = conversion.lookup(CONVERTERS, op, "ONNX")
    conversion.check_operation_types(g.sg, op, ONNX_TYPE)
    fn(OpCtx(g, index))


def operation_supported(model: Model, index: int) -> tuple[bool, str]:
    return conversion.supported(lambda: convert_operation(GraphBuilder(model.main, model), index))


def _value_info(sg: Subgraph, i: int) -> onnx.ValueInfoProto:
    o = sg.operands[i]
    if o.info.is_scalar:
        shape = []
    elif not o.dimensions:
        shape = None
    else:
        shape = [d if d > 0 else None for d in o.dimensions]
    return helper.make_tensor_value_info(f"o{i}", ONNX_TYPE[o.type], shape)


def to_onnx(model: Model) -> onnx.ModelProto:
    """The whole main graph as an ONNX model (raises Unsupported on the first unmappable op)."""
    sg = model.main
    conversion.check_types(sg, (*sg.input_indexes, *sg.output_indexes), ONNX_TYPE)
    g = GraphBuilder(sg, model)
    conversion.convert_all(sg, lambda k: convert_operation(g, k))
    graph = helper.make_graph(
        g.nodes,
        sg.name or "main",
        [_value_info(sg, i) for i in sg.input_indexes],
        [_value_info(sg, i) for i in sg.output_indexes],
        g.initializers,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="nnconform")
    m.ir_version = 10
    return m
