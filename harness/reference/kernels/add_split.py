"""Quantised 8-bit ADD/SUB as byte tables of each input and a carry between them.

Why: the exact 65,536-entry table (lut.py) costs one dependent load an element, ~3x
onnxruntime's vectorised float formula, and that formula is not exact (its ties are decided
by the rounding inside the fixed-point kernel).  This module rewrites the exact kernel so
that each input contributes through tables of 256 bytes, which a CPU with byte permutes
(AVX-512 VBMI: 64 lookups in a 128-byte table per instruction) reads 64 elements at a time
(jit.split_add).  Nothing is approximated: the tables are derived in exact integers, and
lut.py checks the compiled kernel on all 65,536 input pairs before it uses it.

The kernel (add_sub.py): each input's code rescaled to an exact integer, t1 = T1[a] and
t2 = T2[b] (a function of one byte each); their sum s rescaled by SRDHM(s, Mo), which is
floor((s * Mo + 2**30) / 2**31), then divided by 2**e rounding half away from zero, plus the
output zero point zo, clamped.  With D = 2**(e + 31), the output is at least zo + k:
- for k >= 1 exactly when  s*Mo + 2**30 + 2**(e+30)          >= k * D,
- for k <= 0 exactly when  s*Mo + 2**30 + 2**(e+30) - 2**31  >= k * D
  (at or below the zero point, a half goes down, away from zero: one more unit needed).
So with N1 = t1*Mo + 2**30 + 2**(e+30) (less 2**31 for the second) and N2 = t2*Mo:
  G+ = floor((N1 + N2) / D),  G- = floor((N1 - 2**31 + N2) / D),
  output = clamp(zo + (G+ if G+ >= 1 else G-)).
(With e = 0 nothing is halved and G- is G+.)
Each floor of a sum splits: with N1 = P1*D + r1 and N2 = P2*D + r2 (0 <= r < D),
floor((N1 + N2) / D) = P1 + P2 + [r1 + r2 >= D].  The carry compares r2 with D - r1; as
the rank of r2 among r2's distinct values against the count of those values below D - r1,
it is a comparison of two bytes: carry when rank > count - 1.  The count is at least 1,
since b at its zero point gives t2 = 0 and r2 = 0, so count - 1 fits a byte.

Tables (uint8 [9, 256], by byte pattern: int8 -128..-1 at 128..255):
  0, 1: zo + P1 for G+ (low, high byte of an int16)   2, 3: the same for G-
  4: the count for G+   5: the count for G-   (input 0's byte)
  6, 7: P2 (low, high byte)   8: the rank of r2   (input 1's byte)
  G+ = w(0,1)[a] + w(6,7)[b] + (t8[b] > t4[a]) - zo, and G- alike with 2, 3, 5.
The int16 parts stay within +-2**14, so no sum of them wraps; a quantisation outside that
(an output scale thousands of times finer than an input's) gets no tables.
"""

from __future__ import annotations

import numpy as np

TABLES = 9
_PART_LIMIT = 1 << 14


def split_tables(t1: np.ndarray, t2: np.ndarray, mo: int, eo: int, zo: int) -> np.ndarray | None:
    """The nine byte tables of a quantised ADD/SUB from each input's exact rescaled value
    for every byte pattern (``t1``, ``t2``: int64 [256]; add_sub's T1, T2, SUB's already
    negated) and the output multiplier and shift, or None where a part would leave the
    int16 range."""
    e = -int(eo)
    if e < 0:
        return None
    d = np.int64(1) << np.int64(e + 31)
    # |t| < 2**28 and |mo| < 2**31: every product and sum below is within int64.
    n2 = t2.astype(np.int64) * np.int64(mo)
    p2, r2 = np.divmod(n2, d)
    distinct = np.unique(r2)
    tables = np.empty((TABLES, 256), np.uint8)
    tables[8] = np.searchsorted(distinct, r2)  # rank of r2, 0..255
    parts = [p2]
    n1 = t1.astype(np.int64) * np.int64(mo)
    base = np.int64(1 << 30) + (np.int64(1) << np.int64(e + 30) if e else np.int64(0))
    for row, less in ((0, 0), (2, (1 << 31) if e else 0)):
        p1, r1 = np.divmod(n1 + (base - np.int64(less)), d)
        count = np.searchsorted(distinct, d - r1)  # r2 values below D - r1
        if count.min() < 1:  # (no zero point among t2's codes: not a quantised input)
            return None
        p1 = p1 + zo
        tables[row], tables[row + 1] = _bytes(p1)
        tables[4 + row // 2] = count - 1  # carry: rank > this
        parts.append(p1)
    tables[6], tables[7] = _bytes(p2)
    if any(p.min() < -_PART_LIMIT or p.max() >= _PART_LIMIT for p in parts):
        return None
    return tables


def _bytes(part: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    w = part.astype(np.int16).view(np.uint16)
    return (w & 0xFF).astype(np.uint8), (w >> 8).astype(np.uint8)


def _word(tables: np.ndarray, row: int) -> np.ndarray:
    return (tables[row].astype(np.uint16) | (tables[row + 1].astype(np.uint16) << 8)).view(np.int16).astype(np.int32)


def evaluate(tables: np.ndarray, a: np.ndarray, b: np.ndarray, zo: int, lo: int, hi: int) -> np.ndarray:
    """What jit.split_add computes, in numpy (int32, before narrowing): for byte patterns
    ``a`` and ``b`` (uint8 views), clamp(zo + (G+ if G+ >= 1 else G-), lo, hi), as above."""
    a, b = a.astype(np.intp), b.astype(np.intp)
    rank = tables[8][b]
    plus = _word(tables, 0)[a] + _word(tables, 6)[b] + (rank > tables[4][a])
    minus = _word(tables, 2)[a] + _word(tables, 6)[b] + (rank > tables[5][a])
    return np.clip(np.where(plus > zo, plus, minus), lo, hi)
