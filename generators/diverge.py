"""Which operation of a failing graph goes wrong first?

``first_divergent_operation(device, model, inputs)`` re-runs ``model`` with every operation's
outputs exposed as model outputs (temporaries become SUBGRAPH_OUTPUT; they still feed the
operations after them), on the reference executor and on the driver, and compares the
operations' outputs in execution order.  The first operation whose own outputs fail the
criteria is the one to look at: everything it read matched.  Returns
``(operation index, operation name, Comparison)`` or None when nothing diverges (or the
driver cannot run the exposed model).  :func:`run_exposed` is that driver run on its own, for
a caller that asks more than one question of it (the models suite).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from nnconform.ir import Lifetime, Model
from nnconform.reference.executor import Executor
from nnconform.verdict.criteria import MEDIUM, Comparison, Criteria, compare, criteria_for_operation
from nnconform.verdict.runner import CaseOutcome, run_case


def expose_all(model: Model) -> Model:
    """The same model with every operation output also a model output (in operation order)."""
    sg = model.main
    outs = [i for op in sg.operations for i in op.outputs]
    operands = list(sg.operands)
    for i in outs:
        if operands[i].lifetime == Lifetime.TEMPORARY_VARIABLE:
            operands[i] = replace(operands[i], lifetime=Lifetime.SUBGRAPH_OUTPUT)
    return replace(model, main=replace(sg, operands=tuple(operands), output_indexes=tuple(outs)))


@dataclass
class ExposedRun:
    """One run of a model with every operation's output exposed, on the reference and on the
    driver.  ``actual`` is None when the driver could not run the exposed model."""

    model: Model  # the original model
    exposed: Model
    expected: list  # the reference's value of every exposed output
    outcome: CaseOutcome  # the driver's run (actual: its values of the exposed outputs)

    @property
    def actual(self) -> list | None:
        return self.outcome.actual

    def position(self) -> dict[int, int]:
        """operand index -> position among the exposed outputs"""
        return {idx: k for k, idx in enumerate(self.exposed.main.output_indexes)}

    def driver_values(self, inputs: Sequence[np.ndarray]) -> list:
        """Per operand of the main graph: the model inputs, then every operation output as
        the driver computed it (plain arrays); None for the rest (constants, omitted)."""
        main = self.model.main
        actual = self.actual
        assert actual is not None  # asked only of a run whose exposed model ran
        values: list = [None] * len(main.operands)
        for k, idx in enumerate(main.input_indexes):
            values[idx] = inputs[k]
        for idx, k in self.position().items():
            values[idx] = np.asarray(actual[k])
        return values


def run_exposed(device, model: Model, inputs: Sequence[np.ndarray]) -> ExposedRun:
    exposed = expose_all(model)
    expected = Executor(exposed).run(list(inputs))
    return ExposedRun(model, exposed, expected, run_case(device, exposed, inputs, expected, criteria=MEDIUM))


def first_divergent_operation(
    device,
    model: Model,
    inputs: Sequence[np.ndarray],
    criteria: Criteria | None = None,
    ignored_operands: Sequence[int] = (),
    run: ExposedRun | None = None,
) -> tuple[int, str, Comparison] | None:
    """See the module docstring.  ``criteria`` None: each operation's own random-graph set
    (criteria_for_operation, MEDIUM when it has none); ``ignored_operands`` are not compared
    (e.g. TOPK_V2 indices); ``run``: an exposed run already made (else one is made here)."""
    run = run if run is not None else run_exposed(device, model, inputs)
    if run.actual is None:
        return None
    exposed, expected, actual = run.exposed, run.expected, run.actual
    position = run.position()
    skip = set(ignored_operands)
    for n, op in enumerate(model.main.operations):
        outs = [i for i in op.outputs if i not in skip]
        if not outs:
            continue
        crit = criteria or criteria_for_operation(op.type, default=MEDIUM)
        one = replace(exposed, main=replace(exposed.main, output_indexes=tuple(outs)))
        cmp = compare(one, [expected[position[i]] for i in outs], [actual[position[i]] for i in outs], criteria=crit)
        if not cmp.passed:
            return n, op.name, cmp
    return None
