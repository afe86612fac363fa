"""Partitioned execution: a case runs on a driver that supports only part of its model.

Android does not refuse such a model: the runtime splits it into partitions, gives the
driver the operations it supports and runs the rest on the CPU, passing each tensor that
crosses a partition boundary through runtime-owned memory.  nnconform does the same with the
reference executor in the CPU's place, so a partial driver is still tested on every
operation it claims, in the context of a real model:

- ``assign`` decides which operations may go to the driver: those it claims, except an IF or
  WHILE whose referenced subgraphs hold an operation the driver refuses (the NNAPI rule: a
  control-flow operation goes to a device only with everything it can run);
- ``plan`` splits the main graph into maximal partitions: a topological walk that keeps
  taking ready operations of the current side (driver or reference) until none is left,
  then switches; partitions run in the order given;
- ``submodel`` turns one partition into a valid model of its own: the tensors it reads from
  outside become model inputs (with the shape they actually have), the tensors it writes
  that are read later (or are case outputs) become model outputs, constants stay constants;
- ``run_partitioned`` runs them: the driver's through the ordinary driver interface
  (supported_operations, prepare, execute, release; behind the driver host like any other
  call), the reference's through ``Executor``, each boundary tensor handed over exactly.

Boundary tensors reach the driver as views into a padded pool (every other element, the
gaps filled with a poison byte pattern), as NNAPI hands them over inside a shared memory
pool, not as the caller's own buffers.  A driver that reads such an array as raw contiguous
memory computes garbage and the partitioned case fails.  (Behind a driver host the arrays
cross a process boundary and arrive contiguous, so only in-process runs see the layout.)
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, replace
from typing import Any, Sequence, cast

import numpy as np

from nnconform.driver import Device, DriverError, ExecutionResult
from nnconform.errors import NnError
from nnconform.ir import Lifetime, Model, Operand, OperationType, Request, Subgraph

CONTROL_FLOW = (OperationType.IF, OperationType.WHILE)
_PASSIVE = (Lifetime.CONSTANT_COPY, Lifetime.CONSTANT_REFERENCE, Lifetime.NO_VALUE, Lifetime.SUBGRAPH)


@dataclass(frozen=True)
class Partition:
    on_driver: bool
    operations: tuple[int, ...]  # indexes into model.main.operations, in execution order
    inputs: tuple[int, ...]  # main-graph operands it reads from outside (not constants)
    outputs: tuple[int, ...]  # main-graph operands it writes that are read later or are case outputs

    def names(self, model: Model) -> str:
        ops = model.main.operations
        return ", ".join(ops[n].name for n in self.operations)


def _referenced_indexes(model: Model, sg: Subgraph) -> set[int]:
    """Indexes into model.referenced of the subgraphs ``sg`` runs, directly or nested."""
    found: set[int] = set()
    todo = [sg]
    while todo:
        g = todo.pop()
        for op in g.operations:
            if op.type not in CONTROL_FLOW:
                continue
            for i in op.inputs:
                o = g.operands[i]
                if o.lifetime == Lifetime.SUBGRAPH and o.value is not None:
                    k = int(o.value)
                    if k not in found and 0 <= k < len(model.referenced):
                        found.add(k)
                        todo.append(model.referenced[k])
    return found


def assign(device: Device, model: Model, supported: Sequence[bool]) -> list[bool]:
    """Which main-graph operations go to the driver.  A claimed IF/WHILE keeps its claim only
    if the driver also claims every operation of every subgraph it reaches (asked by
    presenting each subgraph as a model of its own); a refusal or an error there sends it
    to the reference."""
    on_driver = [bool(s) for s in supported]
    verdicts: dict[int, bool] = {}

    def subgraph_ok(k: int) -> bool:
        if k not in verdicts:
            verdicts[k] = False  # a cycle (invalid anyway) must not recurse forever
            sub = replace(model, main=model.referenced[k])
            try:
                claims = device.supported_operations(sub)
                ok = (
                    isinstance(claims, (list, tuple))
                    and len(claims) == len(sub.main.operations)
                    and all(c is True or isinstance(c, np.bool_) and bool(c) for c in claims)
                )
            except Exception:
                ok = False
            verdicts[k] = ok and all(subgraph_ok(j) for j in _referenced_indexes(model, model.referenced[k]) if j != k)
        return verdicts[k]

    sg = model.main
    for n, op in enumerate(sg.operations):
        if on_driver[n] and op.type in CONTROL_FLOW:
            # the filter below leaves only operands with a value (an index into referenced)
            refs = [
                int(cast("np.ndarray | int", sg.operands[i].value))
                for i in op.inputs
                if sg.operands[i].lifetime == Lifetime.SUBGRAPH and sg.operands[i].value is not None
            ]
            on_driver[n] = all(0 <= k < len(model.referenced) and subgraph_ok(k) for k in refs)
    return on_driver


def plan(model: Model, on_driver: Sequence[bool]) -> list[Partition]:
    """Maximal partitions of the main graph, in an order that respects every dependency."""
    sg = model.main
    ops = sg.operations
    producer: dict[int, int] = {}
    for n, op in enumerate(ops):
        for i in op.outputs:
            producer[i] = n
    consumers: list[list[int]] = [[] for _ in ops]
    waiting = [0] * len(ops)
    for n, op in enumerate(ops):
        deps = {producer[i] for i in op.inputs if i in producer and producer[i] != n}
        waiting[n] = len(deps)
        for d in deps:
            consumers[d].append(n)
    ready: dict[bool, list[int]] = {True: [], False: []}
    for n in range(len(ops)):
        if waiting[n] == 0:
            heapq.heappush(ready[bool(on_driver[n])], n)
    groups: list[tuple[bool, list[int]]] = []
    while ready[True] or ready[False]:
        # continue with the side whose next ready operation comes first in the model
        side = bool(ready[True]) and (not ready[False] or ready[True][0] < ready[False][0])
        group: list[int] = []
        while ready[side]:
            n = heapq.heappop(ready[side])
            group.append(n)
            for c in consumers[n]:
                waiting[c] -= 1
                if waiting[c] == 0:
                    heapq.heappush(ready[bool(on_driver[c])], c)
        groups.append((side, sorted(group)))
    if sum(len(g) for _, g in groups) != len(ops):
        raise ValueError("the model's operations form a cycle or read an operand written later")
    readers: dict[int, set[int]] = {}
    for n, op in enumerate(ops):
        for i in op.inputs:
            readers.setdefault(i, set()).add(n)
    model_outputs = set(sg.output_indexes)
    parts = []
    for side, group in groups:
        members = set(group)
        written: list[int] = [i for n in group for i in ops[n].outputs]
        written_set = set(written)
        inputs: list[int] = []
        for n in group:
            for i in ops[n].inputs:
                if sg.operands[i].lifetime in _PASSIVE or i in written_set or i in inputs:
                    continue
                inputs.append(i)
        outputs = [i for i in dict.fromkeys(written) if i in model_outputs or readers.get(i, set()) - members]
        parts.append(Partition(side, tuple(group), tuple(inputs), tuple(outputs)))
    return parts


def submodel(model: Model, part: Partition, shapes: dict[int, tuple[int, ...]] | None = None) -> Model:
    """The partition as a model: boundary reads become inputs (dimensions from ``shapes``
    where given), boundary writes become outputs, everything else keeps its lifetime."""
    sg = model.main
    used: list[int] = []
    seen: set[int] = set()
    for n in part.operations:
        for i in (*sg.operations[n].inputs, *sg.operations[n].outputs):
            if i not in seen:
                seen.add(i)
                used.append(i)
    for i in (*part.inputs, *part.outputs):
        if i not in seen:
            seen.add(i)
            used.append(i)
    new_index = {old: k for k, old in enumerate(used)}
    ins, outs = set(part.inputs), set(part.outputs)
    operands: list[Operand] = []
    for old in used:
        o = sg.operands[old]
        if old in ins:
            o = replace(o, lifetime=Lifetime.SUBGRAPH_INPUT, value=None)
            if shapes and old in shapes and not o.info.is_scalar:
                o = o.with_dims(shapes[old])
        elif old in outs:
            o = replace(o, lifetime=Lifetime.SUBGRAPH_OUTPUT)
        elif o.lifetime in (Lifetime.SUBGRAPH_INPUT, Lifetime.SUBGRAPH_OUTPUT):
            o = replace(o, lifetime=Lifetime.TEMPORARY_VARIABLE)
        operands.append(replace(o, num_consumers=None))
    operations = tuple(
        replace(
            sg.operations[n],
            inputs=tuple(new_index[i] for i in sg.operations[n].inputs),
            outputs=tuple(new_index[i] for i in sg.operations[n].outputs),
        )
        for n in part.operations
    )
    main = Subgraph(
        tuple(operands),
        operations,
        tuple(new_index[i] for i in part.inputs),
        tuple(new_index[i] for i in part.outputs),
        sg.name,
    )
    uses_subgraphs = any(o.lifetime == Lifetime.SUBGRAPH for o in operands)
    return Model(main, model.referenced if uses_subgraphs else (), model.relax_fp32_to_fp16)


def pooled(arr: np.ndarray) -> np.ndarray:
    """``arr``'s values as a strided view into a larger pool whose gaps hold a poison pattern
    (see the module docstring).  Scalars and empty arrays are returned as they are."""
    arr = np.asarray(arr)
    if arr.ndim == 0 or arr.size == 0:
        return arr
    pool = np.empty(2 * arr.size, dtype=arr.dtype)
    pool.view(np.uint8)[:] = 0xA5
    pool[0::2] = arr.reshape(-1)
    view = pool[0::2].reshape(arr.shape)
    view.setflags(write=False)
    return view


# ---- running a partitioned case --------------------------------------------------------


class PartitionFailed(Exception):
    """One partition could not be run; carries the case's verdict."""

    def __init__(self, outcome: str, message: str, stage: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.outcome, self.message, self.stage, self.details = outcome, message, stage, details


def _describe(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _on_driver(
    device: Device,
    sub: Model,
    inputs: list[np.ndarray | None],
    where: str,
    measure_timing: bool,
    loop_timeout: float | None,
) -> list[np.ndarray] | None:
    """One driver partition through the ordinary driver interface.  None: the driver refuses
    part of it in this context (it then runs on the reference)."""
    from nnconform.isolation.proxy import DriverProtocolError, HostIncident

    try:
        claims = device.supported_operations(sub)
    except HostIncident as e:
        raise PartitionFailed(e.verdict, f"{e} (in supported_operations of {where})", "supported", e.details)
    except (Exception, SystemExit, GeneratorExit) as e:
        raise PartitionFailed("FAIL", f"supported_operations failed on {where}: {_describe(e)}", "supported")
    if not isinstance(claims, (list, tuple)) or len(claims) != len(sub.main.operations):
        raise PartitionFailed(
            "FAIL",
            f"supported_operations returned {claims!r:.80} for {where}; expected {len(sub.main.operations)} bools",
            "supported",
        )
    if not all(bool(c) for c in claims):
        return None
    try:
        prepared = device.prepare(sub)
    except HostIncident as e:
        raise PartitionFailed(e.verdict, f"{e} (in prepare of {where})", "prepare", e.details)
    except DriverProtocolError as e:
        raise PartitionFailed("FAIL", f"{e} (prepare of {where})", "prepare")
    except (Exception, SystemExit, GeneratorExit) as e:
        raise PartitionFailed(
            "FAIL", f"prepare failed on {where} although every operation is supported: {_describe(e)}", "prepare"
        )
    try:
        try:
            request = Request.from_arrays(sub, inputs)
            result = prepared.execute(request, measure_timing=measure_timing, loop_timeout=loop_timeout)
        finally:
            from nnconform.verdict.runner import _release  # StaleHandle (host died in execute): the verdict is below

            _release(prepared)
    except HostIncident as e:
        raise PartitionFailed(e.verdict, f"{e} (in execute of {where})", "execute", e.details)
    except DriverProtocolError as e:
        raise PartitionFailed("FAIL", f"{e} (execute of {where})", "execute")
    except DriverError as e:
        raise PartitionFailed("FAIL", f"execution failed on {where}: {e}", "execute")
    except (Exception, SystemExit, GeneratorExit) as e:
        raise PartitionFailed("FAIL", f"driver raised in execute on {where}: {_describe(e)}", "execute")
    if not isinstance(result, ExecutionResult):
        raise PartitionFailed(
            "FAIL", f"execute of {where} returned {type(result).__name__}, not an ExecutionResult", "execute"
        )
    outs = result.outputs
    if (
        not isinstance(outs, (list, tuple))
        or len(outs) != len(sub.main.output_indexes)
        or not all(isinstance(a, np.ndarray) for a in outs)
    ):
        raise PartitionFailed(
            "FAIL",
            f"execute of {where} returned {len(outs) if isinstance(outs, (list, tuple)) else outs!r:.40} "
            f"outputs; need {len(sub.main.output_indexes)} numpy arrays",
            "execute",
        )
    return list(outs)


def _check_boundary(model: Model, idx: int, arr: np.ndarray, where: str) -> None:
    """A tensor the driver hands to the reference must have the operand's storage type and
    a shape the model allows, or the reference cannot take it."""
    o = model.main.operands[idx]
    bad = arr.dtype != o.info.dtype
    if not bad and o.dimensions and not o.info.is_scalar:
        bad = arr.ndim != len(o.dimensions) or any(d and d != a for d, a in zip(o.dimensions, arr.shape))
    if bad:
        raise PartitionFailed(
            "FAIL",
            f"{where} returned operand {idx} as {arr.dtype}{list(arr.shape)}; the model has {o.describe()}",
            "execute",
        )


def run_partitioned(
    device: Device,
    model: Model,
    inputs: Sequence[np.ndarray | None],
    on_driver: Sequence[bool],
    *,
    measure_timing: bool = False,
    loop_timeout: float | None = None,
) -> tuple[list[np.ndarray | None], dict[str, Any]]:
    """Run every partition; returns (the case's outputs, info) or raises PartitionFailed.
    ``info``: operations (n), on_driver (k: operations the driver actually ran), partitions,
    driver_operations (their indexes), refused_in_context (partitions the driver refused
    when shown alone; they ran on the reference), zero_sized (driver partitions that got a
    zero-sized tensor, which no request can carry; they ran on the reference too)."""
    from nnconform.reference.executor import Executor

    sg = model.main
    parts = plan(model, on_driver)
    values: dict[int, np.ndarray | None] = {}
    for idx, v in zip(sg.input_indexes, inputs):
        values[idx] = None if v is None else np.asarray(v)
    produced = {i for op in sg.operations for i in op.outputs}  # boundary tensors, not case inputs
    from_driver: set[int] = set()
    driver_ops: list[int] = []
    refused = zero_sized = 0
    for p, part in enumerate(parts):
        missing = [i for i in part.inputs if i not in values]
        if missing:
            raise PartitionFailed("ERROR", f"partition {p} reads operand(s) {missing} that nothing wrote", "execute")
        ins = [values[i] for i in part.inputs]
        shapes = {i: tuple(v.shape) for i, v in zip(part.inputs, ins) if v is not None}
        sub = submodel(model, part, shapes)
        where = f"driver partition {p} [{part.names(model)}]"
        outs = None
        # NNAPI requests reject an input with a zero dimension: such a partition stays on the CPU.
        empty = any(v is not None and v.ndim and 0 in v.shape for v in ins)
        zero_sized += bool(part.on_driver and empty)
        if part.on_driver and not empty:
            feed = [pooled(v) if v is not None and i in produced else v for i, v in zip(part.inputs, ins)]
            outs = _on_driver(device, sub, feed, where, measure_timing, loop_timeout)
            if outs is None:
                refused += 1
            else:
                for i, a in zip(part.outputs, outs):
                    if i not in sg.output_indexes:
                        _check_boundary(model, i, a, where)
                driver_ops.extend(part.operations)
                from_driver.update(part.outputs)
        if outs is None:
            try:
                outs = Executor(sub).run(ins, loop_timeout=loop_timeout)
            except (NnError, ValueError, TypeError, IndexError, KeyError, ArithmeticError) as e:
                fed = [i for i in part.inputs if i in from_driver]
                what = f"the reference could not run partition {p} [{part.names(model)}]"
                if fed:
                    raise PartitionFailed("FAIL", f"{what} on values the driver computed: {_describe(e)}", "execute")
                raise PartitionFailed("ERROR", f"{what}: {_describe(e)}", "execute")
        for i, a in zip(part.outputs, outs):
            values[i] = a
    actual: list[np.ndarray | None] = []
    for i in sg.output_indexes:
        if i not in values:
            raise PartitionFailed("ERROR", f"model output operand {i} was never written", "execute")
        actual.append(values[i])
    info: dict[str, Any] = {
        "operations": len(sg.operations),
        "on_driver": len(driver_ops),
        "partitions": len(parts),
        "driver_operations": sorted(driver_ops),
        "refused_in_context": refused,
        "zero_sized": zero_sized,
    }
    return actual, info
