"""Which operation is a failing case's fault?  (The "blamed operation" of a result row.)

A case names every operation of its model, but a failure is the fault of one of them: the
first whose own outputs diverge from the reference, everything it read having matched.  The
conformance matrix counts a failure in that operation's cell only, so a driver whose quantised
ADD is wrong paints ADD quant8 red and not the 60 operations whose AOSP vectors happen to use
an ADD.

``blame(device, model, inputs, outcome)`` decides it:

- a model with one operation (helper operations aside, see below) blames that operation;
- a comparison failure of a larger model re-runs it with every operation's outputs exposed
  (``generators.diverge``) and blames the first operation that diverges;
- anything else (a rejection, a prepare failure, a crash, a divergence hunt that finds
  nothing) blames the case's first operation that is not a helper.

**Helper operations.**  AOSP's ``all_inputs_as_internal`` / ``all_outputs_as_internal``
variations put an ``ADD(x, dummy zeros)`` before every input or after every output, to turn
model inputs and outputs into temporaries.  Such an ADD is never blamed for being in the case:
a failure of a CONV_2D vector is CONV_2D's.  Only when the helper itself is the operation whose
outputs diverge (the driver's ADD is wrong: an ADD of zeros is exact) is the failure ADD's, and
the row says so (``how == "helper ADD diverged"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence, cast

import numpy as np

from nnconform.errors import NnError
from nnconform.ir import SHORT_TYPE_NAME, Lifetime, Model, Operand, OperandType, OperationType

if TYPE_CHECKING:
    from nnconform.driver import Device
    from nnconform.verdict.criteria import Comparison, Criteria
    from nnconform.verdict.runner import CaseOutcome

# Names AOSP's test generator gives the zero operand of a helper ADD (Android 13 renamed it).
HELPER_OPERAND_NAMES = ("dummy", "placeholder")


@dataclass(frozen=True)
class Blame:
    operation: str  # NNAPI operation name, e.g. "CONV_2D"
    data_type: str  # short type name of the operation's primary input, e.g. "quant8"
    index: int | None  # position in the main graph's operations, None when unknown
    how: str  # "only operation", "first divergent operation", "helper ADD diverged",
    # "first operation of the case"
    message: str = ""  # the divergence hunt's mismatch on the blamed operation's own outputs
    criterion: str = ""  # and the criterion it broke ("element: atol 1, rtol 0")

    def to_extra(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"blamed_index": self.index, "blamed_how": self.how}
        if self.message:
            extra["blamed_message"] = self.message
        return extra


def _is_zero_constant(operand: Operand) -> bool:
    if operand.lifetime not in (Lifetime.CONSTANT_COPY, Lifetime.CONSTANT_REFERENCE) or operand.value is None:
        return False
    value = np.asarray(operand.value)
    if value.dtype.kind in "ui" and operand.type in (
        OperandType.TENSOR_QUANT8_ASYMM,
        OperandType.TENSOR_QUANT8_ASYMM_SIGNED,
        OperandType.TENSOR_QUANT16_ASYMM,
    ):
        return bool(np.all(value.astype(np.int64) == operand.zero_point))
    return bool(np.all(value == 0))


def helper_operations(model: Model) -> set[int]:
    """Indexes (in the main graph) of the helper ADDs of AOSP's lifetime variations: an ADD of
    a constant named ``dummy``/``placeholder`` holding zeros, with no fused activation."""
    sg = model.main
    found = set()
    for n, op in enumerate(sg.operations):
        if op.type != OperationType.ADD or len(op.inputs) != 3:
            continue
        a, b, act = (sg.operands[i] for i in op.inputs)
        act_value = None if act.value is None else int(np.asarray(act.value).reshape(-1)[0])
        if act_value != 0:
            continue
        for other in (a, b):
            if other.name.startswith(HELPER_OPERAND_NAMES) and _is_zero_constant(other):
                found.add(n)
                break
    return found


def operation_data_type(model: Model, index: int) -> str:
    """Short name of the type an operation of the main graph runs on (its primary input; fp32
    in a relaxed model is "relaxed")."""
    from nnconform.reference.ops import REGISTRY

    sg = model.main
    op = sg.operations[index]
    if op.type in (OperationType.IF, OperationType.WHILE) and op.outputs:
        t = sg.operands[op.outputs[0]].type  # the condition is bool8 whatever the IF carries
    else:
        opdef = REGISTRY.get(op.type) if isinstance(op.type, OperationType) else None
        k = opdef.primary_input if opdef else 0
        if not op.inputs:
            return ""
        t = sg.operands[op.inputs[min(k, len(op.inputs) - 1)]].type
    name = SHORT_TYPE_NAME.get(t, t.name)
    return "relaxed" if name == "fp32" and model.relax_fp32_to_fp16 else name


def criterion_label(cmp: Comparison | None) -> str:
    """What a failed comparison broke, the same for every case of one bug: the first
    mismatch's kind and the tolerance it was held to ("element: atol 1, rtol 0"), so a quant8
    failure in a relaxed model groups with the same failure elsewhere."""
    if cmp is None or cmp.passed or not cmp.mismatches:
        return ""
    m = cmp.mismatches[0]
    if m.atol is not None and m.rtol is not None:
        return f"{m.kind}: atol {float(m.atol):g}, rtol {float(m.rtol):g}"
    return m.kind


def _first_subject(model: Model, helpers: set[int]) -> int | None:
    ops = model.main.operations
    for n in range(len(ops)):
        if n not in helpers:
            return n
    return 0 if ops else None


def _inside_control_flow(
    device: Device | None, model: Model, inputs: Sequence[np.ndarray | None], n: int, criteria: Criteria | None
) -> Blame | None:
    """An IF or WHILE diverged: hunt inside the subgraph it ran (the branch taken; the WHILE
    body on its first iteration), on the reference's values of its inputs.  The blame names the
    inner operation ("inside IF")."""
    from dataclasses import replace as _replace

    from nnconform.generators.diverge import first_divergent_operation
    from nnconform.reference.executor import Executor
    from nnconform.verdict.criteria import default_criteria

    sg = model.main
    op = sg.operations[n]
    ex = Executor(model, keep_values=True)
    ex.run(list(inputs))
    values = ex.main_values
    if values is None:
        return None
    if op.type == OperationType.IF:
        cond = values[op.inputs[0]]
        if cond is None:
            return None
        branch = sg.operands[op.inputs[1] if bool(np.asarray(cond).reshape(-1)[0]) else op.inputs[2]].value
        inner_inputs = [values[i] for i in op.inputs[3:]]
    else:
        branch = sg.operands[op.inputs[1]].value
        inner_inputs = [values[i] for i in op.inputs[2:]]
    inner = _replace(model, main=model.referenced[int(cast("np.ndarray | int", branch))])  # valid: an index
    if len(inner_inputs) != len(inner.main.input_indexes):
        return None
    div = first_divergent_operation(device, inner, inner_inputs, criteria or default_criteria(inner), ())
    if div is None:
        return None
    k, _, cmp = div
    inner_op = inner.main.operations[k]
    if inner_op.type in (OperationType.IF, OperationType.WHILE):
        return None
    return Blame(
        inner_op.name,
        operation_data_type(inner, k),
        n,
        f"first divergent operation inside {op.name}",
        cmp.message,
        criterion_label(cmp),
    )


def blame(
    device: Device | None,
    model: Model,
    inputs: Sequence[np.ndarray | None],
    outcome: CaseOutcome,
    *,
    ignored: Sequence[bool] | None = None,
    criteria: Criteria | None = None,
) -> Blame | None:
    """The operation to blame for ``outcome`` (a runner CaseOutcome); None for a case that did
    not fail or a model without operations.  ``criteria`` are the case's own (None: the
    defaults the runner used)."""
    if outcome.outcome not in ("FAIL", "ERROR", "CRASH", "HANG"):
        return None
    ops = model.main.operations
    if not ops:
        return None
    helpers = helper_operations(model)
    subjects = [n for n in range(len(ops)) if n not in helpers]
    # A partitioned case (runner CaseOutcome.partition) is the fault of the driver's
    # partitions: the reference ran the rest exactly on the values it was handed.
    info = getattr(outcome, "partition", None)
    driver = set(info.get("driver_operations", ())) if info else set()
    if driver:
        subjects = [n for n in subjects if n in driver] or sorted(driver)
    hunt = outcome.outcome == "FAIL" and outcome.stage == "compare"
    control_flow = any(op.type in (OperationType.IF, OperationType.WHILE) for op in ops)
    # One operation needs no hunt, unless it is an IF or WHILE (the hunt goes inside it).
    if (len(ops) == 1 and not (hunt and control_flow)) or (len(subjects) == 1 and not hunt):
        n = subjects[0] if subjects else 0
        return Blame(ops[n].name, operation_data_type(model, n), n, "only operation")
    if outcome.outcome == "FAIL" and outcome.stage == "compare":
        from nnconform.generators.diverge import first_divergent_operation
        from nnconform.verdict.criteria import default_criteria

        sg = model.main
        ignored_operands = [i for i, ig in zip(sg.output_indexes, ignored or ()) if ig]
        try:
            # diverge's annotation says arrays; it hands the inputs to run_case, which takes an
            # omitted input (None) as well
            div = first_divergent_operation(
                device,
                model,
                cast("Sequence[np.ndarray]", inputs),
                criteria or default_criteria(model),
                ignored_operands,
            )
        except (NnError, ValueError, KeyError, IndexError, TypeError, ArithmeticError) as e:
            # The exposed model could not be built or compared: fall back to the case's operation.
            div, why = None, f"{type(e).__name__}"
        else:
            why = ""
        if div is not None and ops[div[0]].type in (OperationType.IF, OperationType.WHILE):
            try:
                inside = _inside_control_flow(device, model, inputs, div[0], criteria)
            except (NnError, ValueError, KeyError, IndexError, TypeError, ArithmeticError):
                inside = None  # the branch could not be run alone: blame the IF / WHILE itself
            if inside is not None:
                return inside
        if div is not None:
            n = div[0]
            how = "helper ADD diverged" if n in helpers else "first divergent operation"
            cmp = div[2]
            if driver and n not in driver:
                # a reference operation diverged on what a driver partition handed it
                earlier = [d for d in driver if d < n]
                feeding = ops[n].name
                n = max(earlier) if earlier else min(driver)
                how = f"driver partition feeding the divergent {feeding}"
            return Blame(ops[n].name, operation_data_type(model, n), n, how, cmp.message, criterion_label(cmp))
        if len(subjects) == 1:
            return Blame(
                ops[subjects[0]].name,
                operation_data_type(model, subjects[0]),
                subjects[0],
                "only operation" + (f" (divergence hunt: {why})" if why else ""),
            )
    if driver:
        n = subjects[0]
        return Blame(ops[n].name, operation_data_type(model, n), n, "first operation on the driver")
    first = _first_subject(model, helpers)
    assert first is not None  # the model has operations (checked at the top)
    return Blame(ops[first].name, operation_data_type(model, first), first, "first operation of the case")
