"""DELIBERATELY BROKEN DRIVERS, for testing the harness itself.  Never use them as references.

Each is the reference driver with one defect of how it treats request memory or its cache,
the kind a bring-up driver has; the memory-pool checks (nnconform.isolation.pools) and the
cache checks (nnconform.vts.cache_checks) must name each:

    ScribblesInputs   computes, then uses its input buffers as scratch (zeroes them), as if
                      inputs were the driver's to reuse: inputs_unchanged
    OverrunsOutput    writes each output in place through its address, one element too many
                      (an off-by-one in a native copy loop), also when prepared from its
                      cache: guard_bytes
    OverrunsFar       the same loop, 4096 elements too many (a size computed in the wrong
                      unit): beyond the guard bytes into the inaccessible page after them, so
                      the host faults; a CRASH whose message says guard_bytes and the output
    UnwrittenTail     writes each output in place but stops one element short (a loop bound
                      computed from the wrong dimension): output_written
    ScribblesNatively writes zeros over its first input through its address (as native code
                      does): the read-only mapping faults, a CRASH that says why
    WritesThenRejects writes its outputs in place, then rejects the request as
                      INVALID_ARGUMENT (validation after the work): outputs_untouched
    BurstSnapshots    a burst copies a device buffer's contents when the buffer is cached in a
                      slot and executes with that copy: a buffer refilled while cached is not
                      seen (vts/state/across_calls)
    MostRecentCache   validates the cache files it is given, then hands back the compilation
                      it made most recently, whatever the token names: cache/several_tokens

``InPlace`` is the control: it writes every output in place, exactly, and must pass.

Name them on the command line as ``tests/drivers/broken_pools.py:ScribblesInputs``.
"""

from __future__ import annotations

import ctypes
import dataclasses

import numpy as np

from nnconform.driver import DriverError, ErrorStatus, ExecutionResult
from nnconform.drivers.reference import _TRACKER, ReferenceBurst, ReferenceDevice, ReferencePreparedModel
from nnconform.ir import RequestArgument


class _InPlace(ReferencePreparedModel):
    """Writes outputs into the request's output views (``RequestArgument.buffer``) by address,
    ``extra`` elements more (or fewer, when negative) than each output has."""

    extra = 0

    def execute(self, request, **kw):
        result = super().execute(request, **kw)
        outs = []
        for arg, a in zip(request.outputs, result.outputs):
            view = arg.buffer
            if view is None or view.nbytes < a.nbytes:
                outs.append(a)
                continue
            src = np.ascontiguousarray(a)
            n = max(0, src.nbytes + self.extra * src.itemsize)
            grown = np.zeros(n // src.itemsize + 1, dtype=src.dtype)
            grown[: src.size] = src.reshape(-1)
            ctypes.memmove(view.ctypes.data, grown.ctypes.data, n)  # the driver's own copy loop
            outs.append(view.reshape(-1)[: src.size].reshape(a.shape))
        return ExecutionResult(tuple(outs), result.output_shapes, result.timing)


class _Overrun(_InPlace):
    extra = 1


class _FarOverrun(_InPlace):
    extra = 4096


class _Short(_InPlace):
    extra = -1


class _Scribble(ReferencePreparedModel):
    def execute(self, request, **kw):
        result = super().execute(request, **kw)
        for arg in request.inputs:
            if isinstance(arg.value, np.ndarray) and arg.value.size:
                arg.value[...] = 0  # inputs used as scratch after the run
        return result


class _NativeScribble(ReferencePreparedModel):
    def execute(self, request, **kw):
        result = super().execute(request, **kw)
        v = request.inputs[0].value
        ctypes.memset(v.ctypes.data, 0, v.nbytes)  # a native runtime's scratch write
        return result


class _WriteThenReject(_InPlace):
    def execute(self, request, **kw):
        super().execute(request, **kw)
        raise DriverError(ErrorStatus.INVALID_ARGUMENT, "request rejected (after running it)")


class WritesThenRejects(ReferenceDevice):
    name = "broken-pools-writes-then-rejects"

    def prepare(self, model, **kw):
        super().prepare(model, **kw)
        return _WriteThenReject(model)


class InPlace(ReferenceDevice):
    name = "pools-in-place"

    def prepare(self, model, **kw):
        super().prepare(model, **kw)
        return _InPlace(model)


class ScribblesNatively(ReferenceDevice):
    name = "broken-pools-scribbles-natively"

    def prepare(self, model, **kw):
        super().prepare(model, **kw)
        return _NativeScribble(model)


class ScribblesInputs(ReferenceDevice):
    name = "broken-pools-scribbles-inputs"

    def prepare(self, model, **kw):
        super().prepare(model, **kw)  # the argument checks, the cache save
        return _Scribble(model)


class OverrunsOutput(ReferenceDevice):
    name = "broken-pools-overruns-output"

    def prepare(self, model, **kw):
        super().prepare(model, **kw)
        return _Overrun(model)

    def prepare_from_cache(self, cache_token, **kw):
        # the same copy loop in a compilation loaded from the cache
        return _Overrun(super().prepare_from_cache(cache_token, **kw).model)


class OverrunsFar(ReferenceDevice):
    name = "broken-pools-overruns-far"

    def prepare(self, model, **kw):
        super().prepare(model, **kw)
        return _FarOverrun(model)


class UnwrittenTail(ReferenceDevice):
    name = "broken-pools-unwritten-tail"

    def prepare(self, model, **kw):
        super().prepare(model, **kw)
        return _Short(model)


class _SnapshotBurst(ReferenceBurst):
    def cache_memory(self, token):
        slot = super().cache_memory(token)
        self._snap = getattr(self, "_snap", {})
        self._snap[int(token)] = _TRACKER.get(int(token)).read().copy()  # the defect: copied once
        return slot

    def execute(self, request, **kw):
        snap = getattr(self, "_snap", {})
        ins = tuple(
            RequestArgument(value=snap[a.memory], dimensions=tuple(snap[a.memory].shape)) if a.memory in snap else a
            for a in request.inputs
        )
        return super().execute(dataclasses.replace(request, inputs=ins), **kw)


class _SnapshotPrepared(ReferencePreparedModel):
    def configure_burst(self):
        super().configure_burst()  # the release checks
        return _SnapshotBurst(self)


class BurstSnapshots(ReferenceDevice):
    name = "broken-pools-burst-snapshots"

    def prepare(self, model, **kw):
        super().prepare(model, **kw)
        return _SnapshotPrepared(model)


class MostRecentCache(ReferenceDevice):
    name = "broken-pools-most-recent-cache"

    def prepare(self, model, **kw):
        pm = super().prepare(model, **kw)
        if kw.get("cache_token") is not None:
            self._latest = model  # the defect: one slot for "the" cached compilation
        return pm

    def prepare_from_cache(self, cache_token, **kw):
        pm = super().prepare_from_cache(cache_token, **kw)  # files checked as the reference does
        latest = getattr(self, "_latest", None)
        return ReferencePreparedModel(latest) if latest is not None else pm


__all__ = [
    "BurstSnapshots",
    "WritesThenRejects",
    "InPlace",
    "ScribblesNatively",
    "ScribblesInputs",
    "OverrunsOutput",
    "OverrunsFar",
    "UnwrittenTail",
    "MostRecentCache",
]
