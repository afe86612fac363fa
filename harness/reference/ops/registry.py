"""The one table of operations, and the two views an operation module sees.

An operation module provides, per operation type:
- ``validate(v: OpView)``: static signature checks (input/output counts, types, ranks, quant
  parameters, constant parameter ranges).  It raises through ``v.fail``, which names the
  operation and the input or output.
- ``execute(ctx: OpContext) -> list[np.ndarray]``: computes every output in its operand's
  storage dtype.  The executor checks the shapes against the model.
and registers them with ``@register(OperationType.X, data_types=..., validate=...)`` on the
execute function.  ``data_types`` lists the primary tensor types implemented; it feeds the
coverage table, the reference driver's honesty about support, and the generators.

An operation may also give ``prepare(v: OpView) -> kernel | None`` (``register(...,
prepare=...)``), called once per model step when the executor plans a subgraph (NNAPI's
compilation, in miniature).  It returns None unless the step's parameters are model
constants it can settle there (``OpView.static_context`` runs execute's own checks on
them), and otherwise a ``kernel(values) -> list[np.ndarray] | None`` over the executor's
value slots.  A kernel returns None for a run it does not cover (actual shapes other than
the model's, say), and the executor then calls ``execute``.  A kernel must give execute's
bits exactly and may only cover runs that execute would not fail: it skips the run-time
view and the parameter reads, which for a one-row SOFTMAX or a small convolution cost as
much as the arithmetic.  Kernels run inside ``Executor.run`` (numpy's float warnings off).
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from nnconform.errors import NotImplementedOperation, OpFailure, ValidationError
from nnconform.ir import Model, Operand, OperandType, Operation, OperationType, Subgraph


@dataclass(frozen=True)
class OpDef:
    type: OperationType
    execute: Callable[["OpContext"], Sequence[np.ndarray]]
    validate: Callable[["OpView"], None]
    data_types: tuple[OperandType, ...]
    module: str
    primary_input: int = 0  # which input's type is "the" data type (for coverage/support)
    prepare: Callable[["OpView"], Callable[[list], Sequence[np.ndarray] | None] | None] | None = None


REGISTRY: dict[OperationType, OpDef] = {}
_loaded = False


def register(
    *op_types: OperationType,
    data_types: Sequence[OperandType],
    validate: Callable[["OpView"], None],
    primary_input: int = 0,
    prepare: Callable[["OpView"], Callable | None] | None = None,
):
    def deco(fn):
        for t in op_types:
            t = OperationType(t)
            if t in REGISTRY:
                raise RuntimeError(f"{t.name} registered twice ({REGISTRY[t].module} and {fn.__module__})")
            REGISTRY[t] = OpDef(
                t, fn, validate, tuple(OperandType(d) for d in data_types), fn.__module__, primary_input, prepare
            )
        return fn

    return deco


def load_all() -> dict[OperationType, OpDef]:
    """Import every operation module in this package (once)."""
    global _loaded
    if not _loaded:
        from nnconform.reference.kernels.blas import limit_blas_threads
        from nnconform.reference.kernels.heap import retain_freed_memory

        limit_blas_threads()  # the reference's small matrix products: one BLAS thread (see nnconform.reference.kernels.blas)
        retain_freed_memory()  # its tensors' pages reused, not faulted in again per run (nnconform.reference.kernels.heap)
        pkg = importlib.import_module(__package__)
        for m in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
            if m.name not in ("registry",):
                importlib.import_module(f"{__package__}.{m.name}")
        _loaded = True
    return REGISTRY


def get_op(op_type: int) -> OpDef:
    load_all()
    try:
        return REGISTRY[OperationType(op_type)]
    except (KeyError, ValueError):
        try:
            name = OperationType(op_type).name
        except ValueError:
            name = f"operation type {op_type}"
        raise NotImplementedOperation(f"{name} is not implemented by the reference executor yet") from None


AnyType = OperandType | tuple[OperandType, ...] | None


class OpView:
    """Static view of one operation for signature validation."""

    def __init__(self, model: Model, subgraph: Subgraph, index: int, where: str = ""):
        self.model, self.subgraph, self.index = model, subgraph, index
        self.operation: Operation = subgraph.operations[index]
        self.inputs: list[Operand] = [subgraph.operands[i] for i in self.operation.inputs]
        self.outputs: list[Operand] = [subgraph.operands[i] for i in self.operation.outputs]
        self.where = where or f"operations[{index}] ({self.operation.name})"

    # errors --------------------------------------------------------------------------
    def fail(self, message: str, *, input: int | None = None, output: int | None = None):
        where = self.where
        if input is not None:
            where += f" input {input}"
        if output is not None:
            where += f" output {output}"
        raise ValidationError(where, message)

    # accessors -----------------------------------------------------------------------
    def input_type(self, i: int) -> OperandType:
        return self.inputs[i].type

    def is_omitted(self, i: int) -> bool:
        return i >= len(self.inputs) or self.inputs[i].is_omitted

    def constant(self, i: int) -> np.ndarray | None:
        op = self.inputs[i]
        return op.value if op.is_constant else None

    def constant_scalar(self, i: int):
        v = self.constant(i)
        return None if v is None else v.reshape(-1)[0].item()

    def static_context(self) -> "OpContext | None":
        """The run-time view as the model alone gives it, for a ``prepare`` to run the
        operation's own run-time checks on: constants as they are, every other tensor input
        a zero-stride placeholder of its model dimensions (no memory; its values mean
        nothing), omitted inputs None.  None when another input is a scalar or has unknown
        dimensions, which only a run can give.  It has no executor and no memo."""
        values = {}
        for i, op in zip(self.operation.inputs, self.inputs):
            if op.is_constant:
                values[i] = op.value
            elif op.is_omitted:
                values[i] = None
            elif op.info.is_scalar or not op.dimensions or 0 in op.dimensions:
                return None
            else:
                values[i] = np.broadcast_to(op.info.dtype.type(0), op.dimensions)
        return OpContext(None, self.subgraph, self.index, values)

    # checks ---------------------------------------------------------------------------
    def expect_counts(self, inputs: int | Sequence[int], outputs: int | Sequence[int]) -> None:
        ins = (inputs,) if isinstance(inputs, int) else tuple(inputs)
        outs = (outputs,) if isinstance(outputs, int) else tuple(outputs)
        if len(self.inputs) not in ins:
            self.fail(f"takes {' or '.join(map(str, ins))} inputs, got {len(self.inputs)}")
        if len(self.outputs) not in outs:
            self.fail(f"gives {' or '.join(map(str, outs))} outputs, got {len(self.outputs)}")

    def expect_types(self, inputs: Sequence[AnyType] = (), outputs: Sequence[AnyType] = ()) -> None:
        """Each entry is a type, a tuple of allowed types, or None (not checked).
        Only the operands that exist are checked; omitted optional inputs are skipped."""
        for kind, ops, wanted in (("input", self.inputs, inputs), ("output", self.outputs, outputs)):
            for i, (op, w) in enumerate(zip(ops, wanted)):
                if w is None or (kind == "input" and op.is_omitted):
                    continue
                allowed = w if isinstance(w, tuple) else (w,)
                if op.type not in allowed:
                    names = " or ".join(t.name for t in allowed)
                    self.fail(f"must be {names}, got {op.type.name}", **{kind: i})

    def expect_rank(self, i: int, ranks: Sequence[int] | range, *, output: bool = False) -> None:
        op = (self.outputs if output else self.inputs)[i]
        if op.info.is_scalar or not op.dimensions:
            return  # unknown rank: checked at run time
        if len(op.dimensions) not in ranks:
            kind = {"output": i} if output else {"input": i}
            self.fail(f"rank must be in {list(ranks)}, got {len(op.dimensions)}", **kind)

    def expect_same_type(self, *pairs: tuple[str, int]) -> None:
        """All named operands (('input', 0), ('output', 0), ...) share one type."""
        ops = [(k, i, (self.inputs if k == "input" else self.outputs)[i]) for k, i in pairs]
        k0, i0, first = ops[0]
        for k, i, op in ops[1:]:
            if op.type != first.type:
                self.fail(f"type {op.type.name} differs from {k0} {i0}'s {first.type.name}", **{k: i})

    def expect_same_quant(self, *pairs: tuple[str, int]) -> None:
        ops = [(k, i, (self.inputs if k == "input" else self.outputs)[i]) for k, i in pairs]
        k0, i0, first = ops[0]
        for k, i, op in ops[1:]:
            if op.scale != first.scale or op.zero_point != first.zero_point:
                self.fail(
                    f"scale/zero point ({op.scale:g}, {op.zero_point}) must equal {k0} {i0}'s "
                    f"({first.scale:g}, {first.zero_point})",
                    **{k: i},
                )

    def expect_scalar_in(self, i: int, allowed: Sequence[Any], what: str = "value") -> None:
        v = self.constant_scalar(i)
        if v is not None and v not in allowed:
            self.fail(f"{what} must be one of {list(allowed)}, got {v}", input=i)


class OpContext:
    """Run-time view of one operation: input values and operand metadata with actual dims."""

    # per input: the Python value of a constant scalar operand, else None (set from a plan)
    constant_scalars: tuple | None = None
    # the plan step's dict for what an operation derives from the model alone (parsed
    # parameters, ...), kept across runs; None outside a plan.  A key must name everything
    # else the value depends on (actual input dimensions, ...).
    memo: dict | None = None

    def __init__(self, executor, subgraph: Subgraph, index: int, values: list):
        self.executor = executor
        self.subgraph = subgraph
        self.index = index
        self.operation: Operation = subgraph.operations[index]
        self.inputs: list[np.ndarray | None] = [values[i] for i in self.operation.inputs]
        self.in_operands: list[Operand] = []
        for i, v in zip(self.operation.inputs, self.inputs):
            op = subgraph.operands[i]
            if v is not None and not op.info.is_scalar and tuple(v.shape) != op.dimensions:
                op = op.with_dims(v.shape)
            self.in_operands.append(op)
        self.out_operands: list[Operand] = [subgraph.operands[i] for i in self.operation.outputs]

    @classmethod
    def planned(cls, executor, subgraph: Subgraph, step, values: list) -> "OpContext":
        """The same context from an executor plan's step (operand lists looked up once per
        model): only the substitution of actual dimensions is done per run."""
        self = cls.__new__(cls)
        self.executor, self.subgraph, self.index, self.operation = executor, subgraph, step.index, step.operation
        self.inputs = inputs = [values[i] for i in step.inputs]
        in_operands = list(step.in_operands)
        for k, dims in step.tensor_dims:
            v = inputs[k]
            if v is not None and v.shape != dims:
                in_operands[k] = in_operands[k].with_dims(v.shape)
        self.in_operands = in_operands
        self.out_operands = list(step.out_operands)
        self.constant_scalars = step.constant_scalars
        self.memo = step.memo
        return self

    def remember(self, key, build: Callable[[], Any]):
        """``build()``, once per model step under ``key`` when running from a plan (ctx.memo);
        the key names everything the value depends on besides the model.  A build that fails
        the execution stores nothing."""
        memo = self.memo
        if memo is None:
            return build()
        value = memo.get(key)
        if value is None:
            value = memo[key] = build()
        return value

    def remember_of_constant(self, i: int, key, build: Callable[[], Any]):
        """``build()`` of a value derived from input ``i``: remembered (see ``remember``) when
        that input is a model constant, worked out again each run otherwise."""
        if not self.in_operands[i].is_constant:
            return build()
        return self.remember(key, build)

    @property
    def floats_quiet(self) -> bool:
        """True when numpy's overflow/invalid/divide warnings are already off (inside
        Executor.run), so a hot kernel need not enter its own np.errstate."""
        return getattr(self.executor, "floats_quiet", False)

    @property
    def relaxed(self) -> bool:
        return self.executor.model.relax_fp32_to_fp16

    def has(self, i: int) -> bool:
        return i < len(self.inputs) and self.inputs[i] is not None

    def scalar(self, i: int, default: Any = None):
        """A scalar input as a Python value (``default`` when omitted or absent)."""
        if not self.has(i):
            if default is None:
                self.fail(f"input {i} is required")
            return default
        known = self.constant_scalars
        if known is not None and i < len(known) and known[i] is not None:
            return known[i]  # a model constant, read once per model (~1 us a read saved)
        return self.inputs[i].reshape(-1)[0].item()

    def fail(self, message: str):
        raise OpFailure(f"operations[{self.index}] ({self.operation.name}): {message}")

    def output_dtype(self, j: int) -> np.dtype:
        return self.out_operands[j].info.dtype
