"""DELIBERATELY BROKEN DRIVERS for the benchmark's own tests.  Never use them as references.

Each is the reference driver with one defect ``nnconform bench`` must see:

    CachesResults   remembers each input's outputs: a repeated input is answered from memory
                    at once, a new one is computed (and takes MISS_S longer, like a real
                    accelerator would): the result-cache audit must fail it
    LowPrecision    computes float32 models with every float32 weight rounded to KEEP_BITS
                    mantissa bits (an accelerator running an fp32 model in a narrow format
                    without being allowed to): accuracy must fail and be traced to the first
                    operation with such weights
    RefusesSoftmax  refuses SOFTMAX, so every classifier falls back partly to the CPU: the
                    fall-back gate must fail a model that had to run wholly on it
    SlowDown        at least twice as slow: after computing, it sleeps as long as that took,
                    and never less than MIN_SLEEP_S, so that the slowdown stands out of a loaded
                    machine's noise; --baseline must classify it as FAIL

Name them as ``tests/drivers/broken_bench.py:CachesResults``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time

import numpy as np

from nnconform.drivers.reference import ReferenceDevice, ReferencePreparedModel
from nnconform.ir import OperandType as T


class _CachingPrepared(ReferencePreparedModel):
    MISS_S = 0.03

    def __init__(self, model):
        super().__init__(model)
        self._memo = {}

    def execute(self, request, **kw):
        h = hashlib.sha256()
        for a in request.inputs:
            if a.value is not None:
                h.update(np.ascontiguousarray(a.value).tobytes())
        key = h.digest()
        if key not in self._memo:
            time.sleep(self.MISS_S)
            self._memo[key] = super().execute(request, **kw)
        return self._memo[key]


class CachesResults(ReferenceDevice):
    name = "broken-bench-caches-results"

    def prepare(self, model, **kw):
        super().prepare(model, **kw)  # the argument checks (and a cache token's save)
        return _CachingPrepared(model)


def _narrow(a: np.ndarray, keep_bits: int) -> np.ndarray:
    """float32 values rounded to ``keep_bits`` mantissa bits (round to nearest)."""
    drop = 23 - keep_bits
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + (1 << (drop - 1))) >> drop) << drop
    return u.astype(np.uint32).view(np.float32).reshape(a.shape)


class LowPrecision(ReferenceDevice):
    name = "broken-bench-low-precision"
    KEEP_BITS = 3

    def prepare(self, model, **kw):
        sg = model.main
        ops = tuple(
            dataclasses.replace(o, value=_narrow(np.asarray(o.value), self.KEEP_BITS))
            if o.type == T.TENSOR_FLOAT32 and o.is_constant and o.value is not None
            else o
            for o in sg.operands
        )
        narrowed = dataclasses.replace(model, main=dataclasses.replace(sg, operands=ops))
        return super().prepare(narrowed, **kw)


class RefusesSoftmax(ReferenceDevice):
    name = "broken-bench-refuses-softmax"

    def supported_operations(self, model):
        full = super().supported_operations(model)
        return [bool(s) and model.main.operations[k].name != "SOFTMAX" for k, s in enumerate(full)]


class _SlowPrepared(ReferencePreparedModel):
    MIN_SLEEP_S = 0.05

    def execute(self, request, **kw):
        t0 = time.perf_counter()
        res = super().execute(request, **kw)
        time.sleep(max(time.perf_counter() - t0, self.MIN_SLEEP_S))
        return res


class SlowDown(ReferenceDevice):
    name = "nnconform-reference"  # the same device as the baseline's, only slower

    def prepare(self, model, **kw):
        super().prepare(model, **kw)
        return _SlowPrepared(model)
