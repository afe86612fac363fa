"""A DELIBERATELY FRAGILE DRIVER, for testing how ``nnconform fuzz`` spends its budget (issue 47).
Never use it as a reference, and load it only through a driver host: it hangs, segfaults and
aborts its own process ON PURPOSE.

The reference driver with three planted bugs in the code that looks at a model before it is
validated.  One of them is frequent and expensive, two are rarer and cheap; the order of the
checks lets the frequent one hide the others (a model that has both hangs):

    hang      (frequent) a tensor operand with a 0 among its dimensions: the "tiling" loop
              steps by that dimension and never reaches the end (a busy loop)
    segfault  (rarer) an operation whose input index is far outside the operand table
              (65,536 or more): the table is read through that index, into unmapped
              memory (SIGSEGV); a small out-of-range index is caught by a bounds check
    abort     (rarer) a TENSOR_QUANT8_ASYMM(_SIGNED) operand whose scale is NaN: the
              "requantizer" asserts on its multiplier (SIGABRT)

A fuzzer that waits out the hang at every repeat never gets to the crashes; one that steers
away from zero dimensions once the hang is known, and bounds a predicted repeat short, does.

Name it on the command line as ``tests/drivers/fragile_trio.py:TrioDevice``.
"""

from __future__ import annotations

import ctypes
import math
import os

from nnconform.drivers.reference import ReferenceDevice
from nnconform.ir import Model

_TENSOR_CODES = {3, 4, 5, 7, 8, 9, 11, 12, 13, 14}
_QUANT8_ASYMM = {5, 14}
_FAR = 1 << 16


def _tile_loop(o) -> int:
    step, done, tiles = min(o.dimensions), 0, 0
    while done < 4096:  # the planted hang: a zero step never reaches the end
        done += step
        tiles += 1
    return tiles


def _read_operand_table(index: int) -> None:
    # the planted segfault: a far index passes the "fast path" unchecked; the read lands in
    # unmapped memory (the first pages of the address space are never mapped)
    ctypes.string_at(8 * (index - _FAR), 8)


def _requantize(o) -> None:
    if math.isnan(o.scale):
        os.abort()  # the planted abort: an assertion on the multiplier, in C


def _code(x) -> int:
    try:
        return int(x)
    except (TypeError, ValueError):
        return -1


def _inspect(model: Model) -> None:
    sg = model.main
    for o in sg.operands:
        if _code(o.type) in _TENSOR_CODES and o.dimensions and 0 in o.dimensions:
            _tile_loop(o)
    for op in sg.operations:
        for k in op.inputs:
            if isinstance(k, int) and k >= _FAR:
                _read_operand_table(k)
    for o in sg.operands:
        if _code(o.type) in _QUANT8_ASYMM:
            _requantize(o)


class TrioDevice(ReferenceDevice):
    name = "nnconform-fragile-trio"

    def supported_operations(self, model: Model) -> list[bool]:
        _inspect(model)
        return super().supported_operations(model)

    def prepare(self, model: Model, **kw):
        _inspect(model)
        return super().prepare(model, **kw)


__all__ = ["TrioDevice"]
