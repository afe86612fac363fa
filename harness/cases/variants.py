"""The VTS execution matrix on golden vectors: every vector run through more than the plain
synchronous execution (VTS 1.3 GeneratedTestHarness's test kinds and executors, re-made).

A *variant* is one cell of the matrix, named in test ids as ``kind-path[-arg][-timing]``:

    general         async / burst (and sync) x timing: results, timing rules, reported shapes
    dynamic_shape   outputs' dimensions made unknown; the driver resolves and reports them, and
                    output 0 one byte short gives OUTPUT_INSUFFICIENT_SIZE (fenced: both are
                    INVALID_ARGUMENT)
    fenced          x timing: a fenced execution and a second one chained on its completion;
                    a zero-sized output is INVALID_ARGUMENT
    memory_domain   every input and output in a device buffer, on sync / async / fenced
    quant_coupling  a single-operation quant8-asymm vector beside its quant8-signed twin
    deadline        prepare / sync / async with a deadline now, +5 ms, unlimited
    priority        prepare with priority low / high
    caching         prepare with a cache token, then from the cache
    infinite_loop   the while_infinite_loop vectors with a 1 ms loop timeout on every path
    mutation        one VTS model-mutation class (nnconform.vts.mutations) applied to the vector's
                    model: every mutated model must get INVALID_ARGUMENT from supported_operations
                    and prepare (vectors named *inputs_as_internal* / *all_tensors_as_inputs* are
                    left out, as in VTS; rotate samples MUTATIONS_PER_CLASS vectors per class);
                    also CTS's classes beyond VTS's 22 (operand_extra_params, and
                    operation_input_rank: TestValidateOperations' per-operation rank rules)
    request_mutation  one request-mutation class (ValidateRequest: remove_input, output_wrong_rank,
                    ...) on one path: each mutated request of the vector must be rejected with
                    an allowed status and no output shapes (OUTPUT_INSUFFICIENT_SIZE aside); the
                    same vectors as ``mutation``, sampled the same way per (class, path)

Which variants apply to a vector is decided from its raw JSON (no model is built at
collection).  How many run is the ``--nn-variants`` mode: ``all``, a comma list of kinds, or
``rotate`` (the default): one variant per vector besides the plain sync run, chosen from the
run seed and the vector id, so successive seeds cover the matrix; ``none``: the plain runs only.

``run_variant`` runs one cell against a driver and returns a CaseOutcome; like ``run_case``,
whatever the driver does becomes a verdict.  A path the driver does not declare is a SKIP
naming the interface.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from nnconform.driver import (
    AsyncExecution,
    BufferDesc,
    BufferRole,
    BurstExecution,
    CompilationCaching,
    DriverError,
    ErrorStatus,
    ExecutionResult,
    FencedExecution,
    FencedExecutionInfo,
    MemoryDomains,
    Priority,
)
from nnconform.ir import Model, Request, RequestArgument
from nnconform.isolation import pools
from nnconform.isolation.proxy import DriverProtocolError, HostIncident
from nnconform.verdict.runner import FAIL, PASS, SKIP, CaseOutcome
from nnconform.vts.checks import (
    MISSED_DEADLINE,
    describe,
    dynamic_variant,
    fully_specified,
    insufficient_problem,
    rejections,
    request_verdict,
    result_problem,
    shapes_problem,
    timing_problem,
    to_signed,
    verdict,
)

KINDS = (
    "general",
    "dynamic_shape",
    "fenced",
    "memory_domain",
    "quant_coupling",
    "deadline",
    "priority",
    "caching",
    "infinite_loop",
    "mutation",
    "request_mutation",
)
MUTATIONS_PER_CLASS = 4  # rotate: vectors per model-mutation class per run
MUTATIONS_PER_CELL = 64  # rotate: mutated models per (vector, class) cell at most (a seeded sample;
# a big graph gives thousands for some classes, each sent to the driver)
MODES = ("rotate", "all", "none")
BOUND_S = 60.0  # in-process waits on futures and fences; the driver host bounds the rest
LOOP_TIMEOUT_S = 0.001  # INFINITE_LOOP: VTS's 1 ms loop timeout
SHORT_DEADLINE_S = 0.005
QUANT_COUPLING_EXEMPT = {"HASHTABLE_LOOKUP", "LSH_PROJECTION", "PAD_V2", "CAST", "QUANTIZED_16BIT_LSTM"}
INTERFACE = {"async": "AsyncExecution", "burst": "BurstExecution", "fenced": "FencedExecution"}
INTERFACE_TEXT = {"async": "asynchronous execution", "burst": "burst execution", "fenced": "fenced execution"}


@dataclass(frozen=True)
class Variant:
    kind: str
    path: str = "sync"  # sync / async / burst / fenced, or "prepare" for a deadline on prepare
    arg: str = ""  # deadline bound (now / 5ms / unlimited) or priority (low / high)
    timing: bool = False

    @property
    def id(self) -> str:
        parts = [self.kind]
        if (
            self.kind not in ("quant_coupling", "caching", "priority", "mutation", "request_mutation")
            or self.path != "sync"
        ):
            parts.append(self.path)
        if self.arg:
            parts.append(self.arg)
        if self.timing:
            parts.append("timing")
        return "-".join(parts)


PLAIN = Variant("general")  # the existing test_vector: GENERAL, sync, no timing


def _timed(kind: str, paths: Sequence[str]) -> list[Variant]:
    return [Variant(kind, p, timing=t) for p in paths for t in (False, True)]


# ---------------------------------------------------------------------------------------
# Which variants a vector gets (from its raw JSON)
# ---------------------------------------------------------------------------------------


def _raw_facts(d: dict) -> dict:
    model = d["model"]
    subgraphs = (model["main"], *model.get("referenced", []))
    ops = {o["type"] for sg in subgraphs for o in sg["operations"]}
    main = model["main"]
    outputs = [main["operands"][i] for i in main["output_indexes"]]
    return {
        "ops": ops,
        "n_ops": len(main["operations"]),
        "referenced": bool(model.get("referenced")),
        "quant8": any(o["type"] == "TENSOR_QUANT8_ASYMM" for o in main["operands"]),
        "tensor_output": any(o["type"].startswith("TENSOR") and any(o.get("dimensions") or ()) for o in outputs),
    }


def applicable(d: dict) -> list[Variant]:
    """Every variant of the matrix that applies to the raw vectors case ``d`` (the plain
    GENERAL sync run excluded: that is test_vector)."""
    try:
        f = _raw_facts(d)
    except (KeyError, TypeError, IndexError, AttributeError):
        return []  # a malformed case: the plain test says what is wrong
    name = str(d.get("spec") or d.get("name") or "")
    if d.get("expect_failure"):
        if name.startswith("while_infinite_loop"):
            return _timed("infinite_loop", ("sync", "async", "burst", "fenced"))
        # a validation vector must be refused on every path, with no output shapes
        return [Variant("general", p) for p in ("async", "burst", "fenced")]
    out = [Variant("general", timing=True)] + _timed("general", ("async", "burst"))
    if f["tensor_output"] and not f["ops"] & {"RANK", "IF", "WHILE"}:
        out += _timed("dynamic_shape", ("sync", "async", "burst")) + [Variant("dynamic_shape", "fenced")]
    out += _timed("fenced", ("fenced",))
    out += [Variant("memory_domain", p) for p in ("sync", "async", "fenced")]
    if f["n_ops"] == 1 and not f["referenced"] and f["quant8"] and not f["ops"] & QUANT_COUPLING_EXEMPT:
        out.append(Variant("quant_coupling"))
    out += [Variant("deadline", p, b) for p in ("prepare", "sync", "async") for b in ("now", "5ms", "unlimited")]
    out += [Variant("priority", arg="low"), Variant("priority", arg="high")]
    out.append(Variant("caching"))
    return out


def mutation_eligible(d: dict) -> dict | None:
    """For a valid vector VTS's validation tests use (not the as-internal / as-inputs copies):
    what decides which classes can mutate it (see _MUTATION_NEEDS); else None."""
    name = str(d.get("name", ""))
    if d.get("expect_failure") or "inputs_as_internal" in name or "all_tensors_as_inputs" in name:
        return None
    from nnconform.vts.mutations import RANK_CONSTRAINTS

    try:
        main = d["model"]["main"]
        operands = main["operands"]

        def tensor(k: int) -> bool:
            return str(operands[k]["type"]).startswith("TENSOR")

        return {
            "n_ops": len(main["operations"]),
            "scalar": any(
                not str(o["type"]).startswith("TENSOR") and o["type"] not in ("SUBGRAPH", "OEM") for o in operands
            ),
            "per_channel": any(o["type"] == "TENSOR_QUANT8_SYMM_PER_CHANNEL" for o in operands),
            "rank_ops": any(o["type"] in {op.name for op in RANK_CONSTRAINTS} for o in main["operations"]),
            "inputs": len(main["input_indexes"]),
            "tensor_inputs": any(tensor(k) for k in main["input_indexes"]),
            "tensor_outputs": any(tensor(k) and operands[k].get("dimensions") for k in main["output_indexes"]),
        }
    except (KeyError, TypeError, IndexError, AttributeError):
        return None


# Classes that cannot mutate every model: execution_order needs two operations to reorder,
# operand_rank a scalar operand to give a rank, operand_extra_params a per-channel operand,
# operation_input_rank an operation with a rank rule; the request classes an input to remove,
# a tensor input, or a tensor output of known rank.  (A cell whose class still finds nothing
# to mutate in the model is a SKIP saying so.)
_MUTATION_NEEDS = {
    "execution_order": lambda f: f["n_ops"] >= 2,
    "operand_rank": lambda f: f["scalar"],
    "operand_extra_params": lambda f: f["per_channel"],
    "operation_input_rank": lambda f: f.get("rank_ops", False),
}
_REQUEST_NEEDS = {
    "remove_input": lambda f: f.get("inputs", 0) > 0,
    **{
        c: (lambda f: f.get("tensor_inputs", False))
        for c in ("input_wrong_rank", "input_wrong_dimension", "input_zero_dimension", "input_buffer_too_small")
    },
    **{
        c: (lambda f: f.get("tensor_outputs", False))
        for c in ("output_wrong_rank", "output_wrong_dimension", "output_buffer_too_small")
    },
}
REQUEST_PATHS = ("sync", "async", "burst", "fenced")


def _mutation_classes() -> dict:
    from nnconform.vts.mutations import CTS_MUTATIONS, MODEL_MUTATIONS

    return {**MODEL_MUTATIONS, **CTS_MUTATIONS}


def mutation_variants() -> list[Variant]:
    """VTS's 22 model-mutation classes, then the ones CTS adds."""
    return [Variant("mutation", arg=cls) for cls in _mutation_classes()]


def request_mutation_variants() -> list[Variant]:
    """Each request-mutation class (nnconform.vts.mutations.REQUEST_CLASSES) on each path."""
    from nnconform.vts.mutations import REQUEST_CLASSES

    return [Variant("request_mutation", p, cls) for cls in REQUEST_CLASSES for p in REQUEST_PATHS]


def select_mutations(
    eligible: Sequence[tuple[str, dict]], mode: str | frozenset[str], seed: int, per_class: int = MUTATIONS_PER_CLASS
) -> dict[str, list[Variant]]:
    """Model- and request-mutation cells per vector id, from the eligible (vector id,
    mutation_eligible facts) pairs: every class on every vector it can mutate for ``all`` (or
    when the kind list names ``mutation`` / ``request_mutation``); for ``rotate`` the
    ``per_class`` vectors with the smallest hash of (seed, class, vector) for each model class
    and for each (request class, path)."""
    out: dict[str, list[Variant]] = {}
    if mode == "none":
        return out
    cells = []
    if mode in ("rotate", "all") or "mutation" in mode:
        cells += [(v, _MUTATION_NEEDS.get(v.arg), v.arg) for v in mutation_variants()]
    if mode in ("rotate", "all") or "request_mutation" in mode:
        cells += [(v, _REQUEST_NEEDS.get(v.arg), v.id) for v in request_mutation_variants()]
    for v, need, key in cells:
        ids = [vid for vid, facts in eligible if need is None or need(facts)]
        if mode == "rotate":
            chosen = sorted(ids, key=lambda vid: hashlib.sha256(f"{seed}:{key}:{vid}".encode()).digest())[:per_class]
        else:
            chosen = ids
        for vid in chosen:
            out.setdefault(vid, []).append(v)
    return out


def parse_mode(text: str | None) -> str | frozenset[str]:
    """``rotate`` / ``all`` / ``none`` (the plain runs only) / a frozenset of kinds from a
    comma list; ValueError otherwise."""
    text = (text or "rotate").strip()
    if text in MODES:
        return text
    kinds = frozenset(k.strip() for k in text.split(",") if k.strip())
    unknown = sorted(kinds - set(KINDS))
    if not kinds or unknown:
        raise ValueError(
            f"unknown variant kind(s) {', '.join(unknown) or repr(text)}; use rotate, all, none, or a "
            f"comma list of: {', '.join(KINDS)}"
        )
    return kinds


def select(variants: Sequence[Variant], mode: str | frozenset[str], seed: int, vector_id: str) -> list[Variant]:
    """The variants a run executes for one vector.  ``rotate``: one, picked from a hash of the
    seed and the vector id (stable across processes and xdist workers)."""
    if mode == "all":
        return list(variants)
    if mode == "none":
        return []
    if mode == "rotate":
        if not variants:
            return []
        h = hashlib.sha256(f"{seed}:{vector_id}".encode()).digest()
        return [variants[int.from_bytes(h[:8], "big") % len(variants)]]
    return [v for v in variants if v.kind in mode]


# ---------------------------------------------------------------------------------------
# Running one variant
# ---------------------------------------------------------------------------------------


class _Stop(BaseException):
    """Ends a variant early with its verdict (a BaseException, so that no ``except Exception``
    judging a driver answer swallows it)."""

    def __init__(self, outcome: str, message: str, stage: str, details: dict | None = None):
        super().__init__(message)
        self.outcome, self.message, self.stage, self.details = outcome, message, stage, details


def _call(what: str, fn: Callable[[], Any]) -> Any:
    """The driver's answer: a value or a DriverError (returned, judged by the caller); anything
    else the driver does ends the variant."""
    try:
        return fn()
    except DriverError as e:
        return e
    except HostIncident as e:
        raise _Stop(e.verdict, f"{e} (in {what})", what, e.details) from None
    except DriverProtocolError as e:
        raise _Stop(FAIL, f"{e} (in {what})", what) from None
    except TimeoutError:
        raise _Stop(FAIL, f"HANG: {what} did not finish within {BOUND_S:g} s", what) from None
    except (Exception, SystemExit, GeneratorExit) as e:  # a driver bug must become a verdict
        raise _Stop(FAIL, f"driver raised in {what}: {describe(e)}", what) from None


def _host_state(device) -> tuple:
    """What changes when a driver host is replaced or has an incident (an in-process device:
    nothing)."""
    return (getattr(device, "hosts_started", None), len(getattr(device, "incidents", None) or ()))


class _SharedPrepared:
    """The prepared models of one vector, kept across its cells of this process.

    VTS's GeneratedTestHarness prepares a vector's model once per test and runs every executor
    and timing combination on it; nnconform's cells are finer (one path, one timing), and the
    cells that test execution, not preparation, share a preparation the same way: the first
    such cell of a vector asks supported_operations and prepares, the next ones execute on
    that prepared model.  That is three driver-host round trips fewer per cell (a third of a
    cell on the reference driver).  Cells that test preparation itself (priority, caching,
    deadline on prepare, quant_coupling, the mutations, invalid models) prepare their own.

    It is dropped, and released, when the next vector (or device) comes, when the driver
    host is replaced or has an incident, and after a cell that does not PASS or SKIP, so a
    prepared model a failing cell may have left in a bad state never serves another cell."""

    def __init__(self):
        self.device = self.case = self.state = None
        self.models: dict[str, tuple[Model, Any]] = {}
        self.bursts: list[tuple[Any, Any]] = []  # (kept prepared model, its burst)

    def lookup(self, ctx: "_Ctx", tag: str):
        """The (model, prepared model) kept under ``tag`` for ctx's vector, or None.  Switching
        vector releases the previous one's, within this cell: a host crash or hang then is an
        incident of this cell, as one in its own release would be."""
        if self.device is ctx.device and self.case is ctx.case and self.state == _host_state(ctx.device):
            return self.models.get(tag)
        self.drop(release=self.device is ctx.device)
        # strong references: the identity checks above cannot match a new object at a reused address
        self.device, self.case, self.state = ctx.device, ctx.case, _host_state(ctx.device)
        return None

    def keep(self, tag: str, model: Model, pm) -> None:
        self.models[tag] = (model, pm)

    def kept(self, pm) -> bool:
        return any(p is pm for _, p in self.models.values())

    def burst_of(self, pm):
        """The burst configured on the kept prepared model ``pm`` for this vector's cells, or None."""
        for p, burst in self.bursts:
            if p is pm:
                return burst
        return None

    def drop(self, release: bool = True) -> None:
        """Forget the kept models; release them too when ``release`` and their host is the
        one they were prepared on (after an incident the handles are stale)."""
        models, healthy = self.models, self.device is not None and self.state == _host_state(self.device)
        bursts = self.bursts
        self.models, self.bursts, self.device, self.case, self.state = {}, [], None, None, None
        if not (release and healthy):
            return
        for _, burst in bursts:  # before the prepared models they were configured on
            try:
                burst.release()
            except Exception:  # as _Ctx.release_all: a failing release is not the verdict of a cell
                continue
        for _, pm in models.values():
            try:
                pm.release()
            except Exception:  # as _Ctx.release_all: a failing release is not the verdict of a cell
                continue


SHARED = _SharedPrepared()


def forget_shared() -> None:
    """Forget the prepared models kept for the last vector, without a driver call (the device
    is about to be closed)."""
    SHARED.drop(release=False)


@dataclass
class _Ctx:
    device: Any
    case: Any  # VectorCase
    variant: Variant
    seed: int
    mutation_cap: int | None = None
    prepared: list = dataclasses.field(default_factory=list)
    models: list = dataclasses.field(default_factory=list)  # (model, prepared model) of this cell

    @property
    def ops(self) -> str:
        return ", ".join(self.case.model.operation_names())

    def fail(self, message: str, stage: str = "execute"):
        raise _Stop(FAIL, f"[{self.variant.id}] [{self.ops}] {message}", stage)

    def skip(self, message: str, stage: str = "execute"):
        raise _Stop(SKIP, f"[{self.variant.id}] {message}", stage)

    def support(self, model: Model) -> None:
        got = _call("supported_operations", lambda: self.device.supported_operations(model))
        if isinstance(got, DriverError):
            self.fail(f"supported_operations failed on a valid model: {got}", "supported")
        if (
            not isinstance(got, (list, tuple))
            or len(got) != len(model.main.operations)
            or not all(isinstance(s, (bool, np.bool_)) for s in got)
        ):
            self.fail(
                f"supported_operations returned {got!r:.80}; expected {len(model.main.operations)} bools", "supported"
            )
        if not all(got):
            missing = sorted({model.main.operations[i].name for i, s in enumerate(got) if not s})
            self.skip(f"driver does not support {', '.join(missing)} for {'/'.join(model.data_types())}", "supported")

    def prepare(self, model: Model, **kw):
        pm = _call("prepare", lambda: self.device.prepare(model, **kw))
        if isinstance(pm, DriverError):
            self.fail(f"prepare failed although every operation is supported: {pm}", "prepare")
        self.prepared.append(pm)
        self.models.append((model, pm))
        return pm

    def shared(self, tag: str = "model", build: Callable[[], Model | None] | None = None):
        """(model, prepared model) for a cell that tests execution: ``build()`` (default: the
        vector's model) asked about and prepared by the first such cell of the vector, kept
        for the next ones (_SharedPrepared).  ``build`` returning None: (None, None)."""
        got = SHARED.lookup(self, tag)
        if got is not None:
            return got
        model = self.case.model if build is None else build()
        if model is None:
            return None, None
        self.support(model)
        pm = _call("prepare", lambda: self.device.prepare(model))
        if isinstance(pm, DriverError):
            self.fail(f"prepare failed although every operation is supported: {pm}", "prepare")
        SHARED.keep(tag, model, pm)
        return model, pm

    def release_all(self) -> None:
        for pm in self.prepared:
            try:
                pm.release()
            except Exception:  # the host may be gone after a CRASH/HANG: that is the verdict already
                continue

    def need_path(self, pm, path: str) -> None:
        iface = {"async": AsyncExecution, "burst": BurstExecution, "fenced": FencedExecution}.get(path)
        if iface is not None and not isinstance(pm, iface):
            self.skip(f"the driver has no {INTERFACE_TEXT[path]} ({INTERFACE[path]})")

    def execute(self, pm, path: str, request: Request, **kw):
        """One execution on ``path``; the result or the DriverError."""
        got = self._execute(pm, path, request, **kw)
        if not isinstance(got, (ExecutionResult, DriverError)):
            self.fail(f"{path} execution returned {type(got).__name__}, not an ExecutionResult")
        return got

    def model_of(self, pm) -> Model | None:
        """The model ``pm`` was prepared from in this cell or kept for the vector (None: not
        known here)."""
        for m, p in (*self.models, *SHARED.models.values()):
            if p is pm:
                return m
        return None

    def _execute(self, pm, path: str, request: Request, **kw):
        self.need_path(pm, path)
        if getattr(self.device, "isolated", False):
            pooled = lambda what, fn: _call(what, lambda: fn(request))  # noqa: E731  # the proxy pools and checks
        else:
            # In-process the pools are plain buffers of the harness with the same checks
            # (pools.execute_in_process); a violation is a DriverProtocolError, a FAIL of the cell.
            model = self.model_of(pm)

            def pooled(what: str, fn: Callable[[Request], Any]) -> Any:
                return _call(what, lambda: pools.execute_in_process(fn, request, model))

        if path == "sync":
            return pooled("execute", lambda r: pm.execute(r, **kw))
        if path == "async":
            return pooled("execute_async", lambda r: pm.execute_async(r, **kw).result(timeout=BOUND_S))
        if path == "burst":
            kept = SHARED.kept(pm)
            burst = SHARED.burst_of(pm) if kept else None
            if burst is not None:
                # One burst per vector, as one prepared model: VTS too runs a test's executions
                # (and all its request validations) through one burst.  Configure and release
                # were two of a burst cell's three round trips; a failing cell drops it with
                # the prepared model (_SharedPrepared).
                return pooled("burst execute", lambda r: burst.execute(r, **kw))
            burst = _call("configure_burst", pm.configure_burst)
            if isinstance(burst, DriverError):
                self.fail(f"configure_burst failed: {burst}")
            if kept:
                SHARED.bursts.append((pm, burst))
                return pooled("burst execute", lambda r: burst.execute(r, **kw))
            # An execution that ends the cell (a CRASH, HANG or check failure) skips the
            # release: after a crash the burst's handle is stale, and the release's own error
            # would replace the execution's verdict and its explanation.  The burst then goes
            # with its last reference (a proxy's host drops it; an in-process one is collected).
            got = pooled("burst execute", lambda r: burst.execute(r, **kw))
            _call("burst release", burst.release)
            return got
        if path == "fenced":
            return pooled("execute_fenced", lambda r: pm.execute_fenced(r, (), **kw).wait(BOUND_S))
        raise ValueError(f"unknown execution path {path!r}")

    def check(
        self, model: Model, got, *, expected=None, asked: bool = False, dims=None, required=False, what: str = ""
    ) -> None:
        """A successful execution with the right results, timing and output shapes."""
        case = self.case
        expected = case.outputs if expected is None else expected
        multinomial = case.multinomial_tolerance > 0
        ignored = [True] * len(expected) if multinomial else case.ignored
        prefix = f"{what}: " if what else ""
        if isinstance(got, DriverError):
            self.fail(f"{prefix}execution failed: {got}")
        why = (
            result_problem(model, got, expected, ignored=ignored)
            or timing_problem(got.timing, asked)
            or shapes_problem(model, got, required=required, dims=dims)
        )
        if why:
            self.fail(prefix + why, "compare")
        if multinomial:
            from nnconform.reference.ops.random_multinomial import check_multinomial

            ok, msg = check_multinomial(case.inputs[0], got.outputs[0], case.multinomial_tolerance)
            if not ok:
                self.fail(f"{prefix}[RANDOM_MULTINOMIAL] {msg}", "compare")

    def request(self, model: Model | None = None, inputs=None) -> Request:
        model = model or self.case.model
        request = Request.from_arrays(model, list(self.case.inputs if inputs is None else inputs))
        if self.case.expect_failure:
            return request
        # outputs of unknown dimensions get buffers of the golden outputs' sizes, as VTS gives
        # them (and so pool regions with their checks)
        return pools.capacities_from(model, request, self.case.outputs)


def run_variant(device, case, variant: Variant, *, seed: int = 0, mutation_cap: int | None = None) -> CaseOutcome:
    """Run one cell of the matrix on one golden vector.  ``mutation_cap``: a mutation cell runs
    at most this many of its mutated models, a sample drawn with ``seed`` (None: all)."""
    t0 = time.perf_counter()
    ctx = _Ctx(device, case, variant, seed, mutation_cap)
    try:
        try:
            message = _RUNNERS[variant.kind](ctx)
        finally:
            ctx.release_all()
        outcome = CaseOutcome(PASS, f"[{variant.id}] {message}", "compare")
    except _Stop as s:
        outcome = CaseOutcome(s.outcome, s.message, s.stage, details=s.details)
    if outcome.outcome not in (PASS, SKIP):
        SHARED.drop()
    outcome.duration_s = time.perf_counter() - t0
    return outcome


# ---- the kinds ---------------------------------------------------------------------------


def _general(ctx: _Ctx) -> str:
    v, case = ctx.variant, ctx.case
    if case.expect_failure:
        got = _call("supported_operations", lambda: ctx.device.supported_operations(case.model))
        if isinstance(got, DriverError):
            return f"rejected as expected by supported_operations: {got}"
        if isinstance(got, (list, tuple)) and not all(got):
            ctx.skip("driver does not support every operation of the model", "supported")
        pm = _call("prepare", lambda: ctx.device.prepare(case.model))
        if isinstance(pm, DriverError):
            return f"rejected as expected by prepare: {pm}"
        ctx.prepared.append(pm)
        got = ctx.execute(pm, v.path, ctx.request(), measure_timing=v.timing)
        if isinstance(got, ExecutionResult):
            ctx.fail(f"driver accepted and executed an invalid model on the {v.path} path (must fail)")
        if got.status != ErrorStatus.OUTPUT_INSUFFICIENT_SIZE and got.output_shapes:
            ctx.fail(f"{got.status.name} came with output shapes {list(got.output_shapes)} (must be empty)")
        return f"execution failed as expected: {got}"
    _, pm = ctx.shared()
    got = ctx.execute(pm, v.path, ctx.request(), measure_timing=v.timing)
    ctx.check(case.model, got, asked=v.timing)
    return "results, timing and output shapes right"


def _real_shapes(case) -> list[tuple[int, ...]]:
    return [tuple(np.asarray(o).shape) for o in case.outputs]


def _dynamic_shape(ctx: _Ctx) -> str:
    v, case = ctx.variant, ctx.case
    dyn, pm = ctx.shared("dynamic_shape", lambda: dynamic_variant(case.model))
    if dyn is None:
        ctx.skip("no output with known dimensions to make unknown")
    ctx.need_path(pm, v.path)
    real = _real_shapes(case)
    out0 = np.asarray(case.outputs[0])
    model_dims = [case.model.main.operands[k].dimensions for k in case.model.main.output_indexes]
    short = None
    if out0.nbytes:
        req = ctx.request(dyn)
        short = dataclasses.replace(req, outputs=(RequestArgument(capacity=out0.nbytes - 1), *req.outputs[1:]))
    if v.path == "fenced":
        # fenced execution has no OUTPUT_INSUFFICIENT_SIZE and needs fully specified outputs
        why = verdict(
            ctx.execute(pm, "fenced", ctx.request(dyn), measure_timing=v.timing),
            ErrorStatus.INVALID_ARGUMENT,
            "fenced execution with unknown output dimensions",
        )
        if why is None and short is not None:
            why = verdict(
                ctx.execute(pm, "fenced", short, measure_timing=v.timing),
                ErrorStatus.INVALID_ARGUMENT,
                "fenced execution with output 0 one byte short",
            )
        if why:
            ctx.fail(why)
        return "unknown output dimensions and a short output rejected with INVALID_ARGUMENT"
    got = ctx.execute(pm, v.path, ctx.request(dyn), measure_timing=v.timing)
    if isinstance(got, DriverError) and got.status == ErrorStatus.GENERAL_FAILURE:
        ctx.skip("GENERAL_FAILURE on outputs of unknown dimensions (VTS skips: the driver may not resolve them)")
    ctx.check(dyn, got, asked=v.timing, dims=model_dims, required=True, what="unknown output dimensions")
    if short is None:
        return "unknown output dimensions resolved (output 0 is empty: no short-buffer check)"
    got = ctx.execute(pm, v.path, short, measure_timing=v.timing)
    if isinstance(got, DriverError) and got.status == ErrorStatus.GENERAL_FAILURE:
        ctx.skip("GENERAL_FAILURE on a short output of unknown dimensions (VTS skips)")
    why = insufficient_problem(got, real, 0)
    if why:
        ctx.fail(f"output 0 one byte short: {why}")
    return "unknown output dimensions resolved; a short output 0 reported insufficient"


def _fenced(ctx: _Ctx) -> str:
    v, case = ctx.variant, ctx.case
    _, pm = ctx.shared()
    ctx.need_path(pm, "fenced")
    if not fully_specified(case.model):
        why = verdict(
            ctx.execute(pm, "fenced", ctx.request(), measure_timing=v.timing),
            ErrorStatus.INVALID_ARGUMENT,
            "fenced execution of a model with unspecified outputs",
        )
        if why:
            ctx.fail(why)
        return "unspecified outputs rejected with INVALID_ARGUMENT"
    gate = threading.Event()
    first = _call("execute_fenced", lambda: pm.execute_fenced(ctx.request(), (), measure_timing=v.timing))
    if isinstance(first, DriverError):
        ctx.fail(f"execute_fenced failed: {first}")
    second = _call("execute_fenced", lambda: pm.execute_fenced(ctx.request(), (gate,), measure_timing=v.timing))
    if isinstance(second, DriverError):
        gate.set()
        ctx.fail(f"execute_fenced gated on a fence failed: {second}")
    try:
        r1 = _call("fenced wait", lambda: first.wait(BOUND_S))
    finally:
        gate.set()  # the first one's completion is the second one's sync fence
    r2 = _call("fenced wait", lambda: second.wait(BOUND_S))
    ctx.check(case.model, r1, asked=v.timing, what="first fenced execution")
    ctx.check(case.model, r2, asked=v.timing, what="second fenced execution, chained on the first")
    info = _call("get_execution_info", first.get_execution_info)
    if not isinstance(info, FencedExecutionInfo):
        ctx.fail(f"get_execution_info gave {info!r:.80}, not a FencedExecutionInfo")
    if info.status != ErrorStatus.NONE:
        ctx.fail(f"execution info status {info.status!r} after a successful execution")
    for name, t in (("timing_launched", info.timing_launched), ("timing_fenced", info.timing_fenced)):
        why = timing_problem(t, v.timing)
        if why:
            ctx.fail(f"execution info {name}: {why}")
    out0 = np.asarray(case.outputs[0])
    if out0.nbytes:
        req = ctx.request()
        zero = dataclasses.replace(req, outputs=(RequestArgument(capacity=0), *req.outputs[1:]))
        why = verdict(ctx.execute(pm, "fenced", zero), ErrorStatus.INVALID_ARGUMENT, "a zero-sized output 0")
        if why:
            ctx.fail(why)
    return "fenced execution and a chained one right; zero-sized output rejected"


def _memory_domain(ctx: _Ctx) -> str:
    v, case = ctx.variant, ctx.case
    device = ctx.device
    if not isinstance(device, MemoryDomains):
        ctx.skip("the driver has no memory domains (MemoryDomains)")
    _, pm = ctx.shared()
    ctx.need_path(pm, v.path)

    def allocate(dims, role_in=(), role_out=()):
        got = _call(
            "allocate",
            lambda: device.allocate(
                BufferDesc(tuple(dims)), [pm], [BufferRole(0, i) for i in role_in], [BufferRole(0, i) for i in role_out]
            ),
        )
        if isinstance(got, DriverError):
            if got.status == ErrorStatus.GENERAL_FAILURE:
                ctx.skip(
                    f"allocate gave GENERAL_FAILURE for a valid role (memory domains not offered for it; "
                    f"VTS skips): {got}"
                )
            ctx.fail(f"allocate for a valid role gave {got} (a refusal must be GENERAL_FAILURE)")
        if not (isinstance(got, tuple) and len(got) == 2 and isinstance(got[1], (int, np.integer)) and got[1] > 0):
            ctx.fail(f"allocate returned {got!r:.80}, expected (buffer, token > 0)")
        return got

    request = ctx.request()
    ins = list(request.inputs)
    held = []  # a buffer lives as long as its handle: keep every one until the execution is over
    for i, arg in enumerate(ins):
        if arg.has_no_value or arg.value is None or arg.value.size == 0:
            continue  # omitted, or zero-sized (a 0 in a buffer's dimensions means "unknown")
        buf, token = allocate(arg.value.shape, role_in=[i])
        held.append(buf)
        why = _call("copy_from", lambda: buf.copy_from(arg.value))
        if isinstance(why, DriverError):
            ctx.fail(f"copy_from into the buffer of input {i} gave {why}")
        ins[i] = RequestArgument(memory=int(token))
    outs, bufs = list(request.outputs), {}
    for j, want in enumerate(case.outputs):
        if np.asarray(want).size:
            bufs[j], token = allocate(np.asarray(want).shape, role_out=[j])
            outs[j] = RequestArgument(memory=int(token))
    if not bufs and not held:
        ctx.skip("every input and output is zero-sized or omitted: nothing to put in device memory")
    request = Request(tuple(ins), tuple(outs))
    if v.path == "fenced" and not fully_specified(case.model):
        why = verdict(
            ctx.execute(pm, "fenced", request),
            ErrorStatus.INVALID_ARGUMENT,
            "fenced execution of a model with unspecified outputs",
        )
        if why:
            ctx.fail(why)
        return "unspecified outputs rejected with INVALID_ARGUMENT (device memory and fenced execution)"
    got = ctx.execute(pm, v.path, request)
    if isinstance(got, DriverError):
        ctx.fail(f"execution with every input and output in device memory failed: {got}")
    if not isinstance(got, ExecutionResult):
        ctx.fail(f"execute returned {type(got).__name__}, not an ExecutionResult")
    data = list(got.outputs) if isinstance(got.outputs, (list, tuple)) else []
    if len(data) != len(case.outputs):
        ctx.fail(f"{len(data)} outputs, the model has {len(case.outputs)}")
    for j, buf in bufs.items():
        arr = _call("copy_to", buf.copy_to)
        if not isinstance(arr, np.ndarray):
            what = describe(arr) if isinstance(arr, BaseException) else type(arr).__name__
            ctx.fail(f"copy_to of output {j} after the execution gave {what}")
        data[j] = arr
    ctx.check(case.model, dataclasses.replace(got, outputs=tuple(data)), what="outputs read back from device memory")
    del held
    return f"{len(bufs)} outputs and {sum(a.memory is not None for a in ins)} inputs through device memory right"


def _quant_coupling(ctx: _Ctx) -> str:
    case = ctx.case
    signed, ins, outs = to_signed(case.model, case.inputs, case.outputs)

    def accepted(model) -> tuple[bool, str]:
        got = _call("supported_operations", lambda: ctx.device.supported_operations(model))
        if isinstance(got, DriverError):
            return False, f"supported_operations gave {got}"
        if not isinstance(got, (list, tuple)) or not all(got):
            return False, "not supported"
        pm = _call("prepare", lambda: ctx.device.prepare(model))
        if isinstance(pm, DriverError):
            return False, f"prepare gave {pm}"
        ctx.prepared.append(pm)
        return True, ""

    ok_u, why_u = accepted(case.model)
    ok_s, why_s = accepted(signed)
    if ok_u and not ok_s:
        ctx.fail(f"the quant8-signed twin is refused ({why_s}) while the quant8-asymm original is accepted")
    if not ok_u and not ok_s:
        ctx.skip(f"neither the quant8-asymm original ({why_u}) nor its signed twin is accepted", "supported")
    pm_s = ctx.prepared[-1]
    got = ctx.execute(pm_s, "sync", ctx.request(signed, ins))
    ctx.check(signed, got, expected=outs, what="quant8-signed twin")
    if ok_u:
        got = ctx.execute(ctx.prepared[0], "sync", ctx.request())
        ctx.check(case.model, got, what="quant8-asymm original")
        return "original and quant8-signed twin both accepted and right"
    return f"quant8-signed twin right (the original is refused: {why_u})"


def _deadline_at(bound: str) -> float | None:
    if bound == "now":
        return time.monotonic()
    if bound == "5ms":
        return time.monotonic() + SHORT_DEADLINE_S
    return None


def _deadline(ctx: _Ctx) -> str:
    v, case = ctx.variant, ctx.case
    if v.path == "prepare":
        ctx.support(case.model)
        pm = _call("prepare", lambda: ctx.device.prepare(case.model, deadline=_deadline_at(v.arg)))
        if isinstance(pm, DriverError):
            if pm.status in MISSED_DEADLINE and v.arg != "unlimited":
                return f"prepare missed the deadline: {pm.status.name}"
            ctx.fail(
                f"prepare with deadline {v.arg} gave {pm}, expected NONE"
                + (" or MISSED_DEADLINE_*" if v.arg != "unlimited" else " (no deadline)"),
                "prepare",
            )
        ctx.prepared.append(pm)
        ctx.check(case.model, ctx.execute(pm, "sync", ctx.request()))
        return f"prepared within deadline {v.arg}; results right"
    _, pm = ctx.shared()
    got = ctx.execute(pm, v.path, ctx.request(), deadline=_deadline_at(v.arg))
    if v.path != "sync" and v.arg == "now" and isinstance(got, ExecutionResult):
        # Beyond VTS (which allows NONE here): a deadline that has passed is passed on every
        # path, so a driver whose sync path refuses it must not run it on this one.
        base = ctx.execute(pm, "sync", ctx.request(), deadline=_deadline_at("now"))
        if isinstance(base, DriverError) and base.status in MISSED_DEADLINE:
            ctx.fail(
                f"the {v.path} path ran an execution whose deadline had passed, which the sync path "
                f"refuses with {base.status.name}: the {v.path} path ignores deadlines"
            )
    if isinstance(got, DriverError) and got.status in MISSED_DEADLINE and v.arg != "unlimited":
        if got.output_shapes:
            ctx.fail(f"{got.status.name} came with output shapes {list(got.output_shapes)} (must be empty)")
        return f"execution missed the deadline: {got.status.name}"
    if isinstance(got, DriverError):
        ctx.fail(
            f"execution with deadline {v.arg} gave {got}, expected NONE"
            + (" or MISSED_DEADLINE_*" if v.arg != "unlimited" else " (no deadline)")
        )
    ctx.check(case.model, got)
    return f"executed within deadline {v.arg}; results right"


def _priority(ctx: _Ctx) -> str:
    v, case = ctx.variant, ctx.case
    ctx.support(case.model)
    pm = ctx.prepare(case.model, priority=Priority[v.arg.upper()])
    ctx.check(case.model, ctx.execute(pm, "sync", ctx.request()))
    return f"prepared with priority {v.arg}; results right"


def _caching(ctx: _Ctx) -> str:
    case = ctx.case
    device = ctx.device
    if not isinstance(device, CompilationCaching):
        ctx.skip("the driver has no compilation caching (CompilationCaching)")
    ctx.support(case.model)
    token = hashlib.sha256(f"nnconform-cache:{ctx.seed}:{case.test_id}".encode()).digest()
    pm = ctx.prepare(case.model, cache_token=token)
    ctx.check(case.model, ctx.execute(pm, "sync", ctx.request()), what="compiled with a cache token")
    again = _call("prepare_from_cache", lambda: device.prepare_from_cache(token))
    if isinstance(again, DriverError):
        ctx.fail(f"prepare_from_cache right after saving under the token gave {again}", "prepare")
    ctx.prepared.append(again)
    ctx.models.append((case.model, again))  # the model saved under the token sizes its outputs in-process
    ctx.check(case.model, ctx.execute(again, "sync", ctx.request()), what="prepared from the cache")
    return "compiled with a cache token and prepared from the cache; results right"


def _infinite_loop(ctx: _Ctx) -> str:
    v = ctx.variant
    _, pm = ctx.shared()
    got = ctx.execute(pm, v.path, ctx.request(), measure_timing=v.timing, loop_timeout=LOOP_TIMEOUT_S)
    if isinstance(got, ExecutionResult):
        ctx.fail(f"a loop that never ends returned outputs with a {LOOP_TIMEOUT_S * 1e3:g} ms loop timeout")
    if got.status not in MISSED_DEADLINE:
        ctx.fail(
            f"a loop past its {LOOP_TIMEOUT_S * 1e3:g} ms timeout gave {got.status.name}, "
            f"expected MISSED_DEADLINE_TRANSIENT or MISSED_DEADLINE_PERSISTENT"
        )
    if got.output_shapes:
        ctx.fail(f"{got.status.name} came with output shapes {list(got.output_shapes)} (must be empty)")
    return f"loop timeout reported as {got.status.name}"


def _raising(what: str, fn: Callable[[], Any]) -> Any:
    """A driver call of a mutation check (rejections): DriverError propagates (it is judged); a host incident
    ends the variant."""
    try:
        return fn()
    except HostIncident as e:
        raise _Stop(e.verdict, f"{e} (in {what})", what, e.details) from None


def _mutation(ctx: _Ctx) -> str:
    cls = ctx.variant.arg
    mutations = list(_mutation_classes()[cls](ctx.case.model))
    if not mutations:
        ctx.skip(f"no {cls} mutation applies to this model", "supported")
    made = len(mutations)
    if ctx.mutation_cap is not None and made > ctx.mutation_cap:
        rng = np.random.default_rng(
            int.from_bytes(hashlib.sha256(f"{ctx.seed}:{cls}:{ctx.case.test_id}".encode()).digest()[:8], "big")
        )
        mutations = [mutations[i] for i in sorted(rng.choice(made, ctx.mutation_cap, replace=False))]
    accepted = [f"{m.name}: {why}" for m, why in zip(mutations, rejections(ctx.device, mutations, _raising)) if why]
    if accepted:
        more = f"; ... {len(accepted) - 3} more" if len(accepted) > 3 else ""
        ctx.fail(
            f"{len(accepted)} of {len(mutations)} {cls} mutations not rejected with INVALID_ARGUMENT: "
            + "; ".join(accepted[:3])
            + more,
            "supported",
        )
    sampled = f" (a seeded sample of the {made} this model gives)" if len(mutations) < made else ""
    return f"{len(mutations)} {cls} mutations rejected{sampled}"


_REQUEST_MUTATIONS: list[Any] = [None, []]  # [the vector case, its request mutations]


def _request_mutation(ctx: _Ctx) -> str:
    v, case = ctx.variant, ctx.case
    from nnconform.vts.mutations import request_mutation_class, request_mutations

    _, pm = ctx.shared()
    ctx.need_path(pm, v.path)
    # A vector's request mutations, made once for all its request_mutation cells (a class on a
    # path each: about eighty cells a vector), kept with the vector they were made from.
    if _REQUEST_MUTATIONS[0] is not case:
        _REQUEST_MUTATIONS[:] = [case, list(request_mutations(case.model, ctx.request()))]
    mutations = [m for m in _REQUEST_MUTATIONS[1] if request_mutation_class(m.name) == v.arg]
    if not mutations:
        ctx.skip(f"no {v.arg} request mutation applies to this model", "execute")
    n_outputs = len(case.model.main.output_indexes)
    bad = []
    for m in mutations:
        # fenced execution has no OUTPUT_INSUFFICIENT_SIZE: every bad request is INVALID_ARGUMENT
        allowed = (ErrorStatus.INVALID_ARGUMENT,) if v.path == "fenced" else m.allowed
        output = int(m.name.split("/")[1]) if v.arg.startswith("output_") else None
        why = request_verdict(ctx.execute(pm, v.path, m.request), allowed, n_outputs, output)
        if why:
            bad.append(f"{m.name}: {why} [{m.rule}]")
    if bad:
        more = f"; ... {len(bad) - 3} more" if len(bad) > 3 else ""
        ctx.fail(
            f"{len(bad)} of {len(mutations)} {v.arg} requests not rejected as required on the {v.path} path: "
            + "; ".join(bad[:3])
            + more
        )
    return f"{len(mutations)} {v.arg} requests rejected on the {v.path} path"


_RUNNERS: dict[str, Callable[[_Ctx], str]] = {
    "general": _general,
    "dynamic_shape": _dynamic_shape,
    "fenced": _fenced,
    "memory_domain": _memory_domain,
    "quant_coupling": _quant_coupling,
    "deadline": _deadline,
    "priority": _priority,
    "caching": _caching,
    "infinite_loop": _infinite_loop,
    "mutation": _mutation,
    "request_mutation": _request_mutation,
}
