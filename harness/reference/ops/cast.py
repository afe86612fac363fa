"""CAST: converts a tensor's element type, ignoring any quantisation parameters.

Signature:
  input 0   a tensor, rank from 1.
  output 0  a tensor of the same shape.
Type pairs:
  - any of TENSOR_FLOAT16, TENSOR_FLOAT32, TENSOR_INT32, TENSOR_QUANT8_ASYMM to any of the same
    four (HAL 1.2).  QUANT8_ASYMM is read and written as plain uint8: scale and zero point are
    ignored on both sides.
  - identity only (HAL 1.3): TENSOR_BOOL8, TENSOR_QUANT16_ASYMM, TENSOR_QUANT16_SYMM,
    TENSOR_QUANT8_ASYMM_SIGNED, TENSOR_QUANT8_SYMM to the same type (a raw copy).
  If both shapes are known they must be equal.

Value rules of the CPU reference (a C++ static_cast per element):
  - to float16/float32: round to nearest even (large values become +-inf in fp16);
  - float to int32: truncation toward zero;
  - anything to uint8 (QUANT8_ASYMM): values below 0 give 0, above 255 give 255, the rest are
    truncated toward zero (254.9 -> 254, -0.5 -> 0);
  - float -> int32 outside the int32 range and NaN -> int32/uint8 are undefined behaviour in
    C++.  We follow what Android's ARM64 targets do (FCVTZS/FCVTZU): saturate to the int32
    range, and NaN gives 0.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.registry import OpContext, OpView, register

CONVERTIBLE = (T.TENSOR_FLOAT16, T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM)
IDENTITY_ONLY = (
    T.TENSOR_BOOL8,
    T.TENSOR_QUANT16_ASYMM,
    T.TENSOR_QUANT16_SYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
    T.TENSOR_QUANT8_SYMM,
)
ALL_TYPES = CONVERTIBLE + IDENTITY_ONLY

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def validate(v: OpView) -> None:
    v.expect_counts(1, 1)
    v.expect_types([ALL_TYPES], [ALL_TYPES])
    tin, tout = v.input_type(0), v.outputs[0].type
    if tin in IDENTITY_ONLY and tout != tin:
        v.fail(f"{tin.name} can only be cast to itself, not to {tout.name}", output=0)
    if tin in CONVERTIBLE and tout not in CONVERTIBLE:
        v.fail(f"cannot cast {tin.name} to {tout.name}", output=0)
    din, dout = v.inputs[0].dimensions, v.outputs[0].dimensions
    # An output whose dims are known but hold a 0 (unknown) entry is not compared, as in NNAPI.
    if din and dout and all(dout) and din != dout:
        v.fail(f"shape {list(dout)} differs from the input's {list(din)}", output=0)


def _float_to_int32(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    t = np.trunc(np.nan_to_num(x, nan=0.0))
    return np.clip(t, _INT32_MIN, _INT32_MAX).astype(np.int32)


def _to_uint8(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64) if x.dtype.kind == "f" else x.astype(np.int64)
    if x.dtype.kind == "f":
        x = np.trunc(np.nan_to_num(x, nan=0.0))
    return np.clip(x, 0, 255).astype(np.uint8)


@register(Op.CAST, data_types=ALL_TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    tin, tout = ctx.in_operands[0].type, ctx.out_operands[0].type
    if tin == tout:
        return [x.copy()]
    if tin not in CONVERTIBLE or tout not in CONVERTIBLE:
        ctx.fail(f"cannot cast {tin.name} to {tout.name}")
    if tout in (T.TENSOR_FLOAT16, T.TENSOR_FLOAT32):
        # int32 -> float16 goes through float64 (exact), so numpy rounds once, like C++.
        src = x.astype(np.float64) if x.dtype.kind in "iu" else x
        with np.errstate(over="ignore"):
            return [src.astype(ctx.output_dtype(0))]
    if tout == T.TENSOR_INT32:
        if x.dtype.kind == "f":
            return [_float_to_int32(x)]
        return [x.astype(np.int32)]
    return [_to_uint8(x)]
