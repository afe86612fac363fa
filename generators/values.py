"""Operand values for random models (CTS ``RandomGraphGenerator`` value rules, plus edge values).

``fill(rng, type, dims, ...)`` returns an array in the operand type's storage dtype:

- floats: U(-2, 2), or U(lo, hi) when the signature narrows the range (LOG's input is
  positive, DIV's divisor keeps away from zero);
- TENSOR_INT32: U[0, 255] (CTS), or [lo, hi];
- ``nonzero``: a divisor: floats keep |x| >= 0.25, integers avoid 0;
- quantised: the whole stored range of the type (a signature may narrow it);
- TENSOR_BOOL8: Bernoulli(0.5).

``edge=True`` replaces about a third of the elements by values that trip implementations up:
exact zeros of both signs, +-1, +-2, small and tiny magnitudes, and for the integer and
quantised types the ends of the range.  Besides, a float tensor gets (one time in two) a
single element of a magnitude beyond the float16 range: an fp32 operation computed in half
precision turns it into inf, which shows wherever it meets a small weight and the exact result
stays moderate (|e| <= 1e3, so the random-graph criteria do not skip it).  Only one per
tensor: two such terms in one sum cancel catastrophically (1e10 - 1e10 + 4), and then a
correct fp32 implementation differs from the reference by far more than any tolerance, which
would blame drivers for an ill-conditioned test.  A signature's own value range
still holds (edge values outside its [lo, hi] are not used); the default U(-2, 2) does not limit them.  The reference never needs to produce NaN
from them: the graph builder drops any operation whose reference output has a NaN.
"""
from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T, type_info

FLOAT_RANGE = (-2.0, 2.0)
INT32_RANGE = (0, 255)
EDGE_FRACTION = 1 / 3

_FLOAT_EDGES = {
    T.TENSOR_FLOAT32: (0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 1e-3, -1e-3, 1e-7, -1e-7),
    T.TENSOR_FLOAT16: (0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 1e-3, -1e-3, 6.0e-8, -6.0e-8),
}
# At most one element per tensor (see the module docstring).
_HUGE = {
    T.TENSOR_FLOAT32: (7.0e4, -7.0e4, 1.0e5),
    T.TENSOR_FLOAT16: (6.0e4, -6.0e4),
}
_QUANT_RANGE = {
    T.TENSOR_QUANT8_ASYMM: (0, 255),
    T.TENSOR_QUANT8_ASYMM_SIGNED: (-128, 127),
    T.TENSOR_QUANT8_SYMM: (-127, 127),
    T.TENSOR_QUANT16_ASYMM: (0, 65535),
    T.TENSOR_QUANT16_SYMM: (-32768, 32767),
}


def stored_range(t: T) -> tuple[int, int]:
    """The full range of stored values of a quantised type."""
    return _QUANT_RANGE[T(t)]


def fill(rng: np.random.Generator, t: T, dims, lo: float | None = None, hi: float | None = None,
         edge: bool = False, nonzero: bool = False) -> np.ndarray:
    t = T(t)
    info = type_info(t)
    dims = tuple(int(d) for d in dims)
    n = int(np.prod(dims)) if dims else 1
    if info.is_float:
        a, b = (FLOAT_RANGE[0] if lo is None else lo), (FLOAT_RANGE[1] if hi is None else hi)
        flat = rng.uniform(a, b, n)
        # The default range does not limit edge values; a signature's own range does.
        def in_range(e: float) -> bool:
            return (lo is None or lo <= e) and (hi is None or e <= hi)
        edges = [e for e in _FLOAT_EDGES.get(t, _FLOAT_EDGES[T.TENSOR_FLOAT16]) if in_range(e)]
        huge = [e for e in _HUGE.get(t, ()) if in_range(e)]
    elif t in (T.TENSOR_BOOL8, T.BOOL):
        flat = rng.random(n) < 0.5
        edges, huge = [], []
    else:
        if t in (T.TENSOR_INT32, T.INT32):
            a, b = INT32_RANGE
        else:
            a, b = stored_range(t)
        a, b = (a if lo is None else int(lo)), (b if hi is None else int(hi))
        flat = rng.integers(a, b, n, endpoint=True)
        edges = sorted({a, b, min(max(0, a), b), min(max(1, a), b)})
        huge = []
    if edge and edges and n:
        mask = rng.random(n) < EDGE_FRACTION
        flat = np.where(mask, rng.choice(np.asarray(edges, dtype=np.float64), n), flat)
    if edge and huge and n and rng.random() < 0.5:
        flat = np.array(flat, dtype=np.float64)
        flat[rng.integers(n)] = rng.choice(np.asarray(huge, dtype=np.float64))
    if nonzero:
        # Divisors: floats keep |x| >= 0.25 (no inf from a tiny divisor), integers avoid 0.
        if info.is_float:
            flat = np.where(np.abs(flat) < 0.25, np.where(flat < 0, -0.25, 0.25), flat)
        else:
            flat = np.where(flat == 0, 1, flat)
    arr = np.asarray(flat).astype(info.dtype)
    return arr.reshape(dims) if not info.is_scalar else arr.reshape(())
