"""WHILE: run a body subgraph while a condition subgraph says so (HAL 1.3).

Signature (m >= 1 input-output, k >= 0 state-only and n >= 0 input-only operands):
  input 0       SUBGRAPH: the condition; m + k + n inputs, 1 output TENSOR_BOOL8 [1].
  input 1       SUBGRAPH: the body; m + k + n inputs, m + k outputs.
  inputs 2..    m + k + n data operands: initial values of the loop variables, then the
                input-only operands (passed unchanged to every iteration).  All required.
  outputs       m operands: the final values of the first m loop variables.
  At least 3 inputs and 1 output.  m is the number of outputs, k = body outputs - m,
  n = body inputs - body outputs.
Type rules: condition input i and body input i are compatible with data input 2 + i; body
output j is compatible with output j (j < m) and with body input j (j < m + k); compatible means
same type, scale, zero point and per-channel parameters, and the same rank and sizes where both
sides know them (control_flow.py).  Operands may leave dimensions unknown (runtime rules).

Semantics (CPU reference):
  vars = inputs 2..; start = now
  loop: run the condition on vars; if false, stop.  If it is true and more than the loop
        timeout has passed since start, fail with MISSED_DEADLINE_TRANSIENT (raised here as
        DeadlineMissed).  Otherwise run the body on vars; its m + k outputs replace the first
        m + k variables (the input-only ones stay).
  outputs = the first m variables, with the shapes they ended with.
A body output of unknown shape may change shape from one iteration to the next (a growing
accumulator); each iteration's value simply replaces the last.  The loop timeout is the
executor's (``Executor.loop_timeout``: 2 s by default, at most 15 s); the execution deadline is
checked before every operation of every iteration by the executor itself.
"""

from __future__ import annotations

import time

import numpy as np

from nnconform.errors import DeadlineMissed
from nnconform.ir import OperationType as Op
from nnconform.reference.ops import control_flow as cf
from nnconform.reference.ops.if_op import CARRIED_TYPES
from nnconform.reference.ops.registry import OpContext, OpView, register

COND, BODY, FIRST_INPUT = 0, 1, 2


def validate(v: OpView) -> None:
    if len(v.inputs) < 3:
        v.fail(f"takes at least 3 inputs (condition, body, one loop variable), got {len(v.inputs)}")
    if len(v.outputs) < 1:
        v.fail("gives at least 1 output, got 0")
    cf.check_data_inputs_present(v, FIRST_INPUT)
    data = v.inputs[FIRST_INPUT:]
    m = len(v.outputs)

    cref, cond = cf.referenced_subgraph(v, COND, "condition")
    cname = f"condition referenced[{cref}]"
    if len(cond.input_indexes) != len(data):
        v.fail(f"the {cname} takes {len(cond.input_indexes)} inputs, the WHILE passes {len(data)}", input=COND)
    if len(cond.output_indexes) != 1:
        v.fail(f"the {cname} must give exactly 1 output, it gives {len(cond.output_indexes)}", input=COND)
    for i, idx in enumerate(cond.input_indexes):
        cf.check_compatible(
            v,
            cond.operands[idx],
            data[i],
            f"{cname} input {i}",
            f"the WHILE's input {FIRST_INPUT + i}",
            input=FIRST_INPUT + i,
        )
    cf.check_condition(v, cond.operands[cond.output_indexes[0]], f"the {cname} output", input=COND)

    bref, body = cf.referenced_subgraph(v, BODY, "body")
    bname = f"body referenced[{bref}]"
    n_in, n_out = len(body.input_indexes), len(body.output_indexes)
    if n_in != len(data):
        v.fail(f"the {bname} takes {n_in} inputs, the WHILE passes {len(data)}", input=BODY)
    if n_out < m:
        v.fail(f"the {bname} gives {n_out} outputs, fewer than the WHILE's {m} outputs", input=BODY)
    if n_in < n_out:
        v.fail(
            f"the {bname} gives {n_out} outputs but takes only {n_in} inputs (each output feeds an "
            f"input of the next iteration)",
            input=BODY,
        )
    for i, idx in enumerate(body.input_indexes):
        cf.check_compatible(
            v,
            body.operands[idx],
            data[i],
            f"{bname} input {i}",
            f"the WHILE's input {FIRST_INPUT + i}",
            input=FIRST_INPUT + i,
        )
    for j in range(m):
        cf.check_compatible(
            v,
            body.operands[body.output_indexes[j]],
            v.outputs[j],
            f"{bname} output {j}",
            f"the WHILE's output {j}",
            output=j,
        )
    for j in range(n_out):
        cf.check_compatible(
            v,
            body.operands[body.output_indexes[j]],
            body.operands[body.input_indexes[j]],
            f"{bname} output {j}",
            f"its input {j} (a loop variable keeps its type)",
            input=BODY,
        )


@register(Op.WHILE, data_types=CARRIED_TYPES, validate=validate, primary_input=FIRST_INPUT)
def execute(ctx: OpContext) -> list[np.ndarray]:
    cond = cf.subgraph_at(ctx, COND)
    body = cf.subgraph_at(ctx, BODY)
    timeout = ctx.executor.loop_timeout
    variables = list(ctx.inputs[FIRST_INPUT:])
    start = time.monotonic()
    iteration = 0
    while True:
        (flag,) = cf.run_referenced(ctx, cond, variables, "condition")
        if not cf.condition_value(ctx, flag, "the WHILE condition output"):
            break
        elapsed = time.monotonic() - start
        if elapsed > timeout:
            raise DeadlineMissed(
                f"operations[{ctx.index}] (WHILE) still looping after {iteration} iterations "
                f"and {elapsed * 1e3:.1f} ms; loop timeout is {timeout * 1e3:g} ms"
            )
        outs = cf.run_referenced(ctx, body, variables, "body")
        variables[: len(outs)] = outs
        iteration += 1
    # With zero iterations the outputs are the inputs themselves (constants are read-only and a
    # caller's buffer is not ours): hand out copies.
    return [np.array(variables[j], copy=True) for j in range(len(ctx.out_operands))]
