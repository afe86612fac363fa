"""BATCH_MATMUL (operation 102, NNAPI feature level 6; not part of HAL 1.3): a matrix product
per batch slice.

Signature (from the NNAPI documentation and the CPU reference of packages/modules/
NeuralNetworks, which postdate android11):
  input 0: x, tensor of TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_INT32 or
           TENSOR_QUANT8_ASYMM_SIGNED, shape [..., r_x, c_x], rank 2..4.
  input 1: y, x's type and rank, shape [..., r_y, c_y], the same batch dimensions [...].
           Quantised: its own scale and zero point.
  input 2: adj_x, BOOL scalar: use the transpose of each x slice.
  input 3: adj_y, BOOL scalar: use the transpose of each y slice.
  output 0: x's type, shape [..., r_o, c_o] with r_o = c_x if adj_x else r_x and
            c_o = r_y if adj_y else c_y.  Quantised: its own scale and zero point.
The documentation calls adj_x and adj_y optional with default false, but the reference's
validation insists on all four inputs; we require four inputs and read an omitted (NO_VALUE)
adj as false.  TENSOR_QUANT8_ASYMM (unsigned) is not allowed by the reference.  The inner
dimensions must agree and be non-zero; the documentation requires equal batch dimensions
(the reference's TFLite kernel would broadcast size-1 batch dimensions of y, but sizes the
output from x only), so unequal ones fail.  Zero-sized inputs fail.

Semantics:
- float32: sum of products, computed here in float64 and rounded once to float32 (the
  reference accumulates in float32; the difference is within CTS tolerances).
- float16: the reference accumulates in _Float16, whose intermediate rounding depends on
  the platform's half-precision evaluation; we accumulate in float32 and round once.
- int32: exact sum of products, wrapped to 32 bits as the reference's int32 accumulator wraps.
- quantised (int8): acc = sum((x - zp_x) * (y - zp_y)) in integers; the real multiplier
  float32(scale_x * scale_y) / scale_out (computed in double) becomes a fixed-point multiplier
  and shift (QuantizeMultiplier); out = MultiplyByQuantizedMultiplier(acc) + zp_out, clamped
  to [-128, 127].  No fused activation.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import quant
from nnconform.reference.ops.reduce import reject_zero_sized
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM_SIGNED)


def _out_dims(xd, yd, adj_x: bool, adj_y: bool) -> tuple[int, int, int, int]:
    """(rows of op(x), inner of op(x), inner of op(y), cols of op(y))."""
    r_x, c_x = (xd[-1], xd[-2]) if adj_x else (xd[-2], xd[-1])
    r_y, c_y = (yd[-1], yd[-2]) if adj_y else (yd[-2], yd[-1])
    return r_x, c_x, r_y, c_y


def validate(v: OpView) -> None:
    v.expect_counts(4, 1)
    v.expect_types([TYPES, TYPES, T.BOOL, T.BOOL], [TYPES])
    v.expect_same_type(("input", 0), ("input", 1), ("output", 0))
    v.expect_rank(0, range(2, 5))
    v.expect_rank(1, range(2, 5))
    xd, yd = v.inputs[0].dimensions, v.inputs[1].dimensions
    if not xd or not yd:
        return
    if len(xd) != len(yd):
        v.fail(f"rank {len(yd)} differs from input 0's rank {len(xd)}", input=1)
    for d, (a, b) in enumerate(zip(xd[:-2], yd[:-2])):
        if a and b and a != b:
            v.fail(f"batch dimension {d} is {b}, input 0's is {a}; they must be equal", input=1)
    adj_x = False if v.is_omitted(2) else v.constant_scalar(2)
    adj_y = False if v.is_omitted(3) else v.constant_scalar(3)
    if adj_x is None or adj_y is None:
        return
    _, inner_x, inner_y, _ = _out_dims(xd, yd, bool(adj_x), bool(adj_y))
    if inner_x and inner_y and inner_x != inner_y:
        v.fail(
            f"inner dimensions do not match: {inner_x} (input 0, adj_x={bool(adj_x)}) against "
            f"{inner_y} (input 1, adj_y={bool(adj_y)})",
            input=1,
        )


def _adj(ctx: OpContext, i: int) -> bool:
    return bool(ctx.scalar(i)) if ctx.has(i) else False


@register(Op.BATCH_MATMUL, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x, y = ctx.inputs[0], ctx.inputs[1]
    if x.ndim != y.ndim:
        ctx.fail(f"input ranks differ: {x.ndim} and {y.ndim}")
    if not 2 <= x.ndim <= 4:
        ctx.fail(f"input rank must be 2..4, got {x.ndim}")
    reject_zero_sized(ctx)
    if x.shape[:-2] != y.shape[:-2]:
        ctx.fail(f"batch dimensions differ: {list(x.shape[:-2])} and {list(y.shape[:-2])}")
    adj_x, adj_y = _adj(ctx, 2), _adj(ctx, 3)
    if adj_x:
        x = np.swapaxes(x, -1, -2)
    if adj_y:
        y = np.swapaxes(y, -1, -2)
    if x.shape[-1] != y.shape[-2]:
        ctx.fail(f"cannot multiply {list(x.shape[-2:])} by {list(y.shape[-2:])} (adj_x={adj_x}, adj_y={adj_y})")
    t = ctx.in_operands[0].type
    out_op = ctx.out_operands[0]
    if t in (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16):
        acc = np.float64 if t == T.TENSOR_FLOAT32 else np.float32
        return [np.matmul(x.astype(acc), y.astype(acc)).astype(out_op.info.dtype)]
    if t == T.TENSOR_INT32:
        return [np.matmul(x.astype(np.int64), y.astype(np.int64)).astype(np.int32)]
    xo, yo = ctx.in_operands[0], ctx.in_operands[1]
    acc = np.matmul(x.astype(np.int64) - xo.zero_point, y.astype(np.int64) - yo.zero_point)
    real = float(np.float32(xo.scale) * np.float32(yo.scale)) / float(np.float32(out_op.scale))
    multiplier, shift = quant.quantize_multiplier(real)
    scaled = quant.multiply_by_quantized_multiplier(acc, multiplier, shift) + out_op.zero_point
    return [quant.saturate(scaled, out_op)]
