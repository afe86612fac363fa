"""Hand-checked examples for the value classes of issue 20, where the reference's handling was
never pinned down: integer division of negatives at the int32 limits, subnormals, signed
zeros, infinities and NaN through element-wise, transcendental and comparison operations,
int32 limits through selection, and an IF whose branches give outputs of different shapes.
Every expected value is worked out in the comments, never by the executor.
"""

import numpy as np

from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.suites.examples import Example

F32, F16, I32, B8 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32, T.TENSOR_BOOL8
IMIN, IMAX = -(2**31), 2**31 - 1


def _unary(op, t, n, out_t=None):
    b = ModelBuilder()
    x = b.input(t, (n,))
    b.operation(op, [x], [b.output(out_t or t, (n,))])
    return b.build()


def _binary(op, t, n, out_t=None, act=None):
    b = ModelBuilder()
    x, y = b.input(t, (n,)), b.input(t, (n,))
    b.operation(op, [x, y] + ([b.i32(act)] if act is not None else []), [b.output(out_t or t, (n,))])
    return b.build()


def _f32(*v):
    return np.array(v, np.float32)


def _i32(*v):
    return np.array(v, np.int32)


def _bool(*v):
    return np.array(v, np.bool_)


def if_branch_dependent_shape():
    """z = IF(c) then RELU(x) ([3]) else CONCATENATION(x, x) ([6]); z declared with unknown
    dimensions, so its shape is the taken branch's."""
    b = ModelBuilder("if_branch_shapes")
    then = b.subgraph("then_relu")
    x = then.input(F32, (3,))
    then.operation(Op.RELU, [x], [then.output(F32, (3,))])
    other = b.subgraph("else_concat")
    x2 = other.input(F32, (3,))
    other.operation(Op.CONCATENATION, [x2, x2, other.i32(0)], [other.output(F32, (6,))])
    c, xin = b.input(B8, (1,)), b.input(F32, (3,))
    b.operation(Op.IF, [c, b.subgraph_ref(then), b.subgraph_ref(other), xin], [b.output(F32, (0,))])
    return b.build()


_X3 = _f32(-1.0, 2.0, -0.0)

EXAMPLES = [
    # Floor division: -7/2 = -3.5 -> -4; -7/-2 = 3.5 -> 3; 7/-2 -> -4; -1/3 = -0.33 -> -1;
    # -9/4 = -2.25 -> -3; (-2^31 + 1)/2 = -1073741823.5 -> -1073741824; 2^31-1 / -1 exact.
    Example(
        "div_int32_negative_odd_floor_limits",
        _binary(Op.DIV, I32, 7, act=0),
        [_i32(-7, -7, 7, -1, -9, IMIN + 1, IMAX), _i32(2, -2, -2, 3, 4, 2, -1)],
        [_i32(-4, 3, -4, -1, -3, -1073741824, -IMAX)],
        note="NNAPI int32 DIV floors; truncation would give -3, 3, -3, 0, -2, -1073741823",
    ),
    # Subnormals are numbers: exp(+-1e-40) = 1 (1 +- 1e-40 rounds to 1), sin(x) = x for tiny x,
    # sqrt(1e-40) = 1e-20.
    Example(
        "exp_fp32_subnormal_and_signed_zero",
        _unary(Op.EXP, F32, 4),
        [_f32(1e-40, -1e-40, 0.0, -0.0)],
        [_f32(1.0, 1.0, 1.0, 1.0)],
    ),
    Example(
        "sin_fp32_subnormal",
        _unary(Op.SIN, F32, 3),
        [_f32(1e-40, -1e-40, -0.0)],
        [_f32(1e-40, -1e-40, -0.0)],
        note="sin(x) = x below 1e-4 in fp32; a flushing kernel gives 0",
    ),
    Example(
        "sqrt_fp32_subnormal",
        _unary(Op.SQRT, F32, 2),
        [_f32(1e-40, 1.4e-45)],
        [_f32(1e-20, np.float32(np.sqrt(np.float64(np.float32(1.4e-45)))))],
        note="sqrt of the smallest subnormal 2^-149 is 2^-74.5 = 3.7433921e-23",
    ),
    # RELU of the extremes: max(0, x) with -inf -> 0, +inf -> inf, subnormals kept.
    Example(
        "relu_fp32_inf_subnormal",
        _unary(Op.RELU, F32, 5),
        [_f32(-np.inf, np.inf, 1e-40, -1e-40, 2.0)],
        [_f32(0.0, np.inf, 1e-40, 0.0, 2.0)],
    ),
    # IEEE comparison: -0 == +0; NaN equals nothing, itself included; a subnormal is not 0.
    Example(
        "equal_fp32_signed_zero_nan_subnormal",
        _binary(Op.EQUAL, F32, 4, out_t=B8),
        [_f32(0.0, np.nan, 1e-40, np.inf), _f32(-0.0, np.nan, 0.0, np.inf)],
        [_bool(True, False, False, True)],
    ),
    Example(
        "not_equal_fp32_signed_zero_nan",
        _binary(Op.NOT_EQUAL, F32, 3, out_t=B8),
        [_f32(0.0, np.nan, 1e-40), _f32(-0.0, np.nan, 0.0)],
        [_bool(False, True, True)],
    ),
    Example(
        "less_fp32_subnormal_inf_nan",
        _binary(Op.LESS, F32, 4, out_t=B8),
        [_f32(0.0, -np.inf, np.nan, -1e-40), _f32(1e-40, -3e38, 1.0, -0.0)],
        [_bool(True, True, False, True)],
    ),
    # int32 limits through selection: 2^31-1 and 2^31-2 differ (a float32 path sees them equal).
    Example(
        "maximum_int32_limits",
        _binary(Op.MAXIMUM, I32, 3),
        [_i32(IMAX, IMIN, IMAX - 1), _i32(IMAX - 1, IMIN + 1, IMAX)],
        [_i32(IMAX, IMIN + 1, IMAX)],
    ),
    Example(
        "greater_int32_limits",
        _binary(Op.GREATER, I32, 3, out_t=B8),
        [_i32(IMAX, IMIN + 1, IMAX - 1), _i32(IMAX - 1, IMIN, IMAX - 1)],
        [_bool(True, True, False)],
    ),
    # IF with branch-dependent output shapes.
    Example("if_branch_dependent_shape_then", if_branch_dependent_shape(), [_bool(True), _X3], [_f32(0.0, 2.0, 0.0)]),
    Example(
        "if_branch_dependent_shape_else",
        if_branch_dependent_shape(),
        [_bool(False), _X3],
        [_f32(-1.0, 2.0, -0.0, -1.0, 2.0, -0.0)],
    ),
]
