"""Aliasing check: the results of one execution must not change after the next (issue 20).

A driver that hands out the same output arrays from every execution and overwrites them on
the next one passes every single-execution check and every "repeat" check that compares
array references; its clients see their earlier results change under them.
``check_aliasing(device, model, inputs_a, inputs_b)`` prepares ``model`` once, executes it on
``inputs_a``, copies the outputs it got, executes it on ``inputs_b``, and reports, as one
line, every output of the first execution whose contents changed (or ``None``).

Behind the driver host (the default isolation) every reply is decoded into fresh arrays, so
no harness-side reference can alias a driver buffer.  The host watches instead, in the
driver's own process: it keeps the arrays of each prepared model's last result with a copy of
their bytes, and after the next execution reports the outputs whose arrays changed
(``RemotePreparedModel.aliased_outputs``).  In-process, the held arrays show it directly.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from nnconform.driver import Device
from nnconform.ir import Model, Request


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def check_aliasing(
    device: Device, model: Model, inputs_a: Sequence[np.ndarray], inputs_b: Sequence[np.ndarray]
) -> str | None:
    """None when the first execution's outputs survive the second; else why not.  Driver
    errors propagate (the caller's verdict)."""
    prepared = device.prepare(model)
    try:
        first = prepared.execute(Request.from_arrays(model, list(inputs_a)))
        held = list(first.outputs)
        snapshot = [np.array(o, copy=True) for o in held]
        second = prepared.execute(Request.from_arrays(model, list(inputs_b)))
        in_host = list(getattr(prepared, "aliased_outputs", None) or [])
    finally:
        release = getattr(prepared, "release", None)
        if callable(release):
            release()
    changed = [i for i, (h, s) in enumerate(zip(held, snapshot)) if not _same(np.asarray(h), s)]
    if in_host and not changed:
        return (
            f"aliasing: output(s) {in_host} of execution 1 were overwritten by execution 2 on other "
            f"inputs, inside the driver host (the driver reuses its output arrays; results must stay "
            f"valid after the next execution)"
        )
    if not changed:
        return None
    shared = [
        i
        for i in changed
        if i < len(second.outputs) and np.shares_memory(np.asarray(held[i]), np.asarray(second.outputs[i]))
    ]
    return (
        f"aliasing: output(s) {changed} of execution 1 changed after execution 2 on other inputs"
        + (f"; output(s) {shared} of both executions share one buffer" if shared else "")
        + " (the driver reuses its output arrays; results must stay valid after the next execution)"
    )
