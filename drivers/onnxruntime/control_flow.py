"""IF -> ONNX ``If`` and WHILE -> ONNX ``Loop``.

A referenced NNAPI subgraph is converted with the same per-operation converters as the main
graph (``convert.convert_operation``) and *inlined* into the ONNX subgraph attribute: its
inputs become the outer names the IF/WHILE passes in, every other name gets a prefix unique in
the model (ONNX forbids a subgraph name shadowing an outer one).  So the support rule of
HAL 1.3 holds by construction: an IF/WHILE converts only if every operation of every subgraph
it references converts (an ``Unsupported`` inside propagates).  An operation that must fail
(``Rejected``) inside a branch or body is reported unsupported: it fails only if that branch
runs, which a static graph cannot say.

IF: ``If(cond)`` with the then/else subgraphs as branches.  ONNX branches take no inputs; they
read the IF's data inputs from the outer scope.  Outputs keep the shapes the taken branch
produced (unknown dimensions are declared unknown).

WHILE: NNAPI runs the condition on the loop variables, stops when it is false, otherwise runs
the body, whose m + k outputs replace the first m + k variables.  As a ``Loop`` with no trip
count: the initial condition is the condition subgraph on the initial values, outside the
loop; the body graph runs the body subgraph, then the condition subgraph on the new values,
and hands that back as the loop's condition.  The m + k loop-carried values are Loop state;
the n input-only operands are read from the outer scope (they never change).  The WHILE's
outputs are the first m final values.  Loop variables whose dimensions NNAPI leaves unknown
are declared unknown in the body, so a state that grows every iteration is allowed.

Loop timeout (decision): NNAPI aborts a WHILE whose condition is still true after the loop
timeout (2 s default, 15 s max) with MISSED_DEADLINE; NeuralNetworks.h calls it a "fuzzy
per-loop timeout intended to prevent infinite loops".  A trip-count bound would not be exact
(NNAPI bounds time, not iterations), so the Loop has none.  Instead the device arms
onnxruntime's ``RunOptions.terminate`` (checked before every kernel, inside Loop bodies too)
when a run of a model holding a WHILE lasts longer than the loop timeout, and reports
MISSED_DEADLINE_TRANSIENT (device.py).  The bound is per run, not per loop: it is exact for
the infinite-loop cases (a run with a loop that never ends is stopped after the timeout) and
it can only differ from NNAPI when the whole run exceeds the timeout without any single loop
doing so (several long loops in sequence, or long work outside the loops): then the adapter
reports MISSED_DEADLINE where the reference would finish.  docs/findings.md says so.
"""

from __future__ import annotations

from typing import Callable, Sequence

import onnx
from onnx import helper

from nnconform.ir import Model, Subgraph
from nnconform.ir import OperationType as Op

COND, THEN, ELSE, IF_FIRST = 0, 1, 2, 3
WHILE_COND, WHILE_BODY, WHILE_FIRST = 0, 1, 2


def _value_info(sg: Subgraph, index: int, name: str) -> onnx.ValueInfoProto:
    o = sg.operands[index]
    if o.type not in cv.ONNX_TYPE:
        raise cv.Unsupported(f"subgraph operand of type {o.type.name}")
    if o.info.is_scalar:
        shape = []
    elif not o.dimensions:
        shape = None  # unknown rank
    else:
        shape = [d if d > 0 else None for d in o.dimensions]
    return helper.make_tensor_value_info(name, cv.ONNX_TYPE[o.type], shape)


def _rename_graph(graph: onnx.GraphProto, rename: Callable[[str], str]) -> None:
    """Rename every value of ``graph`` (and of the graphs nested in its nodes) in place."""
    for vi in (*graph.input, *graph.output, *graph.value_info):
        vi.name = rename(vi.name)
    for t in graph.initializer:
        t.name = rename(t.name)
    _rename_nodes(graph.node, rename)


def _rename_nodes(nodes, rename: Callable[[str], str]) -> None:
    for n in nodes:
        n.input[:] = [rename(x) if x else x for x in n.input]
        n.output[:] = [rename(x) if x else x for x in n.output]
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                _rename_graph(a.g, rename)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sub in a.graphs:
                    _rename_graph(sub, rename)


def inline_subgraph(
    model: Model, sg: Subgraph, inputs: Sequence[str], prefix: str
) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto], list[str]]:
    """Convert ``sg`` with its inputs bound to the ONNX names ``inputs``.  Returns its nodes,
    initialisers and the ONNX names of its outputs (all prefixed with ``prefix``)."""
    if len(inputs) != len(sg.input_indexes):
        raise cv.Unsupported(f"subgraph '{sg.name}' takes {len(sg.input_indexes)} inputs, got {len(inputs)}")
    g = cv.GraphBuilder(sg, model)
    for k in range(len(sg.operations)):
        try:
            cv.convert_operation(g, k)
        except cv.Rejected as e:
            raise cv.Unsupported(
                f"subgraph '{sg.name}' operations[{k}] ({sg.operations[k].name}) must fail "
                f"when it runs ({e}); a static graph cannot fail only on that path"
            ) from None
        except cv.Unsupported as e:
            raise cv.Unsupported(f"subgraph '{sg.name}' operations[{k}] ({sg.operations[k].name}): {e}") from None
    bound = {f"o{idx}": name for idx, name in zip(sg.input_indexes, inputs)}

    def rename(name: str) -> str:
        return bound.get(name) or f"{prefix}{name}"

    graph = helper.make_graph(g.nodes, "inlined", [], [], g.initializers)
    _rename_graph(graph, rename)
    outputs = []
    for idx in sg.output_indexes:
        op = sg.operands[idx]
        if op.is_constant or f"o{idx}" in bound:
            raise cv.Unsupported(f"subgraph '{sg.name}' output {idx} is not computed by an operation")
        outputs.append(rename(f"o{idx}"))
    return list(graph.node), list(graph.initializer), outputs


def _referenced(c: cv.OpCtx, k: int) -> Subgraph:
    model = c.g.model
    if model is None:
        raise cv.Unsupported("no model to look the referenced subgraph up in")
    ref = int(c.ins[k].value)
    if not 0 <= ref < len(model.referenced):
        raise cv.Unsupported(f"input {k} refers to referenced[{ref}], which does not exist")
    return model.referenced[ref]


def _graph(nodes, inits, inputs, outputs, name: str) -> onnx.GraphProto:
    return helper.make_graph(nodes, name, inputs, outputs, inits)


def _distinct_outputs(c: cv.OpCtx, nodes: list, names: list[str]) -> list[str]:
    """A graph output may not be listed twice: copy repeats through Identity."""
    seen, out = set(), []
    for n in names:
        if n in seen:
            copy = c.g.fresh("dup")
            nodes.append(helper.make_node("Identity", [n], [copy]))
            n = copy
        seen.add(n)
        out.append(n)
    return out


def conv_if(c: cv.OpCtx) -> None:
    model = c.g.model
    if c.ins[COND].is_omitted:
        raise cv.Unsupported("IF without a condition value")
    data = [c.x(k) for k in range(IF_FIRST, len(c.ins))]
    branches = []
    for slot, role in ((THEN, "then"), (ELSE, "else")):
        sg = _referenced(c, slot)
        prefix = f"{c.g.fresh(role)}_"
        nodes, inits, outs = inline_subgraph(model, sg, data, prefix)
        if len(outs) != len(c.outs):
            raise cv.Unsupported(f"{role} branch gives {len(outs)} outputs, the IF has {len(c.outs)}")
        outs = _distinct_outputs(c, nodes, outs)
        infos = [_value_info(sg, idx, name) for idx, name in zip(sg.output_indexes, outs)]
        branches.append(_graph(nodes, inits, [], infos, f"{prefix}{role}"))
    c.node("If", [c.x(COND)], [c.y(k) for k in range(len(c.outs))], then_branch=branches[0], else_branch=branches[1])


def conv_while(c: cv.OpCtx) -> None:
    model = c.g.model
    cond_sg, body_sg = _referenced(c, WHILE_COND), _referenced(c, WHILE_BODY)
    data = [c.x(k) for k in range(WHILE_FIRST, len(c.ins))]
    m = len(c.outs)
    carried = len(body_sg.output_indexes)  # m + k loop-carried variables
    if carried < m or carried > len(data):
        raise cv.Unsupported(f"body gives {carried} outputs for {m} WHILE outputs and {len(data)} inputs")
    input_only = data[carried:]

    # The condition on the initial values, outside the Loop.
    nodes0, inits0, (first_cond,) = inline_subgraph(model, cond_sg, data, f"{c.g.fresh('cond0')}_")
    c.g.nodes.extend(nodes0)
    c.g.initializers.extend(inits0)

    # The Loop body: (iteration, condition, carried...) -> (condition, carried...).
    p = f"{c.g.fresh('loop')}_"
    iter_in, cond_in = f"{p}iter", f"{p}cond_in"
    var_in = [f"{p}var{j}" for j in range(carried)]
    nodes, inits, outs = inline_subgraph(model, body_sg, var_in + input_only, f"{p}body_")
    nodes2, inits2, (next_cond,) = inline_subgraph(model, cond_sg, outs + input_only, f"{p}cond_")
    nodes += nodes2
    inits += inits2
    outs = _distinct_outputs(c, nodes, [next_cond] + outs)
    body_inputs = [
        helper.make_tensor_value_info(iter_in, cv.I64, []),
        helper.make_tensor_value_info(cond_in, cv.BOOL, None),
    ]
    body_inputs += [_value_info(body_sg, body_sg.input_indexes[j], var_in[j]) for j in range(carried)]
    body_outputs = [helper.make_tensor_value_info(outs[0], cv.BOOL, None)]
    body_outputs += [_value_info(body_sg, body_sg.output_indexes[j], outs[1 + j]) for j in range(carried)]
    body = _graph(nodes, inits, body_inputs, body_outputs, f"{p}body")
    finals = [c.y(j) for j in range(m)] + [c.g.fresh("state") for _ in range(carried - m)]
    c.node("Loop", ["", first_cond, *data[:carried]], finals, body=body)


CONVERTERS = {Op.IF: conv_if, Op.WHILE: conv_while}


def disabled_optimizers(model: Model) -> list[str]:
    """onnxruntime graph optimisers to turn off for ``model``.

    NoopElimination, with If/Loop: it removes an ``Add`` of zero between a Cast to float32 and
    a Cast back to float16 and rewires the outer graph, but not the If/Loop subgraphs that
    read the removed value from the outer scope, which then fail with "Missing Input"
    (onnxruntime 1.32; docs/findings.md, finding "NoopElimination and subgraphs").  Turning an
    optimisation off does not change what the graph computes."""
    return ["NoopElimination"] if model.referenced else []


def has_while(model: Model) -> bool:
    """Whether any subgraph of ``model`` holds a WHILE (the device then arms the loop timeout)."""
    return any(op.type == Op.WHILE for op in model.all_operations())


# Last: convert.py imports this module to register CONVERTERS, and the converters here use
# convert's builders only when they run (so importing either module first works).
from nnconform.drivers.onnxruntime import convert as cv  # noqa: E402
