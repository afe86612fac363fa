"""ADD and SUB (element-wise, with broadcasting and a fused activation).

Signature (both):
  input 0: tensor, rank <= 4, of TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM,
           TENSOR_QUANT8_ASYMM_SIGNED or TENSOR_INT32.
  input 1: tensor of input 0's type whose dimensions broadcast with input 0's (right-aligned,
           see broadcast.py).  Quantised: its scale and zero point may differ from input 0's.
  input 2: INT32 scalar, the fused activation (0 NONE, 1 RELU, 2 RELU1, 3 RELU6).  For
           TENSOR_INT32 it must be NONE; the reference fails such an execution, and a constant
           other than NONE is rejected here already.
  output 0: input 0's type, the broadcast shape.  Quantised: its own scale and zero point.

Semantics:
- Floats: a + b (a - b) in float32, then the activation clamp.  TENSOR_FLOAT16 is widened to
  float32, computed and narrowed once, as the reference does.
- TENSOR_INT32: two's-complement wrap-around, no activation.
- Quantised (TFLite's integer Add kernel, bit for bit): both inputs have their zero point
  removed and are shifted left by 20 bits, each is rescaled by scale / (2 * max input scale)
  (a fixed-point multiplier below one, rounded), the two are summed, and the sum is rescaled by
  2 * max input scale / (2**20 * output scale), offset by the output zero point and clamped to
  the activation range.  SUB is the same kernel with input 1's multiplier negated.  The scales
  enter these ratios as float32 values (the HAL's type) and are divided in double precision.
  A ratio that is not strictly inside (0, 1) fails the execution, as in the reference.
- A zero-sized output skips the computation.

This module also holds the pieces the other Broadcast.cpp operations (MUL, DIV) share:
``validate_arith``, ``fused_activation``, ``float_arith``, ``int32_arith``, ``f32`` and
``multiplier_below_one``.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from nnconform.errors import OpFailure
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import activation, broadcast, half, quant
from nnconform.reference.kernels import add_split, lut
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_INT32)
QUANT8 = (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
ADD_LEFT_SHIFT = 20  # headroom bits the quantised Add kernel gives both inputs


# ---------------------------------------------------------------------------------------
# Shared by ADD, SUB, MUL, DIV.
# ---------------------------------------------------------------------------------------


def f32(x: float) -> float:
    """A scale as the HAL holds it (a C float), back in a Python float."""
    return float(np.float32(x))


def validate_arith(v: OpView, types: tuple[T, ...]) -> None:
    """The common signature of ADD/SUB/MUL/DIV: (tensor, tensor, INT32 activation) -> tensor."""
    v.expect_counts(3, 1)
    v.expect_types([types, None, T.INT32], [types])
    v.expect_same_type(("input", 0), ("input", 1), ("output", 0))
    for i in (0, 1):
        v.expect_rank(i, range(0, 5))
    v.expect_rank(0, range(0, 5), output=True)
    broadcast.check_static(v, 0, 1)
    v.expect_scalar_in(2, activation.FUSED_ACTIVATIONS, "fused activation")
    if v.input_type(0) == T.TENSOR_INT32:
        v.expect_scalar_in(2, (activation.NONE,), "fused activation for TENSOR_INT32")


def fused_activation(ctx: OpContext) -> int:
    act = ctx.scalar(2)
    if act not in activation.FUSED_ACTIVATIONS:
        ctx.fail(f"unsupported fused activation {act}")
    if ctx.in_operands[0].type == T.TENSOR_INT32 and act != activation.NONE:
        ctx.fail(f"fused activation must be NONE (0) for TENSOR_INT32, got {act}")
    return act


def float_arith(ctx: OpContext, fn: Callable[[np.ndarray, np.ndarray], np.ndarray], act: int) -> np.ndarray:
    # fp16 computes in float32; fp32 is used as it is (no copies: this is a hot path).
    a, b = half.widen(ctx.inputs[0]), half.widen(ctx.inputs[1])
    # Division by zero and overflow give inf/nan, as IEEE float in the reference does.
    if ctx.floats_quiet:
        r = clamped(fn, a, b, act)
    else:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            r = clamped(fn, a, b, act)
    return half.narrow(r, ctx.output_dtype(0))


def clamped(fn: Callable[[np.ndarray, np.ndarray], np.ndarray], a: np.ndarray, b: np.ndarray, act: int) -> np.ndarray:
    """``fn(a, b)`` in float32, clamped in place by the fused activation (float_arith's
    arithmetic, shared with ADD/SUB's plan-time kernel)."""
    r = fn(a, b)
    if act != activation.NONE:
        lo, hi = activation.float_bounds(act)
        np.clip(r, lo, hi, out=r)
    return r


def int32_arith(ctx: OpContext, fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    # int64 holds every exact result; narrowing wraps like the reference's int32 arithmetic.
    r = fn(ctx.inputs[0].astype(np.int64), ctx.inputs[1].astype(np.int64))
    return r.astype(np.int32)


def multiplier_below_one(ctx: OpContext, real: float, what: str) -> tuple[int, int]:
    """NNAPI QuantizeMultiplierSmallerThanOneExp: (multiplier, shift <= 0) for 0 < real < 1;
    anything else fails the execution.  Tiny ratios (shift below -31) flush to zero."""
    if not 0.0 < real < 1.0:
        ctx.fail(f"{what} rescale factor {real:g} must be in (0, 1)")
    m, shift = quant.quantize_multiplier(real)
    if shift > 0:
        ctx.fail(f"{what} rescale factor {real:g} rounds up to 1")
    return m, shift


def empty_output(ctx: OpContext, shape: tuple[int, ...]) -> np.ndarray | None:
    """The reference skips zero-sized outputs entirely (no quantisation checks either)."""
    if math.prod(shape) == 0:
        return np.zeros(shape, dtype=ctx.output_dtype(0))
    return None


# ---------------------------------------------------------------------------------------
# ADD / SUB.
# ---------------------------------------------------------------------------------------


def validate(v: OpView) -> None:
    validate_arith(v, TYPES)


def _quant_add(ctx: OpContext, act: int, subtract: bool) -> np.ndarray:
    # the multipliers and the kernel depend on the model's quantisation and the activation
    # only: worked out once per model (~15 us of float32 scalars a call otherwise)
    key, kernel, split = ctx.remember(("quant add", subtract, act), lambda: _quant_add_kernel(ctx, act, subtract))
    return lut.binary(key, kernel, ctx.inputs[0], ctx.inputs[1], split)


def _quant_add_kernel(ctx: OpContext, act: int, subtract: bool) -> tuple:
    """(table key, fixed-point kernel over two arrays of codes, its split into byte tables
    for input dtypes) of a quantised ADD/SUB."""
    in1, in2 = ctx.in_operands[0], ctx.in_operands[1]
    out = ctx.out_operands[0]
    s1, s2, so = f32(in1.scale), f32(in2.scale), f32(out.scale)
    twice_max = 2.0 * max(s1, s2)
    m1, e1 = multiplier_below_one(ctx, s1 / twice_max, "input 0")
    m2, e2 = multiplier_below_one(ctx, s2 / twice_max, "input 1")
    mo, eo = multiplier_below_one(ctx, twice_max / ((1 << ADD_LEFT_SHIFT) * so), "output")
    if subtract:
        m2 = -m2

    def rescaled(codes: np.ndarray, zero_point: int, m: int, e: int) -> np.ndarray:
        x = (codes.astype(np.int64) - zero_point) << ADD_LEFT_SHIFT
        return quant.multiply_by_quantized_multiplier(x, m, e)

    def kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        total = rescaled(a, in1.zero_point, m1, e1) + rescaled(b, in2.zero_point, m2, e2)
        acc = quant.multiply_by_quantized_multiplier(total, mo, eo) + out.zero_point
        return activation.apply_quant(acc, act, out)

    bounds = activation.quant_bounds(act, out)

    def split(a_dtype, b_dtype) -> lut.Split:
        # the same kernel as byte tables of each input and a carry (add_split.py)
        codes = np.arange(256, dtype=np.uint8)
        tables = add_split.split_tables(
            rescaled(codes.view(a_dtype), in1.zero_point, m1, e1),
            rescaled(codes.view(b_dtype), in2.zero_point, m2, e2),
            mo,
            eo,
            out.zero_point,
        )
        return lut.Split(tables, out.zero_point, *bounds)

    key = ("add", m1, e1, in1.zero_point, m2, e2, in2.zero_point, mo, eo, out.zero_point, bounds, out.type)
    return key, kernel, split


def _add_or_sub(ctx: OpContext, subtract: bool) -> list[np.ndarray]:
    shape = broadcast.output_shape(ctx)
    act = fused_activation(ctx)
    empty = empty_output(ctx, shape)
    if empty is not None:
        return [empty]
    t = ctx.in_operands[0].type
    if t in QUANT8:
        return [_quant_add(ctx, act, subtract)]
    fn = np.subtract if subtract else np.add
    if t == T.TENSOR_INT32:
        return [int32_arith(ctx, fn)]
    return [float_arith(ctx, fn, act)]


def prepare(v: OpView):
    """A plan-time kernel for a float32 or 8-bit ADD/SUB whose activation is a constant and
    whose inputs' dimensions are known (the residual connections of MobileNet-v2-like and
    the zoo's networks).  execute's checks and, when quantised, its multipliers and table
    key are worked out here; the kernel keeps the arithmetic: numpy's add or subtract and
    the clamp, or the table gather."""
    a_op, b_op, out_op = v.inputs[0], v.inputs[1], v.outputs[0]
    t = a_op.type
    if not (t == T.TENSOR_FLOAT32 or t in QUANT8) or len(v.inputs) != 3 or len(v.outputs) != 1:
        return None
    ctx = v.static_context()
    if ctx is None:
        return None
    subtract = v.operation.type == Op.SUB
    try:
        shape = broadcast.output_shape(ctx)
        act = fused_activation(ctx)
        if not shape or math.prod(shape) == 0 or b_op.type != t or out_op.type != t:
            return None  # (rank 0: numpy gives a scalar, which execute's caller converts)
        if t in QUANT8:
            key, qkernel, split = _quant_add_kernel(ctx, act, subtract)
    except OpFailure:
        return None  # execute fails the run, with its own message
    sa, sb, da, db = v.operation.inputs[0], v.operation.inputs[1], a_op.dimensions, b_op.dimensions
    if t in QUANT8:

        def kernel_quant(values: list):
            a, b = values[sa], values[sb]
            if a is None or b is None or a.shape != da or b.shape != db:
                return None
            return [lut.binary(key, qkernel, a, b, split)]

        return kernel_quant
    fn = np.subtract if subtract else np.add

    def kernel(values: list):  # (a kernel runs inside Executor.run: floats quiet)
        a, b = values[sa], values[sb]
        if a is None or b is None or a.shape != da or b.shape != db:
            return None
        return [clamped(fn, a, b, act)]

    return kernel


@register(Op.ADD, data_types=TYPES, validate=validate, prepare=prepare)
def execute_add(ctx: OpContext) -> list[np.ndarray]:
    return _add_or_sub(ctx, subtract=False)


@register(Op.SUB, data_types=TYPES, validate=validate, prepare=prepare)
def execute_sub(ctx: OpContext) -> list[np.ndarray]:
    return _add_or_sub(ctx, subtract=True)
