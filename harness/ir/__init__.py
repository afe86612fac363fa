"""Model IR: NNAPI HAL 1.3 operands, operations, subgraphs and models (design contract 1).

Everything here is immutable: a mutation (VTS-style) makes a new object with
``dataclasses.replace``.  Constant values are read-only numpy arrays holding the *stored*
representation (raw integers for quantised types), never dequantised floats.
"""

from __future__ import annotations

import builtins
import dataclasses
import enum
import functools
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np


class OperandType(enum.IntEnum):
    FLOAT32 = 0
    INT32 = 1
    UINT32 = 2
    TENSOR_FLOAT32 = 3
    TENSOR_INT32 = 4
    TENSOR_QUANT8_ASYMM = 5
    BOOL = 6
    TENSOR_QUANT16_SYMM = 7
    TENSOR_FLOAT16 = 8
    TENSOR_BOOL8 = 9
    FLOAT16 = 10
    TENSOR_QUANT8_SYMM_PER_CHANNEL = 11
    TENSOR_QUANT16_ASYMM = 12
    TENSOR_QUANT8_SYMM = 13
    TENSOR_QUANT8_ASYMM_SIGNED = 14
    SUBGRAPH = 15
    OEM = 10000
    TENSOR_OEM_BYTE = 10001


class Lifetime(enum.IntEnum):
    TEMPORARY_VARIABLE = 0
    SUBGRAPH_INPUT = 1
    SUBGRAPH_OUTPUT = 2
    CONSTANT_COPY = 3
    CONSTANT_REFERENCE = 4
    NO_VALUE = 5
    SUBGRAPH = 6


class OperationType(enum.IntEnum):
    ADD = 0
    AVERAGE_POOL_2D = 1
    CONCATENATION = 2
    CONV_2D = 3
    DEPTHWISE_CONV_2D = 4
    DEPTH_TO_SPACE = 5
    DEQUANTIZE = 6
    EMBEDDING_LOOKUP = 7
    FLOOR = 8
    FULLY_CONNECTED = 9
    HASHTABLE_LOOKUP = 10
    L2_NORMALIZATION = 11
    L2_POOL_2D = 12
    LOCAL_RESPONSE_NORMALIZATION = 13
    LOGISTIC = 14
    LSH_PROJECTION = 15
    LSTM = 16
    MAX_POOL_2D = 17
    MUL = 18
    RELU = 19
    RELU1 = 20
    RELU6 = 21
    RESHAPE = 22
    RESIZE_BILINEAR = 23
    RNN = 24
    SOFTMAX = 25
    SPACE_TO_DEPTH = 26
    SVDF = 27
    TANH = 28
    BATCH_TO_SPACE_ND = 29
    DIV = 30
    MEAN = 31
    PAD = 32
    SPACE_TO_BATCH_ND = 33
    SQUEEZE = 34
    STRIDED_SLICE = 35
    SUB = 36
    TRANSPOSE = 37
    ABS = 38
    ARGMAX = 39
    ARGMIN = 40
    AXIS_ALIGNED_BBOX_TRANSFORM = 41
    BIDIRECTIONAL_SEQUENCE_LSTM = 42
    BIDIRECTIONAL_SEQUENCE_RNN = 43
    BOX_WITH_NMS_LIMIT = 44
    CAST = 45
    CHANNEL_SHUFFLE = 46
    DETECTION_POSTPROCESSING = 47
    EQUAL = 48
    EXP = 49
    EXPAND_DIMS = 50
    GATHER = 51
    GENERATE_PROPOSALS = 52
    GREATER = 53
    GREATER_EQUAL = 54
    GROUPED_CONV_2D = 55
    HEATMAP_MAX_KEYPOINT = 56
    INSTANCE_NORMALIZATION = 57
    LESS = 58
    LESS_EQUAL = 59
    LOG = 60
    LOGICAL_AND = 61
    LOGICAL_NOT = 62
    LOGICAL_OR = 63
    LOG_SOFTMAX = 64
    MAXIMUM = 65
    MINIMUM = 66
    NEG = 67
    NOT_EQUAL = 68
    PAD_V2 = 69
    POW = 70
    PRELU = 71
    QUANTIZE = 72
    QUANTIZED_16BIT_LSTM = 73
    RANDOM_MULTINOMIAL = 74
    REDUCE_ALL = 75
    REDUCE_ANY = 76
    REDUCE_MAX = 77
    REDUCE_MIN = 78
    REDUCE_PROD = 79
    REDUCE_SUM = 80
    ROI_ALIGN = 81
    ROI_POOLING = 82
    RSQRT = 83
    SELECT = 84
    SIN = 85
    SLICE = 86
    SPLIT = 87
    SQRT = 88
    TILE = 89
    TOPK_V2 = 90
    TRANSPOSE_CONV_2D = 91
    UNIDIRECTIONAL_SEQUENCE_LSTM = 92
    UNIDIRECTIONAL_SEQUENCE_RNN = 93
    RESIZE_NEAREST_NEIGHBOR = 94
    QUANTIZED_LSTM = 95
    IF = 96
    WHILE = 97
    ELU = 98
    HARD_SWISH = 99
    FILL = 100
    RANK = 101
    BATCH_MATMUL = 102
    PACK = 103
    MIRROR_PAD = 104
    REVERSE = 105
    OEM_OPERATION = 10000


# HAL ranges used by validation (nnapi_facts.md section 8).
OPERAND_TYPE_FUNDAMENTAL_MAX = 15
OPERAND_TYPE_OEM_MIN, OPERAND_TYPE_OEM_MAX = 10000, 10001
OPERATION_TYPE_FUNDAMENTAL_MAX = 105  # we accept the post-1.3 ops 102..105 as well
OPERATION_TYPE_OEM_MIN = OPERATION_TYPE_OEM_MAX = 10000


@dataclass(frozen=True)
class TypeInfo:
    dtype: np.dtype | None  # storage dtype of the values; None for SUBGRAPH
    is_scalar: bool
    is_quant: bool  # carries scale (and maybe zero point)
    is_float: bool
    hal_version: str  # first HAL that has it


_T = OperandType
TYPE_INFO: dict[OperandType, TypeInfo] = {
    _T.FLOAT32: TypeInfo(np.dtype(np.float32), True, False, True, "1.0"),
    _T.INT32: TypeInfo(np.dtype(np.int32), True, False, False, "1.0"),
    _T.UINT32: TypeInfo(np.dtype(np.uint32), True, False, False, "1.0"),
    _T.TENSOR_FLOAT32: TypeInfo(np.dtype(np.float32), False, False, True, "1.0"),
    _T.TENSOR_INT32: TypeInfo(np.dtype(np.int32), False, False, False, "1.0"),
    _T.TENSOR_QUANT8_ASYMM: TypeInfo(np.dtype(np.uint8), False, True, False, "1.0"),
    _T.BOOL: TypeInfo(np.dtype(np.bool_), True, False, False, "1.2"),
    _T.TENSOR_QUANT16_SYMM: TypeInfo(np.dtype(np.int16), False, True, False, "1.2"),
    _T.TENSOR_FLOAT16: TypeInfo(np.dtype(np.float16), False, False, True, "1.2"),
    _T.TENSOR_BOOL8: TypeInfo(np.dtype(np.bool_), False, False, False, "1.2"),
    _T.FLOAT16: TypeInfo(np.dtype(np.float16), True, False, True, "1.2"),
    _T.TENSOR_QUANT8_SYMM_PER_CHANNEL: TypeInfo(np.dtype(np.int8), False, False, False, "1.2"),
    _T.TENSOR_QUANT16_ASYMM: TypeInfo(np.dtype(np.uint16), False, True, False, "1.2"),
    _T.TENSOR_QUANT8_SYMM: TypeInfo(np.dtype(np.int8), False, True, False, "1.2"),
    _T.TENSOR_QUANT8_ASYMM_SIGNED: TypeInfo(np.dtype(np.int8), False, True, False, "1.3"),
    _T.SUBGRAPH: TypeInfo(None, True, False, False, "1.3"),
    _T.OEM: TypeInfo(np.dtype(np.uint8), True, False, False, "1.0"),
    _T.TENSOR_OEM_BYTE: TypeInfo(np.dtype(np.uint8), False, False, False, "1.0"),
}

# Zero-point ranges for quantised types (anything else must have zero point 0).
ZERO_POINT_RANGE: dict[OperandType, tuple[int, int]] = {
    _T.TENSOR_QUANT8_ASYMM: (0, 255),
    _T.TENSOR_QUANT8_ASYMM_SIGNED: (-128, 127),
    _T.TENSOR_QUANT16_ASYMM: (0, 65535),
}

# Short names used in test ids, reports and the conformance matrix.
SHORT_TYPE_NAME: dict[OperandType, str] = {
    _T.TENSOR_FLOAT32: "fp32",
    _T.TENSOR_FLOAT16: "fp16",
    _T.TENSOR_INT32: "int32",
    _T.TENSOR_QUANT8_ASYMM: "quant8",
    _T.TENSOR_QUANT8_ASYMM_SIGNED: "quant8_signed",
    _T.TENSOR_QUANT8_SYMM: "quant8_symm",
    _T.TENSOR_QUANT8_SYMM_PER_CHANNEL: "quant8_per_channel",
    _T.TENSOR_QUANT16_SYMM: "quant16_symm",
    _T.TENSOR_QUANT16_ASYMM: "quant16_asymm",
    _T.TENSOR_BOOL8: "bool8",
    _T.FLOAT32: "fp32_scalar",
    _T.INT32: "int32_scalar",
    _T.FLOAT16: "fp16_scalar",
    _T.BOOL: "bool_scalar",
    _T.UINT32: "uint32_scalar",
}


# TYPE_INFO itself, for lookups by a plain int code (an IntEnum key matches its int value)
_TYPE_INFO_BY_CODE: dict[Any, TypeInfo] = TYPE_INFO


def type_info(t: OperandType | int) -> TypeInfo:
    info = _TYPE_INFO_BY_CODE.get(t)
    if info is not None:
        return info
    try:
        return TYPE_INFO[OperandType(t)]
    except ValueError:
        raise KeyError(f"unknown operand type code {t}") from None


def element_count(dims: Sequence[int]) -> int:
    n = 1
    for d in dims:
        n *= int(d)
    return n


@dataclass(frozen=True)
class ChannelQuant:
    """Per-channel symmetric quantisation (TENSOR_QUANT8_SYMM_PER_CHANNEL)."""

    scales: tuple[float, ...]
    channel_dim: int


def _frozen_array(value: Any, dtype: np.dtype | None) -> np.ndarray | None:
    if value is None:
        return None
    arr = np.array(value, dtype=dtype, copy=True)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class Operand:
    """One operand of a subgraph.

    ``dimensions``: a 0 entry is an unknown dimension; ``()`` on a tensor is an unknown rank
    (scalars always have ``()``).  ``value`` is set for CONSTANT_* lifetimes (a read-only
    array in the type's storage dtype, shaped like the operand) and, for SUBGRAPH operands,
    holds the index of the referenced subgraph.
    """

    type: OperandType
    dimensions: tuple[int, ...] = ()
    scale: float = 0.0
    zero_point: int = 0
    lifetime: Lifetime = Lifetime.TEMPORARY_VARIABLE
    value: np.ndarray | int | None = None
    channel_quant: ChannelQuant | None = None
    name: str = ""
    # HAL's numberOfConsumers.  None means "derive it"; a number is checked by validation
    # (VTS mutates it to see that drivers reject a wrong count).
    num_consumers: int | None = None

    @functools.cached_property
    def info(self) -> TypeInfo:
        # cached: operations read it several times per execution (a hot path)
        return type_info(self.type)

    @property
    def is_constant(self) -> bool:
        return self.lifetime in (Lifetime.CONSTANT_COPY, Lifetime.CONSTANT_REFERENCE)

    @property
    def is_omitted(self) -> bool:
        return self.lifetime == Lifetime.NO_VALUE

    @property
    def rank(self) -> int:
        return len(self.dimensions)

    @property
    def fully_specified(self) -> bool:
        if self.info.is_scalar:
            return True
        return len(self.dimensions) > 0 and all(d > 0 for d in self.dimensions)

    def with_dims(self, dims: Iterable[int]) -> "Operand":
        return dataclasses.replace(self, dimensions=tuple(int(d) for d in dims))

    def describe(self) -> str:
        q = ""
        if self.info.is_quant:
            q = f" scale={self.scale:g} zp={self.zero_point}"
        if self.channel_quant is not None:
            q = f" per-channel dim={self.channel_quant.channel_dim}"
        return f"{self.type.name}{list(self.dimensions)}{q}"


@dataclass(frozen=True)
class Operation:
    type: OperationType | int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]

    @property
    def name(self) -> str:
        try:
            return OperationType(self.type).name
        except ValueError:
            return f"operation type {int(self.type)}"


@dataclass(frozen=True, eq=False)
class Subgraph:
    operands: tuple[Operand, ...]
    operations: tuple[Operation, ...]
    input_indexes: tuple[int, ...]
    output_indexes: tuple[int, ...]
    name: str = ""


@dataclass(frozen=True, eq=False)
class Model:
    main: Subgraph
    referenced: tuple[Subgraph, ...] = ()
    relax_fp32_to_fp16: bool = False

    def subgraphs(self) -> tuple[Subgraph, ...]:
        return (self.main, *self.referenced)

    def all_operations(self) -> list[Operation]:
        return [op for sg in self.subgraphs() for op in sg.operations]

    def operation_names(self) -> list[str]:
        return sorted({op.name for op in self.all_operations()})

    def uses_fp16(self) -> bool:
        return any(
            o.type in (OperandType.TENSOR_FLOAT16, OperandType.FLOAT16) for sg in self.subgraphs() for o in sg.operands
        )

    def data_types(self) -> list[str]:
        """Short names of the tensor types of the main graph's inputs and outputs."""
        names = []
        for i in (*self.main.input_indexes, *self.main.output_indexes):
            n = SHORT_TYPE_NAME.get(self.main.operands[i].type, self.main.operands[i].type.name)
            if n not in names:
                names.append(n)
        if self.relax_fp32_to_fp16:
            names.append("relaxed")
        return names


# ---------------------------------------------------------------------------------------
# Requests (what an execution is asked to do).
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class RequestArgument:
    """One input or output of an execution.

    For inputs ``value`` holds the data (stored representation).  ``dimensions`` (optional)
    specifies dims the model left unknown; for outputs, ``capacity`` is the size of the
    caller's buffer in bytes (None: exactly what the output needs).  ``has_no_value``
    omits an optional input.  ``memory`` is the token of a driver-managed buffer
    (``nnconform.driver.MemoryDomains.allocate``) that holds the input or receives the output,
    HAL's Request.MemoryPool token; ``value`` and ``capacity`` are then unset.

    ``buffer`` is set by the harness on outputs it placed in a memory pool: a writable view of
    the output's region (shaped when the dimensions are known, flat otherwise).  A driver may
    write the output there and return that view (as a native runtime writes through the
    pointer it is given), or ignore it and return its own array.  Inputs placed in a pool
    come as read-only ``value`` views.
    """

    value: np.ndarray | None = None
    dimensions: tuple[int, ...] | None = None
    capacity: int | None = None
    has_no_value: bool = False
    memory: int | None = None
    buffer: Any = None


@dataclass(frozen=True, eq=False)
class Request:
    inputs: tuple[RequestArgument, ...]
    outputs: tuple[RequestArgument, ...]

    @staticmethod
    def from_arrays(model: Model, inputs: Sequence[Any]) -> "Request":
        """The common case: one array per main-graph input, outputs sized by the model."""
        args = []
        for idx, v in zip(model.main.input_indexes, inputs):
            op = model.main.operands[idx]
            if v is None:
                args.append(RequestArgument(has_no_value=True))
                continue
            arr = np.asarray(v, dtype=op.info.dtype)
            args.append(RequestArgument(value=arr, dimensions=tuple(arr.shape)))
        if len(inputs) != len(model.main.input_indexes):
            raise ValueError(f"model has {len(model.main.input_indexes)} inputs, got {len(inputs)} values")
        outs = tuple(RequestArgument() for _ in model.main.output_indexes)
        return Request(tuple(args), outs)


# ---------------------------------------------------------------------------------------
# Builder: a model in a few readable lines.
# ---------------------------------------------------------------------------------------


class ModelBuilder:
    """Builds one subgraph (and, through ``subgraph()``, referenced ones).

    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [1, 2])
    y = b.output(T.TENSOR_FLOAT32, [1, 2])
    b.operation(Op.ADD, [x, b.const(T.TENSOR_FLOAT32, [1, 2], [1, 2]), b.i32(0)], [y])
    model = b.build()
    """

    def __init__(self, name: str = "main", _root: "ModelBuilder | None" = None):
        self.name = name
        self._operands: list[Operand] = []
        self._operations: list[Operation] = []
        self._inputs: list[int] = []
        self._outputs: list[int] = []
        self._root = _root if _root is not None else self
        self._referenced: list[ModelBuilder] = [] if _root is None else _root._referenced

    # operands --------------------------------------------------------------------
    def operand(
        self,
        type: OperandType,
        dims: Sequence[int] = (),
        *,
        scale: float = 0.0,
        zero_point: int = 0,
        lifetime: Lifetime = Lifetime.TEMPORARY_VARIABLE,
        value: Any = None,
        channel_quant: ChannelQuant | None = None,
        name: str = "",
    ) -> int:
        type = OperandType(type)
        dims = tuple(int(d) for d in dims)
        if value is not None and type != OperandType.SUBGRAPH:
            info = type_info(type)
            arr = np.asarray(value)
            if info.is_scalar:
                arr = arr.reshape(())
            elif arr.size == element_count(dims):
                arr = arr.reshape(dims)
            value = _frozen_array(arr, info.dtype)
        idx = len(self._operands)
        self._operands.append(
            Operand(
                type, dims, float(scale), int(zero_point), Lifetime(lifetime), value, channel_quant, name or f"op{idx}"
            )
        )
        return idx

    def input(self, type: OperandType, dims: Sequence[int] = (), **kw: Any) -> int:
        i = self.operand(type, dims, lifetime=Lifetime.SUBGRAPH_INPUT, **kw)
        self._inputs.append(i)
        return i

    def output(self, type: OperandType, dims: Sequence[int] = (), **kw: Any) -> int:
        i = self.operand(type, dims, lifetime=Lifetime.SUBGRAPH_OUTPUT, **kw)
        self._outputs.append(i)
        return i

    def temp(self, type: OperandType, dims: Sequence[int] = (), **kw: Any) -> int:
        return self.operand(type, dims, lifetime=Lifetime.TEMPORARY_VARIABLE, **kw)

    def const(self, type: OperandType, dims: Sequence[int], value: Any, **kw: Any) -> int:
        return self.operand(type, dims, lifetime=Lifetime.CONSTANT_COPY, value=value, **kw)

    def omitted(self, type: OperandType, dims: Sequence[int] = ()) -> int:
        return self.operand(type, dims, lifetime=Lifetime.NO_VALUE)

    def i32(self, v: int) -> int:
        return self.const(OperandType.INT32, (), v)

    def f32(self, v: float) -> int:
        return self.const(OperandType.FLOAT32, (), v)

    def f16(self, v: float) -> int:
        return self.const(OperandType.FLOAT16, (), v)

    def bool(self, v: bool) -> int:
        return self.const(OperandType.BOOL, (), v)

    def subgraph_ref(self, sub: "ModelBuilder") -> int:
        index = 1 + self._referenced.index(sub)  # 0 is main; values index `referenced`
        return self.operand(OperandType.SUBGRAPH, (), lifetime=Lifetime.SUBGRAPH, value=index - 1)

    def subgraph(self, name: str) -> "ModelBuilder":
        sb = ModelBuilder(name, _root=self._root)
        self._referenced.append(sb)
        return sb

    # operations ------------------------------------------------------------------
    def operation(self, type: OperationType, inputs: Sequence[int], outputs: Sequence[int]) -> None:
        self._operations.append(Operation(OperationType(type), tuple(inputs), tuple(outputs)))

    def identify(self, inputs: Sequence[int], outputs: Sequence[int]) -> None:
        """Explicitly set I/O order (default: order of creation)."""
        self._inputs, self._outputs = list(inputs), list(outputs)

    def build_subgraph(self) -> Subgraph:
        return Subgraph(
            tuple(self._operands), tuple(self._operations), tuple(self._inputs), tuple(self._outputs), self.name
        )

    # builtins.bool: the method bool() above shadows the name in this class's scope
    def build(self, relaxed: builtins.bool = False) -> Model:
        if self._root is not self:
            raise ValueError("build() the root builder, not a subgraph builder")
        return Model(self.build_subgraph(), tuple(s.build_subgraph() for s in self._referenced), relaxed)
