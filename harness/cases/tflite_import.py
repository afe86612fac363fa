"""A .tflite flatbuffer -> an nnconform model (NNAPI IR), the way TFLite's NNAPI delegate maps it.

    nnconform import model.tflite -o model.spec.json

The flatbuffer is read with the schema module ``ai-edge-litert`` ships
(``ai_edge_litert/schema_py_generated.py``), so this needs the ``[tflite]`` extra and no
TensorFlow.  Only subgraph 0 (the one the interpreter runs) is imported.

Mapping (``tensorflow/lite/delegates/nnapi/nnapi_delegate.cc``):

- tensors: FLOAT32/FLOAT16/INT32/BOOL are TENSOR_FLOAT32/FLOAT16/INT32/BOOL8; UINT8 is
  TENSOR_QUANT8_ASYMM; INT8 is TENSOR_QUANT8_ASYMM_SIGNED, or TENSOR_QUANT8_SYMM_PER_CHANNEL
  when it carries one scale per channel (``quantizedDimension`` is the channel dimension);
  an INT32 bias of a quantised convolution keeps its scale (per-channel: scale 0, as NNAPI
  requires).  Shapes are the tensors' ``shape`` (TFLite's concrete build-time shape);
- constants (a tensor with buffer data) are CONSTANT_COPY operands holding the stored values;
- a DEQUANTIZE of a constant FLOAT16 tensor (fp16 weights) is folded into an fp32 constant,
  which is what the delegate does with fp16 weights; likewise a DENSIFY of a constant sparse
  tensor (TFLite's sparsity format: traversal order, block map, DENSE / SPARSE_CSR levels) is
  folded into the dense constant, as the delegate densifies sparse weights before handing
  them to NNAPI;
- builtin options become NNAPI scalar operands in the order the operation's signature gives
  (padding SAME/VALID, strides, fused activation NONE/RELU/RELU_N1_TO_1/RELU6 = 0..3, ...);
  a missing bias of a convolution becomes a zero bias;
- a TFLite operation without an NNAPI equivalent (custom operations such as MediaPipe's
  ``Convolution2DTransposeBias``, or options NNAPI cannot express) is never approximated: the
  import fails with :class:`UnmappedOperations`, naming every such operation and its count.
"""

from __future__ import annotations

import collections
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from nnconform.ir import ChannelQuant, Model, ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op

EXTRA_HINT = 'TFLite import needs the [tflite] extra: pip install "nnconform[tflite]"'
MAX_TFLITE_BYTES = 512 << 20

try:
    from ai_edge_litert import schema_py_generated as S
except ImportError:  # the extra is not installed: every entry point says so in one line
    S = None


class TfliteImportError(Exception):
    """The file cannot be imported (one line)."""


class UnmappedOperations(TfliteImportError):
    def __init__(self, unmapped: dict[str, int], path: str = ""):
        self.unmapped = dict(unmapped)
        names = ", ".join(f"{n} x{c}" if c > 1 else n for n, c in sorted(unmapped.items()))
        super().__init__(
            f"{path + ': ' if path else ''}{sum(unmapped.values())} TFLite operation(s) have no NNAPI "
            f"equivalent: {names}"
        )


def require_schema() -> None:
    if S is None:
        raise TfliteImportError(EXTRA_HINT)


@dataclass
class ImportResult:
    model: Model
    meta: dict
    op_counts: dict[str, int] = field(default_factory=dict)


def _code_names() -> dict[int, str]:
    return {v: k for k, v in vars(S.BuiltinOperator).items() if not k.startswith("_") and isinstance(v, int)}


_ACT = {0: 0, 1: 1, 2: 2, 3: 3}  # NONE, RELU, RELU_N1_TO_1, RELU6 (same codes in NNAPI)
_ACT_NAMES = {4: "TANH", 5: "SIGN_BIT", 6: "SIGMOID"}


class _Unmapped(Exception):
    """This operation cannot be expressed in NNAPI; the message says why."""


class _Graph:
    # set by import_tflite_bytes right after construction
    raw_file: bytes  # the whole file (buffers stored past the flatbuffer: offset/size)
    graph_inputs: set[int]  # tflite tensors that are the graph's inputs

    def __init__(self, model_t, path: str):
        self.m = model_t
        self.sg = model_t.subgraphs[0]
        self.path = path
        self.b = ModelBuilder("main")
        self.idx: dict[int | tuple[int, str], int] = {}  # tflite tensor (, role) -> operand index
        self.folded: dict[int, np.ndarray] = {}  # tflite tensor -> constant value (fp16 weights folded)
        self.names = _code_names()

    # tensors ---------------------------------------------------------------------------
    def tensor(self, t: int):
        return self.sg.tensors[t]

    def shape(self, t: int) -> list[int]:
        ten = self.tensor(t)
        return [int(d) for d in (ten.shape if ten.shape is not None else [])]

    def data(self, t: int) -> np.ndarray | None:
        if t in self.folded:
            return self.folded[t]
        ten = self.tensor(t)
        if ten.sparsity is not None:
            raise _Unmapped(f"sparse tensor {_text(ten.name)!r} used without DENSIFY")
        if not ten.buffer:
            return None
        buf = self.m.buffers[ten.buffer]
        raw = None
        if buf.data is not None and len(buf.data):
            raw = np.asarray(buf.data, dtype=np.uint8).tobytes()
        elif getattr(buf, "offset", 0) and buf.offset > 1:
            raw = self.raw_file[buf.offset : buf.offset + buf.size]
        if raw is None:
            return None
        dt = _NP_TYPE.get(ten.type)
        if dt is None:
            raise _Unmapped(f"constant of TFLite type {_type_name(ten.type)}")
        arr = np.frombuffer(raw, dtype=np.dtype(dt).newbyteorder("<")).astype(dt)
        return arr.reshape(self.shape(t)) if arr.size == int(np.prod(self.shape(t), dtype=np.int64)) else arr

    def quant(self, t: int):
        q = self.tensor(t).quantization
        if q is None or q.scale is None or len(q.scale) == 0:
            return None
        return q

    def operand_type(self, t: int, role: str = "") -> tuple[T, dict]:
        ten = self.tensor(t)
        q = self.quant(t)
        ty = ten.type
        tt = S.TensorType
        if ty == tt.FLOAT32:
            return T.TENSOR_FLOAT32, {}
        if ty == tt.FLOAT16:
            return T.TENSOR_FLOAT16, {}
        if ty == tt.BOOL:
            return T.TENSOR_BOOL8, {}
        if ty == tt.INT32:
            if q is not None and role == "bias":
                return T.TENSOR_INT32, {}  # scale filled by the operation (input x filter)
            return T.TENSOR_INT32, {}
        if ty in (tt.UINT8, tt.INT8):
            if q is None:
                raise _Unmapped(f"{_type_name(ty)} tensor {_text(ten.name)!r} without quantisation")
            if len(q.scale) > 1:
                if ty != tt.INT8 or any(int(z) != 0 for z in q.zeroPoint):
                    raise _Unmapped(f"per-channel tensor {_text(ten.name)!r} that is not symmetric int8")
                return T.TENSOR_QUANT8_SYMM_PER_CHANNEL, {
                    "channel_quant": ChannelQuant(tuple(float(s) for s in q.scale), int(q.quantizedDimension))
                }
            kind = T.TENSOR_QUANT8_ASYMM if ty == tt.UINT8 else T.TENSOR_QUANT8_ASYMM_SIGNED
            return kind, {
                "scale": float(q.scale[0]),
                "zero_point": int(q.zeroPoint[0]) if q.zeroPoint is not None and len(q.zeroPoint) else 0,
            }
        raise _Unmapped(f"tensor {_text(ten.name)!r} of TFLite type {_type_name(ty)}")

    def operand(self, t: int, role: str = "", bias_scale: float | None = None, per_channel_bias: bool = False) -> int:
        """The NNAPI operand of TFLite tensor ``t`` (created on first use)."""
        key = t if not role else (t, role)
        if key in self.idx:
            return self.idx[key]
        kind, kw = self.operand_type(t, role)
        if role == "bias" and kind == T.TENSOR_INT32 and bias_scale is not None:
            kw = {"scale": 0.0 if per_channel_bias else float(bias_scale)}
        value = self.data(t)
        name = _text(self.tensor(t).name) or f"t{t}"
        if value is not None:
            if t in self.folded:
                kind, kw = T.TENSOR_FLOAT32, {}
            i = self.b.const(kind, self.shape(t), value, name=name, **kw)
        elif t in self.graph_inputs:
            raise RuntimeError("graph inputs are created up front")
        else:
            i = self.b.temp(kind, self.shape(t), name=name, **kw)
        self.idx[key] = i
        return i

    # scalars and small constants ----------------------------------------------------------
    def i32(self, v) -> int:
        return self.b.i32(int(v))

    def f32(self, v) -> int:
        return self.b.f32(float(v))

    def boolean(self, v) -> int:
        return self.b.bool(bool(v))

    def ivec(self, values) -> int:
        vals = [int(v) for v in values]
        return self.b.const(T.TENSOR_INT32, [len(vals)], vals)

    def const_input(self, t: int, what: str) -> np.ndarray:
        v = self.data(t)
        if v is None:
            raise _Unmapped(f"{what} computed at run time (NNAPI needs a constant)")
        return v


def _type_name(code: int) -> str:
    for k, v in vars(S.TensorType).items():
        if v == code and not k.startswith("_"):
            return k
    return f"type {code}"


_NP_TYPE: dict[int, Any] = {}


def _np_types() -> None:
    if _NP_TYPE or S is None:
        return
    tt = S.TensorType
    _NP_TYPE.update(
        {
            tt.FLOAT32: np.float32,
            tt.FLOAT16: np.float16,
            tt.INT32: np.int32,
            tt.UINT8: np.uint8,
            tt.INT8: np.int8,
            tt.BOOL: np.bool_,
            tt.INT64: np.int64,
            tt.INT16: np.int16,
        }
    )


# ---- operations ----------------------------------------------------------------------------

Converter = Callable[[_Graph, Any, list, list], None]
CONVERTERS: dict[str, Converter] = {}


def _conv(name: str):
    def deco(fn):
        CONVERTERS[name] = fn
        return fn

    return deco


def _act(opts) -> int:
    a = int(getattr(opts, "fusedActivationFunction", 0) or 0)
    if a not in _ACT:
        raise _Unmapped(f"fused activation {_ACT_NAMES.get(a, a)}")
    return _ACT[a]


def _padding(opts) -> int:
    return 1 if int(opts.padding) == S.Padding.SAME else 2  # NNAPI: 1 SAME, 2 VALID


def _out(g: _Graph, outs: list, k: int = 0) -> int:
    return g.operand(outs[k])


def _simple(op: Op, n_in: int = 1):
    def fn(g: _Graph, o, ins: list, outs: list) -> None:
        g.b.operation(op, [g.operand(t) for t in ins[:n_in]], [_out(g, outs)])

    return fn


for _name, _op in {
    "LOGISTIC": Op.LOGISTIC,
    "TANH": Op.TANH,
    "RELU": Op.RELU,
    "RELU6": Op.RELU6,
    "RELU_N1_TO_1": Op.RELU1,
    "HARD_SWISH": Op.HARD_SWISH,
    "ABS": Op.ABS,
    "EXP": Op.EXP,
    "LOG": Op.LOG,
    "SQRT": Op.SQRT,
    "RSQRT": Op.RSQRT,
    "NEG": Op.NEG,
    "FLOOR": Op.FLOOR,
    "SIN": Op.SIN,
    "DEQUANTIZE": Op.DEQUANTIZE,
    "QUANTIZE": Op.QUANTIZE,
    "L2_NORMALIZATION": Op.L2_NORMALIZATION,
    "LOGICAL_NOT": Op.LOGICAL_NOT,
    "ELU": Op.ELU,
    "CAST": Op.CAST,
}.items():
    CONVERTERS[_name] = _simple(_op)
for _name, _op in {
    "MAXIMUM": Op.MAXIMUM,
    "MINIMUM": Op.MINIMUM,
    "PRELU": Op.PRELU,
    "EQUAL": Op.EQUAL,
    "NOT_EQUAL": Op.NOT_EQUAL,
    "GREATER": Op.GREATER,
    "GREATER_EQUAL": Op.GREATER_EQUAL,
    "LESS": Op.LESS,
    "LESS_EQUAL": Op.LESS_EQUAL,
    "LOGICAL_AND": Op.LOGICAL_AND,
    "LOGICAL_OR": Op.LOGICAL_OR,
    "POW": Op.POW,
}.items():
    CONVERTERS[_name] = _simple(_op, 2)


def _arith(op: Op):
    def fn(g: _Graph, o, ins, outs) -> None:
        act = _act(o.builtinOptions) if o.builtinOptions is not None else 0
        g.b.operation(op, [g.operand(ins[0]), g.operand(ins[1]), g.i32(act)], [_out(g, outs)])

    return fn


for _name, _op in {"ADD": Op.ADD, "SUB": Op.SUB, "MUL": Op.MUL, "DIV": Op.DIV}.items():
    CONVERTERS[_name] = _arith(_op)


def _bias(g: _Graph, ins: list, k: int, x: int, w: int, n_out: int) -> int:
    """The bias operand of a convolution-like operation (a zero bias when omitted)."""
    x_kind, x_kw = g.operand_type(x)
    w_kind, w_kw = g.operand_type(w)
    per_channel = w_kind == T.TENSOR_QUANT8_SYMM_PER_CHANNEL
    scale = None
    if "scale" in x_kw and ("scale" in w_kw or per_channel):
        scale = x_kw["scale"] * (w_kw["scale"] if not per_channel else 1.0)
    if len(ins) > k and ins[k] >= 0:
        return g.operand(ins[k], role="bias", bias_scale=scale, per_channel_bias=per_channel)
    if x_kind in (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16):
        return g.b.const(x_kind, [n_out], np.zeros(n_out))
    return g.b.const(T.TENSOR_INT32, [n_out], np.zeros(n_out, np.int32), scale=0.0 if per_channel else scale)


@_conv("CONV_2D")
def _conv2d(g: _Graph, o, ins, outs) -> None:
    opt = o.builtinOptions
    n_out = g.shape(ins[1])[0]
    args = [
        g.operand(ins[0]),
        g.operand(ins[1]),
        _bias(g, ins, 2, ins[0], ins[1], n_out),
        g.i32(_padding(opt)),
        g.i32(opt.strideW),
        g.i32(opt.strideH),
        g.i32(_act(opt)),
    ]
    if (opt.dilationWFactor or 1) != 1 or (opt.dilationHFactor or 1) != 1:
        args += [g.boolean(False), g.i32(opt.dilationWFactor), g.i32(opt.dilationHFactor)]
    g.b.operation(Op.CONV_2D, args, [_out(g, outs)])


@_conv("DEPTHWISE_CONV_2D")
def _depthwise(g: _Graph, o, ins, outs) -> None:
    opt = o.builtinOptions
    n_out = g.shape(ins[1])[3]
    c_in = g.shape(ins[0])[3]
    multiplier = n_out // c_in if c_in else int(opt.depthMultiplier or 1)
    args = [
        g.operand(ins[0]),
        g.operand(ins[1]),
        _bias(g, ins, 2, ins[0], ins[1], n_out),
        g.i32(_padding(opt)),
        g.i32(opt.strideW),
        g.i32(opt.strideH),
        g.i32(multiplier),
        g.i32(_act(opt)),
    ]
    if (opt.dilationWFactor or 1) != 1 or (opt.dilationHFactor or 1) != 1:
        args += [g.boolean(False), g.i32(opt.dilationWFactor), g.i32(opt.dilationHFactor)]
    g.b.operation(Op.DEPTHWISE_CONV_2D, args, [_out(g, outs)])


@_conv("TRANSPOSE_CONV")
def _transpose_conv(g: _Graph, o, ins, outs) -> None:
    opt = o.builtinOptions
    shape_t, w, x = ins[0], ins[1], ins[2]
    n_out = g.shape(w)[0]
    args = [
        g.operand(x),
        g.operand(w),
        _bias(g, ins, 3, x, w, n_out),
        g.ivec(g.const_input(shape_t, "output shape")),
        g.i32(_padding(opt)),
        g.i32(opt.strideW),
        g.i32(opt.strideH),
        g.i32(_act(opt)),
        g.boolean(False),
    ]
    g.b.operation(Op.TRANSPOSE_CONV_2D, args, [_out(g, outs)])


@_conv("FULLY_CONNECTED")
def _fully_connected(g: _Graph, o, ins, outs) -> None:
    opt = o.builtinOptions
    if opt is not None and int(opt.weightsFormat or 0) != 0:
        raise _Unmapped("shuffled weights format")
    if g.tensor(ins[1]).type != g.tensor(ins[0]).type and g.tensor(ins[1]).type != S.TensorType.FLOAT32:
        raise _Unmapped("hybrid (quantised weights, float input) fully connected")
    n_out = g.shape(ins[1])[0]
    out_shape = g.shape(outs[0])
    args = [
        g.operand(ins[0]),
        g.operand(ins[1]),
        _bias(g, ins, 2, ins[0], ins[1], n_out),
        g.i32(_act(opt) if opt is not None else 0),
    ]
    if len(out_shape) == 2:
        g.b.operation(Op.FULLY_CONNECTED, args, [_out(g, outs)])
        return
    kind, kw = g.operand_type(outs[0])  # keepNumDims: NNAPI's output is 2-D, reshape it back
    flat = g.b.temp(kind, [int(np.prod(out_shape[:-1])), out_shape[-1]], **kw)
    g.b.operation(Op.FULLY_CONNECTED, args, [flat])
    g.b.operation(Op.RESHAPE, [flat, g.ivec(out_shape)], [_out(g, outs)])


def _pool(op: Op):
    def fn(g: _Graph, o, ins, outs) -> None:
        opt = o.builtinOptions
        g.b.operation(
            op,
            [
                g.operand(ins[0]),
                g.i32(_padding(opt)),
                g.i32(opt.strideW),
                g.i32(opt.strideH),
                g.i32(opt.filterWidth),
                g.i32(opt.filterHeight),
                g.i32(_act(opt)),
            ],
            [_out(g, outs)],
        )

    return fn


CONVERTERS.update(
    AVERAGE_POOL_2D=_pool(Op.AVERAGE_POOL_2D), MAX_POOL_2D=_pool(Op.MAX_POOL_2D), L2_POOL_2D=_pool(Op.L2_POOL_2D)
)


@_conv("RESHAPE")
def _reshape(g: _Graph, o, ins, outs) -> None:
    g.b.operation(Op.RESHAPE, [g.operand(ins[0]), g.ivec(g.shape(outs[0]))], [_out(g, outs)])


@_conv("SQUEEZE")
def _squeeze(g: _Graph, o, ins, outs) -> None:
    g.b.operation(Op.RESHAPE, [g.operand(ins[0]), g.ivec(g.shape(outs[0]))], [_out(g, outs)])


@_conv("EXPAND_DIMS")
def _expand_dims(g: _Graph, o, ins, outs) -> None:
    axis = int(np.asarray(g.const_input(ins[1], "axis")).reshape(-1)[0])
    g.b.operation(Op.EXPAND_DIMS, [g.operand(ins[0]), g.i32(axis)], [_out(g, outs)])


@_conv("SOFTMAX")
def _softmax(g: _Graph, o, ins, outs) -> None:
    beta = o.builtinOptions.beta if o.builtinOptions is not None else 1.0
    g.b.operation(Op.SOFTMAX, [g.operand(ins[0]), g.f32(beta)], [_out(g, outs)])


@_conv("CONCATENATION")
def _concat(g: _Graph, o, ins, outs) -> None:
    opt = o.builtinOptions
    if _act(opt) != 0:
        raise _Unmapped("fused activation on CONCATENATION")
    rank = len(g.shape(outs[0]))
    axis = int(opt.axis) % rank if rank else 0
    g.b.operation(Op.CONCATENATION, [g.operand(t) for t in ins] + [g.i32(axis)], [_out(g, outs)])


@_conv("PAD")
def _pad(g: _Graph, o, ins, outs) -> None:
    pads = g.const_input(ins[1], "paddings").astype(np.int32)
    p = g.b.const(T.TENSOR_INT32, list(pads.shape), pads)
    g.b.operation(Op.PAD, [g.operand(ins[0]), p], [_out(g, outs)])


@_conv("PADV2")
def _padv2(g: _Graph, o, ins, outs) -> None:
    pads = g.const_input(ins[1], "paddings").astype(np.int32)
    value = np.asarray(g.const_input(ins[2], "pad value")).reshape(-1)[0]
    kind, _ = g.operand_type(ins[0])
    pv = g.f32(value) if kind == T.TENSOR_FLOAT32 else (g.b.f16(value) if kind == T.TENSOR_FLOAT16 else g.i32(value))
    g.b.operation(
        Op.PAD_V2, [g.operand(ins[0]), g.b.const(T.TENSOR_INT32, list(pads.shape), pads), pv], [_out(g, outs)]
    )


def _reduce(op: Op, keep_as_int: bool = False):
    def fn(g: _Graph, o, ins, outs) -> None:
        axes = np.asarray(g.const_input(ins[1], "axes")).reshape(-1)
        keep = bool(o.builtinOptions.keepDims) if o.builtinOptions is not None else False
        g.b.operation(
            op, [g.operand(ins[0]), g.ivec(axes), g.i32(int(keep)) if keep_as_int else g.boolean(keep)], [_out(g, outs)]
        )

    return fn


CONVERTERS.update(
    MEAN=_reduce(Op.MEAN, keep_as_int=True),
    SUM=_reduce(Op.REDUCE_SUM),
    REDUCE_MAX=_reduce(Op.REDUCE_MAX),
    REDUCE_MIN=_reduce(Op.REDUCE_MIN),
    REDUCE_PROD=_reduce(Op.REDUCE_PROD),
    REDUCE_ANY=_reduce(Op.REDUCE_ANY),
)


def _resize(op: Op):
    def fn(g: _Graph, o, ins, outs) -> None:
        opt = o.builtinOptions
        h, w = [int(v) for v in g.const_input(ins[1], "output size").reshape(-1)]
        args = [g.operand(ins[0]), g.i32(w), g.i32(h), g.boolean(False)]
        if opt is not None and (opt.alignCorners or opt.halfPixelCenters):
            args += [g.boolean(opt.alignCorners), g.boolean(opt.halfPixelCenters)]
        g.b.operation(op, args, [_out(g, outs)])

    return fn


CONVERTERS.update(
    RESIZE_BILINEAR=_resize(Op.RESIZE_BILINEAR), RESIZE_NEAREST_NEIGHBOR=_resize(Op.RESIZE_NEAREST_NEIGHBOR)
)


@_conv("LEAKY_RELU")
def _leaky_relu(g: _Graph, o, ins, outs) -> None:
    # the delegate maps LEAKY_RELU to PRELU with a one-element alpha
    alpha = float(o.builtinOptions.alpha)
    kind, kw = g.operand_type(ins[0])
    if kind == T.TENSOR_FLOAT32 or kind == T.TENSOR_FLOAT16:
        a = g.b.const(kind, [1], [alpha])
    else:
        raise _Unmapped("quantised LEAKY_RELU")
    g.b.operation(Op.PRELU, [g.operand(ins[0]), a], [_out(g, outs)])


@_conv("TRANSPOSE")
def _transpose(g: _Graph, o, ins, outs) -> None:
    g.b.operation(
        Op.TRANSPOSE, [g.operand(ins[0]), g.ivec(g.const_input(ins[1], "permutation").reshape(-1))], [_out(g, outs)]
    )


@_conv("SLICE")
def _slice(g: _Graph, o, ins, outs) -> None:
    g.b.operation(
        Op.SLICE,
        [
            g.operand(ins[0]),
            g.ivec(g.const_input(ins[1], "begin").reshape(-1)),
            g.ivec(g.const_input(ins[2], "size").reshape(-1)),
        ],
        [_out(g, outs)],
    )


@_conv("STRIDED_SLICE")
def _strided_slice(g: _Graph, o, ins, outs) -> None:
    opt = o.builtinOptions
    if opt.ellipsisMask or opt.newAxisMask or getattr(opt, "offset", False):
        raise _Unmapped("STRIDED_SLICE with ellipsis/new-axis/offset")
    vecs = [g.ivec(g.const_input(t, n).reshape(-1)) for t, n in zip(ins[1:4], ("begin", "end", "strides"))]
    g.b.operation(
        Op.STRIDED_SLICE,
        [g.operand(ins[0]), *vecs, g.i32(opt.beginMask), g.i32(opt.endMask), g.i32(opt.shrinkAxisMask)],
        [_out(g, outs)],
    )


@_conv("SPLIT")
def _split(g: _Graph, o, ins, outs) -> None:
    axis = int(np.asarray(g.const_input(ins[0], "axis")).reshape(-1)[0])
    g.b.operation(Op.SPLIT, [g.operand(ins[1]), g.i32(axis), g.i32(len(outs))], [g.operand(t) for t in outs])


@_conv("GATHER")
def _gather(g: _Graph, o, ins, outs) -> None:
    opt = o.builtinOptions
    if opt is not None and opt.batchDims:
        raise _Unmapped("GATHER with batch_dims")
    g.b.operation(Op.GATHER, [g.operand(ins[0]), g.i32(opt.axis if opt else 0), g.operand(ins[1])], [_out(g, outs)])


def _block(op: Op):
    def fn(g: _Graph, o, ins, outs) -> None:
        g.b.operation(op, [g.operand(ins[0]), g.i32(o.builtinOptions.blockSize)], [_out(g, outs)])

    return fn


CONVERTERS.update(SPACE_TO_DEPTH=_block(Op.SPACE_TO_DEPTH), DEPTH_TO_SPACE=_block(Op.DEPTH_TO_SPACE))


@_conv("LOCAL_RESPONSE_NORMALIZATION")
def _lrn(g: _Graph, o, ins, outs) -> None:
    opt = o.builtinOptions
    g.b.operation(
        Op.LOCAL_RESPONSE_NORMALIZATION,
        [g.operand(ins[0]), g.i32(opt.radius), g.f32(opt.bias), g.f32(opt.alpha), g.f32(opt.beta)],
        [_out(g, outs)],
    )


def _argminmax(op: Op):
    def fn(g: _Graph, o, ins, outs) -> None:
        if g.tensor(outs[0]).type != S.TensorType.INT32:
            raise _Unmapped("INT64 output")
        axis = int(np.asarray(g.const_input(ins[1], "axis")).reshape(-1)[0])
        g.b.operation(op, [g.operand(ins[0]), g.i32(axis)], [_out(g, outs)])

    return fn


CONVERTERS.update(ARG_MAX=_argminmax(Op.ARGMAX), ARG_MIN=_argminmax(Op.ARGMIN))


# ---- the whole model ---------------------------------------------------------------------------


def _index_vector(union_type: int, vec) -> np.ndarray:
    if vec is None or union_type == 0:
        raise _Unmapped("SPARSE_CSR dimension without segments/indices")
    return np.asarray(vec.values, dtype=np.int64)


def densify(values: np.ndarray, shape: list[int], sparsity) -> np.ndarray:
    """TFLite's sparse constant (the stored non-zero values) as the dense tensor of ``shape``
    (tensorflow/lite/kernels/internal/utils/sparsity_format_converter.cc, SparseToDense)."""
    rank = len(shape)
    order = [int(v) for v in sparsity.traversalOrder]
    block_map = [int(v) for v in (sparsity.blockMap if sparsity.blockMap is not None else [])]
    meta = list(sparsity.dimMetadata)
    if len(order) != rank + len(block_map) or len(meta) != len(order):
        raise _Unmapped("sparsity parameters that do not match the tensor's rank")
    pos = np.zeros(1, dtype=np.int64)  # index into the stored values
    coords = np.zeros((len(order), 1), dtype=np.int64)  # expanded coordinates, traversal order
    for level, dm in enumerate(meta):
        if int(dm.format) == S.DimensionType.DENSE:
            d = int(dm.denseSize)
            pos = (pos[:, None] * d + np.arange(d)[None, :]).reshape(-1)
            coords = np.repeat(coords, d, axis=1)
            coords[level] = np.tile(np.arange(d), coords.shape[1] // d)
        else:
            seg = _index_vector(dm.arraySegmentsType, dm.arraySegments)
            idx = _index_vector(dm.arrayIndicesType, dm.arrayIndices)
            starts, counts = seg[pos], seg[pos + 1] - seg[pos]
            parent = np.repeat(np.arange(pos.size), counts)
            j = np.repeat(starts - np.concatenate(([0], np.cumsum(counts)[:-1])), counts) + np.arange(int(counts.sum()))
            coords = coords[:, parent]
            coords[level] = idx[j]
            pos = j
    expanded = np.zeros((len(order), pos.size), dtype=np.int64)
    for level, dim in enumerate(order):
        expanded[dim] = coords[level]
    orig = expanded[:rank].copy()
    for k, dim in enumerate(block_map):
        block = int(meta[order.index(rank + k)].denseSize)
        orig[dim] = orig[dim] * block + expanded[rank + k]
    flat = values.reshape(-1)
    if pos.size and int(pos.max()) >= flat.size:
        raise _Unmapped("sparse tensor with fewer stored values than its indices need")
    dense = np.zeros(shape, dtype=values.dtype)
    dense[tuple(orig)] = flat[pos]
    return dense


def _op_name(g: _Graph, o) -> str:
    code = g.m.operatorCodes[o.opcodeIndex]
    c = max(int(code.deprecatedBuiltinCode or 0), int(code.builtinCode or 0))
    if c == S.BuiltinOperator.CUSTOM:
        custom = code.customCode.decode() if isinstance(code.customCode, bytes) else str(code.customCode)
        return f"CUSTOM:{custom}"
    return g.names.get(c, f"BUILTIN_{c}")


def read_flatbuffer(raw: bytes, path: str = "model.tflite"):
    require_schema()
    _np_types()
    if len(raw) < 8 or raw[4:8] != b"TFL3":
        raise TfliteImportError(f"{path}: not a TFLite flatbuffer (no TFL3 identifier)")
    try:
        m = S.ModelT.InitFromPackedBuf(raw, 0)
    except Exception as e:  # a damaged flatbuffer fails anywhere inside the generated reader
        raise TfliteImportError(f"{path}: damaged TFLite flatbuffer ({type(e).__name__}: {e})") from None
    if not m.subgraphs:
        raise TfliteImportError(f"{path}: the model has no subgraph")
    return m


def operation_names(raw: bytes, path: str = "model.tflite") -> list[str]:
    """The TFLite operation names of subgraph 0, in order (custom ones as CUSTOM:name)."""
    m = read_flatbuffer(raw, path)
    g = _Graph(m, path)
    return [_op_name(g, o) for o in (g.sg.operators if g.sg.operators is not None else [])]


def import_tflite_bytes(raw: bytes, path: str = "model.tflite") -> ImportResult:
    m = read_flatbuffer(raw, path)
    g = _Graph(m, path)
    g.raw_file = raw
    sg = g.sg
    inputs = _ints(sg.inputs)
    g.graph_inputs = set(inputs)
    outputs = _ints(sg.outputs)
    unmapped: collections.Counter = collections.Counter()
    counts: collections.Counter = collections.Counter()
    operators = sg.operators if sg.operators is not None else []
    # fp16 weights: DEQUANTIZE(const fp16) is folded into an fp32 constant
    folded_ops = set()
    for n, o in enumerate(operators):
        if _op_name(g, o) == "DENSIFY":
            src = g.tensor(int(o.inputs[0]))
            if src.sparsity is None or not src.buffer:
                continue
            try:
                raw_vals = g.m.buffers[src.buffer].data
                vals = np.frombuffer(
                    np.asarray(raw_vals, dtype=np.uint8).tobytes(), dtype=np.dtype(_NP_TYPE[src.type]).newbyteorder("<")
                ).astype(_NP_TYPE[src.type])
                g.folded[int(o.outputs[0])] = densify(vals, g.shape(int(o.outputs[0])), src.sparsity)
                folded_ops.add(n)
            except (_Unmapped, KeyError, IndexError, ValueError):
                continue  # left to the converter loop, which reports DENSIFY as unmapped
        if _op_name(g, o) == "DEQUANTIZE" and g.tensor(o.inputs[0]).type == S.TensorType.FLOAT16:
            v = g.data(o.inputs[0])
            if v is not None:
                g.folded[int(o.outputs[0])] = v.astype(np.float32)
                folded_ops.add(n)
    try:
        for t in inputs:
            kind, kw = g.operand_type(t)
            g.idx[t] = g.b.input(kind, g.shape(t), name=_text(g.tensor(t).name) or f"t{t}", **kw)
        for t in outputs:
            if t in g.idx:
                raise _Unmapped("a graph input that is also a graph output")
            kind, kw = g.operand_type(t)
            g.idx[t] = g.b.output(kind, g.shape(t), name=_text(g.tensor(t).name) or f"t{t}", **kw)
    except _Unmapped as e:
        raise TfliteImportError(f"{path}: {e}") from None
    for n, o in enumerate(operators):
        name = _op_name(g, o)
        if n in folded_ops:
            counts[f"{name} (constant, folded)" if name == "DENSIFY" else "DEQUANTIZE (fp16 weights, folded)"] += 1
            continue
        counts[name] += 1
        conv = CONVERTERS.get(name)
        if conv is None:
            unmapped[name] += 1
            continue
        ins, outs = _ints(o.inputs), _ints(o.outputs)
        try:
            conv(g, o, ins, outs)
        except _Unmapped as e:
            unmapped[f"{name} ({e})"] += 1
    if unmapped:
        raise UnmappedOperations(dict(unmapped), path)
    g.b.identify([g.idx[t] for t in inputs], [g.idx[t] for t in outputs])
    model = g.b.build()
    meta = {
        "source": os.path.basename(path),
        "sha256": hashlib.sha256(raw).hexdigest(),
        "bytes": len(raw),
        "importer": "nnconform.cases.tflite_import (TFLite NNAPI delegate mapping)",
        "tflite_operations": dict(sorted(counts.items())),
        "description": _text(m.description),
    }
    return ImportResult(model, meta, dict(counts))


def _ints(v) -> list[int]:
    return [] if v is None else [int(i) for i in v]


def _text(v) -> str:
    if v is None:
        return ""
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def import_tflite(path: str | os.PathLike) -> ImportResult:
    require_schema()
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_TFLITE_BYTES:
            raise TfliteImportError(f"{p}: {size} bytes is larger than the {MAX_TFLITE_BYTES >> 20} MiB import limit")
        raw = p.read_bytes()
    except OSError as e:
        raise TfliteImportError(f"{p}: {e.strerror or e}") from None
    return import_tflite_bytes(raw, str(p))


def seeded_inputs(model: Model, seed: int) -> list[np.ndarray]:
    """Realistic inputs for an imported or built-in model: images-like values in each input's
    range (float: [-1, 1]; quantised: the stored values covering that range), seeded."""
    rng = np.random.default_rng(seed)
    out = []
    for i in model.main.input_indexes:
        op = model.main.operands[i]
        dims = [d if d > 0 else 1 for d in op.dimensions]
        if op.type in (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16):
            out.append(rng.uniform(-1.0, 1.0, dims).astype(op.info.dtype))
        elif op.type in (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED):
            lo, hi = (0, 255) if op.type == T.TENSOR_QUANT8_ASYMM else (-128, 127)
            out.append(rng.integers(lo, hi + 1, dims).astype(op.info.dtype))
        elif op.type == T.TENSOR_BOOL8:
            out.append(rng.integers(0, 2, dims).astype(bool))
        else:
            out.append(rng.integers(0, 4, dims).astype(op.info.dtype))
    return out


def write_spec(result: ImportResult, out: str | os.PathLike, *, examples: int = 1, seed: int = 0) -> int:
    """Write the imported model as a spec file; with ``examples`` > 0 each example is a seeded
    input and the reference executor's outputs.  Returns the number of examples written."""
    from nnconform.ir.spec import SpecExample, SpecFile, dump_spec
    from nnconform.reference.executor import Executor

    exs = []
    for k in range(examples):
        inputs = seeded_inputs(result.model, seed + k)
        expected = Executor(result.model).run(inputs)
        exs.append(SpecExample(f"seeded_{seed + k}", inputs, expected, (), False))
    dump_spec(SpecFile(result.model, exs, dict(result.meta, seed=seed)), out)
    return len(exs)
