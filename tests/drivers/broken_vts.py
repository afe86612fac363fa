"""DELIBERATELY BROKEN DRIVERS, for testing the harness itself.  Never use them as references.

Each is the reference driver with one defect the VTS suite (suites/test_vts.py) must catch:

    AcceptsEverything     supported_operations and prepare skip model validation and accept
                          any preference and priority (request validation is kept, so only the
                          vts/model_mutation/* tests should fail)
    SharedScratchBuffer   every execution of a prepared model goes through one output buffer
                          shared by all executions, so concurrent executions see each other's
                          results (the race is made reliable: write, sleep, then copy out)
    BadTiming             reports time_in_driver smaller than time_on_device

Name them on the command line as ``tests/drivers/broken_vts.py:AcceptsEverything``.
"""

from __future__ import annotations

import time

import numpy as np

from nnconform.driver import ExecutionPreference, ExecutionResult, Priority, Timing
from nnconform.drivers import reference_cache as cache_files
from nnconform.drivers.reference import ReferenceDevice, ReferencePreparedModel, operation_supported
from nnconform.ir import Model


class AcceptsEverything(ReferenceDevice):
    name = "broken-accepts-everything"

    def supported_operations(self, model: Model) -> list[bool]:
        out = []
        for i in range(len(model.main.operations)):
            try:
                out.append(bool(operation_supported(model, -1, i)))
            except Exception:  # garbage in: this driver claims support rather than look closer
                out.append(True)
        return out

    def prepare(
        self,
        model: Model,
        *,
        preference=ExecutionPreference.FAST_SINGLE_ANSWER,
        priority=Priority.MEDIUM,
        deadline=None,
        cache_token=None,
        model_cache=None,
        data_cache=None,
    ):
        if cache_token is not None:
            if model_cache is None and data_cache is None:
                self._cache[bytes(cache_token)] = model
            else:  # the reference's file cache: this driver's defect is validation only
                cache_files.save(model, bytes(cache_token), list(model_cache or ()), list(data_cache or ()))
        return ReferencePreparedModel(model)


class _SharedScratchPrepared(ReferencePreparedModel):
    # Long enough that executions started together overwrite each other's results (one
    # execution of a small model takes well under a millisecond), short enough that a whole
    # suite run stays quick.
    SETTLE_S = 0.005

    def __init__(self, model: Model):
        super().__init__(model)
        self._scratch: list[np.ndarray] | None = None

    def execute(self, request, **kw) -> ExecutionResult:
        result = super().execute(request, **kw)
        # The defect: one scratch buffer per prepared model instead of one per execution.
        if self._scratch is None or [s.shape for s in self._scratch] != [o.shape for o in result.outputs]:
            self._scratch = [np.empty_like(o) for o in result.outputs]
        scratch = self._scratch
        for buf, out in zip(scratch, result.outputs):
            np.copyto(buf, out)
        time.sleep(self.SETTLE_S)  # the race window: another execution may write meanwhile
        return ExecutionResult(tuple(buf.copy() for buf in scratch), result.output_shapes, result.timing)


class SharedScratchBuffer(ReferenceDevice):
    name = "broken-shared-scratch"

    def prepare(self, model: Model, **kw):
        pm = super().prepare(model, **kw)
        return _SharedScratchPrepared(pm.model)

    def prepare_from_cache(self, cache_token: bytes, **files):
        return _SharedScratchPrepared(super().prepare_from_cache(cache_token, **files).model)


class _BadTimingPrepared(ReferencePreparedModel):
    def execute(self, request, *, measure_timing: bool = False, **kw) -> ExecutionResult:
        result = super().execute(request, measure_timing=measure_timing, **kw)
        if not measure_timing:
            return result
        # The defect: the device time includes more than the driver time that contains it.
        device = (result.timing.time_on_device or 0) + 100
        return ExecutionResult(result.outputs, result.output_shapes, Timing(device, device - 50))


class BadTiming(ReferenceDevice):
    name = "broken-timing"

    def prepare(self, model: Model, **kw):
        pm = super().prepare(model, **kw)
        return _BadTimingPrepared(pm.model)

    def prepare_from_cache(self, cache_token: bytes, **files):
        return _BadTimingPrepared(super().prepare_from_cache(cache_token, **files).model)


__all__ = ["AcceptsEverything", "SharedScratchBuffer", "BadTiming"]
