"""Exact lookup tables for quantised 8-bit element-wise kernels.

A quantised 8-bit element-wise operation's output element depends only on the stored input
byte(s), so its fixed-point kernel, evaluated once over all 256 (unary) or 65,536 (binary)
inputs, gives a table that reproduces it bit for bit.  For a large tensor, one gather from
that table replaces a dozen int64 passes of fixed-point arithmetic.  That is why quantised
ADD runs near memory speed.

Quantised ADD/SUB may also give its kernel as add_split.py's byte tables of each input:
where the CPU has byte permutes, the compiled kernel reads them 64 elements at a time, once
it has given this table's every entry.

Tables are laid out over the byte patterns 0..255 (-128..-1 of int8 sit at 128..255), so
any 8-bit input indexes them through its uint8 view, with no arithmetic.  Tables are cached by a key that must name every
parameter the kernel depends on (scales, zero points, activation, ...).
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict
from typing import Callable, Hashable, NamedTuple

import numpy as np

from nnconform.reference.kernels import jit

# Below this many output elements the direct kernel is as cheap as building a table, for
# one call.  A key asked for again (a model executed again: a benchmark, the models suite, a
# vector's variants) gets its table whatever the size: a small tensor's direct kernel is a
# dozen numpy calls (~100 us), its gather a few microseconds, and the build (~2 ms for a
# binary table) is paid once per parameter set.
BINARY_MIN_ELEMENTS = 1 << 16
UNARY_MIN_ELEMENTS = 1 << 10
_log = logging.getLogger(__name__)
_CACHE_SIZE = 128
_cache: "OrderedDict[Hashable, np.ndarray]" = OrderedDict()
_SEEN_SIZE = 1024
_seen: "OrderedDict[Hashable, None]" = OrderedDict()


def _domain(dtype: np.dtype) -> np.ndarray:
    """Every value of an 8-bit dtype, in byte-pattern order 0..255."""
    return np.arange(256, dtype=np.uint8).view(dtype)


def _table(key: Hashable, build: Callable[[], np.ndarray]) -> np.ndarray:
    table = _cache.get(key)
    if table is None:
        table = build()
        _cache[key] = table
        if len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    else:
        _cache.move_to_end(key)
    return table


def _wanted(key: Hashable, size: int, minimum: int) -> bool:
    """Whether to go through the table: large enough to pay for it in one call, already
    built, or asked for before."""
    if size >= minimum or key in _cache or key in _seen:
        return True
    _seen[key] = None
    if len(_seen) > _SEEN_SIZE:
        _seen.popitem(last=False)
    return False


def is_byte(*arrays: np.ndarray) -> bool:
    return all(a.dtype in (np.uint8, np.int8) for a in arrays)


def unary(key: Hashable, kernel: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    """kernel(x) for an 8-bit x: through a 256-entry table when x is large enough or the
    key was asked for before."""
    if not is_byte(x):
        return kernel(x)
    key = (key, x.dtype.str)
    if not _wanted(key, x.size, UNARY_MIN_ELEMENTS):
        return kernel(x)
    table = _table(key, lambda: kernel(_domain(x.dtype)))
    return table.take(x.view(np.uint8))


class Split(NamedTuple):
    """A binary kernel rewritten as add_split's byte tables (None: not representable) and
    the output's zero point and clamp bounds."""

    tables: np.ndarray | None
    zero_point: int
    lo: int
    hi: int


def _checked_split(parts: Split, table: np.ndarray) -> Split:
    """``parts`` if the compiled split kernel gives ``table``'s every entry (65,536 pairs, ~20
    us, once per key), else the same with no tables: the gather stays exact, whatever the
    derivation in add_split.py missed (logged: that would be a harness bug)."""
    if parts.tables is None:
        return parts
    rows = np.repeat(np.arange(256, dtype=np.uint8), 256)
    cols = np.tile(np.arange(256, dtype=np.uint8), 256)
    got = jit.split_add(parts.tables, table, rows, cols, parts.zero_point, parts.lo, parts.hi, table.dtype)
    if np.array_equal(got, table.reshape(-1)):
        return parts
    _log.warning(
        "split ADD tables differ from the exact table in %d of 65536 entries; using the table",
        int(np.count_nonzero(got != table.reshape(-1))),
    )
    return parts._replace(tables=None)


def binary(
    key: Hashable,
    kernel: Callable[[np.ndarray, np.ndarray], np.ndarray],
    a: np.ndarray,
    b: np.ndarray,
    split: Callable[[np.dtype, np.dtype], Split] | None = None,
) -> np.ndarray:
    """kernel(a, b) for 8-bit a, b (numpy-broadcast): through a 256x256 table when the output
    is large enough or the key was asked for before.  ``split`` (quantised ADD/SUB): the
    same kernel as byte tables, which the compiled permute kernel reads where the CPU has
    it and it gives the table's every entry."""
    if not is_byte(a, b):
        return kernel(a, b)
    key = (key, a.dtype.str, b.dtype.str)
    # (np.broadcast_shapes costs ~10 us: it builds arrays to broadcast)
    size = a.size if a.shape == b.shape else math.prod(np.broadcast_shapes(a.shape, b.shape))
    if not _wanted(key, size, BINARY_MIN_ELEMENTS):
        return kernel(a, b)

    def build() -> np.ndarray:
        da, db = _domain(a.dtype), _domain(b.dtype)
        return kernel(da[:, None], db[None, :])

    table = _table(key, build)
    if a.shape == b.shape and jit.worth(size, at=1):  # ~2 us a call: pays at any size
        if split is not None and jit.byte_permutes():
            parts = _table((key, "split"), lambda: _checked_split(split(a.dtype, b.dtype), table))
            if parts.tables is not None:
                return jit.split_add(
                    parts.tables,
                    table,
                    a.view(np.uint8),
                    b.view(np.uint8),
                    parts.zero_point,
                    parts.lo,
                    parts.hi,
                    table.dtype,
                )
        return jit.gather_pairs(table, a.view(np.uint8), b.view(np.uint8))
    # One flat uint16 index (a's byte pattern in the high byte) and one take: about 3x faster
    # than numpy's two-array fancy indexing table[a, b].
    idx = (a.view(np.uint8).astype(np.uint16) << 8) | b.view(np.uint8)
    return table.reshape(-1).take(idx)
