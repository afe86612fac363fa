"""VTS suite: driver API semantics and must-reject validation (HAL 1.3 VTS, re-made for Python).

Test ids (one result row each; aggregated rows name the class, the message names the cases):

    vts/model_mutation/<class>     the 22 ValidateModel classes (nnconform.vts.mutations) applied to a
                                   representative model of every operation combination of the
                                   generated suite: supported_operations (except for preference/
                                   priority) and prepare must both give INVALID_ARGUMENT
    vts/request/<class>            ValidateRequest: removed/added argument, wrong rank, wrong known
                                   dimension, zero input dimension, buffers too small; the answer is
                                   INVALID_ARGUMENT with no output shapes (OUTPUT_INSUFFICIENT_SIZE
                                   for a too-small output), on every execution path the driver has
    vts/api/capabilities           every performance value > 0, operand types sorted, no SUBGRAPH,
                                   the same answer twice
    vts/api/supported_operations   one bool per main-subgraph operation, the same answer twice
    vts/api/prepare_when_supported all operations supported => prepare succeeds
    vts/api/timing                 no timing unless asked; asked: None or on-device <= in-driver
    vts/api/output_shapes          one entry per output, dims = the output's, sufficient
    vts/api/dynamic_output_shape   outputs declared with unknown (0) dimensions are resolved and
                                   reported (control flow excluded, as in VTS)
    vts/api/output_insufficient_size  output 0 one element too small on such a model:
                                   OUTPUT_INSUFFICIENT_SIZE, is_sufficient false, real dims reported
    vts/api/deadline_passed/<call> prepare/execute with a deadline already passed: NONE (and a right
                                   answer) or MISSED_DEADLINE_*
    vts/api/priority, vts/api/preference   every valid value is accepted
    vts/concurrency/interleave     m1/m2 prepared, r1..r4 alternate between them, both released
    vts/concurrency/threads        several threads execute one prepared model at once on different
                                   inputs; each gets its own answer
    vts/concurrency/release        release frees the prepared model; another one is unaffected
    vts/quant_coupling/<example>   a single-operation quant8-asymm example re-run as quant8-signed
                                   (zero points, data and expected values shifted by 128)
    vts/consistency/repeat|paths|threads   bitwise-identical outputs across repeated runs, across
                                   the execution paths offered, across concurrent threads
    vts/optional/async|caching|fenced|burst   optional interfaces, when the driver declares them
                                   (fenced: wait fences honoured, execution info and both timings,
                                   deadline, None fence / unspecified / insufficient outputs give
                                   INVALID_ARGUMENT; burst: correct results, bad request rejected)
    vts/optional/memory_domain/<case>  MemoryDomains (VTS MemoryDomainTests): output_role (an
                                   execution writes a device buffer, copy_to reads it, on every
                                   path), input_role (a buffer filled by copy_from, or by an earlier
                                   output, feeds an input), bad_allocate (invalid roles: no buffer,
                                   INVALID_ARGUMENT or GENERAL_FAILURE), uninitialised (copy_to and
                                   an input read before any write give GENERAL_FAILURE), misuse
                                   (unknown token, a buffer outside its roles, one buffer as input
                                   and output: INVALID_ARGUMENT)

Every driver call that could hang runs under ``watchdog.call_with_timeout``; a hang is a FAIL
whose message starts with HANG.

The optional interfaces are the ABCs of ``nnconform.driver`` (AsyncExecution, FencedExecution,
BurstExecution, CompilationCaching, MemoryDomains); a driver without one gets a SKIP naming it.
"""

from __future__ import annotations

import dataclasses
import gc
import threading
import time
import weakref
from typing import Any, Callable, Sequence

import numpy as np
import pytest

from nnconform.driver import (
    AsyncExecution,
    BufferDesc,
    BufferRole,
    BurstExecution,
    CompilationCaching,
    DriverError,
    ErrorStatus,
    ExecutionPreference,
    ExecutionResult,
    FencedExecution,
    FencedExecutionHandle,
    FencedExecutionInfo,
    MemoryDomains,
    PerformanceInfo,
    Priority,
    Timing,
)
from nnconform.ir import Model, ModelBuilder, Request, RequestArgument
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.isolation.watchdog import HangError, call_with_timeout
from nnconform.suites.examples import Example, all_examples
from nnconform.verdict.runner import FAIL, Case, CaseOutcome, run_case
from nnconform.vts.checks import MISSED_DEADLINE, rejections, to_signed
from nnconform.vts.checks import describe as _describe
from nnconform.vts.checks import dynamic_variant as _dynamic_variant
from nnconform.vts.checks import fully_specified as _fully_specified
from nnconform.vts.checks import request_verdict as _request_verdict
from nnconform.vts.checks import result_problem as _result_problem
from nnconform.vts.checks import shapes_problem as _shapes_problem
from nnconform.vts.checks import timing_problem as _timing_problem
from nnconform.vts.checks import verdict as _verdict
from nnconform.vts.mutations import MODEL_MUTATIONS, REQUEST_CLASSES, request_mutation_class, request_mutations

SUITE = "vts"
BOUND_S = 20.0  # no single driver call of this suite should come near this
_CONTROL_FLOW = (Op.IF, Op.WHILE)
SHOWN = 4  # how many failing cases a message names


# ---------------------------------------------------------------------------------------
# Models used by the suite
# ---------------------------------------------------------------------------------------

VALID: list[Example] = [e for e in all_examples() if not e.expect_failure]


def _representatives() -> list[Example]:
    """The first valid example of every distinct set of operations (keeps every operation and
    every multi-operation graph shape while keeping the run short)."""
    seen: set[tuple[str, ...]] = set()
    out = []
    for e in VALID:
        key = tuple(e.operations)
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out


REPRESENTATIVE = _representatives()
QUANT_COUPLING_EXEMPT = {"HASHTABLE_LOOKUP", "LSH_PROJECTION", "PAD_V2", "CAST", "QUANTIZED_16BIT_LSTM"}


def _bounded(fn: Callable[[], Any], what: str, bound: float = BOUND_S) -> Any:
    return call_with_timeout(fn, bound, what)


def _shown(items: Sequence[str]) -> str:
    more = f"; ... {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return "; ".join(items[:SHOWN]) + more


def _fail(
    nn_session, nn_record, tid: str, message: str, *, model: Model | None = None, inputs=None, expected=None, **extra
) -> None:
    """Record and raise a failure; with a (valid) model, dump a spec that shows it."""
    nn_record["message"] = message
    nn_record["extra"].update(extra)
    if model is not None:
        outcome = CaseOutcome(FAIL, message, "execute")
        try:
            nn_record["spec_path"], nn_record["replay"] = nn_session.dump_failure(
                tid, model, inputs or [], expected or [np.zeros(1, np.float32)], outcome, extra_meta=extra
            )
        except Exception as e:  # the verdict matters more than the dump; say why it is missing
            nn_record["message"] += f" (spec dump failed: {type(e).__name__}: {e})"
    pytest.fail(nn_record["message"], pytrace=False)


def _skip(nn_record, message: str) -> None:
    nn_record["message"] = message
    pytest.skip(message)


def _begin(nn_record, tid: str, examples: Sequence[Example] = ()) -> None:
    ops = sorted({o for e in examples for o in e.operations})
    types = sorted({t for e in examples for t in e.data_types})
    nn_record.update(
        suite=SUITE,
        test_id=tid,
        operations=ops if len(examples) == 1 else [],
        data_types=types if len(examples) == 1 else [],
    )


class _Prepared:
    """Representative models the driver fully supports, prepared once for the module."""

    def __init__(self, device):
        self.device = device
        self.ready: list[tuple[Example, Any]] = []
        self.problems: list[str] = []
        for e in REPRESENTATIVE:
            try:
                supported = _bounded(lambda: device.supported_operations(e.model), "supported_operations")
                if not all(supported):
                    continue
                pm = _bounded(lambda: device.prepare(e.model), "prepare")
            except Exception as exc:  # judged by vts/api tests; here the model is just left out
                self.problems.append(f"{e.name}: {_describe(exc)}")
                continue
            self.ready.append((e, pm))

    def release(self) -> None:
        for _, pm in self.ready:
            try:
                _bounded(pm.release, "release", 5.0)
            except Exception:  # releasing is best effort at teardown; tests judge release itself
                continue


@pytest.fixture(scope="module")
def prepared(nn_device):
    p = _Prepared(nn_device)
    yield p
    p.release()


def _paths(pm, model: Model | None = None) -> dict[str, Callable[..., ExecutionResult]]:
    """Every execution path the prepared model offers, each as a blocking call.  Given the
    model, fenced execution is left out when an output's dimensions are unspecified: fenced
    execution must reject those (vts/optional/fenced checks that), as VTS runs it only on
    fully specified outputs when it expects a result."""
    paths: dict[str, Callable[..., ExecutionResult]] = {"sync": lambda r, **kw: pm.execute(r, **kw)}
    if isinstance(pm, AsyncExecution):
        paths["async"] = lambda r, **kw: pm.execute_async(r, **kw).result(timeout=BOUND_S)
    if isinstance(pm, FencedExecution) and (model is None or _fully_specified(model)):
        paths["fenced"] = lambda r, **kw: pm.execute_fenced(r, (), **kw).wait(BOUND_S)
    if isinstance(pm, BurstExecution):

        def via_burst(r, **kw):
            burst = pm.configure_burst()
            try:
                return burst.execute(r, **kw)
            finally:
                burst.release()

        paths["burst"] = via_burst
    return paths


def _run(fn: Callable[[], ExecutionResult], what: str) -> ExecutionResult | BaseException:
    try:
        return _bounded(fn, what)
    except Exception as e:  # the driver's answer, judged by the caller
        return e


def _same_bits(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> bool:
    return len(a) == len(b) and all(
        x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes() for x, y in zip(a, b)
    )


def _request(e: Example) -> Request:
    return Request.from_arrays(e.model, list(e.inputs))


# ---------------------------------------------------------------------------------------
# Model mutations
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", list(MODEL_MUTATIONS))
def test_model_mutation(cls, nn_device, nn_session, nn_record):
    tid = f"{SUITE}/model_mutation/{cls}"
    _begin(nn_record, tid)
    accepted: list[str] = []
    total = models = 0
    for e in REPRESENTATIVE:
        mutations = list(MODEL_MUTATIONS[cls](e.model))
        models += bool(mutations)
        total += len(mutations)
        verdicts = rejections(nn_device, mutations, lambda what, fn: _bounded(fn, what))
        accepted += [f"{e.name} {m.name}: {why}" for m, why in zip(mutations, verdicts) if why]
    nn_record["extra"].update(mutations=total, models=models, accepted=len(accepted))
    if total == 0:
        _fail(nn_session, nn_record, tid, f"harness: no model of the generated suite yields a {cls} mutation")
    if accepted:
        _fail(
            nn_session,
            nn_record,
            tid,
            f"{len(accepted)} of {total} {cls} mutations were not rejected with INVALID_ARGUMENT: {_shown(accepted)}",
            not_rejected=accepted[:50],
        )
    nn_record["message"] = f"{total} mutations of {models} models rejected"


# ---------------------------------------------------------------------------------------
# Request mutations
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", REQUEST_CLASSES)
def test_request(cls, prepared, nn_session, nn_record):
    tid = f"{SUITE}/request/{cls}"
    _begin(nn_record, tid)
    if not prepared.ready:
        _skip(nn_record, "the driver fully supports none of the representative models")
    bad: list[str] = []
    total = 0
    for e, pm in prepared.ready:
        for rm in request_mutations(e.model, _request(e)):
            if request_mutation_class(rm.name) != cls:
                continue
            output = int(rm.name.split("/")[1]) if cls.startswith("output_") else None
            for path, run in _paths(pm).items():
                total += 1
                got = _run(lambda: run(rm.request), f"{path} execute")
                why = _request_verdict(got, rm.allowed, len(e.model.main.output_indexes), output)
                if why:
                    bad.append(f"{e.name} {rm.name} ({path}): {why} [{rm.rule}]")
    nn_record["extra"].update(cases=total, failed=len(bad))
    if total == 0:
        _skip(nn_record, f"no prepared model yields a {cls} request")
    if bad:
        _fail(
            nn_session,
            nn_record,
            tid,
            f"{len(bad)} of {total} {cls} requests not rejected as required: {_shown(bad)}",
            failures=bad[:50],
        )
    nn_record["message"] = f"{total} requests rejected"


# ---------------------------------------------------------------------------------------
# API semantics
# ---------------------------------------------------------------------------------------


def test_capabilities(nn_device, nn_session, nn_record):
    tid = f"{SUITE}/api/capabilities"
    _begin(nn_record, tid)
    try:
        first = _bounded(nn_device.capabilities, "capabilities")
        second = _bounded(nn_device.capabilities, "capabilities")
    except Exception as e:
        _fail(nn_session, nn_record, tid, f"capabilities() failed: {_describe(e)}")
    problems = []
    if first != second:
        problems.append("two calls gave different capabilities")
    named = [
        ("relaxed_float32_to_float16_scalar", first.relaxed_float32_to_float16_scalar),
        ("relaxed_float32_to_float16_tensor", first.relaxed_float32_to_float16_tensor),
        ("if_performance", first.if_performance),
        ("while_performance", first.while_performance),
    ]
    named += [(f"operand_performance[{T(t).name}]", p) for t, p in first.operand_performance]
    for name, p in named:
        if not isinstance(p, PerformanceInfo) or not (p.exec_time > 0 and p.power_usage > 0):
            problems.append(f"{name} = {p!r} (exec_time and power_usage must be > 0)")
    types = [int(t) for t, _ in first.operand_performance]
    if types != sorted(types) or len(set(types)) != len(types):
        problems.append(f"operand_performance is not sorted by type without repeats: {types}")
    if int(T.SUBGRAPH) in types:
        problems.append("operand_performance lists SUBGRAPH (if_performance/while_performance cover it)")
    if problems:
        _fail(nn_session, nn_record, tid, "; ".join(problems))
    nn_record["message"] = f"{len(types)} operand types, all positive and stable"


def test_supported_operations(nn_device, nn_session, nn_record):
    tid = f"{SUITE}/api/supported_operations"
    _begin(nn_record, tid)
    bad = []
    for e in REPRESENTATIVE:
        n = len(e.model.main.operations)
        try:
            a = _bounded(lambda: nn_device.supported_operations(e.model), "supported_operations")
            b = _bounded(lambda: nn_device.supported_operations(e.model), "supported_operations")
        except Exception as exc:
            bad.append(f"{e.name}: {_describe(exc)} on a valid model")
            continue
        if not isinstance(a, (list, tuple)) or len(a) != n or not all(isinstance(s, (bool, np.bool_)) for s in a):
            bad.append(f"{e.name}: returned {a!r:.60}, expected {n} bools (one per main-subgraph operation)")
        elif list(a) != list(b):
            bad.append(f"{e.name}: two calls disagree ({list(a)} vs {list(b)})")
    if bad:
        _fail(nn_session, nn_record, tid, f"{len(bad)} of {len(REPRESENTATIVE)} models: {_shown(bad)}")
    nn_record["message"] = f"{len(REPRESENTATIVE)} models answered"


def test_prepare_when_supported(prepared, nn_session, nn_record):
    tid = f"{SUITE}/api/prepare_when_supported"
    _begin(nn_record, tid)
    if prepared.problems:
        _fail(
            nn_session,
            nn_record,
            tid,
            f"prepare failed on {len(prepared.problems)} fully supported valid models: {_shown(prepared.problems)}",
        )
    if not prepared.ready:
        _skip(nn_record, "the driver fully supports none of the representative models")
    nn_record["message"] = f"{len(prepared.ready)} fully supported models prepared"


def test_timing(prepared, nn_session, nn_record):
    tid = f"{SUITE}/api/timing"
    _begin(nn_record, tid)
    if not prepared.ready:
        _skip(nn_record, "the driver fully supports none of the representative models")
    bad, runs = [], 0
    for e, pm in prepared.ready:
        for path, run in _paths(pm, e.model).items():
            for asked in (False, True):
                got = _run(lambda: run(_request(e), measure_timing=asked), f"{path} execute")
                runs += 1
                why = _result_problem(e.model, got) or _timing_problem(got.timing, asked)
                if why:
                    bad.append(f"{e.name} ({path}, measure_timing={asked}): {why}")
    if bad:
        _fail(nn_session, nn_record, tid, f"{len(bad)} of {runs} executions: {_shown(bad)}", failures=bad[:50])
    nn_record["message"] = f"{runs} executions with consistent timing"


def test_output_shapes(prepared, nn_session, nn_record):
    tid = f"{SUITE}/api/output_shapes"
    _begin(nn_record, tid)
    if not prepared.ready:
        _skip(nn_record, "the driver fully supports none of the representative models")
    bad = []
    for e, pm in prepared.ready:
        got = _run(lambda: pm.execute(_request(e)), "execute")
        why = _result_problem(e.model, got)
        if why is None:
            why = _shapes_problem(e.model, got)
        if why:
            bad.append(f"{e.name}: {why}")
    if bad:
        _fail(nn_session, nn_record, tid, f"{len(bad)} of {len(prepared.ready)} models: {_shown(bad)}")
    nn_record["message"] = f"{len(prepared.ready)} models report their output shapes"


def _dynamic_cases(nn_device):
    """(example, dynamic model, prepared) for every representative without control flow whose
    dynamic variant the driver supports and prepares; the caller releases."""
    for e in REPRESENTATIVE:
        if any(Op(o.type) in _CONTROL_FLOW for o in e.model.all_operations()):
            continue
        dyn = _dynamic_variant(e.model)
        if dyn is None:
            continue
        try:
            if not all(_bounded(lambda: nn_device.supported_operations(dyn), "supported_operations")):
                continue
            pm = _bounded(lambda: nn_device.prepare(dyn), "prepare")
        except Exception:  # VTS: a driver may refuse unspecified outputs at preparation
            continue
        yield e, dyn, pm


def test_dynamic_output_shape(nn_device, nn_session, nn_record):
    tid = f"{SUITE}/api/dynamic_output_shape"
    _begin(nn_record, tid)
    bad, ran, skipped = [], 0, 0
    for e, dyn, pm in _dynamic_cases(nn_device):
        try:
            got = _run(lambda: pm.execute(Request.from_arrays(dyn, list(e.inputs))), "execute")
        finally:
            _run(pm.release, "release")
        if isinstance(got, DriverError) and got.status == ErrorStatus.GENERAL_FAILURE:
            skipped += 1  # VTS: GENERAL_FAILURE on unspecified outputs means skip
            continue
        ran += 1
        why = _result_problem(dyn, got, e.outputs) or _shapes_problem(dyn, got, required=True)
        if why:
            bad.append(f"{e.name}: {why}")
    nn_record["extra"].update(ran=ran, skipped=skipped)
    if bad:
        _fail(
            nn_session,
            nn_record,
            tid,
            f"{len(bad)} of {ran} models with unknown output dimensions: {_shown(bad)}",
            failures=bad[:50],
        )
    if not ran:
        _skip(nn_record, "the driver runs no model with unknown output dimensions")
    nn_record["message"] = f"{ran} models resolved their unknown output dimensions"


def test_output_insufficient_size(nn_device, nn_session, nn_record):
    tid = f"{SUITE}/api/output_insufficient_size"
    _begin(nn_record, tid)
    bad, ran = [], 0
    for e, dyn, pm in _dynamic_cases(nn_device):
        out0 = np.asarray(e.outputs[0])
        if out0.size == 0:
            _run(pm.release, "release")
            continue
        req = Request.from_arrays(dyn, list(e.inputs))
        small = RequestArgument(capacity=out0.nbytes - out0.itemsize)
        req = dataclasses.replace(req, outputs=(small, *req.outputs[1:]))
        try:
            got = _run(lambda: pm.execute(req), "execute")
        finally:
            _run(pm.release, "release")
        if isinstance(got, DriverError) and got.status == ErrorStatus.GENERAL_FAILURE:
            continue
        ran += 1
        n = len(dyn.main.output_indexes)
        if not isinstance(got, DriverError) or got.status != ErrorStatus.OUTPUT_INSUFFICIENT_SIZE:
            what = "succeeded" if isinstance(got, ExecutionResult) else _describe(got)
            bad.append(f"{e.name}: {what}, expected OUTPUT_INSUFFICIENT_SIZE")
        elif len(got.output_shapes) != n:
            bad.append(f"{e.name}: {len(got.output_shapes)} output shapes for {n} outputs")
        elif got.output_shapes[0].is_sufficient:
            bad.append(f"{e.name}: output 0 reported sufficient")
        elif tuple(got.output_shapes[0].dimensions) != out0.shape:
            bad.append(
                f"{e.name}: output 0 reported as {list(got.output_shapes[0].dimensions)}, "
                f"its real shape is {list(out0.shape)}"
            )
    nn_record["extra"]["ran"] = ran
    if bad:
        _fail(nn_session, nn_record, tid, f"{len(bad)} of {ran} models: {_shown(bad)}", failures=bad[:50])
    if not ran:
        _skip(nn_record, "the driver runs no model with unknown output dimensions")
    nn_record["message"] = f"{ran} models reported the too-small output 0"


def _small_supported(prepared, count: int = 6):
    """A few fully supported representatives, for the tests that need only some."""
    return prepared.ready[:: max(1, len(prepared.ready) // count)][:count]


@pytest.mark.parametrize("call", ["prepare", "execute"])
def test_deadline_passed(call, nn_device, prepared, nn_session, nn_record):
    tid = f"{SUITE}/api/deadline_passed/{call}"
    _begin(nn_record, tid)
    cases = _small_supported(prepared)
    if not cases:
        _skip(nn_record, "the driver fully supports none of the representative models")
    bad, missed = [], 0
    for e, pm in cases:
        past = time.monotonic() - 1.0
        if call == "prepare":
            got = _run(lambda: nn_device.prepare(e.model, deadline=past), "prepare")
            if isinstance(got, DriverError) and got.status in MISSED_DEADLINE:
                missed += 1
                continue
            if isinstance(got, BaseException):
                bad.append(f"{e.name}: prepare gave {_describe(got)}, expected NONE or MISSED_DEADLINE_*")
                continue
            result = _run(lambda: got.execute(_request(e)), "execute")
            _run(got.release, "release")
        else:
            result = _run(lambda: pm.execute(_request(e), deadline=past), "execute")
            if isinstance(result, DriverError) and result.status in MISSED_DEADLINE:
                missed += 1
                if result.output_shapes:
                    bad.append(f"{e.name}: {result.status.name} came with output shapes")
                continue
        why = _result_problem(e.model, result, e.outputs)
        if why:
            bad.append(f"{e.name}: {why} (expected a correct result or MISSED_DEADLINE_*)")
    if bad:
        _fail(nn_session, nn_record, tid, _shown(bad))
    nn_record["message"] = f"{missed} of {len(cases)} missed the deadline, the others were correct"


@pytest.mark.parametrize("what", ["priority", "preference"])
def test_prepare_arguments(what, nn_device, prepared, nn_session, nn_record):
    tid = f"{SUITE}/api/{what}"
    _begin(nn_record, tid)
    cases = _small_supported(prepared, 3)
    if not cases:
        _skip(nn_record, "the driver fully supports none of the representative models")
    values = list(Priority) if what == "priority" else list(ExecutionPreference)
    bad = []
    for e, _ in cases:
        for v in values:
            got = _run(lambda: nn_device.prepare(e.model, **{what: v}), "prepare")
            if isinstance(got, BaseException):
                bad.append(f"{e.name} {what} {v.name}: prepare gave {_describe(got)}")
                continue
            result = _run(lambda: got.execute(_request(e)), "execute")
            _run(got.release, "release")
            why = _result_problem(e.model, result, e.outputs)
            if why:
                bad.append(f"{e.name} {what} {v.name}: {why}")
    if bad:
        _fail(nn_session, nn_record, tid, _shown(bad))
    nn_record["message"] = f"every {what} accepted on {len(cases)} models"


# ---------------------------------------------------------------------------------------
# Concurrency and lifetime
# ---------------------------------------------------------------------------------------


def test_interleave(nn_device, prepared, nn_session, nn_record):
    tid = f"{SUITE}/concurrency/interleave"
    _begin(nn_record, tid)
    pool = [e for e, _ in prepared.ready]
    if len(pool) < 2:
        _skip(nn_record, "fewer than two fully supported models")
    e1, e2 = pool[0], pool[len(pool) // 2]
    try:
        m1 = _bounded(lambda: nn_device.prepare(e1.model), "prepare m1")
        m2 = _bounded(lambda: nn_device.prepare(e2.model), "prepare m2")
    except Exception as exc:
        _fail(nn_session, nn_record, tid, f"prepare failed: {_describe(exc)}")
    bad = []
    for step, (e, pm) in enumerate(((e1, m1), (e2, m2), (e1, m1), (e2, m2)), 1):
        why = _result_problem(e.model, _run(lambda: pm.execute(_request(e)), f"r{step}"), e.outputs)
        if why:
            bad.append(f"r{step} on {e.name}: {why}")
    for name, pm in (("m1", m1), ("m2", m2)):
        got = _run(pm.release, f"release {name}")
        if isinstance(got, BaseException):
            bad.append(f"release {name}: {_describe(got)}")
    if bad:
        _fail(nn_session, nn_record, tid, _shown(bad), model=e1.model, inputs=e1.inputs, expected=e1.outputs)
    nn_record["message"] = f"m1={e1.name}, m2={e2.name}: r1..r4 correct, both released"


THREADS, ROUNDS = 8, 3


def _thread_model() -> Model:
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [64])
    y = b.input(T.TENSOR_FLOAT32, [64])
    b.operation(Op.ADD, [x, y, b.i32(0)], [b.output(T.TENSOR_FLOAT32, [64])])
    return b.build()


def test_threads(nn_device, nn_session, nn_record):
    tid = f"{SUITE}/concurrency/threads"
    model = _thread_model()
    nn_record.update(suite=SUITE, test_id=tid, operations=["ADD"], data_types=["fp32"])
    rng = np.random.default_rng(nn_session.seed)
    inputs = [[rng.standard_normal(64).astype(np.float32), np.full(64, float(i), np.float32)] for i in range(THREADS)]
    try:
        if not all(_bounded(lambda: nn_device.supported_operations(model), "supported_operations")):
            _skip(nn_record, "the driver does not support fp32 ADD")
        pm = _bounded(lambda: nn_device.prepare(model), "prepare")
    except DriverError as e:
        _fail(nn_session, nn_record, tid, f"could not prepare fp32 ADD: {_describe(e)}", model=model)
    expected = [x + y for x, y in inputs]  # exact in fp32: each sum is one rounding
    barrier = threading.Barrier(THREADS)
    results: list[list] = [[] for _ in range(THREADS)]

    def worker(i: int) -> None:
        req = Request.from_arrays(model, inputs[i])
        barrier.wait(timeout=BOUND_S)
        for _ in range(ROUNDS):
            results[i].append(_run(lambda: pm.execute(req), f"execute in thread {i}"))

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(BOUND_S * ROUNDS)
    _run(pm.release, "release")
    bad = []
    for i in range(THREADS):
        if len(results[i]) != ROUNDS:
            bad.append(f"thread {i}: HANG, {len(results[i])} of {ROUNDS} executions returned")
            continue
        for r, got in enumerate(results[i]):
            why = _result_problem(model, got)
            if why is None and not np.array_equal(got.outputs[0], expected[i]):
                other = [j for j in range(THREADS) if j != i and np.array_equal(got.outputs[0], expected[j])]
                why = ("got thread " + str(other[0]) + "'s answer") if other else "wrong answer"
            if why:
                bad.append(f"thread {i} round {r}: {why}")
    if bad:
        _fail(
            nn_session,
            nn_record,
            tid,
            f"{len(bad)} of {THREADS * ROUNDS} concurrent executions of one prepared model went wrong: {_shown(bad)}",
            model=model,
            inputs=inputs[0],
            expected=[expected[0]],
        )
    nn_record["message"] = f"{THREADS} threads x {ROUNDS} executions, each its own answer"


def test_release(nn_device, prepared, nn_session, nn_record):
    tid = f"{SUITE}/concurrency/release"
    _begin(nn_record, tid)
    if not prepared.ready:
        _skip(nn_record, "the driver fully supports none of the representative models")
    e = prepared.ready[0][0]
    try:
        keep = _bounded(lambda: nn_device.prepare(e.model), "prepare")
        # held only by this list, so clearing it drops the suite's last reference
        gone = [_bounded(lambda: nn_device.prepare(e.model), "prepare")]
    except Exception as exc:
        _fail(nn_session, nn_record, tid, f"prepare failed: {_describe(exc)}")
    bad = []
    why = _result_problem(e.model, _run(lambda: gone[0].execute(_request(e)), "execute"), e.outputs)
    if why:
        bad.append(f"before release: {why}")
    got = _run(gone[0].release, "release")
    if isinstance(got, BaseException):
        bad.append(f"release: {_describe(got)}")
    ref = weakref.ref(gone[0])
    gone.clear()
    gc.collect()
    if ref() is not None:
        holders = [type(h).__name__ for h in gc.get_referrers(ref())][:5]
        bad.append(f"the released prepared model is still referenced (by {', '.join(holders)}): not freed")
    why = _result_problem(e.model, _run(lambda: keep.execute(_request(e)), "execute"), e.outputs)
    if why:
        bad.append(f"another prepared model of the same model after the release: {why}")
    _run(keep.release, "release")
    if bad:
        _fail(nn_session, nn_record, tid, _shown(bad), model=e.model, inputs=e.inputs, expected=e.outputs)
    nn_record["message"] = f"{e.name}: released model freed, the other still correct"


# ---------------------------------------------------------------------------------------
# Quantisation coupling
# ---------------------------------------------------------------------------------------


def _to_signed(e: Example) -> tuple[Model, list, list]:
    return to_signed(e.model, e.inputs, e.outputs)


COUPLED = [
    e
    for e in VALID
    if len(e.model.main.operations) == 1
    and not e.model.referenced
    and e.operations[0] not in QUANT_COUPLING_EXEMPT
    and any(o.type == T.TENSOR_QUANT8_ASYMM for o in e.model.main.operands)
]


@pytest.mark.parametrize("example", COUPLED, ids=[e.name for e in COUPLED])
def test_quant_coupling(example, nn_device, nn_session, nn_record):
    tid = f"{SUITE}/quant_coupling/{example.name}"
    model, ins, outs = _to_signed(example)
    nn_record.update(suite=SUITE, test_id=tid, operations=example.operations, data_types=model.data_types())
    try:
        outcome = _bounded(lambda: run_case(nn_device, model, ins, outs), "quant8-signed case")
    except HangError as e:
        outcome = CaseOutcome(FAIL, str(e), "execute")
    if outcome.outcome == "FAIL":
        outcome.message = f"quant8-signed twin of {example.name} disagrees: {outcome.message}"
    nn_session.conclude(nn_record, outcome, Case(tid, model, ins, outs))
    nn_record["message"] = nn_record["message"] or "quant8-signed twin agrees"


# ---------------------------------------------------------------------------------------
# Self-consistency (beyond VTS)
# ---------------------------------------------------------------------------------------


def test_consistency_repeat(prepared, nn_session, nn_record):
    tid = f"{SUITE}/consistency/repeat"
    _begin(nn_record, tid)
    if not prepared.ready:
        _skip(nn_record, "the driver fully supports none of the representative models")
    bad = []
    for e, pm in prepared.ready:
        runs = [_run(lambda: pm.execute(_request(e)), "execute") for _ in range(3)]
        if any(_result_problem(e.model, r) for r in runs):
            bad.append(f"{e.name}: {next(_result_problem(e.model, r) for r in runs if _result_problem(e.model, r))}")
        elif not all(_same_bits(runs[0].outputs, r.outputs) for r in runs[1:]):
            bad.append(f"{e.name}: three runs of one prepared model are not bitwise identical")
    if bad:
        _fail(nn_session, nn_record, tid, _shown(bad))
    nn_record["message"] = f"{len(prepared.ready)} models bitwise stable over 3 runs"


def test_consistency_paths(prepared, nn_session, nn_record):
    tid = f"{SUITE}/consistency/paths"
    _begin(nn_record, tid)
    if not prepared.ready:
        _skip(nn_record, "the driver fully supports none of the representative models")
    names = list(_paths(prepared.ready[0][1]))
    if len(names) < 2:
        _skip(nn_record, "the driver offers only synchronous execution")
    bad = []
    for e, pm in prepared.ready:
        got = {path: _run(lambda: run(_request(e)), f"{path} execute") for path, run in _paths(pm, e.model).items()}
        base = got["sync"]
        for path, r in got.items():
            why = _result_problem(e.model, r)
            if why:
                bad.append(f"{e.name} ({path}): {why}")
            elif path != "sync" and not isinstance(base, BaseException) and not _same_bits(base.outputs, r.outputs):
                bad.append(f"{e.name}: {path} and sync outputs are not bitwise identical")
    if bad:
        _fail(nn_session, nn_record, tid, _shown(bad))
    nn_record["message"] = f"{'/'.join(names)} agree bitwise on {len(prepared.ready)} models"


def test_consistency_threads(prepared, nn_session, nn_record):
    tid = f"{SUITE}/consistency/threads"
    _begin(nn_record, tid)
    if not prepared.ready:
        _skip(nn_record, "the driver fully supports none of the representative models")
    bad = []
    for e, pm in prepared.ready:
        base = _run(lambda: pm.execute(_request(e)), "execute")
        if _result_problem(e.model, base):
            bad.append(f"{e.name}: {_result_problem(e.model, base)}")
            continue
        box: list = [None] * 4
        barrier = threading.Barrier(4)

        def worker(i):
            barrier.wait(timeout=BOUND_S)
            box[i] = _run(lambda: pm.execute(_request(e)), f"execute in thread {i}")

        threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(BOUND_S)
        for i, r in enumerate(box):
            why = "HANG" if r is None else _result_problem(e.model, r)
            if why is None and not _same_bits(base.outputs, r.outputs):
                why = "not bitwise identical to the single-threaded run"
            if why:
                bad.append(f"{e.name} thread {i}: {why}")
    if bad:
        _fail(nn_session, nn_record, tid, _shown(bad))
    nn_record["message"] = f"{len(prepared.ready)} models bitwise identical across 4 threads"


# ---------------------------------------------------------------------------------------
# Optional interfaces
# ---------------------------------------------------------------------------------------


def test_optional_async(prepared, nn_session, nn_record):
    tid = f"{SUITE}/optional/async"
    _begin(nn_record, tid)
    cases = [(e, pm) for e, pm in prepared.ready if isinstance(pm, AsyncExecution)]
    if not cases:
        _skip(nn_record, "the driver has no asynchronous execution (AsyncExecution)")
    bad = []
    for e, pm in cases:
        futures = [pm.execute_async(_request(e)) for _ in range(3)]  # several in flight at once
        for f in futures:
            got = _run(lambda: f.result(timeout=BOUND_S), "execute_async")
            why = _result_problem(e.model, got, e.outputs)
            if why:
                bad.append(f"{e.name}: {why}")
        req = _request(e)
        broken = dataclasses.replace(req, inputs=req.inputs[:-1]) if req.inputs else None
        if broken is not None:
            got = _run(lambda: pm.execute_async(broken).result(timeout=BOUND_S), "execute_async")
            why = _request_verdict(got, (ErrorStatus.INVALID_ARGUMENT,), len(e.model.main.output_indexes), None)
            if why:
                bad.append(f"{e.name} with an input removed: {why}")
    if bad:
        _fail(nn_session, nn_record, tid, _shown(bad))
    nn_record["message"] = f"{len(cases)} models correct asynchronously; invalid requests rejected"


def test_optional_caching(nn_device, prepared, nn_session, nn_record):
    tid = f"{SUITE}/optional/caching"
    _begin(nn_record, tid)
    if not isinstance(nn_device, CompilationCaching):
        _skip(nn_record, "the driver has no compilation caching (CompilationCaching)")
    cases = _small_supported(prepared)
    if not cases:
        _skip(nn_record, "the driver fully supports none of the representative models")
    bad = []
    for n, (e, _) in enumerate(cases):
        token = bytes([n + 1]) * 32
        first = _run(lambda: nn_device.prepare(e.model, cache_token=token), "prepare with token")
        if isinstance(first, BaseException):
            bad.append(f"{e.name}: prepare with a cache token gave {_describe(first)}")
            continue
        again = _run(lambda: nn_device.prepare_from_cache(token), "prepare_from_cache")
        if isinstance(again, BaseException):
            bad.append(f"{e.name}: prepare_from_cache gave {_describe(again)}")
        else:
            a = _run(lambda: first.execute(_request(e)), "execute")
            b = _run(lambda: again.execute(_request(e)), "execute from cache")
            why = _result_problem(e.model, b, e.outputs)
            if why:
                bad.append(f"{e.name} from cache: {why}")
            elif not isinstance(a, BaseException) and not _same_bits(a.outputs, b.outputs):
                bad.append(f"{e.name}: the cached compilation's outputs differ bitwise from the original")
            _run(again.release, "release")
        _run(first.release, "release")
    unknown = _run(lambda: nn_device.prepare_from_cache(b"\xfe" * 32), "prepare_from_cache")
    if not (isinstance(unknown, DriverError) and unknown.status == ErrorStatus.GENERAL_FAILURE):
        what = "returned a prepared model" if not isinstance(unknown, BaseException) else _describe(unknown)
        bad.append(f"prepare_from_cache with a token never saved: {what}, expected GENERAL_FAILURE")
    if bad:
        _fail(nn_session, nn_record, tid, _shown(bad))
    nn_record["message"] = f"{len(cases)} models saved and prepared from cache; unknown token rejected"


def _fenced(pm, request: Request, fences=(), **kw) -> ExecutionResult:
    """Launch a fenced execution and wait for it (argument errors may come from either)."""
    return pm.execute_fenced(request, fences, **kw).wait(BOUND_S)


def test_optional_fenced(nn_device, prepared, nn_session, nn_record):
    tid = f"{SUITE}/optional/fenced"
    _begin(nn_record, tid)
    if prepared.ready and not isinstance(prepared.ready[0][1], FencedExecution):
        _skip(nn_record, "the driver has no fenced execution (FencedExecution)")
    full = [(e, pm) for e, pm in prepared.ready if _fully_specified(e.model)]
    cases = full[:: max(1, len(full) // 6)][:6]
    if not cases:
        _skip(nn_record, "the driver fully supports none of the representative models with fully specified outputs")
    bad = []
    for e, pm in cases:
        fences = (threading.Event(), threading.Event())
        try:
            handle = _bounded(lambda: pm.execute_fenced(_request(e), fences, measure_timing=True), "execute_fenced")
        except Exception as exc:
            bad.append(f"{e.name}: execute_fenced gave {_describe(exc)}")
            continue
        if not isinstance(handle, FencedExecutionHandle):
            bad.append(f"{e.name}: execute_fenced returned {type(handle).__name__}, not a FencedExecutionHandle")
            continue
        fences[0].set()  # one of two fences signalled: still gated
        early = _run(lambda: handle.wait(0.05), "wait before the fences")
        if not isinstance(early, TimeoutError):
            bad.append(
                f"{e.name}: wait() before both wait fences were signalled gave "
                f"{'a result' if isinstance(early, ExecutionResult) else _describe(early)}, "
                f"expected TimeoutError"
            )
        fences[1].set()
        got = _run(lambda: handle.wait(BOUND_S), "wait")
        why = _result_problem(e.model, got, e.outputs)
        if why:
            bad.append(f"{e.name}: {why}")
        else:
            info = _run(handle.get_execution_info, "get_execution_info")
            if not isinstance(info, FencedExecutionInfo):
                bad.append(f"{e.name}: get_execution_info gave {info!r:.80}, not a FencedExecutionInfo")
            else:
                if info.status != ErrorStatus.NONE:
                    bad.append(f"{e.name}: execution info status {info.status!r} after a successful execution")
                for name, t in (("timing_launched", info.timing_launched), ("timing_fenced", info.timing_fenced)):
                    w = _timing_problem(t, True)
                    if w:
                        bad.append(f"{e.name} {name}: {w}")
                # the fenced timing starts later, so it cannot be longer than the launched one
                tl, tf = info.timing_launched.time_in_driver, info.timing_fenced.time_in_driver
                if tl is not None and tf is not None and tf > tl:
                    bad.append(f"{e.name}: time_in_driver after the fences ({tf} us) > since launch ({tl} us)")
        plain = _run(lambda: pm.execute_fenced(_request(e), ()), "execute_fenced")
        if isinstance(plain, FencedExecutionHandle):
            info = _run(plain.get_execution_info, "get_execution_info")
            if isinstance(info, FencedExecutionInfo) and (
                info.timing_launched != Timing() or info.timing_fenced != Timing()
            ):
                bad.append(f"{e.name}: timing reported although measure_timing was False")
        why = _verdict(
            _run(lambda: _fenced(pm, _request(e), (None,)), "execute_fenced"),
            ErrorStatus.INVALID_ARGUMENT,
            "a None wait fence",
        )
        if why:
            bad.append(f"{e.name}: {why}")
        req = _request(e)
        if np.asarray(e.outputs[0]).size:
            small = dataclasses.replace(req, outputs=(RequestArgument(capacity=0), *req.outputs[1:]))
            why = _verdict(
                _run(lambda: _fenced(pm, small), "execute_fenced"),
                ErrorStatus.INVALID_ARGUMENT,
                "an insufficient output",
            )
            if why:
                bad.append(f"{e.name}: {why}")
        past = _run(lambda: _fenced(pm, req, deadline=time.monotonic() - 1.0), "execute_fenced")
        if not (isinstance(past, DriverError) and past.status in MISSED_DEADLINE):
            why = _result_problem(e.model, past, e.outputs)
            if why:
                bad.append(f"{e.name} with a deadline passed: {why} (expected a correct result or MISSED_DEADLINE_*)")
    unspecified = 0
    for e, dyn, pm in _dynamic_cases(nn_device):
        if unspecified >= len(cases):
            _run(pm.release, "release")
            break
        unspecified += 1
        why = _verdict(
            _run(lambda: _fenced(pm, Request.from_arrays(dyn, list(e.inputs))), "execute_fenced"),
            ErrorStatus.INVALID_ARGUMENT,
            "unspecified output dimensions",
        )
        _run(pm.release, "release")
        if why:
            bad.append(f"{e.name}: {why}")
    nn_record["extra"].update(models=len(cases), unspecified_models=unspecified)
    if bad:
        _fail(nn_session, nn_record, tid, _shown(bad), failures=bad[:50])
    nn_record["message"] = (
        f"{len(cases)} models: fences honoured, execution info and timing right, None fence, "
        f"insufficient and (on {unspecified} models) unspecified outputs rejected"
    )


def test_optional_burst(prepared, nn_session, nn_record):
    tid = f"{SUITE}/optional/burst"
    _begin(nn_record, tid)
    if prepared.ready and not isinstance(prepared.ready[0][1], BurstExecution):
        _skip(nn_record, "the driver has no burst execution (BurstExecution)")
    cases = _small_supported(prepared)
    if not cases:
        _skip(nn_record, "the driver fully supports none of the representative models")
    bad = []
    for e, pm in cases:
        try:
            burst = _bounded(pm.configure_burst, "configure_burst")
        except Exception as exc:
            bad.append(f"{e.name}: configure_burst gave {_describe(exc)}")
            continue
        for _ in range(3):  # (timing through a burst is judged by vts/api/timing)
            why = _result_problem(e.model, _run(lambda: burst.execute(_request(e)), "burst execute"), e.outputs)
            if why:
                bad.append(f"{e.name}: {why}")
        req = _request(e)
        broken = dataclasses.replace(req, outputs=req.outputs[:-1])
        got = _run(lambda: burst.execute(broken), "burst execute")
        why = _request_verdict(got, (ErrorStatus.INVALID_ARGUMENT,), len(e.model.main.output_indexes), None)
        if why:
            bad.append(f"{e.name} burst with an output removed: {why}")
        why = _result_problem(e.model, _run(lambda: burst.execute(req), "burst execute"), e.outputs)
        if why:
            bad.append(f"{e.name}: after a rejected request the burst no longer works: {why}")
        got = _run(burst.release, "burst release")
        if isinstance(got, BaseException):
            bad.append(f"{e.name}: burst release gave {_describe(got)}")
    if bad:
        _fail(nn_session, nn_record, tid, _shown(bad))
    nn_record["message"] = f"{len(cases)} models correct through a burst; invalid request rejected"


# ---------------------------------------------------------------------------------------
# Memory domains (VTS MemoryDomainTests, re-made on a small ADD model the suite builds)
# ---------------------------------------------------------------------------------------

MEMORY_CASES = ["output_role", "input_role", "bad_allocate", "uninitialised", "misuse"]


def _add_model(n: int = 64, t: T = T.TENSOR_FLOAT32, rows: int = 1) -> Model:
    b = ModelBuilder()
    x = b.input(t, [rows, n])
    y = b.input(t, [rows, n])
    b.operation(Op.ADD, [x, y, b.i32(0)], [b.output(t, [rows, n])])
    return b.build()


def _with_arg(request: Request, side: str, pos: int, arg: RequestArgument) -> Request:
    args = list(getattr(request, side))
    args[pos] = arg
    return dataclasses.replace(request, **{side: tuple(args)})


def _allocate(device, models, inputs=(), outputs=(), dims=()):
    """device.allocate with roles given as (model index, io index) pairs."""
    return _bounded(
        lambda: device.allocate(
            BufferDesc(tuple(dims)),
            list(models),
            [BufferRole(m, i) for m, i in inputs],
            [BufferRole(m, i) for m, i in outputs],
        ),
        "allocate",
    )


@pytest.mark.parametrize("case", MEMORY_CASES)
def test_optional_memory_domain(case, nn_device, nn_session, nn_record):
    tid = f"{SUITE}/optional/memory_domain/{case}"
    model = _add_model()
    nn_record.update(suite=SUITE, test_id=tid, operations=["ADD"], data_types=["fp32"])
    if not isinstance(nn_device, MemoryDomains):
        _skip(nn_record, "the driver has no memory domains (MemoryDomains)")
    try:
        if not all(_bounded(lambda: nn_device.supported_operations(model), "supported_operations")):
            _skip(nn_record, "the driver does not support fp32 ADD")
        pm = _bounded(lambda: nn_device.prepare(model), "prepare")
    except (DriverError, HangError) as e:
        _fail(nn_session, nn_record, tid, f"could not prepare fp32 ADD: {_describe(e)}", model=model)
    rng = np.random.default_rng(nn_session.seed)
    x, y = (rng.standard_normal((1, 64)).astype(np.float32) for _ in range(2))
    request = Request.from_arrays(model, [x, y])
    bad: list[str] = []
    try:
        ran = {
            "output_role": _memory_output_role,
            "input_role": _memory_input_role,
            "bad_allocate": _memory_bad_allocate,
            "uninitialised": _memory_uninitialised,
            "misuse": _memory_misuse,
        }[case](nn_device, pm, model, request, x, y, bad)
    finally:
        _run(pm.release, "release")
    if ran is None:
        _skip(
            nn_record,
            "allocate gave GENERAL_FAILURE for a valid fp32 [1, 64] role (memory domains "
            "not offered for it; VTS skips)",
        )
    if bad:
        _fail(nn_session, nn_record, tid, _shown(bad), model=model, inputs=[x, y], expected=[x + y])
    nn_record["message"] = ran


def _try_allocate(device, pm, bad, inputs=(), outputs=()):
    """A valid allocation: (buffer, token); None when the driver declines with GENERAL_FAILURE
    (VTS: skip); False after recording a wrong answer."""
    got = _run(lambda: _allocate(device, [pm], inputs, outputs), "allocate")
    if isinstance(got, DriverError) and got.status == ErrorStatus.GENERAL_FAILURE:
        return None
    if isinstance(got, BaseException):
        bad.append(f"allocate for a valid role gave {_describe(got)} (a refusal must be GENERAL_FAILURE)")
        return False
    if not (isinstance(got, tuple) and len(got) == 2 and isinstance(got[1], (int, np.integer)) and got[1] > 0):
        bad.append(f"allocate returned {got!r:.80}, expected (buffer, token > 0)")
        return False
    return got


def _memory_output_role(device, pm, model, request, x, y, bad):
    got = _try_allocate(device, pm, bad, outputs=[(0, 0)])
    if not got:
        return got
    buf, token = got
    for path, run in _paths(pm).items():
        res = _run(lambda: run(_with_arg(request, "outputs", 0, RequestArgument(memory=int(token)))), f"{path} execute")
        if isinstance(res, BaseException):
            bad.append(f"{path}: executing into device memory gave {_describe(res)}")
            continue
        if len(res.output_shapes) == 1 and tuple(res.output_shapes[0].dimensions) != (1, 64):
            bad.append(f"{path}: output shape reported {list(res.output_shapes[0].dimensions)}, expected [1, 64]")
        data = _run(buf.copy_to, "copy_to")
        if isinstance(data, BaseException):
            bad.append(f"{path}: copy_to after the execution gave {_describe(data)}")
        elif not (isinstance(data, np.ndarray) and data.shape == (1, 64) and np.array_equal(data, x + y)):
            bad.append(f"{path}: copy_to gave {np.asarray(data).shape} values that are not x + y")
        _run(lambda: buf.copy_from(np.zeros((1, 64), np.float32)), "copy_from")  # the next path rewrites it
    return f"executions on {'/'.join(_paths(pm))} wrote x + y into device memory, copy_to read it"


def _memory_input_role(device, pm, model, request, x, y, bad):
    got = _try_allocate(device, pm, bad, inputs=[(0, 0)])
    if not got:
        return got
    buf, token = got
    why = _run(lambda: buf.copy_from(x), "copy_from")
    if isinstance(why, BaseException):
        bad.append(f"copy_from of a [1, 64] fp32 array gave {_describe(why)}")
        return "copy_from failed"
    for path, run in _paths(pm).items():
        res = _run(lambda: run(_with_arg(request, "inputs", 0, RequestArgument(memory=int(token)))), f"{path} execute")
        why = _result_problem(model, res, [x + y])
        if why:
            bad.append(f"{path}: input 0 from a buffer filled by copy_from: {why}")
    # a buffer written as output 0 of one execution feeds input 0 of the next
    chained = _try_allocate(device, pm, bad, inputs=[(0, 0)], outputs=[(0, 0)])
    if chained:
        cbuf, ctok = chained
        first = _run(lambda: pm.execute(_with_arg(request, "outputs", 0, RequestArgument(memory=int(ctok)))), "execute")
        if isinstance(first, BaseException):
            bad.append(f"executing into an input+output buffer gave {_describe(first)}")
        else:
            reading = _with_arg(request, "inputs", 0, RequestArgument(memory=int(ctok)))
            why = _result_problem(model, _run(lambda: pm.execute(reading), "execute"), [(x + y) + y])
            if why:
                bad.append(f"input 0 from a buffer an earlier execution wrote: {why}")
    dims = _run(lambda: buf.copy_from(np.zeros((2, 64), np.float32)), "copy_from")
    why = _verdict(dims, ErrorStatus.INVALID_ARGUMENT, "copy_from of a [2, 64] array into a [1, 64] buffer")
    if why:
        bad.append(why)
    return (
        "input 0 read from device memory (filled by copy_from and by an earlier output); wrong copy_from shape rejected"
    )


def _memory_bad_allocate(device, pm, model, request, x, y, bad):
    others: dict[str, Any] = {}
    for name, m in (("fp16", _add_model(t=T.TENSOR_FLOAT16)), ("2 rows", _add_model(rows=2))):
        try:
            if all(_bounded(lambda: device.supported_operations(m), "supported_operations")):
                others[name] = _bounded(lambda: device.prepare(m), "prepare")
        except Exception:  # the conflicting-role cases need these models; without them they are left out
            continue
    cases = [
        ("no roles", [pm], [], [], ()),
        ("model index out of range", [pm], [(1, 0)], [], ()),
        ("input index out of range", [pm], [(0, 2)], [], ()),
        ("output index out of range", [pm], [], [(0, 1)], ()),
        ("same role twice", [pm], [(0, 0), (0, 0)], [], ()),
        ("same role through two model indexes", [pm, pm], [], [(0, 0), (1, 0)], ()),
        ("description rank differs", [pm], [(0, 0)], [], (1, 64, 1)),
        ("description dimension differs", [pm], [], [(0, 0)], (3, 64)),
    ]
    for name, other in others.items():
        cases.append((f"roles on fp32 and {name} operands", [pm, other], [(0, 0), (1, 0)], [], ()))
    freq = [("frequency 0", 0.0), ("frequency 10", 10.0), ("frequency -0.5", -0.5)]
    tried = 0
    for what, models, ins, outs, dims in cases:
        tried += 1
        got = _run(lambda: _allocate(device, models, ins, outs, dims), "allocate")
        if not (
            isinstance(got, DriverError) and got.status in (ErrorStatus.INVALID_ARGUMENT, ErrorStatus.GENERAL_FAILURE)
        ):
            did = _describe(got) if isinstance(got, BaseException) else "returned a buffer"
            bad.append(f"allocate with {what}: {did}, expected INVALID_ARGUMENT or GENERAL_FAILURE and no buffer")
    for what, f in freq:
        tried += 1
        got = _run(
            lambda: _bounded(lambda: device.allocate(BufferDesc(), [pm], [BufferRole(0, 0, f)], []), "allocate"),
            "allocate",
        )
        if not (
            isinstance(got, DriverError) and got.status in (ErrorStatus.INVALID_ARGUMENT, ErrorStatus.GENERAL_FAILURE)
        ):
            did = _describe(got) if isinstance(got, BaseException) else "returned a buffer"
            bad.append(f"allocate with {what}: {did}, expected INVALID_ARGUMENT or GENERAL_FAILURE and no buffer")
    for other in others.values():
        _run(other.release, "release")
    return f"{tried} invalid allocations refused without a buffer"


def _memory_uninitialised(device, pm, model, request, x, y, bad):
    got = _try_allocate(device, pm, bad, inputs=[(0, 0)], outputs=[(0, 0)])
    if not got:
        return got
    buf, token = got
    why = _verdict(_run(buf.copy_to, "copy_to"), ErrorStatus.GENERAL_FAILURE, "copy_to of a fresh buffer")
    if why:
        bad.append(why)
    reading = _with_arg(request, "inputs", 0, RequestArgument(memory=int(token)))
    for path, run in _paths(pm).items():
        why = _verdict(
            _run(lambda: run(reading), f"{path} execute"),
            ErrorStatus.GENERAL_FAILURE,
            f"{path}: an execution reading an uninitialised buffer",
        )
        if why:
            bad.append(why)
    # a failed execution must not initialise its output buffer
    failing = _with_arg(
        _with_arg(request, "outputs", 0, RequestArgument(memory=int(token))),
        "inputs",
        1,
        RequestArgument(value=y[:, :10], dimensions=(1, 10)),
    )
    _run(lambda: pm.execute(failing), "execute")
    why = _verdict(
        _run(buf.copy_to, "copy_to"),
        ErrorStatus.GENERAL_FAILURE,
        "copy_to after a rejected execution that named the buffer as its output",
    )
    if why:
        bad.append(why)
    return "copy_to and executions reading an uninitialised buffer gave GENERAL_FAILURE"


def _memory_misuse(device, pm, model, request, x, y, bad):
    got = _try_allocate(device, pm, bad, inputs=[(0, 0)])
    if not got:
        return got
    buf, token = got
    _run(lambda: buf.copy_from(x), "copy_from")
    both = _try_allocate(device, pm, bad, inputs=[(0, 0)], outputs=[(0, 0)])
    other = _run(lambda: device.prepare(model), "prepare")
    cases = [
        ("an unknown token", _with_arg(request, "inputs", 0, RequestArgument(memory=int(token) + 1000))),
        ("an input-role buffer as output 0", _with_arg(request, "outputs", 0, RequestArgument(memory=int(token)))),
        ("an input-0 buffer as input 1", _with_arg(request, "inputs", 1, RequestArgument(memory=int(token)))),
    ]
    if both:
        _run(lambda: both[0].copy_from(x), "copy_from")
        arg = RequestArgument(memory=int(both[1]))
        cases.append(
            ("one buffer as input 0 and output 0", _with_arg(_with_arg(request, "inputs", 0, arg), "outputs", 0, arg))
        )
    for path, run in _paths(pm).items():
        for what, req in cases:
            why = _verdict(_run(lambda: run(req), f"{path} execute"), ErrorStatus.INVALID_ARGUMENT, f"{path}: {what}")
            if why:
                bad.append(why)
    if not isinstance(other, BaseException):
        req = _with_arg(request, "inputs", 0, RequestArgument(memory=int(token)))
        why = _verdict(
            _run(lambda: other.execute(req), "execute"),
            ErrorStatus.INVALID_ARGUMENT,
            "a buffer allocated for another prepared model of the same model",
        )
        if why:
            bad.append(why)
        _run(other.release, "release")
    return f"{len(cases) + 1} misuses of device memory rejected with INVALID_ARGUMENT on every path"


# The security and robustness cases (compilation-cache attacks, device basics, a cycle) live in
# their own module; naming them here makes them vts cases (ids vts/cache/*, vts/device/*,
# vts/memory_domain/*, vts/burst/memory_slots, vts/state/across_calls).
from nnconform.suites import vts_security as _security  # noqa: E402

test_cache = _security.test_cache
test_device_basics = _security.test_device_basics
test_device_cycle = _security.test_device_cycle
test_memory_domain_conv = _security.test_memory_domain_conv
test_memory_domain_shared = _security.test_memory_domain_shared
test_burst_memory_slots = _security.test_burst_memory_slots
test_state_across_calls = _security.test_state_across_calls
