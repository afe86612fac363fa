"""A quantised CONV_2D's integer product in int16 pairs (int16_conv.py, jit.int16_product):
the exact integer product for any row count, odd K and channel tail; and whole
convolutions (uint8, int8, per-channel filters, padding, strides, dilations, 1x1) with
the numpy path's bytes, the int16 product having run."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from nnconform.ir import ChannelQuant, ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.executor import Executor
from nnconform.reference.kernels import int16_conv, jit

pytest.importorskip("numba", reason="the int16 product is a compiled kernel: the [fast] extra (numba)")
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


@pytest.fixture(autouse=True)
def kernels_on(monkeypatch):
    monkeypatch.setenv("NNCONFORM_JIT", "1")
    monkeypatch.setattr(jit, "_state", {})
    if not jit._host_has("avx512f", "avx512bw"):
        pytest.skip("this CPU has no AVX-512 BW (the int16 product is x86-64 with AVX-512 only)")


def _layout(w16: np.ndarray, k: int) -> np.ndarray:
    """Filter offsets [O, K] in the kernel's pair layout (through packed_filter, as run)."""
    return int16_conv.packed_filter(w16.reshape(w16.shape[0], 1, 1, k).astype(np.float32))


@pytest.mark.parametrize(
    "m,k,o",
    [
        (1, 1, 1),
        (5, 3, 15),
        (6, 2, 16),
        (7, 27, 17),
        (13, 288, 24),
        (12, 9, 63),
        (37, 33, 64),
        (40, 64, 65),
        (9, 10, 40),
        (8, 7, 110),
        (25, 145, 130),
        (6, 1, 200),
    ],
)
def test_int16_product_is_the_exact_integer_product(m, k, o):
    """Rows not a multiple of 6, K odd or even, channels short of, at and past blocks of 16
    and of 64, offsets at +-255: the int64 product's integers."""
    rng = np.random.default_rng(m * 1000 + k * 10 + o)
    x = rng.integers(-255, 256, (m, k)).astype(np.int16)
    w = rng.integers(-255, 256, (o, k)).astype(np.int16)
    x[0, :] = 255
    w[0, :] = 255  # the largest pair sums
    rows = -(-m // 6) * 6
    a = np.zeros(rows * k + 2, np.int16)
    a[: m * k] = x.reshape(-1)
    a[m * k :] = 0
    got = jit.int16_product(a, k, _layout(w, k), o, rows)[:m]
    want = x.astype(np.int64) @ w.astype(np.int64).T
    assert got.dtype == np.int32 and np.array_equal(got, want)


def _conv_model(signed: bool, per_channel: bool, n, h, w, c, o, fh, fw, pads, strides, dil, act, rng):
    t = T.TENSOR_QUANT8_ASYMM_SIGNED if signed else T.TENSOR_QUANT8_ASYMM
    lo = -128 if signed else 0
    b = ModelBuilder()
    x = b.input(t, [n, h, w, c], scale=0.05, zero_point=lo + int(rng.integers(0, 256)))
    if per_channel:
        scales = tuple(float(s) for s in rng.uniform(0.002, 0.02, o))
        wt = b.const(
            T.TENSOR_QUANT8_SYMM_PER_CHANNEL,
            [o, fh, fw, c],
            rng.integers(-127, 128, (o, fh, fw, c)).astype(np.int8),
            channel_quant=ChannelQuant(scales, 0),
        )
        bias_scale = 0.0
    else:
        wt = b.const(
            t,
            [o, fh, fw, c],
            (rng.integers(0, 256, (o, fh, fw, c)) + lo).astype(np.int8 if signed else np.uint8),
            scale=0.01,
            zero_point=lo + int(rng.integers(0, 256)),
        )
        bias_scale = 0.05 * 0.01
    bias = b.const(T.TENSOR_INT32, [o], rng.integers(-5000, 5000, o).astype(np.int32), scale=bias_scale)
    pl, pr, pt, pb = pads
    oh = (h + pt + pb - ((fh - 1) * dil[1] + 1)) // strides[1] + 1
    ow = (w + pl + pr - ((fw - 1) * dil[0] + 1)) // strides[0] + 1
    y = b.output(t, [n, oh, ow, o], scale=0.2, zero_point=lo + int(rng.integers(0, 256)))
    args = [b.i32(v) for v in (pl, pr, pt, pb, strides[0], strides[1], act)] + [b.bool(False)] + [b.i32(v) for v in dil]
    b.operation(Op.CONV_2D, [x, wt, bias, *args], [y])
    return b.build(), (n, h, w, c), t


@seed(20261130)
@SETTINGS
@given(
    s=st.integers(0, 2**31 - 1),
    signed=st.booleans(),
    per_channel=st.booleans(),
    n=st.integers(1, 2),
    h=st.integers(1, 14),
    w=st.integers(1, 14),
    c=st.integers(1, 20),
    o=st.integers(1, 70),
    fh=st.integers(1, 3),
    fw=st.integers(1, 3),
    pads=st.tuples(*[st.integers(0, 2)] * 4),
    strides=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    dil=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    act=st.sampled_from([0, 1, 3]),
)
def test_quantised_conv_same_bytes_through_the_int16_product(
    monkeypatch, s, signed, per_channel, n, h, w, c, o, fh, fw, pads, strides, dil, act
):
    """Any padding, stride, dilation, channel count and zero point, 1x1 included: the
    executor's output with the int16 product is the numpy path's (float32 BLAS), byte for
    byte, and the int16 product ran."""
    print("numpy seed", s)
    rng = np.random.default_rng(s)
    ext_w, ext_h = (fw - 1) * dil[0] + 1, (fh - 1) * dil[1] + 1
    pl, pr, pt, pb = min(pads[0], ext_w - 1), min(pads[1], ext_w - 1), min(pads[2], ext_h - 1), min(pads[3], ext_h - 1)
    pads = (pl, pr, pt, pb)  # (the reference: padding below the filter's extent)
    if (h + pt + pb - ((fh - 1) * dil[1] + 1)) < 0 or (w + pl + pr - ((fw - 1) * dil[0] + 1)) < 0:
        return  # no output pixel
    model, shape, t = _conv_model(signed, per_channel, n, h, w, c, o, fh, fw, pads, strides, dil, act, rng)
    dt = np.int8 if signed else np.uint8
    x = rng.integers(0, 256, shape).astype(np.uint8).view(dt)
    with monkeypatch.context() as mp:
        mp.setattr(jit, "worth", lambda *a, **k: False)
        want = Executor(model).run([x])[0]
    calls = []
    real = int16_conv.product
    monkeypatch.setattr(int16_conv, "product", lambda *a: calls.append(1) or real(*a))
    got = Executor(model).run([x])[0]
    assert calls, "the int16 product did not run"
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_the_kernel_passes_its_trial_on_this_cpu():
    assert jit.int16_products()


def test_a_kernel_that_fails_its_trial_leaves_the_float_product(monkeypatch, caplog):
    """A numba or LLVM that rejects the hand-written IR: a warning, and the convolution
    takes the float32 product (the same bytes)."""
    import logging

    monkeypatch.setattr(jit, "_int16_trial", lambda: (_ for _ in ()).throw(RuntimeError("LLVM ERROR: broken")))
    with caplog.at_level(logging.WARNING, logger="nnconform.reference.kernels.jit"):
        assert not jit.int16_products()
    assert "int16 product kernel failed to compile or run (RuntimeError: LLVM ERROR: broken)" in caplog.text
    monkeypatch.setattr(int16_conv, "product", lambda *a: pytest.fail("the int16 product ran"))
    rng = np.random.default_rng(4)
    model, shape, _ = _conv_model(False, False, 1, 6, 6, 3, 8, 3, 3, (1, 1, 1, 1), (1, 1), (1, 1), 0, rng)
    x = rng.integers(0, 256, shape).astype(np.uint8)
    got = Executor(model).run([x])[0]
    with monkeypatch.context() as mp:
        mp.setattr(jit, "worth", lambda *a, **k: False)
        want = Executor(model).run([x])[0]
    assert got.tobytes() == want.tobytes()


def test_only_ungrouped_and_within_int32():
    assert int16_conv.usable(1, (1 << 31) - 1)
    assert not int16_conv.usable(1, 1 << 31)  # a sum could pass int32: the float path
    assert not int16_conv.usable(2, 1000)  # GROUPED_CONV_2D: the float path


def test_packed_filter_cached_only_for_read_only_offsets():
    w = np.arange(2 * 3 * 3 * 5, dtype=np.float32).reshape(2, 3, 3, 5) % 7 - 3
    first = int16_conv.packed_filter(w)
    assert int16_conv.packed_filter(w) is not first  # writeable: packed again
    w.setflags(write=False)
    kept = int16_conv.packed_filter(w)
    assert int16_conv.packed_filter(w) is kept
    # pairs (k, k+1) of each channel, 16 channels a row, zeros past K = 45 and past O = 2
    assert kept.shape == (23, 16)
    pairs = kept.view(np.int16).reshape(23, 16, 2)
    flat = w.reshape(2, 45)
    assert np.array_equal(pairs[:22, :2, 0].T, flat[:, 0:44:2]) and np.array_equal(pairs[:22, :2, 1].T, flat[:, 1:45:2])
    assert pairs[22, :2, 0].tolist() == flat[:, 44].tolist() and not pairs[22, :, 1].any() and not pairs[:, 2:].any()
