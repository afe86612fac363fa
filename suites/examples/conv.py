"""CONV_2D, DEPTHWISE_CONV_2D, GROUPED_CONV_2D, TRANSPOSE_CONV_2D and FULLY_CONNECTED examples.

Expected values are worked out by hand in the comments.  Quantised examples are built around
the fixed-point rounding of the reference: with a real multiplier of 0.5 (mantissa 2**30,
shift 0) SaturatingRoundingDoublingHighMul maps +2.5 -> 3 but -2.5 -> -2 and -0.5 -> 0 (its
negative nudge is 1 - 2**30), while RoundingDivideByPOT rounds -0.5 -> -1 (half away from 0).

Zero-sized batches are not here: NNAPI requests cannot pass a 0 dimension, so they only arise
inside a graph (AOSP makes them with BOX_WITH_NMS_LIMIT); tests/ops/test_conv.py runs them on
the executor directly.
"""

import numpy as np

from nnconform.ir import ChannelQuant, ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.suites.examples import Example

F32, F16, I32 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32
Q8, Q8S, QPC = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_QUANT8_SYMM_PER_CHANNEL


def _model(
    op, t, x_dims, f, b, args, out_dims, *, qx=None, qf=None, qb=None, qo=None, filter_type=None, bias_type=None
):
    """One-operation model: input 0 is the only model input; filter and bias are constants.
    ``f`` and ``b`` are (dims, values); ``args`` are scalars: int -> INT32, bool -> BOOL,
    or (dims, values) for a TENSOR_INT32 constant (TRANSPOSE_CONV_2D's output shape)."""
    bld = ModelBuilder()
    x = bld.input(t, x_dims, **(qx or {}))
    fi = bld.const(filter_type or t, f[0], f[1], **(qf or {}))
    bi = bld.const(bias_type or (I32 if t in (Q8, Q8S) else t), b[0], b[1], **(qb or {}))
    ins = [x, fi, bi]
    for a in args:
        if isinstance(a, bool):
            ins.append(bld.bool(a))
        elif isinstance(a, int):
            ins.append(bld.i32(a))
        else:
            ins.append(bld.const(I32, a[0], a[1]))
    y = bld.output(t, out_dims, **(qo or {}))
    bld.operation(op, ins, [y])
    return bld.build()


def _f(values, t=F32):
    return np.array(values, dtype=np.float16 if t == F16 else np.float32)


SAME, VALID = 1, 2
NONE, RELU, RELU1, RELU6 = 0, 1, 2, 3
X9 = [1, 2, 3, 4, 5, 6, 7, 8, 9]  # a 3x3 image, row-major

# Quantisation shared by the ties examples: real multiplier (0.5 * 0.5) / 0.5 = 0.5.
QX = dict(scale=0.5, zero_point=128)
QF = dict(scale=0.5, zero_point=128)
QB = dict(scale=0.25)
QO = dict(scale=0.5, zero_point=100)
QXS = dict(scale=0.5, zero_point=0)
QFS = dict(scale=0.5, zero_point=0)
QOS = dict(scale=0.5, zero_point=0)


def _conv_examples():
    ex = []
    # 3x3 image, 2x2 filter [[1, 2], [3, 4]], bias 0.5, VALID: e.g. top left 1+2*2+4*3+5*4 = 37.
    for t in (F32, F16):
        ex.append(
            Example(
                f"conv_2d_valid_2x2_{'fp32' if t == F32 else 'fp16'}",
                _model(
                    Op.CONV_2D,
                    t,
                    [1, 3, 3, 1],
                    ([1, 2, 2, 1], [1, 2, 3, 4]),
                    ([1], [0.5]),
                    [VALID, 1, 1, NONE],
                    [1, 2, 2, 1],
                ),
                [_f(X9, t).reshape(1, 3, 3, 1)],
                [_f([37.5, 47.5, 67.5, 77.5], t).reshape(1, 2, 2, 1)],
            )
        )
    # SAME with an even kernel: 1 pixel of padding, all at the tail (bottom/right).
    # Right column: 3*1 + 6*3 = 21, 6*1 + 9*3 = 33; bottom row: 7+16 = 23, 8+18 = 26, 9.
    ex.append(
        Example(
            "conv_2d_same_even_kernel_fp32",
            _model(
                Op.CONV_2D,
                F32,
                [1, 3, 3, 1],
                ([1, 2, 2, 1], [1, 2, 3, 4]),
                ([1], [0.5]),
                [SAME, 1, 1, NONE],
                [1, 3, 3, 1],
            ),
            [_f(X9).reshape(1, 3, 3, 1)],
            [_f([37.5, 47.5, 21.5, 67.5, 77.5, 33.5, 23.5, 26.5, 9.5]).reshape(1, 3, 3, 1)],
        )
    )
    # 4x4 image 1..16, 3x3 box filter, stride 2, SAME: out 2x2, padding 0 head / 1 tail.
    # (0,0) = 1+2+3+5+6+7+9+10+11 = 54, (0,1) = 3+4+7+8+11+12 = 45,
    # (1,0) = 9+10+11+13+14+15 = 72, (1,1) = 11+12+15+16 = 54.
    ex.append(
        Example(
            "conv_2d_same_3x3_stride2_fp32",
            _model(
                Op.CONV_2D, F32, [1, 4, 4, 1], ([1, 3, 3, 1], [1] * 9), ([1], [0.0]), [SAME, 2, 2, NONE], [1, 2, 2, 1]
            ),
            [_f(np.arange(1, 17)).reshape(1, 4, 4, 1)],
            [_f([54, 45, 72, 54]).reshape(1, 2, 2, 1)],
        )
    )
    # NCHW, explicit padding 1 on every side, 2x2 filter dilated by 2 (taps 2 apart), RELU.
    # Channel 0 = 1..9, channel 1 = ones.  Filter 0 weighs ch0 by 1 and ch1 by 0.5; filter 1
    # weighs ch1 by 1.  Sum of in-bounds ch0 taps: corners 5, edges 4+6 = 10, centre 1+3+7+9 = 20;
    # in-bounds tap counts: corners 1, edges 2, centre 4.
    # out0 = relu(ch0 sum + 0.5 * count - 10): corners 5.5-10 -> 0, edges 11-10 = 1, centre 12.
    # out1 = count.
    ex.append(
        Example(
            "conv_2d_nchw_explicit_dilation_relu_fp32",
            _model(
                Op.CONV_2D,
                F32,
                [1, 2, 3, 3],
                ([2, 2, 2, 2], [1, 0.5, 1, 0.5, 1, 0.5, 1, 0.5, 0, 1, 0, 1, 0, 1, 0, 1]),
                ([2], [-10.0, 0.0]),
                [1, 1, 1, 1, 1, 1, RELU, True, 2, 2],
                [1, 2, 3, 3],
            ),
            [_f(X9 + [1] * 9).reshape(1, 2, 3, 3)],
            [_f([0, 1, 0, 1, 12, 1, 0, 1, 0, 1, 2, 1, 2, 4, 2, 1, 2, 1]).reshape(1, 2, 3, 3)],
        )
    )
    # quant8, 2x2 input offsets [1, 3, -1, -3] (stored - 128), VALID 2x2 filters with offsets
    # [1, 1, 1, 1] and [1, 0, 0, 0]: sums 0 and 1; bias 5 and -6 -> 5 and -5; x0.5 -> 2.5 -> 3
    # and -2.5 -> -2 (SRDHM ties); + zero point 100.
    ex.append(
        Example(
            "conv_2d_quant8_rounding_ties",
            _model(
                Op.CONV_2D,
                Q8,
                [1, 2, 2, 1],
                ([2, 2, 2, 1], [129] * 4 + [129, 128, 128, 128]),
                ([2], [5, -6]),
                [VALID, 1, 1, NONE],
                [1, 1, 1, 2],
                qx=QX,
                qf=QF,
                qb=QB,
                qo=QO,
            ),
            [np.array([129, 131, 127, 125], np.uint8).reshape(1, 2, 2, 1)],
            [np.array([103, 98], np.uint8).reshape(1, 1, 1, 2)],
        )
    )
    # The same in quant8_signed with zero points 0, RELU: lower bound q(0) = 0, so -2 -> 0.
    ex.append(
        Example(
            "conv_2d_quant8_signed_relu",
            _model(
                Op.CONV_2D,
                Q8S,
                [1, 2, 2, 1],
                ([2, 2, 2, 1], [1] * 4 + [1, 0, 0, 0]),
                ([2], [5, -6]),
                [VALID, 1, 1, RELU],
                [1, 1, 1, 2],
                qx=QXS,
                qf=QFS,
                qb=QB,
                qo=QOS,
            ),
            [np.array([1, 3, -1, -3], np.int8).reshape(1, 2, 2, 1)],
            [np.array([3, 0], np.int8).reshape(1, 1, 1, 2)],
        )
    )
    # Per-channel filter (scales 0.5 and 0.25): channel 0 as above (5 x 0.5 -> 3); channel 1
    # filter [2, 0, 0, 0] -> 2, bias -4 (at scale 0.5*0.25) -> -2, multiplier 0.25:
    # SRDHM(-2) = -1 (-1.0), RDBP(-1, 1) = -1 (-0.5 rounds away from 0) -> 99.
    ex.append(
        Example(
            "conv_2d_quant8_per_channel",
            _model(
                Op.CONV_2D,
                Q8,
                [1, 2, 2, 1],
                ([2, 2, 2, 1], [1] * 4 + [2, 0, 0, 0]),
                ([2], [5, -4]),
                [VALID, 1, 1, NONE],
                [1, 1, 1, 2],
                qx=QX,
                qo=QO,
                qf=dict(channel_quant=ChannelQuant((0.5, 0.25), 0)),
                filter_type=QPC,
            ),
            [np.array([129, 131, 127, 125], np.uint8).reshape(1, 2, 2, 1)],
            [np.array([103, 99], np.uint8).reshape(1, 1, 1, 2)],
        )
    )
    return ex


def _depthwise_examples():
    ex = []
    # Depth multiplier 2 on 2 channels (ch0 1..4, ch1 10..40), 2x2 VALID.  Output channel
    # c*2+m; per-tap filter rows [oc0, oc1, oc2, oc3]: (0,0) [1,1,0,1], (0,1) [1,0,0,-1],
    # (1,0) [1,0,0,0], (1,1) [1,0,1,0].  oc0 = 1+2+3+4 = 10, oc1 = 1, oc2 = 40,
    # oc3 = 10-20 = -10, bias [0,0,0,1] -> -9.
    for t in (F32, F16):
        ex.append(
            Example(
                f"depthwise_conv_2d_multiplier2_{'fp32' if t == F32 else 'fp16'}",
                _model(
                    Op.DEPTHWISE_CONV_2D,
                    t,
                    [1, 2, 2, 2],
                    ([1, 2, 2, 4], [1, 1, 0, 1, 1, 0, 0, -1, 1, 0, 0, 0, 1, 0, 1, 0]),
                    ([4], [0, 0, 0, 1]),
                    [VALID, 1, 1, 2, NONE],
                    [1, 1, 1, 4],
                ),
                [_f([1, 10, 2, 20, 3, 30, 4, 40], t).reshape(1, 2, 2, 2)],
                [_f([10, 1, 40, -9], t).reshape(1, 1, 1, 4)],
            )
        )
    # 3x3 box filter, SAME, stride 1: sums of the in-bounds 3x3 neighbourhood of 1..9.
    ex.append(
        Example(
            "depthwise_conv_2d_same_3x3_fp32",
            _model(
                Op.DEPTHWISE_CONV_2D,
                F32,
                [1, 3, 3, 1],
                ([1, 3, 3, 1], [1] * 9),
                ([1], [0.0]),
                [SAME, 1, 1, 1, NONE],
                [1, 3, 3, 1],
            ),
            [_f(X9).reshape(1, 3, 3, 1)],
            [_f([12, 21, 16, 27, 45, 33, 24, 39, 28]).reshape(1, 3, 3, 1)],
        )
    )
    # NCHW, implicit SAME with dilation 2 (effective 3x3, padding 1/1), 2x2 ones filter:
    # ch0 = 1..9 gives the in-bounds sums of conv_2d_nchw_explicit_dilation_relu_fp32,
    # ch1 = ones gives the tap counts.
    ex.append(
        Example(
            "depthwise_conv_2d_nchw_same_dilation_fp32",
            _model(
                Op.DEPTHWISE_CONV_2D,
                F32,
                [1, 2, 3, 3],
                ([1, 2, 2, 2], [1] * 8),
                ([2], [0.0, 0.0]),
                [SAME, 1, 1, 1, NONE, True, 2, 2],
                [1, 2, 3, 3],
            ),
            [_f(X9 + [1] * 9).reshape(1, 2, 3, 3)],
            [_f([5, 10, 5, 10, 20, 10, 5, 10, 5, 1, 2, 1, 2, 4, 2, 1, 2, 1]).reshape(1, 2, 3, 3)],
        )
    )
    # quant8, 1x2 image of 2 channels, offsets pixel0 [1, 2], pixel1 [3, -2]; 1x2 filter offsets
    # tap0 [1, -1], tap1 [1, 0]: ch0 = 1+3 = 4, ch1 = -2; bias [1, -3] -> 5, -5;
    # x0.5 -> 3, -2; + 100.
    ex.append(
        Example(
            "depthwise_conv_2d_quant8_rounding_ties",
            _model(
                Op.DEPTHWISE_CONV_2D,
                Q8,
                [1, 1, 2, 2],
                ([1, 1, 2, 2], [129, 127, 129, 128]),
                ([2], [1, -3]),
                [VALID, 1, 1, 1, NONE],
                [1, 1, 1, 2],
                qx=QX,
                qf=QF,
                qb=QB,
                qo=QO,
            ),
            [np.array([129, 130, 131, 126], np.uint8).reshape(1, 1, 2, 2)],
            [np.array([103, 98], np.uint8).reshape(1, 1, 1, 2)],
        )
    )
    # The same, signed with zero points 0, explicit padding 0 and RELU6 (bounds 0..12).
    ex.append(
        Example(
            "depthwise_conv_2d_quant8_signed_relu6",
            _model(
                Op.DEPTHWISE_CONV_2D,
                Q8S,
                [1, 1, 2, 2],
                ([1, 1, 2, 2], [1, -1, 1, 0]),
                ([2], [1, -3]),
                [0, 0, 0, 0, 1, 1, 1, RELU6],
                [1, 1, 1, 2],
                qx=QXS,
                qf=QFS,
                qb=QB,
                qo=QOS,
            ),
            [np.array([1, 2, 3, -2], np.int8).reshape(1, 1, 2, 2)],
            [np.array([3, 0], np.int8).reshape(1, 1, 1, 2)],
        )
    )
    # Per-channel along dim 3 (scales 0.5, 0.25): ch0 5 x 0.5 -> 3; ch1 -2 + bias -3 = -5
    # at multiplier 0.25: SRDHM(-5) = -2, RDBP(-2, 1) = -1 (-1.25 -> -1).
    ex.append(
        Example(
            "depthwise_conv_2d_quant8_signed_per_channel",
            _model(
                Op.DEPTHWISE_CONV_2D,
                Q8S,
                [1, 1, 2, 2],
                ([1, 1, 2, 2], [1, -1, 1, 0]),
                ([2], [1, -3]),
                [VALID, 1, 1, 1, NONE],
                [1, 1, 1, 2],
                qx=QXS,
                qo=QOS,
                qf=dict(channel_quant=ChannelQuant((0.5, 0.25), 3)),
                filter_type=QPC,
            ),
            [np.array([1, 2, 3, -2], np.int8).reshape(1, 1, 2, 2)],
            [np.array([3, -1], np.int8).reshape(1, 1, 1, 2)],
        )
    )
    return ex


def _grouped_examples():
    ex = []
    # 2 groups of 2 channels, 1x1 filters: o0 = [1, 1], o1 = [1, -1] on ch0..1, o2 = [1, 0],
    # o3 = [0, 2] on ch2..3, bias [0, 0, 0, 0.5].  Pixel [1,2,3,4] -> [3, -1, 3, 8.5];
    # pixel [5,6,7,8] -> [11, -1, 7, 16.5].
    for t in (F32, F16):
        ex.append(
            Example(
                f"grouped_conv_2d_1x1_{'fp32' if t == F32 else 'fp16'}",
                _model(
                    Op.GROUPED_CONV_2D,
                    t,
                    [1, 1, 2, 4],
                    ([4, 1, 1, 2], [1, 1, 1, -1, 1, 0, 0, 2]),
                    ([4], [0, 0, 0, 0.5]),
                    [VALID, 1, 1, 2, NONE, False],
                    [1, 1, 2, 4],
                ),
                [_f([1, 2, 3, 4, 5, 6, 7, 8], t).reshape(1, 1, 2, 4)],
                [_f([3, -1, 3, 8.5, 11, -1, 7, 16.5], t).reshape(1, 1, 2, 4)],
            )
        )
    # NCHW, explicit padding left 1 right 1, 1x2 filters, one per group: o0 = [1, 1] over
    # ch0 = [1, 2] -> windows [0,1], [1,2], [2,0] = [1, 3, 2]; o1 = [1, -1] over ch1 = [10, 20]
    # -> [0-10, 10-20, 20-0] = [-10, -10, 20].
    ex.append(
        Example(
            "grouped_conv_2d_nchw_explicit_fp32",
            _model(
                Op.GROUPED_CONV_2D,
                F32,
                [1, 2, 1, 2],
                ([2, 1, 2, 1], [1, 1, 1, -1]),
                ([2], [0.0, 0.0]),
                [1, 1, 0, 0, 1, 1, 2, NONE, True],
                [1, 2, 1, 3],
            ),
            [_f([1, 2, 10, 20]).reshape(1, 2, 1, 2)],
            [_f([1, 3, 2, -10, -10, 20]).reshape(1, 2, 1, 3)],
        )
    )
    # quant8: offsets [1, 3 | -1, -3], filters o0 = [1, 1] (group 0), o1 = [1, 0] (group 1):
    # 4 and -1, bias [1, -4] -> 5, -5 -> x0.5 -> 3, -2 -> [103, 98].
    ex.append(
        Example(
            "grouped_conv_2d_quant8_rounding_ties",
            _model(
                Op.GROUPED_CONV_2D,
                Q8,
                [1, 1, 1, 4],
                ([2, 1, 1, 2], [129, 129, 129, 128]),
                ([2], [1, -4]),
                [VALID, 1, 1, 2, NONE, False],
                [1, 1, 1, 2],
                qx=QX,
                qf=QF,
                qb=QB,
                qo=QO,
            ),
            [np.array([129, 131, 127, 125], np.uint8).reshape(1, 1, 1, 4)],
            [np.array([103, 98], np.uint8).reshape(1, 1, 1, 2)],
        )
    )
    ex.append(
        Example(
            "grouped_conv_2d_quant8_signed",
            _model(
                Op.GROUPED_CONV_2D,
                Q8S,
                [1, 1, 1, 4],
                ([2, 1, 1, 2], [1, 1, 1, 0]),
                ([2], [1, -4]),
                [VALID, 1, 1, 2, NONE, False],
                [1, 1, 1, 2],
                qx=QXS,
                qf=QFS,
                qb=QB,
                qo=QOS,
            ),
            [np.array([1, 3, -1, -3], np.int8).reshape(1, 1, 1, 4)],
            [np.array([3, -2], np.int8).reshape(1, 1, 1, 2)],
        )
    )
    # Per-channel (0.5, 0.25): o0 4 + 1 = 5 -> 3; o1 filter [2, 0] -> -2, bias -2 -> -4 at
    # multiplier 0.25 -> SRDHM(-4) = -2, RDBP(-2, 1) = -1 -> 99.
    ex.append(
        Example(
            "grouped_conv_2d_quant8_per_channel",
            _model(
                Op.GROUPED_CONV_2D,
                Q8,
                [1, 1, 1, 4],
                ([2, 1, 1, 2], [1, 1, 2, 0]),
                ([2], [1, -2]),
                [VALID, 1, 1, 2, NONE, False],
                [1, 1, 1, 2],
                qx=QX,
                qo=QO,
                qf=dict(channel_quant=ChannelQuant((0.5, 0.25), 0)),
                filter_type=QPC,
            ),
            [np.array([129, 131, 127, 125], np.uint8).reshape(1, 1, 1, 4)],
            [np.array([103, 99], np.uint8).reshape(1, 1, 1, 2)],
        )
    )
    return ex


def _transpose_examples():
    ex = []
    # Stride 2, VALID, 2x2 filter [1, 2, 3, 4]: each input pixel v writes the block
    # [[v, 2v], [3v, 4v]] at (2h, 2w), without overlap.
    for t in (F32, F16):
        ex.append(
            Example(
                f"transpose_conv_2d_stride2_valid_{'fp32' if t == F32 else 'fp16'}",
                _model(
                    Op.TRANSPOSE_CONV_2D,
                    t,
                    [1, 2, 2, 1],
                    ([1, 2, 2, 1], [1, 2, 3, 4]),
                    ([1], [0.0]),
                    [([4], [1, 4, 4, 1]), VALID, 2, 2, NONE, False],
                    [1, 4, 4, 1],
                ),
                [_f([1, 2, 3, 4], t).reshape(1, 2, 2, 1)],
                [_f([1, 2, 2, 4, 3, 4, 6, 8, 3, 6, 4, 8, 9, 12, 12, 16], t).reshape(1, 4, 4, 1)],
            )
        )
    # NCHW, SAME, stride 2, 1x1 filter [1, 10] over 2 channels (ch0 1..4, ch1 ones): pixel
    # values 11..14.  Requested output 4x4: total padding (2-1)*2 + 1 - 4 = -1 -> head 0,
    # tail -1, so the output is 2*2 + 1 - 2 + 1 = 4 wide and its last row/column get only bias.
    ex.append(
        Example(
            "transpose_conv_2d_nchw_same_negative_tail_fp32",
            _model(
                Op.TRANSPOSE_CONV_2D,
                F32,
                [1, 2, 2, 2],
                ([1, 1, 1, 2], [1, 10]),
                ([1], [0.5]),
                [([4], [1, 1, 4, 4]), SAME, 2, 2, NONE, True],
                [1, 1, 4, 4],
            ),
            [_f([1, 2, 3, 4, 1, 1, 1, 1]).reshape(1, 2, 2, 2)],
            [
                _f([11.5, 0.5, 12.5, 0.5, 0.5, 0.5, 0.5, 0.5, 13.5, 0.5, 14.5, 0.5, 0.5, 0.5, 0.5, 0.5]).reshape(
                    1, 1, 4, 4
                )
            ],
        )
    )
    # Explicit padding left 1 right 0, stride 2, 1x3 filter [1, 2, 3] on [1, 2]: full row
    # [1, 2, 3+2, 4, 6], cropped to [2, 5, 4, 6]; + 0.5 then RELU6 -> [2.5, 5.5, 4.5, 6].
    ex.append(
        Example(
            "transpose_conv_2d_explicit_relu6_fp32",
            _model(
                Op.TRANSPOSE_CONV_2D,
                F32,
                [1, 1, 2, 1],
                ([1, 1, 3, 1], [1, 2, 3]),
                ([1], [0.5]),
                [1, 0, 0, 0, 2, 1, RELU6, False],
                [1, 1, 4, 1],
            ),
            [_f([1, 2]).reshape(1, 1, 2, 1)],
            [_f([2.5, 5.5, 4.5, 6]).reshape(1, 1, 4, 1)],
        )
    )
    # quant8, stride 1, 1x2 filter offsets [3, 1] on input offsets [1, -1]: row [3, 1-3, -1] =
    # [3, -2, -1]; bias 2 -> [5, 0, 1]; x0.5 -> [3 (2.5 up), 0, 1 (0.5 up)] + 100.
    ex.append(
        Example(
            "transpose_conv_2d_quant8_rounding_ties",
            _model(
                Op.TRANSPOSE_CONV_2D,
                Q8,
                [1, 1, 2, 1],
                ([1, 1, 2, 1], [131, 129]),
                ([1], [2]),
                [0, 0, 0, 0, 1, 1, NONE, False],
                [1, 1, 3, 1],
                qx=QX,
                qf=QF,
                qb=QB,
                qo=QO,
            ),
            [np.array([129, 127], np.uint8).reshape(1, 1, 2, 1)],
            [np.array([103, 100, 101], np.uint8).reshape(1, 1, 3, 1)],
        )
    )
    # Signed, bias -4: [-1, -6, -5] x0.5 -> SRDHM: -0.5 -> 0, -3, -2.5 -> -2.
    ex.append(
        Example(
            "transpose_conv_2d_quant8_signed_negative_ties",
            _model(
                Op.TRANSPOSE_CONV_2D,
                Q8S,
                [1, 1, 2, 1],
                ([1, 1, 2, 1], [3, 1]),
                ([1], [-4]),
                [0, 0, 0, 0, 1, 1, NONE, False],
                [1, 1, 3, 1],
                qx=QXS,
                qf=QFS,
                qb=QB,
                qo=QOS,
            ),
            [np.array([1, -1], np.int8).reshape(1, 1, 2, 1)],
            [np.array([0, -3, -2], np.int8).reshape(1, 1, 3, 1)],
        )
    )
    # Per-channel (0.5, 0.25), 2 output channels: ch0 filter [3, 1], bias 2 -> [5, 0, 1] -> [3, 0, 1];
    # ch1 filter [4, 0] -> [4, -4, 0] at multiplier 0.25 -> [1, -1, 0].  NHWC interleaves them.
    ex.append(
        Example(
            "transpose_conv_2d_quant8_signed_per_channel",
            _model(
                Op.TRANSPOSE_CONV_2D,
                Q8S,
                [1, 1, 2, 1],
                ([2, 1, 2, 1], [3, 1, 4, 0]),
                ([2], [2, 0]),
                [0, 0, 0, 0, 1, 1, NONE, False],
                [1, 1, 3, 2],
                qx=QXS,
                qo=QOS,
                qf=dict(channel_quant=ChannelQuant((0.5, 0.25), 0)),
                filter_type=QPC,
            ),
            [np.array([1, -1], np.int8).reshape(1, 1, 2, 1)],
            [np.array([3, 1, 0, -1, 1, 0], np.int8).reshape(1, 1, 3, 2)],
        )
    )
    return ex


def _fc_examples():
    ex = []
    # Input [1, 2, 1, 2] flattens by input_size 2 into rows [1, 2] and [3, 4]; weights
    # [[1, 0], [0, 1], [1, 1]], bias [0, 0, 0.5] -> [1, 2, 3.5] and [3, 4, 7.5].
    for t in (F32, F16):
        ex.append(
            Example(
                f"fully_connected_4d_input_{'fp32' if t == F32 else 'fp16'}",
                _model(
                    Op.FULLY_CONNECTED,
                    t,
                    [1, 2, 1, 2],
                    ([3, 2], [1, 0, 0, 1, 1, 1]),
                    ([3], [0, 0, 0.5]),
                    [NONE],
                    [2, 3],
                ),
                [_f([1, 2, 3, 4], t).reshape(1, 2, 1, 2)],
                [_f([1, 2, 3.5, 3, 4, 7.5], t).reshape(2, 3)],
            )
        )
    # [0.5, -1] . [[1, 1], [2, 0], [0, -2]] = [-0.5, 1, 2] -> RELU1 -> [-0.5, 1, 1].
    ex.append(
        Example(
            "fully_connected_relu1_fp32",
            _model(Op.FULLY_CONNECTED, F32, [1, 2], ([3, 2], [1, 1, 2, 0, 0, -2]), ([3], [0, 0, 0]), [RELU1], [1, 3]),
            [_f([[0.5, -1]])],
            [_f([[-0.5, 1, 1]])],
        )
    )
    # quant8: offsets [1, 3, -1, -3] . [1, 1, 1, 1] = 0 and . [1, 0, 0, 0] = 1; bias [5, -6]
    # -> 5, -5 -> x0.5 -> 3, -2 -> [103, 98].
    ex.append(
        Example(
            "fully_connected_quant8_rounding_ties",
            _model(
                Op.FULLY_CONNECTED,
                Q8,
                [1, 4],
                ([2, 4], [129] * 4 + [129, 128, 128, 128]),
                ([2], [5, -6]),
                [NONE],
                [1, 2],
                qx=QX,
                qf=QF,
                qb=QB,
                qo=QO,
            ),
            [np.array([[129, 131, 127, 125]], np.uint8)],
            [np.array([[103, 98]], np.uint8)],
        )
    )
    # quant8_signed with a multiplier above 1: scales 1 x 1 / 0.5 = 2 (mantissa 2**30, left
    # shift 2).  [3, -2] . [2, 1] + 1 = 5 -> 10; [3, -2] . [-1, 0] = -3 -> -6; + zero point -5
    # -> [5, -11]; RELU clamps at q(0) = -5 -> [5, -5].
    ex.append(
        Example(
            "fully_connected_quant8_signed_multiplier_above_one",
            _model(
                Op.FULLY_CONNECTED,
                Q8S,
                [1, 2],
                ([2, 2], [2, 1, -1, 0]),
                ([2], [1, 0]),
                [RELU],
                [1, 2],
                qx=dict(scale=1.0, zero_point=0),
                qf=dict(scale=1.0, zero_point=0),
                qb=dict(scale=1.0),
                qo=dict(scale=0.5, zero_point=-5),
            ),
            [np.array([[3, -2]], np.int8)],
            [np.array([[5, -5]], np.int8)],
        )
    )
    return ex


EXAMPLES = _conv_examples() + _depthwise_examples() + _grouped_examples() + _transpose_examples() + _fc_examples()
