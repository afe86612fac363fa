"""A DELIBERATELY FRAGILE DRIVER, for testing ``nnconform fuzz``.  Never use it as a reference.

The reference driver with three planted bugs, in code that looks at a model before it is
validated (as a driver's graph import often does), so only invalid or odd models reach them:

    crash    a SOFTMAX whose input operand is a tensor of rank 0: the "kernel selector"
             indexes the last dimension of an empty shape and aborts the process (SIGABRT)
    hang     a CONCATENATION whose first input has 0 as its last dimension: the "tiling" loop
             never advances (a busy loop; the call never returns)
    memory   an operand with more than 2**28 elements: a scratch arena of 4 bytes per element
             of the largest operand is allocated up front, however large (under the fuzz
             host's RLIMIT_AS this ends in MemoryError; without one it eats the machine)

Name it on the command line as ``tests/drivers/fragile.py:FragileDevice``.
"""

from __future__ import annotations

import os

import numpy as np

from nnconform.drivers.reference import ReferenceDevice
from nnconform.ir import Model, OperationType

_TENSOR_CODES = {3, 4, 5, 7, 8, 9, 11, 12, 13, 14, 10001}
_ARENA_ELEMENTS = 1 << 28


def _operand(sg, k):
    return sg.operands[k] if isinstance(k, int) and 0 <= k < len(sg.operands) else None


def _softmax_kernel(o) -> None:
    if int(o.type) in _TENSOR_CODES and len(o.dimensions) == 0:
        os.abort()  # the planted crash: dimensions[-1] of an empty shape, in C


def _concat_tiles(o) -> int:
    dims = list(o.dimensions)
    if not dims or int(o.type) not in _TENSOR_CODES:
        return 0
    step, done, tiles = dims[-1], 0, 0
    while done < 4096:  # the planted hang: a zero step never reaches the end
        done += step
        tiles += 1
    return tiles


def _arena(sg) -> None:
    largest = 0
    for o in sg.operands:
        n = 1
        for d in o.dimensions:
            n *= max(int(d), 1)
        largest = max(largest, n)
    if largest > _ARENA_ELEMENTS:
        np.ones(largest * 4, np.uint8)  # the planted memory bug: sized by the model, unchecked


def _inspect(model: Model) -> None:
    sg = model.main
    _arena(sg)
    for op in sg.operations:
        first = _operand(sg, op.inputs[0]) if op.inputs else None
        if first is None:
            continue
        if op.type == OperationType.SOFTMAX:
            _softmax_kernel(first)
        elif op.type == OperationType.CONCATENATION:
            _concat_tiles(first)


class FragileDevice(ReferenceDevice):
    name = "nnconform-fragile"

    def supported_operations(self, model: Model) -> list[bool]:
        _inspect(model)
        return super().supported_operations(model)

    def prepare(self, model: Model, **kw):
        _inspect(model)
        return super().prepare(model, **kw)


__all__ = ["FragileDevice"]
