"""NNAPI IF / WHILE -> TFLite's builtin IF / WHILE.

The NNAPI referenced subgraphs an IF or WHILE names become extra subgraphs of the same
flatbuffer (TFLite refers to them by subgraph index).  A referenced subgraph is converted
once per use, with the same converters as the main graph; if any of its operations is
unsupported, the IF/WHILE is unsupported too (IDevice 1.3: control flow "may only be fully
supported if the driver fully supports all operations in the referenced subgraphs").

Operand layouts:
- NNAPI IF(cond, then, else, x1..xn) -> y1..ym  is TFLite IF(cond, x1..xn) -> y1..ym with
  ``IfOptions(thenSubgraphIndex, elseSubgraphIndex)``; both branches take n inputs and give m
  outputs, as in NNAPI.
- NNAPI WHILE(cond, body, m input-outputs, k states, n input-only) -> m outputs.  TFLite's
  WHILE carries one list of loop variables through cond and body: the body must return every
  variable.  So the body subgraph gets the n input-only operands appended as outputs (each
  returned unchanged: a subgraph output may be one of its inputs), and the outer WHILE gets
  m+k+n outputs of which the last k+n are scratch tensors nobody reads.  The NNAPI cond
  already takes m+k+n inputs and gives one BOOL8 [1], as TFLite's cond must.

The loop timeout (NNAPI's MISSED_DEADLINE_TRANSIENT when a WHILE runs longer than the loop
timeout) cannot be expressed in the graph: TFLite has no clock and the Python interpreter has
no cancellation hook.  device.py therefore runs models that contain a WHILE in a forked child
and kills the child when the timeout passes (see device.invoke_bounded).
"""

from __future__ import annotations

import numpy as np

from nnconform.drivers.tflite.builder import BuiltinOperator as B
from nnconform.drivers.tflite.builder import options
from nnconform.drivers.tflite.convert import (
    GraphConv,
    OpCtx,
    Unsupported,
    convert_operation,
    dims_or_none,
    quant_kwargs,
)
from nnconform.ir import Model
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op


def referenced_index(c: OpCtx, k: int) -> int:
    o = c.ins[k]
    if o.type != T.SUBGRAPH:
        raise Unsupported(f"input {k} is not a subgraph reference")
    return int(o.value)


def convert_subgraph(c: OpCtx, ref: int, role: str, *, return_inputs: tuple[int, ...] = ()) -> int:
    """Convert referenced subgraph ``ref`` into a new TFLite subgraph of the same flatbuffer and
    return its index.  ``return_inputs`` lists subgraph input positions appended to its outputs
    (the WHILE body's pass-through of input-only operands)."""
    model: Model = c.g.model
    sg = model.referenced[ref]
    g = GraphConv(c.g.fm, model, sg, f"{c.g.w.sg.name}/{role}{ref}")
    ins = [g.tensor(i) for i in sg.input_indexes]
    for k in range(len(sg.operations)):
        convert_operation(g, k)
    persistent = _may_be_persistent(sg)
    outs = [_arena_copy(g, sg, i, persistent) for i in sg.output_indexes] + [ins[p] for p in return_inputs]
    g.w.set_io(ins, outs)
    return g.w.index


# LiteRT computes some operations at prepare time into a persistent read-only tensor: RANK
# always, and TILE (among others) when all its inputs are constant.  Returned from an IF branch
# such a tensor corrupts the heap (the IF result is garbage and destroying the interpreter
# aborts with "double free" / "invalid pointer": docs/findings_tflite.md).  So every subgraph
# output that RANK writes, or that is computed from constants only, is copied into an
# ordinary tensor first.
_ALWAYS_PERSISTENT = (Op.RANK,)


def _may_be_persistent(sg) -> set[int]:
    """Operands of ``sg`` that LiteRT may hold in a persistent read-only tensor."""
    const = {i for i, o in enumerate(sg.operands) if o.is_constant}
    persistent: set[int] = set()
    for op in sg.operations:  # NNAPI operations are in execution order
        ins = [i for i in op.inputs if not sg.operands[i].is_omitted]
        if op.type in _ALWAYS_PERSISTENT or all(i in const for i in ins):
            const.update(op.outputs)
            persistent.update(op.outputs)
    return persistent


def _arena_copy(g: GraphConv, sg, i: int, persistent: set[int]) -> int:
    t = g.tensor(i)
    if i not in persistent:
        return t
    copy = g.w.tensor(
        dims_or_none(sg.operands[i]), g.w.tensor_type(t), name=f"o{i}_copy", **quant_kwargs(sg.operands[i])
    )
    # SELECT_V2(true, x, x): pure data movement for every type (an arithmetic copy such as
    # ADD of -0.0 would meet XNNPACK's subnormal flush), and not folded at prepare time.
    true = g.const(np.ones((), np.bool_), np.bool_)
    g.w.op(B.SELECT_V2, [true, t, t], [copy])
    return copy


def _outer_inputs(c: OpCtx, first: int) -> list[int]:
    ins = []
    for k in range(first, len(c.ins)):
        if c.omitted(k):
            raise Unsupported(f"omitted control-flow input {k}")
        # The operand in its own type (fp16 stays fp16): subgraphs take NNAPI's types.
        ins.append(c.g.tensor(c.op.inputs[k]))
    return ins


def _outer_outputs(c: OpCtx) -> list[int]:
    return [c.g.tensor(i) for i in c.op.outputs]


def conv_if(c: OpCtx):
    c.require(0, (T.TENSOR_BOOL8,), "the condition")
    then_sg = convert_subgraph(c, referenced_index(c, 1), "then")
    else_sg = convert_subgraph(c, referenced_index(c, 2), "else")
    c.emit(
        B.IF,
        [c.g.tensor(c.op.inputs[0])] + _outer_inputs(c, 3),
        _outer_outputs(c),
        options("IfOptions", thenSubgraphIndex=then_sg, elseSubgraphIndex=else_sg),
    )


def conv_while(c: OpCtx):
    model: Model = c.g.model
    cond_ref, body_ref = referenced_index(c, 0), referenced_index(c, 1)
    body = model.referenced[body_ref]
    cond = model.referenced[cond_ref]
    n_vars = len(c.ins) - 2  # m + k + n
    m = len(c.outs)
    mk = len(body.output_indexes)  # m + k
    if len(body.input_indexes) != n_vars or len(cond.input_indexes) != n_vars or mk < m:
        raise Unsupported("WHILE operand counts do not match its subgraphs")
    cond_sg = convert_subgraph(c, cond_ref, "cond")
    body_sg = convert_subgraph(c, body_ref, "body", return_inputs=tuple(range(mk, n_vars)))
    ins = _outer_inputs(c, 2)
    outs = _outer_outputs(c)
    for p in range(m, n_vars):
        # Scratch outer outputs for the states and input-only operands (NNAPI does not
        # return them); typed and quantised like the variable they carry.
        inner = c.ins[2 + p]
        outs.append(c.g.temp(None, c.g.w.tensor_type(ins[p]), **quant_kwargs(inner)))
    c.emit(B.WHILE, ins, outs, options("WhileOptions", condSubgraphIndex=cond_sg, bodySubgraphIndex=body_sg))


def has_while(model: Model) -> bool:
    return any(op.type == Op.WHILE for op in model.all_operations())


CONVERTERS = {
    Op.IF: conv_if,
    Op.WHILE: conv_while,
}
