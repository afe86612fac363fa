"""Fused activation functions (the trailing INT32 'activation' input of many operations)."""

from __future__ import annotations

import functools

import numpy as np

try:  # the ufunc np.clip calls (numpy 2), without the ~5-10 us of its Python wrappers
    from numpy._core.umath import clip as _clip
except ImportError:  # numpy 1.x
    from numpy.core.umath import clip as _clip

from nnconform.ir import Operand
from nnconform.reference.arith.quant import QUANT_RANGE, round_half_away

NONE, RELU, RELU1, RELU6 = 0, 1, 2, 3
FUSED_ACTIVATIONS = (NONE, RELU, RELU1, RELU6)

_FLOAT_BOUNDS = {NONE: (-np.inf, np.inf), RELU: (0.0, np.inf), RELU1: (-1.0, 1.0), RELU6: (0.0, 6.0)}


def float_bounds(activation: int) -> tuple[float, float]:
    return _FLOAT_BOUNDS[activation]


def apply_float(x: np.ndarray, activation: int, in_place: bool = False) -> np.ndarray:
    """The activation's clamp; ``in_place``: x is the caller's own fresh result and may be
    overwritten (no second output array to allocate and fill)."""
    lo, hi = _FLOAT_BOUNDS[activation]
    if activation == NONE:
        return x
    # np.clip with both bounds is this call (numpy's _methods._clip): the same bits
    return _clip(x, x.dtype.type(lo), x.dtype.type(hi), out=x if in_place else None)


def quant_bounds(activation: int, out: Operand) -> tuple[int, int]:
    """NNAPI CalculateActivationRange for a quantised output: the activation's real bounds
    quantised with std::round and intersected with the type's range."""
    return _quant_bounds(activation, out.type, float(out.scale), int(out.zero_point))


@functools.lru_cache(maxsize=1024)
def _quant_bounds(activation: int, type_, scale: float, zero_point: int) -> tuple[int, int]:
    # cached: every quantised operation with an activation asks each run (~5-10 us of
    # float32 scalars and rounding a call), always for the same few parameter sets
    qmin, qmax = QUANT_RANGE[type_]

    def q(f: float) -> int:
        # float32 division, as the reference does: it decides which side of a .5 tie a
        # bound falls on.
        return zero_point + round_half_away(float(np.float32(f) / np.float32(scale)))

    if activation == RELU:
        return max(qmin, q(0.0)), qmax
    if activation == RELU6:
        return max(qmin, q(0.0)), min(qmax, q(6.0))
    if activation == RELU1:
        return max(qmin, q(-1.0)), min(qmax, q(1.0))
    return qmin, qmax


def apply_quant(acc: np.ndarray, activation: int, out: Operand) -> np.ndarray:
    """Clamp int64 results (already offset by the output zero point) and store."""
    lo, hi = quant_bounds(activation, out)
    return np.clip(acc, lo, hi).astype(out.info.dtype)
