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

:func:`check_steps` asks a third question, which decides a verdict rather than localising
one: given *exactly* the values the driver fed each operation during its own run, is each
operation's output within that operation's CTS criteria?  When it is, for every operation,
and the exposed run gave the same final outputs as the normal run, the driver's result is a
chain of conformant steps, and a difference at the model output is accumulated rounding.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from nnconform.generators.diverge import ExposedRun, run_exposed
from nnconform.ir import Lifetime, Model, Operand, Subgraph
from nnconform.reference.executor import Executor


def single_operation_model(model: Model, n: int, values: Sequence) -> tuple[Model, list[np.ndarray]]:
    """Operation ``n`` of the main graph alone: its non-constant inputs become model inputs
    (dimensions from the reference's values), its outputs model outputs."""
    sg = model.main
    op = sg.operations[n]
    remap: dict[int, int] = {}
    operands: list[Operand] = []
    inputs: list[int] = []
    feeds: list[np.ndarray] = []
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
            operands.append(
                replace(o, lifetime=Lifetime.SUBGRAPH_INPUT, dimensions=dims, value=None, num_consumers=None)
            )
            inputs.append(remap[i])
            feeds.append(v)
    outs = []
    for i in op.outputs:
        o = sg.operands[i]
        remap[i] = len(operands)
        v = np.asarray(values[i])
        operands.append(replace(o, lifetime=Lifetime.SUBGRAPH_OUTPUT, dimensions=tuple(v.shape), num_consumers=None))
        outs.append(remap[i])
    new_op = replace(op, inputs=tuple(remap[i] for i in op.inputs), outputs=tuple(remap[i] for i in op.outputs))
    sub = Subgraph(tuple(operands), (new_op,), tuple(inputs), tuple(outs), f"{sg.name or 'main'}#{n}")
    return Model(sub, model.referenced, model.relax_fp32_to_fp16), feeds


def first_failing_operation_alone(device, model: Model, inputs: Sequence[np.ndarray], *, limit: int | None = None):
    """(operation index, name, Comparison, operations skipped as unsupported) of the first
    operation that fails its own criteria on the reference's inputs, or None."""
    from nnconform.verdict.criteria import MEDIUM, criteria_for_operation
    from nnconform.verdict.runner import FAIL, run_case

    ex = Executor(model, keep_values=True)
    ex.run(list(inputs))
    values = ex.main_values
    assert values is not None  # keep_values=True keeps them
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


@dataclass
class StepCheck:
    """The driver's run, checked operation by operation (see :func:`check_steps`)."""

    run: ExposedRun
    step: tuple | None = None  # (index, name, Comparison) of the first operation out of its criteria
    reproduces: bool = False  # the exposed run's final outputs equal the normal run's
    error: str | None = None  # why the check could not be made

    @property
    def accumulated_rounding(self) -> bool:
        """Every operation conformant on its own inputs, and those runs are the normal run's."""
        return self.error is None and self.step is None and self.reproduces

    def describe(self) -> str:
        if self.error is not None:
            return f"the operations of the driver's run could not be checked: {self.error}"
        if self.step is not None:
            n, name, cmp = self.step
            return f"operation #{n} {name} is out of its own criteria on the inputs the driver gave it: {cmp.message}"
        if not self.reproduces:
            return (
                "every operation is within its own criteria on the inputs the driver gave it, but with every "
                "operation output exposed the driver's final outputs changed, so that run does not explain "
                "the normal one"
            )
        return (
            "every operation of the driver's run is within its own CTS criteria on the inputs the driver gave "
            "it: accumulated rounding"
        )


def check_steps(device, model: Model, inputs: Sequence[np.ndarray], actual: Sequence[np.ndarray]) -> StepCheck:
    """Re-run the model on the driver with every operation output exposed; then each
    operation, as a one-operation model on the reference, is fed the driver's values of its
    inputs, and its driver output is judged by that operation's CTS criteria.  ``actual``
    is the driver's normal run, which the exposed run must reproduce exactly (a driver that
    fuses or reorders differently once intermediates are visible does not get the benefit)."""
    from nnconform.errors import NnError
    from nnconform.verdict.criteria import MEDIUM, Comparison, compare, criteria_for_operation

    run = run_exposed(device, model, inputs)
    check = StepCheck(run)
    if run.actual is None:
        check.error = f"the driver could not run the model with its operation outputs exposed ({run.outcome.message})"
        return check
    position = run.position()
    finals = [np.asarray(run.actual[position[i]]) for i in model.main.output_indexes]
    check.reproduces = len(finals) == len(actual) and all(
        f.dtype == np.asarray(a).dtype
        and f.shape == np.shape(a)
        and np.array_equal(f, a, equal_nan=f.dtype.kind in "fc")
        for f, a in zip(finals, actual)
    )
    values = run.driver_values(inputs)
    for n, op in enumerate(model.main.operations):
        one, feeds = single_operation_model(model, n, values)
        try:
            expected = Executor(one).run(feeds)
        except NnError as e:  # the driver's values are not a valid input of this operation
            check.step = n, op.name, Comparison(passed=False, message=f"the reference rejects the driver's inputs: {e}")
            return check
        cmp = compare(
            one, expected, [values[i] for i in op.outputs], criteria=criteria_for_operation(op.type, default=MEDIUM)
        )
        if not cmp.passed:
            check.step = n, op.name, cmp
            return check
    return check
