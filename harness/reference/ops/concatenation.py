"""CONCATENATION: joins tensors along one axis.

Signature:
  inputs 0..n-1  n >= 1 tensors of one type: TENSOR_FLOAT32, TENSOR_FLOAT16 (HAL 1.2),
                 TENSOR_QUANT8_ASYMM or TENSOR_QUANT8_ASYMM_SIGNED (HAL 1.3); rank up to 4, all
                 the same rank and the same dimensions except along the axis.  Zero-sized
                 inputs are allowed (HAL 1.2).
  input n        INT32 scalar: the axis, 0 <= axis < rank (the reference has no negative axes).
  output 0       same type; dimension `axis` is the sum of the inputs', the rest as input 0.

Quantised inputs may each have their own scale and zero point (HAL 1.2); the output keeps its
own.  An input whose (scale, zero point) equals the output's is copied; any other is
requantised the way the reference (TFLite ConcatenationWithScaling, float path) does it, all in
float32:
    s = in_scale * (1 / out_scale);  b = -in_zp * s
    q_out = clamp(std::round(q_in * s + b) + out_zp, 0, 255)
TENSOR_QUANT8_ASYMM_SIGNED is handled by shifting values and zero points by +128 into the uint8
path and back, exactly as the reference does (it matters for float rounding: the bias differs).
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import Operand
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith.quant import round_half_away_array as round_half_away
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


def validate(v: OpView) -> None:
    if len(v.inputs) < 2:
        v.fail(f"takes at least 2 inputs (tensors, then the axis), got {len(v.inputs)}")
    v.expect_counts(range(2, len(v.inputs) + 1), 1)
    n = len(v.inputs) - 1
    v.expect_types([TYPES] + [None] * (n - 1) + [T.INT32], [TYPES])
    for i in range(1, n):
        v.expect_same_type(("input", 0), ("input", i))
    v.expect_same_type(("input", 0), ("output", 0))
    ranks = {}
    for i in range(n):
        v.expect_rank(i, range(0, 5))
        if v.inputs[i].dimensions:
            ranks[i] = len(v.inputs[i].dimensions)
    if len(set(ranks.values())) > 1:
        v.fail(f"inputs have different ranks {sorted(set(ranks.values()))}", input=max(ranks))
    for i in range(n):
        q = v.inputs[i]
        if q.info.is_quant and not q.scale > 0:
            v.fail(f"scale must be > 0, got {q.scale:g}", input=i)
    if v.outputs[0].info.is_quant and not v.outputs[0].scale > 0:
        v.fail(f"scale must be > 0, got {v.outputs[0].scale:g}", output=0)
    axis = v.constant_scalar(n)
    if axis is not None and ranks:
        rank = next(iter(ranks.values()))
        if not 0 <= axis < rank:
            v.fail(f"axis {axis} is outside [0, {rank})", input=n)


def _requantize_u8(q: np.ndarray, src: Operand, dst: Operand, shift: int) -> np.ndarray:
    """uint8-domain requantisation of the reference; ``shift`` is 128 for the signed type."""
    in_zp, out_zp = src.zero_point + shift, dst.zero_point + shift
    if src.scale == dst.scale and in_zp == out_zp:
        return q.astype(np.int64) + shift
    inv = np.float32(1.0) / np.float32(dst.scale)
    s = np.float32(src.scale) * inv
    b = np.float32(-in_zp) * s
    val = (q.astype(np.int64) + shift).astype(np.float32) * s + b
    return np.clip(round_half_away(val).astype(np.int64) + out_zp, 0, 255)


@register(Op.CONCATENATION, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    n = len(ctx.inputs) - 1
    xs = ctx.inputs[:n]
    axis = ctx.scalar(n)
    rank = xs[0].ndim
    if rank > 4:
        ctx.fail(f"input rank {rank} is above 4")
    if not 0 <= axis < rank:
        ctx.fail(f"axis {axis} is outside [0, {rank})")
    for i, x in enumerate(xs[1:], start=1):
        if x.ndim != rank or any(a != b for d, (a, b) in enumerate(zip(x.shape, xs[0].shape)) if d != axis):
            ctx.fail(
                f"input {i} has shape {list(x.shape)}, incompatible with input 0's "
                f"{list(xs[0].shape)} along axis {axis}"
            )
    out = ctx.out_operands[0]
    if not out.info.is_quant:
        return [np.concatenate(xs, axis=axis)]
    shift = 128 if out.type == T.TENSOR_QUANT8_ASYMM_SIGNED else 0
    parts = [_requantize_u8(x, ctx.in_operands[i], out, shift) - shift for i, x in enumerate(xs)]
    return [np.concatenate(parts, axis=axis).astype(out.info.dtype)]
