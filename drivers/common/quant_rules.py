"""NNAPI's fixed-point requantisation parameters, for adapters that reproduce quantised
arithmetic exactly in integers (JAX, torch).

The NNAPI CPU implementation rescales quantised ADD / SUB / MUL results with gemmlowp's
fixed-point multipliers: each ratio of scales, computed in float32, becomes a 31-bit
multiplier and a right shift (QuantizeMultiplierSmallerThanOneExp).  Which ratios, and how
ADD / SUB give both inputs ``ADD_LEFT_SHIFT`` bits of headroom, is runtime-neutral; only the
integer kernels that apply them are written per runtime.
"""

from __future__ import annotations

import numpy as np

from nnconform.driver.support import Rejected
from nnconform.ir import Operand
from nnconform.reference.arith.quant import quantize_multiplier
from nnconform.reference.ops.add_sub import ADD_LEFT_SHIFT

__all__ = ["ADD_LEFT_SHIFT", "f32", "multiplier_below_one", "add_sub_multipliers", "mul_multiplier"]

Multiplier = tuple[int, int]  # (31-bit multiplier, shift <= 0)


def f32(x) -> float:
    """``x`` rounded to float32 (NNAPI stores scales as float and computes ratios in it)."""
    return float(np.float32(x))


def multiplier_below_one(real: float, what: str) -> Multiplier:
    """QuantizeMultiplierSmallerThanOneExp of ``real``.  A ratio outside (0, 1), or one that
    rounds up to 1, fails the execution in the reference: the operation is supported and
    preparing it fails (Rejected)."""
    if not 0.0 < real < 1.0:
        raise Rejected(f"{what} rescale factor {real:g} must be in (0, 1)")
    m, shift = quantize_multiplier(real)
    if shift > 0:
        raise Rejected(f"{what} rescale factor {real:g} rounds up to 1")
    return m, shift


def add_sub_multipliers(
    in1: Operand, in2: Operand, out: Operand, subtract: bool
) -> tuple[Multiplier, Multiplier, Multiplier]:
    """Quantised ADD / SUB: both inputs' offsets, shifted left by ADD_LEFT_SHIFT, are scaled by
    scale / (2 * max scale) (input 1's negated for SUB), summed, and the sum is scaled by
    2 * max scale / (2**ADD_LEFT_SHIFT * output scale)."""
    s1, s2, so = f32(in1.scale), f32(in2.scale), f32(out.scale)
    twice_max = 2.0 * max(s1, s2)
    m1 = multiplier_below_one(s1 / twice_max, "input 0")
    m2, e2 = multiplier_below_one(s2 / twice_max, "input 1")
    mo = multiplier_below_one(twice_max / ((1 << ADD_LEFT_SHIFT) * so), "output")
    return m1, (-m2 if subtract else m2, e2), mo


def mul_multiplier(in1: Operand, in2: Operand, out: Operand) -> Multiplier:
    """Quantised MUL: the product of the offsets is scaled by (scale1 * scale2) / output scale,
    the product taken in float32."""
    product_scale = float(np.float32(in1.scale) * np.float32(in2.scale))
    return multiplier_below_one(product_scale / f32(out.scale), "output")
