"""TENSOR_FLOAT16 conversions (nnconform.reference.arith.half): the compiled hardware conversions give
numpy's bits on every half, on every float32 rounding boundary and NaN class, and the fp16
operations that use them give the same outputs with and without the compiled kernels."""

from __future__ import annotations

import numpy as np
import pytest

from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import half
from nnconform.reference.executor import Executor
from nnconform.reference.kernels import jit

pytest.importorskip("numba", reason="the compiled conversions need the [fast] extra (numba)")


@pytest.fixture(autouse=True)
def kernels_on(monkeypatch):
    monkeypatch.setenv("NNCONFORM_JIT", "1")
    monkeypatch.setattr(jit, "_state", {})
    if not jit.half_instructions():
        pytest.skip("this CPU has no half-float conversion instructions: numpy converts")


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view({2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


def test_widening_every_half_gives_numpys_bits():
    h = np.arange(1 << 16, dtype=np.uint16).view(np.float16)  # NaN payloads, subnormals, -0
    got = jit.widen_half(h)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(_bits(got), _bits(h.astype(np.float32)))


def _float32_boundaries() -> np.ndarray:
    """Every sign, exponent and top 7 significand bits (the high 16 bits, all 65,536), each
    with low 16 bits at the places where rounding to half changes: the round bit 0x1000 of a
    normal half and the bits below it, the guard bits of every subnormal shift (up to bit
    23, covered by the high half), all ones and zeros.  Every NaN and infinity class too."""
    low = np.array(
        [
            0x0000,
            0x0001,
            0x07FF,
            0x0800,
            0x0FFF,
            0x1000,
            0x1001,
            0x17FF,
            0x1FFF,
            0x2000,
            0x2FFF,
            0x3000,
            0x3001,
            0x3FFF,
            0x4000,
            0x7FFF,
            0x8000,
            0x8001,
            0xBFFF,
            0xC000,
            0xEFFF,
            0xF000,
            0xF001,
            0xFFFF,
        ],
        dtype=np.uint32,
    )
    high = np.arange(1 << 16, dtype=np.uint32) << 16
    return (high[:, None] | low[None, :]).reshape(-1).view(np.float32)


def test_narrowing_gives_numpys_bits_on_every_rounding_boundary_and_nan():
    f = _float32_boundaries()
    with np.errstate(over="ignore"):
        want = f.astype(np.float16)
    np.testing.assert_array_equal(_bits(jit.narrow_half(f)), _bits(want))


def test_narrowing_gives_numpys_bits_on_random_floats():
    rng = np.random.default_rng(20261128)
    print("numpy seed 20261128")
    f = rng.integers(0, 1 << 32, 2_000_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    with np.errstate(over="ignore"):
        want = f.astype(np.float16)
    np.testing.assert_array_equal(_bits(jit.narrow_half(f)), _bits(want))


def test_a_signalling_nan_keeps_numpys_payload_where_the_instruction_would_quiet_it():
    # the instruction sets the quiet bit (0x7e00 / 0x7fc00000); numpy keeps the payload as is
    snan16 = np.array([0x7C01, 0xFC55, 0x7D00], np.uint16).view(np.float16)
    assert (
        _bits(jit.widen_half(snan16)).tolist()
        == _bits(snan16.astype(np.float32)).tolist()
        == [0x7F802000, 0xFF8AA000, 0x7FA00000]
    )
    snan32 = np.array([0x7F800001, 0x7F802000, 0xFFA00000], np.uint32).view(np.float32)
    assert _bits(jit.narrow_half(snan32)).tolist() == [0x7C01, 0x7C01, 0xFD00]


def test_strided_and_shaped_arrays_keep_their_shape():
    x = np.arange(24, dtype=np.float16).reshape(2, 3, 4)[:, ::2, 1:]
    assert np.array_equal(jit.widen_half(x), x.astype(np.float32))
    y = np.linspace(-70000, 70000, 60, dtype=np.float32).reshape(3, 4, 5).transpose(2, 0, 1)
    with np.errstate(over="ignore"):
        assert np.array_equal(_bits(jit.narrow_half(y)), _bits(y.astype(np.float16)))


def test_the_helpers_pick_the_compiled_path_only_where_it_is_worth_it(monkeypatch):
    calls = []
    monkeypatch.setattr(jit, "widen_half", lambda x: calls.append("widen") or x.astype(np.float32))
    monkeypatch.setattr(jit, "narrow_half", lambda x: calls.append("narrow") or x.astype(np.float16))
    big = np.ones(1 << 12, np.float16)
    assert half.widen(big).dtype == np.float32 and calls == ["widen"]
    assert half.narrow(big.astype(np.float32), np.float16).dtype == np.float16 and calls == ["widen", "narrow"]
    f32 = np.ones(1 << 12, np.float32)
    assert half.widen(f32) is f32 and half.narrow(f32, np.float32) is f32  # no copies
    half.widen(np.ones(8, np.float16))  # numpy: a few values
    assert calls == ["widen", "narrow"]


# ---- fp16 operations, compiled conversions against numpy's ---------------------------------


def _values(rng: np.random.Generator, shape, special: bool = True) -> np.ndarray:
    """Normal and subnormal halves, and a few special ones (not in weights: a NaN weight
    would make every output it reaches NaN)."""
    x = (rng.standard_normal(shape) * 2.0 ** rng.integers(-20, 4, shape)).astype(np.float16)
    if special:
        flat = x.reshape(-1)
        flat[rng.integers(0, flat.size, 8)] = [np.inf, -np.inf, np.nan, 0.0, -0.0, 65504, -6e-8, 6e-5]
    return x


def _fp16_model(kind: str, rng: np.random.Generator):
    b = ModelBuilder()
    h = T.TENSOR_FLOAT16
    if kind in ("ADD", "SUB"):
        dims = [1, 24, 24, 16]
        x, y = b.input(h, dims), b.input(h, dims)
        b.operation(getattr(Op, kind), [x, y, b.i32(1)], [b.output(h, dims)])  # with RELU
        return b.build(), [_values(rng, dims), _values(rng, dims)]
    if kind == "FULLY_CONNECTED":
        w = b.const(h, [300, 512], _values(rng, (300, 512), special=False))
        bias = b.const(h, [300], _values(rng, (300,), special=False))
        x = b.input(h, [2, 512])
        b.operation(Op.FULLY_CONNECTED, [x, w, bias, b.i32(3)], [b.output(h, [2, 300])])
        return b.build(), [_values(rng, (2, 512), special=False)]  # (one NaN makes a row NaN)
    if kind == "SOFTMAX":
        x = b.input(h, [3, 700])
        b.operation(Op.SOFTMAX, [x, b.f16(0.5)], [b.output(h, [3, 700])])
        return b.build(), [(rng.standard_normal((3, 700)) * 8).astype(np.float16)]
    dims = [1, 20, 20, 12]
    x = b.input(h, dims)
    if kind == "CONV_2D":
        w = b.const(h, [8, 3, 3, 12], _values(rng, (8, 3, 3, 12), special=False))
        bias = b.const(h, [8], _values(rng, (8,), special=False))
        b.operation(Op.CONV_2D, [x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(0)], [b.output(h, [1, 20, 20, 8])])
    else:
        w = b.const(h, [1, 3, 3, 12], _values(rng, (1, 3, 3, 12), special=False))
        bias = b.const(h, [12], _values(rng, (12,), special=False))
        b.operation(
            Op.DEPTHWISE_CONV_2D,
            [x, w, bias, b.i32(1), b.i32(2), b.i32(2), b.i32(1), b.i32(0)],
            [b.output(h, [1, 10, 10, 12])],
        )
    return b.build(), [_values(rng, dims)]


@pytest.mark.parametrize("kind", ["ADD", "SUB", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "SOFTMAX"])
def test_fp16_operations_give_the_same_bits_with_the_compiled_conversions(kind, monkeypatch):
    rng = np.random.default_rng(7)
    model, inputs = _fp16_model(kind, rng)
    used = []
    real_widen = jit.widen_half
    monkeypatch.setattr(jit, "widen_half", lambda x: used.append(x.size) or real_widen(x))
    compiled = Executor(model).run(inputs)
    assert used, "the compiled conversion was not used"
    model, inputs = _fp16_model(kind, np.random.default_rng(7))  # nothing remembered from above
    with monkeypatch.context() as m:
        m.setattr(jit, "worth", lambda *a, **k: False)
        numpy_only = Executor(model).run(inputs)
    for got, want in zip(compiled, numpy_only):
        assert got.dtype == want.dtype == np.float16 and got.shape == want.shape
        # the same bits, but where both are NaN (which NaN an operation returns may follow
        # its operands' order, which the compiled convolutions need not keep)
        differ = (_bits(got) != _bits(want)) & ~(np.isnan(got) & np.isnan(want))
        assert not differ.any(), f"{int(differ.sum())} of {got.size} differ"
        assert np.isfinite(want).sum() > want.size // 4  # the comparison saw real values
