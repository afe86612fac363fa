"""A random-graph stress case that crashed or hung, blamed on one operation and shrunk.

A CRASH in a 528-operation random graph names 528 operations; the defect is in one of them.
As the random suite shrinks a mismatch to its minimal model, the stress runner shrinks a
CRASH or HANG to the smallest graph it finds that still ends the same way, each candidate
run in the sandbox (a crash of a candidate costs a worker, never the runner):

1. **prefix bisection**: the graphs made of the first ``p`` operations (the tensors they read
   from outside become inputs, fed the reference's values) are run for ``p`` halving between
   the last that passes and the first that fails; the last operation of the smallest failing
   prefix is the one the failure is blamed on (``how = "first operation whose prefix
   fails"``);
2. that operation **alone** (its inputs from the reference): when it still fails, the
   minimal graph is one operation;
3. else the operation with everything of the prefix that **feeds it**;
4. else the prefix itself.

The whole graph is run twice more before the search: a failure that does not happen again is
not attributed (the row says the shrink could not reproduce it), since bisecting a flaky
failure would blame whichever operation the coin fell on.
A candidate "fails the same way" when it ends with the same verdict (CRASH or HANG) and,
for a CRASH, the same signal or exit code.  Candidates run what the case ran: support query and
prepare for random-model-load; prepare and execute (outputs not compared) for random-inference.  The search is bounded by
``SHRINK_BUDGET_S`` and by what is left of the run's budget (a hanging candidate costs its
whole time limit); when it runs out, the
best graph found so far stands, and the row says so.  Same seed, same graph, same steps: the
shrink replays.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from nnconform.ir import Lifetime, Model
from nnconform.isolation.sandbox import CaseContext, SandboxResult, Verdict
from nnconform.verdict.results import CRASH, HANG

SHRINK_TARGET = "nnconform.stress.shrink:run_subgraph"
SHRINK_BUDGET_S = 90.0  # wall time the search of one case may spend
REPEATS = 2  # runs of the whole graph that must fail alike before the search starts
_PASSIVE = (Lifetime.CONSTANT_COPY, Lifetime.CONSTANT_REFERENCE, Lifetime.NO_VALUE, Lifetime.SUBGRAPH)


def sub_case(model: Model, inputs, keep) -> tuple[Model, list[np.ndarray]]:
    """The operations ``keep`` (main-graph indexes) of ``model`` as a model of their own, with
    its inputs: what they read from outside, as the reference computes it from ``inputs``.
    Outputs: what they write and no kept operation reads, and the model's own outputs."""
    from nnconform.reference.executor import Executor
    from nnconform.verdict.partition import Partition, submodel

    sg = model.main
    keep = sorted(set(int(k) for k in keep))
    if keep == list(range(len(sg.operations))):
        return model, list(inputs)  # the whole graph: nothing to cut, no reference run
    written = [i for n in keep for i in sg.operations[n].outputs]
    written_set = set(written)
    read = {i for n in keep for i in sg.operations[n].inputs}
    ins: list[int] = []
    for n in keep:
        for i in sg.operations[n].inputs:
            if sg.operands[i].lifetime in _PASSIVE or i in written_set or i in ins:
                continue
            ins.append(i)
    model_outputs = set(sg.output_indexes)
    outs = [i for i in dict.fromkeys(written) if i not in read or i in model_outputs]
    ex = Executor(model, keep_values=True)
    ex.run(list(inputs))
    values = ex.main_values
    assert values is not None  # keep_values
    sub_inputs = [np.asarray(values[i]) for i in ins]
    shapes = {i: tuple(np.shape(values[i])) for i in ins}
    part = Partition(True, tuple(keep), tuple(ins), tuple(outs))
    return submodel(model, part, shapes), sub_inputs


def feeding(model: Model, target: int, within: int) -> list[int]:
    """``target`` and every operation among the first ``within`` that it reads from, directly
    or not (its ancestor cone), in model order."""
    sg = model.main
    producer = {i: n for n in range(within) for i in sg.operations[n].outputs}
    cone, todo = {target}, [target]
    while todo:
        n = todo.pop()
        for i in sg.operations[n].inputs:
            p = producer.get(i)
            if p is not None and p not in cone:
                cone.add(p)
                todo.append(p)
    return sorted(cone)


def run_subgraph(ctx: CaseContext, test: str, params: dict, keep: list[int]) -> Verdict:
    """Sandbox target: the random-graph case ``test`` with ``params``, cut down to the
    operations ``keep``, run as the test runs its graphs."""
    from nnconform.ir import Request
    from nnconform.stress.tests import graph_of, infer_graph, load_graph

    rm = graph_of(params)
    model, inputs = sub_case(rm.model, rm.inputs, keep)
    ctx.breadcrumb(f"shrinking {test}: {len(keep)} of {len(rm.model.main.operations)} operations")
    label = f"{len(keep)}-operation part of random graph seed {params['seed']}"
    if test == "random-model-load":
        return load_graph(ctx, model, label)
    ctx.breadcrumb(f"{label}: supported_operations")
    if not all(ctx.device.supported_operations(model)):
        # a driver that claims a part runs it partitioned, as the case did
        return infer_graph(ctx, model, inputs, (), params["graph"], label)
    # inference: prepared and executed, not compared (only a CRASH or HANG counts here, and
    # the reference's run of a 600-operation graph would double the cost of every candidate)
    ctx.breadcrumb(f"{label}: prepare")
    prepared = ctx.device.prepare(model)
    try:
        ctx.breadcrumb(f"{label}: execute")
        prepared.execute(Request.from_arrays(model, inputs))
    finally:
        prepared.release()
    return Verdict.success(f"{label}: executed")


@dataclass
class Shrunk:
    operation: str  # the blamed operation
    data_type: str
    index: int  # its position in the full graph
    how: str
    keep: list[int]  # the smallest graph that still fails: operation indexes of the full graph
    model: Model
    inputs: list[np.ndarray]
    tries: int
    seconds: float
    complete: bool  # False: the budget ran out, ``keep`` is the best found by then
    of: int = 0  # operations of the full graph
    log: list[dict[str, Any]] = field(default_factory=list)

    def to_extra(self) -> dict[str, Any]:
        return {
            "operations": len(self.keep),
            "from": self.of,
            "kept": self.keep[:50],
            "how": self.how,
            "tries": self.tries,
            "seconds": round(self.seconds, 1),
            "complete": self.complete,
        }


def same_failure(original: SandboxResult, res: SandboxResult) -> bool:
    if res.verdict != original.verdict or res.verdict not in (CRASH, HANG):
        return False
    return res.signal == original.signal and res.exit_code == original.exit_code


def shrink(
    model: Model,
    inputs,
    original: SandboxResult,
    try_keep: Callable[[list[int]], SandboxResult],
    budget_s: float = SHRINK_BUDGET_S,
) -> Shrunk | None:
    """Search (see the module docstring) with ``try_keep(keep)`` running one candidate.  The
    whole graph is run again first (REPEATS times): a failure it does not repeat (a flaky driver) is blamed on
    nothing and None is returned, as for a graph without operations."""
    from nnconform.verdict.attribution import operation_data_type

    n = len(model.main.operations)
    if n == 0:
        return None
    t0 = time.monotonic()
    log: list[dict[str, Any]] = []

    def fails(keep: list[int]) -> bool:
        res = try_keep(keep)
        ok = same_failure(original, res)
        log.append({"operations": len(keep), "verdict": res.verdict, "same": ok})
        return ok

    def out_of_time() -> bool:
        return time.monotonic() - t0 > budget_s

    for _ in range(REPEATS):
        if not fails(list(range(n))):
            return None
    # prefix bisection: lo passes (0 operations pass by definition), hi fails
    lo, hi, complete = 0, n, True
    while hi - lo > 1:
        if out_of_time():
            complete = False
            break
        mid = (lo + hi) // 2
        if fails(list(range(mid))):
            hi = mid
        else:
            lo = mid
    culprit = hi - 1
    best = list(range(hi))
    how = "first operation whose prefix fails"
    for cand, what in (([culprit], "alone"), (feeding(model, culprit, hi), "with what feeds it")):
        if len(cand) >= len(best):
            continue
        if out_of_time():
            complete = False
            break
        if fails(cand):
            best, how = cand, f"{how}; fails {what}"
            break
    sub, sub_inputs = sub_case(model, inputs, best)
    op = model.main.operations[culprit]
    return Shrunk(
        op.name,
        operation_data_type(model, culprit),
        culprit,
        how if complete else how + " (search stopped at its time budget)",
        best,
        sub,
        sub_inputs,
        len(log),
        time.monotonic() - t0,
        complete,
        n,
        log,
    )
