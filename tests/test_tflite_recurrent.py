"""The TFLite adapter's recurrent families (drivers/tflite/recurrent.py): RNN, LSTM and their
sequence forms on LiteRT's builtin kernels, checked against the reference executor on small
random models (seeded; the seed is printed), and the honesty of what stays unsupported.
Skipped without the 'tflite' extra."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert", reason="tflite driver needs the 'tflite' extra: pip install nnconform[tflite]")
pytest.importorskip("flatbuffers", reason="tflite driver needs the 'tflite' extra: pip install nnconform[tflite]")

from nnconform.driver.support import with_omitted_inputs
from nnconform.drivers.tflite import TfliteDevice
from nnconform.ir import ModelBuilder, Request
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.executor import Executor
from nnconform.verdict.runner import PASS, run_case

SEED = 11
F32 = T.TENSOR_FLOAT32


@pytest.fixture(scope="module")
def device() -> TfliteDevice:
    return TfliteDevice()


def rng(tag: str) -> np.random.Generator:
    print(f"seed {SEED} ({tag})")
    return np.random.default_rng([SEED, sum(map(ord, tag))])


class Build:
    """A one-operation model whose weights are random constants and whose data inputs are
    model inputs; ``values`` are the matching random input values."""

    def __init__(self, tag: str, t: T = F32):
        self.b = ModelBuilder(tag)
        self.r = rng(tag)
        self.t = t
        self.values: list[np.ndarray] = []

    def const(self, *dims):
        return self.b.const(self.t, dims, self.r.uniform(-0.6, 0.6, dims).astype(np.float32))

    def input(self, *dims):
        self.values.append(self.r.uniform(-1, 1, dims).astype(np.float32))
        return self.b.input(self.t, dims)

    def zeros(self, *dims):
        return self.b.const(self.t, dims, np.zeros(dims, np.float32))

    def omitted(self):
        return self.b.omitted(self.t)

    def build(self, op: Op, ins, out_dims):
        outs = [self.b.output(self.t, d) for d in out_dims]
        self.b.operation(op, ins, outs)
        return self.b.build()


def check(device, model, values) -> None:
    assert all(device.supported_operations(model)), device.unsupported_reasons(model)
    expected = Executor(model).run(values)
    outcome = run_case(device, model, values, expected)
    assert outcome.outcome == PASS, outcome.message


# ---------------------------------------------------------------------------------------
# RNN family
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("act", [0, 1, 2, 3])
@pytest.mark.parametrize("zero_state", [False, True])
def test_rnn(device, act, zero_state):
    m = Build(f"rnn_{act}_{zero_state}")
    batch, n_in, units = 2, 3, 4
    x = m.input(batch, n_in)
    h = m.zeros(batch, units) if zero_state else m.input(batch, units)
    model = m.build(
        Op.RNN,
        [x, m.const(units, n_in), m.const(units, units), m.const(units), h, m.b.i32(act)],
        [(batch, units), (batch, units)],
    )
    check(device, model, m.values)


@pytest.mark.parametrize("time_major", [0, 1])
def test_unidirectional_sequence_rnn_with_state_output(device, time_major):
    m = Build(f"usrnn_{time_major}")
    batch, steps, n_in, units = 2, 3, 3, 4
    x = m.input(*((steps, batch, n_in) if time_major else (batch, steps, n_in)))
    model = m.build(
        Op.UNIDIRECTIONAL_SEQUENCE_RNN,
        [
            x,
            m.const(units, n_in),
            m.const(units, units),
            m.const(units),
            m.input(batch, units),
            m.b.i32(1),
            m.b.i32(time_major),
        ],
        [(steps, batch, units) if time_major else (batch, steps, units), (batch, units)],
    )
    check(device, model, m.values)


@pytest.mark.parametrize("linking", ["none", "cross", "parallel"])
@pytest.mark.parametrize("time_major", [False, True])
@pytest.mark.parametrize("merge", [False, True])
def test_bidirectional_sequence_rnn(device, linking, time_major, merge):
    m = Build(f"bsrnn_{linking}_{time_major}_{merge}")
    batch, steps, n_in, fw, bw = 2, 3, 3, 4, 2
    seq = (steps, batch) if time_major else (batch, steps)
    x = m.input(*seq, n_in)
    aux = m.input(*seq, n_in) if linking != "none" else m.omitted()
    aux_w = [m.const(fw, n_in), m.const(bw, n_in)] if linking == "cross" else [m.omitted(), m.omitted()]
    ins = [
        x,
        m.const(fw, n_in),
        m.const(fw, fw),
        m.const(fw),
        m.input(batch, fw),
        m.const(bw, n_in),
        m.const(bw, bw),
        m.const(bw),
        m.input(batch, bw),
        aux,
        *aux_w,
        m.b.i32(0),
        m.b.bool(time_major),
        m.b.bool(merge),
    ]
    outs = [(*seq, fw + bw)] if merge else [(*seq, fw), (*seq, bw)]
    model = m.build(Op.BIDIRECTIONAL_SEQUENCE_RNN, ins, outs + [(batch, fw), (batch, bw)])
    check(device, model, m.values)


# ---------------------------------------------------------------------------------------
# LSTM family
# ---------------------------------------------------------------------------------------


def lstm_cell(m: Build, n_in: int, n_cell: int, n_out: int, *, cifg=False, peephole=False, projection=False):
    """The 17 cell inputs (LSTM inputs 1-17)."""
    gate_w = lambda *d: m.omitted() if cifg else m.const(*d)
    ins = [gate_w(n_cell, n_in)] + [m.const(n_cell, n_in) for _ in range(3)]
    ins += [gate_w(n_cell, n_out)] + [m.const(n_cell, n_out) for _ in range(3)]
    ins += [m.omitted() if cifg or not peephole else m.const(n_cell)]
    ins += [m.const(n_cell) if peephole else m.omitted() for _ in range(2)]
    ins += [gate_w(n_cell)] + [m.const(n_cell) for _ in range(3)]
    ins += [m.const(n_out, n_cell), m.const(n_out)] if projection else [m.omitted(), m.omitted()]
    return ins


def layer_norm(m: Build, n_cell: int, cifg: bool):
    return [m.omitted() if cifg else m.const(n_cell)] + [m.const(n_cell) for _ in range(3)]


VARIANTS = {
    "basic": dict(),
    "cifg_peephole_projection": dict(cifg=True, peephole=True, projection=True),
    "peephole_projection": dict(peephole=True, projection=True),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("act,clips", [(4, (0.0, 0.0)), (1, (0.5, 0.3)), (0, (0.0, 0.0)), (3, (0.0, 0.0))])
@pytest.mark.parametrize("ln", [False, True])
def test_lstm(device, variant, act, clips, ln):
    flags = VARIANTS[variant]
    m = Build(f"lstm_{variant}_{act}_{ln}")
    batch, n_in, n_cell = 2, 3, 4
    n_out = 2 if flags.get("projection") else n_cell
    ins = [
        m.input(batch, n_in),
        *lstm_cell(m, n_in, n_cell, n_out, **flags),
        m.input(batch, n_out),
        m.input(batch, n_cell),
        m.b.i32(act),
        m.b.f32(clips[0]),
        m.b.f32(clips[1]),
    ]
    if ln:
        ins += layer_norm(m, n_cell, flags.get("cifg", False))
    scratch = n_cell * (3 if flags.get("cifg") else 4)
    model = m.build(Op.LSTM, ins, [(batch, scratch), (batch, n_out), (batch, n_cell), (batch, n_out)])
    assert all(device.supported_operations(model)), device.unsupported_reasons(model)
    # The scratch buffer has no defined contents (NeuralNetworks.h gives its shape only):
    # compared are the states and the output; the driver writes zeros there.
    expected = Executor(model).run(m.values)
    got = device.prepare(model).execute(Request.from_arrays(model, m.values)).outputs
    np.testing.assert_array_equal(got[0], np.zeros_like(expected[0]))
    for e, a in zip(expected[1:], got[1:]):
        np.testing.assert_allclose(a, e, rtol=5 * 2.0**-23, atol=1e-5)


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("time_major", [False, True])
@pytest.mark.parametrize("ln", [False, True])
def test_unidirectional_sequence_lstm(device, variant, time_major, ln):
    flags = VARIANTS[variant]
    m = Build(f"uslstm_{variant}_{time_major}_{ln}")
    batch, steps, n_in, n_cell = 2, 3, 3, 4
    n_out = 2 if flags.get("projection") else n_cell
    seq = (steps, batch) if time_major else (batch, steps)
    ins = [
        m.input(*seq, n_in),
        *lstm_cell(m, n_in, n_cell, n_out, **flags),
        m.input(batch, n_out),
        m.zeros(batch, n_cell),
        m.b.i32(4),
        m.b.f32(0.0),
        m.b.f32(0.0),
        m.b.bool(time_major),
    ]
    ins += layer_norm(m, n_cell, flags.get("cifg", False)) if ln else [m.omitted() for _ in range(4)]
    model = m.build(Op.UNIDIRECTIONAL_SEQUENCE_LSTM, ins, [(*seq, n_out), (batch, n_out), (batch, n_cell)])
    check(device, model, m.values)


@pytest.mark.parametrize("linking", ["none", "cross", "parallel"])
@pytest.mark.parametrize("time_major", [False, True])
@pytest.mark.parametrize("merge", [False, True])
@pytest.mark.parametrize("ln", [False, True])
def test_bidirectional_sequence_lstm(device, linking, time_major, merge, ln):
    m = Build(f"bslstm_{linking}_{time_major}_{merge}_{ln}")
    batch, steps, n_in, n_cell = 2, 3, 3, 4
    seq = (steps, batch) if time_major else (batch, steps)
    ins = [
        m.input(*seq, n_in),
        *lstm_cell(m, n_in, n_cell, n_cell, peephole=True),
        *lstm_cell(m, n_in, n_cell, n_cell, peephole=True),
    ]
    ins += [m.input(batch, n_cell), m.input(batch, n_cell), m.zeros(batch, n_cell), m.input(batch, n_cell)]
    ins += [m.input(*seq, n_in) if linking != "none" else m.omitted()]
    ins += [m.const(n_cell, n_in) if linking == "cross" else m.omitted() for _ in range(8)]
    ins += [m.b.i32(4), m.b.f32(0.0), m.b.f32(0.0), m.b.bool(merge), m.b.bool(time_major)]
    ins += [*layer_norm(m, n_cell, False), *layer_norm(m, n_cell, False)] if ln else [m.omitted() for _ in range(8)]
    outs = [(*seq, 2 * n_cell)] if merge else [(*seq, n_cell), (*seq, n_cell)]
    model = m.build(Op.BIDIRECTIONAL_SEQUENCE_LSTM, ins, outs + [(batch, n_cell)] * 4)
    check(device, model, m.values)


def test_optional_weights_omitted_by_the_request_select_the_cifg_kernel(device):
    # The AOSP LSTM vectors make the CIFG-omitted weights model inputs and give them no value
    # in the request: the driver builds a second interpreter for that set of omissions.
    m = Build("lstm_runtime_cifg")
    batch, n_in, n_cell = 1, 2, 3
    cell = lstm_cell(m, n_in, n_cell, n_cell, cifg=True)
    for k in (0, 4, 11):  # input-to-input, recurrent-to-input, input gate bias
        dims = (n_cell, n_in) if k == 0 else (n_cell, n_cell) if k == 4 else (n_cell,)
        cell[k] = m.b.input(F32, dims)
    ins = [
        m.input(batch, n_in),
        *cell,
        m.input(batch, n_cell),
        m.input(batch, n_cell),
        m.b.i32(4),
        m.b.f32(0.0),
        m.b.f32(0.0),
    ]
    model = m.build(Op.LSTM, ins, [(batch, 3 * n_cell), (batch, n_cell), (batch, n_cell), (batch, n_cell)])
    x, h, c = m.values
    # model inputs: the three CIFG tensors (made first), then x, h, c
    request = Request.from_arrays(model, [None, None, None, x, h, c])
    expected = Executor(with_omitted_inputs(model, (0, 1, 2))).run([x, h, c])
    prepared = device.prepare(model)
    try:
        for _ in range(2):  # the second run reuses the variant interpreter
            got = prepared.execute(request).outputs
            for e, a in zip(expected[1:], got[1:]):
                np.testing.assert_allclose(a, e, rtol=5 * 2.0**-23, atol=1e-5)
    finally:
        prepared.release()


def test_state_is_fed_fresh_on_every_execution(device):
    # TFLite's kernels overwrite their variable state in place: a second execution must start
    # from the request's state again, not from the first run's result.
    m = Build("rnn_twice")
    x, h = m.input(1, 2), m.input(1, 3)
    model = m.build(Op.RNN, [x, m.const(3, 2), m.const(3, 3), m.const(3), h, m.b.i32(0)], [(1, 3), (1, 3)])
    prepared = device.prepare(model)
    try:
        first = prepared.execute(Request.from_arrays(model, m.values)).outputs
        second = prepared.execute(Request.from_arrays(model, m.values)).outputs
    finally:
        prepared.release()
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------------------
# What stays unsupported, and why
# ---------------------------------------------------------------------------------------


def _rnn_model(*, t=F32, state_from_op=False, state_read_twice=False):
    m = Build("rnn_unsupported", t)
    x = m.input(1, 2)
    h = m.input(1, 3)
    if state_from_op:
        h2 = m.b.temp(t, (1, 3))
        m.b.operation(Op.RELU, [h], [h2])
        h = h2
    ins = [x, m.const(3, 2), m.const(3, 3), m.const(3), h, m.b.i32(0)]
    if state_read_twice:
        m.b.operation(Op.RELU, [h], [m.b.output(t, (1, 3))])
    return m.build(Op.RNN, ins, [(1, 3), (1, 3)])


@pytest.mark.parametrize(
    "case,reason",
    [
        (dict(t=T.TENSOR_FLOAT16), "TENSOR_FLOAT16"),
        (dict(state_from_op=True), "computed by another operation"),
        (dict(state_read_twice=True), "read elsewhere"),
    ],
)
def test_unfaithful_rnn_states_are_unsupported(device, case, reason):
    model = _rnn_model(**case)
    k = [op.type for op in model.main.operations].index(Op.RNN)
    assert device.supported_operations(model)[k] is False
    assert reason in device.unsupported_reasons(model)[k]


def test_svdf_and_lstm_sigmoid_are_unsupported(device):
    m = Build("svdf")
    svdf = m.build(
        Op.SVDF,
        [m.input(1, 2), m.const(2, 2), m.const(2, 3), m.const(2), m.input(1, 6), m.b.i32(1), m.b.i32(0)],
        [(1, 6), (1, 2)],
    )
    assert device.supported_operations(svdf) == [False]
    m = Build("lstm_sigmoid")
    ins = [m.input(1, 2), *lstm_cell(m, 2, 3, 3), m.input(1, 3), m.input(1, 3), m.b.i32(6), m.b.f32(0.0), m.b.f32(0.0)]
    lstm = m.build(Op.LSTM, ins, [(1, 12), (1, 3), (1, 3), (1, 3)])
    assert device.supported_operations(lstm) == [False]
    assert "activation 6" in device.unsupported_reasons(lstm)[0]


def test_lstm_with_unknown_output_dims_gets_its_scratch_shape_from_the_inputs(device):
    m = Build("lstm_dynamic_outputs")
    batch, n_in, n_cell = 2, 3, 4
    ins = [
        m.input(batch, n_in),
        *lstm_cell(m, n_in, n_cell, n_cell, cifg=True),
        m.input(batch, n_cell),
        m.input(batch, n_cell),
        m.b.i32(4),
        m.b.f32(0.0),
        m.b.f32(0.0),
    ]
    model = m.build(Op.LSTM, ins, [(0, 0)] * 4)
    assert device.supported_operations(model) == [True]
    expected = Executor(model).run(m.values)
    got = device.prepare(model).execute(Request.from_arrays(model, m.values)).outputs
    np.testing.assert_array_equal(got[0], np.zeros((batch, 3 * n_cell), np.float32))
    for e, a in zip(expected[1:], got[1:]):
        np.testing.assert_allclose(a, e, rtol=5 * 2.0**-23, atol=1e-5)
