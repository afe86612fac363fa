"""DELIBERATELY BROKEN DRIVERS, for testing the harness itself.  Never use them as references.

Each is the reference driver with one defect that a vts security/robustness case must catch
(tests/test_vts_security.py checks that exactly that case fails):

    AcceptsCycle          the graph check treats operations that depend on each other as
                          already ordered: a model whose operations form a cycle is reported
                          supported and prepared (-> vts/device/cycle)
    SharedOutputBuffer    executions accept one device buffer as two outputs (the last write
                          wins) -> vts/memory_domain/shared_buffer
    BurstDoubleFree       freeing a burst memory slot twice frees the underlying memory twice:
                          the process aborts, as a C driver would -> vts/burst/memory_slots (CRASH)

Name them on the command line as ``tests/drivers/broken_security.py:AcceptsCycle``.
"""

from __future__ import annotations

import os

from nnconform.drivers.reference import ReferenceBurst, ReferenceDevice, ReferencePreparedModel
from nnconform.ir import Model


def has_cycle(model: Model) -> bool:
    """Do the main graph's operations depend on each other in a cycle?  (Kahn's algorithm over
    operations linked by the operands one writes and another reads.)"""
    sg = model.main
    writer = {}
    for j, op in enumerate(sg.operations):
        for o in op.outputs:
            writer[o] = j
    deps = [{writer[i] for i in op.inputs if i in writer} for op in sg.operations]
    done: set[int] = set()
    progress = True
    while progress:
        progress = False
        for j, d in enumerate(deps):
            if j not in done and d <= done:
                done.add(j)
                progress = True
    return len(done) < len(deps)


class AcceptsCycle(ReferenceDevice):
    name = "broken-accepts-cycle"

    def supported_operations(self, model: Model) -> list[bool]:
        if has_cycle(model):
            return [True] * len(model.main.operations)  # the defect
        return super().supported_operations(model)

    def prepare(self, model: Model, **kw):
        if has_cycle(model):
            return ReferencePreparedModel(model)  # the defect: execution would fail later
        return super().prepare(model, **kw)


class _SharedOutputPrepared(ReferencePreparedModel):
    def _device_memory(self, request):
        # the defect: the duplicate-output check is skipped (inputs and outputs stay checked)
        import dataclasses

        outs = list(request.outputs)
        seen: dict[int, int] = {}
        for pos, arg in enumerate(outs):
            if arg.memory is not None:
                if int(arg.memory) in seen:
                    outs[pos] = dataclasses.replace(arg, memory=None)  # written twice, kept once
                seen.setdefault(int(arg.memory), pos)
        ins, found = super()._device_memory(dataclasses.replace(request, outputs=tuple(outs)))
        return ins, found


class SharedOutputBuffer(ReferenceDevice):
    name = "broken-shared-output-buffer"

    def prepare(self, model: Model, **kw):
        return _SharedOutputPrepared(super().prepare(model, **kw).model)


class _DoubleFreeBurst(ReferenceBurst):
    def __init__(self, prepared):
        super().__init__(prepared)
        self._ever: set[int] = set()

    def cache_memory(self, token: int) -> int:
        slot = super().cache_memory(token)
        self._ever.add(slot)
        return slot

    def free_memory(self, slot: int) -> None:
        if slot in self._ever and slot not in self._slots:
            os.abort()  # the defect: the slot's memory is freed a second time
        super().free_memory(slot)


class _DoubleFreePrepared(ReferencePreparedModel):
    def configure_burst(self):
        super().configure_burst()
        return _DoubleFreeBurst(self)


class BurstDoubleFree(ReferenceDevice):
    name = "broken-burst-double-free"

    def prepare(self, model: Model, **kw):
        return _DoubleFreePrepared(super().prepare(model, **kw).model)


__all__ = ["AcceptsCycle", "SharedOutputBuffer", "BurstDoubleFree", "has_cycle"]
