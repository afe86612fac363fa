"""Reductions, comparisons and friends: MEAN, REDUCE_*, ARGMAX/ARGMIN, EQUAL ... LESS_EQUAL,
LOGICAL_AND/OR/NOT, TOPK_V2, BATCH_MATMUL.

Every expected value is a literal worked out by hand; the arithmetic is in the comments.
Quantised MEAN divides the stored sum with truncation toward zero (no requantisation);
quantised comparisons compare real values computed from each input's own parameters.
"""

import numpy as np

from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.suites.examples import Example

F32, F16, I32, B8 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32, T.TENSOR_BOOL8
Q8, Q8S = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
FLT_MAX = float(np.finfo(np.float32).max)
NAN, INF = float("nan"), float("inf")
t_, f_ = True, False


def _arr(t, values, dims):
    dtype = {F32: np.float32, F16: np.float16, I32: np.int32, B8: np.bool_, Q8: np.uint8, Q8S: np.int8}[t]
    return np.array(values, dtype=dtype).reshape(dims)


# ---------------------------------------------------------------------------------------
# MEAN and REDUCE_*
# ---------------------------------------------------------------------------------------


def _reduce(op, t, in_dims, axes, keep, out_dims, q=(0.0, 0)):
    """Input 0 a model input, axes a constant, keep_dims an INT32 (MEAN) or BOOL scalar."""
    b = ModelBuilder()
    x = b.input(t, in_dims, scale=q[0], zero_point=q[1])
    ax = b.const(I32, [len(axes)], axes)
    k = b.i32(int(keep)) if op == Op.MEAN else b.bool(bool(keep))
    y = b.output(t, out_dims, scale=q[0], zero_point=q[1])
    b.operation(op, [x, ax, k], [y])
    return b.build()


def _ex(name, op, t, x, in_dims, axes, keep, out, out_dims, q=(0.0, 0), note=""):
    return Example(
        name,
        _reduce(op, t, in_dims, axes, keep, out_dims, q),
        [_arr(t, x, in_dims)],
        [_arr(t, out, out_dims)],
        note=note,
    )


_X23 = [1, 2, 3, 4, 5, 6]  # [[1, 2, 3], [4, 5, 6]]

REDUCE = [
    # MEAN ----------------------------------------------------------------------------------
    _ex("mean_fp32_axis1", Op.MEAN, F32, _X23, [2, 3], [1], 0, [2, 5], [2], note="(1+2+3)/3, (4+5+6)/3"),
    _ex(
        "mean_fp32_axis0_keep_dims",
        Op.MEAN,
        F32,
        _X23,
        [2, 3],
        [0],
        1,
        [2.5, 3.5, 4.5],
        [1, 3],
        note="column means; keep_dims > 0 keeps the reduced dimension as 1",
    ),
    _ex(
        "mean_fp32_keep_dims_positive_only",
        Op.MEAN,
        F32,
        _X23,
        [2, 3],
        [0],
        -1,
        [2.5, 3.5, 4.5],
        [3],
        note="keep_dims = -1 is not positive: the dimension is dropped",
    ),
    _ex(
        "mean_fp32_all_axes_repeated",
        Op.MEAN,
        F32,
        _X23,
        [2, 3],
        [-1, 0, 1],
        0,
        [3.5],
        [1],
        note="-1 and 1 name the same axis (counted once); 21/6; nothing left -> shape [1]",
    ),
    _ex("mean_fp16", Op.MEAN, F16, [1, 2, 3, 4], [1, 2, 2, 1], [2], 0, [1.5, 3.5], [1, 2, 1], note="(1+2)/2, (3+4)/2"),
    _ex(
        "mean_quant8_truncates",
        Op.MEAN,
        Q8,
        [10, 11, 13, 16],
        [2, 2],
        [1],
        1,
        [10, 14],
        [2, 1],
        q=(0.5, 10),
        note="stored sums 21 and 29, /2 = 10.5 and 14.5, truncated to 10 and 14",
    ),
    _ex(
        "mean_quant8_signed_truncates_toward_zero",
        Op.MEAN,
        Q8S,
        [-3, -4, 5, 6],
        [2, 2],
        [1],
        0,
        [-3, 5],
        [2],
        q=(0.25, 0),
        note="-7/2 = -3.5 -> -3 (C++ division), 11/2 = 5.5 -> 5",
    ),
    _ex(
        "mean_quant8_signed_zero_point",
        Op.MEAN,
        Q8S,
        [-120, -118, -117, -100],
        [4],
        [0],
        0,
        [-113],
        [1],
        q=(0.5, -123),
        note="stored sum -455, /4 = -113.75 -> -113; the zero point is not subtracted",
    ),
    # REDUCE_SUM / REDUCE_PROD ---------------------------------------------------------------
    _ex(
        "reduce_sum_fp32_all_axes",
        Op.REDUCE_SUM,
        F32,
        _X23,
        [2, 3],
        [0, 1],
        False,
        [21],
        [1],
        note="1+...+6; every dimension removed -> shape [1]",
    ),
    _ex(
        "reduce_sum_fp32_all_axes_keep_dims",
        Op.REDUCE_SUM,
        F32,
        _X23,
        [2, 3],
        [1, 0],
        True,
        [21],
        [1, 1],
        note="same sum, keep_dims keeps both dimensions as 1",
    ),
    _ex("reduce_sum_fp32_negative_axis", Op.REDUCE_SUM, F32, _X23, [2, 3], [-1], True, [6, 15], [2, 1]),
    _ex(
        "reduce_sum_fp16",
        Op.REDUCE_SUM,
        F16,
        [1.5, 2.25, -0.75, 4],
        [4],
        [0],
        False,
        [7],
        [1],
        note="1.5 + 2.25 - 0.75 + 4 = 7 (exact in fp16)",
    ),
    _ex(
        "reduce_sum_fp16_sequential_rounding",
        Op.REDUCE_SUM,
        F16,
        [2048, 1, 1],
        [3],
        [0],
        False,
        [2048],
        [1],
        note="fp16 spacing at 2048 is 2: 2048+1 ties to even 2048, and again; float32 would say 2050",
    ),
    _ex(
        "reduce_prod_fp32_zero_beats_inf",
        Op.REDUCE_PROD,
        F32,
        [2, 3, 0, INF],
        [2, 2],
        [1],
        False,
        [6, 0],
        [2],
        note="2*3; 0 * inf is defined as 0 by the reference (not NaN)",
    ),
    _ex(
        "reduce_sum_fp32_sequential_rounding",
        Op.REDUCE_SUM,
        F32,
        [1e8, 1, -1e8],
        [3],
        [0],
        False,
        [0],
        [1],
        note="float32 spacing at 1e8 is 8: 1e8 + 1 rounds back to 1e8, then - 1e8 = 0 (exact sum: 1)",
    ),
    _ex(
        "reduce_prod_fp32_underflow_sticks",
        Op.REDUCE_PROD,
        F32,
        [1e-30, 1e-30, INF],
        [3],
        [0],
        False,
        [0],
        [1],
        note="1e-30 * 1e-30 underflows to 0; from a zero accumulator the product stays 0 (not 0 * inf)",
    ),
    _ex(
        "reduce_prod_fp16",
        Op.REDUCE_PROD,
        F16,
        [0.5, 4, -3, 1, 2, 0.25],
        [2, 3],
        [1],
        True,
        [-6, 0.5],
        [2, 1],
        note="0.5*4*(-3), 1*2*0.25",
    ),
    # REDUCE_MAX / REDUCE_MIN ----------------------------------------------------------------
    _ex(
        "reduce_max_fp32_nan_skipped",
        Op.REDUCE_MAX,
        F32,
        [1, NAN, -2, -INF, -INF, -INF],
        [2, 3],
        [1],
        False,
        [1, -FLT_MAX],
        [2],
        note="NaN never wins; the fold starts at -FLT_MAX, which -inf cannot beat",
    ),
    _ex(
        "reduce_min_fp32_nan_skipped",
        Op.REDUCE_MIN,
        F32,
        [1, NAN, -2, INF, INF, INF],
        [2, 3],
        [1],
        False,
        [-2, FLT_MAX],
        [2],
        note="mirror image: the fold starts at +FLT_MAX",
    ),
    _ex("reduce_max_fp16", Op.REDUCE_MAX, F16, [-1.5, 0.25, 3, 2], [2, 2], [0], True, [3, 2], [1, 2]),
    _ex("reduce_min_fp16", Op.REDUCE_MIN, F16, [-1.5, 0.25, 3, 2], [2, 2], [0], True, [-1.5, 0.25], [1, 2]),
    _ex("reduce_max_quant8", Op.REDUCE_MAX, Q8, [3, 200, 100, 7], [2, 2], [-1], False, [200, 100], [2], q=(0.1, 5)),
    _ex("reduce_min_quant8", Op.REDUCE_MIN, Q8, [3, 200, 100, 7], [2, 2], [-1], False, [3, 7], [2], q=(0.1, 5)),
    _ex(
        "reduce_max_quant8_signed",
        Op.REDUCE_MAX,
        Q8S,
        [-128, 5, 127, -3],
        [2, 2],
        [0, 1],
        False,
        [127],
        [1],
        q=(0.5, -1),
    ),
    _ex(
        "reduce_min_quant8_signed",
        Op.REDUCE_MIN,
        Q8S,
        [-128, 5, 127, -3],
        [2, 2],
        [0, 1],
        True,
        [-128],
        [1, 1],
        q=(0.5, -1),
    ),
    # REDUCE_ALL / REDUCE_ANY ----------------------------------------------------------------
    _ex("reduce_all_bool8", Op.REDUCE_ALL, B8, [t_, t_, t_, t_, f_, t_], [2, 3], [1], False, [t_, f_], [2]),
    _ex("reduce_any_bool8", Op.REDUCE_ANY, B8, [f_, f_, f_, t_], [2, 2], [0], True, [f_, t_], [1, 2]),
    _ex(
        "reduce_any_bool8_rank4",
        Op.REDUCE_ANY,
        B8,
        [f_] * 7 + [t_],
        [2, 1, 2, 2],
        [0, 2, 3],
        False,
        [t_],
        [1],
        note="only the last element is true",
    ),
    # invalid: axis out of range for a rank-2 input, and a quantised REDUCE_SUM
    Example(
        "mean_axis_out_of_range",
        _reduce(Op.MEAN, F32, [2, 3], [2], 0, [2]),
        [_arr(F32, _X23, [2, 3])],
        [_arr(F32, [0, 0], [2])],
        expect_failure=True,
    ),
    Example(
        "reduce_sum_quant8_not_allowed",
        _reduce(Op.REDUCE_SUM, Q8, [2], [0], False, [1], (0.5, 0)),
        [_arr(Q8, [1, 2], [2])],
        [_arr(Q8, [3], [1])],
        expect_failure=True,
    ),
]


# ---------------------------------------------------------------------------------------
# ARGMAX / ARGMIN
# ---------------------------------------------------------------------------------------


def _arg(op, t, in_dims, axis, out_dims, q=(0.0, 0)):
    b = ModelBuilder()
    x = b.input(t, in_dims, scale=q[0], zero_point=q[1])
    b.operation(op, [x, b.i32(axis)], [b.output(I32, out_dims)])
    return b.build()


def _arg_ex(name, op, t, x, in_dims, axis, out, out_dims, q=(0.0, 0), note=""):
    return Example(
        name, _arg(op, t, in_dims, axis, out_dims, q), [_arr(t, x, in_dims)], [_arr(I32, out, out_dims)], note=note
    )


_ARG = [1, 5, 5, 7, -1, 7]  # [[1, 5, 5], [7, -1, 7]]

ARG = [
    _arg_ex(
        "argmax_fp32_ties_first",
        Op.ARGMAX,
        F32,
        _ARG,
        [2, 3],
        1,
        [1, 0],
        [2],
        note="row 0: 5 at 1 and 2 -> 1; row 1: 7 at 0 and 2 -> 0",
    ),
    _arg_ex("argmin_fp32_ties_first", Op.ARGMIN, F32, _ARG, [2, 3], 1, [0, 1], [2]),
    _arg_ex(
        "argmax_fp32_axis_negative", Op.ARGMAX, F32, _ARG, [2, 3], -2, [1, 0, 1], [3], note="columns: 1<7, 5>-1, 5<7"
    ),
    _arg_ex(
        "argmax_fp32_nan",
        Op.ARGMAX,
        F32,
        [NAN, 5, 1, 1, NAN, 5],
        [2, 3],
        1,
        [0, 2],
        [2],
        note="a leading NaN is never beaten; a later NaN never wins",
    ),
    _arg_ex("argmax_fp16_rank1", Op.ARGMAX, F16, [0.5, -1, 2, 2], [4], 0, [2], [1], note="a 1-D input gives shape [1]"),
    _arg_ex(
        "argmin_fp16",
        Op.ARGMIN,
        F16,
        [0.5, -1, -2, -1],
        [2, 2],
        0,
        [1, 0],
        [2],
        note="column 0: -2 < 0.5; column 1: a tie keeps index 0",
    ),
    _arg_ex("argmin_int32", Op.ARGMIN, I32, [3, -7, -7, 3], [2, 2], 1, [1, 0], [2]),
    _arg_ex("argmax_int32", Op.ARGMAX, I32, [3, -7, -7, 3, 9, 9], [3, 2], 0, [2, 2], [2]),
    _arg_ex("argmax_quant8", Op.ARGMAX, Q8, [10, 200, 201, 3], [1, 4], -1, [2], [1], q=(0.5, 128)),
    _arg_ex("argmin_quant8", Op.ARGMIN, Q8, [10, 200, 3, 3], [1, 4], -1, [2], [1], q=(0.5, 128)),
    _arg_ex("argmin_quant8_signed", Op.ARGMIN, Q8S, [-5, -128, 127], [3, 1], 0, [1], [1], q=(0.25, 3)),
    _arg_ex("argmax_quant8_signed", Op.ARGMAX, Q8S, [-5, -128, 127], [3, 1], 0, [2], [1], q=(0.25, 3)),
]


# ---------------------------------------------------------------------------------------
# Comparisons
# ---------------------------------------------------------------------------------------


def _cmp(op, t, a_dims, b_dims, out_dims, qa=(0.0, 0), qb=(0.0, 0)):
    b = ModelBuilder()
    x = b.input(t, a_dims, scale=qa[0], zero_point=qa[1])
    y = b.input(t, b_dims, scale=qb[0], zero_point=qb[1])
    b.operation(op, [x, y], [b.output(B8, out_dims)])
    return b.build()


# Each type encodes the same three real pairs (a, b) = (1, 1), (1, 2), (2, 1); for bool8 the
# pairs are (true, true), (false, true), (true, false) since false < true.
#   quant8:        a scale 0.5, zp 100 -> 1 is 102, 2 is 104;  b scale 0.25, zp 0 -> 1 is 4, 2 is 8
#   quant8_signed: a scale 1, zp -5 -> 1 is -4, 2 is -3;       b scale 0.5, zp 10 -> 1 is 12, 2 is 14
_PAIRS = [
    (F32, [1, 1, 2], [1, 2, 1], (0.0, 0), (0.0, 0)),
    (F16, [1, 1, 2], [1, 2, 1], (0.0, 0), (0.0, 0)),
    (I32, [1, 1, 2], [1, 2, 1], (0.0, 0), (0.0, 0)),
    (B8, [t_, f_, t_], [t_, t_, f_], (0.0, 0), (0.0, 0)),
    (Q8, [102, 102, 104], [4, 8, 4], (0.5, 100), (0.25, 0)),
    (Q8S, [-4, -4, -3], [12, 14, 12], (1.0, -5), (0.5, 10)),
]
_TRUTH = {
    Op.EQUAL: [t_, f_, f_],
    Op.NOT_EQUAL: [f_, t_, t_],
    Op.GREATER: [f_, f_, t_],
    Op.GREATER_EQUAL: [t_, f_, t_],
    Op.LESS: [f_, t_, f_],
    Op.LESS_EQUAL: [t_, t_, f_],
}
_SHORT = {F32: "fp32", F16: "fp16", I32: "int32", B8: "bool8", Q8: "quant8", Q8S: "quant8_signed"}

COMPARE = [
    Example(
        f"{op.name.lower()}_{_SHORT[t]}",
        _cmp(op, t, [3], [3], [3], qa, qb),
        [_arr(t, a, [3]), _arr(t, b, [3])],
        [_arr(B8, truth, [3])],
        note="pairs (1,1), (1,2), (2,1)",
    )
    for op, truth in _TRUTH.items()
    for t, a, b, qa, qb in _PAIRS
] + [
    Example(
        "equal_fp32_broadcast_ranks",
        _cmp(Op.EQUAL, F32, [2, 2], [2], [2, 2]),
        [_arr(F32, [1, 2, 3, 4], [2, 2]), _arr(F32, [1, 4], [2])],
        [_arr(B8, [t_, f_, f_, t_], [2, 2])],
        note="b = [1, 4] is compared with each row of [[1, 2], [3, 4]]",
    ),
    Example(
        "greater_int32_broadcast_both",
        _cmp(Op.GREATER, I32, [2, 1], [3], [2, 3]),
        [_arr(I32, [1, 5], [2, 1]), _arr(I32, [0, 1, 6], [3])],
        [_arr(B8, [t_, f_, f_, t_, t_, f_], [2, 3])],
        note="1>0,1>1,1>6 / 5>0,5>1,5>6",
    ),
    Example(
        "not_equal_fp32_nan",
        _cmp(Op.NOT_EQUAL, F32, [3], [3], [3]),
        [_arr(F32, [NAN, 1, 2], [3]), _arr(F32, [NAN, 1, 3], [3])],
        [_arr(B8, [t_, f_, t_], [3])],
        note="NaN is unequal to itself",
    ),
    Example(
        "equal_fp32_nan",
        _cmp(Op.EQUAL, F32, [2], [2], [2]),
        [_arr(F32, [NAN, 1], [2]), _arr(F32, [NAN, 1], [2])],
        [_arr(B8, [f_, t_], [2])],
    ),
    # a: scale 1, zp 0, stored 200 -> 200.  b: scale 0.25, zp 0, stored 255 -> 63.75.  Requantising
    # a to b's scale would saturate at 255 and call them equal; real values do not.
    Example(
        "greater_quant8_no_saturation",
        _cmp(Op.GREATER, Q8, [1], [1], [1], (1.0, 0), (0.25, 0)),
        [_arr(Q8, [200], [1]), _arr(Q8, [255], [1])],
        [_arr(B8, [t_], [1])],
    ),
    Example(
        "equal_quant8_signed_different_params",
        _cmp(Op.EQUAL, Q8S, [2], [2], [2], (0.5, -10), (2.0, 1)),
        [_arr(Q8S, [-6, -9], [2]), _arr(Q8S, [2, 1], [2])],
        [_arr(B8, [t_, f_], [2])],
        note="a: (-6+10)*0.5 = 2, (-9+10)*0.5 = 0.5; b: (2-1)*2 = 2, (1-1)*2 = 0",
    ),
]


# ---------------------------------------------------------------------------------------
# LOGICAL_AND / LOGICAL_OR / LOGICAL_NOT
# ---------------------------------------------------------------------------------------


def _logical(op, a_dims, b_dims, out_dims):
    b = ModelBuilder()
    ins = [b.input(B8, a_dims)] + ([b.input(B8, b_dims)] if b_dims else [])
    b.operation(op, ins, [b.output(B8, out_dims)])
    return b.build()


_LA, _LB = _arr(B8, [t_, f_, t_, t_], [2, 2]), _arr(B8, [t_, f_], [2])

LOGICAL = [
    Example(
        "logical_and_bool8_broadcast",
        _logical(Op.LOGICAL_AND, [2, 2], [2], [2, 2]),
        [_LA, _LB],
        [_arr(B8, [t_, f_, t_, f_], [2, 2])],
        note="[[T,F],[T,T]] and [T,F] per row",
    ),
    Example(
        "logical_or_bool8_broadcast",
        _logical(Op.LOGICAL_OR, [2, 2], [2], [2, 2]),
        [_LA, _LB],
        [_arr(B8, [t_, f_, t_, t_], [2, 2])],
    ),
    Example(
        "logical_or_bool8_rank_mismatch",
        _logical(Op.LOGICAL_OR, [1], [2, 1, 3], [2, 1, 3]),
        [_arr(B8, [f_], [1]), _arr(B8, [f_, t_, f_, t_, t_, f_], [2, 1, 3])],
        [_arr(B8, [f_, t_, f_, t_, t_, f_], [2, 1, 3])],
        note="false or b = b",
    ),
    Example(
        "logical_not_bool8",
        _logical(Op.LOGICAL_NOT, [3], None, [3]),
        [_arr(B8, [t_, f_, f_], [3])],
        [_arr(B8, [f_, t_, t_], [3])],
    ),
]


# ---------------------------------------------------------------------------------------
# TOPK_V2
# ---------------------------------------------------------------------------------------


def _topk(t, in_dims, k, out_dims, q=(0.0, 0)):
    b = ModelBuilder()
    x = b.input(t, in_dims, scale=q[0], zero_point=q[1])
    b.operation(
        Op.TOPK_V2, [x, b.i32(k)], [b.output(t, out_dims, scale=q[0], zero_point=q[1]), b.output(I32, out_dims)]
    )
    return b.build()


def _topk_ex(name, t, x, in_dims, k, values, indices, out_dims, q=(0.0, 0), note=""):
    return Example(
        name,
        _topk(t, in_dims, k, out_dims, q),
        [_arr(t, x, in_dims)],
        [_arr(t, values, out_dims), _arr(I32, indices, out_dims)],
        note=note,
    )


TOPK = [
    _topk_ex(
        "topk_v2_fp32_ties_larger_index_first",
        F32,
        [1, 5, 3, 5, -1, -2, 0, 8],
        [2, 4],
        2,
        [5, 5, 8, 0],
        [3, 1, 3, 2],
        [2, 2],
        note="row 0 has 5 at 1 and 3: index 3 comes first",
    ),
    _topk_ex("topk_v2_fp16_k_all", F16, [0.5, 2, 1], [3], 3, [2, 1, 0.5], [1, 2, 0], [3]),
    _topk_ex("topk_v2_int32_all_equal", I32, [7, 7, 7], [1, 3], 2, [7, 7], [2, 1], [1, 2]),
    _topk_ex("topk_v2_quant8", Q8, [3, 250, 17, 250], [4], 1, [250], [3], [1], q=(0.5, 2)),
    _topk_ex("topk_v2_quant8_signed", Q8S, [-128, 127, 0, -1], [2, 2], 1, [127, 0], [1, 0], [2, 1], q=(0.1, -4)),
    Example(
        "topk_v2_k_too_large",
        _topk(F32, [2], 3, [3]),
        [_arr(F32, [1, 2], [2])],
        [_arr(F32, [0, 0, 0], [3]), _arr(I32, [0, 0, 0], [3])],
        expect_failure=True,
    ),
]


# ---------------------------------------------------------------------------------------
# BATCH_MATMUL
# ---------------------------------------------------------------------------------------


def _bmm(t, x_dims, y_dims, adj_x, adj_y, out_dims, qx=(0.0, 0), qy=(0.0, 0), qo=(0.0, 0)):
    b = ModelBuilder()
    x = b.input(t, x_dims, scale=qx[0], zero_point=qx[1])
    y = b.input(t, y_dims, scale=qy[0], zero_point=qy[1])
    b.operation(
        Op.BATCH_MATMUL, [x, y, b.bool(adj_x), b.bool(adj_y)], [b.output(t, out_dims, scale=qo[0], zero_point=qo[1])]
    )
    return b.build()


# x = [[1, 2, 3], [4, 5, 6]], y = [[1, 0], [0, 1], [1, 1]]: x.y = [[1+3, 2+3], [4+6, 5+6]]
_BX, _BXT = [1, 2, 3, 4, 5, 6], [1, 4, 2, 5, 3, 6]
_BY, _BYT = [1, 0, 0, 1, 1, 1], [1, 0, 1, 0, 1, 1]
_BXY = [4, 5, 10, 11]

BATCH_MATMUL = [
    Example(
        "batch_matmul_fp32",
        _bmm(F32, [2, 3], [3, 2], False, False, [2, 2]),
        [_arr(F32, _BX, [2, 3]), _arr(F32, _BY, [3, 2])],
        [_arr(F32, _BXY, [2, 2])],
    ),
    Example(
        "batch_matmul_fp32_adj_x",
        _bmm(F32, [3, 2], [3, 2], True, False, [2, 2]),
        [_arr(F32, _BXT, [3, 2]), _arr(F32, _BY, [3, 2])],
        [_arr(F32, _BXY, [2, 2])],
        note="x given transposed",
    ),
    Example(
        "batch_matmul_fp32_adj_y",
        _bmm(F32, [2, 3], [2, 3], False, True, [2, 2]),
        [_arr(F32, _BX, [2, 3]), _arr(F32, _BYT, [2, 3])],
        [_arr(F32, _BXY, [2, 2])],
        note="y given transposed",
    ),
    Example(
        "batch_matmul_fp16_two_batches",
        _bmm(F16, [2, 1, 2], [2, 2, 1], False, False, [2, 1, 1]),
        [_arr(F16, [1, 2, 3, 4], [2, 1, 2]), _arr(F16, [5, 6, 7, 8], [2, 2, 1])],
        [_arr(F16, [17, 53], [2, 1, 1])],
        note="1*5+2*6, 3*7+4*8",
    ),
    Example(
        "batch_matmul_int32_rank4_adj_both",
        _bmm(I32, [1, 1, 2, 2], [1, 1, 2, 2], True, True, [1, 1, 2, 2]),
        [_arr(I32, [1, 3, 2, 4], [1, 1, 2, 2]), _arr(I32, [5, 7, 6, 8], [1, 1, 2, 2])],
        [_arr(I32, [19, 22, 43, 50], [1, 1, 2, 2])],
        note="transposes of [[1,2],[3,4]] and [[5,6],[7,8]]; product [[19,22],[43,50]]",
    ),
    # x: scale 0.5, zp -1; y: scale 0.25, zp 2; out: scale 1, zp -3; multiplier 0.125.
    # x - zp = [[2, 4], [-2, -4], [128, 128]], y - zp = [[4], [9]]:
    #   acc 8+36 = 44 -> 5.5 -> 6 (half away from zero) -> 3;  -44 -> -6 -> -9;
    #   128*13 = 1664 -> 208 -> 205, saturated to 127.
    # In real numbers: x = [[1, 2], [-1, -2], [64, 64]], y = [[1], [2.25]] -> 5.5, -5.5, 208.
    Example(
        "batch_matmul_quant8_signed_rounding",
        _bmm(Q8S, [3, 2], [2, 1], False, False, [3, 1], (0.5, -1), (0.25, 2), (1.0, -3)),
        [_arr(Q8S, [1, 3, -3, -5, 127, 127], [3, 2]), _arr(Q8S, [6, 11], [2, 1])],
        [_arr(Q8S, [3, -9, 127], [3, 1])],
    ),
    Example(
        "batch_matmul_quant8_not_allowed",
        _bmm(Q8, [1, 1], [1, 1], False, False, [1, 1], (1.0, 0), (1.0, 0), (1.0, 0)),
        [_arr(Q8, [1], [1, 1]), _arr(Q8, [1], [1, 1])],
        [_arr(Q8, [1], [1, 1])],
        expect_failure=True,
    ),
    Example(
        "batch_matmul_inner_mismatch",
        _bmm(F32, [2, 3], [2, 2], False, False, [2, 2]),
        [_arr(F32, _BX, [2, 3]), _arr(F32, [1, 2, 3, 4], [2, 2])],
        [_arr(F32, [0] * 4, [2, 2])],
        expect_failure=True,
    ),
]

EXAMPLES = REDUCE + ARG + COMPARE + LOGICAL + TOPK + BATCH_MATMUL
