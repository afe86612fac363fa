"""RESHAPE, SQUEEZE, EXPAND_DIMS: new shape, same elements in the same (row-major) order.

RESHAPE
  input 0   TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM, TENSOR_QUANT8_ASYMM_SIGNED or
            (since NNAPI feature level 6) TENSOR_INT32; rank up to 4.
  input 1   TENSOR_INT32, 1-D: the output shape.  At most one entry may be -1: that dimension
            is the input's element count divided by the product of the others.  The element
            counts must agree.
  output 0  same type as input 0 with the new shape; quantised outputs keep input 0's scale and
            zero point.

SQUEEZE
  input 0   TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM or TENSOR_QUANT8_ASYMM_SIGNED,
            rank up to 4.
  input 1   optional TENSOR_INT32, 1-D: the axes to drop (negative counts from the end); each
            must have size 1.  Omitted: every size-1 axis is dropped.
  output 0  same type and quantisation as input 0.  Dropping every axis gives shape [1].

EXPAND_DIMS
  input 0   TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_INT32, TENSOR_QUANT8_ASYMM or
            TENSOR_QUANT8_ASYMM_SIGNED, rank n from 1.
  input 1   INT32 scalar: where the new size-1 axis goes, in [-(n + 1), n + 1).
  output 0  rank n + 1, same type and quantisation as input 0.

All three are byte copies in the CPU reference, so every data type behaves the same.
"""

from __future__ import annotations

import numpy as np

from nnconform.errors import ValidationError
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.ir import element_count
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
EXPAND_DIMS_TYPES = TYPES + (T.TENSOR_INT32,)
RESHAPE_TYPES = TYPES + (T.TENSOR_INT32,)  # TENSOR_INT32: NNAPI feature level 6


def check_same_type_and_quant(v: OpView, inp: int = 0, out: int = 0) -> None:
    """Output ``out`` has input ``inp``'s type and, if quantised, its scale and zero point
    (the reference copies them from the input to the output shape)."""
    v.expect_same_type(("input", inp), ("output", out))
    if v.inputs[inp].info.is_quant:
        v.expect_same_quant(("input", inp), ("output", out))


def check_1d_int32(v: OpView, i: int, what: str) -> None:
    op = v.inputs[i]
    if op.dimensions and len(op.dimensions) != 1:
        v.fail(f"{what} must be a 1-D tensor, got rank {len(op.dimensions)}", input=i)


# RESHAPE --------------------------------------------------------------------------------


def reshape_output_dims(in_count: int, target, fail) -> tuple[int, ...]:
    target = [int(d) for d in np.asarray(target).reshape(-1)]
    stretch = [i for i, d in enumerate(target) if d == -1]
    if len(stretch) > 1:
        fail(f"shape {target} has more than one -1 entry")
    if any(d < -1 for d in target):
        fail(f"shape {target} has a negative entry other than -1")
    known = element_count([d for d in target if d != -1])
    if stretch:
        if known == 0:
            fail(f"cannot infer the -1 entry of shape {target}: the other entries multiply to 0")
        target[stretch[0]] = in_count // known
    if element_count(target) != in_count:
        fail(f"shape {target} holds {element_count(target)} elements, the input has {in_count}")
    return tuple(target)


def validate_reshape(v: OpView) -> None:
    v.expect_counts(2, 1)
    v.expect_types([RESHAPE_TYPES, T.TENSOR_INT32], [RESHAPE_TYPES])
    v.expect_rank(0, range(0, 5))
    check_1d_int32(v, 1, "the shape")
    check_same_type_and_quant(v)
    shape = v.constant(1)
    x = v.inputs[0]
    if shape is not None and x.fully_specified:
        reshape_output_dims(element_count(x.dimensions), shape, lambda m: v.fail(m, input=1))


def prepare_reshape(v: OpView):
    """A plan-time kernel for a RESHAPE of known input dimensions to a constant shape (a
    classifier's flatten): the target worked out once; the kernel is the copy."""
    x_op, shape = v.inputs[0], v.constant(1)
    if shape is None or shape.ndim != 1 or not x_op.dimensions or 0 in x_op.dimensions or x_op.info.is_scalar:
        return None
    try:
        dims = reshape_output_dims(element_count(x_op.dimensions), shape, lambda m: v.fail(m, input=1))
    except ValidationError:
        return None  # execute fails the run, with its own message
    slot, in_dims = v.operation.inputs[0], x_op.dimensions

    def kernel(values: list):
        x = values[slot]
        if x is None or x.shape != in_dims:
            return None
        return [x.reshape(dims).copy()]

    return kernel


@register(Op.RESHAPE, data_types=RESHAPE_TYPES, validate=validate_reshape, prepare=prepare_reshape)
def execute_reshape(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    if ctx.inputs[1].ndim != 1:
        ctx.fail(f"the shape must be a 1-D tensor, got rank {ctx.inputs[1].ndim}")
    dims = reshape_output_dims(x.size, ctx.inputs[1], ctx.fail)
    return [x.reshape(dims).copy()]


# SQUEEZE --------------------------------------------------------------------------------


def validate_squeeze(v: OpView) -> None:
    v.expect_counts(2, 1)
    v.expect_types([TYPES, T.TENSOR_INT32], [TYPES])
    v.expect_rank(0, range(0, 5))
    if not v.is_omitted(1):
        check_1d_int32(v, 1, "the squeeze axes")
    check_same_type_and_quant(v)
    x, axes = v.inputs[0], v.constant(1)
    if axes is not None and x.dimensions:
        n = len(x.dimensions)
        for a in axes.reshape(-1).tolist():
            if not -n <= a < n:
                v.fail(f"axis {a} is outside [-{n}, {n})", input=1)
            if x.dimensions[a] not in (0, 1):
                v.fail(f"axis {a} has size {x.dimensions[a]}, only size-1 axes can be squeezed", input=1)


@register(Op.SQUEEZE, data_types=TYPES, validate=validate_squeeze)
def execute_squeeze(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    n = x.ndim
    if n > 4:
        ctx.fail(f"input rank {n} is above 4")
    if ctx.has(1):
        axes = ctx.inputs[1]
        if axes.ndim != 1:
            ctx.fail(f"the squeeze axes must be a 1-D tensor, got rank {axes.ndim}")
        drop = set()
        for a in axes.tolist():
            if not -n <= a < n or x.shape[a] != 1:
                ctx.fail(f"cannot squeeze axis {a} of shape {list(x.shape)}")
            drop.add(a % n)
    else:
        drop = {i for i, d in enumerate(x.shape) if d == 1}
    dims = tuple(d for i, d in enumerate(x.shape) if i not in drop) or (1,)
    return [x.reshape(dims).copy()]


# EXPAND_DIMS ----------------------------------------------------------------------------


def validate_expand_dims(v: OpView) -> None:
    v.expect_counts(2, 1)
    v.expect_types([EXPAND_DIMS_TYPES, T.INT32], [EXPAND_DIMS_TYPES])
    check_same_type_and_quant(v)
    axis, x = v.constant_scalar(1), v.inputs[0]
    if axis is not None and x.dimensions:
        n = len(x.dimensions) + 1
        if not -n <= axis < n:
            v.fail(f"axis {axis} is outside [-{n}, {n})", input=1)


@register(Op.EXPAND_DIMS, data_types=EXPAND_DIMS_TYPES, validate=validate_expand_dims)
def execute_expand_dims(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    axis = ctx.scalar(1)
    n = x.ndim + 1
    if not -n <= axis < n:
        ctx.fail(f"axis {axis} is outside [-{n}, {n})")
    return [np.expand_dims(x, axis % n).copy()]
