"""The driver interface: NNAPI HAL 1.3 in Python (design contract 3).

A driver adapter subclasses :class:`Device` and :class:`PreparedModel`.  Failures are raised
as :class:`DriverError` carrying an :class:`ErrorStatus`; success returns an
:class:`ExecutionResult`.  Optional capabilities (async, caching, ...) are separate mix-in
interfaces at the bottom of this file, discovered with ``isinstance``.
"""
from __future__ import annotations

import abc
import enum
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .ir import Model, OperandType, Request
from .errors import NnError


class ErrorStatus(enum.IntEnum):
    NONE = 0
    DEVICE_UNAVAILABLE = 1
    GENERAL_FAILURE = 2
    OUTPUT_INSUFFICIENT_SIZE = 3
    INVALID_ARGUMENT = 4
    MISSED_DEADLINE_TRANSIENT = 5
    MISSED_DEADLINE_PERSISTENT = 6
    RESOURCE_EXHAUSTED_TRANSIENT = 7
    RESOURCE_EXHAUSTED_PERSISTENT = 8


class ExecutionPreference(enum.IntEnum):
    LOW_POWER = 0
    FAST_SINGLE_ANSWER = 1
    SUSTAINED_SPEED = 2


class Priority(enum.IntEnum):
    LOW = 0
    MEDIUM = 1
    HIGH = 2


@dataclass(frozen=True)
class OutputShape:
    dimensions: tuple[int, ...]
    is_sufficient: bool = True


@dataclass(frozen=True)
class Timing:
    """Durations in microseconds; None stands for HAL's UINT64_MAX ("not measured")."""
    time_on_device: int | None = None
    time_in_driver: int | None = None


NO_TIMING = Timing()


class DriverError(NnError):
    """A driver call failed with an ErrorStatus (never NONE)."""

    def __init__(self, status: ErrorStatus, message: str = "",
                 output_shapes: Sequence[OutputShape] = ()):
        self.status = ErrorStatus(status)
        self.output_shapes = tuple(output_shapes)
        super().__init__(f"{self.status.name}: {message}" if message else self.status.name)


@dataclass(frozen=True, eq=False)
class ExecutionResult:
    outputs: tuple[np.ndarray, ...]
    output_shapes: tuple[OutputShape, ...]
    timing: Timing = NO_TIMING


@dataclass(frozen=True)
class PerformanceInfo:
    exec_time: float = 1.0
    power_usage: float = 1.0


@dataclass(frozen=True)
class Capabilities:
    relaxed_float32_to_float16_scalar: PerformanceInfo = PerformanceInfo()
    relaxed_float32_to_float16_tensor: PerformanceInfo = PerformanceInfo()
    operand_performance: tuple[tuple[OperandType, PerformanceInfo], ...] = ()
    if_performance: PerformanceInfo = PerformanceInfo()
    while_performance: PerformanceInfo = PerformanceInfo()


class PreparedModel(abc.ABC):
    @abc.abstractmethod
    def execute(self, request: Request, *, measure_timing: bool = False,
                deadline: float | None = None, loop_timeout: float | None = None) -> ExecutionResult:
        """Run synchronously.  ``deadline`` is an absolute ``time.monotonic()`` value;
        ``loop_timeout`` is seconds for WHILE loops (None: the 2 s default)."""

    def release(self) -> None:
        """Free what prepare allocated.  Executing after release is a usage error."""


class Device(abc.ABC):
    name: str = "unnamed"
    version: str = "0"
    feature_level: int = 30  # NNAPI feature level (Android 11 = 30)

    def capabilities(self) -> Capabilities:
        return Capabilities()

    @abc.abstractmethod
    def supported_operations(self, model: Model) -> list[bool]:
        """One bool per operation of ``model.main``; raise INVALID_ARGUMENT for an invalid model."""

    @abc.abstractmethod
    def prepare(self, model: Model, *, preference: ExecutionPreference = ExecutionPreference.FAST_SINGLE_ANSWER,
                priority: Priority = Priority.MEDIUM, deadline: float | None = None,
                cache_token: bytes | None = None) -> PreparedModel:
        """Compile ``model``; raise DriverError(INVALID_ARGUMENT) for an invalid one."""


# ---- optional interfaces: a driver declares them by inheriting ---------------------------

class AsyncExecution(abc.ABC):
    """The prepared model can start an execution and hand back a future."""

    @abc.abstractmethod
    def execute_async(self, request: Request, *, measure_timing: bool = False,
                      deadline: float | None = None, loop_timeout: float | None = None):
        """Return a ``concurrent.futures.Future`` resolving to an ExecutionResult."""


class CompilationCaching(abc.ABC):
    """The device can save a compiled model under a 32-byte token and prepare from it."""

    @abc.abstractmethod
    def prepare_from_cache(self, cache_token: bytes) -> PreparedModel:
        """Raise DriverError(GENERAL_FAILURE) when nothing is cached under the token."""
