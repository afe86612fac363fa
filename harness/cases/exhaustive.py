"""Exhaustive sweeps (issue 51): value domains that random sampling never reaches.

An element-wise operation over every input it can take is one request of one tensor: every
fp16 bit pattern (65,536 elements), every stored code of an 8-bit type (256), every byte pair
of an 8-bit binary operation (65,536).  fp32 cannot be swept whole; its sample holds every
exponent with a dense mantissa sample, every subnormal binade, +-0 and +-inf.

Each :class:`Sweep` is one operation, data type and parameter grid point.  Two tiers:

* ``quick`` (the default run): every fp16 value and the fp32 sample of each unary float
  operation, a few (scale, zero point) grid points of the 8-bit operations including the
  extremes, and a stratified 256 x 256 sample of the binary float pairs;
* ``full`` (``nnconform run --suite exhaustive``): the whole (scale, zero point) grid with every
  fused activation, relaxed fp32, and every fp16 pair of the binary float operations in
  chunks of 64 first operands; ``--shard i/n`` runs every n-th sweep.

Inputs outside an operation's defined domain are removed by rule (:func:`domain_mask`), never
by sampling: NaN only where IEEE defines a non-NaN result (comparisons), infinities only where
NNAPI's result is defined without overflow or NaN (``generators.signatures``), LOG / RSQRT
positive, SQRT non-negative, SIN finite, DIV by non-zero, POW of a positive base, fp32
HARD_SWISH below FLT_MAX / 6 (its product overflows above), and no inf - inf, 0 * inf.
A relaxed fp32 model may compute in fp16, so its inputs stay in the fp16 normal range
(NNAPI's relaxed mode gives fp16 range and precision; subnormals may be flushed there only).

Error measures (:func:`error_stats`): per element the distance in ULPs of the output type
(codes for quantised outputs, 0/1 for bool8) and the error as a fraction of the tolerance the
vectors use (``criteria.default_criteria``, exact where NNAPI defines the result exactly).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from nnconform.generators.signatures import EXTREMES_DEFINED, INF_ONLY, NAN_DEFINED
from nnconform.ir import SHORT_TYPE_NAME, Model, ModelBuilder, type_info
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.verdict.criteria import Criteria, default_criteria, exact_outputs, ulp_distance

F32, F16, Q8, Q8S, B8 = (
    T.TENSOR_FLOAT32,
    T.TENSOR_FLOAT16,
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
    T.TENSOR_BOOL8,
)
TIERS = ("quick", "full")

# ---- value sets ---------------------------------------------------------------------------


def fp16_all() -> np.ndarray:
    """Every fp16 bit pattern once (NaNs included; the domain rule removes them)."""
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)


def fp32_sample(mantissas: int = 256) -> np.ndarray:
    """Every fp32 exponent with ``mantissas`` evenly spaced mantissas (first and last
    included), every subnormal binade (leading bit at each of the 23 positions, its lowest,
    middle and highest value), both signs; +-0 and +-inf are exponent 0 / 255 with mantissa 0,
    and one quiet NaN."""
    mant = np.unique(np.linspace(0, (1 << 23) - 1, mantissas).astype(np.uint32))
    exps = np.arange(255, dtype=np.uint32)  # 255 is inf / NaN: added below
    normal = ((exps[:, None] << 23) | mant[None, :]).ravel()
    k = np.arange(23, dtype=np.uint32)
    low = np.uint32(1) << k
    sub = np.concatenate([low, low | (low >> 1), (low << 1) - 1])
    pos = np.unique(np.concatenate([normal, sub, np.array([0x7F800000, 0x7FC00000], np.uint32)]))
    return np.concatenate([pos, pos | np.uint32(0x80000000)]).view(np.float32)


def fp_stratified(dtype: type[np.floating[Any]], n: int) -> np.ndarray:
    """``n`` values spread over the whole bit-pattern line of ``dtype`` (both signs, every
    binade about equally), plus +-0, +-inf, the smallest subnormal and the largest finite."""
    dt = np.dtype(dtype)
    bits = 16 if dt == np.float16 else 32
    ui = np.uint16 if bits == 16 else np.uint32
    half = n // 2
    top = (0x7C00 if bits == 16 else 0x7F800000) - 1  # largest finite pattern
    pos = np.unique(np.concatenate([np.linspace(0, top, max(half - 2, 2)).astype(np.int64), [0, 1, top, top + 1]]))
    pos = pos.astype(ui)
    sign = ui(1 << (bits - 1))
    return np.concatenate([pos, pos | sign]).view(dt)


# ---- domain rules -------------------------------------------------------------------------


def _finite_rule(op: Op) -> tuple[bool, bool]:
    """(infinities defined, NaN defined) for ``op``, as the random suite declares them."""
    return op in EXTREMES_DEFINED or op in INF_ONLY or op in _INF_EXTRA, op in NAN_DEFINED


# Beyond the random suite's list: exp(-inf) = 0, exp(+inf) = inf, log(+inf) = inf,
# sqrt(+inf) = inf, 1/sqrt(+inf) = 0, elu(-inf) = -alpha, and casts and arithmetic of
# infinities are IEEE-defined (the pairs giving NaN are removed by _pair_rule).
_INF_EXTRA = frozenset((Op.EXP, Op.LOG, Op.SQRT, Op.RSQRT, Op.ELU, Op.CAST, Op.ADD, Op.SUB, Op.MUL, Op.DIV))


def domain_mask(op: Op, x: np.ndarray) -> np.ndarray:
    """True where ``op``'s result on float input ``x`` is defined (unary rule)."""
    inf_ok, nan_ok = _finite_rule(op)
    with np.errstate(invalid="ignore"):
        keep = np.ones(x.shape, bool) if nan_ok else ~np.isnan(x)
        if not inf_ok:
            keep &= ~np.isinf(x)
        if op in (Op.LOG, Op.RSQRT):
            keep &= x > 0
        elif op == Op.SQRT:
            keep &= x >= 0
        elif op == Op.SIN:
            keep &= np.isfinite(x)
        elif op == Op.HARD_SWISH and x.dtype == np.float32:
            # x * relu6(x + 3) / 6 overflows in its product above FLT_MAX / 6: AOSP's order gives
            # inf, x * (relu6(x + 3) / 6) gives x; NNAPI does not say which
            keep &= ~(np.abs(x) > np.finfo(np.float32).max / 6)
        elif op == Op.QUANTIZE:
            keep &= np.isfinite(x)  # saturation of +-inf is not stated by NNAPI
    return keep


def pair_mask(op: Op, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """True where ``op``'s result on the float pair (a, b) is defined."""
    keep = domain_mask(op, a) & domain_mask(op, b)
    with np.errstate(invalid="ignore", over="ignore"):
        ia, ib = np.isinf(a), np.isinf(b)
        if op == Op.ADD:
            keep &= ~(ia & ib & (np.sign(a) != np.sign(b)))
        elif op == Op.SUB:
            keep &= ~(ia & ib & (np.sign(a) == np.sign(b)))
        elif op == Op.MUL:
            keep &= ~((ia & (b == 0)) | (ib & (a == 0)))
        elif op == Op.DIV:
            keep &= (b != 0) & ~(ia & ib)
        elif op == Op.POW:
            # a negative base has no real power for most exponents, and 0 ** negative is a
            # division by zero: NNAPI defines POW for a positive base (and 0 ** positive)
            keep &= (a > 0) | ((a == 0) & (b > 0))
    return keep


def relaxed_mask(x: np.ndarray) -> np.ndarray:
    """Relaxed fp32 computes with fp16 range and precision: inputs must be 0 or fp16 normal."""
    ax = np.abs(x.astype(np.float64))
    return (ax == 0) | ((ax >= 2.0**-14) & (ax <= 65504.0))


# ---- quantisation grids ----------------------------------------------------------------------

# Scales NNAPI allows (any positive float): from tiny (every code maps near zero) to huge,
# with zero points at both ends of the stored range and in the middle.
Q_SCALES_FULL = (2.0**-16, 1.0 / 128, 0.1, 1.0, 256.0)
Q_ZPS = {Q8: (0, 128, 255), Q8S: (-128, 0, 127)}
# Fixed output encodings NNAPI requires (scale, zero point)
_FIXED_OUT = {
    (Op.LOGISTIC, Q8): (1.0 / 256, 0),
    (Op.LOGISTIC, Q8S): (1.0 / 256, -128),
    (Op.TANH, Q8): (1.0 / 128, 128),
    (Op.TANH, Q8S): (1.0 / 128, 0),
}


def q_points(t: T, tier: str) -> list[tuple[float, int]]:
    lo, mid, hi = Q_ZPS[t]
    if tier == "quick":
        return [(0.1, mid), (2.0**-16, lo), (256.0, hi)]
    return [(s, z) for s in Q_SCALES_FULL for z in (lo, mid, hi)]


def _in_domain(op: Op, t: T, relaxed: bool) -> list[np.ndarray]:
    """The float sweep's values of ``t`` that are in ``op``'s domain, as its one input."""
    x = _float_values(t, relaxed)
    return [x[domain_mask(op, x)]]


def _all_codes(t: T) -> list[np.ndarray]:
    return [codes(t)]


def codes(t: T) -> np.ndarray:
    info = np.iinfo(type_info(t).dtype)
    return np.arange(info.min, info.max + 1).astype(type_info(t).dtype)


# ---- the sweeps -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sweep:
    """One operation, data type and grid point: ``build(n)`` makes its model for ``n``
    elements, ``make_inputs()`` its full inputs (made when it runs: the fp16 pair chunks
    would not fit in memory all at once)."""

    name: str
    operation: Op
    data_type: str
    grid: str
    build: Callable[[int], Model]
    make_inputs: Callable[[], list[np.ndarray]]
    tier: str = "quick"
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def test_id(self) -> str:
        return f"exhaustive/{self.name}"

    # the names the pytest plugin marks a case with (-m "log and fp32")
    @property
    def operations(self) -> tuple[str, ...]:
        return (self.operation.name,)

    @property
    def data_types(self) -> tuple[str, ...]:
        base = self.data_type.removesuffix("_relaxed")
        return (base, "relaxed") if base != self.data_type else (base,)


def _unary_builder(op: Op, t: T, out_t: T | None = None, qin=None, qout=None, relaxed=False, extra=None):
    def build(n: int) -> Model:
        b = ModelBuilder()
        kin = {"scale": qin[0], "zero_point": qin[1]} if qin else {}
        kout = {"scale": qout[0], "zero_point": qout[1]} if qout else {}
        x = b.input(t, (n,), **kin)
        args = [x] + ([extra(b)] if extra else [])
        b.operation(op, args, [b.output(out_t or t, (n,), **kout)])
        return b.build(relaxed=relaxed)

    return build


def _binary_builder(op: Op, t: T, out_t: T | None = None, q=None, act=None, relaxed=False):
    def build(n: int) -> Model:
        b = ModelBuilder()
        k = [{"scale": s, "zero_point": z} for s, z in q] if q else [{}, {}, {}]
        x, y = b.input(t, (n,), **k[0]), b.input(t, (n,), **k[1])
        args = [x, y] + ([b.i32(act)] if act is not None else [])
        b.operation(op, args, [b.output(out_t or t, (n,), **k[2])])
        return b.build(relaxed=relaxed)

    return build


def _valid(model: Model) -> bool:
    """NNAPI's model rules accept ``model``, and, when it is quantised, AOSP's CPU path can
    execute it: a rescale whose multiplier is not below 1 (MUL's input product scale against
    its output scale, HARD_SWISH's input scale / 128 against its output scale, ...) fails the
    execution whatever the inputs, so NNAPI gives no result to judge there."""
    from nnconform.errors import OpFailure, ValidationError
    from nnconform.ir.validation import validate_model
    from nnconform.reference.executor import execute

    try:
        validate_model(model)
    except ValidationError:
        return False
    sg = model.main
    if not any(type_info(sg.operands[i].type).is_quant for i in (*sg.input_indexes, *sg.output_indexes)):
        return True
    inputs = [
        np.full(sg.operands[i].dimensions, sg.operands[i].zero_point, type_info(sg.operands[i].type).dtype)
        for i in sg.input_indexes
    ]
    try:
        execute(model, inputs)
    except OpFailure:
        return False
    return True


UNARY_FLOAT = (
    Op.ABS,
    Op.NEG,
    Op.FLOOR,
    Op.EXP,
    Op.LOG,
    Op.SQRT,
    Op.RSQRT,
    Op.SIN,
    Op.LOGISTIC,
    Op.TANH,
    Op.RELU,
    Op.RELU1,
    Op.RELU6,
    Op.HARD_SWISH,
    Op.ELU,
)
UNARY_QUANT = (Op.LOGISTIC, Op.TANH, Op.RELU, Op.RELU1, Op.RELU6, Op.HARD_SWISH, Op.ELU, Op.ABS, Op.NEG)
ARITH = (Op.ADD, Op.SUB, Op.MUL, Op.DIV)
BINARY_FLOAT = ARITH + (Op.MAXIMUM, Op.MINIMUM, Op.POW)
COMPARE = (Op.EQUAL, Op.NOT_EQUAL, Op.GREATER, Op.GREATER_EQUAL, Op.LESS, Op.LESS_EQUAL)
BINARY_QUANT = ARITH + (Op.MAXIMUM, Op.MINIMUM, Op.PRELU) + COMPARE


def _short(t: T) -> str:
    return SHORT_TYPE_NAME[t]


def _q(p: tuple[float, int]) -> str:
    return f"{p[0]:g}z{p[1]}"


def _float_values(t: T, relaxed: bool) -> np.ndarray:
    if t == F16:
        return fp16_all()
    x = fp32_sample()
    return x[relaxed_mask(x)] if relaxed else x


def _alpha(t: T):
    return (lambda b: b.f16(1.0)) if t == F16 else (lambda b: b.f32(1.0))


def _unary_float_sweeps(tier: str) -> list[Sweep]:
    out: list[Sweep] = []
    variants = [(F16, False), (F32, False)] + ([(F32, True)] if tier == "full" else [])
    for t, relaxed in variants:
        tag = _short(t) + ("_relaxed" if relaxed else "")
        for op in UNARY_FLOAT:
            extra = _alpha(t) if op == Op.ELU else None

            def inputs(op=op, t=t, relaxed=relaxed):
                x = _float_values(t, relaxed)
                return [x[domain_mask(op, x)]]

            out.append(
                Sweep(
                    f"{op.name}-{tag}",
                    op,
                    tag,
                    "all" if t == F16 else "sample",
                    _unary_builder(op, t, relaxed=relaxed, extra=extra),
                    inputs,
                    tier,
                )
            )
        # CAST to the other float type (rounding to nearest, overflow to inf) and QUANTIZE
        other = F32 if t == F16 else F16
        out.append(
            Sweep(
                f"CAST-{tag}-to-{_short(other)}",
                Op.CAST,
                tag,
                "all" if t == F16 else "sample",
                _unary_builder(Op.CAST, t, other, relaxed=relaxed),
                functools.partial(_in_domain, Op.CAST, t, relaxed),
                tier,
            )
        )
        for qt in (Q8, Q8S):
            for qp in q_points(qt, tier)[:1] if tier == "quick" else q_points(qt, tier):
                out.append(
                    Sweep(
                        f"QUANTIZE-{tag}-to-{_short(qt)}-{_q(qp)}",
                        Op.QUANTIZE,
                        tag,
                        f"out {_q(qp)}",
                        _unary_builder(Op.QUANTIZE, t, qt, qout=qp, relaxed=relaxed),
                        functools.partial(_in_domain, Op.QUANTIZE, t, relaxed),
                        tier,
                    )
                )
    return out


def _unary_quant_sweeps(tier: str) -> list[Sweep]:
    out: list[Sweep] = []
    for t in (Q8, Q8S):
        pts = q_points(t, tier)
        for op in UNARY_QUANT:
            for qin in pts:
                fixed = _FIXED_OUT.get((op, t))
                if fixed:
                    outs = [fixed]
                elif tier == "quick":
                    outs = [qin]
                else:
                    outs = pts
                for qout in outs:
                    extra = (lambda b: b.f32(1.0)) if op == Op.ELU else None
                    sw = Sweep(
                        f"{op.name}-{_short(t)}-in{_q(qin)}-out{_q(qout)}",
                        op,
                        _short(t),
                        f"in {_q(qin)} out {_q(qout)}",
                        _unary_builder(op, t, qin=qin, qout=qout, extra=extra),
                        functools.partial(_all_codes, t),
                        tier,
                    )
                    out.append(sw)
        for ft in (F32, F16):
            for qin in pts:
                out.append(
                    Sweep(
                        f"DEQUANTIZE-{_short(t)}-in{_q(qin)}-to-{_short(ft)}",
                        Op.DEQUANTIZE,
                        _short(t),
                        f"in {_q(qin)}",
                        _unary_builder(Op.DEQUANTIZE, t, ft, qin=qin),
                        functools.partial(_all_codes, t),
                        tier,
                    )
                )
    return out


def _byte_pairs(t: T) -> list[np.ndarray]:
    c = codes(t)
    return [np.repeat(c, c.size), np.tile(c, c.size)]


def _binary_quant_grid(t: T, tier: str) -> list[tuple[tuple[float, int], ...]]:
    lo, mid, hi = Q_ZPS[t]
    if tier == "quick":
        return [((0.5, mid), (0.25, lo), (0.75, mid))]
    ins = [(2.0**-10, lo), (0.25, mid), (1.0, hi), (16.0, mid)]
    outs = [(2.0**-10, mid), (0.5, lo), (8.0, hi)]
    return [(a, b, o) for a in ins for b in ins for o in outs]


def _binary_quant_sweeps(tier: str) -> list[Sweep]:
    out: list[Sweep] = []
    for t in (Q8, Q8S):
        for op in BINARY_QUANT:
            acts: Sequence[int | None]
            if op in ARITH:
                acts = (0,) if tier == "quick" else (0, 1, 2, 3)
            else:
                acts = (None,)
            grid_points = _binary_quant_grid(t, tier)
            if op in COMPARE:
                # a comparison's bool8 output has no encoding: the grid's output encodings would
                # make the same sweep once per encoding
                grid_points = list(dict.fromkeys((q[0], q[1], (0.0, 0)) for q in grid_points))
            for q in grid_points:
                for act in acts:
                    out_t = B8 if op in COMPARE else t
                    grid = f"a {_q(q[0])} b {_q(q[1])}" + ("" if op in COMPARE else f" out {_q(q[2])}")
                    grid += f" act {act}" if act is not None else ""
                    out.append(
                        Sweep(
                            f"{op.name}-{_short(t)}-" + grid.replace(" ", "_"),
                            op,
                            _short(t),
                            grid,
                            _binary_builder(op, t, out_t, q=q, act=act),
                            functools.partial(_byte_pairs, t),
                            tier,
                        )
                    )
    return out


def _float_pairs_stratified(op: Op, t: T, n: int = 256) -> list[np.ndarray]:
    v = fp_stratified(np.float16 if t == F16 else np.float32, n)
    a, b = np.repeat(v, v.size), np.tile(v, v.size)
    keep = pair_mask(op, a, b)
    return [a[keep], b[keep]]


CHUNK = 64  # first operands per chunk of the every-fp16-pair sweep: 64 x 65,536 elements


def _float_pairs_chunk(op: Op, chunk: int) -> list[np.ndarray]:
    v = fp16_all()
    first = v[chunk * CHUNK : (chunk + 1) * CHUNK]
    # The domain rule on a (64, 65,536) grid broadcast from the 64 first operands and the
    # 65,536 second ones: the per-value tests run on those alone, only the combining runs on
    # every pair (the same mask, row by row, as on the repeated and tiled operands).
    keep = pair_mask(op, first[:, None], v[None, :])
    shape = (first.size, v.size)
    return [np.broadcast_to(first[:, None], shape)[keep], np.broadcast_to(v[None, :], shape)[keep]]


def _binary_float_sweeps(tier: str) -> list[Sweep]:
    out: list[Sweep] = []
    for t in (F16, F32):
        for op in BINARY_FLOAT + COMPARE:
            act = 0 if op in ARITH else None
            out_t = B8 if op in COMPARE else t
            out.append(
                Sweep(
                    f"{op.name}-{_short(t)}-pairs-stratified",
                    op,
                    _short(t),
                    "stratified 256x256",
                    _binary_builder(op, t, out_t, act=act),
                    functools.partial(_float_pairs_stratified, op, t),
                    tier,
                )
            )
    if tier == "full":
        for op in BINARY_FLOAT + COMPARE:
            act = 0 if op in ARITH else None
            out_t = B8 if op in COMPARE else F16
            every = fp16_all()
            for c in range((1 << 16) // CHUNK):
                first = every[c * CHUNK : (c + 1) * CHUNK]
                live = domain_mask(op, first) & ((first >= 0) if op == Op.POW else True)
                if not live.any():
                    continue  # no first operand of this chunk is in the domain (NaNs, POW's negatives)
                out.append(
                    Sweep(
                        f"{op.name}-fp16-pairs-{c:04d}",
                        op,
                        "fp16",
                        f"every pair, first operand chunk {c}",
                        _binary_builder(op, F16, out_t, act=act),
                        functools.partial(_float_pairs_chunk, op, c),
                        tier,
                    )
                )
    return out


def sweeps(tier: str = "quick") -> list[Sweep]:
    """Every sweep of ``tier`` whose model NNAPI's rules accept (nnconform.ir.validation):
    operation, type and (scale, zero point) combinations it refuses are left out by rule."""
    if tier not in TIERS:
        raise ValueError(f"unknown sweep tier {tier!r} (quick or full)")
    found = _unary_float_sweeps(tier) + _unary_quant_sweeps(tier) + _binary_quant_sweeps(tier)
    found += _binary_float_sweeps(tier)
    valid_cache: dict[tuple, bool] = {}
    kept = []
    for s in found:
        key = (s.operation, s.data_type, s.grid.split(" chunk ")[0], s.name.split("-pairs-")[0])
        if key not in valid_cache:
            valid_cache[key] = _valid(s.build(4))
        if valid_cache[key]:
            kept.append(s)
    return kept


def shard(items: Sequence[Any], spec: tuple[int, int] | None) -> list[Any]:
    """The ``i``-th of ``n`` interleaved shards (1-based), or everything for None."""
    if spec is None:
        return list(items)
    i, n = spec
    return [x for k, x in enumerate(items) if k % n == i - 1]


def parse_shard(text: object) -> tuple[int, int]:
    """'2/8' -> (2, 8): the second of eight shards."""
    t = str(text).strip()
    parts = t.split("/")
    try:
        i, n = (int(p) for p in parts)
    except ValueError:
        raise ValueError(f"not a shard: {text!r} (i/n, e.g. 2/8: the second of eight)") from None
    if not 1 <= i <= n:
        raise ValueError(f"not a shard: {text!r} (i/n needs 1 <= i <= n)")
    return i, n


def format_shard(spec: tuple[int, int]) -> str:
    return f"{spec[0]}/{spec[1]}"


# ---- error measures ---------------------------------------------------------------------------

HIST_EDGES = (0, 1, 2, 4, 8, 16, 64, 256, 1024)


@dataclass
class SweepStats:
    elements: int
    failing: np.ndarray  # flat indexes of the failing elements
    ulp: np.ndarray  # per element (codes for quantised, 0/1 for bool; -1 where NaN)
    fraction: np.ndarray  # |error| / tolerance per element (inf: an error where none is allowed)
    criterion: str
    flushed: int = 0  # subnormal inputs whose subnormal results came back as zero

    @property
    def worst_index(self) -> int | None:
        if not self.failing.size:
            return None
        f = self.fraction[self.failing]
        return int(self.failing[int(np.argmax(np.where(np.isnan(f), np.inf, f)))])

    def histogram(self) -> dict[str, int]:
        u = self.ulp
        # One pass to find the non-zero ULPs (few, where a driver is accurate), then their bins:
        # not a pass over every element per bin.
        nonzero = u[u != 0]
        out: dict[str, int] = {}
        nan = int((nonzero < 0).sum())
        if nan:
            out["nan"] = nan
        edges = np.asarray(HIST_EDGES)
        counts = np.bincount(np.searchsorted(edges, nonzero[nonzero > 0], side="right") - 1, minlength=edges.size)
        counts[0] = u.size - nonzero.size
        for k, (lo, hi) in enumerate(itertools.pairwise(HIST_EDGES + (math.inf,))):
            n = int(counts[k])
            if n:
                label = str(lo) if hi == lo + 1 else (f"{lo}-{int(hi) - 1}" if math.isfinite(hi) else f">={lo}")
                out[label] = n
        return out

    def summary(self) -> dict[str, Any]:
        # fmax skips NaN (a NaN fraction or ULP -1 marks an element with no measure): the same
        # maxima as over the measured elements alone, without copying them out
        worst_frac = float(np.fmax.reduce(self.fraction)) if self.fraction.size else math.nan
        worst_ulp = int(self.ulp.max()) if self.ulp.size else -1
        return {
            "elements": self.elements,
            "failing": int(self.failing.size),
            "worst_ulp": worst_ulp if worst_ulp >= 0 else None,
            "worst_fraction": None if math.isnan(worst_frac) else _num(worst_frac),
            "histogram": self.histogram(),
            "criterion": self.criterion,
            **({"flushed_subnormals": self.flushed} if self.flushed else {}),
        }


def _num(x: float) -> float | str:
    return x if math.isfinite(x) else ("inf" if x > 0 else "nan")


def error_stats(
    model: Model,
    expected: np.ndarray,
    actual: np.ndarray,
    criteria: Criteria | None = None,
    inputs: Sequence[np.ndarray] = (),
) -> SweepStats:
    """Per-element errors of the single output of ``model`` (the rule of
    ``criteria._compare_numeric``: exactly equal passes, an infinite expected value needs that
    infinity, NaN fails unless the output is exactly defined and both are NaN).

    ``inputs`` (the element-wise operation's flat inputs) turn on the no-flush rule: an element
    with a subnormal float input whose subnormal result comes back as zero fails outside
    relaxed models, even inside the fp32 atol."""
    crit = criteria or default_criteria(model)
    otype = model.main.operands[model.main.output_indexes[0]].type
    exact = crit.exact_where_defined and exact_outputs(model)[0]
    e = np.asarray(expected).ravel()
    a = np.asarray(actual).ravel()
    if otype == B8:
        bad = e != a
        ulp = bad.astype(np.int64)
        frac = np.where(bad, np.inf, 0.0)
        return SweepStats(e.size, np.flatnonzero(bad), ulp, frac, f"{crit.name}.bool8")
    tol = crit.tolerance(otype)
    assert tol is not None
    atol, rtol = (0.0, 0.0) if exact else (tol.atol, tol.rtol)
    n = e.size
    # Only elements whose bit pattern differs from the expected one (or that are NaN) can carry
    # an error: every other element has 0 ULP, a fraction of 0 and passes.  The float64 work
    # runs on those alone; on a driver that matches, that is next to nothing of a 4.2 M-element
    # sweep.  (Per element the rule is the same as before, so the results are too.)
    if a.dtype == e.dtype and a.shape == e.shape:
        if e.dtype.kind == "f":
            ubits = np.uint16 if e.dtype.itemsize == 2 else np.uint32 if e.dtype.itemsize == 4 else np.uint64
            live = (e.view(ubits) != a.view(ubits)) | np.isnan(e)
        else:
            live = e != a
        idx = np.flatnonzero(live)
    else:
        idx = np.arange(n)
    es, as_ = e[idx], a[idx]
    ef, af = es.astype(np.float64), as_.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        absdiff = np.where(af == ef, 0.0, np.abs(af - ef))
        allowed = atol + rtol * np.abs(ef)
        ok = (af == ef) | ((absdiff <= allowed) & np.isfinite(ef))
        if exact:
            ok |= np.isnan(af) & np.isnan(ef)
        fs = np.where(absdiff == 0, 0.0, absdiff / allowed)
        fs = np.where(ok, np.minimum(fs, 1.0), np.where(np.isnan(fs), np.inf, fs))
    flushed = np.zeros(idx.shape, bool)
    if e.dtype.kind == "f":
        us = ulp_distance(es, as_)
        sub_in = np.zeros(idx.shape, bool)
        for x in inputs:
            x = np.asarray(x).ravel()
            if x.dtype.kind == "f" and x.size == n:
                xs = x[idx]
                sub_in |= (xs != 0) & (np.abs(xs) < np.finfo(x.dtype).tiny)
        if not model.relax_fp32_to_fp16 and a.dtype == e.dtype and sub_in.any():
            # A subnormal input read as zero whose (subnormal) result comes back as zero passes
            # the fp32 atol (1e-5), but NNAPI allows flushing subnormals only in relaxed models.
            # Subnormal results of normal inputs (a transcendental's far tail) are left to the
            # tolerance: that is the kernel's accuracy, not a flush.
            flushed = sub_in & (as_ == 0) & (es != 0) & (np.abs(es) < np.finfo(e.dtype).tiny)
            fs = np.where(flushed, np.inf, fs)
    else:
        us = np.abs(as_.astype(np.int64) - es.astype(np.int64))
    # zero-filled (pages the untouched elements never cost), the measured elements scattered in
    ulp = np.zeros(n, np.int64)
    ulp[idx] = us
    frac = np.zeros(n, np.float64)
    frac[idx] = fs
    row = crit.row_name(otype)
    name = f"{crit.name}.{row}" + (".exact" if exact else "")
    return SweepStats(n, idx[~ok | flushed], ulp, frac, name, int(flushed.sum()))


def flush_verdict(outcome: Any, stats: SweepStats) -> Any:
    """A runner PASS (``verdict.runner.CaseOutcome``) whose errors include subnormal inputs
    read as zero (results returned as zero, inside the fp32 atol) becomes a FAIL: NNAPI allows
    that flush in relaxed models only.  The suite and ``nnconform replay`` of its specs both judge this way."""
    if outcome.outcome != "PASS" or not stats.flushed:
        return outcome
    import dataclasses

    from nnconform.verdict.criteria import Comparison, Mismatch

    message = (
        f"{stats.flushed} of {stats.elements} subnormal inputs read as 0: their subnormal results "
        "came back as 0 (inside the tolerance, but NNAPI allows flushing subnormals only in relaxed models)"
    )
    first = int(np.flatnonzero(np.isinf(stats.fraction))[0]) if np.isinf(stats.fraction).any() else None
    # a mismatch of its own kind: the failure buckets group these apart from tolerance failures
    mismatch = Mismatch(
        0, "no_flush", message, flat_index=first, criterion="exhaustive.no_flush", num_bad=stats.flushed
    )
    crit = outcome.comparison.criteria if outcome.comparison is not None else None
    return dataclasses.replace(
        outcome,
        outcome="FAIL",
        stage="compare",
        message=message,
        comparison=Comparison(False, [mismatch], message, crit),
    )


def replay_verdict(model: Model, inputs: Sequence[np.ndarray], expected: Sequence[np.ndarray], outcome: Any) -> Any:
    """``nnconform replay`` of an exhaustive spec: the runner's verdict plus the no-flush rule."""
    if outcome.outcome != "PASS" or not outcome.actual or len(expected) != 1:
        return outcome
    got, want = outcome.actual[0], np.asarray(expected[0])
    if not isinstance(got, np.ndarray) or got.shape != want.shape or got.dtype != want.dtype:
        return outcome
    return flush_verdict(outcome, error_stats(model, want, got, inputs=inputs))


def sweep_case(sweep: Sweep, inputs: list[np.ndarray]) -> Any:
    """The sweep over ``inputs`` as a ``verdict.runner.Case``, expected outputs from the reference."""
    from nnconform.reference.executor import execute
    from nnconform.verdict.runner import Case

    model = sweep.build(int(inputs[0].size))
    return Case(sweep.test_id, model, inputs, execute(model, inputs))


@dataclass
class SweepRun:
    """One sweep run on a driver: the case, the runner's outcome with the no-flush rule
    applied, the row's ``extra.exhaustive`` (``info``) and the per-element errors (None when
    the driver gave no output of the expected shape and type to measure)."""

    case: Any
    outcome: Any
    info: dict[str, Any]
    stats: SweepStats | None


def run_sweep(device: Any, sweep: Sweep, **options: Any) -> SweepRun:
    """Run ``sweep`` whole on ``device`` (``verdict.runner.run`` with ``options``) and measure
    it: what the suite and the stress test's shards do with every sweep before any shrinking."""
    from nnconform.verdict.runner import run

    case = sweep_case(sweep, sweep.make_inputs())
    info: dict[str, Any] = {"operation": sweep.operation.name, "data_type": sweep.data_type, "grid": sweep.grid}
    outcome = run(device, case, **options)
    got = outcome.actual[0] if outcome.actual is not None and len(outcome.actual) == 1 else None
    want = case.expected[0]
    if not isinstance(got, np.ndarray) or got.shape != want.shape or got.dtype != want.dtype:
        return SweepRun(case, outcome, info, None)  # no values to measure: the runner's verdict
    given = [x for x in case.inputs if x is not None]  # a sweep gives every input
    stats = error_stats(case.model, want, got, inputs=given)
    info.update(stats.summary())
    return SweepRun(case, flush_verdict(outcome, stats), info, stats)


def subsets(failing: np.ndarray, worst: int) -> list[np.ndarray]:
    """Candidate failing-input sets, smallest first: the worst element alone, the first, worst
    and last failing elements, then up to 64 failing elements."""
    first, last = int(failing[0]), int(failing[-1])
    out = [np.array([worst]), np.unique(np.array([first, worst, last])), failing[:64]]
    seen, uniq = set(), []
    for s in out:
        key = tuple(int(i) for i in s)
        if key not in seen:
            seen.add(key)
            uniq.append(s)
    return uniq
