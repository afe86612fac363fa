"""The OpenVINO adapter (drivers/openvino): conversion, honesty about support, NNAPI error
statuses, and the generated suite end to end.  Skipped when the optional extra is missing."""

from __future__ import annotations

import numpy as np
import pytest

# the adapter first: it keeps openvino's import-time telemetry from running in this process too
pytest.importorskip(
    "nnconform.drivers.openvino", reason="openvino driver needs the 'openvino' extra: pip install nnconform[openvino]"
)

import adapter_checks
from adapter_checks import generated_suite, run

from nnconform.driver import DriverError, ErrorStatus
from nnconform.driver.loader import load_driver
from nnconform.drivers.openvino import OpenVinoDevice
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
def device() -> OpenVinoDevice:
    return OpenVinoDevice()


def test_registered_entry_point_loads_with_f32_precision():
    dev = load_driver("openvino")
    assert isinstance(dev, OpenVinoDevice)
    assert dev.device == "CPU" and dev.name == "openvino-cpu" and "+ov" in dev.version
    assert dev._config()["INFERENCE_PRECISION_HINT"] == "f32"


def test_convolutions_and_pools_match_the_reference(device):
    """NHWC and NCHW, explicit and implicit padding, strides, dilation, depthwise multiplier:
    the same answer as the reference (float32 criteria) for each."""
    rng = np.random.default_rng(2411)
    print("seed", 2411)
    for nchw in (False, True):
        shape = [1, 3, 5, 6] if nchw else [1, 5, 6, 3]
        cases = []
        b = ModelBuilder()  # CONV_2D explicit padding, stride 2x1, dilation 2
        x = b.input(T.TENSOR_FLOAT32, shape)
        f = b.const(T.TENSOR_FLOAT32, [4, 2, 2, 3], rng.uniform(-1, 1, 48))
        out_hw = (5 + 1 + 0 - 3) // 1 + 1, (6 + 1 + 1 - 3) // 2 + 1
        y = b.output(T.TENSOR_FLOAT32, [1, 4, *out_hw] if nchw else [1, *out_hw, 4])
        b.operation(
            Op.CONV_2D,
            [
                x,
                f,
                b.const(T.TENSOR_FLOAT32, [4], rng.uniform(-1, 1, 4)),
                b.i32(1),
                b.i32(1),
                b.i32(1),
                b.i32(0),
                b.i32(2),
                b.i32(1),
                b.i32(1),
                b.bool(nchw),
                b.i32(2),
                b.i32(2),
            ],
            [y],
        )
        cases.append(b.build())
        b = ModelBuilder()  # DEPTHWISE_CONV_2D SAME, multiplier 2, RELU6
        x = b.input(T.TENSOR_FLOAT32, shape)
        f = b.const(T.TENSOR_FLOAT32, [1, 3, 3, 6], rng.uniform(-1, 1, 54))
        y = b.output(T.TENSOR_FLOAT32, [1, 6, 5, 6] if nchw else [1, 5, 6, 6])
        b.operation(
            Op.DEPTHWISE_CONV_2D,
            [
                x,
                f,
                b.const(T.TENSOR_FLOAT32, [6], np.zeros(6)),
                b.i32(1),
                b.i32(1),
                b.i32(1),
                b.i32(2),
                b.i32(3),
                b.bool(nchw),
            ],
            [y],
        )
        cases.append(b.build())
        for op in (Op.AVERAGE_POOL_2D, Op.MAX_POOL_2D, Op.L2_POOL_2D):  # SAME 3x3, stride 2
            b = ModelBuilder()
            x = b.input(T.TENSOR_FLOAT32, shape)
            y = b.output(T.TENSOR_FLOAT32, [1, 3, 3, 3] if nchw else [1, 3, 3, 3])
            b.operation(op, [x, b.i32(1), b.i32(2), b.i32(2), b.i32(3), b.i32(3), b.i32(0), b.bool(nchw)], [y])
            cases.append(b.build())
        for model in cases:
            xv = rng.uniform(0, 4, shape).astype(np.float32)
            out = run_case(device, model, [xv], execute(model, [xv]))
            assert out.outcome == PASS, f"{model.main.operations[0].name} nchw={nchw}: {out.message}"


def test_int32_comparisons_are_exact_beyond_float_precision(device):
    # The plugin's own int32 Less/Equal run in float32; the adapter's min/subtract forms do not.
    a = np.array([16777217, 2**31 - 1, -(2**31), 5], np.int32)
    c = np.array([16777216, 2**31 - 2, -(2**31) + 1, 5], np.int32)
    for op, want in ((Op.EQUAL, a == c), (Op.LESS, a < c), (Op.GREATER_EQUAL, a >= c), (Op.NOT_EQUAL, a != c)):
        b = ModelBuilder()
        x, z = b.input(T.TENSOR_INT32, [4]), b.input(T.TENSOR_INT32, [4])
        y = b.output(T.TENSOR_BOOL8, [4])
        b.operation(op, [x, z], [y])
        assert run(device, b.build(), a, c).outputs[0].tolist() == want.tolist(), op.name


def test_int32_div_is_unsupported_float_div_runs(device):
    # The CPU plugin's int32 Divide truncates and divides in float (docs/findings_openvino.md).
    for t, dt in ((T.TENSOR_INT32, np.int32), (T.TENSOR_FLOAT32, np.float32)):
        b = ModelBuilder()
        a_, d_ = b.input(t, [3]), b.input(t, [3])
        y = b.output(t, [3])
        b.operation(Op.DIV, [a_, d_, b.i32(0)], [y])
        model = b.build()
        assert device.supported_operations(model) == [t == T.TENSOR_FLOAT32]
    out = run(device, model, np.array([-5, 1, 7], dt), np.array([2, 4, -2], dt)).outputs[0]
    np.testing.assert_array_equal(out, [-2.5, 0.25, -3.5])


def test_quant_relu_clamps_stored_values_and_quantize_is_unsupported(device):
    b = ModelBuilder()
    x = b.input(T.TENSOR_QUANT8_ASYMM, [4], scale=0.5, zero_point=10)
    y = b.output(T.TENSOR_QUANT8_ASYMM, [4], scale=0.5, zero_point=10)
    b.operation(Op.RELU6, [x], [y])
    # real bounds 0 and 6 -> stored 10 and 22
    np.testing.assert_array_equal(
        run(device, b.build(), np.array([0, 15, 30, 255], np.uint8)).outputs[0], [10, 15, 22, 22]
    )
    # QUANTIZE: x / scale becomes x * (1 / scale) in the plugin, off by one at .5 ties.
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [6])
    y = b.output(T.TENSOR_QUANT8_ASYMM, [6], scale=0.3, zero_point=10)
    b.operation(Op.QUANTIZE, [x], [y])
    assert device.supported_operations(b.build()) == [False]


def test_argmax_keeps_the_first_of_ties_and_bool_ops(device):
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [2, 4])
    y = b.output(T.TENSOR_INT32, [2])
    b.operation(Op.ARGMAX, [x, b.i32(1)], [y])
    out = run(device, b.build(), np.array([[1, 3, 3, 0], [5, 5, 5, 5]], np.float32)).outputs[0]
    np.testing.assert_array_equal(out, [1, 0])
    b = ModelBuilder()
    p, q = b.input(T.TENSOR_BOOL8, [3]), b.input(T.TENSOR_BOOL8, [3])
    y = b.output(T.TENSOR_BOOL8, [3])
    b.operation(Op.GREATER, [p, q], [y])
    out = run(device, b.build(), np.array([1, 0, 1], bool), np.array([0, 1, 1], bool)).outputs[0]
    assert out.dtype == np.bool_ and out.tolist() == [True, False, False]


def test_unmappable_operations_are_reported_unsupported(device):
    b = ModelBuilder()
    x = b.input(T.TENSOR_INT32, [1, 4])
    h = b.temp(T.TENSOR_INT32, [1, 4])
    y = b.output(T.TENSOR_INT32, [1, 4])
    b.operation(Op.ADD, [x, x, b.i32(0)], [h])
    b.operation(Op.DIV, [h, x, b.i32(0)], [y])
    b.operation(
        Op.HASHTABLE_LOOKUP,
        [b.input(T.TENSOR_INT32, [2]), b.input(T.TENSOR_INT32, [3]), b.input(T.TENSOR_FLOAT32, [3, 2])],
        [b.output(T.TENSOR_FLOAT32, [2, 2]), b.output(T.TENSOR_QUANT8_ASYMM, [2], scale=1.0)],
    )
    model = b.build()
    assert device.supported_operations(model) == [True, False, False]
    reasons = device.unsupported_reasons(model)
    assert reasons[0] == "" and "Divide" in reasons[1] and "HASHTABLE_LOOKUP" in reasons[2]
    with pytest.raises(DriverError) as e:
        device.prepare(model)
    assert e.value.status == ErrorStatus.GENERAL_FAILURE


def test_topk_quant_average_pool_and_mean_match_the_reference(device):
    """TOPK_V2 (ties: larger index first), quantised AVERAGE_POOL_2D (half away from zero, in
    bounds count) and quantised MEAN (truncation): bit-exact against the reference."""
    rng = np.random.default_rng(77)
    print("seed", 77)
    models = []
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [3, 6])
    b.operation(Op.TOPK_V2, [x, b.i32(4)], [b.output(T.TENSOR_FLOAT32, [3, 4]), b.output(T.TENSOR_INT32, [3, 4])])
    models.append((b.build(), lambda: rng.integers(-2, 3, (3, 6)).astype(np.float32)))
    for t, dt in ((T.TENSOR_QUANT8_ASYMM, np.uint8), (T.TENSOR_QUANT8_ASYMM_SIGNED, np.int8)):
        lo, hi = np.iinfo(dt).min, np.iinfo(dt).max
        b = ModelBuilder()
        x = b.input(t, [2, 5, 7, 3], scale=0.25, zero_point=1)
        y = b.output(t, [2, 3, 4, 3], scale=0.25, zero_point=1)
        b.operation(Op.AVERAGE_POOL_2D, [x, b.i32(1), b.i32(2), b.i32(2), b.i32(3), b.i32(2), b.i32(1)], [y])
        models.append((b.build(), lambda lo=lo, hi=hi, dt=dt: rng.integers(lo, hi + 1, (2, 5, 7, 3)).astype(dt)))
        b = ModelBuilder()
        x = b.input(t, [2, 5, 7], scale=0.25, zero_point=1)
        y = b.output(t, [2, 1, 1], scale=0.25, zero_point=1)
        b.operation(Op.MEAN, [x, b.const(T.TENSOR_INT32, [2], [1, 2]), b.i32(1)], [y])
        models.append((b.build(), lambda lo=lo, hi=hi, dt=dt: rng.integers(lo, hi + 1, (2, 5, 7)).astype(dt)))
    for model, draw in models:
        assert device.supported_operations(model) == [True], device.unsupported_reasons(model)
        for _ in range(3):
            xv = draw()
            want = execute(model, [xv])
            got = run(device, model, xv).outputs
            for w, g in zip(want, got):
                np.testing.assert_array_equal(g, w, err_msg=model.main.operations[0].name)


def test_unfaithful_type_or_parameter_is_unsupported(device):
    # Quantised ADD needs NNAPI's fixed-point requantisation; a run-time activation is no attribute.
    b = ModelBuilder()
    x = b.input(T.TENSOR_QUANT8_ASYMM, [2], scale=0.5, zero_point=3)
    y = b.output(T.TENSOR_QUANT8_ASYMM, [2], scale=1.0, zero_point=0)
    b.operation(Op.ADD, [x, x, b.i32(0)], [y])
    model = b.build()
    assert device.supported_operations(model) == [False]
    assert "requantisation" in device.unsupported_reasons(model)[0]
    b = ModelBuilder()
    x, act = b.input(T.TENSOR_FLOAT32, [2]), b.input(T.INT32)
    y = b.output(T.TENSOR_FLOAT32, [2])
    b.operation(Op.ADD, [x, x, act], [y])
    assert device.supported_operations(b.build()) == [False]


def test_run_case_skips_unsupported_and_passes_supported(device):
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT16, [3])
    y = b.output(T.TENSOR_FLOAT16, [3])
    b.operation(Op.LOGISTIC, [x], [y])
    xs = np.array([-1, 0, 2], np.float16)
    want = (1 / (1 + np.exp(-xs.astype(np.float64)))).astype(np.float16)
    assert run_case(device, b.build(), [xs], [want]).outcome == PASS
    b = ModelBuilder()  # quantised MUL: NNAPI's fixed-point requantisation, not mapped
    x = b.input(T.TENSOR_QUANT8_ASYMM, [4], scale=0.5, zero_point=0)
    y = b.output(T.TENSOR_QUANT8_ASYMM, [4], scale=0.5, zero_point=0)
    b.operation(Op.MUL, [x, x, b.i32(0)], [y])
    assert run_case(device, b.build(), [np.zeros(4, np.uint8)], [np.zeros(4, np.uint8)]).outcome == SKIP


# A slice of the generated suite (the whole suite takes minutes on a shared two-core machine;
# docs/findings_openvino.md has the full run): convolutions, pooling, gather, quantize.
GENERATED_SLICE = "conv_2d or pool or gather or quantize or relu"


def test_generated_suite_passes_against_openvino(tmp_path):
    generated_suite(
        [
            "nnconform",
            "run",
            "--driver",
            "openvino",
            "--suite",
            "generated",
            "--seed",
            "11",
            "--no-probe",
            "--report-dir",
            str(tmp_path / "report"),
            "--",
            "-k",
            GENERATED_SLICE,
        ],
        min_pass=30,
    )


def test_gather_index_out_of_range_fails_the_execution(device):
    # OpenVINO's Gather yields zeros for such an index; NNAPI fails the execution.
    b = ModelBuilder()
    x, i = b.input(T.TENSOR_FLOAT32, [3, 2]), b.input(T.TENSOR_INT32, [2])
    y = b.output(T.TENSOR_FLOAT32, [2, 2])
    b.operation(Op.GATHER, [x, b.i32(0), i], [y])
    model = b.build()
    data = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_array_equal(run(device, model, data, np.array([2, 0], np.int32)).outputs[0], [[4, 5], [0, 1]])
    for bad in ([3, 0], [-1, 0]):
        with pytest.raises(DriverError) as e:
            run(device, model, data, np.array(bad, np.int32))
        assert e.value.status == ErrorStatus.GENERAL_FAILURE and "out of range" in str(e.value)


def test_resize_matches_the_reference_in_every_coordinate_mode(device):
    """Bilinear (floats) and nearest neighbour (floats and quant8), NHWC and NCHW, up- and
    downsampling, sizes and scales, and the three coordinate modes: the reference's answer."""
    rng = np.random.default_rng(1616)
    print("seed", 1616)
    for case in range(24):
        op = Op.RESIZE_NEAREST_NEIGHBOR if case % 2 else Op.RESIZE_BILINEAR
        t = [T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM][
            case % 3 if op == Op.RESIZE_NEAREST_NEIGHBOR else case % 2
        ]
        n, h, w, ch = 1 + case % 2, int(rng.integers(1, 7)), int(rng.integers(1, 7)), int(rng.integers(1, 4))
        oh, ow = int(rng.integers(1, 11)), int(rng.integers(1, 11))
        nchw, mode = bool(case % 4 == 0), (case // 2) % 3  # 0 plain, 1 align_corners, 2 half pixel
        q = dict(scale=0.5, zero_point=3) if t == T.TENSOR_QUANT8_ASYMM else {}
        b = ModelBuilder()
        x = b.input(t, [n, ch, h, w] if nchw else [n, h, w, ch], **q)
        y = b.output(t, [n, ch, oh, ow] if nchw else [n, oh, ow, ch], **q)
        b.operation(op, [x, b.i32(ow), b.i32(oh), b.bool(nchw), b.bool(mode == 1), b.bool(mode == 2)], [y])
        model = b.build()
        shape = [n, ch, h, w] if nchw else [n, h, w, ch]
        xv = (rng.integers(0, 256, shape) if q else rng.uniform(-4, 4, shape)).astype(model.main.operands[0].info.dtype)
        out = run_case(device, model, [xv], execute(model, [xv]))
        assert out.outcome == PASS, f"case {case} {op.name} {t.name}: {out.message}"


def test_reduce_prod_folds_like_the_reference(device):
    # 1e-30 * 1e-30 underflows to 0, which then sticks against inf (0 * inf would be NaN).
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [2, 3])
    y = b.output(T.TENSOR_FLOAT32, [2])
    b.operation(Op.REDUCE_PROD, [x, b.const(T.TENSOR_INT32, [1], [1]), b.bool(False)], [y])
    xs = np.array([[1e-30, 1e-30, np.inf], [2, 3, -4]], np.float32)
    np.testing.assert_array_equal(run(device, b.build(), xs).outputs[0], [0, -24])


def test_argmin_first_of_ties_on_a_long_axis_and_concurrent_executions(device):
    """ARGMIN keeps the first of many ties on a long axis (the plugin's TopK is stable only
    when sorting by value), and one prepared model serves threads at once."""
    from concurrent.futures import ThreadPoolExecutor

    b = ModelBuilder()
    x = b.input(T.TENSOR_INT32, [200])
    y = b.output(T.TENSOR_INT32, [1])
    b.operation(Op.ARGMIN, [x, b.i32(0)], [y])
    model = b.build()
    rng = np.random.default_rng(5)
    print("seed", 5)
    inputs = [rng.integers(0, 3, 200).astype(np.int32) for _ in range(16)]
    prepared = device.prepare(model)
    try:
        with ThreadPoolExecutor(4) as pool:
            got = list(pool.map(lambda v: prepared.execute(Request.from_arrays(model, [v])).outputs[0], inputs))
    finally:
        prepared.release()
    assert [int(g[0]) for g in got] == [int(np.argmin(v)) for v in inputs]


def test_if_runs_the_chosen_branch(device):
    """IF as OpenVINO's If: then = x + 1 (an ADD), else = relu6(x); a condition computed in
    the graph is unsupported."""
    b = ModelBuilder()
    then_b, else_b = b.subgraph("then"), b.subgraph("else")
    tx = then_b.input(T.TENSOR_FLOAT32, [3])
    ty = then_b.output(T.TENSOR_FLOAT32, [3])
    then_b.operation(Op.ADD, [tx, then_b.const(T.TENSOR_FLOAT32, [1], [1.0]), then_b.i32(0)], [ty])
    ex = else_b.input(T.TENSOR_FLOAT32, [3])
    ey = else_b.output(T.TENSOR_FLOAT32, [3])
    else_b.operation(Op.RELU6, [ex], [ey])
    cond, x = b.input(T.TENSOR_BOOL8, [1]), b.input(T.TENSOR_FLOAT32, [3])
    y = b.output(T.TENSOR_FLOAT32, [3])
    b.operation(Op.IF, [cond, b.subgraph_ref(then_b), b.subgraph_ref(else_b), x], [y])
    model = b.build()
    assert device.supported_operations(model) == [True]
    xs = np.array([-2, 3, 9], np.float32)
    np.testing.assert_array_equal(run(device, model, np.array([True]), xs).outputs[0], [-1, 4, 10])
    np.testing.assert_array_equal(run(device, model, np.array([False]), xs).outputs[0], [0, 3, 6])
    # A computed condition: the CPU plugin's If would always take the else branch.
    b2 = ModelBuilder()
    t2, e2 = b2.subgraph("then"), b2.subgraph("else")
    for sb in (t2, e2):
        sb.operation(Op.RELU, [sb.input(T.TENSOR_FLOAT32, [3])], [sb.output(T.TENSOR_FLOAT32, [3])])
    p, x = b2.input(T.TENSOR_BOOL8, [1]), b2.input(T.TENSOR_FLOAT32, [3])
    cond = b2.temp(T.TENSOR_BOOL8, [1])
    b2.operation(Op.LOGICAL_NOT, [p], [cond])
    b2.operation(Op.IF, [cond, b2.subgraph_ref(t2), b2.subgraph_ref(e2), x], [b2.output(T.TENSOR_FLOAT32, [3])])
    computed = b2.build()
    assert device.supported_operations(computed) == [True, False]
    assert "model input" in device.unsupported_reasons(computed)[1]


def test_subnormal_float32_constants_are_unsupported(device):
    # The CPU plugin flushes subnormal float32 constants to zero; run-time values keep them.
    tiny = np.float32(1e-40)
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [2])
    y = b.output(T.TENSOR_FLOAT32, [4])
    b.operation(Op.CONCATENATION, [x, b.const(T.TENSOR_FLOAT32, [2], [tiny, 1.0]), b.i32(0)], [y])
    model = b.build()
    assert device.supported_operations(model) == [False]
    assert "subnormal" in device.unsupported_reasons(model)[0]
    b = ModelBuilder()
    x, z = b.input(T.TENSOR_FLOAT32, [2]), b.input(T.TENSOR_FLOAT32, [2])
    y = b.output(T.TENSOR_FLOAT32, [4])
    b.operation(Op.CONCATENATION, [x, z, b.i32(0)], [y])
    out = run(device, b.build(), np.array([tiny, 1], np.float32), np.array([-tiny, 0], np.float32)).outputs[0]
    np.testing.assert_array_equal(out, [tiny, 1, -tiny, 0])


def test_rnn_step_and_sequence_match_the_reference(device):
    rng = np.random.default_rng(31)
    print("seed", 31)
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [2, 5])
    w = b.const(T.TENSOR_FLOAT32, [4, 5], rng.uniform(-1, 1, 20))
    r = b.const(T.TENSOR_FLOAT32, [4, 4], rng.uniform(-1, 1, 16))
    bias = b.const(T.TENSOR_FLOAT32, [4], rng.uniform(-1, 1, 4))
    h = b.input(T.TENSOR_FLOAT32, [2, 4])
    outs = [b.output(T.TENSOR_FLOAT32, [2, 4]), b.output(T.TENSOR_FLOAT32, [2, 4])]
    b.operation(Op.RNN, [x, w, r, bias, h, b.i32(3)], outs)
    model = b.build()
    xv, hv = rng.uniform(-2, 2, (2, 5)).astype(np.float32), rng.uniform(-2, 2, (2, 4)).astype(np.float32)
    out = run_case(device, model, [xv, hv], execute(model, [xv, hv]))
    assert out.outcome == PASS, out.message
    for time_major in (False, True):  # the sequence form, unrolled over 3 steps
        b = ModelBuilder()
        x = b.input(T.TENSOR_FLOAT32, [3, 2, 5] if time_major else [2, 3, 5])
        w = b.const(T.TENSOR_FLOAT32, [4, 5], rng.uniform(-1, 1, 20))
        r = b.const(T.TENSOR_FLOAT32, [4, 4], rng.uniform(-1, 1, 16))
        bias = b.const(T.TENSOR_FLOAT32, [4], rng.uniform(-1, 1, 4))
        h = b.input(T.TENSOR_FLOAT32, [2, 4])
        outs = [b.output(T.TENSOR_FLOAT32, [3, 2, 4] if time_major else [2, 3, 4]), b.output(T.TENSOR_FLOAT32, [2, 4])]
        b.operation(Op.UNIDIRECTIONAL_SEQUENCE_RNN, [x, w, r, bias, h, b.i32(1), b.i32(int(time_major))], outs)
        model = b.build()
        xv = rng.uniform(-2, 2, [3, 2, 5] if time_major else [2, 3, 5]).astype(np.float32)
        out = run_case(device, model, [xv, hv], execute(model, [xv, hv]))
        assert out.outcome == PASS, out.message


def test_float16_results_of_constants_only_are_unsupported(device):
    # OpenVINO folds RESHAPE(constant) -> CAST at compile time, and the folded Convert gives
    # -65504 for -100000 where NNAPI (and the plugin's run-time kernel) give -inf.
    b = ModelBuilder()
    h = b.temp(T.TENSOR_INT32, [2])
    y = b.output(T.TENSOR_FLOAT16, [2])
    b.operation(Op.RESHAPE, [b.const(T.TENSOR_INT32, [1, 2], [-100000, 3]), b.const(T.TENSOR_INT32, [1], [2])], [h])
    b.operation(Op.CAST, [h], [y])
    x = b.input(T.TENSOR_INT32, [2])
    z = b.output(T.TENSOR_FLOAT16, [2])
    b.operation(Op.CAST, [x], [z])
    model = b.build()
    # every operation computed from constants only is left out (Abs(Add(-236, -255)) folds
    # to -491 in OpenVINO)
    assert device.supported_operations(model) == [False, False, True]
    b = ModelBuilder()
    x = b.input(T.TENSOR_INT32, [2])
    z = b.output(T.TENSOR_FLOAT16, [2])
    b.operation(Op.CAST, [x], [z])
    out = run(device, b.build(), np.array([-100000, 3], np.int32)).outputs[0]
    assert out.dtype == np.float16 and out.tolist() == [-np.inf, 3]


def test_the_adapter_keeps_openvino_from_phoning_home():
    """`import openvino` sends a telemetry event from a forked process; imported through the
    adapter, openvino takes its no-op stub instead (no network, no child for the host's
    leftover-process check to find).  A fresh interpreter: this one has imported it already."""
    import subprocess
    import sys

    code = (
        "import sys, nnconform.drivers.openvino\n"
        "from openvino.tools.ovc import telemetry_utils\n"
        "print(sys.modules['openvino_telemetry'] is None, telemetry_utils.tm.__name__)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["True", "openvino.tools.ovc.telemetry_stub"], r.stdout
