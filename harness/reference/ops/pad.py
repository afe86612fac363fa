"""PAD and PAD_V2: constant padding of a tensor of rank 1..4.

PAD      inputs: 0 tensor of TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM or
                   TENSOR_QUANT8_ASYMM_SIGNED, rank <= 4;
                 1 paddings, TENSOR_INT32 of shape [rank(input0), 2]: (before, after) per
                   dimension, every value >= 0.
PAD_V2   inputs: 0 and 1 as PAD;
                 2 the pad value: FLOAT32 for a TENSOR_FLOAT32 input, FLOAT16 for
                   TENSOR_FLOAT16, INT32 (a stored value) for both quantised types.
output:  0 the input's type; dimension i is before[i] + input.dim[i] + after[i].  Quantised
           outputs carry the input's scale and zero point.

PAD fills with zero for floats and with the input's zero point (the real value 0) for
quantised tensors (HAL 1.2 and later; before that the fill was undefined).  PAD_V2's quantised
pad value is an INT32 scalar of which the reference keeps only the low byte (it reads the
operand as uint8_t / int8_t), so 256 pads like 0 and -1 pads like 255 on TENSOR_QUANT8_ASYMM.
Zero-sized inputs are rejected at run time, as the CPU reference does for these operations.
"""

from __future__ import annotations

import math

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
# Up to this output size a +0 pad starts from zeroed memory (see constant_pad).
ZEROED_MAX_BYTES = 1 << 17
_QUANT = (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
_PAD_VALUE_TYPE = {
    T.TENSOR_FLOAT32: T.FLOAT32,
    T.TENSOR_FLOAT16: T.FLOAT16,
    T.TENSOR_QUANT8_ASYMM: T.INT32,
    T.TENSOR_QUANT8_ASYMM_SIGNED: T.INT32,
}


def check_paddings_operand(v: OpView, data: int = 0, paddings: int = 1) -> None:
    """Static checks on a [rank, 2] TENSOR_INT32 paddings operand (shared with MIRROR_PAD)."""
    p = v.inputs[paddings]
    if p.dimensions:
        if len(p.dimensions) != 2:
            v.fail(f"paddings must be a 2-D tensor, got rank {len(p.dimensions)}", input=paddings)
        if p.dimensions[1] not in (0, 2):
            v.fail(f"paddings must have shape [rank, 2], got {list(p.dimensions)}", input=paddings)
        rank = len(v.inputs[data].dimensions)
        if rank and p.dimensions[0] not in (0, rank):
            v.fail(f"paddings has {p.dimensions[0]} rows, the input has rank {rank}", input=paddings)
    value = v.constant(paddings)
    if value is not None and np.any(value < 0):
        v.fail(f"padding values must be >= 0, got {value.reshape(-1).tolist()}", input=paddings)


def _validate(v: OpView, with_value: bool) -> None:
    v.expect_counts(3 if with_value else 2, 1)
    v.expect_types([TYPES, T.TENSOR_INT32], [TYPES])
    v.expect_same_type(("input", 0), ("output", 0))
    t = v.input_type(0)
    if with_value:
        v.expect_types([None, None, _PAD_VALUE_TYPE[t]])
    v.expect_rank(0, range(1, 5))
    v.expect_rank(0, range(1, 5), output=True)
    check_paddings_operand(v)
    if t in _QUANT:
        v.expect_same_quant(("input", 0), ("output", 0))


def validate_pad(v: OpView) -> None:
    _validate(v, with_value=False)


def validate_pad_v2(v: OpView) -> None:
    _validate(v, with_value=True)


def read_paddings(ctx: OpContext, rank: int, index: int = 1) -> np.ndarray:
    """The paddings input as an int64 [rank, 2] array, checked like the reference's padPrepare."""
    p = ctx.inputs[index]
    if p.ndim != 2 or p.shape != (rank, 2):
        ctx.fail(f"paddings must have shape [{rank}, 2], got {list(p.shape)}")
    p = p.astype(np.int64)
    if np.any(p < 0):
        ctx.fail(f"padding values must be >= 0, got {p.reshape(-1).tolist()}")
    return p


def require_nonempty(ctx: OpContext, *inputs: int) -> None:
    for i in inputs:
        if ctx.inputs[i] is not None and ctx.inputs[i].size == 0:
            ctx.fail(
                f"input {i} is zero-sized {list(ctx.inputs[i].shape)}; this operation does not "
                "accept zero-sized tensors"
            )


def _pad_value(ctx: OpContext) -> np.generic:
    x_op = ctx.in_operands[0]
    dtype = x_op.info.dtype
    if ctx.operation.type == Op.PAD:
        return dtype.type(x_op.zero_point if x_op.type in _QUANT else 0)
    raw = ctx.scalar(2)
    if x_op.type in _QUANT:
        # The reference reads only the low byte of the INT32 scalar.
        return np.array([int(raw) & 0xFF], dtype=np.uint8).view(dtype)[0]
    return dtype.type(raw)


@register(Op.PAD, data_types=TYPES, validate=validate_pad)
def execute_pad(ctx: OpContext) -> list[np.ndarray]:
    return _execute(ctx)


@register(Op.PAD_V2, data_types=TYPES, validate=validate_pad_v2)
def execute_pad_v2(ctx: OpContext) -> list[np.ndarray]:
    return _execute(ctx)


def _execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    if not 1 <= x.ndim <= 4:
        ctx.fail(f"input rank must be 1..4, got {x.ndim}")
    require_nonempty(ctx, 0)
    pads = read_paddings(ctx, x.ndim)
    return [constant_pad(x, pads.tolist(), _pad_value(ctx)).astype(ctx.output_dtype(0), copy=False)]


def constant_pad(x: np.ndarray, pads: list, value) -> np.ndarray:
    """np.pad(x, pads, constant_values=value) without its per-call overhead: the input is
    copied into the middle once and only the border slabs are filled (each element once:
    the slab of axis d spans the interior of the axes before d and all of those after)."""
    shape = tuple(n + b + a for n, (b, a) in zip(x.shape, pads))
    inner = tuple(slice(b, b + n) for n, (b, _) in zip(x.shape, pads))
    if value == 0 and not np.signbit(value) and math.prod(shape) * x.itemsize <= ZEROED_MAX_BYTES:
        # A small +0 border (most pads): zeroed memory, then the input copied in; two calls
        # instead of one per border slab (whose ~2-5 us each were most of a small pad's time).
        # A large one fills only its border: zeroing all of it first is a second pass through
        # memory (196 us against ~130 us for a 1x98x98x32 float32 output inside a model).
        out = np.zeros(shape, dtype=x.dtype)
        out[inner] = x
        return out
    out = np.empty(shape, dtype=x.dtype)
    out[inner] = x
    for d, (b, a) in enumerate(pads):
        for part in ((slice(0, b),) if b else ()) + ((slice(b + x.shape[d], None),) if a else ()):
            out[inner[:d] + (part,)] = value
    return out
