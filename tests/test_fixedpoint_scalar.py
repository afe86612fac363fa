"""The Python-int fixed-point path (one SOFTMAX row's reciprocal) gives the numpy path's bits."""

from __future__ import annotations

import numpy as np
import pytest

from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import fixedpoint
from nnconform.reference.executor import Executor
from nnconform.reference.ops import softmax


def test_reciprocal_int_matches_numpy_on_its_domain():
    rng = np.random.default_rng(1)
    xs = np.concatenate(
        [rng.integers(0, 1 << 31, 200_000), np.arange(0, 300), (1 << 31) - 1 - np.arange(300), 1 << np.arange(31)]
    ).astype(np.int64)
    vec = fixedpoint.one_over_one_plus_x_for_x_in_0_1(xs)
    scal = np.array([fixedpoint.one_over_one_plus_x_for_x_in_0_1_int(int(v)) for v in xs], dtype=np.int64)
    np.testing.assert_array_equal(vec, scal)


def test_srdhm_and_rdbp_int_match_numpy():
    from nnconform.reference.arith.quant import (
        INT32_MAX,
        INT32_MIN,
        rounding_divide_by_pot,
        saturating_rounding_doubling_high_mul,
    )

    rng = np.random.default_rng(2)
    a = np.concatenate([rng.integers(INT32_MIN, INT32_MAX + 1, 20_000), [INT32_MIN, INT32_MAX, 0, -1, 1]])
    b = np.concatenate([rng.integers(INT32_MIN, INT32_MAX + 1, 20_000), [INT32_MIN, INT32_MIN, 5, -1, -1]])
    want = saturating_rounding_doubling_high_mul(a.astype(np.int64), b.astype(np.int64))
    got = [fixedpoint._srdhm_int(int(x), int(y)) for x, y in zip(a, b)]
    np.testing.assert_array_equal(want, got)
    for e in (0, 1, 5, 23, 31):
        np.testing.assert_array_equal(
            rounding_divide_by_pot(a.astype(np.int64), e), [fixedpoint._rdbp_int(int(x), e) for x in a]
        )


@pytest.mark.parametrize("dtype,zp", [(T.TENSOR_QUANT8_ASYMM, 0), (T.TENSOR_QUANT8_ASYMM_SIGNED, -128)])
@pytest.mark.parametrize("beta,scale", [(1.0, 0.1), (0.5, 0.02), (2.0, 1.0), (1e-3, 1.0)])
def test_softmax_scalar_and_vector_paths_agree(monkeypatch, dtype, zp, beta, scale):
    rng = np.random.default_rng(3)
    b = ModelBuilder()
    x = b.input(dtype, [40, 50], scale=scale, zero_point=0)
    b.operation(Op.SOFTMAX, [x, b.f32(beta)], [b.output(dtype, [40, 50], scale=1 / 256, zero_point=zp)])
    m = b.build()
    lo, hi = (0, 255) if dtype == T.TENSOR_QUANT8_ASYMM else (-128, 127)
    data = rng.integers(lo, hi + 1, (40, 50)).astype(np.uint8 if lo == 0 else np.int8)
    vector = Executor(m).run([data])[0]  # 40 rows: the numpy path
    monkeypatch.setattr(softmax, "SCALAR_RECIPROCAL_ROWS", 10_000)
    scalar = Executor(m).run([data])[0]
    np.testing.assert_array_equal(vector, scalar)
