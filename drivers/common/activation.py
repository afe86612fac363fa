"""NNAPI's fused activations (NONE, RELU, RELU1, RELU6) as bounds an adapter clamps to.

The bounds are the reference's (``nnconform.reference.arith.activation``): real bounds for floats, and
for quantised outputs the real bounds quantised with the output's scale and zero point and
intersected with the type's range.  What differs per runtime is only how it clamps.
"""

from __future__ import annotations

import math

from nnconform.driver.support import Unsupported
from nnconform.ir import Operand
from nnconform.reference.arith import activation as nn_activation
from nnconform.reference.arith.quant import QUANT_RANGE

__all__ = ["NONE", "RELU", "check", "float_bounds", "quant_bounds"]

NONE, RELU = nn_activation.NONE, nn_activation.RELU


def check(act: int) -> int:
    """``act`` when it is a FuseCode NNAPI defines (0..3), else Unsupported."""
    if act not in nn_activation.FUSED_ACTIVATIONS:
        raise Unsupported(f"fused activation {act}")
    return act


def float_bounds(act: int) -> tuple[float | None, float | None] | None:
    """The clamp of a float result: None for NONE (nothing to do), else (low, high) with None
    for an unbounded side (RELU has no upper bound)."""
    if check(act) == NONE:
        return None
    lo, hi = nn_activation.float_bounds(act)
    return (None if math.isinf(lo) else lo), (None if math.isinf(hi) else hi)


def quant_bounds(act: int, out: Operand) -> tuple[int, int] | None:
    """The clamp of stored quantised values of ``out``: None when the activation's bounds
    cover the whole type range (nothing to do), else (low, high)."""
    lo, hi = nn_activation.quant_bounds(check(act), out)
    qlo, qhi = QUANT_RANGE[out.type]
    return None if lo <= qlo and hi >= qhi else (lo, hi)
