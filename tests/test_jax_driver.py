"""The JAX adapter (drivers/jax): conversion, honesty about support, NNAPI error statuses and a
slice of the generated suite end to end.  Skipped when the optional extra (jax) is missing."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("jax", reason="jax driver needs the 'jax' extra: pip install nnconform[jax]")

import adapter_checks
from adapter_checks import generated_suite, run

from nnconform.driver import DriverError, ErrorStatus
from nnconform.driver.loader import load_driver
from nnconform.drivers.jax import JaxDevice
from nnconform.ir import ModelBuilder, Request
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.executor import execute
from nnconform.verdict.runner import PASS, SKIP, run_case

# The checks every adapter shares, collected here and run with this file's device.
test_add_with_fused_relu6_and_broadcast = adapter_checks.test_add_with_fused_relu6_and_broadcast
test_conv_2d_nhwc_same_padding_matches_hand_computation = (
    adapter_checks.test_conv_2d_nhwc_same_padding_matches_hand_computation
)
test_invalid_model_is_invalid_argument = adapter_checks.test_invalid_model_is_invalid_argument
test_invalid_request_is_invalid_argument_and_small_buffers_insufficient = (
    adapter_checks.test_invalid_request_is_invalid_argument_and_small_buffers_insufficient
)


@pytest.fixture(scope="module")
def device() -> JaxDevice:
    return JaxDevice()


def test_registered_entry_point_loads():
    dev = load_driver("jax")
    assert isinstance(dev, JaxDevice)
    assert dev.name == "jax-xla_cpu"  # NNAPI's "<vendor>-<device>" (vts/device/basics)


def test_convolutions_and_pooling_match_the_reference_in_both_layouts(device):
    """Depthwise (multiplier 2), dilated and strided CONV_2D, TRANSPOSE_CONV_2D and the three
    poolings, NHWC and NCHW, against the reference executor with the default criteria."""
    rng = np.random.default_rng(2718)
    print("seed", 2718)
    for nchw in (False, True):

        def img(shape):
            n, h, w, ch = shape
            return [n, ch, h, w] if nchw else [n, h, w, ch]

        cases = []
        b = ModelBuilder()  # depthwise, explicit padding, stride 2, multiplier 2
        x = b.input(T.TENSOR_FLOAT32, img([1, 5, 6, 3]))
        y = b.output(T.TENSOR_FLOAT32, img([1, 3, 3, 6]))
        f = b.const(T.TENSOR_FLOAT32, [1, 3, 3, 6], rng.normal(size=54))
        bias = b.const(T.TENSOR_FLOAT32, [6], rng.normal(size=6))
        b.operation(
            Op.DEPTHWISE_CONV_2D, [x, f, bias, *[b.i32(v) for v in (1, 1, 1, 1, 2, 2, 2, 0)], b.bool(nchw)], [y]
        )
        cases.append((b.build(), img([1, 5, 6, 3])))
        b = ModelBuilder()  # dilated CONV_2D, SAME
        x = b.input(T.TENSOR_FLOAT32, img([2, 7, 7, 2]))
        y = b.output(T.TENSOR_FLOAT32, img([2, 7, 7, 4]))
        f = b.const(T.TENSOR_FLOAT32, [4, 3, 3, 2], rng.normal(size=72))
        bias = b.const(T.TENSOR_FLOAT32, [4], rng.normal(size=4))
        b.operation(
            Op.CONV_2D, [x, f, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.bool(nchw), b.i32(2), b.i32(2)], [y]
        )
        cases.append((b.build(), img([2, 7, 7, 2])))
        b = ModelBuilder()  # TRANSPOSE_CONV_2D, explicit padding, stride 2
        x = b.input(T.TENSOR_FLOAT32, img([1, 3, 3, 2]))
        y = b.output(T.TENSOR_FLOAT32, img([1, 6, 6, 3]))
        f = b.const(T.TENSOR_FLOAT32, [3, 3, 3, 2], rng.normal(size=54))
        bias = b.const(T.TENSOR_FLOAT32, [3], rng.normal(size=3))
        b.operation(Op.TRANSPOSE_CONV_2D, [x, f, bias, *[b.i32(v) for v in (0, 1, 0, 1, 2, 2, 0)], b.bool(nchw)], [y])
        cases.append((b.build(), img([1, 3, 3, 2])))
        for op in (Op.AVERAGE_POOL_2D, Op.MAX_POOL_2D, Op.L2_POOL_2D):
            b = ModelBuilder()  # SAME, stride 2, 3x3 window: edge windows are partly padding
            x = b.input(T.TENSOR_FLOAT32, img([1, 5, 4, 2]))
            y = b.output(T.TENSOR_FLOAT32, img([1, 3, 2, 2]))
            b.operation(op, [x, *[b.i32(v) for v in (1, 2, 2, 3, 3, 1)], b.bool(nchw)], [y])
            cases.append((b.build(), img([1, 5, 4, 2])))
        for model, shape in cases:
            xv = rng.uniform(-3, 3, shape).astype(np.float32)
            out = run_case(device, model, [xv], execute(model, [xv]))
            assert out.outcome == PASS, f"{model.main.operations[0].name} nchw={nchw}: {out.message}"


def test_int32_div_floors_and_zero_divisor_gives_zero(device):
    b = ModelBuilder()
    a_, d_ = b.input(T.TENSOR_INT32, [4]), b.input(T.TENSOR_INT32, [4])
    y = b.output(T.TENSOR_INT32, [4])
    b.operation(Op.DIV, [a_, d_, b.i32(0)], [y])
    out = run(device, b.build(), np.array([-5, 5, 7, 3], np.int32), np.array([2, -2, 0, 3], np.int32))
    np.testing.assert_array_equal(out.outputs[0], [-3, -3, 0, 1])


def test_argmin_argmax_see_denormals_and_skip_nan_like_the_reference(device):
    # XLA CPU reads -1e-40 as -0 (a tie, index 0); NNAPI's strict scan finds it smaller.
    for op, rows, want in (
        (Op.ARGMIN, [[-0.0, -1e-40], [np.nan, -5.0], [3.0, np.nan]], [1, 0, 0]),
        (Op.ARGMAX, [[1e-40, 0.0], [1.0, np.nan], [-np.inf, np.nan]], [0, 0, 0]),
    ):
        b = ModelBuilder()
        x = b.input(T.TENSOR_FLOAT32, [3, 2])
        y = b.output(T.TENSOR_INT32, [3])
        b.operation(op, [x, b.i32(1)], [y])
        model = b.build()
        xs = np.array(rows, np.float32)
        np.testing.assert_array_equal(execute(model, [xs])[0], want)
        np.testing.assert_array_equal(run(device, model, xs).outputs[0], want)


def test_quantize_rounds_half_away_and_saturates_nan_to_qmax(device):
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [6])
    y = b.output(T.TENSOR_QUANT8_ASYMM, [6], scale=0.5, zero_point=10)
    b.operation(Op.QUANTIZE, [x], [y])
    xs = np.array([0.25, -0.25, 1e9, -1e9, np.nan, 0.75], np.float32)
    out = run(device, b.build(), xs).outputs[0]
    np.testing.assert_array_equal(out, [11, 9, 255, 0, 255, 12])


def test_quantised_kernels_match_the_reference_bit_for_bit(device):
    """ADD and MUL with differing scales, a per-channel CONV_2D, FULLY_CONNECTED, average
    pooling and a requantising CONCATENATION, uint8 and int8: exact (atol 0) against the
    reference's gemmlowp arithmetic over every stored input value."""
    from nnconform.ir import ChannelQuant

    rng = np.random.default_rng(31337)
    print("seed", 31337)
    for t, dt in ((T.TENSOR_QUANT8_ASYMM, np.uint8), (T.TENSOR_QUANT8_ASYMM_SIGNED, np.int8)):
        lo, hi = np.iinfo(dt).min, np.iinfo(dt).max
        zp = 0 if dt == np.int8 else 128
        models = []
        for op in (Op.ADD, Op.SUB, Op.MUL):
            b = ModelBuilder()
            x1 = b.input(t, [2, 128], scale=0.07, zero_point=zp + 3)
            x2 = b.input(t, [128], scale=0.031, zero_point=zp - 5)
            y = b.output(t, [2, 128], scale=0.09 if op != Op.MUL else 0.4, zero_point=zp + 1)
            b.operation(op, [x1, x2, b.i32(1)], [y])
            models.append((b.build(), [[2, 128], [128]]))
        b = ModelBuilder()
        x = b.input(t, [1, 4, 5, 3], scale=0.05, zero_point=zp - 7)
        y = b.output(t, [1, 4, 5, 2], scale=0.2, zero_point=zp + 4)
        f = b.const(
            T.TENSOR_QUANT8_SYMM_PER_CHANNEL,
            [2, 3, 3, 3],
            rng.integers(-127, 128, 54),
            channel_quant=ChannelQuant((0.02, 0.007), 0),
        )
        bias = b.const(T.TENSOR_INT32, [2], [300, -1200])
        b.operation(Op.CONV_2D, [x, f, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(3)], [y])
        models.append((b.build(), [[1, 4, 5, 3]]))
        b = ModelBuilder()  # TRANSPOSE_CONV_2D, per-channel filter, stride 2, NCHW
        x = b.input(t, [1, 3, 3, 3], scale=0.05, zero_point=zp + 1)
        y = b.output(t, [1, 2, 6, 6], scale=0.1, zero_point=zp - 3)
        f = b.const(
            T.TENSOR_QUANT8_SYMM_PER_CHANNEL,
            [2, 3, 3, 3],
            rng.integers(-127, 128, 54),
            channel_quant=ChannelQuant((0.03, 0.011), 0),
        )
        bias = b.const(T.TENSOR_INT32, [2], [-50, 700])
        b.operation(Op.TRANSPOSE_CONV_2D, [x, f, bias, *[b.i32(v) for v in (0, 1, 0, 1, 2, 2, 1)], b.bool(True)], [y])
        models.append((b.build(), [[1, 3, 3, 3]]))
        b = ModelBuilder()
        x = b.input(t, [3, 6], scale=0.1, zero_point=zp)
        y = b.output(t, [3, 4], scale=0.3, zero_point=zp - 2)
        w = b.const(t, [4, 6], rng.integers(lo, hi + 1, 24), scale=0.05, zero_point=zp + 2)
        bias = b.const(T.TENSOR_INT32, [4], [10, -20, 30, 0], scale=0.005)
        b.operation(Op.FULLY_CONNECTED, [x, w, bias, b.i32(0)], [y])
        models.append((b.build(), [[3, 6]]))
        b = ModelBuilder()
        x = b.input(t, [1, 5, 5, 2], scale=0.1, zero_point=zp)
        y = b.output(t, [1, 3, 3, 2], scale=0.1, zero_point=zp)
        b.operation(Op.AVERAGE_POOL_2D, [x, *[b.i32(v) for v in (1, 2, 2, 3, 3, 0)]], [y])
        models.append((b.build(), [[1, 5, 5, 2]]))
        b = ModelBuilder()
        x1 = b.input(t, [2, 3], scale=0.1, zero_point=zp)
        x2 = b.input(t, [2, 5], scale=0.37, zero_point=zp + 9)
        y = b.output(t, [2, 8], scale=0.2, zero_point=zp - 1)
        b.operation(Op.CONCATENATION, [x1, x2, b.i32(1)], [y])
        models.append((b.build(), [[2, 3], [2, 5]]))
        for model, shapes in models:
            xs = [rng.integers(lo, hi + 1, s).astype(dt) for s in shapes]
            want = execute(model, xs)
            got = run(device, model, *xs).outputs
            np.testing.assert_array_equal(got[0], want[0], err_msg=f"{model.main.operations[0].name} {t.name}")


def test_unknown_input_dimensions_compile_per_request_shape(device):
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [0, 2])
    y = b.output(T.TENSOR_FLOAT32, [0, 2])
    b.operation(Op.RELU, [x], [y])
    model = b.build()
    prepared = device.prepare(model)
    for rows in (1, 3):
        xs = np.linspace(-1, 1, rows * 2, dtype=np.float32).reshape(rows, 2)
        res = prepared.execute(Request.from_arrays(model, [xs]))
        np.testing.assert_array_equal(res.outputs[0], np.maximum(xs, 0))
        assert res.output_shapes[0].dimensions == (rows, 2)


def test_unmappable_operations_are_reported_unsupported(device):
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [1, 4])
    h = b.temp(T.TENSOR_FLOAT32, [1, 4])
    y = b.output(T.TENSOR_FLOAT32, [1, 2])
    b.operation(Op.RELU, [x], [h])
    b.operation(Op.TOPK_V2, [h, b.i32(2)], [y, b.output(T.TENSOR_INT32, [1, 2])])
    model = b.build()
    assert device.supported_operations(model) == [True, False]
    reasons = device.unsupported_reasons(model)
    assert reasons[0] == "" and "TOPK_V2" in reasons[1]
    with pytest.raises(DriverError) as e:
        device.prepare(model)
    assert e.value.status == ErrorStatus.GENERAL_FAILURE


def test_unfaithful_type_or_parameter_is_unsupported(device):
    # A run-time activation is no trace-time constant; GATHER with run-time indices would be
    # clamped by XLA where NNAPI fails.
    b = ModelBuilder()
    x, act = b.input(T.TENSOR_FLOAT32, [2]), b.input(T.INT32)
    y = b.output(T.TENSOR_FLOAT32, [2])
    b.operation(Op.ADD, [x, x, act], [y])
    assert device.supported_operations(b.build()) == [False]
    b = ModelBuilder()
    x, idx = b.input(T.TENSOR_FLOAT32, [3]), b.input(T.TENSOR_INT32, [2])
    y = b.output(T.TENSOR_FLOAT32, [2])
    b.operation(Op.GATHER, [x, b.i32(0), idx], [y])
    assert device.supported_operations(b.build()) == [False]


def test_run_case_skips_unsupported_and_passes_supported(device):
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT16, [3])
    y = b.output(T.TENSOR_FLOAT16, [3])
    b.operation(Op.LOGISTIC, [x], [y])
    xs = np.array([-1, 0, 2], np.float16)
    want = (1 / (1 + np.exp(-xs.astype(np.float64)))).astype(np.float16)
    assert run_case(device, b.build(), [xs], [want]).outcome == PASS
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [1, 4])
    y = b.output(T.TENSOR_FLOAT32, [1, 2])
    b.operation(Op.TOPK_V2, [x, b.i32(2)], [y, b.output(T.TENSOR_INT32, [1, 2])])
    xs = np.array([[1, 4, 2, 3]], np.float32)
    assert run_case(device, b.build(), [xs], execute(b.build(), [xs])).outcome == SKIP


def test_generated_suite_slice_passes_through_the_cli(tmp_path):
    """A slice of the generated suite (convolutions, pooling, arithmetic, data movement) through
    `nnconform run`; the whole suite is docs/findings_jax.md's run."""
    generated_suite(
        [
            "nnconform",
            "run",
            "--driver",
            "jax",
            "--suite",
            "generated",
            "--report-dir",
            str(tmp_path / "report"),
            "--",
            "-k",
            "conv_2d and fp32 or pool and fp32 or add_ or strided_slice",
        ],
        min_pass=19,
    )
