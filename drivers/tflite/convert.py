"""nnconform model -> TFLite flatbuffer, one small function per NNAPI operation.

Each converter receives an :class:`OpCtx` and emits TFLite builtin operators that write the
operation's outputs.  When TFLite's kernel would not compute what NNAPI specifies for the
operation's data types and parameters, the converter raises :class:`Unsupported`: the device
reports the operation unsupported and the suites skip it.  Nothing here approximates.

Conventions:
- An NNAPI tensor operand becomes one TFLite tensor with the same storage type and the same
  quantisation (TFLite keeps scale and zero point on the tensor, as NNAPI does):
  TENSOR_QUANT8_ASYMM is uint8, TENSOR_QUANT8_ASYMM_SIGNED / _SYMM are int8,
  TENSOR_QUANT8_SYMM_PER_CHANNEL is int8 with per-axis scales (``quantizedDimension`` =
  NNAPI's ``channel_dim``), TENSOR_INT32 with a scale is a quantised int32 (biases).
- Scalar parameters (padding scheme, strides, activation, axis, ...) must be constants: they
  become builtin options or small constant tensors.  A parameter fed at run time is
  unsupported.
- Layout: NNAPI's default NHWC is TFLite's layout.  The NCHW flag (``layout`` = true) is
  handled by TRANSPOSE operators around the image operation.
- Fused activations: NNAPI's codes 0..3 (NONE, RELU, RELU1, RELU6) are TFLite's
  ActivationFunctionType codes, and TFLite quantises the bounds the same way.
- TENSOR_FLOAT16: TFLite kernels compute in float32, so an fp16 operand is widened with a
  CAST on the way in and narrowed with a CAST on the way out, which is what the NNAPI CPU
  reference does for fp16 arithmetic (and exact for pure data movement).
- Padding: NNAPI's SAME is TFLite's SAME (same head/tail split).  Explicit paddings that equal
  what SAME or VALID gives map to those; any other explicit padding of a convolution becomes
  a PAD (zero, i.e. the zero point for quantised tensors) in front of a VALID convolution.
  Pooling has no such rewrite (padding must not count in an average), so it is unsupported.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from nnconform.driver.support import Rejected, Unsupported  # noqa: E402  (Unsupported re-exported)
from nnconform.drivers.common import converter as conversion
from nnconform.drivers.common import op_params
from nnconform.drivers.common.layout import TO_NCHW, TO_NHWC
from nnconform.drivers.common.types import FLOATS, NUMERIC, QUANT8, storage_table
from nnconform.drivers.tflite.builder import OMITTED, FlatModel, S, SubgraphWriter, TensorType, options
from nnconform.drivers.tflite.builder import BuiltinOperator as B
from nnconform.ir import Model, Operand, Subgraph
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith.padding import PADDING_SAME, PADDING_VALID, explicit_padding
from nnconform.reference.ops.strided_slice import slice_plan

TFL_TYPE = storage_table(
    TensorType.FLOAT32, TensorType.FLOAT16, TensorType.INT32, TensorType.BOOL, TensorType.UINT8, TensorType.INT8
)
F32, F16, I32, U8, I8, BOOL = (
    T.TENSOR_FLOAT32,
    T.TENSOR_FLOAT16,
    T.TENSOR_INT32,
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
    T.TENSOR_BOOL8,
)
_F16_TYPES = (T.TENSOR_FLOAT16, T.FLOAT16)
PAD_SAME, PAD_VALID = S.Padding.SAME, S.Padding.VALID


# ---------------------------------------------------------------------------------------
# One NNAPI subgraph -> one TFLite subgraph
# ---------------------------------------------------------------------------------------


class GraphConv:
    """Tensors of one converted subgraph: operand ``i`` gets its TFLite tensor on first use."""

    def __init__(self, fm: FlatModel, model: Model, sg: Subgraph, name: str):
        self.fm = fm
        self.model = model
        self.sg = sg
        self.w: SubgraphWriter = fm.subgraph(name)
        self._tensors: dict[int, int] = {}
        self._widened: dict[int, int] = {}

    def tensor(self, i: int) -> int:
        """The TFLite tensor holding operand ``i`` in its own type (fp16 stays fp16)."""
        if i not in self._tensors:
            o = self.sg.operands[i]
            if o.is_omitted:
                return OMITTED
            if o.type not in TFL_TYPE:
                raise Unsupported(f"operand of type {o.type.name}")
            shape = [] if o.info.is_scalar else (list(o.dimensions) if o.dimensions else None)
            data = None
            if o.is_constant:
                data = np.asarray(o.value).reshape(o.dimensions if not o.info.is_scalar else ())
                if shape is None:
                    shape = list(data.shape)
            self._tensors[i] = self.w.tensor(
                shape, TFL_TYPE[o.type], name=o.name or f"o{i}", data=data, **quant_kwargs(o)
            )
        return self._tensors[i]

    def temp(self, shape, ttype: int, **quant) -> int:
        return self.w.tensor(shape, ttype, name=f"tmp{len(self.w.sg.tensors)}", **quant)

    def const(self, value, dtype, ttype: int | None = None, **quant) -> int:
        arr = np.asarray(value, dtype=dtype)
        if ttype is None:
            ttype = {
                np.dtype(np.int32): TensorType.INT32,
                np.dtype(np.float32): TensorType.FLOAT32,
                np.dtype(np.uint8): TensorType.UINT8,
                np.dtype(np.int8): TensorType.INT8,
                np.dtype(np.bool_): TensorType.BOOL,
            }[arr.dtype]
        return self.w.tensor(list(arr.shape), ttype, name=f"c{len(self.w.sg.tensors)}", data=arr, **quant)

    def widened(self, i: int) -> int:
        """Operand ``i`` as float32 (an fp16 operand is CAST once and the result shared)."""
        o = self.sg.operands[i]
        if o.type not in _F16_TYPES:
            return self.tensor(i)
        if i not in self._widened:
            if o.is_constant:
                data = np.asarray(o.value, dtype=np.float32)
                self._widened[i] = self.w.tensor(list(data.shape), TensorType.FLOAT32, data=data, name=f"o{i}_f32")
            else:
                t = self.temp(dims_or_none(o), TensorType.FLOAT32)
                self.w.op(B.CAST, [self.tensor(i)], [t], cast_options(TensorType.FLOAT16, TensorType.FLOAT32))
                self._widened[i] = t
        return self._widened[i]


def quant_kwargs(o: Operand) -> dict:
    if o.type == T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        cq = o.channel_quant
        return dict(scale=list(cq.scales), zero_point=[0] * len(cq.scales), quantized_dimension=cq.channel_dim)
    if o.info.is_quant or (o.type == T.TENSOR_INT32 and o.scale > 0):
        return dict(scale=[o.scale], zero_point=[o.zero_point])
    return {}


def dims_or_none(o: Operand):
    if o.info.is_scalar:
        return []
    return list(o.dimensions) if o.dimensions else None


def cast_options(src: int, dst: int):
    return options("CastOptions", inDataType=src, outDataType=dst)


class OpCtx(conversion.OperationContext):
    """One operation seen by its converter, emitting into ``g``."""

    def __init__(self, g: GraphConv, index: int):
        super().__init__(g.sg, index)
        self.g = g
        self._narrow: list[tuple[int, int]] = []

    # inputs / outputs ------------------------------------------------------------------
    def x(self, k: int) -> int:
        """Input ``k``'s tensor, float16 widened to float32."""
        if self.omitted(k):
            return OMITTED
        return self.g.widened(self.op.inputs[k])

    def y(self, k: int = 0) -> int:
        """The tensor operation output ``k`` is written to (an fp16 output is narrowed from a
        float32 temporary after the converter returns)."""
        o = self.outs[k]
        if o.type not in TFL_TYPE:
            raise Unsupported(f"output of type {o.type.name}")
        if o.type in _F16_TYPES:
            t = self.g.temp(dims_or_none(o), TensorType.FLOAT32)
            self._narrow.append((t, self.g.tensor(self.op.outputs[k])))
            return t
        return self.g.tensor(self.op.outputs[k])

    def finish(self) -> None:
        for t, target in self._narrow:
            self.g.w.op(B.CAST, [t], [target], cast_options(TensorType.FLOAT32, TensorType.FLOAT16))

    def emit(self, code: int, inputs, outputs, opts=None) -> None:
        self.g.w.op(code, inputs, outputs, opts)

    def temp_like(self, o: Operand, shape=None, ttype: int | None = None) -> int:
        """A temporary with operand ``o``'s element type and quantisation (fp16 as float32)."""
        tt = ttype if ttype is not None else (TensorType.FLOAT32 if o.type in _F16_TYPES else TFL_TYPE[o.type])
        return self.g.temp(shape, tt, **quant_kwargs(o))

    def i32(self, values) -> int:
        return self.g.const(np.asarray(values, dtype=np.int32).reshape(-1), np.int32)

    def i32_scalar(self, value) -> int:
        return self.g.const(np.asarray(value, dtype=np.int32).reshape(()), np.int32)


def same_quant(*ops: Operand) -> bool:
    return all((o.scale, o.zero_point) == (ops[0].scale, ops[0].zero_point) for o in ops)


def activation(c: OpCtx, k: int) -> int:
    act = c.scalar(k, 0)
    if act not in (0, 1, 2, 3):
        raise Unsupported(f"fused activation {act}")
    return act


def emit_no_rank0(c: OpCtx, out_rank: int | None, emit: Callable[[int], None]) -> None:
    """Emit an operation whose result may have rank 0 in TFLite: NNAPI gives shape [1] where
    every dimension is removed (reductions, SQUEEZE, ARGMAX of a vector, STRIDED_SLICE), so a
    rank-0 result is written to a temporary and reshaped to [1]."""
    if out_rank is None:
        raise Unsupported("needs a known input rank (the output may be rank 0)")
    if out_rank > 0:
        emit(c.y())
        return
    tmp = c.temp_like(c.outs[0], shape=[])
    emit(tmp)
    c.emit(B.RESHAPE, [tmp, c.i32([1])], [c.y()], options("ReshapeOptions", newShape=[1]))


def transpose(c: OpCtx, src: int, perm, like: Operand, dst: int | None = None) -> int:
    out = dst if dst is not None else c.temp_like(like)
    c.emit(B.TRANSPOSE, [src, c.i32(perm)], [out])
    return out


# ---------------------------------------------------------------------------------------
# Element-wise
# ---------------------------------------------------------------------------------------


def _binary(code: int, options_name: str | None, types, *, int_code: int | None = None):
    def convert(c: OpCtx):
        x = c.require(0, types)
        c.require(1, (x.type,))
        act = activation(c, 2)
        if x.type == I32 and act != 0:
            raise Unsupported("a fused activation on TENSOR_INT32")
        tcode = int_code if (x.type == I32 and int_code is not None) else code
        opts = options(options_name, fusedActivationFunction=act) if options_name and tcode == code else None
        c.emit(tcode, [c.x(0), c.x(1)], [c.y()], opts)

    return convert


def _unary(code: int, types, *, same_params: bool = False):
    def convert(c: OpCtx):
        x = c.require(0, types)
        if same_params and x.type in QUANT8 and not same_quant(x, c.outs[0]):
            raise Unsupported("quantised input and output with different parameters")
        c.emit(code, [c.x(0)], [c.y()])

    return convert


def _compare(code: int, types):
    def convert(c: OpCtx):
        x = c.require(0, types)
        c.require(1, (x.type,))
        if x.type in QUANT8 and code not in (B.LOGICAL_AND, B.LOGICAL_OR, B.POW):
            # TFLite rescales both inputs with QuantizeMultiplierSmallerThanOneExp(scale): it
            # needs every input scale < 1 (scale 1.0 aborts the process, larger scales give
            # wrong answers; see docs/findings_tflite.md).
            if max(x.scale, c.ins[1].scale) >= 1.0:
                raise Unsupported("quantised comparison with an input scale >= 1 (TFLite's kernel needs scales < 1)")
        c.emit(code, [c.x(0), c.x(1)], [c.y()])

    return convert


def _max_min(code: int):
    def convert(c: OpCtx):
        x = c.require(0, FLOATS + (I32,) + QUANT8)
        c.require(1, (x.type,))
        # TFLite compares the stored values: only right when nothing needs requantising.
        if x.type in QUANT8 and not same_quant(x, c.ins[1], c.outs[0]):
            raise Unsupported("quantised inputs/output with different scales or zero points")
        c.emit(code, [c.x(0), c.x(1)], [c.y()])

    return convert


def _relu(code: int):
    return _unary(code, FLOATS + QUANT8)


def conv_logistic(c: OpCtx):
    c.require(0, FLOATS + QUANT8)
    c.emit(B.LOGISTIC, [c.x(0)], [c.y()])


def conv_tanh(c: OpCtx):
    c.require(0, FLOATS + QUANT8)
    c.emit(B.TANH, [c.x(0)], [c.y()])


def conv_hard_swish(c: OpCtx):
    c.require(0, FLOATS + QUANT8)
    c.emit(B.HARD_SWISH, [c.x(0)], [c.y()])


def conv_elu(c: OpCtx):
    c.require(0, FLOATS)
    if c.scalar(1) != 1.0:
        raise Unsupported("ELU with alpha != 1 (TFLite's ELU has alpha 1)")
    c.emit(B.ELU, [c.x(0)], [c.y()])


def conv_prelu(c: OpCtx):
    x = c.require(0, FLOATS + QUANT8)
    c.require(1, (x.type,))
    c.emit(B.PRELU, [c.x(0), c.x(1)], [c.y()])


def conv_select(c: OpCtx):
    c.require(0, (BOOL,))
    x = c.require(1, FLOATS + (I32,) + QUANT8)
    c.require(2, (x.type,))
    if x.type in QUANT8 and not same_quant(x, c.ins[2], c.outs[0]):
        raise Unsupported("quantised candidates/output with different scales or zero points")
    c.emit(B.SELECT, [c.x(0), c.x(1), c.x(2)], [c.y()])


def conv_cast(c: OpCtx):
    x, out = c.ins[0], c.outs[0]
    numeric = (F32, F16, I32, U8)
    if x.type == out.type and x.type in (BOOL, I8, T.TENSOR_QUANT8_SYMM):
        c.emit(B.RESHAPE, [c.x(0), c.i32(c.dims(out))], [c.y()])
        return
    if x.type not in numeric or out.type not in numeric:
        raise Unsupported(f"CAST {x.type.name} -> {out.type.name}")
    src = TensorType.FLOAT32 if x.type in FLOATS else TFL_TYPE[x.type]
    dst = TensorType.FLOAT32 if out.type in FLOATS else TFL_TYPE[out.type]
    if src == dst:
        # Quantisation parameters are ignored by CAST: copy the stored values through an
        # unquantised view so TFLite does not requantise.
        if x.type in QUANT8 or out.type in QUANT8:
            raise Unsupported("CAST between quantised tensors with parameters")
        c.emit(B.RESHAPE, [c.x(0), c.i32(c.dims(out))], [c.y()])
        return
    c.emit(B.CAST, [c.x(0)], [c.y()], cast_options(src, dst))


def conv_quantize(c: OpCtx):
    c.require(0, FLOATS)
    if c.outs[0].type not in QUANT8:
        raise Unsupported(f"QUANTIZE to {c.outs[0].type.name}")
    c.emit(B.QUANTIZE, [c.x(0)], [c.y()])


def conv_dequantize(c: OpCtx):
    c.require(0, QUANT8 + (T.TENSOR_QUANT8_SYMM, T.TENSOR_QUANT8_SYMM_PER_CHANNEL))
    if c.outs[0].type not in FLOATS:
        raise Unsupported(f"DEQUANTIZE to {c.outs[0].type.name}")
    c.emit(B.DEQUANTIZE, [c.x(0)], [c.y()])


# ---------------------------------------------------------------------------------------
# Convolutions and pooling
# ---------------------------------------------------------------------------------------


class Window:
    """Padding / strides / activation / layout / dilation of a conv or pool operation,
    from NNAPI's implicit (scheme) or explicit (four pads) form."""

    def __init__(self, c: OpCtx, first: int, *, n_filter_params: int = 0, explicit: bool):
        k = first
        if explicit:
            self.pads = tuple(int(c.scalar(k + i)) for i in range(4))  # left, right, top, bottom
            self.scheme = None
            k += 4
        else:
            self.scheme = int(c.scalar(k))
            self.pads = None
            k += 1
        self.stride_w, self.stride_h = int(c.scalar(k)), int(c.scalar(k + 1))
        k += 2
        self.filter_params = [c.scalar(k + i) for i in range(n_filter_params)]
        k += n_filter_params
        self.act = activation(c, k)
        self.nchw = bool(c.scalar(k + 1, False))
        self.dil_w, self.dil_h = int(c.scalar(k + 2, 1)), int(c.scalar(k + 3, 1))

    def tflite_padding(self, c: OpCtx, in_h: int, in_w: int, fh: int, fw: int):
        """(TFLite padding, explicit (top, bottom, left, right) pads still to apply or None)."""
        if self.scheme is not None:
            if self.scheme == PADDING_SAME:
                return PAD_SAME, None
            if self.scheme == PADDING_VALID:
                return PAD_VALID, None
            raise Unsupported(f"padding scheme {self.scheme}")
        left, right, top, bottom = self.pads
        if not any(self.pads):
            return PAD_VALID, None
        if in_h > 0 and in_w > 0:
            same_h = explicit_padding(in_h, self.stride_h, fh, PADDING_SAME, self.dil_h)
            same_w = explicit_padding(in_w, self.stride_w, fw, PADDING_SAME, self.dil_w)
            if (top, bottom) == same_h and (left, right) == same_w:
                return PAD_SAME, None
        return PAD_VALID, (top, bottom, left, right)


def _is_explicit(c: OpCtx, implicit_count: int) -> bool:
    """NNAPI tells the padding forms apart by the input count: the implicit form has
    ``implicit_count`` inputs (+1 layout, +3 layout and dilation), the explicit form three
    more.  Where the counts collide, the implicit form has its BOOL layout flag at
    ``implicit_count``."""
    n = len(c.ins)
    if n in (implicit_count, implicit_count + 1):
        return False
    if n == implicit_count + 3:
        return c.ins[implicit_count].type != T.BOOL
    return True


def image_in(c: OpCtx, w: Window) -> tuple[int, tuple[int, int]]:
    """Input 0 as an NHWC tensor, plus its (height, width) (0 when unknown)."""
    x = c.ins[0]
    if c.rank(x) != 4:
        raise Unsupported("image input of rank != 4")
    dims = x.dimensions
    if w.nchw:
        return transpose(c, c.x(0), TO_NHWC, x), (dims[2], dims[3])
    return c.x(0), (dims[1], dims[2])


def image_out(c: OpCtx, w: Window, k: int = 0) -> tuple[int, Callable[[], None]]:
    """Where an NHWC result goes, and what to call afterwards to finish an NCHW output."""
    if not w.nchw:
        return c.y(k), lambda: None
    tmp = c.temp_like(c.outs[k])
    return tmp, lambda: transpose(c, tmp, TO_NCHW, c.outs[k], dst=c.y(k))


def pad_image(c: OpCtx, t: int, like: Operand, pads) -> int:
    """Zero-pad an NHWC image (the zero point for quantised tensors, i.e. real 0)."""
    top, bottom, left, right = pads
    out = c.temp_like(like)
    c.emit(B.PAD, [t, c.g.const(np.array([[0, 0], [top, bottom], [left, right], [0, 0]], np.int32), np.int32)], [out])
    return out


def _conv_types(c: OpCtx, filter_quant_dim: int) -> None:
    """Which input/filter/bias type combinations TFLite's conv kernels compute as NNAPI says."""
    x, f = c.ins[0], c.ins[1]
    if x.type in FLOATS:
        c.require(1, (x.type,), "filter")
        return
    if x.type == U8:
        if f.type != U8:
            raise Unsupported(f"TENSOR_QUANT8_ASYMM input with a {f.type.name} filter")
        return
    if x.type == I8:
        if f.type == I8:
            # TFLite's int8 kernels assume a symmetric filter.
            if f.zero_point != 0:
                raise Unsupported("TENSOR_QUANT8_ASYMM_SIGNED filter with a non-zero zero point")
            return
        if f.type == T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
            if f.channel_quant.channel_dim != filter_quant_dim:
                raise Unsupported(f"per-channel filter quantised along {f.channel_quant.channel_dim}")
            return
        raise Unsupported(f"TENSOR_QUANT8_ASYMM_SIGNED input with a {f.type.name} filter")
    raise Unsupported(f"input of type {x.type.name}")


def conv_bias(c: OpCtx, k: int = 2) -> int:
    """The bias tensor; a per-channel filter needs per-channel bias scales in TFLite."""
    f = c.ins[1]
    if c.omitted(k):
        return OMITTED
    if f.type != T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        return c.x(k)
    bias = c.const(k).astype(np.int32)
    scales = [c.ins[0].scale * s for s in f.channel_quant.scales]
    return c.g.const(bias, np.int32, scale=scales, zero_point=[0] * len(scales))


def conv_conv_2d(c: OpCtx):
    explicit = _is_explicit(c, 7)
    _conv_types(c, 0)
    w = Window(c, 3, explicit=explicit)
    f = c.ins[1]
    fdims = c.dims(f)
    t, (h, wd) = image_in(c, w)
    pad, pre = w.tflite_padding(c, h, wd, fdims[1], fdims[2])
    if pre is not None:
        t = pad_image(c, t, c.ins[0], pre)
    in_c = c.ins[0].dimensions[1 if w.nchw else 3]
    if in_c and in_c != fdims[3]:
        raise Unsupported("filter depth differs from the input depth")
    out, finish = image_out(c, w)
    c.emit(
        B.CONV_2D,
        [t, c.x(1), conv_bias(c)],
        [out],
        options(
            "Conv2DOptions",
            padding=pad,
            strideW=w.stride_w,
            strideH=w.stride_h,
            fusedActivationFunction=w.act,
            dilationWFactor=w.dil_w,
            dilationHFactor=w.dil_h,
        ),
    )
    finish()


def conv_grouped_conv_2d(c: OpCtx):
    # TFLite's CONV_2D does grouped convolutions (filter depth = input depth / groups) for
    # float only; the output channel order (group-major) is NNAPI's.
    n = len(c.ins)
    explicit = n == 12
    x = c.require(0, FLOATS)
    c.require(1, (x.type,), "filter")
    first = 3
    k = first + (4 if explicit else 1)
    stride_w, stride_h = int(c.scalar(k)), int(c.scalar(k + 1))
    groups = int(c.scalar(k + 2))
    act = activation(c, k + 3)
    nchw = bool(c.scalar(k + 4))
    f = c.ins[1]
    fdims = c.dims(f)
    in_c = x.dimensions[1 if nchw else 3] if x.dimensions else 0
    if not in_c or in_c != fdims[3] * groups or fdims[0] % groups:
        raise Unsupported("grouped convolution needs known, consistent channel counts")
    w = Window.__new__(Window)
    w.nchw, w.act, w.stride_w, w.stride_h, w.dil_w, w.dil_h = nchw, act, stride_w, stride_h, 1, 1
    if explicit:
        w.pads, w.scheme = tuple(int(c.scalar(first + i)) for i in range(4)), None
    else:
        w.pads, w.scheme = None, int(c.scalar(first))
    t, (h, wd) = image_in(c, w)
    pad, pre = w.tflite_padding(c, h, wd, fdims[1], fdims[2])
    if pre is not None:
        t = pad_image(c, t, x, pre)
    out, finish = image_out(c, w)
    c.emit(
        B.CONV_2D,
        [t, c.x(1), c.x(2)],
        [out],
        options(
            "Conv2DOptions",
            padding=pad,
            strideW=stride_w,
            strideH=stride_h,
            fusedActivationFunction=act,
            dilationWFactor=1,
            dilationHFactor=1,
        ),
    )
    finish()


def conv_depthwise_conv_2d(c: OpCtx):
    explicit = _is_explicit(c, 8)
    _conv_types(c, 3)
    w = Window(c, 3, n_filter_params=1, explicit=explicit)
    multiplier = int(w.filter_params[0])
    f = c.ins[1]
    fdims = c.dims(f)
    t, (h, wd) = image_in(c, w)
    pad, pre = w.tflite_padding(c, h, wd, fdims[1], fdims[2])
    if pre is not None:
        t = pad_image(c, t, c.ins[0], pre)
    in_c = c.ins[0].dimensions[1 if w.nchw else 3]
    if not in_c or in_c * multiplier != fdims[3]:
        raise Unsupported("depthwise filter depth is not input depth x multiplier")
    out, finish = image_out(c, w)
    c.emit(
        B.DEPTHWISE_CONV_2D,
        [t, c.x(1), conv_bias(c)],
        [out],
        options(
            "DepthwiseConv2DOptions",
            padding=pad,
            strideW=w.stride_w,
            strideH=w.stride_h,
            depthMultiplier=multiplier,
            fusedActivationFunction=w.act,
            dilationWFactor=w.dil_w,
            dilationHFactor=w.dil_h,
        ),
    )
    finish()


def conv_fully_connected(c: OpCtx):
    x = c.require(0, FLOATS + QUANT8)
    wt = c.require(1, (x.type,), "weights")
    if x.type == I8 and wt.zero_point != 0:
        raise Unsupported("TENSOR_QUANT8_ASYMM_SIGNED weights with a non-zero zero point")
    act = activation(c, 3)
    c.emit(
        B.FULLY_CONNECTED,
        [c.x(0), c.x(1), c.x(2)],
        [c.y()],
        options("FullyConnectedOptions", fusedActivationFunction=act, keepNumDims=False),
    )


def conv_transpose_conv_2d(c: OpCtx):
    # TFLite's TRANSPOSE_CONV is run with VALID padding, which gives the full scatter
    # ((in - 1) * stride + filter per axis); NNAPI's padding is then a crop (SLICE).  A
    # negative tail padding (output larger than the full scatter) has no such form.
    explicit = len(c.ins) == 11
    _conv_types(c, 0)
    x, f = c.ins[0], c.ins[1]
    fdims = c.dims(f)
    if explicit:
        pl, pr, pt, pb = (int(c.scalar(k)) for k in range(3, 7))
        sw, sh = int(c.scalar(7)), int(c.scalar(8))
        act, nchw = activation(c, 9), bool(c.scalar(10))
    else:
        sw, sh = int(c.scalar(5)), int(c.scalar(6))
        act, nchw = activation(c, 7), bool(c.scalar(8))
        shape = [int(v) for v in c.const(3).reshape(-1)]
        out_h, out_w = (shape[2], shape[3]) if nchw else (shape[1], shape[2])
        scheme = int(c.scalar(4))
        from nnconform.reference.ops.transpose_conv_2d import transpose_padding

        pl, pr = transpose_padding(out_w, sw, fdims[2], scheme)
        pt, pb = transpose_padding(out_h, sh, fdims[1], scheme)
    if min(pl, pr, pt, pb) < 0:
        raise Unsupported("negative transpose-convolution padding")
    dims = c.dims(x)
    n, in_h, in_w = (dims[0], dims[2], dims[3]) if nchw else dims[:3]
    full_h, full_w = (in_h - 1) * sh + fdims[1], (in_w - 1) * sw + fdims[2]
    out_h, out_w = full_h - pt - pb, full_w - pl - pr
    if out_h <= 0 or out_w <= 0:
        raise Unsupported("empty transpose-convolution output")
    w = Window.__new__(Window)
    w.nchw = nchw
    t, _ = image_in(c, w)
    out, finish = image_out(c, w)
    full = c.temp_like(c.outs[0], shape=[n, full_h, full_w, fdims[0]]) if (pl or pr or pt or pb) else out
    c.emit(
        B.TRANSPOSE_CONV,
        [c.i32([n, full_h, full_w, fdims[0]]), c.x(1), t, conv_bias(c)],
        [full],
        options("TransposeConvOptions", padding=PAD_VALID, strideW=sw, strideH=sh, fusedActivationFunction=act),
    )
    if full != out:
        c.emit(B.SLICE, [full, c.i32([0, pt, pl, 0]), c.i32([n, out_h, out_w, fdims[0]])], [out])
    finish()


def conv_channel_shuffle(c: OpCtx):
    # [..., groups, c/groups] -> swap the last two -> flatten back: output channel k reads
    # input channel (k % groups) * (c / groups) + k // groups, NNAPI's rule.
    x = c.require(0, FLOATS + QUANT8)
    if x.type in QUANT8 and not same_quant(x, c.outs[0]):
        raise Unsupported("quantised CHANNEL_SHUFFLE with different input/output parameters")
    s = op_params.channel_shuffle(c)
    dims, split, perm = list(s.dims), list(s.grouped), list(s.perm)
    a = c.temp_like(x, shape=split)
    c.emit(B.RESHAPE, [c.x(0), c.i32(split)], [a], options("ReshapeOptions", newShape=split))
    swapped = [split[p] for p in perm]
    b = c.temp_like(x, shape=swapped)
    c.emit(B.TRANSPOSE, [a, c.i32(perm)], [b])
    c.emit(B.RESHAPE, [b, c.i32(dims)], [c.y()], options("ReshapeOptions", newShape=dims))


def _pool(code: int, types):
    def convert(c: OpCtx):
        x = c.require(0, types)
        if x.type in QUANT8 and not same_quant(x, c.outs[0]):
            raise Unsupported("quantised pooling with different input/output parameters")
        explicit = len(c.ins) >= 10
        w = Window(c, 1, n_filter_params=2, explicit=explicit)
        fw, fh = int(w.filter_params[0]), int(w.filter_params[1])
        t, (h, wd) = image_in(c, w)
        pad, pre = w.tflite_padding(c, h, wd, fh, fw)
        if pre is not None:
            raise Unsupported("explicit pooling padding that is neither SAME nor VALID")
        out, finish = image_out(c, w)
        c.emit(
            code,
            [t],
            [out],
            options(
                "Pool2DOptions",
                padding=pad,
                strideW=w.stride_w,
                strideH=w.stride_h,
                filterWidth=fw,
                filterHeight=fh,
                fusedActivationFunction=w.act,
            ),
        )
        finish()

    return convert


def _image_param_op(code: int, options_name: str):
    """DEPTH_TO_SPACE / SPACE_TO_DEPTH: (input, block size, [layout])."""

    def convert(c: OpCtx):
        c.require(0, FLOATS + QUANT8)
        block = int(c.scalar(1))
        w = Window.__new__(Window)
        w.nchw = bool(c.scalar(2, False))
        t, _ = image_in(c, w)
        out, finish = image_out(c, w)
        c.emit(code, [t], [out], options(options_name, blockSize=block))
        finish()

    return convert


def conv_batch_to_space(c: OpCtx):
    c.require(0, FLOATS + QUANT8)
    c.require(1, (I32,))
    w = Window.__new__(Window)
    w.nchw = bool(c.scalar(2, False))
    t, _ = image_in(c, w)
    out, finish = image_out(c, w)
    c.emit(B.BATCH_TO_SPACE_ND, [t, c.x(1), c.g.const(np.zeros((2, 2), np.int32), np.int32)], [out])
    finish()


def conv_space_to_batch(c: OpCtx):
    c.require(0, FLOATS + QUANT8)
    c.require(1, (I32,))
    c.require(2, (I32,))
    w = Window.__new__(Window)
    w.nchw = bool(c.scalar(3, False))
    t, _ = image_in(c, w)
    out, finish = image_out(c, w)
    c.emit(B.SPACE_TO_BATCH_ND, [t, c.x(1), c.x(2)], [out])
    finish()


def _resize(code: int, options_name: str):
    def convert(c: OpCtx):
        c.require(0, FLOATS + QUANT8)
        w = Window.__new__(Window)
        r = op_params.resize(c, known_input=False)
        w.nchw = r.nchw
        t, _ = image_in(c, w)
        out, finish = image_out(c, w)
        c.emit(
            code,
            [t, c.i32([r.out_h, r.out_w])],
            [out],
            options(options_name, alignCorners=r.align, halfPixelCenters=r.half),
        )
        finish()

    return convert


# ---------------------------------------------------------------------------------------
# Normalisation
# ---------------------------------------------------------------------------------------


def along_axis(c: OpCtx, k: int, emit: Callable[[int, int], None], *, rank4: bool = False) -> None:
    """TFLite normalises along the last axis only: NNAPI's ``axis`` (input ``k``, default -1)
    is swapped to the end with TRANSPOSE and back.  ``rank4``: the kernel wants a 4-D tensor,
    so the (transposed) tensor is reshaped to [1, ..., n] around it (the last axis is kept)."""
    x = c.ins[0]
    axis = int(c.scalar(k, -1)) if not c.omitted(k) else -1
    r = c.rank(x)
    axis %= r
    src = c.x(0)
    perm = list(range(r))
    perm[axis], perm[r - 1] = perm[r - 1], perm[axis]
    if axis != r - 1:
        src = transpose(c, src, perm, x)
    if rank4 and r != 4:
        if r > 4:
            raise Unsupported("rank > 4")
        dims = c.dims(x)
        moved = [dims[p] for p in perm]
        src4 = c.temp_like(x)
        shape4 = [1] * (4 - r) + moved
        c.emit(B.RESHAPE, [src, c.i32(shape4)], [src4], options("ReshapeOptions", newShape=shape4))
        out4 = c.temp_like(c.outs[0])
        emit(src4, out4)
        back = c.temp_like(c.outs[0]) if axis != r - 1 else c.y()
        c.emit(B.RESHAPE, [out4, c.i32(moved)], [back], options("ReshapeOptions", newShape=moved))
    elif axis != r - 1:
        back = c.temp_like(c.outs[0])
        emit(src, back)
    else:
        emit(src, c.y())
        return
    if axis != r - 1:
        transpose(c, back, perm, c.outs[0], dst=c.y())


def conv_softmax(c: OpCtx):
    c.require(0, FLOATS + QUANT8)
    beta = float(c.scalar(1))
    along_axis(c, 2, lambda s, d: c.emit(B.SOFTMAX, [s], [d], options("SoftmaxOptions", beta=beta)))


def conv_log_softmax(c: OpCtx):
    c.require(0, FLOATS)
    if float(c.scalar(1)) != 1.0:
        raise Unsupported("LOG_SOFTMAX with beta != 1")
    along_axis(c, 2, lambda s, d: c.emit(B.LOG_SOFTMAX, [s], [d]))


def conv_l2_normalization(c: OpCtx):
    c.require(0, FLOATS + QUANT8)
    along_axis(
        c, 1, lambda s, d: c.emit(B.L2_NORMALIZATION, [s], [d], options("L2NormOptions", fusedActivationFunction=0))
    )


def conv_lrn(c: OpCtx):
    x = c.require(0, FLOATS)
    p = op_params.lrn(c, c.rank(x))
    opts = options("LocalResponseNormalizationOptions", radius=p.radius, bias=p.bias, alpha=p.alpha, beta=p.beta)
    along_axis(c, 5, lambda s, d: c.emit(B.LOCAL_RESPONSE_NORMALIZATION, [s], [d], opts), rank4=True)


# ---------------------------------------------------------------------------------------
# Data movement
# ---------------------------------------------------------------------------------------


def conv_concatenation(c: OpCtx):
    n = len(c.ins) - 1
    x = c.require(0, FLOATS + QUANT8 + (I32,))
    for k in range(1, n):
        c.require(k, (x.type,))
    axis = int(c.scalar(n))
    # uint8 inputs are rescaled to the output's parameters; TFLite's int8 kernel is not.
    if x.type == I8 and not same_quant(*c.ins[:n], c.outs[0]):
        raise Unsupported(
            "TENSOR_QUANT8_ASYMM_SIGNED concatenation with differing parameters "
            "(TFLite's int8 kernel needs one scale and zero point)"
        )
    c.emit(
        B.CONCATENATION,
        [c.x(k) for k in range(n)],
        [c.y()],
        options("ConcatenationOptions", axis=axis, fusedActivationFunction=0),
    )


def conv_reshape(c: OpCtx):
    c.require(0, FLOATS + QUANT8 + (I32, BOOL))
    if not c.ins[1].is_constant:
        c.emit(B.RESHAPE, [c.x(0), c.x(1)], [c.y()])  # TFLite reads the shape at run time
        return
    shape = c.const(1).astype(np.int32).reshape(-1)
    c.emit(B.RESHAPE, [c.x(0), c.i32(shape)], [c.y()], options("ReshapeOptions", newShape=[int(s) for s in shape]))


def conv_transpose(c: OpCtx):
    x = c.require(0, FLOATS + QUANT8 + (I32,))
    # perm stays a constant: a perm fed at run time may be omitted per request (reverse order),
    # which a prepared TFLite graph cannot follow.
    del x
    c.emit(B.TRANSPOSE, [c.x(0), c.i32(op_params.transpose_perm(c))], [c.y()])


def conv_squeeze(c: OpCtx):
    c.require(0, FLOATS + QUANT8 + (I32,))
    x = c.ins[0]
    axes = [] if c.omitted(1) else [int(a) for a in c.const(1).reshape(-1)]
    r = c.rank(x)
    if axes:
        out_rank = r - len({a % r for a in axes})
    else:
        out_rank = sum(1 for d in c.dims(x) if d != 1)
    emit_no_rank0(c, out_rank, lambda y: c.emit(B.SQUEEZE, [c.x(0)], [y], options("SqueezeOptions", squeezeDims=axes)))


def conv_expand_dims(c: OpCtx):
    c.require(0, FLOATS + QUANT8 + (I32,))
    c.emit(B.EXPAND_DIMS, [c.x(0), c.i32_scalar(int(c.scalar(1)))], [c.y()])


def conv_pad(c: OpCtx):
    x = c.require(0, FLOATS + QUANT8)
    c.require(1, (I32,))
    if x.type in QUANT8 and not same_quant(x, c.outs[0]):
        raise Unsupported("quantised PAD with different input/output parameters")
    c.emit(B.PAD, [c.x(0), c.x(1)], [c.y()])


def conv_pad_v2(c: OpCtx):
    x = c.require(0, FLOATS + QUANT8)
    pads = c.const(1).astype(np.int32)
    value = c.scalar(2)
    if x.type in QUANT8:
        if not same_quant(x, c.outs[0]):
            raise Unsupported("quantised PAD_V2 with different input/output parameters")
        info = np.iinfo(x.info.dtype)
        if not info.min <= value <= info.max:
            raise Unsupported("pad value outside the quantised range")
        vt = c.g.const(
            np.array([value], x.info.dtype), x.info.dtype, TFL_TYPE[x.type], scale=[x.scale], zero_point=[x.zero_point]
        )
    else:
        vt = c.g.const(np.array([value], np.float32), np.float32)
    c.emit(B.PADV2, [c.x(0), c.g.const(pads.reshape(-1, 2), np.int32), vt], [c.y()])


def conv_mirror_pad(c: OpCtx):
    x = c.require(0, FLOATS + QUANT8 + (I32,))
    pads, mode_name = op_params.mirror_pad(c)
    mode = 0 if mode_name == "reflect" else 1
    if x.type in QUANT8 and not same_quant(x, c.outs[0]):
        raise Unsupported("quantised MIRROR_PAD with different input/output parameters")
    c.emit(
        B.MIRROR_PAD,
        [c.x(0), c.g.const(pads.astype(np.int32), np.int32)],
        [c.y()],
        options("MirrorPadOptions", mode=mode),
    )


def conv_gather(c: OpCtx):
    x = c.require(0, FLOATS + QUANT8 + (I32,))
    if x.type in QUANT8 and not same_quant(x, c.outs[0]):
        raise Unsupported("quantised GATHER with different input/output parameters")
    axis = int(c.scalar(1))
    c.require(2, (I32,))
    c.emit(B.GATHER, [c.x(0), c.x(2)], [c.y()], options("GatherOptions", axis=axis, batchDims=0))


def conv_slice(c: OpCtx):
    c.require(0, FLOATS + QUANT8 + (I32,))
    c.require(1, (I32,))
    c.require(2, (I32,))
    c.emit(B.SLICE, [c.x(0), c.x(1), c.x(2)], [c.y()])


def conv_strided_slice(c: OpCtx):
    c.require(0, FLOATS + QUANT8 + (I32,))
    x = c.ins[0]
    begin, end, strides = (c.const(k).astype(np.int32) for k in (1, 2, 3))
    bmask, emask, smask = int(c.scalar(4)), int(c.scalar(5)), int(c.scalar(6))
    r = c.rank(x)
    if all(d > 0 for d in x.dimensions):
        try:
            slice_plan(x.dimensions, begin, end, strides, bmask, emask, smask)
        except ValueError as e:
            raise Rejected(str(e)) from None
    elif smask:
        raise Unsupported("axis shrinking on unknown dimensions (NNAPI's one-element check)")
    out_rank = r - bin(smask & ((1 << r) - 1)).count("1")
    emit_no_rank0(
        c,
        out_rank,
        lambda y: c.emit(
            B.STRIDED_SLICE,
            [c.x(0), c.i32(begin), c.i32(end), c.i32(strides)],
            [y],
            options("StridedSliceOptions", beginMask=bmask, endMask=emask, shrinkAxisMask=smask),
        ),
    )


def conv_split(c: OpCtx):
    c.require(0, FLOATS + QUANT8 + (I32,))
    axis, n = int(c.scalar(1)), int(c.scalar(2))
    if n != len(c.outs):
        raise Unsupported("split count differs from the output count")
    c.emit(B.SPLIT, [c.i32_scalar(axis), c.x(0)], [c.y(k) for k in range(n)], options("SplitOptions", numSplits=n))


def conv_tile(c: OpCtx):
    c.require(0, FLOATS + QUANT8 + (I32,))
    c.require(1, (I32,))
    c.emit(B.TILE, [c.x(0), c.x(1)], [c.y()])


def conv_reverse(c: OpCtx):
    c.require(0, FLOATS + QUANT8 + (I32,))
    axes = c.const(1).astype(np.int32).reshape(-1)
    c.emit(B.REVERSE_V2, [c.x(0), c.i32(axes)], [c.y()])


def conv_pack(c: OpCtx):
    axis = int(c.scalar(0))
    x = c.require(1, FLOATS + QUANT8 + (I32,))
    n = len(c.ins) - 1
    for k in range(2, n + 1):
        c.require(k, (x.type,))
    if x.type in QUANT8 and not same_quant(*c.ins[1:], c.outs[0]):
        raise Unsupported("quantised PACK with different parameters")
    c.emit(B.PACK, [c.x(k) for k in range(1, n + 1)], [c.y()], options("PackOptions", valuesCount=n, axis=axis))


def _argminmax(code: int, options_name: str):
    def convert(c: OpCtx):
        x = c.require(0, FLOATS + QUANT8 + (I32,))
        axis = int(c.scalar(1))
        emit_no_rank0(
            c,
            c.rank(x) - 1,
            lambda y: c.emit(code, [c.x(0), c.i32([axis])], [y], options(options_name, outputType=TensorType.INT32)),
        )

    return convert


def conv_embedding_lookup(c: OpCtx):
    c.require(0, (I32,))
    v = c.require(1, FLOATS)
    del v
    c.emit(B.EMBEDDING_LOOKUP, [c.x(0), c.x(1)], [c.y()])


def conv_topk(c: OpCtx):
    c.require(0, FLOATS + QUANT8 + (I32,))
    c.emit(B.TOPK_V2, [c.x(0), c.i32_scalar(int(c.scalar(1)))], [c.y(0), c.y(1)])


def conv_fill(c: OpCtx):
    c.require(0, (I32,))
    v = c.ins[1]
    if v.type not in (T.FLOAT32, T.FLOAT16, T.INT32):
        raise Unsupported(f"FILL value of type {v.type.name}")
    c.emit(B.FILL, [c.x(0), c.x(1)], [c.y()])


def conv_rank(c: OpCtx):
    if c.ins[0].type not in TFL_TYPE or c.ins[0].info.is_scalar:
        raise Unsupported(f"RANK of {c.ins[0].type.name}")
    # RANK only reads the shape: hand it the stored tensor, no widening needed.
    c.emit(B.RANK, [c.g.tensor(c.op.inputs[0])], [c.y()])


# ---------------------------------------------------------------------------------------
# Reductions and matrix products
# ---------------------------------------------------------------------------------------


def _reduce(code: int, types):
    def convert(c: OpCtx):
        x = c.require(0, types)
        if x.type in QUANT8 and not same_quant(x, c.outs[0]):
            raise Unsupported("quantised reduction with different input/output parameters")
        axes = c.const(1).astype(np.int32).reshape(-1)
        keep = int(c.scalar(2)) > 0
        r = c.rank(x)
        out_rank = r if keep else r - len({int(a) % r for a in axes})
        emit_no_rank0(
            c, out_rank, lambda y: c.emit(code, [c.x(0), c.i32(axes)], [y], options("ReducerOptions", keepDims=keep))
        )

    return convert


def conv_batch_matmul(c: OpCtx):
    x = c.require(0, (F32, F16))
    c.require(1, (x.type,))
    c.emit(
        B.BATCH_MATMUL,
        [c.x(0), c.x(1)],
        [c.y()],
        options("BatchMatMulOptions", adjX=bool(c.scalar(2, False)), adjY=bool(c.scalar(3, False))),
    )


# ---------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------

# Every conv_<operation> function above converts that operation (conversion.by_name); the
# table lists the others: factory-built converters and converters shared by several operations.
CONVERTERS: dict[Op, Callable[[OpCtx], None]] = conversion.by_name(
    globals(),
    {
        Op.ADD: _binary(B.ADD, "AddOptions", NUMERIC),
        Op.SUB: _binary(B.SUB, "SubOptions", NUMERIC),
        Op.MUL: _binary(B.MUL, "MulOptions", NUMERIC),
        Op.DIV: _binary(B.DIV, "DivOptions", FLOATS + (I32,), int_code=B.FLOOR_DIV),
        Op.RELU: _relu(B.RELU),
        Op.RELU1: _relu(B.RELU_N1_TO_1),
        Op.RELU6: _relu(B.RELU6),
        Op.LOCAL_RESPONSE_NORMALIZATION: conv_lrn,
        Op.ABS: _unary(B.ABS, FLOATS + (I32,)),
        Op.EXP: _unary(B.EXP, FLOATS),
        Op.LOG: _unary(B.LOG, FLOATS),
        Op.SQRT: _unary(B.SQRT, FLOATS),
        Op.RSQRT: _unary(B.RSQRT, FLOATS),
        Op.SIN: _unary(B.SIN, FLOATS),
        Op.NEG: _unary(B.NEG, FLOATS + (I32,)),
        Op.FLOOR: _unary(B.FLOOR, FLOATS),
        Op.LOGICAL_NOT: _unary(B.LOGICAL_NOT, (BOOL,)),
        Op.LOGICAL_AND: _compare(B.LOGICAL_AND, (BOOL,)),
        Op.LOGICAL_OR: _compare(B.LOGICAL_OR, (BOOL,)),
        Op.POW: _compare(B.POW, FLOATS),
        Op.EQUAL: _compare(B.EQUAL, NUMERIC + (BOOL,)),
        Op.NOT_EQUAL: _compare(B.NOT_EQUAL, NUMERIC + (BOOL,)),
        Op.GREATER: _compare(B.GREATER, NUMERIC),
        Op.GREATER_EQUAL: _compare(B.GREATER_EQUAL, NUMERIC),
        Op.LESS: _compare(B.LESS, NUMERIC),
        Op.LESS_EQUAL: _compare(B.LESS_EQUAL, NUMERIC),
        Op.MAXIMUM: _max_min(B.MAXIMUM),
        Op.MINIMUM: _max_min(B.MINIMUM),
        Op.AVERAGE_POOL_2D: _pool(B.AVERAGE_POOL_2D, FLOATS + QUANT8),
        Op.MAX_POOL_2D: _pool(B.MAX_POOL_2D, FLOATS + QUANT8),
        Op.L2_POOL_2D: _pool(B.L2_POOL_2D, FLOATS),
        Op.DEPTH_TO_SPACE: _image_param_op(B.DEPTH_TO_SPACE, "DepthToSpaceOptions"),
        Op.SPACE_TO_DEPTH: _image_param_op(B.SPACE_TO_DEPTH, "SpaceToDepthOptions"),
        Op.BATCH_TO_SPACE_ND: conv_batch_to_space,
        Op.SPACE_TO_BATCH_ND: conv_space_to_batch,
        Op.RESIZE_BILINEAR: _resize(B.RESIZE_BILINEAR, "ResizeBilinearOptions"),
        Op.RESIZE_NEAREST_NEIGHBOR: _resize(B.RESIZE_NEAREST_NEIGHBOR, "ResizeNearestNeighborOptions"),
        Op.ARGMAX: _argminmax(B.ARG_MAX, "ArgMaxOptions"),
        Op.ARGMIN: _argminmax(B.ARG_MIN, "ArgMinOptions"),
        Op.TOPK_V2: conv_topk,
        Op.MEAN: _reduce(B.MEAN, FLOATS + QUANT8),
        # NNAPI accumulates fp16 sums and products in fp16; TFLite has no fp16 reduction.
        Op.REDUCE_SUM: _reduce(B.SUM, (F32,)),
        Op.REDUCE_PROD: _reduce(B.REDUCE_PROD, (F32,)),
        Op.REDUCE_MAX: _reduce(B.REDUCE_MAX, FLOATS + QUANT8),
        Op.REDUCE_MIN: _reduce(B.REDUCE_MIN, FLOATS + QUANT8),
        Op.REDUCE_ANY: _reduce(B.REDUCE_ANY, (BOOL,)),
        Op.REDUCE_ALL: _reduce(B.REDUCE_ALL, (BOOL,)),
    },
)


def convert_operation(g: GraphConv, index: int) -> None:
    op = g.sg.operations[index]
    fn = conversion.lookup(CONVERTERS, op, "TFLite")
    ctx = OpCtx(g, index)
    for o in ctx.ins + ctx.outs:
        if not o.info.is_scalar and o.type not in TFL_TYPE:
            raise Unsupported(f"operand type {o.type.name}")
    fn(ctx)
    ctx.finish()


def operation_supported(model: Model, index: int) -> tuple[bool, str]:
    """(supported, reason): the operation converted alone, in a scratch model."""
    g = GraphConv(FlatModel(), model, model.main, "probe")
    return conversion.supported(lambda: convert_operation(g, index))


def to_tflite(model: Model) -> tuple[bytes, list[int], list[int]]:
    """The flatbuffer, and the TFLite tensor index of each main-graph input and output."""
    fm = FlatModel()
    g = GraphConv(fm, model, model.main, "main")
    ins = [g.tensor(i) for i in model.main.input_indexes]
    for k in range(len(model.main.operations)):
        convert_operation(g, k)
    outs = []
    for i in model.main.output_indexes:
        outs.append(g.tensor(i))
    g.w.set_io(ins, outs)
    return fm.to_bytes(), ins, outs


# Control flow and the recurrent families live in their own modules (they import this one).
from nnconform.drivers.tflite import control_flow, recurrent  # noqa: E402

CONVERTERS.update(control_flow.CONVERTERS)
CONVERTERS.update(recurrent.CONVERTERS)
