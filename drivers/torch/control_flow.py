"""IF and WHILE (HAL 1.3) on torch: the referenced subgraphs become plans of their own, and
the choice / the loop is Python control flow around them.  Under torch.compile these kernels
are excluded from compilation (``torch._dynamo.disable``: the graph breaks around them and the
branches and loop bodies run eagerly).  Compiling them would compile lazily *inside* the loop
(a data-dependent path the warm-up in prepare cannot reach, and a new compilation for every
new shape of a growing loop variable), and those seconds count against the loop timeout: a
3-iteration loop then fails with MISSED_DEADLINE_TRANSIENT (docs/findings_torch.md).

WHILE follows the CPU reference: the condition runs on the loop variables; when it is true
after more than the loop timeout (2 s by default, at most 15 s) or past the execution
deadline, the execution fails with MISSED_DEADLINE_TRANSIENT (:class:`LoopTimeout`);
otherwise the body's m + k outputs replace the first m + k variables, the input-only ones
stay.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from nnconform.driver.support import Unsupported

DEFAULT_LOOP_TIMEOUT, MAX_LOOP_TIMEOUT = 2.0, 15.0


class LoopTimeout(Exception):
    """A WHILE loop ran past its loop timeout or the execution deadline."""


@dataclass
class Clock:
    """The current execution's loop timeout and deadline, shared by a model's plans (set by
    the device before every execution)."""

    loop_timeout: float = DEFAULT_LOOP_TIMEOUT
    deadline: float | None = None

    def set(self, loop_timeout: float | None, deadline: float | None) -> None:
        self.loop_timeout = (
            DEFAULT_LOOP_TIMEOUT if loop_timeout is None else min(max(float(loop_timeout), 0.0), MAX_LOOP_TIMEOUT)
        )
        self.deadline = deadline


def _subplan(c, k: int):
    from nnconform.drivers.torch.convert import Plan

    ref = c.ins[k]
    if c.model is None or not isinstance(ref.value, (int,)) and getattr(ref.value, "ndim", 1) != 0:
        raise Unsupported("a subgraph reference without its model")
    index = int(ref.value)
    if not 0 <= index < len(c.model.referenced):
        raise Unsupported(f"subgraph {index} does not exist")
    return Plan(c.model, c.model.referenced[index], c.clock)


def _truth(t) -> bool:
    return bool(t.reshape(-1)[0])


def conv_if(c):
    then_plan, else_plan = _subplan(c, 1), _subplan(c, 2)

    @torch._dynamo.disable
    def kernel(cond, _then, _else, *xs):
        return (then_plan if _truth(cond) else else_plan).run(*xs)

    return kernel


def conv_while(c):
    cond_plan, body_plan = _subplan(c, 0), _subplan(c, 1)
    m = len(c.outs)
    clock = c.clock

    @torch._dynamo.disable
    def kernel(_cond, _body, *xs):
        variables = list(xs)
        start = time.monotonic()
        while _truth(cond_plan.run(*variables)[0]):
            now = time.monotonic()
            if now - start > clock.loop_timeout:
                raise LoopTimeout(f"WHILE loop ran past its loop timeout of {clock.loop_timeout:g} s")
            if clock.deadline is not None and now > clock.deadline:
                raise LoopTimeout("WHILE loop ran past the execution deadline")
            new = body_plan.run(*variables)
            variables[: len(new)] = new
        return variables[:m]

    return kernel
