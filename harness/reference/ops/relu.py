"""RELU, RELU1, RELU6: clamp to [0, inf), [-1, 1], [0, 6].

Signature (all three): input 0 a tensor of rank <= 4 (a known rank above 4 is invalid, as for
every activation: CTS's TestValidateOperations checks that rank 5 is rejected) of TENSOR_FLOAT32,
TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM or TENSOR_QUANT8_ASYMM_SIGNED; output 0 the same type and
shape.  Quantised outputs must use the input's scale and zero point: the clamp then
happens on stored values, with bounds quantised by std::round (CalculateActivationRange).
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import activation
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
_ACT = {Op.RELU: activation.RELU, Op.RELU1: activation.RELU1, Op.RELU6: activation.RELU6}


def validate(v: OpView) -> None:
    v.expect_counts(1, 1)
    v.expect_types([TYPES], [TYPES])
    v.expect_same_type(("input", 0), ("output", 0))
    v.expect_rank(0, range(0, 5))
    if v.inputs[0].info.is_quant:
        v.expect_same_quant(("input", 0), ("output", 0))


@register(Op.RELU, Op.RELU1, Op.RELU6, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    act = _ACT[ctx.operation.type]
    if ctx.in_operands[0].info.is_float:
        return [activation.apply_float(x, act)]
    return [activation.apply_quant(x.astype(np.int64), act, ctx.out_operands[0])]
