"""Shared pieces of the control-flow operations IF (if_op.py) and WHILE (while_op.py).

Static side (used by both ``validate`` functions):
- a SUBGRAPH input must be a SUBGRAPH operand (type and lifetime) whose value indexes
  ``model.referenced``; :func:`referenced_subgraph` resolves it;
- *compatible* operands (NNAPI ``Utils.cpp`` "compatible"): same type, scale, zero point and
  per-channel parameters, and, where both ranks are known, the same rank and the same size in
  every dimension that both sides know (0 = unknown matches anything);
- a condition operand is TENSOR_BOOL8 of dimensions exactly [1].

We validate the way the NNAPI *runtime* does (``allowControlFlowOperationWithOperandOfUnknownSize``):
IF/WHILE operands may have unknown dimensions.  The HAL insists on fully specified operands for
drivers, but the runtime (and the CTS vectors ``while_fib_unknown_*``, ``if_simple_unknown_*``)
runs such models on the CPU, and a WHILE whose state grows every iteration needs them.

Run-time side: :func:`run_referenced` runs a referenced subgraph through the executor after
checking that every value fits the subgraph's declared input (an outer operand of unknown shape
may turn out not to fit a branch's known one: that is an execution failure, not a bad request).
Cyclic subgraph references are rejected by ``nnconform.ir.validation`` before any signature check,
so the recursion here always ends.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from nnconform.errors import OpFailure
from nnconform.ir import Lifetime, Operand, Subgraph
from nnconform.ir import OperandType as T
from nnconform.reference.ops.registry import OpContext, OpView


def incompatibility(inner: Operand, outer: Operand) -> str | None:
    """Why ``inner`` (a branch/body/condition operand) cannot stand for ``outer``; None if it can."""
    if inner.type != outer.type:
        return f"type {inner.type.name} differs from {outer.type.name}"
    if inner.dimensions and outer.dimensions and not inner.info.is_scalar:
        if len(inner.dimensions) != len(outer.dimensions):
            return (
                f"rank {len(inner.dimensions)} ({list(inner.dimensions)}) differs from rank "
                f"{len(outer.dimensions)} ({list(outer.dimensions)})"
            )
        for k, (a, b) in enumerate(zip(inner.dimensions, outer.dimensions)):
            if a and b and a != b:
                return (
                    f"dimension {k} is {a}, the other side has {b} ({list(inner.dimensions)} vs "
                    f"{list(outer.dimensions)})"
                )
    if inner.scale != outer.scale:
        return f"scale {inner.scale:g} differs from {outer.scale:g}"
    if inner.zero_point != outer.zero_point:
        return f"zero point {inner.zero_point} differs from {outer.zero_point}"
    if inner.channel_quant != outer.channel_quant:
        return f"per-channel parameters {inner.channel_quant} differ from {outer.channel_quant}"
    return None


def referenced_subgraph(v: OpView, i: int, role: str) -> tuple[int, Subgraph]:
    """The subgraph that input ``i`` (a SUBGRAPH operand) refers to, as (index, subgraph)."""
    op = v.inputs[i]
    if op.type != T.SUBGRAPH or op.lifetime != Lifetime.SUBGRAPH:
        v.fail(
            f"the {role} must be a SUBGRAPH operand with lifetime SUBGRAPH, got {op.type.name} "
            f"with lifetime {Lifetime(op.lifetime).name}",
            input=i,
        )
    ref = int(op.value)
    if not 0 <= ref < len(v.model.referenced):
        v.fail(
            f"the {role} refers to referenced[{ref}], but the model has {len(v.model.referenced)} referenced subgraphs",
            input=i,
        )
    return ref, v.model.referenced[ref]


def check_condition(v: OpView, operand: Operand, what: str, **slot) -> None:
    """A condition is TENSOR_BOOL8 with dimensions exactly [1]."""
    if operand.type != T.TENSOR_BOOL8:
        v.fail(f"{what} must be TENSOR_BOOL8, got {operand.type.name}", **slot)
    if operand.dimensions != (1,):
        v.fail(f"{what} must have dimensions [1], got {list(operand.dimensions)}", **slot)


def check_compatible(v: OpView, inner: Operand, outer: Operand, inner_name: str, outer_name: str, **slot) -> None:
    why = incompatibility(inner, outer)
    if why is not None:
        v.fail(f"{inner_name} is not compatible with {outer_name}: {why}", **slot)


def check_data_inputs_present(v: OpView, first: int) -> None:
    """Data inputs of IF/WHILE are required: an omitted (NO_VALUE) one has nothing to pass on."""
    for i in range(first, len(v.inputs)):
        if v.inputs[i].is_omitted:
            v.fail("is omitted (NO_VALUE); control-flow data inputs must have a value", input=i)


# ---------------------------------------------------------------------------------------
# Run time
# ---------------------------------------------------------------------------------------


def subgraph_at(ctx: OpContext, i: int) -> Subgraph:
    """The referenced subgraph named by input ``i`` of the running operation."""
    return ctx.executor.model.referenced[int(np.asarray(ctx.inputs[i]).reshape(-1)[0])]


def _fits(sg: Subgraph, values: Sequence[np.ndarray], role: str, ctx: OpContext) -> None:
    if len(values) != len(sg.input_indexes):
        ctx.fail(f"the {role} takes {len(sg.input_indexes)} inputs, got {len(values)}")
    for k, (idx, v) in enumerate(zip(sg.input_indexes, values)):
        op = sg.operands[idx]
        if v is None:
            ctx.fail(f"{role} input {k} has no value")
        if op.info.is_scalar or not op.dimensions:
            continue
        shape = tuple(np.shape(v))
        if len(shape) != len(op.dimensions) or any(d and d != s for d, s in zip(op.dimensions, shape)):
            ctx.fail(f"{role} input {k} is declared {list(op.dimensions)}, the value passed in has shape {list(shape)}")


def run_referenced(ctx: OpContext, sg: Subgraph, values: Sequence[np.ndarray], role: str) -> list[np.ndarray]:
    """Run ``sg`` on ``values`` with the executor that runs ``ctx`` (deadline, loop timeout and
    overrides carry over, so nested control flow behaves like the outer one)."""
    _fits(sg, values, role, ctx)
    try:
        return ctx.executor.run_subgraph(sg, list(values))
    except OpFailure as e:
        raise OpFailure(
            f"operations[{ctx.index}] ({ctx.operation.name}) {role} '{sg.name or 'unnamed'}': {e}"
        ) from None


def condition_value(ctx: OpContext, value: np.ndarray | None, what: str) -> bool:
    if value is None or np.size(value) != 1:
        ctx.fail(
            f"{what} must hold exactly one TENSOR_BOOL8 value, got "
            f"{'none' if value is None else f'shape {list(np.shape(value))}'}"
        )
    return bool(np.asarray(value).reshape(-1)[0])
