"""CONV_2D: 2-D convolution, output[b, y, x, o] = bias[o] + sum over (i, j, c) of
input[b, y*sh + i*dh - pad_top, x*sw + j*dw - pad_left, c] * filter[o, i, j, c], then the
fused activation.

Inputs (implicit padding, 7, 8 or 10 inputs):
  0 input  [batches, height, width, depth_in] (NHWC; NCHW when the layout flag is true)
  1 filter [depth_out, filter_height, filter_width, depth_in]
  2 bias   [depth_out]
  3 INT32 padding scheme (1 SAME, 2 VALID); 4 INT32 stride_width; 5 INT32 stride_height;
  6 INT32 fused activation (0 NONE, 1 RELU, 2 RELU1, 3 RELU6)
  7 BOOL layout (optional, true = NCHW); 8, 9 INT32 dilation width/height (optional, both)
Inputs (explicit padding, 10, 11 or 13 inputs): 3..6 INT32 padding left, right, top, bottom;
  7 stride_width; 8 stride_height; 9 activation; 10 BOOL layout; 11, 12 dilation factors.
Output 0: [batches, out_height, out_width, depth_out] (NCHW: [b, depth_out, h, w]) with
  out = (in - ((f - 1) * dilation + 1) + stride + pad_head + pad_tail) // stride.

Types: TENSOR_FLOAT32 or TENSOR_FLOAT16 (filter, bias and output the same type; fp16
computes in float32 as the reference does); TENSOR_QUANT8_ASYMM or TENSOR_QUANT8_ASYMM_SIGNED
input/output with a filter of the input's type or TENSOR_QUANT8_SYMM_PER_CHANNEL
(channel_dim 0) and a TENSOR_INT32 bias of scale input_scale * filter_scale (per channel:
input_scale * filter_scale[o], the bias operand's own scale being 0).  Quantised outputs use
their own scale and zero point: accumulators are requantised with
(input_scale * filter_scale) / output_scale.  Only the batch may be 0; padding must be smaller
than the dilated filter.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperationType as Op
from nnconform.reference.ops import conv_common as cc
from nnconform.reference.ops.registry import OpContext, OpView, register


def validate(v: OpView) -> None:
    v.expect_counts((7, 8, 10, 11, 13), 1)
    lay = cc.view_layout(v)
    cc.validate_tensor_types(v, filter_channel_dim=0)
    cc.validate_scalars(v, lay)
    x, f, b = v.inputs[:3]
    nchw = v.constant_scalar(lay.layout) if lay.layout is not None else False
    if nchw is not None:
        c, fc = cc.known_dim(x, 1 if nchw else 3), cc.known_dim(f, 3)
        if c and fc and c != fc:
            v.fail(f"filter depth {fc} differs from the input depth {c}", input=1)
    o, bl = cc.known_dim(f, 0), cc.known_dim(b, 0)
    if o and bl and o != bl:
        v.fail(f"bias has {bl} values for {o} output channels", input=2)


def prepare(v: OpView):
    """A plan-time kernel for an NHWC convolution, float32 or quantised (8-bit input,
    per-tensor or per-channel filter), with a constant filter and bias, constant parameters
    and known dimensions: every convolution of the built-in MobileNets and of the zoo.
    ``execute``'s own checks run here on the model's constants; the kernel keeps only
    run_conv's arithmetic, with the same calls: a MobileNet's small convolution spent ~8-10
    us of its 10-100 us in the checks and parameter reads around them."""
    setup = cc.static_setup(v, lambda ctx, p: cc.conv_checks(ctx, p, 1))
    if setup is None:
        return None
    ctx, p, x, oh, ow, quantised = setup
    f, b = ctx.inputs[1], ctx.inputs[2]
    o, fh, fw, cf = f.shape
    slot, dims = v.operation.inputs[0], v.inputs[0].dimensions
    if not quantised:
        row = cc.bias_row(b, x.shape[0] * oh * ow * o)

        def kernel(values: list):
            x = values[slot]
            if x is None or x.shape != dims:
                return None
            return [cc.conv_float(x, f, b, row, p, oh, ow)]

        return kernel
    quant = cc.prepared_quant(ctx, fh * fw * cf, o)
    if quant is None:
        return None
    xz, offsets, mult, shift, acc_bound = quant
    out = v.outputs[0]

    def kernel_quant(values: list):
        x = values[slot]
        if x is None or x.shape != dims:
            return None
        return [cc.conv_quant(x, xz, offsets, b, mult, shift, acc_bound, out, p, oh, ow)]

    return kernel_quant


@register(Op.CONV_2D, data_types=cc.TYPES, validate=validate, prepare=prepare)
def execute(ctx: OpContext) -> list[np.ndarray]:
    p = cc.planned_params(ctx)
    return [cc.run_conv(ctx, p)]
