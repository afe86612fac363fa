"""Which operation of a deep model is wrong *on its own*?

``generators.diverge.first_divergent_operation`` compares every operation's output along the
driver's own run, so an operation sees inputs that already carry the driver's rounding from
the layers before it; in a 100-operation network an exact operation (PAD, RESHAPE) can be the
first to fail its strict per-operation criteria only because of what it was fed.
:func:`first_failing_operation_alone` asks the other question: each operation, in execution
order, becomes a one-operation model whose inputs are the *reference's* values of its
operands (constants stay constants), runs on the driver, and is judged by that operation's
CTS criteria.  The first one that fails is wrong by itself.  Operations the driver does not
support alone are passed over (counted).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from ..executor import Executor
from ..ir import Lifetime, Model, Subgraph


def single_operation_model(model: Model, n: int, values: Sequence) -> tuple[Model, list[np.ndarray]]:
    """Operation ``n`` of the main graph alone: its non-constant inputs become model inputs
    (dimensions from the reference's values), its outputs model outputs."""
    sg = model.main
    op = sg.operations[n]
    remap: dict[int, int] = {}
    operands, inputs, feeds = [], [], []
    for i in op.inputs:
        if i in remap:
            continue
        o = sg.operands[i]
        remap[i] = len(operands)
        if o.is_constant or o.is_omitted or o.lifetime == Lifetime.SUBGRAPH:
            operands.append(o)
        else:
            v = np.asarray(values[i])
            dims = tuple(v.shape) if not o.info.is_scalar else ()
            operands.append(replace(o, lifetime=Lifetime.SUBGRAPH_INPUT, dimensions=dims, value=None,
                                    num_consumers=None))
            inputs.append(remap[i])
            feeds.append(v)
    outs = []
    for i in op.outputs:
        o = sg.operands[i]
        remap[i] = len(operands)
        v = np.asarray(values[i])
        operands.append(replace(o, lifetime=Lifetime.SUBGRAPH_OUTPUT, dimensions=tuple(v.shape),
                                num_consumers=None))
        outs.append(remap[i])
    new_op = replace(op, inputs=tuple(remap[i] for i in op.inputs), outputs=tuple(remap[i] for i in op.outputs))
    sub = Subgraph(tuple(operands), (new_op,), tuple(inputs), tuple(outs), f"{sg.name or 'main'}#{n}")
    return Model(sub, model.referenced, model.relax_fp32_to_fp16), feeds


def first_failing_operation_alone(device, model: Model, inputs: Sequence[np.ndarray], *, limit: int | None = None):
    """(operation index, name, Comparison, operations skipped as unsupported) of the first
    operation that fails its own criteria on the reference's inputs, or None."""
    from ..criteria import MEDIUM, criteria_for_operation
    from ..runner import FAIL, run_case
    ex = Executor(model)
    ex.run(list(inputs))
    values = ex.main_values
    skipped = 0
    ops = model.main.operations
    for n in range(len(ops) if limit is None else min(limit, len(ops))):
        one, feeds = single_operation_model(model, n, values)
        expected = [values[i] for i in ops[n].outputs]
        outcome = run_case(device, one, feeds, expected, criteria=criteria_for_operation(ops[n].type, default=MEDIUM))
        if outcome.outcome == FAIL and outcome.comparison is not None:
            return n, ops[n].name, outcome.comparison, skipped
        if outcome.outcome != "PASS":
            skipped += 1
    return None
