"""MEAN: average over the given dimensions.

Signature:
  input 0: tensor of TENSOR_FLOAT32, TENSOR_FLOAT16 (HAL 1.2), TENSOR_QUANT8_ASYMM or
           TENSOR_QUANT8_ASYMM_SIGNED (HAL 1.3), rank 1..4.
  input 1: axes, 1-D TENSOR_INT32, values in [-rank, rank); repeats count once.
  input 2: keep_dims, INT32 scalar: a positive value keeps reduced dimensions as size 1.
  output 0: input 0's type; quantised: input 0's scale and zero point (the reference gives
            the output the input's parameters and fails a model output that differs).
            Shape as for REDUCE_*: reduced dimensions dropped (or 1 with keep_dims), [1] if
            nothing is left.

Semantics (CpuExecutor's meanGeneric over TFLite's reference Mean):
- float32: the group is summed sequentially in float32 (row-major order), then divided by the
  element count as a float32.  float16 is converted to float32, averaged so, and rounded back.
- quantised: there is no requantisation: the *stored* values (zero point included) are summed
  in integers and divided by the count with C++ integer division, which truncates toward zero.
  So the stored result is trunc(sum(q) / n): a floor for TENSOR_QUANT8_ASYMM, and toward zero
  for negative sums of TENSOR_QUANT8_ASYMM_SIGNED (the mean of -3 and -4 stored is -3).
- Zero-sized inputs, including an empty axes tensor, fail at run time.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops import reduce as rd
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


def validate(v: OpView) -> None:
    v.expect_counts(3, 1)
    v.expect_types([TYPES, T.TENSOR_INT32, T.INT32], [TYPES])
    v.expect_same_type(("input", 0), ("output", 0))
    v.expect_rank(0, range(1, rd.MAX_RANK + 1))
    rd.check_axes_static(v)
    if v.inputs[0].info.is_quant:
        v.expect_same_quant(("input", 0), ("output", 0))


@register(Op.MEAN, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    if not 1 <= x.ndim <= rd.MAX_RANK:
        ctx.fail(f"input rank must be 1..{rd.MAX_RANK}, got {x.ndim}")
    rd.reject_zero_sized(ctx)
    axes = rd.resolve_axes(ctx, x.ndim)
    keep = int(ctx.scalar(2)) > 0
    shape = rd.reduced_shape(x.shape, axes, keep)
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    out_dtype = ctx.output_dtype(0)
    if ctx.in_operands[0].info.is_float:
        total = rd.fold_sum(x.astype(np.float32), axes)
        mean = total / np.float32(count)
        return [mean.astype(out_dtype).reshape(shape)]
    total = rd.group_last(x.astype(np.int64), axes).sum(axis=-1)
    mean = np.sign(total) * (np.abs(total) // count)
    return [mean.astype(out_dtype).reshape(shape)]
