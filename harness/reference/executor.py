"""The reference executor's graph interpreter (design contract 4).

It walks a subgraph's operations in order, keeps one value slot per operand (constants from
the model, inputs from the caller, omitted optional inputs as None), and resolves unknown
output dimensions from what each operation actually computes.  Operations themselves live in
``nnconform.reference.ops``; control-flow operations call back into :meth:`Executor.run_subgraph`.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Sequence

import numpy as np

from nnconform.errors import DeadlineMissed, NotImplementedOperation, OpFailure, ValidationError
from nnconform.ir import Lifetime, Model, Subgraph
from nnconform.reference.ops.registry import OpContext, OpView, get_op, load_all

DEFAULT_LOOP_TIMEOUT = 2.0  # seconds (NNAPI LoopTimeoutDurationNs default)
MAX_LOOP_TIMEOUT = 15.0  # larger requests are clamped


# numpy's floating-point error state.  From numpy 2 it lives in a context variable, and
# np.errstate builds a new state object on every entry (~2-4 us, as much as a small
# operation): a run sets one state built here instead.  These are numpy internals: any numpy
# where they are missing, are called differently or do not read back as all-ignore takes
# np.errstate (the package must still import).
try:
    from numpy._core._ufunc_config import _extobj_contextvar as _ERR_STATE
    from numpy._core._ufunc_config import _make_extobj

    _QUIET_FLOATS = _make_extobj(all="ignore")
    _token = _ERR_STATE.set(_QUIET_FLOATS)
    try:
        if set(np.geterr().values()) != {"ignore"}:
            raise ImportError("numpy's error state did not take")
    finally:
        _ERR_STATE.reset(_token)
except (ImportError, AttributeError, TypeError, ValueError):
    _ERR_STATE = None


def clamp_loop_timeout(loop_timeout: float | None) -> float:
    if loop_timeout is None:
        return DEFAULT_LOOP_TIMEOUT
    return min(max(float(loop_timeout), 0.0), MAX_LOOP_TIMEOUT)


class _Step:
    """One operation of a plan: everything about it that depends only on the model."""

    __slots__ = (
        "index",
        "operation",
        "name",
        "fn",
        "kernel",
        "inputs",
        "outputs",
        "in_operands",
        "tensor_dims",
        "out_operands",
        "out_checks",
        "constant_scalars",
        "memo",
    )

    def __init__(self, sg: Subgraph, index: int, fn, prepare=None):
        op = sg.operations[index]
        self.index, self.operation, self.name, self.fn = index, op, op.name, fn
        self.inputs, self.outputs = tuple(op.inputs), tuple(op.outputs)
        self.in_operands = tuple(sg.operands[i] for i in op.inputs)
        # per tensor input, (input position, the model's dimensions) to compare actual shapes
        # with: OpContext.planned substitutes an operand with the actual dims.  Scalars, whose
        # operand never changes, are left out (a convolution's ten inputs are seven scalars).
        self.tensor_dims = tuple((k, o.dimensions) for k, o in enumerate(self.in_operands) if not o.info.is_scalar)
        self.out_operands = [sg.operands[i] for i in op.outputs]
        # constant scalar parameters (activation, beta, axis, ...) as Python values, for
        # OpContext.scalar: reading one from its array costs more than many small kernels
        self.constant_scalars = tuple(
            o.value.reshape(-1)[0].item()
            if o.is_constant and o.info.is_scalar and o.value is not None and o.value.size == 1
            else None
            for o in self.in_operands
        )
        # an operation's own facts derived from the model alone (OpContext.memo), kept
        # across runs: keys name everything a value depends on beyond the model
        self.memo = {}
        # per output: (operand index, storage dtype, model dims to enforce or None)
        self.out_checks = tuple(
            (i, o.info.dtype, o.dimensions if o.dimensions and not o.info.is_scalar else None)
            for i, o in zip(op.outputs, self.out_operands)
        )
        # the operation's plan-time kernel, if it has one for this step (registry: prepare).
        # The view has no model: a kernel may depend only on the subgraph's own operands.
        self.kernel = _prepared(prepare, sg, index) if prepare is not None else None


def _prepared(prepare, sg: Subgraph, index: int):
    """prepare's kernel for a step.  A step whose operands are malformed (the plan is built
    before any validation a caller may skip) gets none: the error is execute's to report,
    when the step runs and in the order the steps run, as without kernels."""
    try:
        return prepare(OpView(None, sg, index))
    except (OpFailure, ValidationError, ValueError, TypeError, IndexError, KeyError, ArithmeticError):
        return None


class _Plan:
    """Per subgraph, once: the value slots pre-filled with constants, the input checks and each
    operation's step.  Subgraphs are immutable, so one plan serves every Executor of the model
    (the reference driver makes one Executor per request), every run and every WHILE
    iteration: the per-run cost of a small model is then only what depends on the request."""

    __slots__ = ("template", "input_checks", "steps", "releases", "__weakref__")

    def __init__(self, sg: Subgraph):
        template: list = [None] * len(sg.operands)
        for i, op in enumerate(sg.operands):
            if op.is_constant:
                template[i] = op.value
            elif op.lifetime == Lifetime.SUBGRAPH:
                template[i] = np.asarray(op.value, dtype=np.int64)
        self.template = template
        # per subgraph input: (operand index, storage dtype, is scalar, model dims)
        self.input_checks = tuple(
            (i, sg.operands[i].info.dtype, sg.operands[i].info.is_scalar, sg.operands[i].dimensions)
            for i in sg.input_indexes
        )
        # an operation the reference lacks fails at run time (NotImplementedOperation), as before
        self.steps = tuple(_Step(sg, n, *_registered(o.type)) for n, o in enumerate(sg.operations))
        self.releases = _releases(sg)


def _releases(sg: Subgraph) -> tuple[tuple[int, ...], ...]:
    """Per operation: the intermediate operands no later operation reads, to drop once it has
    run.  Without that, every intermediate of a run lives until the run ends: a real model's
    working set was then 3-13x what it needs (pose_landmark_full: 69 MB against 20 MB), and
    each operation wrote its output into memory no cache had seen.  Only temporaries are
    dropped, never a subgraph's inputs, outputs or constants; an output nothing reads goes
    right after the operation that wrote it."""
    last: dict[int, int] = {}
    for n, op in enumerate(sg.operations):
        for i in op.outputs:
            last.setdefault(i, n)
        for i in op.inputs:
            last[i] = n
    kept = set(sg.input_indexes) | set(sg.output_indexes)
    per_step: list[list[int]] = [[] for _ in sg.operations]
    for i, n in last.items():
        if i not in kept and sg.operands[i].lifetime == Lifetime.TEMPORARY_VARIABLE:
            per_step[n].append(i)
    return tuple(tuple(r) for r in per_step)


def _registered(op_type) -> tuple:
    """(execute, prepare) of an operation type."""

    def missing(ctx):
        return get_op(op_type).execute(ctx)  # raises NotImplementedOperation

    try:
        opdef = get_op(op_type)
    except NotImplementedOperation:
        return missing, None
    return opdef.execute, opdef.prepare


# Subgraph -> its plan, shared by every Executor of the model; entries go with their subgraph.
_PLANS: "weakref.WeakKeyDictionary[Subgraph, _Plan]" = weakref.WeakKeyDictionary()
_PLANS_LOCK = threading.Lock()


def plan_for(sg: Subgraph) -> _Plan:
    plan = _PLANS.get(sg)
    if plan is None:
        plan = _Plan(sg)
        with _PLANS_LOCK:
            plan = _PLANS.setdefault(sg, plan)
    return plan


class Executor:
    """Executes one model.  Not thread-safe per call state: create one per execution or use
    :func:`execute`; a prepared model in the reference driver creates one per request.  The
    model-only work (the plan) is shared between executors of the same model."""

    def __init__(
        self, model: Model, overrides: dict | None = None, keep_values: bool = False, prepared_kernels: bool = True
    ):
        load_all()
        self.model = model
        # operation type -> replacement execute function (used by the deliberately broken
        # drivers that test the harness; never by the reference driver)
        self.overrides = overrides or {}
        # False: every step through its operation's execute, never a plan-time kernel (what
        # the tests compare the kernels with)
        self.prepared_kernels = prepared_kernels
        # id(subgraph) -> (plan, execute fns, kernels); the fns differ from the plan's only
        # with overrides, and an overridden operation type runs no kernel
        self._plans: dict[int, tuple[_Plan, tuple, tuple]] = {}
        self.deadline: float | None = None
        self.loop_timeout: float = DEFAULT_LOOP_TIMEOUT
        # keep_values: every operand's value of the main graph after a run, in main_values
        # (what a divergence hunt or a calibration reads); otherwise an intermediate is
        # dropped as soon as no later operation reads it, and main_values stays None
        self.keep_values = keep_values
        self.main_values: list | None = None
        # True while run() holds numpy's float warnings off (entering np.errstate costs ~1-3 us)
        self.floats_quiet = False
        self._plan(model.main)  # build (or find) the main graph's plan now, not in run()

    def run(
        self, inputs: Sequence[np.ndarray | None], *, deadline: float | None = None, loop_timeout: float | None = None
    ) -> list[np.ndarray]:
        self.deadline = deadline
        self.loop_timeout = DEFAULT_LOOP_TIMEOUT if loop_timeout is None else clamp_loop_timeout(loop_timeout)
        # The reference computes in IEEE floats: overflow to inf (common in fp16), inf - inf
        # and x / 0 give inf/NaN silently, and the criteria judge the results.  numpy's
        # warnings about them would only be noise in a driver engineer's test output.
        # (One frame, no helper call: a classifier's SOFTMAX run is ~12 us in all.)
        if _ERR_STATE is None:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
                return self._run_quiet(inputs)
        token = _ERR_STATE.set(_QUIET_FLOATS)
        self.floats_quiet = True  # hot kernels may skip their own errstate (see OpContext)
        try:
            return self.run_subgraph(self.model.main, inputs, keep=self.keep_values)
        finally:
            self.floats_quiet = False
            _ERR_STATE.reset(token)

    def _run_quiet(self, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        self.floats_quiet = True
        try:
            return self.run_subgraph(self.model.main, inputs, keep=self.keep_values)
        finally:
            self.floats_quiet = False

    def check_deadline(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise DeadlineMissed("execution deadline passed")

    def _plan(self, sg: Subgraph) -> tuple[_Plan, tuple, tuple]:
        entry = self._plans.get(id(sg))
        if entry is None:
            plan = plan_for(sg)
            overrides = self.overrides
            fns = tuple(overrides.get(s.operation.type) or s.fn for s in plan.steps)
            kernels = tuple(
                s.kernel if self.prepared_kernels and s.operation.type not in overrides else None for s in plan.steps
            )
            # the subgraph is kept alive by self.model, so its id stays its own
            entry = self._plans[id(sg)] = (plan, fns, kernels)
        return entry

    def run_subgraph(self, sg: Subgraph, inputs: Sequence[np.ndarray | None], keep: bool = False) -> list[np.ndarray]:
        plan, fns, kernels = self._plans.get(id(sg)) or self._plan(sg)
        values = list(plan.template)
        checks = plan.input_checks
        if len(inputs) != len(checks):
            raise ValidationError(
                "request.inputs", f"{sg.name or 'subgraph'} takes {len(checks)} inputs, got {len(inputs)}"
            )
        for (idx, dtype, is_scalar, dims), v in zip(checks, inputs):
            if v is None:
                continue
            if type(v) is np.ndarray and v.dtype == dtype and not is_scalar and v.shape == dims:
                values[idx] = v  # the common case: nothing to convert
            else:
                values[idx] = self._check_input(sg, idx, v)
        deadline = self.deadline
        releases = (None,) * len(fns) if keep else plan.releases
        planned, ndarray = OpContext.planned, np.ndarray  # (locals: looked up per step)
        for step, fn, kernel, release in zip(plan.steps, fns, kernels, releases):
            if deadline is not None:
                self.check_deadline()
            outs = kernel(values) if kernel is not None else None  # None: not this run's case
            if outs is None:
                outs = fn(planned(self, sg, step, values))
            out_checks = step.out_checks
            if len(outs) != len(out_checks):
                raise RuntimeError(
                    f"reference bug: {step.name} returned {len(outs)} outputs, model has {len(step.outputs)}"
                )
            for j, arr in enumerate(outs):
                idx, dtype, dims = out_checks[j]
                if type(arr) is not ndarray or arr.dtype != dtype or (dims is not None and arr.shape != dims):
                    arr = self._check_output(sg, step.index, j, idx, arr)
                values[idx] = arr
            if release:
                outs = arr = None  # the loop's own references would keep them until the next step
                for idx in release:
                    values[idx] = None
        if keep:
            self.main_values = values
        outs = list(map(values.__getitem__, sg.output_indexes))
        for v in outs:
            if v is None:
                missing = [k for k, o in enumerate(outs) if o is None]
                raise OpFailure(f"{sg.name or 'subgraph'} output(s) {missing} were never written")
        return outs

    @staticmethod
    def _check_input(sg: Subgraph, idx: int, v) -> np.ndarray:
        op = sg.operands[idx]
        k = sg.input_indexes.index(idx)  # the request's position, for the message
        dtype = op.info.dtype
        arr = np.asarray(v)
        if arr.dtype != dtype:
            if not np.can_cast(arr.dtype, dtype, casting="same_kind"):
                raise ValidationError(
                    f"request.inputs[{k}]", f"dtype {arr.dtype} cannot hold {op.type.name} (expected {dtype})"
                )
            arr = arr.astype(dtype)
        if op.info.is_scalar:
            return arr.reshape(())
        if op.dimensions:
            if arr.ndim != len(op.dimensions) or any(d and d != a for d, a in zip(op.dimensions, arr.shape)):
                raise ValidationError(
                    f"request.inputs[{k}]", f"shape {list(arr.shape)} does not match the model's {list(op.dimensions)}"
                )
        return arr

    @staticmethod
    def _check_output(sg: Subgraph, n: int, j: int, idx: int, arr) -> np.ndarray:
        op = sg.operands[idx]
        arr = np.asarray(arr)
        dtype = op.info.dtype
        if dtype is not None and arr.dtype != dtype:
            raise RuntimeError(
                f"reference bug: operations[{n}] ({sg.operations[n].name}) output {j} is "
                f"{arr.dtype}, {op.type.name} is stored as {dtype}"
            )
        if op.dimensions and not op.info.is_scalar:
            if arr.ndim != len(op.dimensions) or any(d and d != a for d, a in zip(op.dimensions, arr.shape)):
                raise OpFailure(
                    f"operations[{n}] ({sg.operations[n].name}) output {j} has shape "
                    f"{list(arr.shape)}, the model says {list(op.dimensions)}"
                )
        return arr


def execute(model: Model, inputs: Sequence[np.ndarray | None], **kw) -> list[np.ndarray]:
    """One-shot convenience: run ``model`` on ``inputs`` with the reference executor."""
    return Executor(model).run(inputs, **kw)
