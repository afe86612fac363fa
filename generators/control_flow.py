"""Control flow in random models: a generated graph G wrapped in IF or in a bounded WHILE.

AOSP's random graph generator and fuzzer never produce IF/WHILE; we do.  G is any model the
ordinary generators make (``graphs.generate``: one operation or a small graph, every operand
fully specified, values checked by the reference).  Its main subgraph becomes a referenced
subgraph unchanged.

IF (``wrap_if``)::

    main:  inputs (c, x1..xn)          c: TENSOR_BOOL8 [1], a model input whose value is drawn
           (y1..ym) = IF(c, then: G, else: G')
    G'  =  G with one constant tensor perturbed (floats scaled by 0.5..1.5, integers and
           quantised values moved by 1..3 steps, booleans flipped), or G itself.  The perturbed
           copy must still validate, keep G's output shapes and give no NaN on the case's
           inputs; otherwise another constant is tried and at last G itself is used.
           One time in four G' also passes one output through TILE (x2 on one axis), so the
           branches give different shapes: that IF output is declared with the axis unknown
           (0), as NNAPI allows for a model output, and takes the taken branch's shape.

WHILE (``wrap_while``), the counted loop ``for i in range(N): vars = body(vars)``::

    loop variables, in order
      pairs       (x_p, y_q): a G input and a G output with the same type, dimensions, scale and
                  zero point; the output is fed back as the next iteration's input
      carried     every other G output, a loop variable whose initial value is a constant of its
                  operand (the body does not read it; after >= 1 iteration it holds G's result)
      i           the counter, TENSOR_INT32 [1], starts at 0 (state only: not a WHILE output)
      N           input-only, TENSOR_INT32 [1], 1..4, a constant or a model input (drawn)
      rest        input-only: the G inputs that are not loop variables
    cond:  LESS(i, N) -> TENSOR_BOOL8 [1]
    body:  G's operations on (pairs, rest) -> (pair outputs, carried outputs), and i + 1
    outputs: the final pair and carried values (m = pairs + carried, k = 1)

A shrinking loop variable, one time in four (``shrink_p``): ``s = SLICE(s, [1], [-1])`` each
iteration, from trips + 1..3 elements of the case's type, declared with unknown dimensions
(NNAPI allows them for a WHILE in runtime mode), an extra WHILE output.

Nested once, at low probability (``nest_p``): the body calls G through an inner
``IF(LESS(i, c), G, G')`` with c a constant in 1..N, so the branch switches part way through
the loop.

Outputs that CTS keeps from feeding other operations (DIV, POW, REDUCE_PROD,
L2_NORMALIZATION: inf/NaN risks) and ignored outputs (TOPK_V2 indices) are never fed back.  A
feedback that makes the reference produce NaN (a LOG fed its own negative output, an index fed
an out-of-range value) or fail is dropped: the loop is rebuilt with fewer pairs, at last with
none (then every iteration reads the case's own, already checked inputs).

Every wrapped model passes ``validate_model``, runs on the reference executor, and keeps all
operands fully specified (HAL rule for IF/WHILE operands), except the unknown axis of an IF
output whose branches give different shapes.  Expected values come from the
reference, as for any random model.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Sequence, cast

import numpy as np
from hypothesis import reject
from hypothesis import strategies as st

from nnconform.errors import NnError
from nnconform.generators import values as V
from nnconform.generators.graphs import GeneratedCase, GraphConfig, generate
from nnconform.generators.signatures import Drawer, Reject
from nnconform.generators.strategies import HypothesisDrawer, RandomDrawer
from nnconform.ir import SHORT_TYPE_NAME, Lifetime, Model, Operand, Operation, Subgraph
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.ir.validation import validate_model
from nnconform.reference.executor import Executor

KINDS = ("if", "while")
# How many G to draw before settling for one without a possible loop variable (only a few
# operations keep their input's shape and quantisation; a loop that feeds nothing back still
# runs G N times, but tests less).
_G_DRAWS = {"if": 1, "while": 3}
MAX_TRIP_COUNT = 4
# Outputs whose signatures say ``connectable=False`` (signatures.py, CTS doNotConnect).
_NO_FEEDBACK = (Op.DIV, Op.POW, Op.REDUCE_PROD, Op.L2_NORMALIZATION)
_COND = (T.TENSOR_BOOL8, (1,))
_PERTURBABLE = (
    T.TENSOR_FLOAT32,
    T.TENSOR_FLOAT16,
    T.TENSOR_INT32,
    T.TENSOR_BOOL8,
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
)
_I32_1 = (T.TENSOR_INT32, (1,))


@dataclass
class ControlFlowCase(GeneratedCase):
    """A wrapped model.  ``inner`` is G (its model and its own inputs), for a divergence hunt
    inside the branch or body; ``kind`` is "if" or "while"; ``detail`` says how it was wrapped."""

    inner: GeneratedCase | None = field(default=None, repr=False)
    kind: str = ""
    detail: str = ""

    def describe(self) -> str:
        # inner defaults to None only because it follows GeneratedCase's defaulted fields;
        # every ControlFlowCase is made with its inner case
        assert self.inner is not None
        return f"{self.kind.upper()} over {self.inner.describe()} ({self.detail})"


# ---------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------


def _chance(draw: Drawer, k: int, n: int) -> bool:
    """True with probability k/n; shrinks towards False."""
    return draw.integer(0, n - 1) >= n - k


def _operand(
    t: T | None, dims=(), lifetime=Lifetime.TEMPORARY_VARIABLE, value=None, like: Operand | None = None, name: str = ""
) -> Operand:
    if like is not None:
        return replace(like, lifetime=lifetime, value=value, name=name or like.name, num_consumers=None)
    assert t is not None  # only an operand made like= another goes without a type
    if value is not None:
        value = np.asarray(value, dtype=Operand(t).info.dtype).reshape(dims)
        value.setflags(write=False)
    return Operand(T(t), tuple(dims), lifetime=lifetime, value=value, name=name)


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a, copy=True)
    a.setflags(write=False)
    return a


class _Sg:
    """A subgraph under construction (operand list, operations, inputs, outputs)."""

    def __init__(self, name: str, operands: Sequence[Operand] = (), operations: Sequence[Operation] = ()):
        self.name = name
        self.operands = list(operands)
        self.operations = list(operations)
        self.inputs: list[int] = []
        self.outputs: list[int] = []

    def add(self, o: Operand) -> int:
        self.operands.append(o)
        return len(self.operands) - 1

    def input(self, t: T | None, dims: Sequence[int] = (), **kw: Any) -> int:
        i = self.add(_operand(t, dims, lifetime=Lifetime.SUBGRAPH_INPUT, **kw))
        self.inputs.append(i)
        return i

    def output(self, t: T | None, dims: Sequence[int] = (), **kw: Any) -> int:
        i = self.add(_operand(t, dims, lifetime=Lifetime.SUBGRAPH_OUTPUT, **kw))
        self.outputs.append(i)
        return i

    def const(self, t: T, dims, value) -> int:
        return self.add(_operand(t, dims, Lifetime.CONSTANT_COPY, value))

    def ref(self, index: int) -> int:
        return self.add(Operand(T.SUBGRAPH, (), lifetime=Lifetime.SUBGRAPH, value=index))

    def op(self, t: Op, ins, outs) -> None:
        self.operations.append(Operation(t, tuple(ins), tuple(outs)))

    def build(self) -> Subgraph:
        return Subgraph(
            tuple(self.operands), tuple(self.operations), tuple(self.inputs), tuple(self.outputs), self.name
        )


def _as_branch(sg: Subgraph, name: str) -> Subgraph:
    return replace(sg, name=name)


def _clean(arrays) -> bool:
    """No NaN in any float array (a NaN expected value never passes)."""
    return all(not (np.asarray(a).dtype.kind == "f" and np.isnan(a).any()) for a in arrays)


def _run_checked(model: Model, inputs) -> list[np.ndarray] | None:
    """The reference's outputs, or None when the model is invalid, fails or gives NaN."""
    try:
        validate_model(model)
        out = Executor(model).run(list(inputs))
    except NnError:
        return None
    return out if _clean(out) else None


# ---------------------------------------------------------------------------------------
# G': G with one constant perturbed
# ---------------------------------------------------------------------------------------


def _perturbed_value(draw: Drawer, rng: np.random.Generator, o: Operand) -> np.ndarray:
    v = np.asarray(o.value)
    info = o.info
    if o.type == T.TENSOR_BOOL8:
        flip = rng.random(v.shape) < 0.5
        flip.flat[draw.integer(0, v.size - 1)] = True  # at least one element changes
        return np.logical_xor(v, flip)
    if info.is_float:
        # A factor keeps the sign and keeps values away from zero (LOG/SQRT inputs, divisors).
        factor = draw.integer(2, 6) / 4 if draw.boolean() else rng.uniform(0.5, 1.5, v.shape)
        big = float(np.finfo(v.dtype).max)  # an fp16 value near the top must not become inf
        return np.clip(v.astype(np.float64) * factor, -big, big).astype(v.dtype)
    lo, hi = V.INT32_RANGE if o.type == T.TENSOR_INT32 else V.stored_range(o.type)
    lo, hi = min(lo, int(v.min())), max(hi, int(v.max()))
    step = draw.integer(1, 3) * (1 if draw.boolean() else -1)
    new = np.clip(v.astype(np.int64) + step, lo, hi)
    new = np.where((v != 0) & (new == 0), v, new)  # divisors stay non-zero
    return new.astype(v.dtype)


def perturbed(draw: Drawer, rng: np.random.Generator, case: GeneratedCase, tries: int = 3) -> tuple[Subgraph, str]:
    """(G', what changed): G's main subgraph with one constant tensor perturbed, checked on the
    case's inputs; G itself ("same graph") when no perturbation keeps it valid."""
    sg = case.model.main
    consts = [
        i
        for i, o in enumerate(sg.operands)
        if o.lifetime == Lifetime.CONSTANT_COPY
        and o.type in _PERTURBABLE
        and o.value is not None
        and np.asarray(o.value).size > 0
    ]
    if not consts or _chance(draw, 1, 4):
        return sg, "else = same graph"
    expected = [case.values[i] for i in sg.output_indexes]
    for _ in range(tries):
        k = draw.choice(consts)
        o = sg.operands[k]
        new = _perturbed_value(draw, rng, o)
        new.setflags(write=False)
        if np.array_equal(new, o.value):
            continue
        operands = list(sg.operands)
        operands[k] = replace(o, value=new)
        g2 = replace(sg, operands=tuple(operands))
        out = _run_checked(Model(g2), case.inputs)
        if out is not None and all(a.shape == e.shape and a.dtype == e.dtype for a, e in zip(out, expected)):
            return g2, f"else = operand {k} perturbed"
    return sg, "else = same graph"


# ---------------------------------------------------------------------------------------
# IF
# ---------------------------------------------------------------------------------------

_TILEABLE = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


def _tiled_branch(draw: Drawer, sg: Subgraph, ignored: Sequence[bool]) -> tuple[Subgraph, int, int] | None:
    """``sg`` with one of its outputs q passed through TILE, doubling axis a, as the branch's
    output q instead: (branch, q, a), or None when no output can be tiled."""
    cands = [
        q
        for q, (yi, ig) in enumerate(zip(sg.output_indexes, ignored))
        if not ig and sg.operands[yi].type in _TILEABLE and len(sg.operands[yi].dimensions) >= 1
    ]
    if not cands:
        return None
    q = draw.choice(cands)
    yi = sg.output_indexes[q]
    y = sg.operands[yi]
    a = draw.integer(0, len(y.dimensions) - 1)
    mult = [1] * len(y.dimensions)
    mult[a] = 2
    b = _Sg(sg.name, sg.operands, sg.operations)
    b.operands[yi] = replace(y, lifetime=Lifetime.TEMPORARY_VARIABLE, num_consumers=None)
    m = b.const(T.TENSOR_INT32, (len(mult),), mult)
    dims = list(y.dimensions)
    dims[a] *= 2
    new = b.add(
        replace(
            y,
            dimensions=tuple(dims),
            lifetime=Lifetime.SUBGRAPH_OUTPUT,
            value=None,
            name=f"{y.name}_tiled",
            num_consumers=None,
        )
    )
    b.op(Op.TILE, [yi, m], [new])
    b.inputs = list(sg.input_indexes)
    b.outputs = [new if j == q else o for j, o in enumerate(sg.output_indexes)]
    return b.build(), q, a


def wrap_if(draw: Drawer, case: GeneratedCase, value_seed: int) -> ControlFlowCase:
    """(y...) = IF(c, G, G') with c a BOOL8 [1] model input of drawn value (module docstring).
    One time in four G' also tiles one output along one axis, so the branches give outputs of
    different shapes; that IF output is declared with the axis unknown (0), which NNAPI allows
    for an IF output, and takes the shape of the branch taken."""
    rng = np.random.default_rng(value_seed)
    g = case.model.main
    else_g, how = perturbed(draw, rng, case)
    out_dims = [g.operands[i].dimensions for i in g.output_indexes]
    shapes_differ = False
    if _chance(draw, 1, 4):
        tiled = _tiled_branch(draw, else_g, case.ignored)
        if tiled is not None:
            else_g, q, a = tiled
            out_dims[q] = tuple(0 if k == a else d for k, d in enumerate(out_dims[q]))
            how += f"; else's output {q} tiled x2 on axis {a} (branch-dependent shape)"
            shapes_differ = True
    taken = draw.boolean()
    main = _Sg("main")
    c = main.input(*_COND, name="condition")
    xs = [main.input(None, like=g.operands[i]) for i in g.input_indexes]
    ys = [main.output(None, like=g.operands[i].with_dims(d)) for i, d in zip(g.output_indexes, out_dims)]
    main.op(Op.IF, [c, main.ref(0), main.ref(1), *xs], ys)
    model = Model(main.build(), (_as_branch(g, "then_G"), _as_branch(else_g, "else_G")))
    inputs = [np.array([taken], np.bool_)] + list(case.inputs)
    out = _run_checked(model, inputs)
    if out is None:
        raise Reject("the IF-wrapped model failed on the reference")
    wrapped = _finish(model, inputs, out, case.ignored, case, "if", f"condition {taken}, {how}")
    if shapes_differ:
        key = f"IF/{SHORT_TYPE_NAME[case.model.main.operands[g.output_indexes[0]].type]}"
        wrapped.domain = {
            **wrapped.domain,
            key: sorted(
                set(wrapped.domain.get(key, ()))
                | {"shape:if_branch_shapes_differ", f"shape:if_{'then' if taken else 'else'}_taken"}
            ),
        }
    return wrapped


# ---------------------------------------------------------------------------------------
# WHILE
# ---------------------------------------------------------------------------------------


def _compatible(a: Operand, b: Operand) -> bool:
    return (
        a.type == b.type
        and a.dimensions == b.dimensions
        and a.scale == b.scale
        and a.zero_point == b.zero_point
        and a.channel_quant == b.channel_quant
    )


def loop_variable_pairs(case: GeneratedCase) -> list[tuple[int, int]]:
    """Every (G input position, G output position) whose operands could be one loop variable."""
    g = case.model.main
    writer = {o: op.type for op in g.operations for o in op.outputs}
    pairs = []
    for q, (yi, ignored) in enumerate(zip(g.output_indexes, case.ignored)):
        if ignored or writer.get(yi) in _NO_FEEDBACK:
            continue
        for p, xi in enumerate(g.input_indexes):
            if _compatible(g.operands[xi], g.operands[yi]):
                pairs.append((p, q))
    return pairs


def _choose_pairs(draw: Drawer, candidates: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """A one-to-one subset: each candidate taken with probability 3/4 (shrinks to none)."""
    used_p, used_q, out = set(), set(), []
    for p, q in candidates:
        if p in used_p or q in used_q:
            continue
        if not _chance(draw, 3, 4):
            continue
        used_p.add(p)
        used_q.add(q)
        out.append((p, q))
    return out


def _build_while(
    case: GeneratedCase,
    else_g: Subgraph,
    pairs,
    trips: int,
    n_is_input: bool,
    nest_at: int | None,
    init: dict[int, np.ndarray],
    shrink: tuple[Operand, np.ndarray] | None = None,
) -> tuple[Model, list, list]:
    g = case.model.main
    gin, gout = list(g.input_indexes), list(g.output_indexes)
    paired_p = [p for p, _ in pairs]
    carried_q = [q for q in range(len(gout)) if q not in {q for _, q in pairs}]
    rest_p = [p for p in range(len(gin)) if p not in paired_p]
    # The loop variables' operand specs, in WHILE order: pairs, carried, i, N, rest.
    shrink_spec = [] if shrink is None else [replace(shrink[0], dimensions=(0,))]
    specs = (
        [g.operands[gin[p]] for p in paired_p]
        + [g.operands[gout[q]] for q in carried_q]
        + shrink_spec
        + [_operand(*_I32_1), _operand(*_I32_1)]
        + [g.operands[gin[p]] for p in rest_p]
    )
    i_pos = len(pairs) + len(carried_q) + len(shrink_spec)
    n_pos = i_pos + 1

    cond = _Sg("cond_i_lt_N")
    cins = [cond.input(None, like=s) for s in specs]
    cond.op(Op.LESS, [cins[i_pos], cins[n_pos]], [cond.output(*_COND)])

    referenced: list[_Sg | Subgraph | None] = [cond, None]  # [1]: the body, set below
    if nest_at is None:
        # G's operations inline: G's operands keep their indexes; new ones are appended.
        body = _Sg("body_G", g.operands, g.operations)
        x_of = {p: gin[p] for p in range(len(gin))}
        y_of = {q: gout[q] for q in range(len(gout))}
        carried_in = [
            body.add(_operand(None, like=g.operands[gout[q]], lifetime=Lifetime.SUBGRAPH_INPUT)) for q in carried_q
        ]
    else:
        body = _Sg("body_if_G")
        x_of = {
            p: body.add(_operand(None, like=g.operands[gin[p]], lifetime=Lifetime.SUBGRAPH_INPUT))
            for p in range(len(gin))
        }
        y_of = {
            q: body.add(_operand(None, like=g.operands[gout[q]], lifetime=Lifetime.SUBGRAPH_OUTPUT))
            for q in range(len(gout))
        }
        carried_in = [
            body.add(_operand(None, like=g.operands[gout[q]], lifetime=Lifetime.SUBGRAPH_INPUT)) for q in carried_q
        ]
    shrink_io = []
    if shrink is not None:  # s = s[1:]: a loop variable that loses one element per iteration
        s_in = body.add(_operand(None, like=shrink_spec[0], lifetime=Lifetime.SUBGRAPH_INPUT))
        s_out = body.add(_operand(None, like=shrink_spec[0], lifetime=Lifetime.SUBGRAPH_OUTPUT))
        body.op(Op.SLICE, [s_in, body.const(*_I32_1, [1]), body.const(*_I32_1, [-1])], [s_out])
        shrink_io = [(s_in, s_out)]
    i_in = body.add(_operand(*_I32_1, lifetime=Lifetime.SUBGRAPH_INPUT))
    n_in = body.add(_operand(*_I32_1, lifetime=Lifetime.SUBGRAPH_INPUT))
    i_out = body.add(_operand(*_I32_1, lifetime=Lifetime.SUBGRAPH_OUTPUT))
    if nest_at is not None:
        flag = body.add(_operand(*_COND))
        body.op(Op.LESS, [i_in, body.const(*_I32_1, [nest_at])], [flag])
        body.op(
            Op.IF,
            [flag, body.ref(2), body.ref(3), *[x_of[p] for p in range(len(gin))]],
            [y_of[q] for q in range(len(gout))],
        )
        referenced += [_as_branch(g, "then_G"), _as_branch(else_g, "else_G")]
    body.op(Op.ADD, [i_in, body.const(*_I32_1, [1]), body.const(T.INT32, (), 0)], [i_out])
    body.inputs = (
        [x_of[p] for p in paired_p] + carried_in + [a for a, _ in shrink_io] + [i_in, n_in] + [x_of[p] for p in rest_p]
    )
    body.outputs = [y_of[q] for _, q in pairs] + [y_of[q] for q in carried_q] + [b for _, b in shrink_io] + [i_out]
    referenced[1] = body

    main = _Sg("main")
    x_outer = [main.input(None, like=g.operands[i]) for i in gin]
    n_outer = main.input(*_I32_1, name="N") if n_is_input else main.const(*_I32_1, [trips])
    carried_outer = [
        main.add(_operand(None, like=g.operands[gout[q]], lifetime=Lifetime.CONSTANT_COPY, value=_frozen(init[q])))
        for q in carried_q
    ]
    shrink_outer = (
        []
        if shrink is None
        else [main.add(_operand(None, like=shrink[0], lifetime=Lifetime.CONSTANT_COPY, value=_frozen(shrink[1])))]
    )
    data = (
        [x_outer[p] for p in paired_p]
        + carried_outer
        + shrink_outer
        + [main.const(*_I32_1, [0]), n_outer]
        + [x_outer[p] for p in rest_p]
    )
    outs = [main.output(None, like=g.operands[gout[q]]) for q in [q for _, q in pairs] + carried_q]
    if shrink is not None:
        outs.append(main.output(None, like=shrink_spec[0]))
    main.op(Op.WHILE, [main.ref(0), main.ref(1), *data], outs)
    # cast: referenced[1] was set to the body above, so no None is left
    model = Model(main.build(), tuple(r.build() if isinstance(r, _Sg) else cast(Subgraph, r) for r in referenced))
    inputs = list(case.inputs) + ([np.array([trips], np.int32)] if n_is_input else [])
    ignored = [case.ignored[q] for q in [q for _, q in pairs] + carried_q] + ([False] if shrink else [])
    return model, inputs, ignored


def wrap_while(
    draw: Drawer, case: GeneratedCase, value_seed: int, nest_p: tuple[int, int] = (1, 8), shrink_p: float = 0.25
) -> ControlFlowCase:
    """The counted loop of the module docstring; IF-in-body with probability nest_p[0]/nest_p[1];
    a shrinking loop variable with probability ``shrink_p`` (seeded by ``value_seed``)."""
    rng = np.random.default_rng(value_seed)
    g = case.model.main
    trips = draw.integer(1, MAX_TRIP_COUNT)
    n_is_input = not g.input_indexes or draw.boolean()
    nest_at = None
    else_g, how = g, ""
    if _chance(draw, *nest_p):
        nest_at = draw.integer(1, trips)
        else_g, how = perturbed(draw, rng, case)
        how = f", IF(i < {nest_at}) in the body, {how}"
    pairs = _choose_pairs(draw, loop_variable_pairs(case))
    # Initial values for every output that may end up carried (drawn up front, so dropping a
    # pair below does not shift the other draws).
    init = {q: V.fill(rng, g.operands[y].type, g.operands[y].dimensions) for q, y in enumerate(g.output_indexes)}
    # One time in four (seeded, after the draws above) a loop variable that shrinks: s = s[1:]
    # each iteration, from trips + 1..3 elements, declared with unknown dimensions.
    shrink = None
    like = [g.operands[i] for i in g.input_indexes if g.operands[i].type in _TILEABLE]
    if like and rng.random() < shrink_p:
        k = trips + int(rng.integers(1, 4))
        spec = replace(
            like[0], dimensions=(k,), lifetime=Lifetime.TEMPORARY_VARIABLE, value=None, name="s", num_consumers=None
        )
        shrink = (spec, V.fill(rng, spec.type, (k,), zero_point=spec.zero_point))
    # Drop feedback that makes the reference fail or give NaN: fewer pairs, at last none.
    while True:
        model, inputs, ignored = _build_while(case, else_g, pairs, trips, n_is_input, nest_at, init, shrink)
        out = _run_checked(model, inputs)
        if out is not None:
            break
        if not pairs:
            raise Reject("the WHILE-wrapped model failed on the reference")
        pairs.pop()
    detail = (
        f"{trips} iteration(s), N a {'model input' if n_is_input else 'constant'}, "
        f"{len(pairs)} fed-back variable(s){how}"
    )
    if shrink is not None:
        detail += f", a loop variable shrinking {shrink[1].size} -> {shrink[1].size - trips}"
    wrapped = _finish(model, inputs, out, ignored, case, "while", detail)
    if shrink is not None:
        key = f"WHILE/{SHORT_TYPE_NAME[shrink[0].type]}"
        wrapped.domain = {
            **wrapped.domain,
            key: sorted(set(wrapped.domain.get(key, ())) | {"shape:while_variable_shrinks"}),
        }
    return wrapped


def _finish(model: Model, inputs, outputs, ignored, inner: GeneratedCase, kind: str, detail: str) -> ControlFlowCase:
    m = model.main
    values: list = [None] * len(m.operands)
    for i, v in zip(m.input_indexes, inputs):
        values[i] = v
    for i, v in zip(m.output_indexes, outputs):
        values[i] = v
    return ControlFlowCase(
        model,
        list(inputs),
        list(ignored),
        [kind.upper()] + list(inner.operations),
        values,
        inner.edge_values,
        inner.domain,
        inner.meaningful,
        inner=inner,
        kind=kind,
        detail=detail,
    )


# ---------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------


def inner_config(dtype: T, draw: Drawer, max_dim: int = 1000) -> GraphConfig:
    """G: one to three operations of ``dtype`` (SmallGraph sizes: dims <= 1000, <= 10000 elements)."""
    return GraphConfig(dtype=T(dtype), n_ops=draw.integer(1, 3), max_dim=max_dim)


def wrap(kind: str, draw: Drawer, case: GeneratedCase, value_seed: int) -> ControlFlowCase:
    if kind == "if":
        return wrap_if(draw, case, value_seed)
    if kind == "while":
        return wrap_while(draw, case, value_seed)
    raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def generate_wrapped(
    kind: str, draw: Drawer, dtype: T, value_seed: int, edge: bool = False, max_dim: int = 1000
) -> ControlFlowCase:
    """G from the ordinary generator, wrapped; raises Reject when no valid model came out."""
    for attempt in range(_G_DRAWS[kind]):
        case = generate(draw, inner_config(dtype, draw, max_dim), value_seed + 2 * attempt, edge=edge)
        if loop_variable_pairs(case):
            break
    return wrap(kind, draw, case, value_seed + 1)


@st.composite
def control_flow_cases(draw, kind: str, dtype: T, value_mode: str = "uniform", max_dim: int = 1000) -> ControlFlowCase:
    """Hypothesis strategy: a generated graph wrapped in IF (``kind="if"``) or WHILE."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    value_seed = draw(st.integers(0, 2**32 - 8))
    edge = value_mode == "edge" or (value_mode == "mixed" and draw(st.integers(0, 1)) == 1)
    try:
        return generate_wrapped(kind, HypothesisDrawer(draw), dtype, value_seed, edge, max_dim)
    except Reject:
        reject()


def sample_wrapped(kind: str, dtype: T, seed: int, edge: bool = False, tries: int = 20) -> ControlFlowCase:
    """One wrapped model from a seed without Hypothesis (retries a few seeds on Reject)."""
    for k in range(tries):
        try:
            return generate_wrapped(kind, RandomDrawer(seed * 7919 + k), dtype, (seed * 104729 + k) % 2**31, edge)
        except Reject:
            continue
    raise Reject(f"no valid {kind} model from seed {seed} after {tries} tries")
