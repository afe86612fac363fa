"""TRANSPOSE: permutes the dimensions of a tensor.

Signature:
  input 0   TENSOR_FLOAT32, TENSOR_FLOAT16 (HAL 1.2), TENSOR_QUANT8_ASYMM or
            TENSOR_QUANT8_ASYMM_SIGNED (HAL 1.3), rank up to 4; may be zero-sized.
  input 1   optional TENSOR_INT32, 1-D of length rank: output dimension i is input dimension
            perm[i], each entry in [0, rank).  Omitted: the reference accepts only a 2-D input
            and swaps its two axes (NNAPI documents "reverse all axes", the reference
            implements only the 2-D case of it).
  output 0  same type and quantisation as input 0.

A perm with a repeated entry passes the reference's range checks but then copies garbage; we
reject it at run time.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.registry import OpContext, OpView, register
from nnconform.reference.ops.reshape import check_1d_int32, check_same_type_and_quant

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


def validate(v: OpView) -> None:
    v.expect_counts(2, 1)
    v.expect_types([TYPES, T.TENSOR_INT32], [TYPES])
    v.expect_rank(0, range(0, 5))
    check_same_type_and_quant(v)
    x = v.inputs[0]
    if v.is_omitted(1):
        if x.dimensions and len(x.dimensions) != 2:
            v.fail(f"without a permutation the input must be 2-D, got rank {len(x.dimensions)}", input=0)
        return
    check_1d_int32(v, 1, "the permutation")
    perm = v.constant(1)
    if perm is not None and x.dimensions:
        _check_perm(perm.reshape(-1).tolist(), len(x.dimensions), lambda m: v.fail(m, input=1))


def _check_perm(perm: list[int], rank: int, fail) -> None:
    if len(perm) != rank:
        fail(f"permutation {perm} has {len(perm)} entries for a rank-{rank} input")
    if sorted(perm) != list(range(rank)):
        fail(f"{perm} is not a permutation of 0..{rank - 1}")


@register(Op.TRANSPOSE, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    if x.ndim > 4:
        ctx.fail(f"input rank {x.ndim} is above 4")
    if not ctx.has(1):
        if x.ndim != 2:
            ctx.fail(f"without a permutation the input must be 2-D, got rank {x.ndim}")
        perm = [1, 0]
    else:
        if ctx.inputs[1].ndim != 1:
            ctx.fail(f"the permutation must be a 1-D tensor, got rank {ctx.inputs[1].ndim}")
        perm = ctx.inputs[1].tolist()
        _check_perm(perm, x.ndim, ctx.fail)
    return [np.ascontiguousarray(np.transpose(x, perm))]
