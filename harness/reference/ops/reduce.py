"""REDUCE_ALL, REDUCE_ANY, REDUCE_MAX, REDUCE_MIN, REDUCE_PROD, REDUCE_SUM, and the axis
handling they share with MEAN.

Signature (all six):
  input 0: tensor of rank 1..4 (unknown rank allowed, checked at run time):
           REDUCE_ALL / REDUCE_ANY:  TENSOR_BOOL8
           REDUCE_MAX / REDUCE_MIN:  TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM,
                                     TENSOR_QUANT8_ASYMM_SIGNED (HAL 1.3)
           REDUCE_PROD / REDUCE_SUM: TENSOR_FLOAT32, TENSOR_FLOAT16
  input 1: axes, 1-D TENSOR_INT32, each value in [-rank, rank); repeats are allowed and count
           once.
  input 2: keep_dims, BOOL scalar.
  output 0: input 0's type.  Quantised (MAX/MIN): input 0's scale and zero point.
            Shape: the input's, with every reduced dimension dropped (or kept as 1 when
            keep_dims is true); if that leaves no dimension at all, the shape is [1].

Semantics (the reference folds each output's elements, in row-major order, into an
accumulator of the element type, starting from an initial value):
- SUM: init 0, a + b.  PROD: init 1, a * b except that a zero on either side gives 0 (so a
  zero anywhere in the group wins over inf and NaN).  Both fold sequentially in the storage
  type (float16 arithmetic for fp16), as the reference does: overflow and rounding happen at
  the same steps.
- MAX: init is the lowest finite value (-FLT_MAX, -65504 for fp16, the type minimum for
  quantised), then (acc < x ? x : acc).  MIN: init the highest finite value, (x < acc ? x :
  acc).  Consequences kept on purpose: NaN inputs are skipped, and a group of only -inf gives
  -FLT_MAX (REDUCE_MAX) rather than -inf.  Quantised MAX/MIN compare stored values, which
  orders them like the real values because the output shares the input's parameters.
- ANY / ALL: logical or / and.

Empty reductions: the reference runs none of these with a zero-sized input, and that includes
an empty axes tensor, so "no axes" fails at run time instead of reducing nothing (the NNAPI
documentation once claimed it would reduce everything; that was never implemented), whatever
keep_dims says.  Zero-sized data inputs fail likewise.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.registry import OpContext, OpView, register

BOOL_TYPES = (T.TENSOR_BOOL8,)
MAXMIN_TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
SUMPROD_TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
MAX_RANK = 4


# ---------------------------------------------------------------------------------------
# Helpers shared with MEAN.
# ---------------------------------------------------------------------------------------


def check_axes_static(v: OpView, data: int = 0, axes: int = 1) -> None:
    """Axes input: 1-D; if constant and the data rank is known, every value in range."""
    op = v.inputs[axes]
    if op.dimensions and len(op.dimensions) != 1:
        v.fail(f"axes must be a 1-D tensor, got rank {len(op.dimensions)}", input=axes)
    values = v.constant(axes)
    rank = len(v.inputs[data].dimensions)
    if values is None or not rank:
        return
    if values.size == 0:
        v.fail("axes is empty; the reference refuses zero-sized inputs", input=axes)
    bad = [int(a) for a in values.reshape(-1) if not -rank <= int(a) < rank]
    if bad:
        v.fail(f"axis values {bad} are out of range [{-rank}, {rank})", input=axes)


def reject_zero_sized(ctx: OpContext) -> None:
    """The reference fails an operation whose tensor inputs have a zero dimension (unless the
    operation opts in; none of the reductions, comparisons or logical operations do)."""
    for i, (arr, op) in enumerate(zip(ctx.inputs, ctx.in_operands)):
        if arr is not None and not op.info.is_scalar and arr.size == 0:
            ctx.fail(
                f"input {i} is zero-sized {list(arr.shape)}; {ctx.operation.name} does not accept zero-sized tensors"
            )


def resolve_axes(ctx: OpContext, rank: int, axes_input: int = 1) -> tuple[int, ...]:
    """The axes input as sorted, distinct, non-negative dimension numbers."""
    axes = ctx.inputs[axes_input]
    if axes.ndim != 1:
        ctx.fail(f"axes must be a 1-D tensor, got shape {list(axes.shape)}")
    out = set()
    for a in axes.tolist():
        if not -rank <= a < rank:
            ctx.fail(f"axis {a} is out of range [{-rank}, {rank})")
        out.add(a % rank)
    return tuple(sorted(out))


def reduced_shape(shape: Sequence[int], axes: Sequence[int], keep_dims: bool) -> tuple[int, ...]:
    out = [1 if d in axes else n for d, n in enumerate(shape) if keep_dims or d not in axes]
    return tuple(out) or (1,)


def group_last(x: np.ndarray, axes: Sequence[int]) -> np.ndarray:
    """Move the reduced axes to the end (keeping their order) and merge them into one, so
    element k of a row is the k-th element the reference's row-major walk meets."""
    kept = [d for d in range(x.ndim) if d not in axes]
    moved = np.transpose(x, kept + list(axes))
    return moved.reshape(tuple(x.shape[d] for d in kept) + (-1,))


def fold_sum(x: np.ndarray, axes: Sequence[int]) -> np.ndarray:
    """Sequential left fold of a + b over the reduced elements, in x's dtype.  A ufunc's
    ``accumulate`` adds strictly left to right with one rounding per step (``np.sum`` adds
    pairwise and would round differently)."""
    rows = group_last(x, axes)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.add.accumulate(rows, axis=-1)[..., -1]


def fold_prod(x: np.ndarray, axes: Sequence[int]) -> np.ndarray:
    """Sequential fold of the reference's product (a zero on either side gives 0).  The plain
    running product agrees with it until the accumulator first becomes 0, which happens at an
    input zero or when the product underflows; from then on the reference stays at 0."""
    rows = group_last(x, axes)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        running = np.multiply.accumulate(rows, axis=-1)
    hit_zero = np.any(rows == 0, axis=-1) | np.any(running == 0, axis=-1)
    return np.where(hit_zero, x.dtype.type(0), running[..., -1])


# ---------------------------------------------------------------------------------------
# The operations.
# ---------------------------------------------------------------------------------------

_TYPES = {
    Op.REDUCE_ALL: BOOL_TYPES,
    Op.REDUCE_ANY: BOOL_TYPES,
    Op.REDUCE_MAX: MAXMIN_TYPES,
    Op.REDUCE_MIN: MAXMIN_TYPES,
    Op.REDUCE_PROD: SUMPROD_TYPES,
    Op.REDUCE_SUM: SUMPROD_TYPES,
}


def validate(v: OpView) -> None:
    types = _TYPES[v.operation.type]
    v.expect_counts(3, 1)
    v.expect_types([types, T.TENSOR_INT32, T.BOOL], [types])
    v.expect_same_type(("input", 0), ("output", 0))
    v.expect_rank(0, range(1, MAX_RANK + 1))
    check_axes_static(v)
    if v.inputs[0].info.is_quant:
        v.expect_same_quant(("input", 0), ("output", 0))


def _bounds(dtype: np.dtype) -> tuple:
    if dtype == np.float16:
        return np.float16(-65504), np.float16(65504)
    if dtype.kind == "f":
        info = np.finfo(dtype)
        return info.min, info.max
    info = np.iinfo(dtype)
    return info.min, info.max


def _reduce(ctx: OpContext, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    t = ctx.operation.type
    if t == Op.REDUCE_ALL:
        return np.all(group_last(x, axes), axis=-1)
    if t == Op.REDUCE_ANY:
        return np.any(group_last(x, axes), axis=-1)
    if t == Op.REDUCE_SUM:
        return fold_sum(x, axes)
    if t == Op.REDUCE_PROD:
        return fold_prod(x, axes)
    lo, hi = _bounds(x.dtype)
    rows = group_last(x, axes)
    if x.dtype.kind == "f":
        # NaN never wins a comparison against the accumulator, so it is skipped.
        rows = np.where(np.isnan(rows), lo if t == Op.REDUCE_MAX else hi, rows)
    if t == Op.REDUCE_MAX:
        return np.maximum(rows.max(axis=-1), x.dtype.type(lo))
    return np.minimum(rows.min(axis=-1), x.dtype.type(hi))


def execute(ctx: OpContext) -> list[np.ndarray]:
    types = _TYPES[ctx.operation.type]
    x = ctx.inputs[0]
    if ctx.in_operands[0].type not in types:
        ctx.fail(f"input type {ctx.in_operands[0].type.name} is not supported")
    if not 1 <= x.ndim <= MAX_RANK:
        ctx.fail(f"input rank must be 1..{MAX_RANK}, got {x.ndim}")
    reject_zero_sized(ctx)
    axes = resolve_axes(ctx, x.ndim)
    keep = bool(ctx.scalar(2))
    out = _reduce(ctx, x, axes)
    return [np.asarray(out, dtype=ctx.output_dtype(0)).reshape(reduced_shape(x.shape, axes, keep))]


register(Op.REDUCE_ALL, Op.REDUCE_ANY, data_types=BOOL_TYPES, validate=validate)(execute)
register(Op.REDUCE_MAX, Op.REDUCE_MIN, data_types=MAXMIN_TYPES, validate=validate)(execute)
register(Op.REDUCE_PROD, Op.REDUCE_SUM, data_types=SUMPROD_TYPES, validate=validate)(execute)
