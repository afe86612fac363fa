"""Running one conformance case through a driver, the way CTS does.

supported_operations -> prepare -> execute -> sanity of the result -> accuracy criteria ->
the reported output shapes.
Whatever the driver does (raise a plain exception, return garbage, the wrong shape or dtype)
becomes an outcome with a one-line message, never an exception escaping the harness.  Behind
a driver host (nnconform.isolation.proxy) two more outcomes exist: CRASH (the host died during a
call) and HANG (a call did not answer within its bound).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from nnconform.driver import Device, DriverError, ErrorStatus, ExecutionResult, PreparedModel
from nnconform.ir import Model, Request
from nnconform.isolation import pools
from nnconform.isolation.proxy import DriverProtocolError, HostIncident, StaleHandle
from nnconform.verdict.criteria import Comparison, Criteria, compare
from nnconform.verdict.outcome import Outcome
from nnconform.vts.checks import shapes_problem

PASS, FAIL, SKIP, ERROR = "PASS", "FAIL", "SKIP", "ERROR"
CRASH, HANG = Outcome.CRASH, Outcome.HANG


@dataclass
class CaseOutcome:
    outcome: str
    message: str = ""
    stage: str = ""  # where it ended: supported/prepare/execute/compare
    actual: list[np.ndarray] | None = None
    comparison: Comparison | None = None
    duration_s: float = 0.0
    details: dict[str, Any] | None = None  # CRASH/HANG: stderr tail, host pid, exit code or signal
    # a partitioned case (nnconform.verdict.partition): operations (n), on_driver (k), partitions,
    # driver_operations (indexes of the operations the driver ran); None: whole model or nothing
    partition: dict[str, Any] | None = None

    def partition_text(self) -> str:
        if not self.partition:
            return ""
        return f"partitioned: {self.partition['on_driver']} of {self.partition['operations']} operations on the driver"


@dataclass(frozen=True)
class Case:
    """One conformance case as a suite hands it over, once: its id, the model, the inputs and
    the outputs it must give (``ignored``: outputs whose values are not compared;
    ``expect_failure``: a model the driver must refuse).  :func:`run` runs it and
    ``NnSession.conclude`` records its verdict from the same value."""

    test_id: str
    model: Model
    inputs: Sequence[np.ndarray | None]
    expected: Sequence[np.ndarray]
    ignored: Sequence[bool] | None = None
    expect_failure: bool = False


# Partitioned execution of cases the driver supports in part (on by default; the pytest
# option --no-partition and `nnconform run --no-partition` turn it off for a run).
PARTITIONING = True


def set_partitioning(enabled: bool) -> None:
    global PARTITIONING
    PARTITIONING = bool(enabled)


def _describe_exc(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _release(prepared: PreparedModel) -> None:
    try:
        prepared.release()
    except StaleHandle:
        return  # its host died during execute: nothing left to release, and the CRASH/HANG is the verdict


def _insufficient_why(e: DriverError, expected: Sequence[Any]) -> str:
    """For OUTPUT_INSUFFICIENT_SIZE: the outputs' buffers were sized by the expected outputs'
    shapes (pools.capacities_from), so the driver's outputs came out larger than the expected
    shapes; name what it reported against what was expected."""
    if e.status != ErrorStatus.OUTPUT_INSUFFICIENT_SIZE:
        return ""
    got = [list(s.dimensions) for s in e.output_shapes]
    want = [list(np.shape(x)) for x in expected]
    reported = f"; the driver reported output shapes {got}" if got else ""
    return f" (the output buffers hold the expected output shapes {want}{reported})"


def run_case(
    device: Device,
    model: Model,
    inputs: Sequence[np.ndarray | None],
    expected: Sequence[np.ndarray],
    *,
    ignored: Sequence[bool] | None = None,
    expect_failure: bool = False,
    criteria: Criteria | None = None,
    measure_timing: bool = False,
    loop_timeout: float | None = None,
    partition: bool | None = None,
) -> CaseOutcome:
    """``partition`` None follows PARTITIONING: a case whose operations the driver supports
    only in part runs partitioned (its operations on the driver, the rest on the reference);
    False keeps whole-model-or-skip."""
    t0 = time.perf_counter()
    ops = ", ".join(model.operation_names())

    def done(outcome: str, message: str, stage: str, **kw: Any) -> CaseOutcome:
        return CaseOutcome(outcome, message, stage, duration_s=time.perf_counter() - t0, **kw)

    # 1. support query
    try:
        supported = device.supported_operations(model)
    except DriverError as e:
        if expect_failure:
            return done(PASS, f"rejected as expected by supported_operations: {e}", "supported")
        return done(FAIL, f"supported_operations failed on a valid model: {e}", "supported")
    except HostIncident as e:
        return done(e.verdict, f"{e} (in supported_operations)", "supported", details=e.details)
    except DriverProtocolError as e:
        return done(FAIL, str(e), "supported")
    except Exception as e:  # a driver bug must become a recorded FAIL, not a harness crash
        return done(FAIL, f"driver raised in supported_operations: {_describe_exc(e)}", "supported")
    except (SystemExit, GeneratorExit) as e:  # in-process only; behind a host these are plain FAILs
        return done(FAIL, f"driver raised in supported_operations: {_describe_exc(e)}", "supported")
    if (
        not isinstance(supported, (list, tuple))
        or len(supported) != len(model.main.operations)
        or not all(isinstance(s, (bool, np.bool_)) for s in supported)
    ):
        return done(
            FAIL,
            f"supported_operations returned {supported!r:.80}; expected {len(model.main.operations)} bools",
            "supported",
        )
    if not all(supported):
        missing = sorted({model.main.operations[i].name for i, s in enumerate(supported) if not s})
        why = f"driver does not support {', '.join(missing)} for {'/'.join(model.data_types())}"
        if not any(supported):
            return done(SKIP, why, "supported")
        if expect_failure:
            # NNAPI validates the whole model before partitioning: the driver never sees it
            return done(SKIP, f"{why} (a model that must be rejected is not partitioned)", "supported")
        if not (PARTITIONING if partition is None else partition):
            return done(SKIP, why, "supported")
        return _partitioned(
            device,
            model,
            inputs,
            expected,
            supported,
            ignored=ignored,
            criteria=criteria,
            measure_timing=measure_timing,
            loop_timeout=loop_timeout,
            done=done,
            why=why,
        )
    if model.referenced and not expect_failure and (PARTITIONING if partition is None else partition):
        # NNAPI gives an IF/WHILE to a driver only with every operation of its subgraphs
        from nnconform.verdict.partition import assign

        on_driver = assign(device, model, supported)
        if not all(on_driver):
            why = "the driver refuses operations inside the subgraphs of its IF/WHILE"
            return _partitioned(
                device,
                model,
                inputs,
                expected,
                on_driver,
                ignored=ignored,
                criteria=criteria,
                measure_timing=measure_timing,
                loop_timeout=loop_timeout,
                done=done,
                why=why,
            )

    # 2. prepare
    try:
        prepared = device.prepare(model)
    except DriverError as e:
        if expect_failure:
            return done(PASS, f"rejected as expected by prepare: {e}", "prepare")
        return done(FAIL, f"prepare failed although every operation is supported: {e}", "prepare")
    except HostIncident as e:
        return done(e.verdict, f"{e} (in prepare)", "prepare", details=e.details)
    except DriverProtocolError as e:
        return done(FAIL, str(e), "prepare")
    except (Exception, SystemExit, GeneratorExit) as e:
        return done(FAIL, f"driver raised in prepare: {_describe_exc(e)}", "prepare")

    # 3. execute
    try:
        try:
            request = Request.from_arrays(model, list(inputs))
            if not expect_failure:  # outputs of unknown dimensions: buffers sized by the expected
                request = pools.capacities_from(model, request, expected)
            if getattr(device, "isolated", False):
                # behind a host every execution travels in pools and is checked (proxy.py)
                result = prepared.execute(request, measure_timing=measure_timing, loop_timeout=loop_timeout)
            else:
                # in-process the pools are plain buffers of the harness; the same checks
                result = pools.execute_in_process(
                    lambda r: prepared.execute(r, measure_timing=measure_timing, loop_timeout=loop_timeout),
                    request,
                    model,
                )
        finally:
            _release(prepared)
    except DriverError as e:
        if expect_failure and e.output_shapes and e.status != ErrorStatus.OUTPUT_INSUFFICIENT_SIZE:
            return done(
                FAIL,
                f"execution failed as expected ({e.status.name}) but came with output shapes "
                f"{list(e.output_shapes)} (must be empty)",
                "execute",
            )
        if expect_failure:
            return done(PASS, f"execution failed as expected: {e}", "execute")
        return done(FAIL, f"execution failed on [{ops}]: {e}{_insufficient_why(e, expected)}", "execute")
    except HostIncident as e:
        return done(e.verdict, f"{e} (in execute on [{ops}])", "execute", details=e.details)
    except DriverProtocolError as e:
        return done(FAIL, f"{e} (on [{ops}])", "execute")
    except (Exception, SystemExit, GeneratorExit) as e:
        return done(FAIL, f"driver raised in execute on [{ops}]: {_describe_exc(e)}", "execute")
    if expect_failure:
        return done(FAIL, f"driver accepted and executed an invalid model [{ops}] (must fail)", "execute")
    if not isinstance(result, ExecutionResult):
        return done(FAIL, f"execute returned {type(result).__name__}, not an ExecutionResult", "execute")
    actual = list(result.outputs) if isinstance(result.outputs, (list, tuple)) else []
    if not isinstance(result.outputs, (list, tuple)) or not all(isinstance(a, np.ndarray) for a in actual):
        return done(
            FAIL,
            f"execute returned outputs of type {type(result.outputs).__name__} (need a sequence of numpy arrays)",
            "execute",
        )
    # Plain arrays from here on: an in-process driver's ndarray subclass could override
    # comparisons (say it equals anything); its data is what is judged.
    actual = [a if type(a) is np.ndarray else np.asarray(a) for a in actual]

    # 4. accuracy
    cmp = compare(model, list(expected), actual, criteria=criteria, ignored=ignored)
    if cmp.passed:
        # 5. reported output shapes: none, or one sufficient entry per output with its real
        # dimensions (HAL 1.3 section on outputShapes); checked on every case, not only in vts,
        # and required when the model leaves output dimensions unknown
        unknown = any(0 in model.main.operands[k].dimensions for k in model.main.output_indexes)
        problem = shapes_problem(model, result, required=unknown)
        if problem:
            return done(FAIL, f"[{ops}] output_shapes wrong: {problem}", "execute", actual=actual, comparison=cmp)
        return done(PASS, "", "compare", actual=actual, comparison=cmp)
    return done(FAIL, f"[{ops}] {cmp.message}", "compare", actual=actual, comparison=cmp)


def _partitioned(
    device: Device,
    model: Model,
    inputs: Sequence[np.ndarray | None],
    expected: Sequence[np.ndarray],
    supported: Sequence[bool],
    *,
    ignored: Sequence[bool] | None,
    criteria: Criteria | None,
    measure_timing: bool,
    loop_timeout: float | None,
    done: Callable[..., CaseOutcome],
    why: str,
) -> CaseOutcome:
    from nnconform.verdict.partition import PartitionFailed, assign, run_partitioned

    on_driver = assign(device, model, supported)
    if not any(on_driver):
        return done(SKIP, f"{why}; its control flow reaches operations the driver refuses", "supported")
    n = len(model.main.operations)
    planned = {
        "operations": n,
        "on_driver": sum(on_driver),
        "partitions": None,
        "driver_operations": [k for k, s in enumerate(on_driver) if s],
    }
    try:
        actual, info = run_partitioned(
            device, model, list(inputs), on_driver, measure_timing=measure_timing, loop_timeout=loop_timeout
        )
    except PartitionFailed as e:
        text = f"partitioned: {planned['on_driver']} of {n} operations on the driver"
        return done(e.outcome, f"{text}; {e.message}", e.stage, details=e.details, partition=planned)
    text = f"partitioned: {info['on_driver']} of {n} operations on the driver"
    if info["refused_in_context"]:
        text += f" ({info['refused_in_context']} partition(s) refused when shown alone ran on the reference)"
    if info["zero_sized"]:
        text += f" ({info['zero_sized']} partition(s) fed a zero-sized tensor ran on the reference)"
    if info["on_driver"] == 0:
        reason = (
            "the driver refused every partition shown alone"
            if info["refused_in_context"]
            else "every driver partition is fed a zero-sized tensor (a request cannot carry one)"
        )
        return done(SKIP, f"{why}; {reason}", "supported")
    cmp = compare(model, list(expected), actual, criteria=criteria, ignored=ignored)
    if cmp.passed:
        return done(PASS, text, "compare", actual=actual, comparison=cmp, partition=info)
    ops = ", ".join(model.operation_names())
    return done(FAIL, f"{text}; [{ops}] {cmp.message}", "compare", actual=actual, comparison=cmp, partition=info)


def run(device: Device, case: Case, **options: Any) -> CaseOutcome:
    """:func:`run_case` for a :class:`Case` (``options``: criteria, measure_timing, loop_timeout,
    partition, or ignored to compare fewer outputs than the case names)."""
    options.setdefault("ignored", case.ignored)
    return run_case(device, case.model, case.inputs, case.expected, expect_failure=case.expect_failure, **options)
