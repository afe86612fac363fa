"""Random models: one operation, or a graph of N operations (CTS ``RandomGraphGenerator``).

``generate(draw, config, value_seed) -> GeneratedCase`` builds a model in topological order.
For each of the N operation slots:

1. an operation whose signature takes the configuration's data type (and rank) is drawn;
2. its primary input may be an earlier output of that type and rank: each compatible earlier
   output gives an edge with probability ``edge_p`` (CTS: 0.1 per pair), so the chance grows
   with the number of candidates; other tensor inputs may take an earlier output of exactly
   their type and shape (adopting its quantisation where the signature allows);
3. every other tensor input becomes a constant with probability ``const_p`` (CTS 0.5), else a
   model input; scalars and structural tensors are always constants;
4. the candidate is checked by the operation's own ``validate`` and run by its own
   ``execute`` on the actual values, which gives the output shapes.  A candidate that fails
   either, produces NaN, or has an empty output is redrawn (``attempts`` times, then the slot
   stays empty).

Outputs nobody consumes become model outputs.  The final model must pass
``validate_model``; otherwise the draw is rejected (:class:`signatures.Reject`).

Each slot first draws whether it is used at all (unused with probability 1/8, more when a
test case shrinks): that is the lever Hypothesis pulls to shrink a failing graph to the one
or two operations that matter.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from nnconform.errors import NnError
from nnconform.generators import ledger as L
from nnconform.generators import values as V
from nnconform.generators.signatures import (
    SIGNATURES,
    Candidate,
    Ctx,
    Data,
    Drawer,
    Omitted,
    Out,
    Param,
    Reject,
    build_candidate,
    ops_for,
)
from nnconform.ir import Lifetime, Model, Operand, Operation, Subgraph
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.ir.validation import validate_model
from nnconform.reference.executor import Executor
from nnconform.reference.ops.registry import OpContext, OpView, get_op


@dataclass(frozen=True)
class GraphConfig:
    dtype: T
    n_ops: int = 1
    rank: int | None = None  # None: each operation draws one of its ranks
    max_dim: int = 1000
    max_elems: int = 10000  # CTS: element product <= 10000 when dims go above 10
    ops: tuple[Op, ...] | None = None  # None: every covered operation of dtype (and rank)
    edge_values: bool = False
    edge_p: float = 0.3
    const_p: float = 0.5
    attempts: int = 8
    shrinkable: bool = True  # slots may be dropped (the shrinking lever)
    # (operation, rank) pairs of dtype the driver under test supports (nnconform.cases.probe); None:
    # every covered operation at every rank.  Keeps random models inside a partial driver's
    # supported set, so no draw is wasted on a skip.
    allowed: frozenset | None = None
    # draw shape classes (signatures.SHAPE_CLASSES) on purpose: the random suite's models;
    # off for the capability probe, stress graphs and control-flow bodies (whose operands
    # must stay fully specified), so their draws are as before
    shape_classes: bool = False
    # draw every slot for this shape class (signatures.SHAPE_CLASSES) where the operation
    # declares it: the random suite's top-up of classes its examples happened to miss
    force_shape_class: str | None = None


@dataclass
class GeneratedCase:
    model: Model
    inputs: list[np.ndarray]
    ignored: list[bool]
    operations: list[str]
    # every operand's value from the generation run (the reference's own execute functions)
    values: list = field(repr=False, default_factory=list)
    edge_values: bool = False
    # domain-coverage ledger: "OP/type" -> sorted classes the operation really received
    # ("value:<class>" from its input values, "quant:<class>", "shape:<class>"; ledger.py)
    domain: dict = field(default_factory=dict)
    meaningful: dict = field(default_factory=dict)

    def describe(self) -> str:
        return f"{len(self.model.main.operations)} op(s) [{', '.join(self.operations)}]"


def _chance(draw: Drawer, p: float) -> bool:
    """True with probability p; shrinks towards False."""
    k = int(round(p * 100))
    return draw.integer(0, 99) >= 100 - k


def _quant_of(op: Operand) -> tuple[float, int]:
    return op.scale, op.zero_point


class _Builder:
    def __init__(self, draw: Drawer, cfg: GraphConfig, value_seed: int, edge: bool):
        self.d, self.cfg = draw, cfg
        self.rng = np.random.default_rng(value_seed)
        self.edge = edge
        self.operands: list[Operand] = []
        self.values: list = []
        self.operations: list[Operation] = []
        self.available: list[int] = []  # connectable outputs
        self.ignored_outputs: set[int] = set()
        self.domain: dict[str, set[str]] = {}
        self.meaningful: dict[str, set[str]] = {}

    # -- one slot -------------------------------------------------------------------------
    def slot(self, ops: list[Op]) -> bool:
        for _ in range(self.cfg.attempts):
            op = self.d.choice(ops) if len(ops) > 1 else ops[0]
            s = SIGNATURES[op]
            ranks = list(s.ranks) if self.cfg.allowed is None else [r for r in s.ranks if (op, r) in self.cfg.allowed]
            cls = self._draw_shape_class(s)
            if cls == "broadcast_ranks":
                ends = [r for r in ranks if r in (1, 4) and self.cfg.rank in (None, r)]
                cls = cls if ends else None
                ranks = ends or ranks
            rank = self.cfg.rank if self.cfg.rank is not None else self.d.choice(ranks)
            mark = self._mark()
            given = None
            if cls == "zero_sized":
                given = self._zero_sized_source(rank)
                cls = cls if given is not None else None
            if given is None and cls != "max_dim":
                given = self._pick_given(rank)
            ctx = Ctx(self.d, self.cfg.dtype, rank, self.cfg.max_dim, self.cfg.max_elems, given, shape_class=cls)
            try:
                cand = build_candidate(s, ctx)
                if cls == "zero_sized":
                    if not ctx.used_given:
                        raise Reject("the candidate did not take the zero-sized tensor")
                    self._feed_empty_inputs(cand)
                self._connect_secondary(cand)
                if self._try(cand, zero_ok=cls == "zero_sized"):
                    return True
            except Reject:
                pass
            self._rollback(mark)
        return False

    # -- shape classes (signatures.SHAPE_CLASSES) -------------------------------------------
    def _draw_shape_class(self, s) -> str | None:
        """A shape class the operation declares, for half the single-operation examples and
        one slot in eight of a graph (whose many slots draw them anyway): enough for every
        class of every operation x type within the default suite's 25 examples
        (unknown_dims is the whole model's, drawn in finish())."""
        if self.cfg.force_shape_class is None and not self.cfg.shape_classes:
            return None
        classes = [c for c in s.shapes_for(self.cfg.dtype) if c != "unknown_dims"]
        if self.cfg.force_shape_class is not None:
            return self.cfg.force_shape_class if self.cfg.force_shape_class in classes else None
        if not classes or not _chance(self.d, 1 / 2 if self.cfg.n_ops == 1 else 1 / 8):
            return None
        return self.d.choice(classes) if len(classes) > 1 else classes[0]

    def _zero_sized_source(self, rank: int, like: Data | None = None) -> Data | None:
        """A zero-sized tensor made inside the model: SLICE with size 0 in one dimension of a
        fresh (non-empty) tensor.  A request cannot carry an empty input, so this is how an
        NNAPI model gets one.  ``like``: a fresh empty input of a candidate to feed the same
        way (its type, dimensions and quantisation)."""
        t = self.cfg.dtype if like is None else like.type
        if Op.SLICE not in SIGNATURES or t not in SIGNATURES[Op.SLICE].types or rank < 1:
            return None
        ctx = Ctx(self.d, t, rank, self.cfg.max_dim, self.cfg.max_elems)
        if like is None:
            x = ctx.data(t, ctx.shape(rank))
            size = list(x.dims)
            # the batch (axis 0) half the time: most operations accept an empty batch only
            size[0 if self.d.boolean() else self.d.integer(0, rank - 1)] = 0
        else:
            size = list(like.dims)
            x = ctx.data(t, [d or ctx.dim(8) for d in size], quant=(like.scale, like.zero_point))
        cand = Candidate(
            Op.SLICE, [x, ctx.tensor_i32([0] * rank), ctx.tensor_i32(size)], [Out(t, x.scale, x.zero_point)]
        )
        if not self._try(cand, zero_ok=True, record=False):
            return None
        k = len(self.operands) - 1
        o = self.operands[k]
        return Data(o.type, o.dimensions, o.scale, o.zero_point, source=k)

    def _feed_empty_inputs(self, cand: Candidate) -> None:
        """The candidate's other fresh inputs that came out empty (a second operand shaped
        like the zero-sized primary) get their own SLICE: they cannot be model inputs."""
        for inp in cand.inputs:
            if isinstance(inp, Data) and inp.source is None and 0 in inp.dims:
                src = self._zero_sized_source(len(inp.dims), like=inp)
                if src is None:
                    raise Reject("cannot make a zero-sized operand of this type")
                inp.source = src.source

    def _mark(self) -> tuple:
        return (
            len(self.operands),
            len(self.values),
            len(self.operations),
            len(self.available),
            set(self.ignored_outputs),
        )

    def _rollback(self, mark: tuple) -> None:
        """Forget what a failed attempt committed (the zero-sized SLICE in front of it)."""
        n_operands, n_values, n_operations, n_available, ignored = mark
        del self.operands[n_operands:], self.values[n_values:], self.operations[n_operations:]
        del self.available[n_available:]
        self.ignored_outputs = ignored

    def _pick_given(self, rank: int) -> Data | None:
        compat = [
            k
            for k in self.available
            if self.operands[k].type == self.cfg.dtype and len(self.operands[k].dimensions) == rank
        ]
        if not compat or not _chance(self.d, 1 - (1 - self.cfg.edge_p) ** len(compat)):
            return None
        k = self.d.choice(compat)
        o = self.operands[k]
        return Data(o.type, o.dimensions, o.scale, o.zero_point, source=k)

    def _connect_secondary(self, cand: Candidate) -> None:
        for inp in cand.inputs:
            if not isinstance(inp, Data) or inp.source is not None or not inp.connectable:
                continue
            matches = [
                k
                for k in self.available
                if self.operands[k].type == inp.type
                and self.operands[k].dimensions == inp.dims
                and (inp.free_quant or _quant_of(self.operands[k]) == (inp.scale, inp.zero_point))
            ]
            if matches and _chance(self.d, 1 - (1 - self.cfg.edge_p) ** len(matches)):
                k = self.d.choice(matches)
                inp.source = k
                inp.scale, inp.zero_point = _quant_of(self.operands[k])

    def _try(self, cand: Candidate, zero_ok: bool = False, record: bool = True) -> bool:
        """Materialise, validate and run one candidate; keep it if all is well.  ``zero_ok``:
        zero-sized outputs are expected (the zero_sized shape class); ``record``: enter the
        operation in the domain ledger (not the SLICE that makes a zero-sized input)."""
        new_ops: list[Operand] = []
        new_vals: list = []
        base = len(self.operands)

        def add(operand: Operand, value) -> int:
            new_ops.append(operand)
            new_vals.append(value)
            return base + len(new_ops) - 1

        ins = []
        for inp in cand.inputs:
            if isinstance(inp, Data):
                if inp.source is not None:
                    ins.append(inp.source)
                    continue
                classes = SIGNATURES[cand.op].classes_for(inp.type) if self.edge else ()
                val = V.fill(
                    self.rng,
                    inp.type,
                    inp.dims,
                    inp.lo,
                    inp.hi,
                    edge=self.edge,
                    nonzero=inp.nonzero,
                    classes=classes,
                    zero_point=inp.zero_point,
                )
                const = _chance(self.d, self.cfg.const_p)
                val.setflags(write=False)
                ins.append(
                    add(
                        Operand(
                            inp.type,
                            inp.dims,
                            inp.scale,
                            inp.zero_point,
                            Lifetime.CONSTANT_COPY if const else Lifetime.SUBGRAPH_INPUT,
                            val if const else None,
                        ),
                        val,
                    )
                )
            elif isinstance(inp, Param):
                info_dtype = Operand(inp.type).info.dtype
                val = np.array(inp.value, dtype=info_dtype).reshape(inp.dims)
                val.setflags(write=False)
                ins.append(add(Operand(inp.type, inp.dims, lifetime=Lifetime.CONSTANT_COPY, value=val), val))
            elif isinstance(inp, Omitted):
                ins.append(add(Operand(inp.type, (), lifetime=Lifetime.NO_VALUE), None))
            else:
                raise TypeError(f"unknown candidate input {inp!r}")
        outs = [
            add(Operand(o.type, (), o.scale, o.zero_point, Lifetime.TEMPORARY_VARIABLE), None) for o in cand.outputs
        ]
        operation = Operation(cand.op, tuple(ins), tuple(outs))
        sg = Subgraph(tuple(self.operands) + tuple(new_ops), (operation,), (), ())
        model = Model(sg)
        vals = self.values + new_vals
        try:
            get_op(cand.op).validate(OpView(model, sg, 0))
            # IEEE inf/NaN are legitimate results here, as in Executor.run: no numpy warnings
            with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
                results = get_op(cand.op).execute(OpContext(Executor(model), sg, 0, vals))
        except (NnError, Reject):
            return False
        if len(results) != len(outs):
            return False
        for o, arr in zip(cand.outputs, results):
            arr = np.asarray(arr)
            if arr.dtype != Operand(o.type).info.dtype:
                return False
            if arr.dtype.kind == "f" and np.isnan(arr).any():
                return False  # the reference must not produce NaN (it never passes)
            if not Operand(o.type).info.is_scalar and (
                arr.ndim == 0 or arr.ndim > 4 or (arr.size == 0 and not zero_ok)
            ):
                return False
        # commit
        for j, (o, arr) in enumerate(zip(cand.outputs, results)):
            k = outs[j] - base
            if not new_ops[k].info.is_scalar:
                new_ops[k] = new_ops[k].with_dims(np.asarray(arr).shape)
            new_vals[k] = np.asarray(arr)
            # an empty output feeds nothing (only its own slot asked for a zero-sized input)
            if o.connectable and not o.ignored and np.asarray(arr).size:
                self.available.append(outs[j])
            if o.ignored:
                self.ignored_outputs.add(outs[j])
        self.operands += new_ops
        self.values += new_vals
        self.operations.append(operation)
        data = [
            (self.operands[i], self.values[i])
            for inp, i in zip(cand.inputs, operation.inputs)
            if isinstance(inp, Data) and inp.type == self.cfg.dtype
        ]
        ranges = [(inp.lo, inp.hi) for inp in cand.inputs if isinstance(inp, Data) and inp.type == self.cfg.dtype]
        if record:
            L.record(
                self.domain,
                self.meaningful,
                cand.op,
                self.cfg.dtype,
                data,
                SIGNATURES[cand.op].classes_for,
                ranges,
                shape_classes=SIGNATURES[cand.op].shapes_for(self.cfg.dtype),
                max_dim=self.cfg.max_dim,
            )
        return True

    # -- the whole model --------------------------------------------------------------------
    def finish(self) -> GeneratedCase:
        if not self.operations:
            raise Reject("no operation could be generated")
        consumed = {i for op in self.operations for i in op.inputs}
        produced = [i for op in self.operations for i in op.outputs]
        outputs = [i for i in produced if i not in consumed]
        operands = list(self.operands)
        for i in outputs:
            operands[i] = replace(operands[i], lifetime=Lifetime.SUBGRAPH_OUTPUT)
        if self.cfg.force_shape_class == "unknown_dims" or (
            self.cfg.shape_classes and self.cfg.force_shape_class is None and _chance(self.d, 1 / 4)
        ):
            # the shape class unknown_dims: every model output's dimensions unknown (rank
            # kept), so the driver must work them out and report them
            unknown = [i for i in outputs if operands[i].dimensions]
            for i in unknown:
                operands[i] = operands[i].with_dims((0,) * len(operands[i].dimensions))
            for op in self.operations:
                if set(op.outputs) & set(unknown):
                    self.domain.setdefault(L.key(Op(op.type), self.cfg.dtype), set()).add("shape:unknown_dims")
        inputs = [i for i, o in enumerate(operands) if o.lifetime == Lifetime.SUBGRAPH_INPUT]
        if not inputs:  # CTS keeps at least one model input when there is a candidate
            consts = [
                i
                for i, o in enumerate(operands)
                if o.lifetime == Lifetime.CONSTANT_COPY
                and not o.info.is_scalar
                and o.type != T.TENSOR_INT32
                and i in consumed
            ]
            if consts:
                operands[consts[0]] = replace(operands[consts[0]], lifetime=Lifetime.SUBGRAPH_INPUT, value=None)
                inputs = [consts[0]]
        model = Model(Subgraph(tuple(operands), tuple(self.operations), tuple(inputs), tuple(outputs), "main"))
        try:
            validate_model(model)
        except NnError as e:
            raise Reject(f"generated model is invalid: {e}") from None
        return GeneratedCase(
            model,
            [self.values[i] for i in inputs],
            [i in self.ignored_outputs for i in outputs],
            [op.name for op in self.operations],
            self.values,
            self.edge,
            L.as_json(self.domain),
            L.as_json(self.meaningful),
        )


def generate(draw: Drawer, cfg: GraphConfig, value_seed: int, edge: bool | None = None) -> GeneratedCase:
    """One random model; raises Reject when nothing valid came out of the draws."""
    ops = list(cfg.ops) if cfg.ops is not None else ops_for(cfg.dtype, cfg.rank)
    if cfg.rank is not None:
        ops = [o for o in ops if cfg.rank in SIGNATURES[o].ranks]
    ops = [o for o in ops if cfg.dtype in SIGNATURES[o].types]
    if cfg.allowed is not None:
        ops = [
            o
            for o in ops
            if any((o, r) in cfg.allowed for r in SIGNATURES[o].ranks if cfg.rank is None or r == cfg.rank)
        ]
    if not ops:
        raise ValueError(
            f"no covered operation takes {cfg.dtype.name}"
            + (f" at rank {cfg.rank}" if cfg.rank else "")
            + (" among those the driver supports" if cfg.allowed is not None else "")
        )
    b = _Builder(draw, cfg, value_seed, cfg.edge_values if edge is None else edge)
    for _ in range(cfg.n_ops):
        if cfg.shrinkable and cfg.n_ops > 1 and draw.integer(0, 7) == 0:
            continue
        b.slot(ops)
    return b.finish()
