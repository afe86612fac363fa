"""The reference executor's graph interpreter (design contract 4).

It walks a subgraph's operations in order, keeps one value slot per operand (constants from
the model, inputs from the caller, omitted optional inputs as None), and resolves unknown
output dimensions from what each operation actually computes.  Operations themselves live in
``nnconform.ops``; control-flow operations call back into :meth:`Executor.run_subgraph`.
"""
from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from .errors import DeadlineMissed, OpFailure, ValidationError
from .ir import Lifetime, Model, Subgraph
from .ops.registry import OpContext, get_op, load_all

DEFAULT_LOOP_TIMEOUT = 2.0   # seconds (NNAPI LoopTimeoutDurationNs default)
MAX_LOOP_TIMEOUT = 15.0      # larger requests are clamped


def clamp_loop_timeout(loop_timeout: float | None) -> float:
    if loop_timeout is None:
        return DEFAULT_LOOP_TIMEOUT
    return min(max(float(loop_timeout), 0.0), MAX_LOOP_TIMEOUT)


class Executor:
    """Executes one model.  Not thread-safe per call state: create one per execution or use
    :func:`execute`; a prepared model in the reference driver creates one per request."""

    def __init__(self, model: Model, overrides: dict | None = None):
        load_all()
        self.model = model
        # operation type -> replacement execute function (used by the deliberately broken
        # drivers that test the harness; never by the reference driver)
        self.overrides = overrides or {}
        self._plans: dict[int, tuple[list, list]] = {}   # id(subgraph) -> (slots, execute fns)
        self.deadline: float | None = None
        self.loop_timeout: float = DEFAULT_LOOP_TIMEOUT
        # values of every operand of the main graph after the last run (for divergence hunts)
        self.main_values: list | None = None

    def run(self, inputs: Sequence[np.ndarray | None], *, deadline: float | None = None,
            loop_timeout: float | None = None) -> list[np.ndarray]:
        self.deadline = deadline
        self.loop_timeout = clamp_loop_timeout(loop_timeout)
        # The reference computes in IEEE floats: overflow to inf (common in fp16), inf - inf
        # and x / 0 give inf/NaN silently, and the criteria judge the results.  numpy's
        # warnings about them would only be noise in a driver engineer's test output.
        with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
            return self.run_subgraph(self.model.main, inputs, keep=True)

    def check_deadline(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise DeadlineMissed("execution deadline passed")

    def _plan(self, sg: Subgraph) -> tuple[list, list]:
        """Per subgraph, once: the value slots pre-filled with constants, and each operation's
        execute function.  Subgraphs are immutable, so this is reused by every run (and by
        every WHILE iteration), which keeps the per-run overhead of small models low."""
        plan = self._plans.get(id(sg))
        if plan is None:
            template: list = [None] * len(sg.operands)
            for i, op in enumerate(sg.operands):
                if op.is_constant:
                    template[i] = op.value
                elif op.lifetime == Lifetime.SUBGRAPH:
                    template[i] = np.asarray(op.value, dtype=np.int64)
            fns = [self.overrides.get(o.type) or get_op(o.type).execute for o in sg.operations]
            plan = self._plans[id(sg)] = (template, fns)
        return plan

    def run_subgraph(self, sg: Subgraph, inputs: Sequence[np.ndarray | None], keep: bool = False) -> list[np.ndarray]:
        template, fns = self._plan(sg)
        values = list(template)
        if len(inputs) != len(sg.input_indexes):
            raise ValidationError("request.inputs", f"{sg.name or 'subgraph'} takes {len(sg.input_indexes)} "
                                  f"inputs, got {len(inputs)}")
        for k, (idx, v) in enumerate(zip(sg.input_indexes, inputs)):
            values[idx] = None if v is None else self._check_input(sg, k, idx, v)
        for n in range(len(sg.operations)):
            self.check_deadline()
            operation = sg.operations[n]
            ctx = OpContext(self, sg, n, values)
            outs = fns[n](ctx)
            if len(outs) != len(operation.outputs):
                raise RuntimeError(f"reference bug: {operation.name} returned {len(outs)} outputs, "
                                   f"model has {len(operation.outputs)}")
            for j, (idx, arr) in enumerate(zip(operation.outputs, outs)):
                values[idx] = self._check_output(sg, n, j, idx, arr)
        if keep:
            self.main_values = values
        missing = [k for k, i in enumerate(sg.output_indexes) if values[i] is None]
        if missing:
            raise OpFailure(f"{sg.name or 'subgraph'} output(s) {missing} were never written")
        return [values[i] for i in sg.output_indexes]

    @staticmethod
    def _check_input(sg: Subgraph, k: int, idx: int, v) -> np.ndarray:
        op = sg.operands[idx]
        dtype = op.info.dtype
        arr = np.asarray(v)
        if arr.dtype != dtype:
            if not np.can_cast(arr.dtype, dtype, casting="same_kind"):
                raise ValidationError(f"request.inputs[{k}]", f"dtype {arr.dtype} cannot hold {op.type.name} "
                                      f"(expected {dtype})")
            arr = arr.astype(dtype)
        if op.info.is_scalar:
            return arr.reshape(())
        if op.dimensions:
            if arr.ndim != len(op.dimensions) or any(d and d != a for d, a in zip(op.dimensions, arr.shape)):
                raise ValidationError(f"request.inputs[{k}]", f"shape {list(arr.shape)} does not match the "
                                      f"model's {list(op.dimensions)}")
        return arr

    @staticmethod
    def _check_output(sg: Subgraph, n: int, j: int, idx: int, arr) -> np.ndarray:
        op = sg.operands[idx]
        arr = np.asarray(arr)
        dtype = op.info.dtype
        if dtype is not None and arr.dtype != dtype:
            raise RuntimeError(f"reference bug: operations[{n}] ({sg.operations[n].name}) output {j} is "
                               f"{arr.dtype}, {op.type.name} is stored as {dtype}")
        if op.dimensions and not op.info.is_scalar:
            if arr.ndim != len(op.dimensions) or any(d and d != a for d, a in zip(op.dimensions, arr.shape)):
                raise OpFailure(f"operations[{n}] ({sg.operations[n].name}) output {j} has shape "
                                f"{list(arr.shape)}, the model says {list(op.dimensions)}")
        return arr


def execute(model: Model, inputs: Sequence[np.ndarray | None], **kw) -> list[np.ndarray]:
    """One-shot convenience: run ``model`` on ``inputs`` with the reference executor."""
    return Executor(model).run(inputs, **kw)
