"""Writing a .tflite flatbuffer without TensorFlow.

The schema's generated Python module ships inside ``ai-edge-litert``
(``ai_edge_litert/schema_py_generated.py``, generated from LiteRT's ``schema.fbs`` with the
flatbuffers object API).  We fill its ``ModelT`` / ``SubGraphT`` / ``TensorT`` / ``OperatorT``
objects and let ``Pack`` lay out the bytes, so field order and defaults are the schema's own.
The one thing we do by hand is the constant data vectors: they are written 16-byte aligned,
as TFLite's own converter does, so kernels may read them in place.

Conventions of the format that matter here:
- buffer 0 is the empty sentinel; a tensor without data points at it;
- an operator names its kernel through an index into ``operatorCodes``; builtin codes above
  126 go in ``builtinCode`` with ``deprecatedBuiltinCode`` = 127 (the placeholder);
- a shape entry that is unknown until run time is -1 in ``shapeSignature`` (the ``shape``
  itself must be concrete, so it gets 1 there);
- ``-1`` as an operator input means "optional input omitted".
"""

from __future__ import annotations

from typing import Sequence

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as S

BuiltinOperator = S.BuiltinOperator
TensorType = S.TensorType
OMITTED = -1
_PLACEHOLDER_FOR_GREATER_OP_CODES = 127
_FILE_IDENTIFIER = b"TFL3"
_SCHEMA_VERSION = 3


class _AlignedBuffer(S.BufferT):
    """A Buffer whose data vector starts on a 16-byte boundary."""

    def Pack(self, builder):
        raw = bytes(self.data) if self.data is not None else None
        data = None
        if raw:
            builder.StartVector(1, len(raw), 16)
            builder.head = builder.head - len(raw)
            builder.Bytes[builder.head : builder.head + len(raw)] = raw
            data = builder.EndVector()
        S.BufferStart(builder)
        if data is not None:
            S.BufferAddData(builder, data)
        return S.BufferEnd(builder)


def options(name: str, **fields):
    """(union type code, options object) for a builtin options table, e.g.
    ``options("Conv2DOptions", padding=S.Padding.SAME, strideW=1, strideH=1)``."""
    obj = getattr(S, name + "T")()
    for key, value in fields.items():
        if not hasattr(obj, key):
            raise AttributeError(f"{name} has no field {key!r}")
        setattr(obj, key, value)
    return getattr(S.BuiltinOptions, name), obj


class SubgraphWriter:
    """Tensors and operators of one TFLite subgraph (buffers and opcodes are model-wide)."""

    def __init__(self, model: "FlatModel", name: str):
        self.model = model
        self.sg = S.SubGraphT()
        self.sg.name = name
        self.sg.tensors, self.sg.operators, self.sg.inputs, self.sg.outputs = [], [], [], []

    @property
    def index(self) -> int:
        return self.model.subgraphs.index(self)

    def tensor(
        self,
        shape: Sequence[int] | None,
        ttype: int,
        *,
        name: str = "",
        data: np.ndarray | None = None,
        scale: Sequence[float] | None = None,
        zero_point: Sequence[int] | None = None,
        quantized_dimension: int = 0,
    ) -> int:
        """Add a tensor and return its index.  ``shape`` None is an unknown rank; 0 entries
        are unknown dimensions.  ``data`` (already in the tensor's storage dtype) makes it a
        constant."""
        t = S.TensorT()
        t.type = ttype
        t.name = name or f"t{len(self.sg.tensors)}"
        if shape is None:
            t.shape, t.hasRank = [], False
        else:
            dims = [int(d) for d in shape]
            t.shape = [d if d > 0 else 1 for d in dims]
            t.hasRank = True
            if any(d <= 0 for d in dims):
                t.shapeSignature = [d if d > 0 else -1 for d in dims]
        if data is not None:
            arr = np.ascontiguousarray(data)
            t.buffer = self.model.buffer(arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes())
        else:
            t.buffer = 0
        if scale is not None:
            q = S.QuantizationParametersT()
            q.scale = [float(s) for s in scale]
            q.zeroPoint = [int(z) for z in (zero_point if zero_point is not None else [0] * len(scale))]
            q.quantizedDimension = int(quantized_dimension)
            t.quantization = q
        self.sg.tensors.append(t)
        return len(self.sg.tensors) - 1

    def tensor_shape(self, index: int) -> list[int]:
        t = self.sg.tensors[index]
        return list(t.shapeSignature) if t.shapeSignature else list(t.shape)

    def tensor_type(self, index: int) -> int:
        return self.sg.tensors[index].type

    def op(self, code: int, inputs: Sequence[int], outputs: Sequence[int], opts=None) -> None:
        o = S.OperatorT()
        o.opcodeIndex = self.model.opcode(code)
        o.inputs = [int(i) for i in inputs]
        o.outputs = [int(i) for i in outputs]
        if opts is not None:
            o.builtinOptionsType, o.builtinOptions = opts
        self.sg.operators.append(o)

    def set_io(self, inputs: Sequence[int], outputs: Sequence[int]) -> None:
        self.sg.inputs = [int(i) for i in inputs]
        self.sg.outputs = [int(i) for i in outputs]


class FlatModel:
    """A whole .tflite model: subgraph 0 is the one the interpreter runs."""

    def __init__(self, description: str = "nnconform"):
        self.description = description
        self.subgraphs: list[SubgraphWriter] = []
        self._buffers: list[bytes] = [b""]
        self._opcodes: list[int] = []

    def subgraph(self, name: str) -> SubgraphWriter:
        sw = SubgraphWriter(self, name)
        self.subgraphs.append(sw)
        return sw

    def buffer(self, raw: bytes) -> int:
        self._buffers.append(raw)
        return len(self._buffers) - 1

    def opcode(self, code: int) -> int:
        if code not in self._opcodes:
            self._opcodes.append(code)
        return self._opcodes.index(code)

    def to_bytes(self) -> bytes:
        m = S.ModelT()
        m.version = _SCHEMA_VERSION
        m.description = self.description
        m.operatorCodes = []
        for code in self._opcodes:
            oc = S.OperatorCodeT()
            oc.builtinCode = code
            oc.deprecatedBuiltinCode = min(code, _PLACEHOLDER_FOR_GREATER_OP_CODES)
            oc.version = 1
            m.operatorCodes.append(oc)
        m.subgraphs = [s.sg for s in self.subgraphs]
        m.buffers = []
        for raw in self._buffers:
            b = _AlignedBuffer()
            b.data = raw if raw else None
            m.buffers.append(b)
        fb = flatbuffers.Builder(1024 + sum(len(b) for b in self._buffers))
        fb.Finish(m.Pack(fb), file_identifier=_FILE_IDENTIFIER)
        return bytes(fb.Output())
