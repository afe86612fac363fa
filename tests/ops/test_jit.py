"""The compiled kernels of nnconform.reference.kernels.jit (the [fast] extra) against the numpy paths they
stand in for: the same bits on seeded shapes, strides, dilations, biases with signed zeros
and special values, and through a whole DEPTHWISE_CONV_2D model."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from nnconform.reference.kernels import jit
from nnconform.reference.ops import conv_common as cc
from nnconform.reference.ops import depthwise_conv_2d as dwc

pytest.importorskip("numba", reason="the compiled kernels need the [fast] extra (numba)")

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


@pytest.fixture(autouse=True)
def kernels_on(monkeypatch):
    """The kernels are off unless NNCONFORM_JIT=1: on for every test here."""
    monkeypatch.setenv("NNCONFORM_JIT", "1")
    monkeypatch.setattr(jit, "_state", {})


@pytest.fixture
def numpy_only():
    """Run a block with the compiled kernels off (the numpy path)."""

    def off(fn, *args, **kw):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(jit, "worth", lambda *args, **kw: False)
            return fn(*args, **kw)

    return off


def _params(sh, sw, dh, dw):
    return cc.ConvParams(
        pad_top=0,
        pad_bottom=0,
        pad_left=0,
        pad_right=0,
        stride_h=sh,
        stride_w=sw,
        dil_h=dh,
        dil_w=dw,
        activation=0,
        nchw=False,
        extra=(1,),
    )


def _same_bits(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    both_nan = np.isnan(a) & np.isnan(b)
    bits = a.view(np.uint32 if a.dtype == np.float32 else np.uint64)
    other = b.view(bits.dtype)
    diff = (bits != other) & ~both_nan
    assert not diff.any(), f"{int(diff.sum())} elements differ, first at {np.argwhere(diff)[0].tolist()}"


def _same_output(got: np.ndarray, want: np.ndarray) -> None:
    """The same bytes for integer outputs; for float ones the same bits where not both NaN."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind in "iu":
        assert got.tobytes() == want.tobytes()
        return
    both_nan = np.isnan(got) & np.isnan(want)
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
    diff = (got.view(bits) != want.view(bits)) & ~both_nan
    assert not diff.any(), f"{int(diff.sum())} elements differ"


@seed(16016)
@SETTINGS
@given(
    s=st.integers(0, 2**31 - 1),
    n=st.integers(1, 2),
    oh=st.integers(1, 40),
    ow=st.integers(1, 40),
    c=st.integers(1, 40),
    fh=st.integers(1, 5),
    fw=st.integers(1, 5),
    sh=st.integers(1, 3),
    sw=st.integers(1, 3),
    dh=st.integers(1, 3),
    dw=st.integers(1, 3),
    dtype=st.sampled_from([np.float32, np.float64]),
    bias=st.sampled_from(["none", "plain", "neg_zero"]),
    special=st.booleans(),
    pads=st.tuples(*[st.integers(0, 3)] * 4),
)
def test_depthwise_kernel_gives_the_numpy_paths_bits(
    numpy_only, monkeypatch, s, n, oh, ow, c, fh, fw, sh, sw, dh, dw, dtype, bias, special, pads
):
    print("numpy seed", s)
    rng = np.random.default_rng(s)
    h, w = (oh - 1) * sh + (fh - 1) * dh + 1, (ow - 1) * sw + (fw - 1) * dw + 1
    pt, pb, pl, pr = pads
    if pt + pb >= h:  # the padding leaves at least one input row and column
        pt = pb = 0
    if pl + pr >= w:
        pl = pr = 0
    xp = rng.standard_normal((n, h, w, c)).astype(dtype)
    taps = rng.standard_normal((fh, fw, c)).astype(dtype)
    if special:  # signed zeros, infinities and NaN travel through both paths alike
        flat = xp.reshape(-1)
        picks = rng.integers(0, flat.size, max(1, flat.size // 50))
        flat[picks] = rng.choice(np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype), picks.size)
        taps.reshape(-1)[rng.integers(0, taps.size, max(1, taps.size // 10))] = -0.0
    b = None
    if bias != "none":
        b = rng.standard_normal(c).astype(np.float32)
        if bias == "neg_zero":
            b[rng.integers(0, c)] = -0.0
            taps[:] = np.where(rng.random(taps.shape) < 0.5, -0.0, taps)
    p = _params(sh, sw, dh, dw)
    with np.errstate(all="ignore"):  # inf * 0 and inf - inf: NaN, as the executor allows
        want = numpy_only(dwc._depthwise, xp, taps, oh, ow, p, bias=b)
    monkeypatch.setattr(jit, "MIN_ELEMENTS", 0)  # the compiled kernel even on tiny outputs
    got = dwc._depthwise(xp, taps, oh, ow, p, bias=b)
    _same_bits(got, want)
    # The same input with its border rows and columns as the padding the kernel adds itself
    # (zeros in the numpy path's input too); each path given it unpadded.
    if pt or pb or pl or pr:
        xp[:, :pt] = 0
        xp[:, h - pb :] = 0
        xp[:, :, :pl] = 0
        xp[:, :, w - pr :] = 0
        with np.errstate(all="ignore"):
            want = numpy_only(dwc._depthwise, xp, taps, oh, ow, p, bias=b)
        inner = xp[:, pt : h - pb, pl : w - pr]
        padded = dataclasses.replace(p, pad_top=pt, pad_bottom=pb, pad_left=pl, pad_right=pr)
        with np.errstate(all="ignore"):
            _same_bits(dwc._depthwise(inner, taps, oh, ow, padded, bias=b, unpadded=True), want)
            _same_bits(numpy_only(dwc._depthwise, inner, taps, oh, ow, padded, bias=b, unpadded=True), want)


@pytest.mark.parametrize("quant", [False, True], ids=["float32", "quant8"])
@pytest.mark.parametrize("m", [1, 2])
def test_depthwise_model_same_bits_with_and_without_the_kernel(numpy_only, quant, m):
    """A 1x40x40xC DEPTHWISE_CONV_2D (SAME padding, stride 2, ReLU6) through the executor:
    big enough for the kernel, and the same output bytes on both paths."""
    from nnconform.ir import ModelBuilder
    from nnconform.ir import OperandType as T
    from nnconform.ir import OperationType as Op
    from nnconform.reference.executor import Executor

    rng = np.random.default_rng(1616 + m)
    c = 24
    b = ModelBuilder()
    if quant:
        x = b.input(T.TENSOR_QUANT8_ASYMM, [1, 40, 40, c], scale=0.05, zero_point=120)
        wt = b.const(
            T.TENSOR_QUANT8_ASYMM,
            [1, 3, 3, c * m],
            rng.integers(0, 256, (1, 3, 3, c * m), dtype=np.uint8),
            scale=0.02,
            zero_point=130,
        )
        bs = b.const(T.TENSOR_INT32, [c * m], rng.integers(-900, 900, c * m).astype(np.int32), scale=0.001)
        y = b.output(T.TENSOR_QUANT8_ASYMM, [1, 20, 20, c * m], scale=0.07, zero_point=110)
        feed = rng.integers(0, 256, (1, 40, 40, c), dtype=np.uint8)
    else:
        x = b.input(T.TENSOR_FLOAT32, [1, 40, 40, c])
        wt = b.const(T.TENSOR_FLOAT32, [1, 3, 3, c * m], rng.standard_normal((1, 3, 3, c * m)).astype(np.float32))
        bs = b.const(T.TENSOR_FLOAT32, [c * m], rng.standard_normal(c * m).astype(np.float32))
        y = b.output(T.TENSOR_FLOAT32, [1, 20, 20, c * m])
        feed = rng.standard_normal((1, 40, 40, c)).astype(np.float32)
    b.operation(Op.DEPTHWISE_CONV_2D, [x, wt, bs, b.i32(1), b.i32(2), b.i32(2), b.i32(m), b.i32(3)], [y])
    model = b.build()
    assert 20 * 20 * c * m >= jit.MIN_ELEMENTS / 2  # big: with MIN_ELEMENTS lowered below, compiled
    want = numpy_only(lambda: Executor(model).run([feed])[0])
    old = jit.MIN_ELEMENTS
    jit.MIN_ELEMENTS = 1
    try:
        got = Executor(model).run([feed])[0]
    finally:
        jit.MIN_ELEMENTS = old
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_kernels_only_when_asked(monkeypatch):
    """Off unless NNCONFORM_JIT=1 (a first compile takes seconds, which a per-case time budget
    would charge to the driver); decided once per process, so the cache is reset here."""
    for value, on in ((None, False), ("0", False), ("", False), ("1", True)):
        monkeypatch.setattr(jit, "_state", {})
        if value is None:
            monkeypatch.delenv("NNCONFORM_JIT", raising=False)
        else:
            monkeypatch.setenv("NNCONFORM_JIT", value)
        assert jit.enabled() is on and jit.worth(10**9) is on
        assert jit.describe().startswith("compiled kernels (numba " if on else "numpy only (NNCONFORM_JIT=1 turns")


def test_benchmarks_turn_the_kernels_on_unless_told_otherwise(monkeypatch):
    monkeypatch.setattr(jit, "_state", {})
    monkeypatch.delenv("NNCONFORM_JIT", raising=False)
    jit.turn_on_if_installed()
    assert jit.enabled()
    monkeypatch.setattr(jit, "_state", {})
    monkeypatch.setenv("NNCONFORM_JIT", "0")  # an explicit choice stays
    jit.turn_on_if_installed()
    assert not jit.enabled()


@seed(16017)
@SETTINGS
@given(
    s=st.integers(0, 2**31 - 1),
    rows=st.integers(1, 300),
    ch=st.integers(1, 40),
    acc_kind=st.sampled_from(["float32", "float64", "int32", "int64"]),
    big_bits=st.sampled_from([6, 12, 20, 24, 30, 40]),
    per_channel=st.booleans(),
    signed=st.booleans(),
    act=st.integers(0, 3),
    ties=st.booleans(),
)
def test_requantize_kernel_gives_the_numpy_paths_bits(
    numpy_only, monkeypatch, s, rows, ch, acc_kind, big_bits, per_channel, signed, act, ties
):
    """Accumulators of every kind the convolutions hand over (exact integers in float32 up to
    2**24, float64 and int64 beyond 2**31), per-tensor and per-channel multipliers with left
    and right shifts (and a zero one), rounding ties, both 8-bit output types."""
    from nnconform.ir import Operand
    from nnconform.ir import OperandType as T
    from nnconform.reference.arith.quant import quantize_multiplier

    print("numpy seed", s)
    rng = np.random.default_rng(s)
    if acc_kind == "float32":
        big_bits = min(big_bits, 24)
    if acc_kind == "int32":
        big_bits = min(big_bits, 30)
    big = 1 << big_bits
    acc = rng.integers(-big, big, size=(rows, ch))
    if ties:
        acc = (acc >> 5) << 5
    acc = acc.astype(acc_kind)
    bias = rng.integers(-min(big, 1 << 20), min(big, 1 << 20), size=ch).astype(np.int32)
    k = ch if per_channel else 1
    reals = rng.uniform(0.5, 1.0, k) * 300 / big * 2.0 ** rng.integers(-3, 8, k)  # > 1: left shifts
    pairs = [quantize_multiplier(float(r)) for r in reals]
    if rng.random() < 0.1:
        pairs[0] = (0, 0)  # a multiplier flushed to zero
    pairs = pairs if per_channel else pairs * ch
    mult, shift = np.array([m for m, _ in pairs]), np.array([x for _, x in pairs])
    t = T.TENSOR_QUANT8_ASYMM_SIGNED if signed else T.TENSOR_QUANT8_ASYMM
    zp = int(rng.integers(-128, 128)) if signed else int(rng.integers(0, 256))
    out = Operand(t, (), scale=0.5, zero_point=zp)
    bound = int(np.abs(acc).max())
    want = numpy_only(cc.requantize, acc, bias, mult, shift, out, act, acc_bound=bound)
    monkeypatch.setattr(jit, "MIN_ELEMENTS", 0)
    got = cc.requantize(acc, bias, mult, shift, out, act, acc_bound=bound)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
@pytest.mark.parametrize("signed", [False, True], ids=["uint8", "int8"])
def test_quant8_binary_ops_same_bytes_with_and_without_the_gather(numpy_only, op, signed):
    """A 1x64x64x24 quantised ADD/SUB/MUL (98,304 elements: the 65,536-entry table path) with
    ReLU6, every pair of input bytes present: the compiled gather gives numpy's bytes."""
    from nnconform.ir import ModelBuilder
    from nnconform.ir import OperandType as T
    from nnconform.ir import OperationType as Op
    from nnconform.reference.executor import Executor
    from nnconform.reference.kernels import lut

    t = T.TENSOR_QUANT8_ASYMM_SIGNED if signed else T.TENSOR_QUANT8_ASYMM
    dt, z = (np.int8, -3) if signed else (np.uint8, 125)
    rng = np.random.default_rng(1617)
    shape = [1, 64, 64, 24]
    b = ModelBuilder()
    x = b.input(t, shape, scale=0.04, zero_point=z)
    y = b.input(t, shape, scale=0.03, zero_point=z + 2)
    o = b.output(t, shape, scale=0.05, zero_point=z - 1)
    b.operation(getattr(Op, op), [x, y, b.i32(3)], [o])
    model = b.build()
    size = int(np.prod(shape))
    assert size >= lut.BINARY_MIN_ELEMENTS
    pairs = np.arange(65536)
    ua = np.concatenate([pairs >> 8, rng.integers(0, 256, size - 65536)]).astype(np.uint8)
    ub = np.concatenate([pairs & 255, rng.integers(0, 256, size - 65536)]).astype(np.uint8)
    feeds = [ua.view(dt).reshape(shape), ub.view(dt).reshape(shape)]
    want = numpy_only(lambda: Executor(model).run(feeds)[0])
    got = Executor(model).run(feeds)[0]
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("signed", [False, True], ids=["uint8", "int8"])
@pytest.mark.parametrize("batch", [1, 3])
def test_quant8_fully_connected_same_bytes_with_and_without_the_integer_product(numpy_only, signed, batch):
    """FULLY_CONNECTED [batch, 1024] x [300, 1024] with extreme bytes (0 and 255, the largest
    offsets from the zero points) among random ones: the compiled int32 product plus
    requantisation gives the bytes of the float32-BLAS path."""
    from nnconform.ir import ModelBuilder
    from nnconform.ir import OperandType as T
    from nnconform.ir import OperationType as Op
    from nnconform.reference.executor import Executor

    t = T.TENSOR_QUANT8_ASYMM_SIGNED if signed else T.TENSOR_QUANT8_ASYMM
    dt, xz, wz = (np.int8, 0, -1) if signed else (np.uint8, 128, 127)
    rng = np.random.default_rng(1618 + batch)
    units, size = 300, 1024
    wbytes = rng.integers(0, 256, (units, size)).astype(np.uint8)
    wbytes[0] = 0  # whole rows at the far ends of the range
    wbytes[1] = 255
    xbytes = rng.integers(0, 256, (batch, size)).astype(np.uint8)
    xbytes[0, : size // 2] = rng.choice(np.array([0, 255], np.uint8), size // 2)
    b = ModelBuilder()
    x = b.input(t, [batch, size], scale=0.02, zero_point=xz)
    w = b.const(t, [units, size], wbytes.view(dt), scale=0.01, zero_point=wz)
    bs = b.const(T.TENSOR_INT32, [units], rng.integers(-5000, 5000, units).astype(np.int32), scale=0.0002)
    y = b.output(t, [batch, units], scale=1.0, zero_point=xz + 1)
    b.operation(Op.FULLY_CONNECTED, [x, w, bs, b.i32(0)], [y])
    model = b.build()
    feed = [xbytes.view(dt)]
    want = numpy_only(lambda: Executor(model).run(feed)[0])
    got = Executor(model).run(feed)[0]
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    assert len(np.unique(got)) > 10  # not saturated: the sums themselves are compared


@pytest.mark.parametrize("dt", [np.uint8, np.int8])
def test_dot_offsets_is_the_exact_integer_product(dt):
    rng = np.random.default_rng(1619)
    x = rng.integers(0, 256, (4, 777)).astype(np.uint8).view(dt)
    w = rng.integers(0, 256, (129, 777)).astype(np.uint8).view(dt)
    xz, wz = (17, 200) if dt == np.uint8 else (-128, 127)
    want = (x.astype(np.int64) - xz) @ (w.astype(np.int64) - wz).T
    got = jit.dot_offsets(x, xz, w, wz)
    assert got.dtype == np.int32 and np.array_equal(got, want)


@seed(16017)
@SETTINGS
@given(
    s=st.integers(0, 2**31 - 1),
    rows=st.integers(1, 4),
    n=st.integers(1, 1100),
    signed=st.booleans(),
    scale=st.sampled_from([1 / 256, 0.05, 0.1, 0.5, 2.0, 0.0371]),
    beta=st.sampled_from([1.0, 0.25, 3.0, 0.0173]),
    spread=st.sampled_from([4, 40, 256]),
    axis=st.sampled_from([-1, 0]),
)
def test_quant8_softmax_kernel_gives_the_numpy_paths_bytes(
    numpy_only, monkeypatch, s, rows, n, signed, scale, beta, spread, axis
):
    """SOFTMAX on [rows, n] 8-bit codes: narrow and full spreads (differences past the
    kernel's radius give the lowest code), large and small beta * scale, the last axis and
    the first: the compiled row kernel gives the bytes of the numpy path."""
    from nnconform.ir import ModelBuilder
    from nnconform.ir import OperandType as T
    from nnconform.ir import OperationType as Op
    from nnconform.reference.executor import Executor

    print("numpy seed", s)
    rng = np.random.default_rng(s)
    t = T.TENSOR_QUANT8_ASYMM_SIGNED if signed else T.TENSOR_QUANT8_ASYMM
    dt = np.int8 if signed else np.uint8
    lo = int(rng.integers(0, 257 - spread))
    x = (rng.integers(lo, lo + spread, (rows, n)).astype(np.int64) - (128 if signed else 0)).astype(dt)
    b = ModelBuilder()
    xi = b.input(t, [rows, n], scale=scale, zero_point=0 if signed else 128)
    y = b.output(t, [rows, n], scale=1 / 256, zero_point=-128 if signed else 0)
    b.operation(Op.SOFTMAX, [xi, b.f32(beta), b.i32(axis)], [y])
    model = b.build()
    try:
        want = numpy_only(lambda: Executor(model).run([x])[0])
    except Exception as e:  # beta * scale too small for the kernel: both paths refuse
        with pytest.raises(type(e)):
            Executor(model).run([x])
        return
    monkeypatch.setattr(jit, "MIN_ELEMENTS", 0)
    got = Executor(model).run([x])[0]
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_quant8_softmax_kernel_runs_on_a_classifier_row(monkeypatch):
    """The 1x1000 row of the benchmark takes the compiled path (not a silent numpy fallback)."""
    calls = []
    real = jit.softmax_rows
    monkeypatch.setattr(jit, "softmax_rows", lambda *a, **k: calls.append(1) or real(*a, **k))
    from nnconform.ir import ModelBuilder
    from nnconform.ir import OperandType as T
    from nnconform.ir import OperationType as Op
    from nnconform.reference.executor import Executor

    b = ModelBuilder()
    xi = b.input(T.TENSOR_QUANT8_ASYMM, [1, 1000], scale=0.1, zero_point=128)
    y = b.output(T.TENSOR_QUANT8_ASYMM, [1, 1000], scale=1 / 256, zero_point=0)
    b.operation(Op.SOFTMAX, [xi, b.f32(1.0)], [y])
    x = np.random.default_rng(1620).integers(0, 256, (1, 1000)).astype(np.uint8)
    out = Executor(b.build()).run([x])[0]
    assert calls == [1]
    assert out.shape == (1, 1000) and int(out.max()) > 0


@seed(16018)
@SETTINGS
@given(
    s=st.integers(0, 2**31 - 1),
    n=st.integers(1, 2),
    h=st.integers(1, 9),
    w=st.integers(1, 9),
    oh=st.integers(1, 20),
    ow=st.integers(1, 20),
    c=st.integers(1, 17),
    kind=st.sampled_from(["float32", "float16", "uint8"]),
    flags=st.sampled_from([(False, False), (True, False), (False, True)]),
    special=st.booleans(),
)
def test_bilinear_kernel_gives_the_numpy_paths_bits(
    numpy_only, monkeypatch, s, n, h, w, oh, ow, c, kind, flags, special
):
    """RESIZE_BILINEAR up and down, align_corners / half_pixel_centers, fp32/fp16/quant8,
    signed zeros, infinities and NaN: the compiled kernel gives the numpy path's bits."""
    from nnconform.ir import ModelBuilder
    from nnconform.ir import OperandType as T
    from nnconform.ir import OperationType as Op
    from nnconform.reference.executor import Executor

    print("numpy seed", s)
    rng = np.random.default_rng(s)
    t = {"float32": T.TENSOR_FLOAT32, "float16": T.TENSOR_FLOAT16, "uint8": T.TENSOR_QUANT8_ASYMM}[kind]
    if kind == "uint8":
        x = rng.integers(0, 256, (n, h, w, c)).astype(np.uint8)
        q = dict(scale=0.1, zero_point=3)
    else:
        x = rng.standard_normal((n, h, w, c)).astype(kind)
        if special:
            flat = x.reshape(-1)
            picks = rng.integers(0, flat.size, max(1, flat.size // 5))
            flat[picks] = rng.choice(np.array([0.0, -0.0, np.inf, -np.inf, np.nan], kind), picks.size)
        q = {}
    align, half = flags
    b = ModelBuilder()
    xi = b.input(t, [n, h, w, c], **q)
    y = b.output(t, [n, oh, ow, c], **q)
    b.operation(Op.RESIZE_BILINEAR, [xi, b.i32(ow), b.i32(oh), b.bool(False), b.bool(align), b.bool(half)], [y])
    model = b.build()
    with np.errstate(all="ignore"):
        want = numpy_only(lambda: Executor(model).run([x])[0])
        monkeypatch.setattr(jit, "MIN_ELEMENTS", 0)
        got = Executor(model).run([x])[0]
    _same_output(got, want)


@seed(16019)
@SETTINGS
@given(
    s=st.integers(0, 2**31 - 1),
    n=st.integers(1, 2),
    h=st.integers(1, 12),
    w=st.integers(1, 12),
    c=st.integers(1, 19),
    fh=st.integers(1, 5),
    fw=st.integers(1, 5),
    sh=st.integers(1, 3),
    sw=st.integers(1, 3),
    pads=st.tuples(*[st.integers(0, 4)] * 4),
    act=st.sampled_from([0, 1, 2, 3]),
    nchw=st.booleans(),
    kind=st.sampled_from(["float32", "float16", "uint8", "int8"]),
    special=st.booleans(),
)
def test_average_pool_kernel_gives_the_numpy_paths_bits(
    numpy_only, monkeypatch, s, n, h, w, c, fh, fw, sh, sw, pads, act, nchw, kind, special
):
    """AVERAGE_POOL_2D with explicit padding (windows over the padding count only their taps
    on the input), strides, every fused activation, NHWC and NCHW, fp32/fp16/quant8 both
    signs, signed zeros, infinities and NaN: the compiled sums give the numpy path's bits."""
    from nnconform.ir import ModelBuilder
    from nnconform.ir import OperandType as T
    from nnconform.ir import OperationType as Op
    from nnconform.reference.arith.padding import output_size
    from nnconform.reference.executor import Executor

    print("numpy seed", s)
    rng = np.random.default_rng(s)
    # the padding on each side stays below the filter (the operation's own rule)
    pl, pr, pt, pb = (min(pads[0], fw - 1), min(pads[1], fw - 1), min(pads[2], fh - 1), min(pads[3], fh - 1))
    oh, ow = output_size(h, fh, sh, pt, pb), output_size(w, fw, sw, pl, pr)
    if oh <= 0 or ow <= 0:
        return
    t = {
        "float32": T.TENSOR_FLOAT32,
        "float16": T.TENSOR_FLOAT16,
        "uint8": T.TENSOR_QUANT8_ASYMM,
        "int8": T.TENSOR_QUANT8_ASYMM_SIGNED,
    }[kind]
    shape = [n, c, h, w] if nchw else [n, h, w, c]
    if kind in ("uint8", "int8"):
        lo = 0 if kind == "uint8" else -128
        x = rng.integers(lo, lo + 256, shape).astype(kind)
        q = dict(scale=0.07, zero_point=int(rng.integers(lo, lo + 256)))
    else:
        x = (rng.standard_normal(shape) * 4).astype(kind)
        if special:
            flat = x.reshape(-1)
            picks = rng.integers(0, flat.size, max(1, flat.size // 5))
            flat[picks] = rng.choice(np.array([0.0, -0.0, np.inf, -np.inf, np.nan], kind), picks.size)
        q = {}
    b = ModelBuilder()
    xi = b.input(t, shape, **q)
    y = b.output(t, [n, c, oh, ow] if nchw else [n, oh, ow, c], **q)
    b.operation(
        Op.AVERAGE_POOL_2D,
        [
            xi,
            b.i32(pl),
            b.i32(pr),
            b.i32(pt),
            b.i32(pb),
            b.i32(sw),
            b.i32(sh),
            b.i32(fw),
            b.i32(fh),
            b.i32(act),
            b.bool(nchw),
        ],
        [y],
    )
    model = b.build()
    with np.errstate(all="ignore"):
        want = numpy_only(lambda: Executor(model).run([x])[0])
        calls = []
        real = jit.average_pool
        monkeypatch.setattr(jit, "average_pool", lambda *a, **k: calls.append(1) or real(*a, **k))
        got = Executor(model).run([x])[0]
    assert calls == [1]
    _same_output(got, want)


@seed(16017)
@SETTINGS
@given(
    s=st.integers(0, 2**31 - 1),
    n=st.integers(1, 2),
    oh=st.integers(1, 12),
    ow=st.integers(1, 12),
    c=st.integers(1, 20),
    fh=st.integers(1, 4),
    fw=st.integers(1, 4),
    sh=st.integers(1, 3),
    sw=st.integers(1, 3),
    dh=st.integers(1, 2),
    dw=st.integers(1, 2),
    pads=st.tuples(*[st.integers(0, 3)] * 4),
    kind=st.sampled_from(["float32", "float16", "quant8"]),
)
def test_conv_patches_kernel_gives_the_numpy_paths_values(
    numpy_only, monkeypatch, s, n, oh, ow, c, fh, fw, sh, sw, dh, dw, pads, kind
):
    """CONV_2D's patch matrix, compiled from the unpadded input, holds the numpy path's bits
    (padded copy, then the strided one) for any padding, stride, dilation and zero point."""
    print("numpy seed", s)
    rng = np.random.default_rng(s)
    pt, pb, pl, pr = pads
    h = max(1, (oh - 1) * sh + (fh - 1) * dh + 1 - pt - pb)
    w = max(1, (ow - 1) * sw + (fw - 1) * dw + 1 - pl - pr)
    pb = (oh - 1) * sh + (fh - 1) * dh + 1 - pt - h  # the padding that gives exactly oh x ow
    pr = (ow - 1) * sw + (fw - 1) * dw + 1 - pl - w
    if pb < 0 or pr < 0:
        return
    p = dataclasses.replace(_params(sh, sw, dh, dw), pad_top=pt, pad_bottom=pb, pad_left=pl, pad_right=pr)
    if kind == "quant8":
        x = rng.integers(0, 256, (n, h, w, c), dtype=np.uint8)
        zp, dtype = int(rng.integers(0, 256)), np.float32
    else:
        x = rng.standard_normal((n, h, w, c)).astype(kind)
        x.reshape(-1)[rng.integers(0, x.size, max(1, x.size // 10))] = -0.0
        zp, dtype = 0, np.float32
    want = numpy_only(cc.conv_patches, x, p, zp, dtype, fh, fw, oh, ow)
    got = cc.conv_patches(x, p, zp, dtype, fh, fw, oh, ow)
    _same_bits(got, want)
