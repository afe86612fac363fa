"""ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM, POW, PRELU examples; expected values by hand.

Quantised expectations are derived from the fixed-point kernels step by step in the comments
(SRDHM = saturating rounding doubling high multiply, which rounds ties toward +inf; RDBPOT =
rounding divide by a power of two, which rounds ties away from zero).  The scales are chosen
so the multipliers are exact powers of two, which keeps the hand arithmetic short while still
exercising the reference's rounding.
"""

import numpy as np

from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.suites.examples import Example

F32, F16, I32 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32
Q8, Q8S = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
NONE, RELU, RELU1, RELU6 = 0, 1, 2, 3


def _binary(op, t, d1, d2, dout, act=None, q1=(0.0, 0), q2=(0.0, 0), qo=(0.0, 0), out_type=None):
    """One-operation model: op(input0, input1[, activation]) -> output."""
    b = ModelBuilder()
    x = b.input(t, d1, scale=q1[0], zero_point=q1[1])
    y = b.input(t, d2, scale=q2[0], zero_point=q2[1])
    out = b.output(out_type or t, dout, scale=qo[0], zero_point=qo[1])
    b.operation(op, [x, y] + ([b.i32(act)] if act is not None else []), [out])
    return b.build()


def _f32(*v):
    return np.array(v, np.float32)


def _f16(*v):
    return np.array(v, np.float16)


def _i32(*v):
    return np.array(v, np.int32)


def _u8(*v):
    return np.array(v, np.uint8)


def _i8(*v):
    return np.array(v, np.int8)


_A_DOC = np.arange(8, dtype=np.float32).reshape(4, 1, 2)
_B_DOC = (10 * np.arange(60, dtype=np.float32)).reshape(5, 4, 3, 1)

ADD = [
    # [2,1,2] + [3,1] -> [2,3,2]: out[i,j,k] = a[i,0,k] + b[j,0].
    Example(
        "add_fp32_broadcast_ranks",
        _binary(Op.ADD, F32, [2, 1, 2], [3, 1], [2, 3, 2], NONE),
        [_f32(1, 2, 3, 4).reshape(2, 1, 2), _f32(10, 20, 30).reshape(3, 1)],
        [_f32(11, 12, 21, 22, 31, 32, 13, 14, 23, 24, 33, 34).reshape(2, 3, 2)],
    ),
    # NeuralNetworks.h's example shapes {4,1,2} + {5,4,3,1} -> {5,4,3,2}.
    Example(
        "add_fp32_broadcast_doc_shapes",
        _binary(Op.ADD, F32, [4, 1, 2], [5, 4, 3, 1], [5, 4, 3, 2], NONE),
        [_A_DOC, _B_DOC],
        [_A_DOC + _B_DOC],
        note="numpy broadcasting a + b",
    ),
    # sums [-2, -0.25, 0.75, 2] clamped to [-1, 1]
    Example(
        "add_fp32_relu1",
        _binary(Op.ADD, F32, [4], [4], [4], RELU1),
        [_f32(-3, -0.25, 0.5, 2), _f32(1, 0, 0.25, 0)],
        [_f32(-1, -0.25, 0.75, 1)],
    ),
    # [2,2] + [1]: sums [-0.5, 2.5, 5.5, 7.5] clamped to [0, 6]
    Example(
        "add_fp32_relu6_scalar_like",
        _binary(Op.ADD, F32, [2, 2], [1], [2, 2], RELU6),
        [_f32(-1, 2, 5, 7).reshape(2, 2), _f32(0.5)],
        [_f32(0, 2.5, 5.5, 6).reshape(2, 2)],
    ),
    Example(
        "add_fp16_relu",
        _binary(Op.ADD, F16, [3], [3], [3], RELU),
        [_f16(1.5, -2, 0.25), _f16(0.25, 1, -0.5)],
        [_f16(1.75, 0, 0)],
    ),
    # INT32 wraps: 2147483647 + 1 = -2147483648.
    Example(
        "add_int32_broadcast_wrap",
        _binary(Op.ADD, I32, [2, 2], [2], [2, 2], NONE),
        [_i32(1, -2, 2147483647, 5).reshape(2, 2), _i32(1, -10)],
        [_i32(2, -12, -2147483648, -5).reshape(2, 2)],
    ),
    # All scale 0.5, zp 128: every multiplier is a power of two, so out = (a-128)+(b-128)+128
    # exactly: [133, 112, 137, 127, 382]; RELU floors at quantize(0) = 128; 382 saturates.
    Example(
        "add_quant8_same_scale_relu",
        _binary(Op.ADD, Q8, [5], [5], [5], RELU, (0.5, 128), (0.5, 128), (0.5, 128)),
        [_u8(130, 100, 255, 128, 255), _u8(131, 140, 10, 127, 255)],
        [_u8(133, 128, 137, 128, 255)],
    ),
    # a: s=0.5 zp=10, b: s=0.25 zp=20, out: s=0.5 zp=100.  Multipliers 0.5, 0.25 (exact) and
    # 2**-19, so out = RDBPOT(2A + B, 1) + 100 with A = a-10, B = b-20: A + B/2 with ties away
    # from zero: [5.5, 1.5, 2, -1.5] -> [6, 2, 2, -2].
    Example(
        "add_quant8_different_scales_ties",
        _binary(Op.ADD, Q8, [4], [4], [4], NONE, (0.5, 10), (0.25, 20), (0.5, 100)),
        [_u8(13, 10, 12, 10), _u8(25, 23, 20, 17)],
        [_u8(106, 102, 102, 98)],
    ),
    # Inputs s=1, output s=2: out = (a+b)/2 with ties away from zero (std::round-like), not
    # to even: [-1.5, 1.5, -0.5, 100] -> [-2, 2, -1, 100].
    Example(
        "add_quant8_signed_ties_away",
        _binary(Op.ADD, Q8S, [4], [4], [4], NONE, (1.0, 0), (1.0, 0), (2.0, 0)),
        [_i8(-1, 1, -1, 100), _i8(-2, 2, 0, 100)],
        [_i8(-2, 2, -1, 100)],
    ),
    # All s=0.25 zp=-10: out = A + B - 10 = [-10, -7, -20, -1]; RELU1 bounds are
    # -10 + round(-1/0.25) = -14 and -10 + 4 = -6.
    Example(
        "add_quant8_signed_relu1",
        _binary(Op.ADD, Q8S, [4], [4], [4], RELU1, (0.25, -10), (0.25, -10), (0.25, -10)),
        [_i8(-10, -8, -20, -5), _i8(-10, -9, -10, -6)],
        [_i8(-10, -7, -14, -6)],
    ),
    Example(
        "add_int32_relu_rejected",
        _binary(Op.ADD, I32, [2], [2], [2], RELU),
        [_i32(1, 2), _i32(3, 4)],
        [_i32(0, 0)],
        expect_failure=True,
        note="TENSOR_INT32 requires fused activation NONE",
    ),
    Example(
        "add_fp32_incompatible_broadcast",
        _binary(Op.ADD, F32, [2, 3], [2], [2, 3], NONE),
        [np.zeros((2, 3), np.float32), _f32(1, 2)],
        [np.zeros((2, 3), np.float32)],
        expect_failure=True,
        note="3 and 2 do not broadcast",
    ),
]

SUB = [
    # [[1,2],[3,4]] - [2,1] = [[-1,1],[1,3]], RELU -> [[0,1],[1,3]]
    Example(
        "sub_fp32_broadcast_relu",
        _binary(Op.SUB, F32, [2, 2], [2], [2, 2], RELU),
        [_f32(1, 2, 3, 4).reshape(2, 2), _f32(2, 1)],
        [_f32(0, 1, 1, 3).reshape(2, 2)],
    ),
    Example(
        "sub_fp16",
        _binary(Op.SUB, F16, [3], [3], [3], NONE),
        [_f16(1, 0.5, -2), _f16(0.25, 1, -2)],
        [_f16(0.75, -0.5, 0)],
    ),
    # [2,1] - [3] -> [2,3]; 10 - (-2**31) wraps to -2**31 + 10, -5 - (-2**31) = 2**31 - 5.
    Example(
        "sub_int32_broadcast_wrap",
        _binary(Op.SUB, I32, [2, 1], [3], [2, 3], NONE),
        [_i32(10, -5).reshape(2, 1), _i32(1, 2, -2147483648)],
        [_i32(9, 8, -2147483638, -6, -7, 2147483643).reshape(2, 3)],
    ),
    # Same scales (0.5, zp 128): out = (a-128) - (b-128) + 128 exactly, saturated:
    # [10, -40, -255, 255] + 128 -> [138, 88, 0, 255].
    Example(
        "sub_quant8_same_scale_saturate",
        _binary(Op.SUB, Q8, [4], [4], [4], NONE, (0.5, 128), (0.5, 128), (0.5, 128)),
        [_u8(130, 100, 0, 255), _u8(120, 140, 255, 0)],
        [_u8(138, 88, 0, 255)],
    ),
    # Inputs s=1, output s=2: (a-b)/2 = [-1.5, 1.5, -0.5, -127.5] -> ties away [-2, 2, -1, -128].
    Example(
        "sub_quant8_signed_ties_away",
        _binary(Op.SUB, Q8S, [4], [4], [4], NONE, (1.0, 0), (1.0, 0), (2.0, 0)),
        [_i8(1, 4, 0, -128), _i8(4, 1, 1, 127)],
        [_i8(-2, 2, -1, -128)],
    ),
]

MUL = [
    # [[1,-2,3],[-4,5,-6]] * [2,0.5,-1] = [[2,-1,-3],[-8,2.5,6]], RELU
    Example(
        "mul_fp32_broadcast_relu",
        _binary(Op.MUL, F32, [2, 3], [3], [2, 3], RELU),
        [_f32(1, -2, 3, -4, 5, -6).reshape(2, 3), _f32(2, 0.5, -1)],
        [_f32(2, 0, 0, 0, 2.5, 6).reshape(2, 3)],
    ),
    Example(
        "mul_fp16_relu6", _binary(Op.MUL, F16, [3], [3], [3], RELU6), [_f16(1.5, 4, -1), _f16(2, 2, 3)], [_f16(3, 6, 0)]
    ),
    # 65536 * 65536 = 2**32 wraps to 0.
    Example(
        "mul_int32_wrap",
        _binary(Op.MUL, I32, [3], [3], [3], NONE),
        [_i32(65536, -3, 7), _i32(65536, 4, -6)],
        [_i32(0, -12, -42)],
    ),
    # Inputs s=0.5, output s=1: factor 0.25 = 2**30 * 2**-31 with shift -1, so
    # out = RDBPOT(SRDHM(p, 2**30), 1) with p = a*b, which rounds twice:
    # p=1: SRDHM 0.5->1, RDBPOT 0.5->1 (a single rounding of 0.25 would give 0);
    # p=2: 1 -> 1; p=3: 1.5->2 -> 1; p=5: 2.5->3 -> 1.5->2; p=400: 200 -> 100.
    Example(
        "mul_quant8_double_rounding",
        _binary(Op.MUL, Q8, [5], [5], [5], NONE, (0.5, 0), (0.5, 0), (1.0, 0)),
        [_u8(1, 1, 3, 5, 20), _u8(1, 2, 1, 1, 20)],
        [_u8(1, 1, 1, 2, 100)],
    ),
    # Same factor, negative products.  SRDHM ties go up: p=-1: -0.5->0; p=-2: -1;
    # p=-3: -1.5->-1, RDBPOT(-1,1) = -0.5 -> -1; p=-5: -2.5->-2, RDBPOT -> -1.
    Example(
        "mul_quant8_signed_negative_rounding",
        _binary(Op.MUL, Q8S, [4], [4], [4], NONE, (0.5, 0), (0.5, 0), (1.0, 0)),
        [_i8(-1, -2, -3, -5), _i8(1, 1, 1, 1)],
        [_i8(0, -1, -1, -1)],
    ),
    Example(
        "mul_quant8_output_scale_too_small",
        _binary(Op.MUL, Q8, [2], [2], [2], NONE, (0.5, 0), (0.5, 0), (0.25, 0)),
        [_u8(1, 2), _u8(1, 2)],
        [_u8(0, 0)],
        expect_failure=True,
        note="TENSOR_QUANT8_ASYMM MUL needs output scale > 0.5 * 0.5",
    ),
]

DIV = [
    # [[1,-6],[3,0.5]] / [2,-4] = [[0.5,1.5],[1.5,-0.125]]
    Example(
        "div_fp32_broadcast",
        _binary(Op.DIV, F32, [2, 2], [2], [2, 2], NONE),
        [_f32(1, -6, 3, 0.5).reshape(2, 2), _f32(2, -4)],
        [_f32(0.5, 1.5, 1.5, -0.125).reshape(2, 2)],
    ),
    # [3, -1.5, 0.5, +inf] (1/0) clamped to [-1, 1]
    Example(
        "div_fp32_relu1_by_zero",
        _binary(Op.DIV, F32, [4], [4], [4], RELU1),
        [_f32(3, -3, 0.5, 1), _f32(1, 2, 1, 0)],
        [_f32(1, -1, 0.5, 1)],
    ),
    Example(
        "div_fp16", _binary(Op.DIV, F16, [3], [3], [3], NONE), [_f16(1, 3, -2), _f16(4, 2, 8)], [_f16(0.25, 1.5, -0.25)]
    ),
    # Floor division (-5 / 2 = -3, 5 / -2 = -3, -5 / -2 = 2); a zero divisor gives 0.
    Example(
        "div_int32_floor_and_zero",
        _binary(Op.DIV, I32, [8], [8], [8], NONE),
        [_i32(5, -5, 5, -5, 7, 6, -7, 0), _i32(2, 2, -2, -2, 0, 3, 1, -3)],
        [_i32(2, -3, -3, 2, 0, 2, -7, 0)],
    ),
    Example(
        "div_quant8_unsupported",
        _binary(Op.DIV, Q8, [2], [2], [2], NONE, (1.0, 0), (1.0, 0), (1.0, 0)),
        [_u8(4, 6), _u8(2, 3)],
        [_u8(2, 2)],
        expect_failure=True,
        note="DIV has no quantised form",
    ),
]

_MM_A = _f32(1, -3, 0, 5).reshape(2, 1, 2)
_MM_B = _f32(0.5, -1)
MAXIMUM_MINIMUM = [
    # [2,1,2] vs [2]
    Example(
        "maximum_fp32_broadcast",
        _binary(Op.MAXIMUM, F32, [2, 1, 2], [2], [2, 1, 2]),
        [_MM_A, _MM_B],
        [_f32(1, -1, 0.5, 5).reshape(2, 1, 2)],
    ),
    Example(
        "minimum_fp32_broadcast",
        _binary(Op.MINIMUM, F32, [2, 1, 2], [2], [2, 1, 2]),
        [_MM_A, _MM_B],
        [_f32(0.5, -3, 0, -1).reshape(2, 1, 2)],
    ),
    Example(
        "maximum_fp16",
        _binary(Op.MAXIMUM, F16, [3], [3], [3]),
        [_f16(1.5, -2, 0), _f16(1, -1, 0.25)],
        [_f16(1.5, -1, 0.25)],
    ),
    Example(
        "minimum_fp16", _binary(Op.MINIMUM, F16, [3], [3], [3]), [_f16(1.5, -2, 0), _f16(1, -1, 0.25)], [_f16(1, -2, 0)]
    ),
    Example(
        "maximum_int32",
        _binary(Op.MAXIMUM, I32, [3], [3], [3]),
        [_i32(5, -7, 2147483647), _i32(3, -8, -2147483648)],
        [_i32(5, -7, 2147483647)],
    ),
    Example(
        "minimum_int32",
        _binary(Op.MINIMUM, I32, [3], [3], [3]),
        [_i32(5, -7, 2147483647), _i32(3, -8, -2147483648)],
        [_i32(3, -8, -2147483648)],
    ),
    # a: s=1 zp=0, b: s=0.5 zp=10, out: s=2 zp=5.  Requantised (ties away from zero):
    # a -> a/2 + 5 = [5.5, 7, 6.5, 5] -> [6, 7, 7, 5];
    # b -> (b-10)*0.5/2 + 5 = [5.5, 5.25, 7.5, 66.25] -> [6, 5, 8, 66].
    Example(
        "maximum_quant8_requantize",
        _binary(Op.MAXIMUM, Q8, [4], [4], [4], None, (1.0, 0), (0.5, 10), (2.0, 5)),
        [_u8(1, 4, 3, 0), _u8(12, 11, 20, 255)],
        [_u8(6, 7, 8, 66)],
    ),
    Example(
        "minimum_quant8_requantize",
        _binary(Op.MINIMUM, Q8, [4], [4], [4], None, (1.0, 0), (0.5, 10), (2.0, 5)),
        [_u8(1, 4, 3, 0), _u8(12, 11, 20, 255)],
        [_u8(6, 5, 7, 5)],
    ),
    # Inputs s=1 zp=128, output s=0.5 zp=128: a -> [-8, 128] -> [0, 128], b -> [272, 132] -> [255, 132].
    Example(
        "maximum_quant8_saturate",
        _binary(Op.MAXIMUM, Q8, [2], [2], [2], None, (1.0, 128), (1.0, 128), (0.5, 128)),
        [_u8(60, 128), _u8(200, 130)],
        [_u8(255, 132)],
    ),
    Example(
        "minimum_quant8_saturate",
        _binary(Op.MINIMUM, Q8, [2], [2], [2], None, (1.0, 128), (1.0, 128), (0.5, 128)),
        [_u8(60, 128), _u8(200, 130)],
        [_u8(0, 128)],
    ),
    # Inputs s=1, output s=2: a -> [-0.5, -1.5, 3.5] -> [-1, -2, 4] (std::round, ties away);
    # b -> [-1, 0, -64].
    Example(
        "maximum_quant8_signed_ties",
        _binary(Op.MAXIMUM, Q8S, [3], [3], [3], None, (1.0, 0), (1.0, 0), (2.0, 0)),
        [_i8(-1, -3, 7), _i8(-2, 0, -128)],
        [_i8(-1, 0, 4)],
    ),
    Example(
        "minimum_quant8_signed_ties",
        _binary(Op.MINIMUM, Q8S, [3], [3], [3], None, (1.0, 0), (1.0, 0), (2.0, 0)),
        [_i8(-1, -3, 7), _i8(-2, 0, -128)],
        [_i8(-1, -2, -64)],
    ),
]

POW = [
    Example(
        "pow_fp32",
        _binary(Op.POW, F32, [2, 2], [2, 2], [2, 2]),
        [_f32(2, 3, 4, 9).reshape(2, 2), _f32(3, 2, 0.5, 0.5).reshape(2, 2)],
        [_f32(8, 9, 2, 3).reshape(2, 2)],
    ),
    # [2,1] ** [3] -> [2,3]
    Example(
        "pow_fp32_broadcast",
        _binary(Op.POW, F32, [2, 1], [3], [2, 3]),
        [_f32(2, 3).reshape(2, 1), _f32(0, 1, 2)],
        [_f32(1, 2, 4, 1, 3, 9).reshape(2, 3)],
    ),
    Example("pow_fp16", _binary(Op.POW, F16, [3], [3], [3]), [_f16(2, 0.5, 4), _f16(2, 2, -0.5)], [_f16(4, 0.25, 0.5)]),
    Example(
        "pow_int32_unsupported",
        _binary(Op.POW, I32, [2], [2], [2]),
        [_i32(2, 3), _i32(2, 2)],
        [_i32(4, 9)],
        expect_failure=True,
        note="POW is float only",
    ),
]

PRELU = [
    # alpha [0, 0.5, 2] along the last axis of a [1,2,2,3] input.
    Example(
        "prelu_fp32_broadcast",
        _binary(Op.PRELU, F32, [1, 2, 2, 3], [3], [1, 2, 2, 3]),
        [_f32(-1, -2, -3, 1, 2, 3, 0, -4, 5, -6, 0.5, -0.5).reshape(1, 2, 2, 3), _f32(0, 0.5, 2)],
        [_f32(0, -1, -6, 1, 2, 3, 0, -2, 5, 0, 0.5, -1).reshape(1, 2, 2, 3)],
    ),
    Example(
        "prelu_fp16", _binary(Op.PRELU, F16, [3], [1], [3]), [_f16(-2, 3, -0.5), _f16(0.25)], [_f16(-0.5, 3, -0.125)]
    ),
    # x: s=0.5 zp=128, alpha: s=0.5 zp=0 (q=1: 0.5), out: s=0.5 zp=128.  Positive factor
    # 1 = 2**30 with shift +1 (exact); negative factor 0.25/0.5 = 0.5 = 2**30, shift 0, so
    # out = 128 + SRDHM(X, 2**30) = X/2 with ties up: X=-1 -> 0, -3 -> -1, -2 -> -1,
    # -128 -> -64; X=2 -> 2.
    Example(
        "prelu_quant8_ties",
        _binary(Op.PRELU, Q8, [5], [1], [5], None, (0.5, 128), (0.5, 0), (0.5, 128)),
        [_u8(127, 125, 126, 130, 0), _u8(1)],
        [_u8(128, 127, 127, 130, 64)],
    ),
    # x: s=1, alpha: s=0.5 (q=[1, 4]: 0.5 and 2) per last axis, out: s=1.  Negative:
    # SRDHM(X*A, 2**30) = X*A/2 ties up: -3 -> -1.5 -> -1; -12 -> -6; -400 -> -200 -> -128.
    Example(
        "prelu_quant8_signed_saturate",
        _binary(Op.PRELU, Q8S, [2, 2], [2], [2, 2], None, (1.0, 0), (0.5, 0), (1.0, 0)),
        [_i8(-3, -3, 100, -100).reshape(2, 2), _i8(1, 4)],
        [_i8(-1, -6, 100, -128).reshape(2, 2)],
    ),
]

EXAMPLES = ADD + SUB + MUL + DIV + MAXIMUM_MINIMUM + POW + PRELU
