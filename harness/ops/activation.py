"""Fused activation functions (the trailing INT32 'activation' input of many operations)."""
from __future__ import annotations

import numpy as np

from ..ir import Operand
from .quant import quant_range, round_half_away

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
    return np.clip(x, x.dtype.type(lo), x.dtype.type(hi), out=x if in_place else None)


def quant_bounds(activation: int, out: Operand) -> tuple[int, int]:
    """NNAPI CalculateActivationRange for a quantised output: the activation's real bounds
    quantised with std::round and intersected with the type's range."""
    qmin, qmax = quant_range(out)

    def q(f: float) -> int:
        # float32 division, as the reference does: it decides which side of a .5 tie a
        # bound falls on.
        return out.zero_point + round_half_away(float(np.float32(f) / np.float32(out.scale)))

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
