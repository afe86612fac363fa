"""SLICE: a contiguous block of a tensor.

inputs:  0 tensor of TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_INT32, TENSOR_QUANT8_ASYMM or
           TENSOR_QUANT8_ASYMM_SIGNED, rank >= 1, may be zero-sized;
         1 begin, TENSOR_INT32 [rank]: first index per dimension;
         2 size, TENSOR_INT32 [rank]: extent per dimension, -1 meaning "to the end".
output:  0 the input's type, shape size (with -1 resolved to dim - begin).  Quantised outputs
           carry the input's scale and zero point (NNAPI documentation).

Run-time rules (the reference's prepare): begin <= dim, size >= 0 after resolving -1, and
begin + size <= dim.  A negative begin is rejected as well: the reference would read outside
the tensor.  SLICE is one of the few operations that accepts zero-sized inputs.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


def validate(v: OpView) -> None:
    v.expect_counts(3, 1)
    v.expect_types([TYPES, T.TENSOR_INT32, T.TENSOR_INT32], [TYPES])
    v.expect_same_type(("input", 0), ("output", 0))
    v.expect_rank(1, (1,))
    v.expect_rank(2, (1,))
    rank = len(v.inputs[0].dimensions)
    for i, what in ((1, "begin"), (2, "size")):
        dims = v.inputs[i].dimensions
        if rank and dims and dims[0] and dims[0] != rank:
            v.fail(f"{what} has {dims[0]} entries, the input has rank {rank}", input=i)
    begin = v.constant(1)
    if begin is not None and np.any(begin < 0):
        v.fail(f"begin must be >= 0, got {begin.tolist()}", input=1)
    size = v.constant(2)
    if size is not None and np.any(size < -1):
        v.fail(f"size must be >= 0 or -1, got {size.tolist()}", input=2)
    if v.inputs[0].info.is_quant:
        v.expect_same_quant(("input", 0), ("output", 0))


@register(Op.SLICE, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    begin = ctx.inputs[1].astype(np.int64)
    size = ctx.inputs[2].astype(np.int64)
    if x.ndim < 1:
        ctx.fail("input must have rank >= 1")
    for name, t in (("begin", begin), ("size", size)):
        if t.shape != (x.ndim,):
            ctx.fail(f"{name} must have shape [{x.ndim}], got {list(t.shape)}")
    dims = np.asarray(x.shape, dtype=np.int64)
    size = np.where(size == -1, dims - begin, size)
    bad = (begin < 0) | (begin > dims) | (size < 0) | (begin + size > dims)
    if np.any(bad):
        ctx.fail(f"begin {begin.tolist()} / size {ctx.inputs[2].tolist()} do not fit input shape {list(x.shape)}")
    region = tuple(slice(b, b + s) for b, s in zip(begin.tolist(), size.tolist()))
    return [np.ascontiguousarray(x[region]).astype(ctx.output_dtype(0), copy=False)]
