"""The frame of a runtime adapter's device and prepared model.

Every adapter's execute() makes the same NNAPI checks in the same order (released model,
valid request, deadline not passed), reads the request's inputs in storage dtypes, times
the runtime call, and finishes with the same deadline / output-size / timing rules;
prepare() checks its arguments the same way and reports the same capabilities.  Those
frames are written here once; an adapter says only how its runtime is fed and run
(``feed`` and ``run``), and how a model is converted and compiled (``prepare_model``).
"""

from __future__ import annotations

import contextlib
import time
from typing import Collection

from nnconform.driver import (
    Capabilities,
    Device,
    DriverError,
    ErrorStatus,
    ExecutionPreference,
    ExecutionResult,
    PreparedModel,
    Priority,
    support,
)
from nnconform.ir import Model, Request

__all__ = ["RuntimePreparedModel", "RuntimeDevice", "runtime_errors"]


@contextlib.contextmanager
def runtime_errors(prefix: str, limit: int | None = None, types: tuple = (Exception,), passes: tuple = ()):
    """What a runtime raises (C++ runtimes surface many exception types) is GENERAL_FAILURE,
    with the runtime's first message line after ``prefix``; DriverErrors, and the adapter's
    own exceptions in ``passes`` (which it maps to another status), pass through."""
    try:
        yield
    except (DriverError, *passes):
        raise
    except types as e:
        raise DriverError(ErrorStatus.GENERAL_FAILURE, f"{prefix}: {support.first_line(e, limit)}") from None


class RuntimePreparedModel(PreparedModel):
    """A prepared model of a runtime adapter.  Subclasses set ``runtime`` (the name used in
    messages) and implement ``run``; ``feed`` and ``drop`` have defaults."""

    runtime = "the runtime"

    def __init__(self, model: Model):
        self.model = model
        self._released = False

    def execute(
        self,
        request: Request,
        *,
        measure_timing: bool = False,
        deadline: float | None = None,
        loop_timeout: float | None = None,
    ) -> ExecutionResult:
        t_driver = time.perf_counter_ns()
        support.begin_execution(self.model, request, deadline, self._released)
        feed = self.feed(request)
        outputs, device_us = self.timed_run(feed, deadline, loop_timeout)
        return support.finish_execution(
            self.model,
            request,
            outputs,
            deadline=deadline,
            measure_timing=measure_timing,
            device_us=device_us,
            t_driver_ns=t_driver,
        )

    def feed(self, request: Request):
        """What ``run`` takes: by default the request's input values (INVALID_ARGUMENT for an
        input left without a value, which no converted graph could take)."""
        return support.request_values(self.model, request, self.runtime)

    def timed_run(self, feed, deadline: float | None, loop_timeout: float | None) -> tuple[list, int]:
        """(outputs, time on device in microseconds): the time spent in ``run``.  An adapter
        that waits for its runtime (a lock) overrides this to time the runtime alone."""
        t_device = time.perf_counter_ns()
        outputs = self.run(feed, deadline, loop_timeout)
        return outputs, support.us_since(t_device)

    def run(self, feed, deadline: float | None, loop_timeout: float | None) -> list:
        """The runtime call: the model's outputs as arrays, in output order."""
        raise NotImplementedError

    def release(self) -> None:
        self._released = True
        self.drop()

    def drop(self) -> None:
        """Let go of the runtime's objects (a released model is never run again)."""


class RuntimeDevice(support.ConverterDevice, Device):
    """A runtime adapter's device: ``converter`` (the convert module, for
    supported_operations) and ``operand_types`` (the types the runtime stores, for
    capabilities) are set by the subclass, which implements ``prepare_model``."""

    feature_level = 30
    operand_types: Collection = ()

    def capabilities(self) -> Capabilities:
        return support.uniform_capabilities(self.operand_types)

    def prepare(
        self,
        model: Model,
        *,
        preference: ExecutionPreference = ExecutionPreference.FAST_SINGLE_ANSWER,
        priority: Priority = Priority.MEDIUM,
        deadline: float | None = None,
        cache_token: bytes | None = None,
    ) -> PreparedModel:
        support.check_prepare_args(model, preference, priority, deadline, cache_token)
        return self.prepare_model(model)

    def prepare_model(self, model: Model) -> PreparedModel:
        """Convert and compile a valid model (the arguments are checked already)."""
        raise NotImplementedError
