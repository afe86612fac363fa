"""Which operation of a failing graph goes wrong first?

``first_divergent_operation(device, model, inputs)`` re-runs ``model`` with every operation's
outputs exposed as model outputs (temporaries become SUBGRAPH_OUTPUT; they still feed the
operations after them), on the reference executor and on the driver, and compares the
operations' outputs in execution order.  The first operation whose own outputs fail the
criteria is the one to look at: everything it read matched.  Returns
``(operation index, operation name, Comparison)`` or None when nothing diverges (or the
driver cannot run the exposed model).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from nnconform.criteria import Comparison, Criteria, compare, criteria_for_operation, MEDIUM
from nnconform.executor import Executor
from nnconform.ir import Lifetime, Model
from nnconform.runner import run_case


def expose_all(model: Model) -> Model:
    """The same model with every operation output also a model output (in operation order)."""
    sg = model.main
    outs = [i for op in sg.operations for i in op.outputs]
    operands = list(sg.operands)
    for i in outs:
        if operands[i].lifetime == Lifetime.TEMPORARY_VARIABLE:
            operands[i] = replace(operands[i], lifetime=Lifetime.SUBGRAPH_OUTPUT)
    return replace(model, main=replace(sg, operands=tuple(operands), output_indexes=tuple(outs)))


def first_divergent_operation(device, model: Model, inputs: Sequence[np.ndarray],
                              criteria: Criteria | None = None,
                              ignored_operands: Sequence[int] = ()) -> tuple[int, str, Comparison] | None:
    """See the module docstring.  ``criteria`` None: each operation's own random-graph set
    (criteria_for_operation, MEDIUM when it has none); ``ignored_operands`` are not compared
    (e.g. TOPK_V2 indices)."""
    exposed = expose_all(model)
    expected = Executor(exposed).run(list(inputs))
    outcome = run_case(device, exposed, inputs, expected, criteria=criteria or MEDIUM)
    if outcome.actual is None:
        return None
    position = {idx: k for k, idx in enumerate(exposed.main.output_indexes)}
    skip = set(ignored_operands)
    for n, op in enumerate(model.main.operations):
        outs = [i for i in op.outputs if i not in skip]
        if not outs:
            continue
        crit = criteria or criteria_for_operation(op.type, default=MEDIUM)
        one = replace(exposed, main=replace(exposed.main, output_indexes=tuple(outs)))
        cmp = compare(one, [expected[position[i]] for i in outs],
                      [outcome.actual[position[i]] for i in outs], criteria=crit)
        if not cmp.passed:
            return n, op.name, cmp
    return None
