"""The driver interface: NNAPI HAL 1.3 in Python (design contract 3).

A driver adapter subclasses :class:`Device` and :class:`PreparedModel`.  Failures are raised
as :class:`DriverError` carrying an :class:`ErrorStatus`; success returns an
:class:`ExecutionResult`.  Optional capabilities are separate mix-in interfaces at the bottom
of this file, discovered with ``isinstance``:

    on the PreparedModel   AsyncExecution      execute_1_3 with a callback (a future here)
                           FencedExecution     executeFenced: wait fences, getExecutionInfo
                           BurstExecution      configureExecutionBurst
    on the Device          CompilationCaching  prepareModel with cache files and a token,
                                               prepareModelFromCache (see CacheFile)
                           MemoryDomains       IDevice::allocate, IBuffer copyFrom/copyTo; a
                                               request names a buffer by its token with
                                               ``RequestArgument(memory=token)``
"""

from __future__ import annotations

import abc
import concurrent.futures
import enum
import os
import threading
from dataclasses import dataclass
from typing import IO, Any, Sequence

import numpy as np

from nnconform.errors import NnError
from nnconform.ir import Model, OperandType, Request


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

    def __init__(self, status: ErrorStatus, message: str = "", output_shapes: Sequence[OutputShape] = ()):
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
    def execute(
        self,
        request: Request,
        *,
        measure_timing: bool = False,
        deadline: float | None = None,
        loop_timeout: float | None = None,
    ) -> ExecutionResult:
        """Run synchronously.  ``deadline`` is an absolute ``time.monotonic()`` value;
        ``loop_timeout`` is seconds for WHILE loops (None: the 2 s default)."""

    def release(self) -> None:
        """Free what prepare allocated.  Executing after release is a usage error."""


class DeviceStatus(enum.IntEnum):
    AVAILABLE = 0
    BUSY = 1
    OFFLINE = 2
    UNKNOWN = 3


class DeviceType(enum.IntEnum):
    OTHER = 1
    CPU = 2
    GPU = 3
    ACCELERATOR = 4


class Device(abc.ABC):
    name: str = "unnamed"  # NNAPI getName: "<vendor>-<device>", e.g. "acme-npu2"
    version: str = "0"  # getVersionString: non-empty, the driver build
    # The newest NNAPI feature level the driver implements: the golden vectors of later levels
    # are out of scope for it (SKIP, counted apart from unsupported).  An NNAPI level (1 .. 8) or
    # the NDK's encoding (Android 11 = API level 30 = level 4); default: the newest.
    feature_level: int = 8

    def capabilities(self) -> Capabilities:
        return Capabilities()

    def status(self) -> DeviceStatus:
        """IDevice::getStatus: AVAILABLE when the device can take work."""
        return DeviceStatus.AVAILABLE

    def device_type(self) -> DeviceType:
        """IDevice::getType."""
        return DeviceType.OTHER

    def supported_extensions(self) -> list[str]:
        """IDevice::getSupportedExtensions, by name (reverse-domain, e.g. "com.acme.fastconv");
        nnconform models no extension operand types, so only the names are asked for."""
        return []

    @abc.abstractmethod
    def supported_operations(self, model: Model) -> list[bool]:
        """One bool per operation of ``model.main``; raise INVALID_ARGUMENT for an invalid model."""

    @abc.abstractmethod
    def prepare(
        self,
        model: Model,
        *,
        preference: ExecutionPreference = ExecutionPreference.FAST_SINGLE_ANSWER,
        priority: Priority = Priority.MEDIUM,
        deadline: float | None = None,
        cache_token: bytes | None = None,
    ) -> PreparedModel:
        """Compile ``model``; raise DriverError(INVALID_ARGUMENT) for an invalid one.

        A driver with file-based compilation caching (``CompilationCaching.cache_file_counts``
        not (0, 0)) also accepts ``model_cache`` and ``data_cache``, sequences of
        :class:`CacheFile`; the harness passes them only when it has files to give, so an
        adapter without file caching need not name them."""


# ---- optional interfaces: a driver declares them by inheriting ---------------------------


class AsyncExecution(abc.ABC):
    """The prepared model can start an execution and hand back a future."""

    @abc.abstractmethod
    def execute_async(
        self,
        request: Request,
        *,
        measure_timing: bool = False,
        deadline: float | None = None,
        loop_timeout: float | None = None,
    ) -> concurrent.futures.Future[ExecutionResult]:
        """Return a ``concurrent.futures.Future`` resolving to an ExecutionResult."""


MAX_CACHE_FILES = 32  # NNAPI's bound on each of the two cache-file counts
CACHE_TOKEN_BYTES = 32


@dataclass(frozen=True)
class CacheFile:
    """One compilation-cache file as NNAPI hands it to a driver: the file (created by the
    caller) and the access its handle grants: "rw", "r" (read-only) or "w" (write-only).
    A path rather than an open descriptor, so it crosses the driver-host boundary; a driver
    opens it only through :meth:`open`, which refuses what the access does not grant (as a
    read-only descriptor refuses writes), with PermissionError."""

    path: str
    access: str = "rw"

    def open(self, mode: str) -> IO[Any]:
        """``open(path, mode)`` for a binary mode ("rb", "wb", "r+b", "ab"), checked against
        the access first.  Writing never creates the file: the caller owns it."""
        reads = "r" in mode or "+" in mode
        writes = any(c in mode for c in "wa+")
        if "b" not in mode:
            raise ValueError("cache files are opened in binary mode")
        if (reads and "r" not in self.access) or (writes and "w" not in self.access):
            raise PermissionError(f"cache file {self.path} was handed over {self.access!r}; mode {mode!r} needs more")
        if "w" in mode and not os.path.isfile(self.path):
            raise FileNotFoundError(f"cache file {self.path} does not exist")
        return open(self.path, mode)


class CompilationCaching(abc.ABC):
    """The device can save a compiled model and prepare it again from the saved form.

    NNAPI form (file caching): ``cache_file_counts()`` returns how many model-cache and
    data-cache files the driver needs (each 0..32, not both 0).  ``prepare(model,
    cache_token=t, model_cache=[...], data_cache=[...])`` compiles and, best effort, writes the
    compilation into those files; with the wrong number of files it still prepares but saves
    nothing.  ``prepare_from_cache(t, model_cache=[...], data_cache=[...])`` rebuilds it: the
    wrong number of files is INVALID_ARGUMENT; files that do not hold a compilation saved under
    exactly this token (missing, truncated, tampered with, another model's, unreadable) are
    GENERAL_FAILURE, never a crash and never another model.  Model-cache files are security
    sensitive (a driver must check their integrity); data-cache files may be trusted less
    strictly, but a corrupted one must still give GENERAL_FAILURE or a correct model.

    Token-only form (counts (0, 0), the default): the driver keeps its cache where it likes;
    ``prepare_from_cache(t)`` gives GENERAL_FAILURE when nothing is cached under the token.
    """

    def cache_file_counts(self) -> tuple[int, int]:
        """(number of model-cache files, number of data-cache files)."""
        return (0, 0)

    @abc.abstractmethod
    def prepare_from_cache(self, cache_token: bytes) -> PreparedModel:
        """Raise DriverError(GENERAL_FAILURE) when nothing is cached under the token.  With
        file caching the signature also takes ``model_cache`` and ``data_cache``."""


class FencedExecutionHandle(abc.ABC):
    """What executeFenced hands back: the sync fence (``wait``) and the
    IFencedExecutionCallback (``get_execution_info``) in one object."""

    @abc.abstractmethod
    def wait(self, timeout: float | None = None) -> ExecutionResult:
        """Block until the execution has finished; return its result or raise its DriverError.
        Raise ``TimeoutError`` if it has not finished within ``timeout`` seconds (it keeps
        running; wait again).  The result's ``timing`` is the one measured from launch."""

    @abc.abstractmethod
    def get_execution_info(self) -> "FencedExecutionInfo":
        """Block until the execution has finished, then give its status and both timings."""


@dataclass(frozen=True)
class FencedExecutionInfo:
    """IFencedExecutionCallback::getExecutionInfo.  ``timing_launched`` counts from the call to
    ``execute_fenced``; ``timing_fenced`` from the moment every wait fence was signalled.  Both
    are NO_TIMING unless timing was asked for and ``status`` is NONE."""

    status: ErrorStatus
    timing_launched: Timing = NO_TIMING
    timing_fenced: Timing = NO_TIMING


class FencedExecution(abc.ABC):
    """The prepared model can start an execution gated by fences (IPreparedModel::executeFenced).

    Rules (HAL 1.3): a None among the wait fences, an output whose dimensions are not fully
    specified by the model or the request, or an output buffer too small for its (then known)
    size gives INVALID_ARGUMENT, raised by ``execute_fenced`` itself or by the handle's
    ``wait``; fenced execution has no OUTPUT_INSUFFICIENT_SIZE.  ``deadline`` is an absolute
    ``time.monotonic()`` value, ``timeout_after_fence`` a duration in seconds counted from the
    moment the fences are signalled, ``loop_timeout`` as for ``PreparedModel.execute``.
    """

    @abc.abstractmethod
    def execute_fenced(
        self,
        request: Request,
        wait_for: Sequence[threading.Event],
        *,
        measure_timing: bool = False,
        deadline: float | None = None,
        loop_timeout: float | None = None,
        timeout_after_fence: float | None = None,
    ) -> FencedExecutionHandle:
        """Return at once; the execution starts once every event in ``wait_for`` is set."""


class Burst(abc.ABC):
    """An execution burst (IBurstContext): a channel for many executions of one prepared model
    in a row.  It executes like ``PreparedModel.execute``; after ``release`` it gives
    GENERAL_FAILURE."""

    @abc.abstractmethod
    def execute(
        self,
        request: Request,
        *,
        measure_timing: bool = False,
        deadline: float | None = None,
        loop_timeout: float | None = None,
    ) -> ExecutionResult:
        """One execution through the burst; same contract as ``PreparedModel.execute``."""

    @abc.abstractmethod
    def release(self) -> None:
        """Close the burst and free what it cached."""


class BurstMemory(abc.ABC):
    """A Burst that caches device memory in slots (IBurstContext's memory cache and
    ``freeMemory``).  ``cache_memory(token)`` registers a MemoryDomains buffer with the burst
    and returns its slot (>= 0); executions through the burst may use the buffer as before.
    ``free_memory(slot)`` drops the slot.  Misuse is an error, never a crash: an unknown or
    already freed slot gives INVALID_ARGUMENT; any call after the burst's ``release`` gives
    GENERAL_FAILURE."""

    @abc.abstractmethod
    def cache_memory(self, token: int) -> int:
        """The slot now holding device memory ``token`` (INVALID_ARGUMENT for an unknown token)."""

    @abc.abstractmethod
    def free_memory(self, slot: int) -> None:
        """Forget the slot."""


class BurstExecution(abc.ABC):
    """The prepared model can open bursts (IPreparedModel::configureExecutionBurst)."""

    @abc.abstractmethod
    def configure_burst(self) -> Burst:
        """Open a burst; raise DriverError (GENERAL_FAILURE) if none can be made."""


@dataclass(frozen=True)
class BufferRole:
    """How a device buffer will be used: input or output ``io_index`` of
    ``prepared_models[model_index]``; ``frequency`` in (0, 1] is a hint."""

    model_index: int
    io_index: int
    frequency: float = 1.0


@dataclass(frozen=True)
class BufferDesc:
    """IDevice::allocate's BufferDesc: dimensions that refine the roles' (empty: take them from
    the roles; 0 entries: unknown)."""

    dimensions: tuple[int, ...] = ()


class DeviceBuffer(abc.ABC):
    """IBuffer: driver-managed memory for one operand shape and type.  It is initialised by a
    successful ``copy_from`` or by a successful execution writing it as an output."""

    @abc.abstractmethod
    def copy_from(self, array: np.ndarray) -> None:
        """Fill the buffer from ``array`` (its shape gives the dimensions).  A size, rank,
        dimension or data-type mismatch with the buffer gives INVALID_ARGUMENT."""

    @abc.abstractmethod
    def copy_to(self) -> np.ndarray:
        """The buffer's contents as a new array; GENERAL_FAILURE if it is not initialised."""


class MemoryDomains(abc.ABC):
    """The device can allocate driver-managed buffers (IDevice::allocate).

    The roles must name inputs/outputs of the given prepared models (each role once) that share
    one operand type, scale, zero point and channel quantisation, with dimensions that combine
    (and combine with ``desc.dimensions``).  A request uses a buffer with
    ``RequestArgument(memory=token)`` for one of its roles only; an unknown token, a use outside
    the roles, or one buffer as two outputs or as both input and output gives INVALID_ARGUMENT;
    an uninitialised buffer read as an input gives GENERAL_FAILURE.  An output written to a
    buffer appears in ``ExecutionResult.outputs`` as an empty array (its data stays in the
    buffer; read it with ``copy_to``); its ``output_shapes`` entry is reported as usual.
    """

    @abc.abstractmethod
    def allocate(
        self,
        desc: BufferDesc,
        prepared_models: Sequence[PreparedModel],
        input_roles: Sequence[BufferRole],
        output_roles: Sequence[BufferRole],
    ) -> tuple[DeviceBuffer, int]:
        """Return the buffer and its token (> 0).  Invalid roles or description:
        DriverError(INVALID_ARGUMENT); a valid request the driver cannot serve (e.g. unknown
        dimensions): DriverError(GENERAL_FAILURE).  A failure hands back no buffer."""
