"""Operation signatures for random models: how to *construct* a candidate of each operation.

The type rules are not repeated here.  The operation modules' ``validate`` (through
``nnconform.reference.ops.registry``) stays the judge: every candidate built below is checked with the
operation's own ``validate`` and then run through its own ``execute`` (which also gives the
output shapes), and a candidate either fails is simply redrawn (see ``graphs.py``).  What this
module knows is what a validator cannot tell a generator: how to draw *likely valid* operands
for one data type and rank (shapes that fit together, parameters in range, quantisation
parameters such as conv bias scale = input scale x filter scale), plus the random-graph flags
of CTS:

- ``Data.connectable = False``: the input needs special values (LOG's positive input, DIV's
  non-zero divisor, lookup indices) and never takes an earlier operation's output;
- ``Out.connectable = False`` (CTS ``doNotConnect``): outputs of DIV, POW, REDUCE_PROD (may be
  inf) and L2_NORMALIZATION (NaN on fp16 overflow) feed nothing;
- ``Out.ignored``: not comparable (TOPK_V2 indices: ties make them ambiguous).

``SIGNATURES`` maps every covered operation to its :class:`Signature`; ``EXCLUDED`` maps every
other registered operation to the reason it is not generated.  The data types of a signature
are the registry's ``OpDef.data_types`` limited to the random-graph types (``GRAPH_TYPES``).
"""

from __future__ import annotations

import builtins
import math
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from nnconform.generators.values import VALUE_CLASSES, stored_range, type_family
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.conv_common import product_scale
from nnconform.reference.ops.registry import load_all

FLOAT_TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
QUANT_TYPES = (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
# The tensor types random models are built from (CTS: fp32, fp16, int32, bool8, quant8; we
# add quant8 signed).
GRAPH_TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32, T.TENSOR_BOOL8) + QUANT_TYPES
ALL_RANKS = (1, 2, 3, 4)
# Quantisation-parameter classes: tiny and huge scales (1.0 is the multiplier's exact edge)
EXTREME_SCALES = (1e-6, 1.0 / 4096, 1e-3, 1.0, 16.0, 1000.0)
# Shape classes drawn on purpose (issue 20), beside the ordinary balanced shapes:
# - zero_sized: the primary input has a 0 dimension.  A request cannot carry an empty
#   tensor, so it is made inside the model, as NNAPI models do: a SLICE of size 0 in one
#   dimension of a model input (graphs.py);
# - broadcast_ranks: a rank-1 operand broadcast against a rank-4 one (either way round);
# - max_dim: one dimension as long as the configuration allows (max_dim, within max_elems),
#   the others 1;
# - unknown_dims: the model's outputs have unknown dimensions (NNAPI allows it for every
#   model output): the driver must work them out and report them (graphs.py, at the end).
# (Rank 0 is not a class: in NNAPI a tensor operand of rank 0 has an unknown rank, not a
# scalar shape, and IF/WHILE shape classes live in control_flow.py.)
SHAPE_CLASSES = ("zero_sized", "broadcast_ranks", "max_dim", "unknown_dims")


class Drawer(Protocol):
    """Where the choices come from: Hypothesis (shrinkable) or a seeded ``random.Random``."""

    def integer(self, lo: int, hi: int) -> int: ...
    def boolean(self) -> bool: ...
    def choice(self, seq: Sequence[Any]) -> Any: ...


# ---------------------------------------------------------------------------------------
# Candidate operands
# ---------------------------------------------------------------------------------------


@dataclass
class Data:
    """A tensor input with random values: an earlier output, a model input or a constant."""

    type: T
    dims: tuple[int, ...]
    scale: float = 0.0
    zero_point: int = 0
    lo: float | None = None  # value range (None: values.py default)
    hi: float | None = None
    nonzero: bool = False
    connectable: bool = True
    free_quant: bool = True  # may adopt an earlier output's scale / zero point
    source: int | None = None  # operand index of the earlier output it is (set by graphs)


@dataclass
class Param:
    """A constant the signature decides: scalars and structural tensors (shapes, axes, ...)."""

    type: T
    value: Any
    dims: tuple[int, ...] = ()


@dataclass
class Omitted:
    type: T


@dataclass
class Out:
    type: T
    scale: float = 0.0
    zero_point: int = 0
    connectable: bool = True
    ignored: bool = False


@dataclass
class Candidate:
    op: Op
    inputs: list
    outputs: list[Out]


@dataclass
class Signature:
    op: Op
    build: Callable[["Ctx"], Candidate]  # a builder raises Reject rather than return nothing
    ranks: tuple[int, ...]
    types: tuple[T, ...] = ()
    note: str = ""
    # value classes (values.VALUE_CLASSES) meaningful for this operation, per type family;
    # filled by _finish() from the declarations beside EXCLUDED
    value_classes: dict[str, tuple[str, ...]] | None = None
    # shape classes (SHAPE_CLASSES) meaningful for this operation, per data type (_finish())
    shape_classes: dict[T, tuple[str, ...]] | None = None

    def classes_for(self, t: T) -> tuple[str, ...]:
        """The value classes drawn on purpose for an input of type ``t`` of this operation."""
        return (self.value_classes or {}).get(type_family(t), ())

    def shapes_for(self, t: T) -> tuple[str, ...]:
        """The shape classes drawn on purpose for this operation at data type ``t``."""
        return (self.shape_classes or {}).get(T(t), ())


class Reject(Exception):
    """The builder cannot make a candidate from what it was given (e.g. an odd shape)."""


# ---------------------------------------------------------------------------------------
# The builder's toolbox
# ---------------------------------------------------------------------------------------


class Ctx:
    """What a builder sees: the data type and rank it builds for, dimension limits, the
    choices source, and optionally ``given``: an earlier output to use as the primary input.
    Its draws are named ``int`` and ``bool``, so annotations in this class spell the builtin
    types ``builtins.int`` / ``builtins.bool``."""

    op: Op  # the operation being built, set by build_candidate

    def __init__(
        self,
        draw: Drawer,
        dtype: T,
        rank: builtins.int,
        max_dim: builtins.int,
        max_elems: builtins.int,
        given: Data | None = None,
        shape_class: str | None = None,
    ):
        self.d, self.dtype, self.rank = draw, T(dtype), rank
        self.max_dim, self.max_elems = max_dim, max_elems
        self.given = given
        self.used_given = False
        # the shape class this candidate is drawn for (SHAPE_CLASSES), if any; max_dim
        # shapes the first fresh tensor only (the primary input)
        self.shape_class = shape_class
        self._long_dim_pending = shape_class == "max_dim"

    # draws ------------------------------------------------------------------------------
    def int(self, lo: builtins.int, hi: builtins.int) -> builtins.int:
        return self.d.integer(lo, hi) if hi > lo else lo

    def bool(self) -> builtins.bool:
        return self.d.boolean()

    def choice(self, seq):
        seq = list(seq)
        if not seq:
            raise Reject("nothing to choose from")
        return seq[0] if len(seq) == 1 else self.d.choice(seq)

    def chance(self, k: builtins.int, n: builtins.int) -> builtins.bool:
        """True with probability k/n; shrinks towards False."""
        return self.d.integer(0, n - 1) >= n - k

    def dim(self, hi: builtins.int | None = None, lo: builtins.int = 1) -> builtins.int:
        return self.int(lo, max(lo, min(self.max_dim, hi if hi is not None else self.max_dim)))

    def shape(self, rank: builtins.int | None = None, budget: builtins.int | None = None) -> tuple[builtins.int, ...]:
        """Random dims in [1, max_dim] with at most ``budget`` (max_elems) elements; each
        dimension is capped near budget ** (1 / rank) so shapes come out balanced."""
        rank = self.rank if rank is None else rank
        budget = budget or self.max_elems
        if self._long_dim_pending and rank:
            # the shape class max_dim: one dimension as long as allowed, the others 1
            self._long_dim_pending = False
            dims = [1] * rank
            dims[self.int(0, rank - 1)] = max(1, min(self.max_dim, budget))
            return tuple(dims)
        cap = max(1, int(round(budget ** (1.0 / rank))) * 2) if rank else 1
        dims = []
        for _ in range(rank):
            d = self.int(1, max(1, min(self.max_dim, cap, budget)))
            dims.append(d)
            budget = max(1, budget // d)
        return tuple(dims)

    def quant(self, t: T) -> tuple[float, builtins.int]:
        """CTS-like scale (0.125 .. 2) and zero point; one time in five a quantisation class of
        its own (issue 20): a scale from ``EXTREME_SCALES`` (1e-6 .. 1e3, so products and
        ratios reach the fixed-point multiplier's edges) and/or a zero point at a stored end."""
        if t not in QUANT_TYPES:
            return 0.0, 0
        lo, hi = (0, 255) if t == T.TENSOR_QUANT8_ASYMM else (-128, 127)
        scale, zp = self.int(2, 32) / 16.0, self.int(lo, hi)
        if self.chance(1, 5):
            kind = self.int(0, 2)
            if kind != 1:
                scale = self.choice(EXTREME_SCALES)
            if kind != 0:
                zp = lo if self.bool() else hi
        return scale, zp

    # operands ---------------------------------------------------------------------------
    def primary(self, rank: builtins.int | None = None, connectable: builtins.bool = True, **kw) -> Data:
        """The operation's main input of ``dtype``: the given earlier output when there is
        one (and it fits), else a fresh one of the context's rank."""
        rank = self.rank if rank is None else rank
        g = self.given
        if g is not None and connectable and len(g.dims) == rank and not self.used_given:
            self.used_given = True
            return g
        return self.data(self.dtype, self.shape(rank), connectable=connectable, **kw)

    def data(self, t: T, dims, quant: tuple[float, builtins.int] | None = None, **kw) -> Data:
        s, z = quant if quant is not None else self.quant(t)
        return Data(T(t), tuple(int(x) for x in dims), s, z, **kw)

    def like(self, x: Data, dims=None, same_quant: builtins.bool = False, **kw) -> Data:
        """Another tensor of x's type (own quantisation unless ``same_quant``)."""
        q = (x.scale, x.zero_point) if same_quant else None
        return self.data(x.type, x.dims if dims is None else dims, quant=q, free_quant=not same_quant, **kw)

    def out(self, t: T | None = None, like: Data | None = None, quant: tuple | None = None, **kw) -> Out:
        """Output of type ``t`` (default dtype); quantisation: ``like``'s, ``quant``, or own."""
        t = T(self.dtype if t is None else t)
        if like is not None and t in QUANT_TYPES:
            quant = (like.scale, like.zero_point)
        s, z = quant if quant is not None else self.quant(t)
        return Out(t, s, z, **kw)

    def i32(self, v: builtins.int) -> Param:
        return Param(T.INT32, int(v))

    def b(self, v: builtins.bool) -> Param:
        return Param(T.BOOL, bool(v))

    def fscalar(self, v: float) -> Param:
        """FLOAT16 scalar for fp16 operations, FLOAT32 otherwise."""
        return Param(T.FLOAT16 if self.dtype == T.TENSOR_FLOAT16 else T.FLOAT32, float(v))

    def tensor_i32(self, values, dims=None) -> Param:
        arr = np.asarray(values, dtype=np.int32)
        return Param(T.TENSOR_INT32, arr, tuple(arr.shape) if dims is None else tuple(dims))

    def act(self) -> Param:
        return self.i32(0 if self.dtype == T.TENSOR_INT32 else self.int(0, 3))

    def real(self, lo: float, hi: float, steps: builtins.int = 16) -> float:
        """A value on a grid of ``steps`` between lo and hi (readable in dumped specs)."""
        return lo + (hi - lo) * self.int(0, steps) / steps

    def axis(self, rank: builtins.int, negative: builtins.bool = True) -> builtins.int:
        return self.int(-rank if negative else 0, rank - 1)

    def broadcast_dims(self, dims: tuple[builtins.int, ...]) -> tuple[builtins.int, ...]:
        """dims itself (mostly), or a broadcastable variant (some sizes 1, leading dims gone).
        For the shape class broadcast_ranks: a rank-1 operand against a rank-4 one, or a
        rank-4 operand (its last dimension dims' only one, or 1) against a rank-1 one."""
        if self.shape_class == "broadcast_ranks" and len(dims) == 4:
            return (dims[-1],) if self.bool() else (1,)
        if self.shape_class == "broadcast_ranks" and len(dims) == 1:
            lead = self.shape(3, budget=max(1, self.max_elems // max(1, dims[0])))
            return lead + ((dims[0],) if self.bool() else (1,))
        if not self.chance(1, 3):
            return dims
        drop = self.int(0, len(dims) - 1)
        return tuple(1 if self.bool() else d for d in dims[drop:])


# ---------------------------------------------------------------------------------------
# Builders, by family
# ---------------------------------------------------------------------------------------

SIGNATURES: dict[Op, Signature] = {}


def sig(*ops: Op, ranks: tuple[int, ...] = ALL_RANKS, note: str = ""):
    def deco(fn):
        for o in ops:
            SIGNATURES[o] = Signature(o, fn, ranks, note=note)
        return fn

    return deco


def _op(ctx: Ctx) -> Op:
    return ctx.op  # set by build_candidate


# -- element-wise unary ---------------------------------------------------------------------


@sig(Op.RELU, Op.RELU1, Op.RELU6, Op.FLOOR, Op.ABS, Op.NEG, Op.EXP, Op.SIN, Op.LOGICAL_NOT)
def _unary_same(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    return Candidate(_op(ctx), [x], [ctx.out(like=x)])


@sig(Op.LOG, Op.SQRT, Op.RSQRT, note="input positive (0.1..2), so never an earlier output")
def _unary_positive(ctx: Ctx) -> Candidate:
    if ctx.dtype in QUANT_TYPES:
        return _rsqrt_quant(ctx)
    x = ctx.primary(connectable=False, lo=0.1, hi=2.0)
    return Candidate(_op(ctx), [x], [ctx.out(like=x)])


def _rsqrt_quant(ctx: Ctx) -> Candidate:
    """RSQRT of quant8 / quant8_signed (NNAPI feature level 7): stored values strictly above
    the zero point (a positive real input), and an output scale and zero point of its own
    that hold 1/sqrt of the whole input range (0.04 .. 2.9) without saturating."""
    lo, hi = stored_range(ctx.dtype)
    # not ctx.quant: an extreme scale would put 1/sqrt(x) far outside any output range
    scale, zp = ctx.int(2, 32) / 16.0, ctx.int(lo, hi)
    zp = min(zp, hi - 1)
    x = ctx.data(ctx.dtype, ctx.shape(), quant=(scale, zp), lo=zp + 1, hi=hi, connectable=False, free_quant=False)
    return Candidate(Op.RSQRT, [x], [Out(ctx.dtype, ctx.int(1, 8) / 64, lo + ctx.int(0, 16))])


@sig(Op.HARD_SWISH)
def _hard_swish(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    return Candidate(Op.HARD_SWISH, [x], [ctx.out()])


_FIXED_OUT_QUANT = {  # (scale, zp for QUANT8_ASYMM, zp for QUANT8_ASYMM_SIGNED)
    Op.LOGISTIC: (1 / 256, 0, -128),
    Op.SOFTMAX: (1 / 256, 0, -128),
    Op.TANH: (1 / 128, 128, 0),
    Op.L2_NORMALIZATION: (1 / 128, 128, 0),
}


def _fixed_out(ctx: Ctx, op: Op, **kw) -> Out:
    s, zu, zs = _FIXED_OUT_QUANT[op]
    if ctx.dtype in QUANT_TYPES:
        return Out(ctx.dtype, s, zu if ctx.dtype == T.TENSOR_QUANT8_ASYMM else zs, **kw)
    return Out(ctx.dtype, **kw)


@sig(Op.LOGISTIC, Op.TANH)
def _logistic_tanh(ctx: Ctx) -> Candidate:
    return Candidate(_op(ctx), [ctx.primary()], [_fixed_out(ctx, _op(ctx))])


@sig(Op.ELU)
def _elu(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    return Candidate(Op.ELU, [x, ctx.fscalar(ctx.real(0.0, 2.0))], [ctx.out(like=x)])


@sig(Op.CAST)
def _cast(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    convertible = (T.TENSOR_FLOAT16, T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM)
    to = ctx.choice(convertible) if x.type in convertible else x.type
    return Candidate(Op.CAST, [x], [ctx.out(to, like=x if to == x.type else None)])


@sig(Op.QUANTIZE)
def _quantize(ctx: Ctx) -> Candidate:
    return Candidate(Op.QUANTIZE, [ctx.primary()], [ctx.out(ctx.choice(QUANT_TYPES))])


@sig(Op.DEQUANTIZE)
def _dequantize(ctx: Ctx) -> Candidate:
    return Candidate(Op.DEQUANTIZE, [ctx.primary()], [ctx.out(ctx.choice(FLOAT_TYPES))])


# -- element-wise binary (broadcasting) -------------------------------------------------------


@sig(Op.ADD, Op.SUB, Op.MAXIMUM, Op.MINIMUM, Op.PRELU, Op.LOGICAL_AND, Op.LOGICAL_OR)
def _binary(ctx: Ctx) -> Candidate:
    op = _op(ctx)
    x = ctx.primary()
    y = ctx.like(x, ctx.broadcast_dims(x.dims))
    ins = [x, y] + ([ctx.act()] if op in (Op.ADD, Op.SUB) else [])
    return Candidate(op, ins, [ctx.out()])


@sig(Op.MUL)
def _mul(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    y = ctx.like(x, ctx.broadcast_dims(x.dims))
    out = ctx.out()
    if ctx.dtype in QUANT_TYPES:  # CTS: output scale in [s0 s1, 5 s0 s1] (strictly above)
        out.scale = float(np.float32(x.scale) * np.float32(y.scale)) * ctx.int(11, 50) / 10
        y.free_quant = x.free_quant = False
    return Candidate(Op.MUL, [x, y, ctx.act()], [out])


@sig(Op.DIV, note="divisor kept away from zero; output does not feed other operations")
def _div(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    y = ctx.like(x, ctx.broadcast_dims(x.dims), nonzero=True, connectable=False)
    return Candidate(Op.DIV, [x, y, ctx.act()], [ctx.out(connectable=False)])


@sig(Op.POW, note="base positive (0.1..2); output does not feed other operations")
def _pow(ctx: Ctx) -> Candidate:
    x = ctx.primary(connectable=False, lo=0.1, hi=2.0)
    y = ctx.like(x, ctx.broadcast_dims(x.dims), connectable=True)
    y.lo = y.hi = None
    return Candidate(Op.POW, [x, y], [ctx.out(connectable=False)])


@sig(Op.EQUAL, Op.NOT_EQUAL, Op.GREATER, Op.GREATER_EQUAL, Op.LESS, Op.LESS_EQUAL)
def _compare(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    y = ctx.like(x, ctx.broadcast_dims(x.dims))
    return Candidate(_op(ctx), [x, y], [ctx.out(T.TENSOR_BOOL8)])


@sig(Op.SELECT)
def _select(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    mask = ctx.data(T.TENSOR_BOOL8, x.dims)
    y = ctx.like(x)
    return Candidate(Op.SELECT, [mask, x, y], [ctx.out()])


# -- softmax and normalisations -------------------------------------------------------------


@sig(Op.SOFTMAX)
def _softmax(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    ins = [x, ctx.fscalar(ctx.real(0.125, 2.0, 15))]
    if ctx.bool():
        ins.append(ctx.i32(ctx.axis(len(x.dims))))
    return Candidate(Op.SOFTMAX, ins, [_fixed_out(ctx, Op.SOFTMAX)])


@sig(Op.LOG_SOFTMAX)
def _log_softmax(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    ins = [x, ctx.fscalar(ctx.real(0.125, 2.0, 15)), ctx.i32(ctx.axis(len(x.dims)))]
    return Candidate(Op.LOG_SOFTMAX, ins, [ctx.out(like=x)])


@sig(Op.L2_NORMALIZATION, note="output does not feed other operations (CTS doNotConnect)")
def _l2_norm(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    ins = [x] + ([ctx.i32(ctx.axis(len(x.dims)))] if ctx.bool() else [])
    return Candidate(Op.L2_NORMALIZATION, ins, [_fixed_out(ctx, Op.L2_NORMALIZATION, connectable=False)])


@sig(Op.LOCAL_RESPONSE_NORMALIZATION)
def _lrn(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    ins = [
        x,
        ctx.i32(ctx.int(0, 3)),
        ctx.fscalar(ctx.real(0.5, 2.0, 6)),
        ctx.fscalar(ctx.real(0.125, 1.0, 7)),
        ctx.fscalar(ctx.real(0.125, 1.0, 7)),
    ]
    if ctx.bool():
        ins.append(ctx.i32(ctx.axis(len(x.dims))))
    return Candidate(Op.LOCAL_RESPONSE_NORMALIZATION, ins, [ctx.out(like=x)])


@sig(Op.INSTANCE_NORMALIZATION, ranks=(4,))
def _instance_norm(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    ins = [
        x,
        ctx.fscalar(ctx.real(0.25, 2.0, 7)),
        ctx.fscalar(ctx.real(-1.0, 1.0, 8)),
        ctx.fscalar(ctx.choice((1e-3, 1e-2, 0.1))),
        ctx.b(ctx.bool()),
    ]
    return Candidate(Op.INSTANCE_NORMALIZATION, ins, [ctx.out(like=x)])


# -- pooling and convolutions ---------------------------------------------------------------


def _hw(x: Data, nchw: bool) -> tuple[int, int, int]:
    """(height, width, channels) of a 4-D tensor in the given layout."""
    if nchw:
        return x.dims[2], x.dims[3], x.dims[1]
    return x.dims[1], x.dims[2], x.dims[3]


def _window(ctx: Ctx, size: int, limit: int = 5) -> int:
    return ctx.int(1, max(1, min(size, limit)))


@sig(Op.AVERAGE_POOL_2D, Op.MAX_POOL_2D, Op.L2_POOL_2D, ranks=(4,))
def _pool(ctx: Ctx) -> Candidate:
    op = _op(ctx)
    x = ctx.primary()
    nchw = ctx.chance(1, 4)
    h, w, _ = _hw(x, nchw)
    fw, fh = _window(ctx, w), _window(ctx, h)
    sw, sh = ctx.int(1, 3), ctx.int(1, 3)
    if ctx.bool():  # implicit padding
        ins = [x, ctx.i32(ctx.int(1, 2)), ctx.i32(sw), ctx.i32(sh), ctx.i32(fw), ctx.i32(fh), ctx.act()]
    else:
        pads = [ctx.int(0, fw - 1), ctx.int(0, fw - 1), ctx.int(0, fh - 1), ctx.int(0, fh - 1)]
        ins = [x, *map(ctx.i32, pads), ctx.i32(sw), ctx.i32(sh), ctx.i32(fw), ctx.i32(fh), ctx.act()]
    if nchw or ctx.bool():
        ins.append(ctx.b(nchw))
    return Candidate(op, ins, [ctx.out(like=x)])


def _filter_and_bias(ctx: Ctx, x: Data, fdims: tuple[int, ...], nbias: int) -> tuple[Data, Data]:
    flt = ctx.data(x.type, fdims, free_quant=False)
    if x.type in QUANT_TYPES:
        x.free_quant = False
        bias = ctx.data(
            T.TENSOR_INT32, (nbias,), quant=(product_scale(x.scale, flt.scale), 0), lo=-1000, hi=1000, free_quant=False
        )
    else:
        bias = ctx.data(x.type, (nbias,))
    return flt, bias


def _conv_out(ctx: Ctx, x: Data, flt: Data) -> Out:
    """CTS: output scale in [b, 5b] with b = input scale x filter scale."""
    out = ctx.out()
    if x.type in QUANT_TYPES:
        out.scale = product_scale(x.scale, flt.scale) * ctx.int(11, 50) / 10
    return out


def _conv_tail(
    ctx: Ctx, nchw: bool, allow_dilation: bool, h: int, w: int, fh: int, fw: int, force_layout: bool = False
) -> list[Param]:
    tail = []
    dil = allow_dilation and ctx.chance(1, 4)
    if nchw or dil or force_layout or ctx.bool():
        tail.append(ctx.b(nchw))
    if dil:
        dw = ctx.int(1, max(1, (w - 1) // max(1, fw - 1))) if fw > 1 else ctx.int(1, 2)
        dh = ctx.int(1, max(1, (h - 1) // max(1, fh - 1))) if fh > 1 else ctx.int(1, 2)
        tail += [ctx.i32(dw), ctx.i32(dh)]
    return tail


@sig(Op.CONV_2D, Op.DEPTHWISE_CONV_2D, Op.GROUPED_CONV_2D, ranks=(4,), note="per-channel filters are not generated")
def _conv(ctx: Ctx) -> Candidate:
    op = _op(ctx)
    x = ctx.primary()
    nchw = ctx.chance(1, 4)
    h, w, c = _hw(x, nchw)
    fh, fw = _window(ctx, h), _window(ctx, w)
    extra: list[Param] = []
    if op == Op.CONV_2D:
        o = ctx.dim(8)
        fdims = (o, fh, fw, c)
    elif op == Op.DEPTHWISE_CONV_2D:
        m = ctx.int(1, 3)
        o = c * m
        fdims = (1, fh, fw, o)
        extra = [ctx.i32(m)]
    else:
        g = ctx.choice([k for k in range(1, min(c, 4) + 1) if c % k == 0])
        o = g * ctx.int(1, 3)
        fdims = (o, fh, fw, c // g)
        extra = [ctx.i32(g)]
    flt, bias = _filter_and_bias(ctx, x, fdims, o)
    sw, sh = ctx.int(1, 3), ctx.int(1, 3)
    if ctx.bool():
        pad = [ctx.i32(ctx.int(1, 2))]
    else:
        pad = [
            ctx.i32(ctx.int(0, fw - 1)),
            ctx.i32(ctx.int(0, fw - 1)),
            ctx.i32(ctx.int(0, fh - 1)),
            ctx.i32(ctx.int(0, fh - 1)),
        ]
    ins = [x, flt, bias, *pad, ctx.i32(sw), ctx.i32(sh), *extra, ctx.act()]
    ins += _conv_tail(ctx, nchw, op != Op.GROUPED_CONV_2D, h, w, fh, fw, force_layout=op == Op.GROUPED_CONV_2D)
    return Candidate(op, ins, [_conv_out(ctx, x, flt)])


@sig(Op.TRANSPOSE_CONV_2D, ranks=(4,), note="explicit padding form; per-channel filters not generated")
def _transpose_conv(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    nchw = ctx.chance(1, 4)
    h, w, c = _hw(x, nchw)
    o, fh, fw = ctx.dim(8), ctx.int(1, 4), ctx.int(1, 4)
    flt, bias = _filter_and_bias(ctx, x, (o, fh, fw, c), o)
    pads = [ctx.int(0, fw - 1), ctx.int(0, fw - 1), ctx.int(0, fh - 1), ctx.int(0, fh - 1)]
    ins = [x, flt, bias, *map(ctx.i32, pads), ctx.i32(ctx.int(1, 3)), ctx.i32(ctx.int(1, 3)), ctx.act(), ctx.b(nchw)]
    return Candidate(Op.TRANSPOSE_CONV_2D, ins, [_conv_out(ctx, x, flt)])


@sig(Op.FULLY_CONNECTED, ranks=(2, 3, 4))
def _fully_connected(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    units = ctx.dim(16)
    flt, bias = _filter_and_bias(ctx, x, (units, x.dims[-1]), units)
    return Candidate(Op.FULLY_CONNECTED, [x, flt, bias, ctx.act()], [_conv_out(ctx, x, flt)])


@sig(Op.BATCH_MATMUL, ranks=(2, 3, 4))
def _batch_matmul(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    adj_x, adj_y = ctx.bool(), ctx.bool()
    inner = x.dims[-2] if adj_x else x.dims[-1]
    n = ctx.dim(16)
    ydims = x.dims[:-2] + ((n, inner) if adj_y else (inner, n))
    y = ctx.like(x, ydims)
    return Candidate(Op.BATCH_MATMUL, [x, y, ctx.b(adj_x), ctx.b(adj_y)], [ctx.out()])


@sig(Op.RESIZE_BILINEAR, Op.RESIZE_NEAREST_NEIGHBOR, ranks=(4,))
def _resize(ctx: Ctx) -> Candidate:
    op = _op(ctx)
    x = ctx.primary()
    nchw = ctx.chance(1, 4)
    h, w, _ = _hw(x, nchw)
    if ctx.chance(1, 3):
        sw, sh = ctx.real(0.5, 2.0, 6), ctx.real(0.5, 2.0, 6)
        if math.floor(w * sw) < 1 or math.floor(h * sh) < 1:
            raise Reject("scale gives an empty output")
        ins = [x, ctx.fscalar(sw), ctx.fscalar(sh)]
    else:
        ins = [x, ctx.i32(ctx.int(1, 2 * w)), ctx.i32(ctx.int(1, 2 * h))]
    flags = ctx.int(0, 2)  # 0 none, 1 align_corners, 2 half_pixel_centers
    if op == Op.RESIZE_NEAREST_NEIGHBOR or nchw or flags or ctx.bool():
        ins.append(ctx.b(nchw))
    if flags:
        ins += [ctx.b(flags == 1), ctx.b(flags == 2)]
    return Candidate(op, ins, [ctx.out(like=x)])


# -- data movement ---------------------------------------------------------------------------


def _same(ctx: Ctx, op: Op, x: Data, *params) -> Candidate:
    return Candidate(op, [x, *params], [ctx.out(like=x)])


@sig(Op.CONCATENATION)
def _concat(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    axis = ctx.int(0, len(x.dims) - 1)
    others = []
    for _ in range(ctx.int(0, 2)):
        dims = list(x.dims)
        dims[axis] = ctx.dim(max(1, x.dims[axis]))
        others.append(ctx.like(x, tuple(dims)))
    return Candidate(Op.CONCATENATION, [x, *others, ctx.i32(axis)], [ctx.out()])


def _factor_shape(ctx: Ctx, count: int, rank: int) -> list[int]:
    dims = [1] * rank
    n = count
    p = 2
    while n > 1:  # spread the prime factors over the new dimensions
        while n % p == 0:
            dims[ctx.int(0, rank - 1)] *= p
            n //= p
        p += 1 if p == 2 else 2
        if p * p > n and n > 1:
            dims[ctx.int(0, rank - 1)] *= n
            n = 1
    return dims


@sig(Op.RESHAPE)
def _reshape(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    shape = _factor_shape(ctx, math.prod(x.dims), ctx.int(1, 4))
    if ctx.chance(1, 3):
        shape[ctx.int(0, len(shape) - 1)] = -1
    return _same(ctx, Op.RESHAPE, x, ctx.tensor_i32(shape))


@sig(Op.SQUEEZE)
def _squeeze(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    ones = [i for i, d in enumerate(x.dims) if d == 1]
    if ones and ctx.bool():
        axes = [i - len(x.dims) if ctx.bool() else i for i in ones if ctx.bool()] or [ones[0]]
        return _same(ctx, Op.SQUEEZE, x, ctx.tensor_i32(axes))
    return _same(ctx, Op.SQUEEZE, x, Omitted(T.TENSOR_INT32))


@sig(Op.EXPAND_DIMS, ranks=(1, 2, 3))
def _expand_dims(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    n = len(x.dims) + 1
    return _same(ctx, Op.EXPAND_DIMS, x, ctx.i32(ctx.int(-n, n - 1)))


@sig(Op.TRANSPOSE)
def _transpose(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    if len(x.dims) == 2 and ctx.chance(1, 4):
        return _same(ctx, Op.TRANSPOSE, x, Omitted(T.TENSOR_INT32))
    perm = list(range(len(x.dims)))
    for i in range(len(perm) - 1, 0, -1):  # Fisher-Yates with drawn indexes
        j = ctx.int(0, i)
        perm[i], perm[j] = perm[j], perm[i]
    return _same(ctx, Op.TRANSPOSE, x, ctx.tensor_i32(perm))


def _layout_tail(ctx: Ctx, nchw: bool) -> list[Param]:
    return [ctx.b(nchw)] if nchw or ctx.bool() else []


@sig(Op.DEPTH_TO_SPACE, ranks=(4,))
def _depth_to_space(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    nchw = ctx.chance(1, 4)
    c = _hw(x, nchw)[2]
    bs = ctx.choice([b for b in (1, 2, 3) if c % (b * b) == 0])
    return _same(ctx, Op.DEPTH_TO_SPACE, x, ctx.i32(bs), *_layout_tail(ctx, nchw))


@sig(Op.SPACE_TO_DEPTH, ranks=(4,))
def _space_to_depth(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    nchw = ctx.chance(1, 4)
    h, w, _ = _hw(x, nchw)
    bs = ctx.choice([b for b in (1, 2, 3) if h % b == 0 and w % b == 0])
    return _same(ctx, Op.SPACE_TO_DEPTH, x, ctx.i32(bs), *_layout_tail(ctx, nchw))


@sig(Op.BATCH_TO_SPACE_ND, ranks=(4,))
def _batch_to_space(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    nchw = ctx.chance(1, 4)
    b = x.dims[0]
    pairs = [(i, j) for i in (1, 2, 3) for j in (1, 2, 3) if b % (i * j) == 0]
    bh, bw = ctx.choice(pairs)
    return _same(ctx, Op.BATCH_TO_SPACE_ND, x, ctx.tensor_i32([bh, bw]), *_layout_tail(ctx, nchw))


@sig(Op.SPACE_TO_BATCH_ND, ranks=(4,))
def _space_to_batch(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    nchw = ctx.chance(1, 4)
    h, w, _ = _hw(x, nchw)
    pads = []
    block = [ctx.int(1, 3), ctx.int(1, 3)]
    for size, bsz in ((h, block[0]), (w, block[1])):
        head = ctx.int(0, 2)
        tail = (-(size + head)) % bsz + bsz * ctx.int(0, 1)
        pads.append([head, tail])
    return _same(ctx, Op.SPACE_TO_BATCH_ND, x, ctx.tensor_i32(block), ctx.tensor_i32(pads), *_layout_tail(ctx, nchw))


@sig(Op.PAD, Op.PAD_V2)
def _pad(ctx: Ctx) -> Candidate:
    op = _op(ctx)
    x = ctx.primary()
    pads = ctx.tensor_i32([[ctx.int(0, 2), ctx.int(0, 2)] for _ in x.dims])
    params = [pads]
    if op == Op.PAD_V2:
        if x.type in QUANT_TYPES:
            lo, hi = (0, 255) if x.type == T.TENSOR_QUANT8_ASYMM else (-128, 127)
            params.append(ctx.i32(ctx.int(lo, hi)))
        else:
            params.append(ctx.fscalar(ctx.real(-2.0, 2.0)))
    return _same(ctx, op, x, *params)


@sig(Op.MIRROR_PAD)
def _mirror_pad(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    mode = ctx.int(0, 1)
    limit = [d - 1 if mode == 0 else d for d in x.dims]
    pads = [[ctx.int(0, min(2, m)), ctx.int(0, min(2, m))] for m in limit]
    return _same(ctx, Op.MIRROR_PAD, x, ctx.tensor_i32(pads), ctx.i32(mode))


@sig(Op.STRIDED_SLICE)
def _strided_slice(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    begin, end, strides = [], [], []
    begin_mask = end_mask = shrink = 0
    for i, d in enumerate(x.dims):
        kind = ctx.int(0, 5)
        if kind == 5:  # shrink this axis to one element
            b = ctx.int(0, d - 1)
            begin.append(b - d if ctx.bool() else b)
            end.append(b + 1)
            strides.append(1)
            shrink |= 1 << i
        elif kind == 4:  # walk backwards from somewhere to the start
            begin.append(ctx.int(0, d - 1))
            end.append(0)
            strides.append(-ctx.int(1, 2))
            end_mask |= 1 << i
        else:
            b = ctx.int(0, d - 1)
            begin.append(b)
            end.append(ctx.int(b + 1, d))
            strides.append(ctx.int(1, 3))
            if kind == 3:
                begin_mask |= 1 << i
    return _same(
        ctx,
        Op.STRIDED_SLICE,
        x,
        ctx.tensor_i32(begin),
        ctx.tensor_i32(end),
        ctx.tensor_i32(strides),
        ctx.i32(begin_mask),
        ctx.i32(end_mask),
        ctx.i32(shrink),
    )


@sig(Op.SLICE)
def _slice(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    begin = [ctx.int(0, d - 1) for d in x.dims]
    size = [-1 if ctx.chance(1, 4) else ctx.int(1, d - b) for b, d in zip(begin, x.dims)]
    return _same(ctx, Op.SLICE, x, ctx.tensor_i32(begin), ctx.tensor_i32(size))


@sig(Op.SPLIT)
def _split(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    axis = ctx.axis(len(x.dims))
    d = x.dims[axis]
    n = ctx.choice([k for k in (1, 2, 3, 4) if d % k == 0])
    return Candidate(Op.SPLIT, [x, ctx.i32(axis), ctx.i32(n)], [ctx.out(like=x) for _ in range(n)])


@sig(Op.GATHER)
def _gather(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    axis = ctx.axis(len(x.dims))
    k = ctx.int(1, max(1, min(2, 5 - len(x.dims))))
    idims = ctx.shape(k, budget=16)
    idx = Data(T.TENSOR_INT32, idims, lo=0, hi=x.dims[axis] - 1, connectable=False)
    return Candidate(Op.GATHER, [x, ctx.i32(axis), idx], [ctx.out(like=x)])


@sig(Op.TILE)
def _tile(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    room = max(1, ctx.max_elems * 4 // max(1, math.prod(x.dims)))
    mult = []
    for _ in x.dims:
        m = ctx.int(1, max(1, min(3, room)))
        room = max(1, room // m)
        mult.append(m)
    return _same(ctx, Op.TILE, x, ctx.tensor_i32(mult))


@sig(Op.REVERSE)
def _reverse(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    return _same(ctx, Op.REVERSE, x, ctx.tensor_i32([ctx.int(0, len(x.dims) - 1)]))


@sig(Op.PACK, ranks=(1, 2, 3))
def _pack(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    others = [ctx.like(x, same_quant=True) for _ in range(ctx.int(0, 2))]
    axis = ctx.int(0, len(x.dims))
    return Candidate(Op.PACK, [ctx.i32(axis), x, *others], [ctx.out(like=x)])


@sig(Op.CHANNEL_SHUFFLE)
def _channel_shuffle(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    axis = ctx.axis(len(x.dims))
    g = ctx.choice([k for k in range(1, min(x.dims[axis], 6) + 1) if x.dims[axis] % k == 0])
    return _same(ctx, Op.CHANNEL_SHUFFLE, x, ctx.i32(g), ctx.i32(axis))


@sig(Op.EMBEDDING_LOOKUP, ranks=(2, 3, 4), note="lookups in range, so never an earlier output")
def _embedding_lookup(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    lookups = Data(T.TENSOR_INT32, (ctx.int(1, 8),), lo=0, hi=x.dims[0] - 1, connectable=False)
    return Candidate(Op.EMBEDDING_LOOKUP, [lookups, x], [ctx.out(like=x)])


@sig(Op.FILL, note="output only: its inputs are a shape and a scalar")
def _fill(ctx: Ctx) -> Candidate:
    shape = ctx.shape()
    if ctx.dtype == T.TENSOR_INT32:
        value = Param(T.INT32, ctx.int(-5, 255))
    else:
        value = ctx.fscalar(ctx.real(-2.0, 2.0))
    return Candidate(Op.FILL, [ctx.tensor_i32(shape), value], [ctx.out()])


@sig(Op.RANK)
def _rank(ctx: Ctx) -> Candidate:
    return Candidate(Op.RANK, [ctx.primary()], [Out(T.INT32, connectable=False)])


# -- reductions and arg-ops ----------------------------------------------------------------


def _axes(ctx: Ctx, rank: int) -> list[int]:
    axes = [a - rank if ctx.bool() else a for a in range(rank) if ctx.bool()]
    return axes or [ctx.axis(rank)]


@sig(Op.MEAN)
def _mean(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    return _same(ctx, Op.MEAN, x, ctx.tensor_i32(_axes(ctx, len(x.dims))), ctx.i32(ctx.int(0, 1)))


@sig(
    Op.REDUCE_ALL,
    Op.REDUCE_ANY,
    Op.REDUCE_MAX,
    Op.REDUCE_MIN,
    Op.REDUCE_PROD,
    Op.REDUCE_SUM,
    note="REDUCE_PROD's output does not feed other operations",
)
def _reduce(ctx: Ctx) -> Candidate:
    op = _op(ctx)
    x = ctx.primary()
    out = ctx.out(like=x, connectable=op != Op.REDUCE_PROD)
    return Candidate(op, [x, ctx.tensor_i32(_axes(ctx, len(x.dims))), ctx.b(ctx.bool())], [out])


@sig(Op.ARGMAX, Op.ARGMIN)
def _arg(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    return Candidate(_op(ctx), [x, ctx.i32(ctx.axis(len(x.dims)))], [ctx.out(T.TENSOR_INT32)])


@sig(Op.TOPK_V2, note="indices output ignored and not connected (ties make it ambiguous)")
def _topk(ctx: Ctx) -> Candidate:
    x = ctx.primary()
    k = ctx.int(1, x.dims[-1])
    return Candidate(
        Op.TOPK_V2, [x, ctx.i32(k)], [ctx.out(like=x), Out(T.TENSOR_INT32, ignored=True, connectable=False)]
    )


# ---------------------------------------------------------------------------------------
# Exclusions: every registered operation without a signature, and why.
# ---------------------------------------------------------------------------------------

_RECURRENT = "recurrent cell with state and many weight tensors; not generated (absent from CTS random graphs)"
_BOXES = "inputs are structured boxes/scores; not generated (absent from CTS random graphs)"
EXCLUDED: dict[Op, str] = {
    Op.LSTM: _RECURRENT,
    Op.RNN: _RECURRENT,
    Op.SVDF: _RECURRENT,
    Op.BIDIRECTIONAL_SEQUENCE_LSTM: _RECURRENT,
    Op.BIDIRECTIONAL_SEQUENCE_RNN: _RECURRENT,
    Op.UNIDIRECTIONAL_SEQUENCE_LSTM: _RECURRENT,
    Op.UNIDIRECTIONAL_SEQUENCE_RNN: _RECURRENT,
    Op.QUANTIZED_16BIT_LSTM: _RECURRENT,
    Op.QUANTIZED_LSTM: _RECURRENT,
    Op.LSH_PROJECTION: "hashes with a random seed tensor; not generated (absent from CTS random graphs)",
    Op.BOX_WITH_NMS_LIMIT: _BOXES,
    Op.DETECTION_POSTPROCESSING: _BOXES,
    Op.GENERATE_PROPOSALS: _BOXES,
    Op.AXIS_ALIGNED_BBOX_TRANSFORM: _BOXES,
    Op.RANDOM_MULTINOMIAL: "output is random draws: not comparable element by element",
    Op.IF: "control flow: wrapped around generated graphs by generators/control_flow.py, not drawn as a single op",
    Op.WHILE: "control flow: wrapped around generated graphs by generators/control_flow.py, not drawn as a single op",
    Op.HASHTABLE_LOOKUP: "keys must be sorted and unique; not generated yet",
    Op.ROI_ALIGN: "ROI inputs need valid boxes and batch indexes; not generated yet (CTS: ROI inputs doNotConnect)",
    Op.ROI_POOLING: "ROI inputs need valid boxes and batch indexes; not generated yet (CTS: ROI inputs doNotConnect)",
    Op.HEATMAP_MAX_KEYPOINT: "box input must hold valid boxes; not generated yet",
}


# ---------------------------------------------------------------------------------------
# Value classes each operation declares meaningful (values.VALUE_CLASSES).
# ---------------------------------------------------------------------------------------
# Every operation takes the finite classes: floats subnormal, -0.0, near-fp16-overflow and
# x.5 ties; int32 negative, zero, +-1 and negative odd values (floor vs truncation); quant
# the stored extremes and the zero point.  Infinities (floats) and the int32 limits are
# declared only where NNAPI defines the result without overflow or NaN: selection, ordering
# and data movement, and the saturating activations.  NaN only where IEEE defines a non-NaN
# result (comparisons: every one but NOT_EQUAL is false).
_FINITE = {
    "float": ("subnormal", "signed_zero", "fp16_overflow", "tie"),
    "int32": ("negative", "zero", "unit", "div_rounding"),
    "quant": VALUE_CLASSES["quant"],
    "bool": (),
}
_COMPARE = (Op.EQUAL, Op.NOT_EQUAL, Op.GREATER, Op.GREATER_EQUAL, Op.LESS, Op.LESS_EQUAL)
_DATA_MOVEMENT = (
    Op.RESHAPE,
    Op.SQUEEZE,
    Op.EXPAND_DIMS,
    Op.TRANSPOSE,
    Op.CONCATENATION,
    Op.GATHER,
    Op.SLICE,
    Op.STRIDED_SLICE,
    Op.TILE,
    Op.REVERSE,
    Op.PACK,
    Op.SPLIT,
    Op.PAD,
    Op.PAD_V2,
    Op.MIRROR_PAD,
    Op.DEPTH_TO_SPACE,
    Op.SPACE_TO_DEPTH,
    Op.BATCH_TO_SPACE_ND,
    Op.SPACE_TO_BATCH_ND,
    Op.CHANNEL_SHUFFLE,
    Op.SELECT,
    Op.EMBEDDING_LOOKUP,
)
# +-inf (floats) and INT32_MIN/MAX (int32) give a defined result
EXTREMES_DEFINED = frozenset(
    _COMPARE
    + _DATA_MOVEMENT
    + (
        Op.MAXIMUM,
        Op.MINIMUM,
        Op.ARGMAX,
        Op.ARGMIN,
        Op.TOPK_V2,
        Op.REDUCE_MAX,
        Op.REDUCE_MIN,
        Op.MAX_POOL_2D,
        Op.RELU,
        Op.RELU1,
        Op.RELU6,
        Op.LOGISTIC,
        Op.TANH,
        Op.RANK,
    )
)
# +-inf only (ABS/NEG of INT32_MIN overflow; FLOOR has no int32 form)
INF_ONLY = frozenset((Op.ABS, Op.NEG, Op.FLOOR))
NAN_DEFINED = frozenset(_COMPARE)


def declared_classes(op: Op) -> dict[str, tuple[str, ...]]:
    """The value classes meaningful for ``op``, per type family (see above)."""
    fl, i32 = list(_FINITE["float"]), list(_FINITE["int32"])
    if op in EXTREMES_DEFINED or op in INF_ONLY:
        fl.append("inf")
    if op in EXTREMES_DEFINED:
        i32.append("limit")
    if op in NAN_DEFINED:
        fl.append("nan")
    return {"float": tuple(fl), "int32": tuple(i32), "quant": _FINITE["quant"], "bool": ()}


# Shape classes each operation declares meaningful (SHAPE_CLASSES); every operation takes
# max_dim and unknown_dims.
# zero_sized: the operations that accept a zero-sized input (as AOSP's CpuExecutor does; the
# others fail the execution, e.g. the element-wise math functions, comparisons, ARGMAX),
# at the data types SLICE can produce one in.  Convolutions, pooling and the like accept
# an empty batch only.  tests/test_domains.py checks the list against the reference.
ZERO_SIZED_OPS = frozenset(
    (
        Op.ADD,
        Op.AVERAGE_POOL_2D,
        Op.CAST,
        Op.CONCATENATION,
        Op.CONV_2D,
        Op.DEPTHWISE_CONV_2D,
        Op.DEQUANTIZE,
        Op.DIV,
        Op.EXPAND_DIMS,
        Op.FULLY_CONNECTED,
        Op.GROUPED_CONV_2D,
        Op.HARD_SWISH,
        Op.INSTANCE_NORMALIZATION,
        Op.L2_NORMALIZATION,
        Op.L2_POOL_2D,
        Op.LOCAL_RESPONSE_NORMALIZATION,
        Op.LOGISTIC,
        Op.MAXIMUM,
        Op.MAX_POOL_2D,
        Op.MINIMUM,
        Op.MUL,
        Op.PACK,
        Op.PRELU,
        Op.QUANTIZE,
        Op.RANK,
        Op.RELU,
        Op.RELU1,
        Op.RELU6,
        Op.RESHAPE,
        Op.RESIZE_BILINEAR,
        Op.RESIZE_NEAREST_NEIGHBOR,
        Op.REVERSE,
        Op.SLICE,
        Op.SOFTMAX,
        Op.SQUEEZE,
        Op.SUB,
        Op.TANH,
        Op.TILE,
        Op.TRANSPOSE,
        Op.TRANSPOSE_CONV_2D,
    )
)
# broadcast_ranks: the broadcasting element-wise operations (signatures using broadcast_dims)
BROADCAST_OPS = frozenset(
    (Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.POW, Op.MAXIMUM, Op.MINIMUM, Op.PRELU, Op.LOGICAL_AND, Op.LOGICAL_OR) + _COMPARE
)
# max_dim: not for operations whose other dimensions cannot all be 1 around one long one
NO_LONG_DIM: dict[Op, str] = {Op.FILL: "no data input: the output's shape is a parameter"}
# unknown_dims: not for a scalar output (nothing to leave unknown)
SCALAR_OUTPUT = frozenset((Op.RANK,))


def declared_shapes(op: Op, types: tuple[T, ...], ranks: tuple[int, ...]) -> dict[T, tuple[str, ...]]:
    """The shape classes meaningful for ``op``, per data type (see above)."""
    slice_types = SIGNATURES[Op.SLICE].types if Op.SLICE in SIGNATURES else ()
    out = {}
    for t in types:
        cls = []
        if op in ZERO_SIZED_OPS and t in slice_types:
            cls.append("zero_sized")
        if op in BROADCAST_OPS and 1 in ranks and 4 in ranks:
            cls.append("broadcast_ranks")
        if op not in NO_LONG_DIM:
            cls.append("max_dim")
        if op not in SCALAR_OUTPUT:
            cls.append("unknown_dims")
        out[t] = tuple(cls)
    return out


_TENSOR_OF_SCALAR = {
    T.FLOAT32: T.TENSOR_FLOAT32,
    T.FLOAT16: T.TENSOR_FLOAT16,
    T.INT32: T.TENSOR_INT32,
    T.BOOL: T.TENSOR_BOOL8,
}


def _finish() -> None:
    registry = load_all()
    for o, s in list(SIGNATURES.items()):
        if o not in registry:
            del SIGNATURES[o]
            continue
        # An operation keyed on a scalar (FILL's value) builds tensors of the matching type.
        types = [_TENSOR_OF_SCALAR.get(t, t) for t in registry[o].data_types]
        s.types = tuple(t for t in dict.fromkeys(types) if t in GRAPH_TYPES)
        s.value_classes = declared_classes(o)
    for o, s in SIGNATURES.items():  # after every signature has its types (SLICE's included)
        s.shape_classes = declared_shapes(o, s.types, s.ranks)


_finish()


def signature(op: Op) -> Signature:
    return SIGNATURES[Op(op)]


def build_candidate(s: Signature, ctx: Ctx) -> Candidate:
    """Run the builder of ``s`` (raises Reject when it cannot build from what it was given)."""
    ctx.op = s.op
    return s.build(ctx)


def ops_for(dtype: T, rank: int | None = None) -> list[Op]:
    """Covered operations whose signature takes ``dtype`` (and ``rank``), in a stable order."""
    return [
        o
        for o, s in sorted(SIGNATURES.items(), key=lambda kv: kv[0].name)
        if T(dtype) in s.types and (rank is None or rank in s.ranks)
    ]
