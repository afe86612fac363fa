"""The torch adapter (drivers/torch): conversions computing right eagerly and through
torch.compile, honesty about support, NNAPI statuses for invalid input, and the generated
suite end to end.  Skipped when the optional extra (torch) is missing."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch", reason="torch driver needs the 'torch' extra: pip install nnconform[torch]")

import adapter_checks
from adapter_checks import generated_suite, run

from nnconform.driver import DriverError, ErrorStatus
from nnconform.driver.loader import load_driver
from nnconform.drivers.torch import TorchCompileDevice, TorchDevice
from nnconform.ir import ChannelQuant, ModelBuilder, Request
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


@pytest.fixture(scope="module", params=["eager", "compiled"])
def device(request):
    return TorchDevice() if request.param == "eager" else TorchCompileDevice()


def test_registered_entry_points_load():
    eager, compiled = load_driver("torch"), load_driver("torch-compile")
    assert isinstance(eager, TorchDevice) and not eager.compiled and eager.name == "pytorch-eager"
    assert isinstance(compiled, TorchCompileDevice) and compiled.compiled and compiled.name == "pytorch-inductor"


def test_quant8_per_channel_conv_is_exact_integer_arithmetic(device):
    b = ModelBuilder()
    x = b.input(T.TENSOR_QUANT8_ASYMM, [1, 1, 1, 2], scale=0.5, zero_point=128)
    y = b.output(T.TENSOR_QUANT8_ASYMM, [1, 1, 1, 2], scale=1.0, zero_point=100)
    f = b.const(T.TENSOR_QUANT8_SYMM_PER_CHANNEL, [2, 1, 1, 2], [1, 2, 3, 4], channel_quant=ChannelQuant((0.5, 1.0), 0))
    bias = b.const(T.TENSOR_INT32, [2], [4, 0])
    b.operation(Op.CONV_2D, [x, f, bias, b.i32(2), b.i32(1), b.i32(1), b.i32(0)], [y])
    # reals: x = (4, 8) * 0.5 = (2, 4); filter ch0 = (0.5, 1.0), ch1 = (3, 4); bias0 = 4 * 0.25 = 1
    # out0 = 1 + 2 * 0.5 + 4 * 1 = 6, out1 = 2 * 3 + 4 * 4 = 22 -> stored 106, 122.
    out = run(device, b.build(), np.array([[[[132, 136]]]], np.uint8)).outputs[0]
    np.testing.assert_array_equal(out.reshape(-1), [106, 122])


def test_quant8_add_and_mul_match_the_reference_bit_for_bit(device):
    """Every pair of stored values through the fixed-point kernels, against the reference."""
    a = np.repeat(np.arange(256, dtype=np.uint8), 256)
    bv = np.tile(np.arange(256, dtype=np.uint8), 256)
    for op, act in ((Op.ADD, 0), (Op.SUB, 1), (Op.MUL, 3)):
        b = ModelBuilder()
        x1 = b.input(T.TENSOR_QUANT8_ASYMM, [a.size], scale=0.05, zero_point=120)
        x2 = b.input(T.TENSOR_QUANT8_ASYMM, [a.size], scale=0.07, zero_point=3)
        y = b.output(T.TENSOR_QUANT8_ASYMM, [a.size], scale=0.11 if op != Op.MUL else 1.3, zero_point=77)
        b.operation(op, [x1, x2, b.i32(act)], [y])
        model = b.build()
        want = execute(model, [a, bv])[0]
        np.testing.assert_array_equal(run(device, model, a, bv).outputs[0], want, err_msg=op.name)


def test_quant8_average_pool_rounds_half_away_like_the_reference(device):
    rng = np.random.default_rng(77)
    print("seed", 77)
    for t, zp in ((T.TENSOR_QUANT8_ASYMM, 10), (T.TENSOR_QUANT8_ASYMM_SIGNED, -3)):
        b = ModelBuilder()
        x = b.input(t, [2, 5, 4, 3], scale=0.25, zero_point=zp)
        y = b.output(t, [2, 5, 4, 3], scale=0.25, zero_point=zp)
        b.operation(Op.AVERAGE_POOL_2D, [x, b.i32(1), b.i32(1), b.i32(1), b.i32(3), b.i32(2), b.i32(1)], [y])
        model = b.build()
        info = np.iinfo(np.uint8 if t == T.TENSOR_QUANT8_ASYMM else np.int8)
        xv = rng.integers(info.min, info.max + 1, (2, 5, 4, 3)).astype(info.dtype)
        np.testing.assert_array_equal(run(device, model, xv).outputs[0], execute(model, [xv])[0])


def test_while_runs_its_body_and_stops_at_the_loop_timeout(device):
    from nnconform.suites.examples import control_flow as cfx

    model = cfx.while_rnn_accumulate()
    inputs = [np.array([[1, 3]], np.float32), np.array([3], np.int32)]
    want = execute(model, inputs)
    got = run(device, model, *inputs).outputs
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g, w)
    prepared = device.prepare(cfx.while_flag_loop())
    with pytest.raises(DriverError) as e:
        prepared.execute(Request.from_arrays(prepared.model, [np.array([True])]), loop_timeout=0.05)
    assert e.value.status == ErrorStatus.MISSED_DEADLINE_TRANSIENT


def test_quant8_transpose_conv_matches_the_reference_bit_for_bit(device):
    rng = np.random.default_rng(91)
    print("seed", 91)
    b = ModelBuilder()
    x = b.input(T.TENSOR_QUANT8_ASYMM_SIGNED, [1, 3, 3, 2], scale=0.5, zero_point=-4)
    y = b.output(T.TENSOR_QUANT8_ASYMM_SIGNED, [1, 5, 8, 3], scale=0.7, zero_point=5)
    f = b.const(
        T.TENSOR_QUANT8_SYMM_PER_CHANNEL,
        [3, 2, 3, 2],
        rng.integers(-128, 128, 36),
        channel_quant=ChannelQuant((0.25, 0.5, 0.125), 0),
    )
    bias = b.const(T.TENSOR_INT32, [3], rng.integers(-300, 300, 3))
    # explicit paddings left 0, right -1 (the output grows), top 1, bottom 0; strides 2, 2
    b.operation(Op.TRANSPOSE_CONV_2D, [x, f, bias, *(b.i32(v) for v in (0, -1, 1, 0, 2, 2, 1)), b.bool(False)], [y])
    model = b.build()
    xv = rng.integers(-128, 128, (1, 3, 3, 2)).astype(np.int8)
    np.testing.assert_array_equal(run(device, model, xv).outputs[0], execute(model, [xv])[0])


def test_quant8_l2_normalization_matches_the_reference_bit_for_bit(device):
    rng = np.random.default_rng(5)
    print("seed", 5)
    for t, dt, zp, axis in (
        (T.TENSOR_QUANT8_ASYMM, np.uint8, 128, 0),
        (T.TENSOR_QUANT8_ASYMM_SIGNED, np.int8, 0, -1),
        (T.TENSOR_QUANT8_ASYMM_SIGNED, np.int8, 0, 1),
    ):
        b = ModelBuilder()
        x = b.input(t, [3, 40], scale=0.1, zero_point=zp - 3)
        y = b.output(t, [3, 40], scale=1 / 128, zero_point=zp)
        b.operation(Op.L2_NORMALIZATION, [x, b.i32(axis)], [y])
        model = b.build()
        info = np.iinfo(dt)
        xv = rng.integers(info.min, info.max + 1, (3, 40)).astype(dt)
        xv[1] = zp - 3  # an all-zero slice: logical zero out
        np.testing.assert_array_equal(
            run(device, model, xv).outputs[0], execute(model, [xv])[0], err_msg=f"{t.name} axis {axis}"
        )


def test_int32_div_floors_and_zero_divisor_gives_zero(device):
    b = ModelBuilder()
    a_, d_ = b.input(T.TENSOR_INT32, [4]), b.input(T.TENSOR_INT32, [4])
    y = b.output(T.TENSOR_INT32, [4])
    b.operation(Op.DIV, [a_, d_, b.i32(0)], [y])
    out = run(device, b.build(), np.array([-5, 5, 7, 3], np.int32), np.array([2, -2, 0, 3], np.int32))
    np.testing.assert_array_equal(out.outputs[0], [-3, -3, 0, 1])


def test_argmax_keeps_a_leading_nan_and_skips_later_ones(device):
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [2, 3])
    y = b.output(T.TENSOR_INT32, [2])
    b.operation(Op.ARGMAX, [x, b.i32(1)], [y])
    out = run(device, b.build(), np.array([[np.nan, 5, 7], [1, np.nan, 0]], np.float32))
    np.testing.assert_array_equal(out.outputs[0], [0, 0])


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
    # Quantised SOFTMAX (NNAPI's fixed-point exp) is not reproduced; a run-time activation is
    # no conversion-time parameter; quantised CONCATENATION with requantisation is not exact.
    b = ModelBuilder()
    x = b.input(T.TENSOR_QUANT8_ASYMM, [1, 4], scale=0.5, zero_point=0)
    y = b.output(T.TENSOR_QUANT8_ASYMM, [1, 4], scale=1 / 256, zero_point=0)
    b.operation(Op.SOFTMAX, [x, b.f32(1.0)], [y])
    assert device.supported_operations(b.build()) == [False]
    b = ModelBuilder()
    x, act = b.input(T.TENSOR_FLOAT32, [2]), b.input(T.INT32)
    y = b.output(T.TENSOR_FLOAT32, [2])
    b.operation(Op.ADD, [x, x, act], [y])
    assert device.supported_operations(b.build()) == [False]
    b = ModelBuilder()
    x1 = b.input(T.TENSOR_QUANT8_ASYMM, [2], scale=0.5, zero_point=0)
    x2 = b.input(T.TENSOR_QUANT8_ASYMM, [2], scale=0.25, zero_point=0)
    y = b.output(T.TENSOR_QUANT8_ASYMM, [4], scale=0.5, zero_point=0)
    b.operation(Op.CONCATENATION, [x1, x2, b.i32(0)], [y])
    assert device.supported_operations(b.build()) == [False]


def test_run_case_skips_unsupported_and_passes_supported(device):
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT16, [3])
    y = b.output(T.TENSOR_FLOAT16, [3])
    b.operation(Op.LOGISTIC, [x], [y])
    xs = np.array([-1, 0, 2], np.float16)
    want = (1 / (1 + np.exp(-xs.astype(np.float64)))).astype(np.float16)
    assert run_case(device, b.build(), [xs], [want]).outcome == PASS
    b = ModelBuilder()  # quantised LOGISTIC (a fixed-point kernel) is not converted (float is)
    x = b.input(T.TENSOR_QUANT8_ASYMM, [4], scale=0.5, zero_point=0)
    y = b.output(T.TENSOR_QUANT8_ASYMM, [4], scale=1 / 256, zero_point=0)
    b.operation(Op.LOGISTIC, [x], [y])
    assert run_case(device, b.build(), [np.zeros(4, np.uint8)], [np.full(4, 128, np.uint8)]).outcome == SKIP


def test_quant8_resize_bilinear_matches_the_reference_bit_for_bit(device):
    rng = np.random.default_rng(23)
    print("seed", 23)
    for t, dt in ((T.TENSOR_QUANT8_ASYMM, np.uint8), (T.TENSOR_QUANT8_ASYMM_SIGNED, np.int8)):
        for mode in range(3):  # plain, align_corners, half_pixel_centers
            b = ModelBuilder()
            x = b.input(t, [1, 3, 4, 2], scale=0.5, zero_point=1)
            y = b.output(t, [1, 7, 5, 2], scale=0.5, zero_point=1)
            b.operation(
                Op.RESIZE_BILINEAR, [x, b.i32(5), b.i32(7), b.bool(False), b.bool(mode == 1), b.bool(mode == 2)], [y]
            )
            model = b.build()
            info = np.iinfo(dt)
            xv = rng.integers(info.min, info.max + 1, (1, 3, 4, 2)).astype(dt)
            np.testing.assert_array_equal(
                run(device, model, xv).outputs[0], execute(model, [xv])[0], err_msg=f"{t.name} mode {mode}"
            )


def test_compiled_device_compiles_in_prepare_and_execute_only_runs():
    """The compiled plan is warmed in prepare: executing the same shapes again adds no frame
    compilation (dynamo's counter of compiled frames stays put)."""
    from torch._dynamo.utils import counters

    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [2, 2])
    y = b.output(T.TENSOR_FLOAT32, [2, 2])
    b.operation(Op.MUL, [x, x, b.i32(0)], [y])
    model = b.build()
    before = counters["stats"]["unique_graphs"]
    prepared = TorchCompileDevice().prepare(model)
    after_prepare = counters["stats"]["unique_graphs"]
    assert after_prepare > before, "prepare did not compile the plan"
    res = prepared.execute(Request.from_arrays(model, [np.full((2, 2), 3, np.float32)]))
    np.testing.assert_array_equal(res.outputs[0], np.full((2, 2), 9, np.float32))
    assert counters["stats"]["unique_graphs"] == after_prepare, "execute compiled again"


def test_generated_suite_passes_against_torch_eager(tmp_path):
    generated_suite(
        [
            "nnconform",
            "run",
            "--driver",
            "torch",
            "--suite",
            "generated",
            "--seed",
            "11",
            "--report-dir",
            str(tmp_path / "report"),
        ],
        min_pass=400,
    )
