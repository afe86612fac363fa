"""The reference's speed-ups against the plain formulations they replace, on seeded random
inputs: every fast path must give the same bits (the rule of the reference executor).

Each test prints its seed; the slow formulation is written out here as it was in the op
before the change."""

import numpy as np
import pytest

from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import broadcast
from nnconform.reference.executor import execute
from nnconform.reference.ops.pad import constant_pad

F32, F16 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16


def _rng(seed):
    print("seed", seed)
    return np.random.default_rng(seed)


def _same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8))


def _special_floats(rng, shape, dtype=np.float32):
    """Uniform values with zeros of both signs, infinities and NaNs sprinkled in."""
    x = rng.uniform(-3, 3, shape).astype(dtype)
    pick = rng.random(shape)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype=dtype)
    x[pick < 0.1] = specials[rng.integers(0, 5, int((pick < 0.1).sum()))]
    return x


@pytest.mark.parametrize("seed", range(6))
def test_widen_inner_broadcasts_to_the_same_values(seed):
    rng = _rng(1600 + seed)
    for _ in range(30):
        shape = tuple(int(d) for d in rng.integers(1, 40, int(rng.integers(1, 5))))
        small_shape = tuple(
            d if rng.random() < 0.5 else 1 for d in shape[len(shape) - int(rng.integers(0, len(shape) + 1)) :]
        )
        small = rng.standard_normal(small_shape).astype(np.float32)
        wide = broadcast.widen_inner(small, shape, min_inner=int(rng.choice([1, 16, 64, 1024])))
        np.testing.assert_array_equal(np.broadcast_to(wide, shape), np.broadcast_to(small, shape))


def _prelu(x, alpha, t):
    b = ModelBuilder()
    xi = b.input(t, list(x.shape))
    ai = b.input(t, list(alpha.shape))
    y = b.output(t, list(np.broadcast_shapes(x.shape, alpha.shape)))
    b.operation(Op.PRELU, [xi, ai], [y])
    return execute(b.build(), [x, alpha])[0]


@pytest.mark.parametrize("seed", range(6))
def test_prelu_float_matches_plain_formula(seed):
    """Per-channel alphas (the zoo's [1, 1, C]), other broadcasts, specials, fp16."""
    rng = _rng(1700 + seed)
    for _ in range(12):
        dtype = np.float16 if rng.random() < 0.3 else np.float32
        t = F16 if dtype == np.float16 else F32
        n = int(rng.integers(1, 3))
        h, w, c = (int(v) for v in rng.integers(1, 50, 3))
        x = _special_floats(rng, (n, h, w, c), dtype)
        alpha_shape = [(1, 1, c), (c,), (1, w, c), (n, 1, 1, c), (1, 1, 1, 1)][int(rng.integers(0, 5))]
        alpha = _special_floats(rng, alpha_shape, dtype)
        xf, af = x.astype(np.float32), alpha.astype(np.float32)
        with np.errstate(invalid="ignore", over="ignore"):
            expected = np.where(xf >= 0, xf, xf * af).astype(dtype)
        _same_bits(_prelu(x, alpha, t), expected)


@pytest.mark.parametrize("seed", range(4))
def test_constant_pad_matches_np_pad(seed):
    rng = _rng(1800 + seed)
    for _ in range(40):
        rank = int(rng.integers(1, 5))
        shape = tuple(int(d) for d in rng.integers(1, 7, rank))
        pads = [[int(v) for v in rng.integers(0, 4, 2)] for _ in range(rank)]
        dtype = [np.float32, np.float16, np.uint8, np.int8, np.int32][int(rng.integers(0, 5))]
        x = (rng.standard_normal(shape) * 50).astype(dtype)
        value = dtype(rng.integers(-5, 5)) if np.dtype(dtype).kind != "u" else dtype(rng.integers(0, 9))
        if np.dtype(dtype).kind == "f" and rng.random() < 0.3:
            value = dtype(-0.0)  # a -0.0 border keeps its sign (not the zeroed-memory path)
        _same_bits(constant_pad(x, pads, value), np.pad(x, [tuple(p) for p in pads], constant_values=value))


@pytest.mark.parametrize("seed", range(4))
def test_select_bits_where_matches_np_where(seed):
    from nnconform.reference.arith import select_bits

    rng = _rng(1900 + seed)
    for _ in range(20):
        dtype = [np.float32, np.float16, np.float64, np.int8, np.uint8, np.int32][int(rng.integers(0, 6))]
        shape = (int(rng.integers(1, 5)), int(rng.integers(1, 80)), int(rng.integers(20, 80)))
        if np.dtype(dtype).kind == "f":
            a, b = _special_floats(rng, shape, dtype), _special_floats(rng, shape, dtype)
        else:
            a, b = (rng.integers(-100, 100, shape) % 128).astype(dtype), rng.integers(0, 100, shape).astype(dtype)
        if rng.random() < 0.3:  # strided views
            a, b = a[:, :, ::2], b[:, :, 1::2][:, :, : a.shape[2]]
            a = a[:, :, : b.shape[2]]
        mask = rng.random(a.shape) < rng.random()
        expected = np.where(mask, a, b)
        _same_bits(select_bits.where(mask, a, b), expected)
        _same_bits(select_bits.where(mask, a, b.copy(), b_scratch=True), expected)


@pytest.mark.parametrize("seed", range(4))
def test_pointwise_conv_float_uses_input_as_patches(seed):
    """A 1x1, stride-1, unpadded float CONV_2D multiplies the input itself (no im2col copy):
    same bits as the product of a copied patch matrix, as before."""
    rng = _rng(2000 + seed)
    for _ in range(6):
        dtype = np.float16 if rng.random() < 0.3 else np.float32
        t = F16 if dtype == np.float16 else F32
        n, h, w, c, o = (int(v) for v in rng.integers(1, 24, 5))
        act = int(rng.integers(0, 4))
        nchw = bool(rng.random() < 0.3)
        x = (
            _special_floats(rng, (n, h, w, c), dtype)
            if rng.random() < 0.2
            else rng.standard_normal((n, h, w, c)).astype(dtype)
        )
        f = rng.standard_normal((o, 1, 1, c)).astype(dtype)
        bias = rng.standard_normal(o).astype(dtype)
        b = ModelBuilder()
        xin = b.input(t, [n, c, h, w] if nchw else [n, h, w, c])
        y = b.output(t, [n, o, h, w] if nchw else [n, h, w, o])
        b.operation(
            Op.CONV_2D,
            [
                xin,
                b.const(t, f.shape, f),
                b.const(t, bias.shape, bias),
                b.i32(0),
                b.i32(0),
                b.i32(0),
                b.i32(0),
                b.i32(1),
                b.i32(1),
                b.i32(act),
                b.bool(nchw),
            ],
            [y],
        )
        actual = execute(b.build(), [x.transpose(0, 3, 1, 2) if nchw else x])[0]
        cols = np.array(x.astype(np.float32).reshape(-1, c), copy=True)
        with np.errstate(all="ignore"):
            ref = cols @ f.astype(np.float32).reshape(o, -1).T
            ref += bias.astype(np.float32)
        lo, hi = {0: (-np.inf, np.inf), 1: (0, np.inf), 2: (-1, 1), 3: (0, 6)}[act]
        if act:
            ref = np.clip(ref, np.float32(lo), np.float32(hi))
        ref = ref.astype(dtype).reshape(n, h, w, o)
        _same_bits(actual.transpose(0, 2, 3, 1) if nchw else actual, ref)
