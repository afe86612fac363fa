"""Requantisation of integer accumulators by table lookup (quantised CONV_2D, DEPTHWISE_CONV_2D,
GROUPED_CONV_2D, FULLY_CONNECTED).

For one output channel, the stored output code is a function of the accumulator plus bias
x alone: R(x) = clamp(MultiplyByQuantizedMultiplier(x, m, shift) + zero_point, lo, hi).
With m >= 0, R never decreases as x grows: it is a chain of non-decreasing steps (x << left,
SaturatingRoundingDoublingHighMul by m >= 0, which is floor((y + 2**30) / 2**31) for every
sign, RoundingDivideByPOT, which rounds half away from zero, + zero point, clamp), and it is
clamped at both ends.  So R is lo for
every x up to some x_lo, hi for every x from some x_hi on, and in between it takes the
values of a window of about (hi - lo) / real_multiplier accumulators (25,600 for a
multiplier of 0.01).  The window's values, computed once by the step-by-step int64
formulation itself, make R a lookup: index = clamp(x - x_lo, 0, window - 1).

For a block of float accumulators (integers, exact) that is one addition (bias - x_lo,
tiled per channel), a max and a min against the window's ends, a conversion and a gather:
four to five cheap passes instead of a dozen int64 ones (numpy's int64 multiply does not
vectorise without AVX-512).  Tables are cached per (multiplier, shift, zero point, clamp
range), independent of the bias, so the layers of a model that share output parameters
share them; a table is only built when the tensor is at least as large as the table, so a
cold build costs no more than the direct requantisation would.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from .quant import multiply_by_quantized_multiplier

# Largest window (entries, all channels together) worth a table; wider windows (tiny
# multipliers) go through the arithmetic path.
MAX_ENTRIES = 1 << 20
# Elements per block: the block's index buffers stay in cache.
BLOCK = 1 << 14
# A table is built for a tensor of at least this many elements per table entry (tests set 0).
BUILD_ELEMENTS_PER_ENTRY = 1

_CHANNEL_CACHE: "OrderedDict[tuple, tuple[int, np.ndarray]]" = OrderedDict()
_CHANNEL_CACHE_SIZE = 256


def stepwise(x: np.ndarray, m: int, shift: int, zero_point: int, lo: int, hi: int) -> np.ndarray:
    """R(x) for int64 ``x``, one multiplier: the plain formulation the table reproduces."""
    return np.clip(multiply_by_quantized_multiplier(x, m, shift) + zero_point, lo, hi)


def _code(x: int, m: int, shift: int, zero_point: int, lo: int, hi: int) -> int:
    return int(stepwise(np.array([x], np.int64), m, shift, zero_point, lo, hi)[0])


def window(m: int, shift: int, zero_point: int, lo: int, hi: int) -> tuple[int, int]:
    """(x_lo, x_hi): R(x) == R(x_lo) for every x <= x_lo and R(x) == R(x_hi) for every
    x >= x_hi.  Found from the real multiplier and confirmed on the exact function (R is
    monotone, so R(x_lo) == lo proves the lower end; a zero multiplier is constant)."""
    if m == 0:
        return 0, 0
    real = m * 2.0 ** (shift - 31)
    x_lo = int(np.floor((lo - zero_point - 2) / real)) - 1
    step = 1
    while _code(x_lo, m, shift, zero_point, lo, hi) != lo:
        x_lo -= step
        step *= 2
    x_hi = int(np.ceil((hi - zero_point + 2) / real)) + 1
    step = 1
    while _code(x_hi, m, shift, zero_point, lo, hi) != hi:
        x_hi += step
        step *= 2
    return x_lo, x_hi


def channel_table(m: int, shift: int, zero_point: int, lo: int, hi: int, dtype) -> tuple[int, np.ndarray]:
    """(x_lo, codes of x_lo .. x_hi in ``dtype``), cached."""
    key = (m, shift, zero_point, lo, hi, np.dtype(dtype).str)
    hit = _CHANNEL_CACHE.get(key)
    if hit is not None:
        _CHANNEL_CACHE.move_to_end(key)
        return hit
    x_lo, x_hi = window(m, shift, zero_point, lo, hi)
    codes = stepwise(np.arange(x_lo, x_hi + 1, dtype=np.int64), m, shift, zero_point, lo, hi).astype(dtype)
    codes.setflags(write=False)
    _CHANNEL_CACHE[key] = hit = (x_lo, codes)
    if len(_CHANNEL_CACHE) > _CHANNEL_CACHE_SIZE:
        _CHANNEL_CACHE.popitem(last=False)
    return hit


def window_size(m: int, shift: int, zero_point: int, lo: int, hi: int) -> int:
    """Upper bound of the entries of one channel's window (no table built)."""
    return table_entries(np.array([m]), np.array([shift]), zero_point, lo, hi)


class Plan:
    """Everything a lookup needs for one (multipliers, shifts, zero point, clamp range, bias):
    the channels' tables concatenated and, per channel, the offset that turns an accumulator
    into an index (bias - x_lo + the table's start) and the index range."""

    def __init__(self, mult: np.ndarray, shift: np.ndarray, bias: np.ndarray, zero_point: int,
                 lo: int, hi: int, dtype):
        pairs = list(zip((int(v) for v in mult), (int(v) for v in shift)))
        starts: dict[tuple[int, int], tuple[int, int, int]] = {}   # pair -> (start, x_lo, length)
        parts = []
        total = 0
        for pair in pairs:
            if pair not in starts:
                x_lo, codes = channel_table(*pair, zero_point, lo, hi, dtype)
                starts[pair] = (total, x_lo, codes.size)
                parts.append(codes)
                total += codes.size
        self.table = np.concatenate(parts)
        start = np.array([starts[p][0] for p in pairs], np.int64)
        x_lo = np.array([starts[p][1] for p in pairs], np.int64)
        length = np.array([starts[p][2] for p in pairs], np.int64)
        self.offset = bias.astype(np.int64) - x_lo + start      # index = x + offset
        self.first, self.last = start, start + length - 1
        # |acc| + this stays within the float dtype's integers: every index sum is exact
        self.offset_bound = int(np.abs(self.offset).max()) + int(self.last.max())
        self._tiled: dict = {}

    def tiled(self, channels: int, length: int, ftype) -> tuple:
        """offset/first/last tiled over a block of ``length`` (whole rows of ``channels``).
        Arrays even per tensor: numpy's max/min against a scalar do not vectorise, against
        an array they run about 5x faster."""
        key = (length, np.dtype(ftype).str)
        hit = self._tiled.get(key)
        if hit is None:
            reps = -(-length // channels)

            def tile(v):
                return np.ascontiguousarray(np.tile(v.astype(ftype), reps)[:length])
            hit = (tile(self.offset), tile(self.first), tile(self.last))
            self._tiled.clear()
            self._tiled[key] = hit
        return hit

    def apply(self, acc: np.ndarray, dtype) -> np.ndarray:
        """Output codes of float accumulators ``acc`` [..., channels]."""
        ftype = acc.dtype.type
        channels = acc.shape[-1]
        flat = np.ascontiguousarray(acc).reshape(-1)
        result = np.empty(acc.shape, dtype=dtype)
        rflat = result.reshape(-1)
        rows = max(1, BLOCK // max(channels, 1))
        length = min(rows * channels, flat.size)
        off, first, last = self.tiled(channels, length, ftype)
        fbuf = np.empty(length, ftype)
        i32 = np.empty(length, np.int32)
        ibuf = np.empty(length, np.intp)
        for start in range(0, flat.size, length):
            k = min(length, flat.size - start)
            v, i, idx = fbuf[:k], i32[:k], ibuf[:k]
            np.add(flat[start:start + k], off[:k], out=v)
            np.maximum(v, first[:k], out=v)
            np.minimum(v, last[:k], out=v)
            # exact: integers within the table.  Through int32 (a vectorised conversion)
            # and then to intp: faster than float to intp, and than take() on int32 indexes
            np.copyto(i, v, casting="unsafe")
            np.copyto(idx, i)
            self.table.take(idx, out=rflat[start:start + k], mode="clip")
        return result


def table_entries(mult: np.ndarray, shift: np.ndarray, zero_point: int, lo: int, hi: int) -> int:
    """Total table entries the distinct (multiplier, shift) pairs would need (vectorised:
    a FULLY_CONNECTED layer has a pair per unit)."""
    pairs = np.unique(np.stack([np.asarray(mult, np.int64), np.asarray(shift, np.int64)]), axis=1)
    m, sh = pairs[0], pairs[1]
    real = m * np.exp2(sh.astype(np.float64) - 31)
    with np.errstate(divide="ignore"):
        sizes = np.where(m == 0, 1, np.ceil((hi - lo + 4) / np.where(m == 0, 1.0, real)) + 5)
    return int(min(sizes.sum(), float(1 << 62)))
