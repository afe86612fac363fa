"""GROUPED_CONV_2D: the input channels and the filters are split into num_groups groups;
group g convolves input channels [g*C/G, (g+1)*C/G) with filters [g*O/G, (g+1)*O/G):
output[b, y, x, o] = bias[o] + sum over (i, j, k) of
input[b, y*sh + i - pad_top, x*sw + j - pad_left, g*C/G + k] * filter[o, i, j, k], g = o // (O/G).

Inputs (implicit padding, 9 inputs):
  0 input  [batches, height, width, depth_in] (NCHW when the layout flag is true)
  1 filter [depth_out, filter_height, filter_width, depth_in / num_groups]
  2 bias   [depth_out]
  3 INT32 padding scheme; 4 stride_width; 5 stride_height; 6 INT32 num_groups;
  7 INT32 fused activation; 8 BOOL layout (required)
Inputs (explicit padding, 12 inputs): 3..6 padding left, right, top, bottom; 7 stride_width;
  8 stride_height; 9 num_groups; 10 activation; 11 BOOL layout.
No dilation.  depth_out must be a multiple of num_groups.
Output 0: [batches, out_height, out_width, depth_out] (NCHW: [b, depth_out, h, w]).

Types: as CONV_2D (per-channel filters along channel_dim 0).
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperationType as Op
from nnconform.reference.ops import conv_common as cc
from nnconform.reference.ops.registry import OpContext, OpView, register


def validate(v: OpView) -> None:
    v.expect_counts((9, 12), 1)
    lay = cc.view_layout(v, n_extra=1, dilation=False, layout_required=True)
    cc.validate_tensor_types(v, filter_channel_dim=0)
    cc.validate_scalars(v, lay)
    (g_idx,) = lay.extra
    groups = v.constant_scalar(g_idx)
    if groups is not None and groups < 1:
        v.fail(f"number of groups must be >= 1, got {groups}", input=g_idx)
    x, f, b = v.inputs[:3]
    o, fc, bl = cc.known_dim(f, 0), cc.known_dim(f, 3), cc.known_dim(b, 0)
    if groups is not None and groups >= 1:
        if o and o % groups:
            v.fail(f"output depth {o} is not a multiple of the {groups} groups", input=1)
        nchw = v.constant_scalar(lay.layout)
        c = cc.known_dim(x, 1 if nchw else 3) if nchw is not None else 0
        if c and fc and c != fc * groups:
            v.fail(f"filter depth {fc} x {groups} groups differs from the input depth {c}", input=1)
    if o and bl and o != bl:
        v.fail(f"bias has {bl} values for {o} output channels", input=2)


@register(Op.GROUPED_CONV_2D, data_types=cc.TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    p = cc.planned_params(ctx, n_extra=1, dilation=False, layout_required=True)
    return [cc.run_conv(ctx, p, groups=p.extra[0])]
