"""Unary math and activation examples: LOGISTIC, TANH, SOFTMAX, LOG_SOFTMAX, ABS, NEG, EXP,
LOG, SQRT, RSQRT, SIN, FLOOR, ELU, HARD_SWISH.

Float expectations are literal numbers or one-line numpy formulas of the definition.
Quantised expectations are worked out by hand from the real-valued function (rounded to the
output's 1/256 or 1/128 steps), using inputs whose exact result is at least 0.05 of a step
away from a rounding tie, so the reference's fixed-point approximation cannot flip them; the
notes give the arithmetic.  The one deliberate tie (hard_swish_quant8_tie) is derived
through the kernel's int16 fixed-point steps in its note.

Zero-sized tensors are not examples here: NNAPI only lets them arise between operations (a
model input must be fully specified), so tests/ops/test_unary.py covers them directly.
"""

import numpy as np

from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.suites.examples import Example

F32, F16, I32 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32
Q8, Q8S = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED


def _unary(op, t, dims, in_q=(0.0, 0), out_q=None, out_t=None, extra=()):
    """One op: tensor input 0, then constant scalar inputs built by ``extra`` callables."""
    out_q = in_q if out_q is None else out_q
    b = ModelBuilder()
    x = b.input(t, dims, scale=in_q[0], zero_point=in_q[1])
    args = [x] + [mk(b) for mk in extra]
    y = b.output(out_t or t, dims, scale=out_q[0], zero_point=out_q[1])
    b.operation(op, args, [y])
    return b.build()


def _f32(*v):
    return np.array(v, np.float32)


def _sigmoid(x):
    return 1 / (1 + np.exp(-np.asarray(x, np.float64)))


# ---------------------------------------------------------------------------------------
# LOGISTIC
# ---------------------------------------------------------------------------------------
# Quantised input: scale 1/16, so q - zp = 16 * x.  The fixed-point input radius is
# floor(15 * 2**27 / 2**24) = 120 (multiplier 2**23 = 0.5 * 2**24, left shift 24): centred
# inputs at or beyond +-120 saturate.  Output code = round(256 * sigmoid(x)):
#   x=-8 (centred -128): saturated -> 0      x=-1: 256*0.268941 = 68.85 -> 69
#   x=0: 128                                 x=0.5: 256*0.622459 = 159.35 -> 159
#   x=1: 256*0.731059 = 187.15 -> 187        x=3: 256*0.952574 = 243.86 -> 244
#   x=7.4375 (centred 119, not saturated): 256*0.999412 = 255.85 -> 256, clamped to 255
#   x=7.9375 (centred 127): saturated -> 255
_LOG_X = [-8.0, -1.0, 0.0, 0.5, 1.0, 3.0, 7.4375, 7.9375]
_LOG_CODES = [0, 69, 128, 159, 187, 244, 255, 255]

LOGISTIC = [
    Example(
        "logistic_fp32",
        _unary(Op.LOGISTIC, F32, [2, 4]),
        [_f32(-4, -1, 0, 0.5, 1, 2, 10, -20).reshape(2, 4)],
        [_sigmoid([-4, -1, 0, 0.5, 1, 2, 10, -20]).astype(np.float32).reshape(2, 4)],
        note="1 / (1 + exp(-x)) in float64",
    ),
    Example(
        "logistic_fp16",
        _unary(Op.LOGISTIC, F16, [4]),
        [np.array([-2, 0, 1, 3], np.float16)],
        [_sigmoid([-2, 0, 1, 3]).astype(np.float16)],
        note="1 / (1 + exp(-x)) rounded to half",
    ),
    Example(
        "logistic_quant8",
        _unary(Op.LOGISTIC, Q8, [8], (1 / 16, 128), (1 / 256, 0)),
        [np.array([128 + 16 * x for x in _LOG_X], np.uint8)],
        [np.array(_LOG_CODES, np.uint8)],
        note="see the LOGISTIC comment: round(256 * sigmoid(x)), radius 120, 256 -> 255",
    ),
    Example(
        "logistic_quant8_signed",
        _unary(Op.LOGISTIC, Q8S, [8], (1 / 16, 0), (1 / 256, -128)),
        [np.array([16 * x for x in _LOG_X], np.int8)],
        [np.array([c - 128 for c in _LOG_CODES], np.int8)],
        note="the uint8 example shifted by -128 on both sides",
    ),
    # The output encoding is fixed at scale 1/256, zero point 0.
    Example(
        "logistic_quant8_bad_output_scale",
        _unary(Op.LOGISTIC, Q8, [2], (1 / 16, 128), (1 / 128, 0)),
        [np.array([128, 130], np.uint8)],
        [np.zeros(2, np.uint8)],
        expect_failure=True,
    ),
]

# ---------------------------------------------------------------------------------------
# TANH
# ---------------------------------------------------------------------------------------
# Quantised input: scale 1/16, radius 120 as for LOGISTIC.  Output: scale 1/128, zero point
# 128 (uint8) or 0 (int8).  Offset from the zero point = round(128 * tanh(x)):
#   x=-8 (centred -128): saturated -> code 0        x=-1: 128*-0.761594 = -97.48 -> -97
#   x=0: 0                                          x=0.5: 128*0.462117 = 59.15 -> 59
#   x=2: 128*0.964028 = 123.40 -> 123
#   x=5 (centred 80): 128*0.999909 = 127.99 -> 128: code 256, clamped to 255 (int8: 127)
#   x=7.9375 (centred 127): saturated -> 255
_TANH_X = [-8.0, -1.0, 0.0, 0.5, 2.0, 5.0, 7.9375]

TANH = [
    Example(
        "tanh_fp32",
        _unary(Op.TANH, F32, [1, 2, 3]),
        [_f32(-3, -0.5, 0, 0.25, 1, 20).reshape(1, 2, 3)],
        [np.tanh(np.array([-3, -0.5, 0, 0.25, 1, 20], np.float64)).astype(np.float32).reshape(1, 2, 3)],
        note="numpy tanh in float64",
    ),
    Example(
        "tanh_fp16",
        _unary(Op.TANH, F16, [3]),
        [np.array([-1, 0, 2], np.float16)],
        [np.tanh(np.array([-1, 0, 2], np.float64)).astype(np.float16)],
        note="tanh rounded to half",
    ),
    Example(
        "tanh_quant8",
        _unary(Op.TANH, Q8, [7], (1 / 16, 128), (1 / 128, 128)),
        [np.array([128 + 16 * x for x in _TANH_X], np.uint8)],
        [np.array([0, 31, 128, 187, 251, 255, 255], np.uint8)],
        note="128 + round(128 * tanh(x)); see the TANH comment",
    ),
    Example(
        "tanh_quant8_signed",
        _unary(Op.TANH, Q8S, [7], (1 / 16, 0), (1 / 128, 0)),
        [np.array([16 * x for x in _TANH_X], np.int8)],
        [np.array([-128, -97, 0, 59, 123, 127, 127], np.int8)],
        note="round(128 * tanh(x)) clamped to [-128, 127]",
    ),
    Example(
        "tanh_quant8_signed_bad_output_zero_point",
        _unary(Op.TANH, Q8S, [2], (1 / 16, 0), (1 / 128, 1)),
        [np.array([0, 1], np.int8)],
        [np.zeros(2, np.int8)],
        expect_failure=True,
    ),
]

# ---------------------------------------------------------------------------------------
# SOFTMAX
# ---------------------------------------------------------------------------------------
_SM_X = np.array([[1.0, 2.0, 3.0], [-1.0, -1.0, -1.0]], np.float32)


def _softmax(x, beta=1.0, axis=-1):
    e = np.exp(beta * (np.asarray(x, np.float64) - np.max(x, axis=axis, keepdims=True)))
    return e / e.sum(axis=axis, keepdims=True)


def _beta(v, t=T.FLOAT32):
    return lambda b: b.const(t, (), v)


def _axis(a):
    return lambda b: b.i32(a)


# Quantised softmax: input scale 0.25, beta 1; q = [0, 4, 8] are reals 0, 1, 2, whose softmax
# is [0.090031, 0.244728, 0.665241]; times 256: [23.05, 62.65, 170.30] -> [23, 63, 170].
# Second row: q = [0, 100, 100]: the 0 is 100 codes (25.0) below the max, past the cut-off
# radius (multiplier 0.25 * 2**26 = 2**24, left shift 25, radius floor(31 * 2**26 / 2**25)
# = 62), so it gives code 0 and the other two split evenly: 128 each.
# Third row: q = [0, 0, 250]: only 250 survives, 256 * 1.0 clamps to 255.
SOFTMAX = [
    Example(
        "softmax_fp32",
        _unary(Op.SOFTMAX, F32, [2, 3], extra=[_beta(1.0)]),
        [_SM_X],
        [_softmax(_SM_X).astype(np.float32)],
        note="exp(x - max) / sum, float64",
    ),
    Example(
        "softmax_fp32_beta_axis0",
        _unary(Op.SOFTMAX, F32, [2, 3], extra=[_beta(0.5), _axis(0)]),
        [_SM_X],
        [_softmax(_SM_X, 0.5, 0).astype(np.float32)],
        note="along axis 0 with beta 0.5",
    ),
    Example(
        "softmax_fp32_neg_axis_4d",
        _unary(Op.SOFTMAX, F32, [1, 2, 2, 1], extra=[_beta(1.0), _axis(-3)]),
        [_f32(0, 1, 2, 3).reshape(1, 2, 2, 1)],
        # pairs (0, 2) and (1, 3) along axis 1: each is [1, e^2] / (1 + e^2)
        [_f32(0.11920292, 0.11920292, 0.88079708, 0.88079708).reshape(1, 2, 2, 1)],
        note="axis -3 is axis 1; both pairs differ by 2",
    ),
    Example(
        "softmax_fp16",
        _unary(Op.SOFTMAX, F16, [2], extra=[_beta(0.5, T.FLOAT16)]),
        [np.array([0, 2], np.float16)],
        [np.array([0.26894142, 0.73105858], np.float16)],
        note="[1, e] / (1 + e)",
    ),
    Example(
        "softmax_quant8",
        _unary(Op.SOFTMAX, Q8, [3, 3], (0.25, 0), (1 / 256, 0), extra=[_beta(1.0)]),
        [np.array([[0, 4, 8], [0, 100, 100], [0, 0, 250]], np.uint8)],
        [np.array([[23, 63, 170], [0, 128, 128], [0, 0, 255]], np.uint8)],
        note="see the SOFTMAX comment",
    ),
    Example(
        "softmax_quant8_signed_axis0",
        _unary(Op.SOFTMAX, Q8S, [3, 2], (0.25, -10), (1 / 256, -128), extra=[_beta(1.0), _axis(0)]),
        [np.array([[-10, 90], [-6, 90], [-2, -128]], np.int8)],
        # column 0 is the [0, 4, 8] case; column 1 is [90, 90, -128]: -128 is 218 codes
        # below, past the radius, so [128, 128, 0]; all minus 128
        [np.array([[23 - 128, 0], [63 - 128, 0], [170 - 128, -128]], np.int8)],
        note="column-wise softmax; codes as in softmax_quant8 minus 128",
    ),
    Example(
        "softmax_fp32_beta_zero",
        _unary(Op.SOFTMAX, F32, [2], extra=[_beta(0.0)]),
        [_f32(1, 2)],
        [_f32(0, 0)],
        expect_failure=True,
        note="beta must be > 0",
    ),
    Example(
        "softmax_fp32_axis_out_of_range",
        _unary(Op.SOFTMAX, F32, [2], extra=[_beta(1.0), _axis(1)]),
        [_f32(1, 2)],
        [_f32(0, 0)],
        expect_failure=True,
    ),
]

# ---------------------------------------------------------------------------------------
# LOG_SOFTMAX
# ---------------------------------------------------------------------------------------


def _log_softmax(x, beta=1.0, axis=-1):
    d = beta * (np.asarray(x, np.float64) - np.max(x, axis=axis, keepdims=True))
    return d - np.log(np.exp(d).sum(axis=axis, keepdims=True))


LOG_SOFTMAX = [
    Example(
        "log_softmax_fp32",
        _unary(Op.LOG_SOFTMAX, F32, [2, 3], extra=[_beta(1.0), _axis(-1)]),
        [_SM_X],
        # row 0: x - 3 - log(1 + e^-1 + e^-2) = x - 3.40760596; row 1: -log 3
        [np.array([[-2.40760596, -1.40760596, -0.40760596], [-1.09861229] * 3], np.float32)],
        note="x - logsumexp(x) per row",
    ),
    Example(
        "log_softmax_fp32_axis0_beta",
        _unary(Op.LOG_SOFTMAX, F32, [2, 3], extra=[_beta(2.0), _axis(0)]),
        [_SM_X],
        [_log_softmax(_SM_X, 2.0, 0).astype(np.float32)],
        note="column-wise with beta 2",
    ),
    Example(
        "log_softmax_fp16",
        _unary(Op.LOG_SOFTMAX, F16, [2], extra=[_beta(1.0, T.FLOAT16), _axis(0)]),
        [np.array([0, 0], np.float16)],
        [np.array([-0.69314718] * 2, np.float16)],
        note="-log 2",
    ),
]

# ---------------------------------------------------------------------------------------
# ABS, NEG, EXP, LOG, SQRT, RSQRT, SIN, FLOOR
# ---------------------------------------------------------------------------------------
_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1
_MATH_X = _f32(0.25, 1, 2.25, 4, 9, 100)

ELEMENTWISE = [
    Example(
        "abs_fp32",
        _unary(Op.ABS, F32, [2, 2]),
        [_f32(-2.5, -0.0, 0, 3).reshape(2, 2)],
        [_f32(2.5, 0, 0, 3).reshape(2, 2)],
    ),
    Example(
        "abs_fp16",
        _unary(Op.ABS, F16, [3]),
        [np.array([-1.5, 2, -65504], np.float16)],
        [np.array([1.5, 2, 65504], np.float16)],
    ),
    Example(
        "abs_int32",
        _unary(Op.ABS, I32, [4]),
        [np.array([-7, 0, 5, _I32_MIN], np.int32)],
        [np.array([7, 0, 5, _I32_MIN], np.int32)],
        note="|INT32_MIN| wraps to itself, as in C",
    ),
    Example(
        "neg_fp32",
        _unary(Op.NEG, F32, [1, 1, 1, 1, 3]),
        [_f32(-2.5, 0, 3).reshape(1, 1, 1, 1, 3)],
        [_f32(2.5, 0, -3).reshape(1, 1, 1, 1, 3)],
        note="rank 5 is allowed",
    ),
    Example("neg_fp16", _unary(Op.NEG, F16, [2]), [np.array([1.5, -4], np.float16)], [np.array([-1.5, 4], np.float16)]),
    Example(
        "neg_int32",
        _unary(Op.NEG, I32, [4]),
        [np.array([-7, 0, _I32_MAX, _I32_MIN], np.int32)],
        [np.array([7, 0, -_I32_MAX, _I32_MIN], np.int32)],
        note="-INT32_MIN wraps to itself",
    ),
    Example("exp_fp32", _unary(Op.EXP, F32, [4]), [_f32(-1, 0, 1, 2)], [_f32(0.36787944, 1, 2.71828183, 7.3890561)]),
    Example(
        "exp_fp16", _unary(Op.EXP, F16, [2]), [np.array([0, 1], np.float16)], [np.array([1, 2.71828183], np.float16)]
    ),
    Example(
        "log_fp32", _unary(Op.LOG, F32, [4]), [_f32(1, 2.71828183, 0.5, 10)], [_f32(0, 1, -0.69314718, 2.30258509)]
    ),
    Example(
        "log_fp16", _unary(Op.LOG, F16, [2]), [np.array([1, 4], np.float16)], [np.array([0, 1.38629436], np.float16)]
    ),
    Example("sqrt_fp32", _unary(Op.SQRT, F32, [6]), [_MATH_X], [_f32(0.5, 1, 1.5, 2, 3, 10)]),
    Example(
        "sqrt_fp16",
        _unary(Op.SQRT, F16, [6]),
        [_MATH_X.astype(np.float16)],
        [np.array([0.5, 1, 1.5, 2, 3, 10], np.float16)],
    ),
    Example("rsqrt_fp32", _unary(Op.RSQRT, F32, [6]), [_MATH_X], [_f32(2, 1, 1 / 1.5, 0.5, 1 / 3, 0.1)]),
    Example(
        "rsqrt_fp16",
        _unary(Op.RSQRT, F16, [6]),
        [_MATH_X.astype(np.float16)],
        [np.array([2, 1, 1 / 1.5, 0.5, 1 / 3, 0.1], np.float16)],
    ),
    # Quantised RSQRT (NNAPI feature level 7): real input (q - zp) * s_in, output code
    # zp_out + round_half_away(1 / sqrt(real) / s_out), clamped to the type.
    #   quant8, in (0.25, 0), out (0.01, 10):
    #     q=1: real 0.25 -> 2       -> 10 + 200 = 210
    #     q=4: real 1    -> 1       -> 10 + 100 = 110
    #     q=16: real 4   -> 0.5     -> 10 + 50  = 60
    #     q=36: real 9   -> 1/3     -> 10 + 33.33 = 43.33 -> 43
    #     q=100: real 25 -> 0.2     -> 10 + 20  = 30
    #     q=0: real 0    -> +inf    -> clamped to 255
    #     q=2: real 0.5  -> 1.41421 -> 10 + 141.42 = 151.42 -> 151
    #     q=9: real 2.25 -> 2/3     -> 10 + 66.67 = 76.67 -> 77
    Example(
        "rsqrt_quant8",
        _unary(Op.RSQRT, Q8, [2, 4], in_q=(0.25, 0), out_q=(0.01, 10)),
        [np.array([[1, 4, 16, 36], [100, 0, 2, 9]], np.uint8)],
        [np.array([[210, 110, 60, 43], [30, 255, 151, 77]], np.uint8)],
    ),
    #   quant8_signed, in (0.5, -100), out (0.02, -128):
    #     q=-98: real 1     -> 1      -> -128 + 50   = -78
    #     q=-92: real 4     -> 0.5    -> -128 + 25   = -103
    #     q=-68: real 16    -> 0.25   -> 0.25 / 0.02 = 12.5 (also in float32), a tie rounded
    #                                  away from zero to 13 -> -128 + 13 = -115
    #     q=-99: real 0.5   -> 1.41421 -> -128 + 70.71 = -57.29 -> -57
    #     q=-100: real 0    -> +inf   -> 127
    #     q=-101: real -0.5 -> NaN    -> 127 (the reference's clamp turns NaN into the maximum)
    Example(
        "rsqrt_quant8_signed",
        _unary(Op.RSQRT, Q8S, [6], in_q=(0.5, -100), out_q=(0.02, -128)),
        [np.array([-98, -92, -68, -99, -100, -101], np.int8)],
        [np.array([-78, -103, -115, -57, 127, 127], np.int8)],
    ),
    #   quant8, in (1, 0), out (0.001, 0): real 1 -> 1000, clamped to 255; real 100 -> 0.1 -> 100.
    Example(
        "rsqrt_quant8_saturates",
        _unary(Op.RSQRT, Q8, [2], in_q=(1.0, 0), out_q=(0.001, 0)),
        [np.array([1, 100], np.uint8)],
        [np.array([255, 100], np.uint8)],
    ),
    Example("sin_fp32", _unary(Op.SIN, F32, [4]), [_f32(0, np.pi / 6, np.pi / 2, -np.pi / 2)], [_f32(0, 0.5, 1, -1)]),
    Example(
        "sin_fp16", _unary(Op.SIN, F16, [2]), [np.array([0, 1], np.float16)], [np.array([0, 0.84147098], np.float16)]
    ),
    Example(
        "floor_fp32",
        _unary(Op.FLOOR, F32, [2, 3]),
        [_f32(-1.5, -0.5, -0.0, 0.5, 1, 2.999).reshape(2, 3)],
        [_f32(-2, -1, 0, 0, 1, 2).reshape(2, 3)],
    ),
    Example(
        "floor_fp16",
        _unary(Op.FLOOR, F16, [4]),
        [np.array([-3.25, -1, 0.75, 7.5], np.float16)],
        [np.array([-4, -1, 0, 7], np.float16)],
    ),
    Example(
        "floor_fp32_rank5",
        _unary(Op.FLOOR, F32, [1, 1, 1, 1, 2]),
        [_f32(0.5, 1.5).reshape(1, 1, 1, 1, 2)],
        [_f32(0, 1).reshape(1, 1, 1, 1, 2)],
        expect_failure=True,
        note="FLOOR is limited to rank 4",
    ),
]

# ---------------------------------------------------------------------------------------
# ELU
# ---------------------------------------------------------------------------------------
_ELU_X = _f32(-10, -1, -0.5, 0, 0.5, 3)

ELU = [
    Example(
        "elu_fp32",
        _unary(Op.ELU, F32, [2, 3], extra=[_beta(1.0)]),
        [_ELU_X.reshape(2, 3)],
        [np.where(_ELU_X > 0, _ELU_X, np.expm1(_ELU_X.astype(np.float64))).astype(np.float32).reshape(2, 3)],
        note="x if x > 0 else alpha * (e^x - 1), alpha 1",
    ),
    Example(
        "elu_fp32_alpha",
        _unary(Op.ELU, F32, [6], extra=[_beta(0.5)]),
        [_ELU_X],
        [np.where(_ELU_X > 0, _ELU_X, 0.5 * np.expm1(_ELU_X.astype(np.float64))).astype(np.float32)],
        note="alpha 0.5",
    ),
    Example(
        "elu_fp16",
        _unary(Op.ELU, F16, [3], extra=[_beta(2.0, T.FLOAT16)]),
        [np.array([-1, 0, 1.5], np.float16)],
        [np.array([2 * (0.36787944 - 1), 0, 1.5], np.float16)],
        note="alpha 2: 2 * (e^-1 - 1) = -1.26424",
    ),
]

# ---------------------------------------------------------------------------------------
# HARD_SWISH
# ---------------------------------------------------------------------------------------
# x * relu6(x + 3) / 6 at -4, -3, -1.5, 0, 1.5, 3, 4: 0, 0, -0.375, 0, 1.125, 3, 4.
_HS_X = _f32(-4, -3, -1.5, 0, 1.5, 3, 4)
_HS_Y = _f32(0, 0, -0.375, 0, 1.125, 3, 4)

# Quantised, input and output scale 5/64 = 0.078125, so q - zp = k means x = 0.078125 k:
#   k=-64 (x=-5): 0               k=-39 (x=-3.046875): 0
#   k=-16 (x=-1.25): -1.25 * 1.75 / 6 = -0.364583 -> -4.67 steps -> -5
#   k=0: 0                        k=16 (x=1.25): 1.25 * 4.25 / 6 = 0.885417 -> 11.33 -> 11
#   k=39 (x=3.046875): x itself -> 39      k=100: 100
_HS_K = [-64, -39, -16, 0, 16, 39, 100]
_HS_OUT = [0, 0, -5, 0, 11, 39, 100]

HARD_SWISH = [
    Example("hard_swish_fp32", _unary(Op.HARD_SWISH, F32, [7]), [_HS_X], [_HS_Y]),
    Example(
        "hard_swish_fp16_rank5",
        _unary(Op.HARD_SWISH, F16, [1, 1, 1, 1, 7]),
        [_HS_X.astype(np.float16).reshape(1, 1, 1, 1, 7)],
        [_HS_Y.astype(np.float16).reshape(1, 1, 1, 1, 7)],
        note="HARD_SWISH has no rank limit",
    ),
    Example(
        "hard_swish_quant8",
        _unary(Op.HARD_SWISH, Q8, [7], (0.078125, 128)),
        [np.array([128 + k for k in _HS_K], np.uint8)],
        [np.array([128 + c for c in _HS_OUT], np.uint8)],
        note="see the HARD_SWISH comment",
    ),
    Example(
        "hard_swish_quant8_signed",
        _unary(Op.HARD_SWISH, Q8S, [7], (0.078125, -10)),
        [np.array([-10 + k for k in _HS_K], np.int8)],
        [np.array([-10 + c for c in _HS_OUT], np.int8)],
        note="as hard_swish_quant8 with zero point -10 on both sides",
    ),
    # Output scale 1/32 (zero point 0), input 5/64 (zero point 128); q=167 is x = 3.046875,
    # whose exact output 97.5 is a tie.  Kernel steps: v = 39 * 128 = 4992; output
    # multiplier (5/64/128)/(1/32) = 0.01953125 = 0.625 * 2**-5 -> int16 20480, exponent -5;
    # p = round(4992 * 20480 / 32768) = 3120; the reluish value saturates at 32767 (x >= 3);
    # 32767 * 3120 / 32768 truncates to 3119; 3119 / 2**5 = 97.47 rounds to 97.  The kernel's
    # truncating multiply biases ties downwards (float rounding would give 98).
    Example(
        "hard_swish_quant8_tie",
        _unary(Op.HARD_SWISH, Q8, [2], (0.078125, 128), (0.03125, 0)),
        [np.array([167, 128], np.uint8)],
        [np.array([97, 0], np.uint8)],
        note="fixed-point derivation in the comment above",
    ),
]

EXAMPLES = LOGISTIC + TANH + SOFTMAX + LOG_SOFTMAX + ELEMENTWISE + ELU + HARD_SWISH
