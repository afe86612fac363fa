"""IF: run one of two referenced subgraphs, chosen by a boolean (HAL 1.3).

Signature:
  input 0      TENSOR_BOOL8, dimensions [1]: the condition.  It must have a value (the CPU
               reference fails an IF whose condition is omitted; we reject it up front).
  input 1      SUBGRAPH: the "then" branch, run when the condition is true.
  input 2      SUBGRAPH: the "else" branch, run otherwise.
  inputs 3..   n >= 0 data operands of any type, passed to the chosen branch in order.
  outputs      m >= 1 operands, taken from the chosen branch's outputs in order.
Type rules: each branch has exactly n inputs and m outputs; branch input i is compatible with
input 3 + i and branch output j with output j (same type, scale, zero point, per-channel
parameters; same rank and sizes where both sides know them; see control_flow.py).

Semantics: only the chosen branch runs.  Its output values, with the shapes the branch actually
produced, become the IF's outputs (so an outer output of unknown shape gets the branch's).
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops import control_flow as cf
from nnconform.reference.ops.registry import OpContext, OpView, register

COND, THEN, ELSE, FIRST_INPUT = 0, 1, 2, 3

# Every tensor type a branch can carry (the suite checks each); scalars pass through as well.
CARRIED_TYPES = (
    T.TENSOR_FLOAT32,
    T.TENSOR_FLOAT16,
    T.TENSOR_INT32,
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
    T.TENSOR_QUANT8_SYMM,
    T.TENSOR_QUANT16_ASYMM,
    T.TENSOR_QUANT16_SYMM,
    T.TENSOR_BOOL8,
)


def validate(v: OpView) -> None:
    if len(v.inputs) < 3:
        v.fail(f"takes at least 3 inputs (condition, then, else), got {len(v.inputs)}")
    if len(v.outputs) < 1:
        v.fail("gives at least 1 output, got 0")
    cond = v.inputs[COND]
    cf.check_condition(v, cond, "the condition", input=COND)
    if cond.is_omitted:
        v.fail("the condition is omitted (NO_VALUE); IF needs a condition value", input=COND)
    cf.check_data_inputs_present(v, FIRST_INPUT)
    n, m = len(v.inputs) - FIRST_INPUT, len(v.outputs)
    for slot, role in ((THEN, "then branch"), (ELSE, "else branch")):
        ref, sg = cf.referenced_subgraph(v, slot, role)
        name = f"{role} referenced[{ref}]"
        if len(sg.input_indexes) != n:
            v.fail(f"the {name} takes {len(sg.input_indexes)} inputs, the IF passes {n}", input=slot)
        if len(sg.output_indexes) != m:
            v.fail(f"the {name} gives {len(sg.output_indexes)} outputs, the IF has {m}", input=slot)
        for i, idx in enumerate(sg.input_indexes):
            cf.check_compatible(
                v,
                sg.operands[idx],
                v.inputs[FIRST_INPUT + i],
                f"{name} input {i}",
                f"the IF's input {FIRST_INPUT + i}",
                input=FIRST_INPUT + i,
            )
        for j, idx in enumerate(sg.output_indexes):
            cf.check_compatible(
                v, sg.operands[idx], v.outputs[j], f"{name} output {j}", f"the IF's output {j}", output=j
            )


@register(Op.IF, data_types=CARRIED_TYPES, validate=validate, primary_input=FIRST_INPUT)
def execute(ctx: OpContext) -> list[np.ndarray]:
    taken = cf.condition_value(ctx, ctx.inputs[COND], "the IF condition")
    slot = THEN if taken else ELSE
    branch = cf.subgraph_at(ctx, slot)
    outs = cf.run_referenced(ctx, branch, ctx.inputs[FIRST_INPUT:], "then branch" if taken else "else branch")
    # The branch may hand back a constant or an input array unchanged (a read-only view of the
    # model or the caller's buffer); the outer graph gets its own copy.
    return [np.array(o, copy=True) for o in outs]
