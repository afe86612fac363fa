"""MEAN, REDUCE_*, ARGMAX/ARGMIN, comparisons, LOGICAL_*, TOPK_V2, BATCH_MATMUL: hand-checked
examples, signature validation, run-time failures, AOSP vectors."""

import numpy as np
import pytest
from helpers import assert_rejected, check_example, vector_cases, vectors_missing_reason

from nnconform.errors import OpFailure
from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.executor import execute
from nnconform.reference.ops.registry import OpView, get_op
from nnconform.suites.examples.reduce_compare import EXAMPLES

MY_OPS = {
    "MEAN",
    "REDUCE_ALL",
    "REDUCE_ANY",
    "REDUCE_MAX",
    "REDUCE_MIN",
    "REDUCE_PROD",
    "REDUCE_SUM",
    "ARGMAX",
    "ARGMIN",
    "EQUAL",
    "NOT_EQUAL",
    "GREATER",
    "GREATER_EQUAL",
    "LESS",
    "LESS_EQUAL",
    "LOGICAL_AND",
    "LOGICAL_OR",
    "LOGICAL_NOT",
    "TOPK_V2",
    "BATCH_MATMUL",
}

F32, F16, I32, B8 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32, T.TENSOR_BOOL8
Q8, Q8S = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED


# (a) hand-checked examples -------------------------------------------------------------


def test_examples_cover_every_op():
    covered = {name for ex in EXAMPLES if not ex.expect_failure for name in ex.operations}
    assert covered == MY_OPS


@pytest.mark.parametrize("ex", EXAMPLES, ids=lambda e: e.name)
def test_example(ex):
    check_example(ex)


# (b) validation --------------------------------------------------------------------------


def _reduce(
    op,
    t=F32,
    dims=(2, 3),
    axes=(1,),
    keep=None,
    out_t=None,
    out_dims=(2,),
    q=(0.5, 1),
    out_q=None,
    axes_t=I32,
    n_inputs=3,
):
    b = ModelBuilder()
    qi = q if t in (Q8, Q8S) else (0.0, 0)
    qo = (out_q or qi) if (out_t or t) in (Q8, Q8S) else (0.0, 0)
    x = b.input(t, dims, scale=qi[0], zero_point=qi[1])
    ax = b.const(axes_t, [len(axes)], list(axes))
    if keep is None:
        keep = b.i32(0) if op == Op.MEAN else b.bool(False)
    else:
        keep = keep(b)
    y = b.output(out_t or t, out_dims, scale=qo[0], zero_point=qo[1])
    b.operation(op, [x, ax, keep][:n_inputs], [y])
    return b.build()


def _binary(op, t, a_dims=(2,), b_dims=(2,), b_t=None, out_t=B8, out_dims=(2,)):
    b = ModelBuilder()
    q = (0.5, 0) if t in (Q8, Q8S) else (0.0, 0)
    x = b.input(t, a_dims, scale=q[0], zero_point=q[1])
    y = b.input(b_t or t, b_dims, scale=q[0], zero_point=q[1])
    b.operation(op, [x, y], [b.output(out_t, out_dims, scale=q[0], zero_point=q[1])])
    return b.build()


def _argmax(t=F32, dims=(2, 3), axis=1, out_t=I32, out_dims=(2,), axis_t=T.INT32):
    b = ModelBuilder()
    q = (0.5, 0) if t in (Q8, Q8S) else (0.0, 0)
    x = b.input(t, dims, scale=q[0], zero_point=q[1])
    a = b.const(axis_t, (), axis)
    b.operation(Op.ARGMAX, [x, a], [b.output(out_t, out_dims)])
    return b.build()


def _topk(t=F32, dims=(2, 4), k=2, out_q=None, idx_t=I32):
    b = ModelBuilder()
    q = (0.5, 3) if t in (Q8, Q8S) else (0.0, 0)
    oq = out_q or q
    x = b.input(t, dims, scale=q[0], zero_point=q[1])
    out_dims = tuple(dims[:-1]) + (k if k > 0 else 1,)
    b.operation(
        Op.TOPK_V2, [x, b.i32(k)], [b.output(t, out_dims, scale=oq[0], zero_point=oq[1]), b.output(idx_t, out_dims)]
    )
    return b.build()


def _bmm(
    t=F32,
    x_dims=(2, 3),
    y_dims=(3, 2),
    adj=(False, False),
    y_t=None,
    out_t=None,
    out_dims=(2, 2),
    adj_t=T.BOOL,
    n_inputs=4,
):
    b = ModelBuilder()
    q = (0.5, 0) if t in (Q8, Q8S) else (0.0, 0)
    x = b.input(t, x_dims, scale=q[0], zero_point=q[1])
    y = b.input(y_t or t, y_dims, scale=q[0], zero_point=q[1])
    adjs = [b.const(adj_t, (), a) for a in adj]
    b.operation(
        Op.BATCH_MATMUL, [x, y, *adjs][:n_inputs], [b.output(out_t or t, out_dims, scale=q[0], zero_point=q[1])]
    )
    return b.build()


BAD = [
    ("mean_int32", _reduce(Op.MEAN, I32), ["input 0"]),
    ("mean_keep_dims_bool", _reduce(Op.MEAN, keep=lambda b: b.bool(True)), ["input 2", "INT32"]),
    ("mean_two_inputs", _reduce(Op.MEAN, n_inputs=2), ["inputs"]),
    ("mean_rank5", _reduce(Op.MEAN, dims=(1, 1, 1, 1, 2)), ["input 0", "rank"]),
    ("mean_axis_range", _reduce(Op.MEAN, axes=(0, -3)), ["input 1", "-3"]),
    ("mean_out_scale", _reduce(Op.MEAN, Q8, out_q=(0.25, 1)), ["output 0", "scale"]),
    ("mean_axes_float", _reduce(Op.MEAN, axes_t=F32), ["input 1"]),
    ("reduce_sum_quant8", _reduce(Op.REDUCE_SUM, Q8), ["input 0"]),
    ("reduce_prod_int32", _reduce(Op.REDUCE_PROD, I32), ["input 0"]),
    ("reduce_max_bool8", _reduce(Op.REDUCE_MAX, B8), ["input 0"]),
    ("reduce_all_fp32", _reduce(Op.REDUCE_ALL, F32), ["input 0"]),
    ("reduce_any_keep_dims_int", _reduce(Op.REDUCE_ANY, B8, keep=lambda b: b.i32(1)), ["input 2", "BOOL"]),
    ("reduce_min_out_zero_point", _reduce(Op.REDUCE_MIN, Q8S, q=(0.5, -3), out_q=(0.5, 0)), ["output 0"]),
    ("reduce_sum_out_type", _reduce(Op.REDUCE_SUM, F32, out_t=F16), ["output 0"]),
    ("reduce_max_axis_range", _reduce(Op.REDUCE_MAX, axes=(2,)), ["input 1", "range"]),
    ("reduce_sum_empty_axes", _reduce(Op.REDUCE_SUM, axes=()), ["input 1", "empty"]),
    ("argmax_bool8", _argmax(B8), ["input 0"]),
    ("argmax_out_float", _argmax(out_t=F32), ["output 0"]),
    ("argmax_axis_range", _argmax(axis=2), ["input 1", "axis"]),
    ("argmax_axis_tensor", _argmax(axis_t=I32), ["input 1"]),
    ("equal_type_mismatch", _binary(Op.EQUAL, F32, b_t=F16), ["input 1"]),
    ("less_out_not_bool", _binary(Op.LESS, F32, out_t=F32), ["output 0"]),
    ("greater_quant16", _binary(Op.GREATER, T.TENSOR_QUANT16_SYMM), ["input 0"]),
    (
        "not_equal_no_broadcast",
        _binary(Op.NOT_EQUAL, I32, a_dims=(2, 3), b_dims=(2,), out_dims=(2, 3)),
        ["input 1", "broadcast"],
    ),
    ("logical_and_fp32", _binary(Op.LOGICAL_AND, F32, out_t=B8), ["input 0"]),
    ("logical_or_out_int", _binary(Op.LOGICAL_OR, B8, out_t=I32), ["output 0"]),
    ("logical_and_no_broadcast", _binary(Op.LOGICAL_AND, B8, a_dims=(3,), b_dims=(2,)), ["input 1", "broadcast"]),
    ("topk_bool8", _topk(B8), ["input 0"]),
    ("topk_k_zero", _topk(k=0), ["input 1", "k"]),
    ("topk_k_too_big", _topk(k=5), ["input 1", "k"]),
    ("topk_out_scale", _topk(Q8, out_q=(0.25, 3)), ["output 0", "scale"]),
    ("topk_indices_float", _topk(idx_t=F32), ["output 1"]),
    ("bmm_quant8_unsigned", _bmm(Q8), ["input 0"]),
    ("bmm_bool8", _bmm(B8), ["input 0"]),
    ("bmm_three_inputs", _bmm(n_inputs=3), ["inputs"]),
    ("bmm_adj_int", _bmm(adj_t=T.INT32), ["input 2"]),
    ("bmm_type_mismatch", _bmm(y_t=F16), ["input 1"]),
    ("bmm_out_type", _bmm(out_t=F16), ["output 0"]),
    ("bmm_rank1", _bmm(x_dims=(3,), out_dims=(2,)), ["input 0", "rank"]),
    ("bmm_rank5", _bmm(x_dims=(1, 1, 1, 2, 3), y_dims=(1, 1, 1, 3, 2), out_dims=(1, 1, 1, 2, 2)), ["input 0", "rank"]),
    ("bmm_rank_mismatch", _bmm(x_dims=(1, 2, 3), out_dims=(1, 2, 2)), ["input 1", "rank"]),
    ("bmm_batch_mismatch", _bmm(x_dims=(2, 2, 3), y_dims=(3, 3, 2), out_dims=(2, 2, 2)), ["input 1", "batch"]),
    ("bmm_inner_mismatch", _bmm(x_dims=(2, 3), y_dims=(2, 2)), ["input 1", "inner"]),
    ("bmm_inner_mismatch_adj", _bmm(adj=(True, False)), ["input 1", "inner"]),
]


@pytest.mark.parametrize("model,fragments", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_validateassert_rejected(model, fragments):
    assert_rejected(model, *fragments)


def test_validate_accepts_valid_signatures():
    good = [
        _reduce(Op.MEAN, Q8S, q=(0.5, -3), axes=(-1, 1, 0), out_dims=(1,)),
        _reduce(Op.REDUCE_MAX, Q8, dims=(1, 2, 3, 4), axes=(3,), out_dims=(1, 2, 3)),
        _reduce(Op.REDUCE_ALL, B8, dims=(), out_dims=()),
        _argmax(Q8S, dims=(4,), axis=-1, out_dims=(1,)),
        _binary(Op.LESS_EQUAL, Q8, a_dims=(2, 1), b_dims=(3,), out_dims=(2, 3)),
        _binary(Op.LOGICAL_OR, B8, a_dims=(1,), b_dims=(2, 2), out_dims=(2, 2)),
        _topk(I32, dims=(5,), k=5),
        _bmm(Q8S, x_dims=(2, 1, 3, 2), y_dims=(2, 1, 4, 3), adj=(True, True), out_dims=(2, 1, 2, 4)),
        _bmm(I32, x_dims=(0, 0), y_dims=(0, 0), out_dims=(0, 0)),
    ]
    for m in good:
        get_op(m.main.operations[0].type).validate(OpView(m, m.main, 0))


# run-time failures and shapes ----------------------------------------------------------------
# Zero-sized tensors only arise between operations in NNAPI; feeding them as inputs exercises
# the same operation code.  None of these operations accepts them in the reference, and that
# includes an empty axes tensor: "reduce nothing" is a failure, whatever keep_dims says.


def _reduce_dynamic_axes(op, t, dims, keep):
    b = ModelBuilder()
    x = b.input(t, dims)
    ax = b.input(I32, (0,))
    k = b.i32(int(keep)) if op == Op.MEAN else b.bool(keep)
    b.operation(op, [x, ax, k], [b.output(t, ())])
    return b.build()


@pytest.mark.parametrize("op", [Op.MEAN, Op.REDUCE_SUM, Op.REDUCE_MAX])
@pytest.mark.parametrize("keep", [False, True])
def test_empty_axes_fail(op, keep):
    m = _reduce_dynamic_axes(op, F32, (2, 3), keep)
    with pytest.raises(OpFailure, match="zero-sized"):
        execute(m, [np.ones((2, 3), np.float32), np.zeros((0,), np.int32)])


@pytest.mark.parametrize(
    "model,inputs",
    [
        (_reduce(Op.REDUCE_SUM, dims=(0, 3), out_dims=(0,)), [np.zeros((0, 3), np.float32)]),
        (_reduce(Op.MEAN, dims=(2, 0), out_dims=(2,)), [np.zeros((2, 0), np.float32)]),
        (_argmax(dims=(2, 0), axis=0, out_dims=(0,)), [np.zeros((2, 0), np.float32)]),
        (
            _binary(Op.EQUAL, I32, a_dims=(0,), b_dims=(1,), out_dims=(0,)),
            [np.zeros((0,), np.int32), np.zeros((1,), np.int32)],
        ),
        (_topk(dims=(0, 4), k=1), [np.zeros((0, 4), np.float32)]),
    ],
    ids=["reduce_sum", "mean", "argmax", "equal", "topk"],
)
def test_zero_sized_refused(model, inputs):
    with pytest.raises(OpFailure, match="zero-sized"):
        execute(model, inputs)


def test_runtime_axis_out_of_range():
    b = ModelBuilder()
    x = b.input(F32, (2, 2))
    ax = b.input(I32, (1,))
    b.operation(Op.REDUCE_MIN, [x, ax, b.bool(False)], [b.output(F32, (2,))])
    with pytest.raises(OpFailure, match="out of range"):
        execute(b.build(), [np.ones((2, 2), np.float32), np.array([-3], np.int32)])


def test_runtime_topk_k_from_input():
    b = ModelBuilder()
    x = b.input(F32, (3,))
    k = b.input(T.INT32)
    b.operation(Op.TOPK_V2, [x, k], [b.output(F32, (0,)), b.output(I32, (0,))])
    m = b.build()
    values, idx = execute(m, [np.array([1, 3, 2], np.float32), np.int32(2)])
    np.testing.assert_array_equal(values, [3, 2])
    np.testing.assert_array_equal(idx, [1, 2])
    with pytest.raises(OpFailure, match="k must be"):
        execute(m, [np.array([1, 3, 2], np.float32), np.int32(4)])


def test_unknown_output_shape_is_filled():
    m = _reduce(Op.REDUCE_SUM, dims=(2, 3, 4), axes=(1, -1), keep=lambda b: b.bool(True), out_dims=(0, 0, 0))
    (y,) = execute(m, [np.ones((2, 3, 4), np.float32)])
    assert y.shape == (2, 1, 1)
    np.testing.assert_array_equal(y, np.full((2, 1, 1), 12, np.float32))


def test_bmm_omitted_adj_means_false():
    b = ModelBuilder()
    x = b.input(F32, (1, 2))
    y = b.input(F32, (2, 1))
    b.operation(Op.BATCH_MATMUL, [x, y, b.omitted(T.BOOL), b.omitted(T.BOOL)], [b.output(F32, (1, 1))])
    (out,) = execute(b.build(), [np.array([[1, 2]], np.float32), np.array([[3], [4]], np.float32)])
    np.testing.assert_array_equal(out, [[11]])


def test_bmm_runtime_batch_mismatch():
    b = ModelBuilder()
    x = b.input(F32, (0, 1, 2))
    y = b.input(F32, (0, 2, 1))
    b.operation(Op.BATCH_MATMUL, [x, y, b.bool(False), b.bool(False)], [b.output(F32, (0, 0, 0))])
    with pytest.raises(OpFailure, match="batch"):
        execute(b.build(), [np.ones((2, 1, 2), np.float32), np.ones((1, 2, 1), np.float32)])


def test_bmm_int32_wraps():
    m = _bmm(I32, x_dims=(1, 2), y_dims=(2, 1), out_dims=(1, 1))
    (out,) = execute(m, [np.array([[2**30, 2**30]], np.int32), np.array([[2], [1]], np.int32)])
    # 2**31 + 2**30 wraps to -2**30 in a 32-bit accumulator
    assert out.dtype == np.int32 and int(out[0, 0]) == -(2**30)


# Larger sanity checks against plain numpy formulas (independent of the reference's code paths).


def test_reduce_sum_matches_numpy_on_random_data():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    m = _reduce(Op.REDUCE_SUM, dims=x.shape, axes=(3, 1), out_dims=(2, 4))
    (y,) = execute(m, [x])
    np.testing.assert_allclose(y, x.astype(np.float64).sum(axis=(1, 3)), rtol=1e-5, atol=1e-5)


def test_topk_matches_numpy_on_random_ints():
    rng = np.random.default_rng(2)
    x = rng.integers(-5, 5, (6, 9)).astype(np.int32)
    (values, idx) = execute(_topk(I32, dims=x.shape, k=4), [x])
    # descending by (value, index): sort keys -value, then -index
    want = np.array([sorted(range(9), key=lambda i: (-r[i], -i))[:4] for r in x])
    np.testing.assert_array_equal(idx, want)
    np.testing.assert_array_equal(values, np.take_along_axis(x, want, axis=-1))


def test_bmm_quant_matches_float_within_one_step():
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (2, 3, 5)).astype(np.int8)
    y = rng.integers(-128, 128, (2, 5, 4)).astype(np.int8)
    b = ModelBuilder()
    xi = b.input(Q8S, x.shape, scale=0.02, zero_point=-3)
    yi = b.input(Q8S, y.shape, scale=0.03, zero_point=5)
    b.operation(
        Op.BATCH_MATMUL, [xi, yi, b.bool(False), b.bool(False)], [b.output(Q8S, (2, 3, 4), scale=0.5, zero_point=2)]
    )
    (out,) = execute(b.build(), [x, y])
    real = ((x.astype(np.float64) + 3) * 0.02) @ ((y.astype(np.float64) - 5) * 0.03)
    ideal = np.clip(np.round(real / 0.5) + 2, -128, 127)
    assert np.abs(out.astype(np.int64) - ideal).max() <= 1


# (c) AOSP vectors ----------------------------------------------------------------------------

_CASES = vector_cases(MY_OPS)


@pytest.mark.skipif(not _CASES, reason=vectors_missing_reason())
@pytest.mark.parametrize("case", _CASES, ids=lambda c: c.test_id)
def test_aosp_vector(case):
    from nnconform.cases.vectors import check_case

    status, message = check_case(case)
    assert status == "pass", message
