"""MIRROR_PAD (operation 104, NNAPI feature level 7; not in HAL 1.3 / android11).

Signature, from the NNAPI documentation of later releases (NeuralNetworksTypes.h):
inputs:  0 tensor of TENSOR_FLOAT16, TENSOR_FLOAT32, TENSOR_QUANT8_ASYMM,
           TENSOR_QUANT8_ASYMM_SIGNED or TENSOR_INT32, rank >= 1;
         1 paddings, TENSOR_INT32 of shape [rank(input0), 2]: (before, after) per dimension,
           every value >= 0, and < dim (REFLECT) or <= dim (SYMMETRIC);
         2 mode, INT32 scalar: 0 REFLECT, 1 SYMMETRIC.
output:  0 the input's type and rank; dimension i is before[i] + input.dim[i] + after[i].
           Quantised outputs carry the input's scale and zero point.

REFLECT mirrors around the border element without repeating it ([1, 2, 3] padded (0, 2) is
[1, 2, 3, 2, 1]); SYMMETRIC repeats it ([1, 2, 3, 3, 2]).  Values are copied, never
requantised, so every type is a pure data movement.  Zero-sized inputs are rejected at run
time (the operation is registered without the zero-sized-input allowance).
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.pad import check_paddings_operand, read_paddings
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_INT32)
REFLECT, SYMMETRIC = 0, 1
_NUMPY_MODE = {REFLECT: "reflect", SYMMETRIC: "symmetric"}


def validate(v: OpView) -> None:
    v.expect_counts(3, 1)
    v.expect_types([TYPES, T.TENSOR_INT32, T.INT32], [TYPES])
    v.expect_same_type(("input", 0), ("output", 0))
    v.expect_rank(0, range(1, 1 << 16))
    check_paddings_operand(v)
    v.expect_scalar_in(2, (REFLECT, SYMMETRIC), "mode (0 REFLECT, 1 SYMMETRIC)")
    rank, out_rank = len(v.inputs[0].dimensions), len(v.outputs[0].dimensions)
    if rank and out_rank and rank != out_rank:
        v.fail(f"rank {out_rank} differs from the input's rank {rank}", output=0)
    if v.inputs[0].info.is_quant:
        v.expect_same_quant(("input", 0), ("output", 0))


@register(Op.MIRROR_PAD, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    if x.ndim < 1:
        ctx.fail("input must have rank >= 1")
    if x.size == 0:
        ctx.fail(f"input is zero-sized {list(x.shape)}; MIRROR_PAD does not accept zero-sized tensors")
    mode = int(ctx.scalar(2))
    if mode not in _NUMPY_MODE:
        ctx.fail(f"mode must be 0 (REFLECT) or 1 (SYMMETRIC), got {mode}")
    pads = read_paddings(ctx, x.ndim)
    # REFLECT cannot reach further than dim - 1 elements without repeating the border.
    limit = np.asarray(x.shape, dtype=np.int64)[:, None] - (1 if mode == REFLECT else 0)
    if np.any(pads > limit):
        ctx.fail(
            f"paddings {pads.tolist()} exceed what {_NUMPY_MODE[mode].upper()} allows for input shape {list(x.shape)}"
        )
    out = np.pad(x, [tuple(r) for r in pads.tolist()], mode=_NUMPY_MODE[mode])
    return [out.astype(ctx.output_dtype(0), copy=False)]
