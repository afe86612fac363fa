"""DELIBERATELY BROKEN DRIVERS, for testing the harness itself.  Never use them as references.

Control-flow defects the control_flow suite must catch:

    IgnoresLoopTimeout       WHILE never looks at the loop timeout: an infinite loop runs on
                             instead of failing with MISSED_DEADLINE_*.  The suite must report a
                             HANG within its own bound instead of waiting.
    ClaimsIfWithoutBranchOp  the device cannot run SUB, says so for a SUB in the main graph, but
                             still reports IF/WHILE supported when a branch or body uses SUB
                             (breaking the IDevice 1.3 rule); prepare then fails.

Name them on the command line as ``tests/drivers/broken_control_flow.py:IgnoresLoopTimeout``.

The hanging loop is kept stoppable so tests do not leak busy threads: it ends when the prepared
model is released (``release()`` sets an Event) or after ``HANG_LIMIT_S`` seconds, and then
fails with GENERAL_FAILURE, never with a MISSED_DEADLINE status.
"""

from __future__ import annotations

import functools
import threading
import time

from nnconform.driver import DriverError, ErrorStatus
from nnconform.drivers.reference import ReferenceDevice, ReferencePreparedModel
from nnconform.errors import OpFailure
from nnconform.ir import Model
from nnconform.ir import OperationType as Op
from nnconform.reference.executor import Executor
from nnconform.reference.ops import control_flow as cf

HANG_LIMIT_S = 60.0


def _while_ignoring_timeout(stop: threading.Event, ctx):
    """The WHILE loop of while_op.py minus the loop-timeout check (the defect)."""
    cond, body = cf.subgraph_at(ctx, 0), cf.subgraph_at(ctx, 1)
    variables = list(ctx.inputs[2:])
    give_up = time.monotonic() + HANG_LIMIT_S
    while True:
        (flag,) = cf.run_referenced(ctx, cond, variables, "condition")
        if not cf.condition_value(ctx, flag, "the WHILE condition output"):
            break
        if stop.is_set() or time.monotonic() > give_up:
            raise OpFailure(
                "broken driver: WHILE loop abandoned (released or ran for "
                f"{HANG_LIMIT_S:g} s); it never applies the loop timeout"
            )
        outs = cf.run_referenced(ctx, body, variables, "body")
        variables[: len(outs)] = outs
    return [variables[j].copy() for j in range(len(ctx.out_operands))]


class _HangingPrepared(ReferencePreparedModel):
    def __init__(self, model: Model):
        super().__init__(model)
        self.stop = threading.Event()

    def new_executor(self) -> Executor:
        return Executor(self.model, overrides={Op.WHILE: functools.partial(_while_ignoring_timeout, self.stop)})

    def release(self) -> None:
        self.stop.set()  # first, so a pending async execution ends and the pool can shut down
        super().release()


class IgnoresLoopTimeout(ReferenceDevice):
    name = "broken-loop-timeout"

    def prepare(self, model, **kw):
        return _HangingPrepared(super().prepare(model, **kw).model)


class ClaimsIfWithoutBranchOp(ReferenceDevice):
    name = "broken-if-support"
    missing = Op.SUB

    def _uses_missing(self, model: Model) -> bool:
        return any(op.type == self.missing for op in model.all_operations())

    def supported_operations(self, model: Model) -> list[bool]:
        honest = super().supported_operations(model)  # validates the model too
        out = []
        for i, op in enumerate(model.main.operations):
            if op.type in (Op.IF, Op.WHILE):
                # The defect: control flow judged by itself, never by the referenced subgraphs.
                out.append(True)
            elif op.type == self.missing:
                out.append(False)
            else:
                out.append(honest[i])
        return out

    def prepare(self, model, **kw):
        if self._uses_missing(model):
            raise DriverError(ErrorStatus.GENERAL_FAILURE, f"this device has no {self.missing.name} kernel")
        return super().prepare(model, **kw)
