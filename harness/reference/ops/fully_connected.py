"""FULLY_CONNECTED: output = activation(input . weights^T + bias).

Inputs:
  0 input   rank 2..4; flattened to [batch_size, input_size] where input_size is the weights'
            dimension 1 and batch_size = element count / input_size (which must divide it)
  1 weights [num_units, input_size]
  2 bias    [num_units]
  3 INT32 fused activation (0 NONE, 1 RELU, 2 RELU1, 3 RELU6)
Output 0: [batch_size, num_units].  batch_size may be 0.

Types: TENSOR_FLOAT32 or TENSOR_FLOAT16 (weights, bias and output the same; fp16 computes in
float32); TENSOR_QUANT8_ASYMM or TENSOR_QUANT8_ASYMM_SIGNED input, weights and output (no
per-channel weights) with a TENSOR_INT32 bias of scale input_scale * weights_scale; the output
uses its own scale and zero point (requantised by (input_scale * weights_scale) / output_scale).
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.ir import element_count
from nnconform.reference.arith import activation
from nnconform.reference.arith.quant import QUANT_RANGE
from nnconform.reference.kernels import jit
from nnconform.reference.ops import conv_common as cc
from nnconform.reference.ops.registry import OpContext, OpView, register


def validate(v: OpView) -> None:
    v.expect_counts(4, 1)
    x, wt, b = v.inputs[:3]
    if x.type not in cc.TYPES:
        v.fail(f"must be {' or '.join(t.name for t in cc.TYPES)}, got {x.type.name}", input=0)
    quant = x.type in cc.QUANT_TYPES
    v.expect_types([None, x.type, T.TENSOR_INT32 if quant else x.type, T.INT32], [x.type])
    v.expect_rank(0, range(2, 5))
    v.expect_rank(1, (2,))
    v.expect_rank(2, (1,))
    v.expect_rank(0, (2,), output=True)
    v.expect_scalar_in(3, activation.FUSED_ACTIVATIONS, "fused activation")
    if quant:
        cc.check_bias_scale(v, x, wt, b)
    units, size, bl = cc.known_dim(wt, 0), cc.known_dim(wt, 1), cc.known_dim(b, 0)
    if units and bl and units != bl:
        v.fail(f"bias has {bl} values for {units} units", input=2)
    if size and x.fully_specified and element_count(x.dimensions) % size:
        v.fail(f"{element_count(x.dimensions)} elements do not split into rows of input_size {size}", input=0)


# Rows up to which the compiled integer product beats float32 BLAS on the offsets.
_JIT_MAX_BATCH = 8


@register(Op.FULLY_CONNECTED, data_types=cc.TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x, wt, b = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    xo, wo, bo = ctx.in_operands[:3]
    out = ctx.out_operands[0]
    act = ctx.scalar(3)
    if act not in activation.FUSED_ACTIVATIONS:
        ctx.fail(f"fused activation must be 0..3, got {act}")
    if wo.type != xo.type:
        ctx.fail(f"weights type {wo.type.name} differs from input type {xo.type.name}")
    quant = xo.type in cc.QUANT_TYPES
    if bo.type != (T.TENSOR_INT32 if quant else xo.type):
        ctx.fail(f"bias type {bo.type.name} does not fit input type {xo.type.name}")
    if not 2 <= x.ndim <= 4 or wt.ndim != 2 or b.ndim != 1:
        ctx.fail(f"input, weights and bias must be rank 2..4, 2 and 1, got {x.ndim}, {wt.ndim}, {b.ndim}")
    units, size = wt.shape
    if units <= 0 or size <= 0:
        ctx.fail(f"weights dimensions must be positive, got {list(wt.shape)}")
    if x.size % size:
        ctx.fail(f"{x.size} input elements do not split into rows of input_size {size}")
    if b.shape[0] != units:
        ctx.fail(f"bias has {b.shape[0]} values for {units} units")
    batch = x.size // size
    if batch == 0:
        return [np.zeros((0, units), out.info.dtype)]
    x2 = x.reshape(batch, size)
    if not quant:
        y = cc.to_float32(x2) @ cc.widened_constant(ctx, 1).T + cc.widened_constant(ctx, 2)
        return [cc.finish_float(y, act, out)]
    mult, shift = cc.output_multipliers(ctx, xo, wo, bo, out, units)
    # (at any size, at=1: on a small layer the numpy path's calls are most of its ~50-100 us)
    if batch <= _JIT_MAX_BATCH and size * 255 * 255 < 1 << 31 and jit.worth(batch * units * size // 16, at=1):
        # A few rows (a classifier's one): an integer dot product over the stored weight
        # bytes, compiled, reads a quarter of the float32 offsets BLAS would.  Exact: every
        # partial sum is below 2**31.
        acc = jit.dot_offsets(x2, xo.zero_point, wt, wo.zero_point)
        # |x - xz| and |w - wz| from the stored types: no scan of the input (~10 us of a
        # classifier's call), nor of the weights or their float32 offsets (the bound only
        # picks the requantiser's path; every path gives the same bits)
        (xlo, xhi), (wlo, whi) = QUANT_RANGE[xo.type], QUANT_RANGE[wo.type]
        bound = size * max(xo.zero_point - xlo, xhi - xo.zero_point) * max(wo.zero_point - wlo, whi - wo.zero_point)
        return [cc.requantize(acc, b, mult, shift, out, act, acc_bound=bound)]
    wq, bmax = cc.constant_offsets(ctx, 1, wo.zero_point, np.float32)
    amax = cc.offset_bound(x2, xo.zero_point)
    acc = cc.exact_matmul(cc.offsets_as(x2, xo.zero_point, np.float32), wq, amax, bmax)
    return [cc.requantize(acc, b, mult, shift, out, act, acc_bound=size * amax * bmax)]
