"""Lookup tables must reproduce the direct fixed-point kernels bit for bit."""

from collections import OrderedDict

import numpy as np
import pytest
from helpers import add_model

from nnconform.ir import OperandType as T
from nnconform.reference.executor import execute
from nnconform.reference.kernels import lut


@pytest.mark.parametrize(
    "t,lo,hi,zp", [(T.TENSOR_QUANT8_ASYMM, 0, 255, 120), (T.TENSOR_QUANT8_ASYMM_SIGNED, -128, 127, -7)]
)
@pytest.mark.parametrize("act", [0, 1, 3])
def test_large_quant_add_through_table_equals_direct_kernel(monkeypatch, t, lo, hi, zp, act):
    rng = np.random.default_rng(act)
    dtype = np.uint8 if lo == 0 else np.int8
    dims = (1, 64, 64, 32)  # 131072 elements: above the table threshold
    a = rng.integers(lo, hi + 1, dims).astype(dtype)
    b = rng.integers(lo, hi + 1, dims).astype(dtype)
    model = add_model(t, dims, scale=0.05, zp=zp, act=act)
    via_table = execute(model, [a, b])[0]
    # no table already built or asked for: the direct kernel runs
    monkeypatch.setattr(lut, "BINARY_MIN_ELEMENTS", 1 << 40)
    monkeypatch.setattr(lut, "_cache", OrderedDict())
    monkeypatch.setattr(lut, "_seen", OrderedDict())
    direct = execute(model, [a, b])[0]
    assert not lut._cache
    assert via_table.dtype == direct.dtype and np.array_equal(via_table, direct)


@pytest.mark.parametrize(
    "t,lo,hi,zp", [(T.TENSOR_QUANT8_ASYMM, 0, 255, 3), (T.TENSOR_QUANT8_ASYMM_SIGNED, -128, 127, -90)]
)
def test_small_quant_add_run_again_goes_through_the_table_with_the_same_bytes(monkeypatch, t, lo, hi, zp):
    # A small tensor takes the direct kernel the first time; executed again (a benchmark's
    # loop), the same parameters build the table once, and every later run gathers from it.
    monkeypatch.setattr(lut, "_cache", OrderedDict())
    monkeypatch.setattr(lut, "_seen", OrderedDict())
    rng = np.random.default_rng(2024)
    dtype = np.uint8 if lo == 0 else np.int8
    dims = (1, 4, 4, 24)
    model = add_model(t, dims, scale=0.043, zp=zp, act=1)
    feeds = [[rng.integers(lo, hi + 1, dims).astype(dtype) for _ in range(2)] for _ in range(3)]
    first = execute(model, feeds[0])[0]
    assert not lut._cache and len(lut._seen) == 1
    runs = [execute(model, f)[0] for f in feeds]
    assert len(lut._cache) == 1
    assert runs[0].tobytes() == first.tobytes()
    # the table's answers against the direct kernel's for the other feeds
    for f, got in zip(feeds[1:], runs[1:]):
        monkeypatch.setattr(lut, "_cache", OrderedDict())
        monkeypatch.setattr(lut, "_seen", OrderedDict())
        want = execute(model, f)[0]
        assert not lut._cache
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_table_covers_every_byte_in_pattern_order():
    dom = lut._domain(np.dtype(np.int8))
    assert dom[0] == 0 and dom[127] == 127 and dom[128] == -128 and dom[255] == -1
    table = lut.unary(
        ("neg-test",), lambda x: (-x.astype(np.int16)).astype(np.int16), np.arange(-128, 128, dtype=np.int8).repeat(8)
    )
    assert table[0] == 128 and table[-1] == -127
