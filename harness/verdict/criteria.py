"""Accuracy criteria: is a driver's output close enough to the reference? (design contract 5)

``compare(model, expected, actual, criteria=None, ignored=None, quant8_atol=1) -> Comparison``

``expected`` and ``actual`` are lists of numpy arrays, one per main-graph output, in the
*stored* representation (raw integers for quantised types, never dequantised).  The result is
never an exception: a wrong number of outputs, a wrong shape or a wrong dtype is a Mismatch
like any out-of-tolerance element.

Rules (AOSP ``test_harness/TestHarness.cpp``, see nnapi_facts.md section 1):

* Element check, in float64: an element fails if ``|a - e| > atol + rtol * |e|``.  A NaN
  expected value always fails (the reference must not produce NaN).  A NaN actual value fails.
  Exactly equal values always pass (so an expected +inf matched by +inf passes; gtest's
  EXPECT_NEAR would have flagged it, which helps nobody), and an infinite expected value
  needs exactly that infinity (AOSP's range atol + rtol*inf would accept any number).
* bias / mse (random-graph sets only; off = +inf): ``diff = a - e``, for float types divided
  by ``max(1, |e|)``; needs ``|mean(diff)| <= bias`` and ``mean(diff**2) <= mse``.  Only
  checked when at least 10 elements were compared (not skipped).
* TENSOR_BOOL8 (and BOOL): the number of differing elements must be ``<= ceil(ratio * n)``.
* ``ignored[i]`` True skips output ``i`` (the spec's IgnoredOutput).

Default criteria (``default_criteria(model)``, AOSP's ``checkResults(model, buffers)``):

====================================  ==========  ==========
type                                  atol        rtol
====================================  ==========  ==========
TENSOR_FLOAT32 / FLOAT32              1e-5        5 * 2**-23   (the fp16 row if the model is
                                                                relaxed or has fp16 operands)
TENSOR_FLOAT16 / FLOAT16              5 * 2**-10  5 * 2**-10
TENSOR_INT32 / INT32                  1           0
TENSOR_QUANT8_ASYMM / _SIGNED / SYMM  1 (or 3)    0            (``quant8_atol=3`` is what CTS
                                                                uses for mobilenet and caching)
TENSOR_QUANT16_ASYMM / SYMM           1           0
TENSOR_BOOL8 / BOOL                   ratio 0
====================================  ==========  ==========

Random-graph criteria sets (nnapi_facts.md section 2, AOSP ``TestRandomGraph.cpp``):
``STRICT``, ``MEDIUM``, ``RELAXED``, ``CONV``, ``SMALL_GRAPH``, ``LARGE_GRAPH``;
``criteria_for_operation(op, hal_version)`` gives the set a single-operation test uses.

fp16 outputs are really checked.  AOSP's ``allowInvalidFpValues`` skip test reads
``isinf(e) || (f32 && |e| > 1e3) || (fp16 || |e| > 1e2)``: the ``||`` where ``&&`` was
meant makes CTS skip *every* fp16 element (and every |e| > 100) of random-graph tests, so
those never check fp16 accuracy.  We do not reproduce that.  ``Criteria.skip_invalid_fp``
(default False; True in the random-graph sets, as in AOSP) skips what was intended: expected
infinities, fp32 values with |e| > 1e3 and fp16 values with |e| > 1e2.

Exact where NNAPI defines the result exactly (issue 20; ``Criteria.exact_where_defined``,
default True).  CTS compares every int32 output with atol 1 and every bool8 output of a
random graph with a 10 % mismatch ratio, so an index off by one or an integer division that
rounds the wrong way passes.  :func:`exact_outputs` finds the outputs whose value NNAPI
defines exactly: an output of a non-relaxed model computed from the model's inputs and
constants only through operations that select, move, compare or do integer arithmetic
(``EXACT_ANY`` on any non-quantised type: data movement, SELECT, comparisons, logical ops,
ARGMAX/ARGMIN/TOPK_V2, REDUCE_MAX/MIN/ALL/ANY, MAXIMUM/MINIMUM, RELU/RELU1/RELU6, ABS, NEG,
FLOOR, CAST, FILL, RANK; ``EXACT_INT32`` when the result is TENSOR_INT32: ADD, SUB, MUL, DIV,
BATCH_MATMUL), including IF/WHILE outputs whose branches / body are exact (loop counters).
Quantised operands count only where nothing is rescaled (one scale and zero point over the
operation's quantised operands) and for ARGMAX/ARGMIN indices.  Such an output must be equal element by
element (int32 and floats: a == e, NaN == NaN; bool8: no mismatch); the criterion is named
``<set>.<row>.exact``.  The CTS tolerance stays available as a compatibility mode:
``Criteria.cts_compatible()``, or ``NNCONFORM_CTS_TOLERANCE=1`` in the environment for a
whole run.

Extensions beyond AOSP, which fails them as "data type not supported": scalar FLOAT32,
FLOAT16, INT32 and BOOL outputs use the row of their tensor type.  UINT32, OEM and per-channel
outputs cannot be compared and give a Mismatch.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Sequence, cast

import numpy as np

from nnconform.ir import Model, OperandType, Operation, OperationType, Subgraph, type_info

INF = math.inf
_T = OperandType

FP32_ULP = 2.0**-23
FP16_ULP = 2.0**-10
MIN_ELEMENTS_FOR_BIAS_MSE = 10


@dataclass(frozen=True)
class Tolerance:
    """One row of a criteria set. bias / mse of +inf mean "not checked"."""

    atol: float
    rtol: float = 0.0
    bias: float = INF
    mse: float = INF

    def to_dict(self) -> dict[str, Any]:
        return {k: _json_number(v) for k, v in dataclasses.asdict(self).items()}


@dataclass(frozen=True)
class Criteria:
    """A full criteria set: one Tolerance row per type family, plus the bool8 mismatch ratio."""

    name: str
    float32: Tolerance
    float16: Tolerance
    int32: Tolerance = Tolerance(atol=1)
    quant8_asymm: Tolerance = Tolerance(atol=1)
    quant8_asymm_signed: Tolerance = Tolerance(atol=1)
    quant8_symm: Tolerance = Tolerance(atol=1)
    quant16_asymm: Tolerance = Tolerance(atol=1)
    quant16_symm: Tolerance = Tolerance(atol=1)
    bool8_ratio: float = 0.0
    skip_invalid_fp: bool = False
    exact_where_defined: bool = True

    def cts_compatible(self) -> "Criteria":
        """CTS's tolerances everywhere (int32 atol 1, the set's bool8 ratio), no exact outputs."""
        return dataclasses.replace(self, exact_where_defined=False)

    def row_name(self, t: OperandType) -> str | None:
        """Which field applies to an output of type ``t`` (None: type cannot be compared)."""
        return _ROW_OF_TYPE.get(OperandType(t))

    def tolerance(self, t: OperandType) -> Tolerance | None:
        row = self.row_name(t)
        if row is None or row == "bool8":
            return None
        tol: Tolerance = getattr(self, row)
        return tol

    def with_quant8_atol(self, atol: float) -> "Criteria":
        return dataclasses.replace(
            self,
            quant8_asymm=dataclasses.replace(self.quant8_asymm, atol=atol),
            quant8_asymm_signed=dataclasses.replace(self.quant8_asymm_signed, atol=atol),
            quant8_symm=dataclasses.replace(self.quant8_symm, atol=atol),
        )

    def relaxed(self) -> "Criteria":
        """fp32 outputs judged by the fp16 row (a relaxed or fp16-carrying model)."""
        return dataclasses.replace(self, name=f"{self.name}+relaxed", float32=self.float16)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, Tolerance):
                d[f.name] = v.to_dict()
        d["bool8_ratio"] = self.bool8_ratio
        d["skip_invalid_fp"] = self.skip_invalid_fp
        d["exact_where_defined"] = self.exact_where_defined
        return d


_ROW_OF_TYPE: dict[OperandType, str] = {
    _T.TENSOR_FLOAT32: "float32",
    _T.FLOAT32: "float32",
    _T.TENSOR_FLOAT16: "float16",
    _T.FLOAT16: "float16",
    _T.TENSOR_INT32: "int32",
    _T.INT32: "int32",
    _T.TENSOR_QUANT8_ASYMM: "quant8_asymm",
    _T.TENSOR_QUANT8_ASYMM_SIGNED: "quant8_asymm_signed",
    _T.TENSOR_QUANT8_SYMM: "quant8_symm",
    _T.TENSOR_QUANT16_ASYMM: "quant16_asymm",
    _T.TENSOR_QUANT16_SYMM: "quant16_symm",
    _T.TENSOR_BOOL8: "bool8",
    _T.BOOL: "bool8",
}
_FLOAT_TYPES = {_T.TENSOR_FLOAT32, _T.FLOAT32, _T.TENSOR_FLOAT16, _T.FLOAT16}


# ---------------------------------------------------------------------------------------
# The criteria sets.
# ---------------------------------------------------------------------------------------

_FP32_DEFAULT = Tolerance(atol=1e-5, rtol=5 * FP32_ULP)
_FP16_DEFAULT = Tolerance(atol=5 * FP16_ULP, rtol=5 * FP16_ULP)

DEFAULT = Criteria(name="default", float32=_FP32_DEFAULT, float16=_FP16_DEFAULT)


def _random_set(
    name: str, f32: tuple[float, float, float], f16: tuple[float, float, float], quant: tuple[float, float, float]
) -> Criteria:
    """Rows given as (bias, mse, atol); float rows use rtol = atol, quant rows rtol = 0."""
    fb, fm, fa = f32
    hb, hm, ha = f16
    qb, qm, qa = quant
    q = Tolerance(atol=qa, rtol=0.0, bias=qb, mse=qm)
    return Criteria(
        name=name,
        float32=Tolerance(atol=fa, rtol=fa, bias=fb, mse=fm),
        float16=Tolerance(atol=ha, rtol=ha, bias=hb, mse=hm),
        int32=Tolerance(atol=1),
        quant8_asymm=q,
        quant8_asymm_signed=q,
        quant8_symm=q,
        quant16_asymm=q,
        quant16_symm=q,
        bool8_ratio=0.1,
        skip_invalid_fp=True,
    )


STRICT = _random_set("Strict", (1e-7, 1e-10, 1e-6), (1e-4, 1e-8, 1e-3), (0.1, 0.1, 1))
MEDIUM = _random_set("Medium", (1e-6, 1e-8, 1e-5), (1e-3, 1e-5, 1e-2), (1.2, 1.2, 2))
RELAXED = _random_set("Relaxed", (3e-5, 1e-6, 1e-3), (5e-3, 1e-3, 1.0), (1.5, 1.5, 10))
CONV = _random_set("Conv", (4e-4, 1e-5, 2e-2), (5e-2, 1e-2, 1.0), (1.5, 1.5, 10))
SMALL_GRAPH = _random_set("SmallGraph", (4e-4, 1e-5, 1e-2), (5e-2, 1e-2, 1.0), (2, 2, 12))
LARGE_GRAPH = _random_set("LargeGraph", (1e-2, 1e-4, 1e-1), (1e-1, 5e-2, 1.0), (2, 2, 12))

RANDOM_GRAPH_SETS: dict[str, Criteria] = {c.name: c for c in (STRICT, MEDIUM, RELAXED, CONV, SMALL_GRAPH, LARGE_GRAPH)}

_O = OperationType
# The single-operation random tests' set per operation (TestRandomGraph.cpp).
_OP_SET: dict[OperationType, Criteria] = {}
for _op in (
    _O.DEPTH_TO_SPACE,
    _O.SPACE_TO_DEPTH,
    _O.EMBEDDING_LOOKUP,
    _O.HASHTABLE_LOOKUP,
    _O.RESHAPE,
    _O.BATCH_TO_SPACE_ND,
    _O.SPACE_TO_BATCH_ND,
    _O.PAD,
    _O.PAD_V2,
    _O.TRANSPOSE,
    _O.SQUEEZE,
    _O.STRIDED_SLICE,
    _O.ARGMAX,
    _O.ARGMIN,
    _O.EQUAL,
    _O.GREATER,
    _O.GREATER_EQUAL,
    _O.LESS,
    _O.LESS_EQUAL,
    _O.NOT_EQUAL,
    _O.LOGICAL_AND,
    _O.LOGICAL_NOT,
    _O.LOGICAL_OR,
    _O.CHANNEL_SHUFFLE,
    _O.EXPAND_DIMS,
    _O.TILE,
    _O.GATHER,
    _O.SELECT,
    _O.TOPK_V2,
    _O.SLICE,
    _O.FILL,
    _O.RANK,
):
    _OP_SET[_op] = STRICT
for _op in (
    _O.ADD,
    _O.MUL,
    _O.SUB,
    _O.FLOOR,
    _O.RELU,
    _O.RELU1,
    _O.RELU6,
    _O.CONCATENATION,
    _O.DEQUANTIZE,
    _O.QUANTIZE,
    _O.CAST,
    _O.ABS,
    _O.NEG,
    _O.MAXIMUM,
    _O.MINIMUM,
    _O.PRELU,
    _O.SPLIT,
    _O.ELU,
    _O.HARD_SWISH,
):
    _OP_SET[_op] = MEDIUM
for _op in (
    _O.LOGISTIC,
    _O.TANH,
    _O.SOFTMAX,
    _O.LOG_SOFTMAX,
    _O.L2_NORMALIZATION,
    _O.LOCAL_RESPONSE_NORMALIZATION,
    _O.INSTANCE_NORMALIZATION,
    _O.AVERAGE_POOL_2D,
    _O.L2_POOL_2D,
    _O.MAX_POOL_2D,
    _O.RESIZE_BILINEAR,
    _O.RESIZE_NEAREST_NEIGHBOR,
    _O.FULLY_CONNECTED,
    _O.DIV,
    _O.MEAN,
    _O.EXP,
    _O.LOG,
    _O.RSQRT,
    _O.SQRT,
    _O.SIN,
    _O.POW,
    _O.REDUCE_ALL,
    _O.REDUCE_ANY,
    _O.REDUCE_MAX,
    _O.REDUCE_MIN,
    _O.REDUCE_PROD,
    _O.REDUCE_SUM,
    _O.ROI_ALIGN,
    _O.ROI_POOLING,
    _O.HEATMAP_MAX_KEYPOINT,
):
    _OP_SET[_op] = RELAXED
for _op in (_O.CONV_2D, _O.DEPTHWISE_CONV_2D, _O.GROUPED_CONV_2D, _O.TRANSPOSE_CONV_2D):
    _OP_SET[_op] = CONV
del _op


def criteria_for_operation(
    op: OperationType | int | str, hal_version: str = "1.3", default: Criteria | None = None
) -> Criteria:
    """The random-graph criteria set of a single-operation test of ``op``.

    DIV is the one operation whose set depends on the HAL version of the signature: Relaxed
    for the V1_1/V1_2 signatures, Medium for V1_3.  Operations the random generator does not
    cover (LSTM, IF, ...) raise KeyError unless ``default`` is given.
    """
    if isinstance(op, str):
        try:
            op = OperationType[op]
        except KeyError:
            raise KeyError(f"unknown operation name {op!r}") from None
    else:
        try:
            op = OperationType(op)
        except ValueError:
            raise KeyError(f"unknown operation type {op}") from None
    if op == _O.DIV and str(hal_version).replace("V", "").replace("_", ".") in ("1.3",):
        return MEDIUM
    found = _OP_SET.get(op)
    if found is not None:
        return found
    if default is not None:
        return default
    raise KeyError(f"no random-graph criteria set for {op.name} (the random graph generator does not cover it)")


def default_criteria(model: Model, quant8_atol: float = 1) -> Criteria:
    """AOSP's checkResults defaults for ``model`` (relaxed / fp16 switching, quant8 atol)."""
    crit = DEFAULT
    if model.relax_fp32_to_fp16 or model.uses_fp16():
        crit = crit.relaxed()
    if quant8_atol != 1:
        crit = crit.with_quant8_atol(quant8_atol)
    return crit


# ---------------------------------------------------------------------------------------
# Outputs NNAPI defines exactly.
# ---------------------------------------------------------------------------------------

EXACT_ANY = frozenset(
    (
        _O.RESHAPE,
        _O.SQUEEZE,
        _O.EXPAND_DIMS,
        _O.TRANSPOSE,
        _O.CONCATENATION,
        _O.GATHER,
        _O.SLICE,
        _O.STRIDED_SLICE,
        _O.TILE,
        _O.REVERSE,
        _O.PACK,
        _O.SPLIT,
        _O.PAD,
        _O.PAD_V2,
        _O.MIRROR_PAD,
        _O.DEPTH_TO_SPACE,
        _O.SPACE_TO_DEPTH,
        _O.BATCH_TO_SPACE_ND,
        _O.SPACE_TO_BATCH_ND,
        _O.CHANNEL_SHUFFLE,
        _O.SELECT,
        _O.EMBEDDING_LOOKUP,
        _O.EQUAL,
        _O.NOT_EQUAL,
        _O.GREATER,
        _O.GREATER_EQUAL,
        _O.LESS,
        _O.LESS_EQUAL,
        _O.LOGICAL_AND,
        _O.LOGICAL_OR,
        _O.LOGICAL_NOT,
        _O.ARGMAX,
        _O.ARGMIN,
        _O.TOPK_V2,
        _O.REDUCE_MAX,
        _O.REDUCE_MIN,
        _O.REDUCE_ALL,
        _O.REDUCE_ANY,
        _O.MAXIMUM,
        _O.MINIMUM,
        _O.RELU,
        _O.RELU1,
        _O.RELU6,
        _O.ABS,
        _O.NEG,
        _O.FLOOR,
        _O.CAST,
        _O.FILL,
        _O.RANK,
    )
)
EXACT_INT32 = frozenset((_O.ADD, _O.SUB, _O.MUL, _O.DIV, _O.BATCH_MATMUL))
_QUANT_KINDS = frozenset(
    (
        _T.TENSOR_QUANT8_ASYMM,
        _T.TENSOR_QUANT8_ASYMM_SIGNED,
        _T.TENSOR_QUANT8_SYMM,
        _T.TENSOR_QUANT16_ASYMM,
        _T.TENSOR_QUANT16_SYMM,
    )
)
_EXACT_KINDS = frozenset(
    (
        _T.TENSOR_FLOAT32,
        _T.FLOAT32,
        _T.TENSOR_FLOAT16,
        _T.FLOAT16,
        _T.TENSOR_INT32,
        _T.INT32,
        _T.TENSOR_BOOL8,
        _T.BOOL,
        _T.SUBGRAPH,
    )
)


def _subgraph_exact(model: Model, sg: Subgraph, inputs_exact: list[bool], depth: int = 0) -> list[bool]:
    """Which outputs of ``sg`` are exact, given which of its inputs are."""
    exact = [o.lifetime in (3, 4, 5, 6) for o in sg.operands]  # constants, omitted, subgraphs
    for i, e in zip(sg.input_indexes, inputs_exact):
        exact[i] = e
    for op in sg.operations:
        outs = [sg.operands[o] for o in op.outputs]
        quant = {
            (sg.operands[i].scale, sg.operands[i].zero_point)
            for i in (*op.inputs, *op.outputs)
            if sg.operands[i].type in _QUANT_KINDS
        }
        # quantised operands count when nothing is rescaled (one scale and zero point
        # throughout), and for ARGMAX/ARGMIN (dequantising is monotonic)
        kinds = _EXACT_KINDS | (_QUANT_KINDS if len(quant) <= 1 or op.type in (_O.ARGMAX, _O.ARGMIN) else frozenset())
        ins_ok = all(exact[i] and sg.operands[i].type in kinds for i in op.inputs)
        if op.type in (_O.IF, _O.WHILE) and depth < 8:
            res = _control_flow_exact(model, sg, op, exact, depth)
        elif op.type == _O.RANK:
            res = [True]
        elif ins_ok and op.type in EXACT_ANY:
            res = [o.type in kinds for o in outs]
        elif ins_ok and op.type in EXACT_INT32:
            res = [o.type in (_T.TENSOR_INT32, _T.INT32) for o in outs]
        else:
            res = [False] * len(outs)
        for o, r in zip(op.outputs, res):
            exact[o] = bool(r)
    return [exact[i] for i in sg.output_indexes]


def _control_flow_exact(model: Model, sg: Subgraph, op: Operation, exact: list[bool], depth: int) -> list[bool]:
    # a SUBGRAPH operand's value (not None: filtered) is its index into referenced
    refs = [
        model.referenced[int(cast("np.ndarray | int", sg.operands[i].value))]
        for i in op.inputs
        if sg.operands[i].type == _T.SUBGRAPH
        and sg.operands[i].value is not None
        and 0 <= int(cast("np.ndarray | int", sg.operands[i].value)) < len(model.referenced)
    ]
    data = [exact[i] and sg.operands[i].type in _EXACT_KINDS for i in op.inputs if sg.operands[i].type != _T.SUBGRAPH]
    n_out = len(op.outputs)
    if op.type == _O.IF:
        if len(refs) != 2 or not data:
            return [False] * n_out
        cond, args = data[0], data[1:]
        a = _subgraph_exact(model, refs[0], args, depth + 1)
        b = _subgraph_exact(model, refs[1], args, depth + 1)
        return [cond and x and y for x, y in zip(a, b)][:n_out] + [False] * max(0, n_out - len(a))
    if len(refs) != 2:
        return [False] * n_out
    cond_sg, body = refs
    state = list(data)
    for _ in range(len(state) + 1):  # fixed point: a variable stays exact only if the body keeps it so
        outs = _subgraph_exact(model, body, state, depth + 1)
        cond_ok = all(_subgraph_exact(model, cond_sg, state, depth + 1))
        new = [
            s and (o if j < len(outs) else True) and cond_ok
            for j, (s, o) in enumerate(zip(state, outs + [True] * (len(state) - len(outs))))
        ]
        if new == state:
            break
        state = new
    return (state[:n_out] + [False] * n_out)[:n_out]


def exact_outputs(model: Model) -> list[bool]:
    """For each main output: does NNAPI define its value exactly (see the module docstring)?"""
    m = model.main
    if model.relax_fp32_to_fp16:
        res = _subgraph_exact(model, m, [True] * len(m.input_indexes))
        return [r and m.operands[i].type not in (_T.TENSOR_FLOAT32, _T.FLOAT32) for r, i in zip(res, m.output_indexes)]
    return _subgraph_exact(model, m, [True] * len(m.input_indexes))


def _cts_tolerance_env() -> bool:
    import os

    return os.environ.get("NNCONFORM_CTS_TOLERANCE", "").strip() not in ("", "0")


# ---------------------------------------------------------------------------------------
# Results.
# ---------------------------------------------------------------------------------------


@dataclass
class Mismatch:
    """Why one output failed.

    ``kind``: "element" (an element out of tolerance; the first one in C order is recorded),
    "nan_expected", "bias", "mse", "bool_ratio", "shape", "dtype", "count", "unsupported_type".
    Element fields are None for the whole-output kinds.  The statistics (max_abs_error,
    max_ulp, mean_error, num_bad, num_compared) cover the whole output.
    """

    output: int | None
    kind: str
    message: str
    type_name: str = ""
    flat_index: int | None = None
    index: list[int] | None = None
    expected: Any = None
    actual: Any = None
    criterion: str = ""
    atol: float | None = None
    rtol: float | None = None
    bias: float | None = None
    mse: float | None = None
    max_abs_error: float | None = None
    max_ulp: int | None = None
    mean_error: float | None = None
    measured_bias: float | None = None
    measured_mse: float | None = None
    num_bad: int | None = None
    num_compared: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: _jsonable(v) for k, v in dataclasses.asdict(self).items()}


@dataclass
class Comparison:
    passed: bool
    mismatches: list[Mismatch] = field(default_factory=list)
    message: str = ""
    criteria: Criteria | None = None

    def __bool__(self) -> bool:
        return self.passed

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "message": self.message,
            "criteria": self.criteria.to_dict() if self.criteria is not None else None,
            "mismatches": [m.to_dict() for m in self.mismatches],
        }


def _json_number(v: Any) -> Any:
    # JSON has no inf / nan; spell them out so dumped specs stay standard JSON.
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def _jsonable(v: Any) -> Any:
    if isinstance(v, (np.generic,)):
        v = v.item()
    if isinstance(v, float):
        return _json_number(v)
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


# ---------------------------------------------------------------------------------------
# Comparison.
# ---------------------------------------------------------------------------------------


def ulp_distance(expected: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """Elementwise distance in units in the last place of the arrays' float type (float32 or
    float16): the number of representable values between them.  +0 and -0 are 0 apart; a NaN
    on either side gives -1."""
    expected = np.asarray(expected)
    actual = np.asarray(actual)
    ibits: type[np.signedinteger[Any]]
    wide: type[np.signedinteger[Any]]
    if expected.dtype == np.float16:
        # fp16 patterns fit int32 with room for their difference: half the memory traffic of int64
        ibits, wide, shift = np.int16, np.int32, 15
    elif expected.dtype == np.float32:
        ibits, wide, shift = np.int32, np.int64, 31
    else:
        raise TypeError(f"ULP distance needs float16 or float32 arrays, not {expected.dtype}")
    actual = actual.astype(expected.dtype, copy=False)

    def ordered(x: np.ndarray) -> np.ndarray:
        # Sign-magnitude bit patterns mapped onto a monotonic integer line: a negative pattern
        # b becomes -(b & magnitude), computed without a branch as (m ^ s) - s with s = 0 or -1.
        b: np.ndarray = np.ascontiguousarray(x).view(ibits).astype(wide)
        s = np.right_shift(b, shift)
        np.bitwise_and(b, (1 << shift) - 1, out=b)
        np.bitwise_xor(b, s, out=b)
        np.subtract(b, s, out=b)
        return b

    d = ordered(actual)
    d -= ordered(expected)
    np.abs(d, out=d)
    nan = np.isnan(expected) | np.isnan(actual)
    d[nan] = -1
    return d.astype(np.int64, copy=False)


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        if v.is_integer() and abs(v) < 1e15:
            return str(int(v))
        return f"{v:.9g}"
    return str(v)


def _py(v: np.generic, is_float: bool) -> Any:
    if is_float:
        return float(v)
    if v.dtype == np.bool_:
        return bool(v)
    return int(v)


def compare(
    model: Model,
    expected: Sequence[Any],
    actual: Sequence[Any],
    criteria: Criteria | None = None,
    ignored: Sequence[bool] | None = None,
    quant8_atol: float = 1,
) -> Comparison:
    """Compare a driver's outputs with the expected ones; see the module docstring.

    ``criteria`` None means ``default_criteria(model, quant8_atol)``; an explicit set is used
    as given (no relaxed switching, ``quant8_atol`` unused).
    """
    crit = criteria if criteria is not None else default_criteria(model, quant8_atol)
    outs = model.main.output_indexes
    mismatches: list[Mismatch] = []
    n = len(outs)
    for what, arrays in (("expected", expected), ("actual", actual)):
        if arrays is None or len(arrays) != n:
            got = "none" if arrays is None else len(arrays)
            mismatches.append(
                Mismatch(
                    output=None,
                    kind="count",
                    message=f"{what} outputs: got {got} arrays, the model has {n} outputs",
                    criterion=crit.name,
                )
            )
    if mismatches:
        return _finish(mismatches, crit, 0, 0)

    ignored = list(ignored or [])
    compared = skipped = 0
    if crit.exact_where_defined and not _cts_tolerance_env():
        try:
            exact = exact_outputs(model)
        except (IndexError, TypeError, ValueError, AttributeError):
            exact = [False] * n  # a malformed model: the tolerances, not a crash
    else:
        exact = [False] * n
    for i, oi in enumerate(outs):
        if i < len(ignored) and ignored[i]:
            skipped += 1
            continue
        compared += 1
        mismatches.extend(_compare_output(i, model.main.operands[oi].type, expected[i], actual[i], crit, exact[i]))
    return _finish(mismatches, crit, compared, skipped)


def _finish(mismatches: list[Mismatch], crit: Criteria, compared: int, skipped: int) -> Comparison:
    if not mismatches:
        msg = f"passed: {compared} output(s) within {crit.name} criteria"
        if skipped:
            msg += f" ({skipped} ignored)"
        return Comparison(True, [], msg, crit)
    msg = mismatches[0].message
    if len(mismatches) > 1:
        msg += f" [+{len(mismatches) - 1} more mismatch(es)]"
    return Comparison(False, mismatches, msg, crit)


def _exact_version(crit: Criteria, row: str) -> Criteria:
    """``crit`` with the row of an exactly defined output made exact."""
    if row == "bool8":
        return dataclasses.replace(crit, name=f"{crit.name}.exact", bool8_ratio=0.0)
    exact_row: dict[str, Any] = {row: Tolerance(atol=0.0, rtol=0.0)}
    return dataclasses.replace(crit, name=f"{crit.name}.exact", skip_invalid_fp=False, **exact_row)


def _compare_output(
    i: int, otype: OperandType, exp_in: Any, act_in: Any, crit: Criteria, exact: bool = False
) -> list[Mismatch]:
    tname = OperandType(otype).name
    row = crit.row_name(otype)
    head = f"output {i} ({tname}"
    if row is None:
        return [
            Mismatch(
                i,
                "unsupported_type",
                f"{head}): data type not supported for comparison",
                type_name=tname,
                criterion=crit.name,
            )
        ]
    dtype = type_info(otype).dtype
    assert dtype is not None  # every type with a comparison row is stored as an array
    try:
        exp = np.asarray(exp_in)
        if exp.dtype != dtype:
            # Expected values may come from a spec file as plain numbers; they must convert
            # to the storage type without change.
            conv = exp.astype(dtype)
            if dtype.kind != "f" and not np.array_equal(
                conv.astype(np.float64), exp.astype(np.float64), equal_nan=True
            ):
                raise ValueError(f"values do not fit {dtype}")
            exp = conv
    except (ValueError, TypeError) as e:
        return [
            Mismatch(
                i,
                "dtype",
                f"{head}): expected values of dtype {np.asarray(exp_in).dtype} cannot be stored as {dtype}: {e}",
                type_name=tname,
                criterion=crit.name,
            )
        ]
    if not isinstance(act_in, np.ndarray):
        return [
            Mismatch(
                i,
                "dtype",
                f"{head}): actual output is a {type(act_in).__name__}, not a numpy array of {dtype}",
                type_name=tname,
                criterion=crit.name,
            )
        ]
    act = act_in
    if act.dtype != dtype:
        return [
            Mismatch(
                i,
                "dtype",
                f"{head}): actual dtype {act.dtype}, the operand type stores {dtype}",
                type_name=tname,
                criterion=crit.name,
            )
        ]
    if act.shape != exp.shape:
        return [
            Mismatch(
                i,
                "shape",
                f"{head}): actual shape {list(act.shape)}, expected {list(exp.shape)}",
                type_name=tname,
                criterion=crit.name,
            )
        ]
    head = f"{head} {list(exp.shape)})"
    if exact:
        crit = _exact_version(crit, row)
    if row == "bool8":
        return _compare_bool(i, tname, head, exp, act, crit)
    return _compare_numeric(i, OperandType(otype), tname, head, exp, act, crit, row)


def _index(flat: int, shape: tuple[int, ...]) -> list[int]:
    return [int(x) for x in np.unravel_index(flat, shape)] if shape else []


def _compare_bool(i: int, tname: str, head: str, exp: np.ndarray, act: np.ndarray, crit: Criteria) -> list[Mismatch]:
    bad = exp.ravel() != act.ravel()
    nbad = int(bad.sum())
    n = exp.size
    allowed = math.ceil(crit.bool8_ratio * n)
    if nbad <= allowed:
        return []
    first = int(np.argmax(bad))
    e, a = bool(exp.ravel()[first]), bool(act.ravel()[first])
    msg = (
        f"{head} index {_index(first, exp.shape)}: expected {e}, actual {a} "
        f"({nbad} of {n} elements differ; allowed {allowed} = ceil({crit.bool8_ratio:g}*{n}))"
    )
    return [
        Mismatch(
            i,
            "bool_ratio",
            msg,
            type_name=tname,
            flat_index=first,
            index=_index(first, exp.shape),
            expected=e,
            actual=a,
            criterion=f"{crit.name}.bool8",
            max_abs_error=1.0,
            mean_error=nbad / n,
            num_bad=nbad,
            num_compared=n,
        )
    ]


def _identical(exp: np.ndarray, act: np.ndarray) -> tuple[bool, bool]:
    """(``act`` holds ``exp``'s bit patterns exactly and no NaN, some element is infinite)."""
    if exp.dtype != act.dtype or exp.shape != act.shape:
        return False, False
    if exp.dtype.kind != "f":
        return bool(np.array_equal(exp, act)), False
    if exp.dtype.itemsize not in (2, 4):
        return False, False
    bits = exp.ravel().view(np.uint16 if exp.dtype.itemsize == 2 else np.uint32)
    if not np.array_equal(bits, act.ravel().view(bits.dtype)):
        return False, False
    # an all-ones exponent is inf (zero mantissa) or NaN
    top, mag = (0x7C00, 0x7FFF) if exp.dtype.itemsize == 2 else (0x7F800000, 0x7FFFFFFF)
    magnitude = np.bitwise_and(bits, np.asarray(mag, bits.dtype))
    special = magnitude >= top
    if not special.any():
        return True, False
    return not bool((magnitude > top).any()), True


def _compare_numeric(
    i: int, otype: OperandType, tname: str, head: str, exp: np.ndarray, act: np.ndarray, crit: Criteria, row: str
) -> list[Mismatch]:
    tol: Tolerance = getattr(crit, row)
    is_float = otype in _FLOAT_TYPES
    same, has_inf = _identical(exp, act)
    if same and not (tol.bias < 0 or tol.mse < 0):
        # Every element came back bit for bit and none is NaN: every element passes and each
        # statistic below is 0 (difference, ULP, bias, mse), so nothing can mismatch.  This
        # spares a driver that matches the float64 passes over all elements (a 4.2 M-element
        # sweep spent most of its time here).  Except for equal infinities that the bias or mse
        # check sees: there inf - inf is NaN, which that check fails; those take the long way.
        inf_seen = has_inf and not (is_float and crit.skip_invalid_fp)
        if not inf_seen or not (math.isfinite(tol.bias) or math.isfinite(tol.mse)):
            return []
    e = exp.astype(np.float64).ravel()
    a = act.astype(np.float64).ravel()
    with np.errstate(invalid="ignore", over="ignore"):
        skip = np.zeros(e.shape, dtype=bool)
        if is_float and crit.skip_invalid_fp:
            limit = 1e3 if exp.dtype == np.float32 else 1e2
            skip = np.isinf(e) | (np.abs(e) > limit)
        diff = a - e
        absdiff = np.where(a == e, 0.0, np.abs(diff))
        allowed = tol.atol + tol.rtol * np.abs(e)
        # NaN anywhere makes the <= false, so NaN expected or actual values fail here.
        # With e = inf the allowed range (rtol*|e|) is inf too, so AOSP passes any finite
        # value there; an infinite expected value must be matched exactly instead.
        ok = (a == e) | ((absdiff <= allowed) & np.isfinite(e))
        if crit.name.endswith(".exact"):  # exactly defined: NaN must come back as NaN
            ok |= np.isnan(a) & np.isnan(e)
        bad = ~ok & (~skip | np.isnan(e))
        used = ~skip
        nused = int(used.sum())
        nbad = int(bad.sum())

        stats: dict[str, Any] = {"num_bad": nbad, "num_compared": nused}
        ad_used = absdiff[used]
        finite_ad = ad_used[~np.isnan(ad_used)]
        stats["max_abs_error"] = float(finite_ad.max()) if finite_ad.size else math.nan
        d_used = diff[used]
        d_used = d_used[~np.isnan(d_used)]
        # inf - inf is NaN and drops out; an inf error stays and makes the mean inf.
        stats["mean_error"] = float(d_used.mean()) if d_used.size else math.nan
        if is_float:
            u = ulp_distance(exp.ravel()[used], act.ravel()[used])
            u = u[u >= 0]
            stats["max_ulp"] = int(u.max()) if u.size else None
        rel = diff / np.maximum(1.0, np.abs(e)) if is_float else diff
        rel = rel[used]
        measured_bias = float(rel.mean()) if nused else math.nan
        measured_mse = float((rel * rel).mean()) if nused else math.nan
    stats["measured_bias"] = measured_bias
    stats["measured_mse"] = measured_mse

    cname = f"{crit.name}.{row}"
    common = dict(type_name=tname, criterion=cname, atol=tol.atol, rtol=tol.rtol, bias=tol.bias, mse=tol.mse, **stats)
    summary = f"{nbad} of {e.size} elements out of tolerance; max abs err {_fmt(stats['max_abs_error'])}"
    if is_float:
        summary += f", max ULP {stats['max_ulp']}"
    summary += f", mean err {_fmt(stats['mean_error'])}"

    out: list[Mismatch] = []
    if nbad:
        first = int(np.argmax(bad))
        ev = _py(exp.ravel()[first], is_float)
        av = _py(act.ravel()[first], is_float)
        idx = _index(first, exp.shape)
        if math.isnan(e[first]):
            kind = "nan_expected"
            what = "the reference produced NaN, which never passes"
        else:
            kind = "element"
            d = abs(a[first] - e[first])
            what = f"|diff| {_fmt(float(d))} > atol {_fmt(tol.atol)} + rtol {_fmt(tol.rtol)}*|e|"
        msg = f"{head} index {idx}: expected {_fmt(ev)}, actual {_fmt(av)}, {what} ({summary})"
        out.append(Mismatch(i, kind, msg, flat_index=first, index=idx, expected=ev, actual=av, **common))
    if nused >= MIN_ELEMENTS_FOR_BIAS_MSE:
        rel_word = "relative " if is_float else ""
        if math.isfinite(tol.bias) and not abs(measured_bias) <= tol.bias:
            out.append(
                Mismatch(
                    i,
                    "bias",
                    f"{head}: {rel_word}bias |mean(diff)| {_fmt(abs(measured_bias))} > {_fmt(tol.bias)} ({summary})",
                    **common,
                )
            )
        if math.isfinite(tol.mse) and not measured_mse <= tol.mse:
            out.append(
                Mismatch(
                    i,
                    "mse",
                    f"{head}: {rel_word}mse mean(diff**2) {_fmt(measured_mse)} > {_fmt(tol.mse)} ({summary})",
                    **common,
                )
            )
    return out
