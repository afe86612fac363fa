"""The onnxruntime adapter's RNN and LSTM families (drivers/onnxruntime/recurrent.py): every
cell variant against the reference executor on small random models (seeded; the seed is in
the test id), omitted optional model inputs, and honesty (what is refused, and why)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx", reason="onnxruntime driver needs the 'onnx' extra: pip install nnconform[onnx]")
pytest.importorskip("onnxruntime", reason="onnxruntime driver needs the 'onnx' extra: pip install nnconform[onnx]")

from nnconform.drivers.onnxruntime import OnnxRuntimeDevice
from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.executor import execute as reference
from nnconform.verdict.runner import PASS, run_case

SEED = 11
B, I, U, STEPS = 2, 3, 4, 3  # noqa: E741  (batch, input, units: the recurrent ops' own letters)


@pytest.fixture(scope="module")
def device() -> OnnxRuntimeDevice:
    return OnnxRuntimeDevice()


class _Random:
    def __init__(self, seed: int):
        print(f"random weights and inputs from seed {seed}")
        self.rng = np.random.default_rng(seed)

    def __call__(self, *shape) -> np.ndarray:
        return self.rng.uniform(-0.8, 0.8, shape).astype(np.float32)


def _check(device, model, inputs) -> None:
    assert device.supported_operations(model) == [True] * len(model.main.operations), device.unsupported_reasons(model)
    expected = reference(model, inputs)
    outcome = run_case(device, model, inputs, expected, partition=False)
    assert outcome.outcome == PASS, outcome.message


# ---------------------------------------------------------------------------------------
# RNN family
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("t", [T.TENSOR_FLOAT32, T.TENSOR_FLOAT16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("act", [0, 1, 2, 3])
def test_rnn(device, t, act):
    r = _Random(SEED)
    dt = np.float16 if t == T.TENSOR_FLOAT16 else np.float32
    b = ModelBuilder()
    x, h = b.input(t, (B, I)), b.input(t, (B, U))
    w, rw, bias = (b.const(t, s, r(*s)) for s in ((U, I), (U, U), (U,)))
    b.operation(Op.RNN, [x, w, rw, bias, h, b.i32(act)], [b.output(t, (B, U)), b.output(t, (B, U))])
    _check(device, b.build(), [r(B, I).astype(dt), r(B, U).astype(dt)])


@pytest.mark.parametrize("time_major", [True, False], ids=["time_major", "batch_major"])
@pytest.mark.parametrize("state_output", [True, False], ids=["state", "no_state"])
def test_unidirectional_sequence_rnn(device, time_major, state_output):
    r = _Random(SEED)
    t = T.TENSOR_FLOAT32
    seq = (STEPS, B, I) if time_major else (B, STEPS, I)
    b = ModelBuilder()
    x = b.input(t, seq)
    w, rw, bias = (b.const(t, s, r(*s)) for s in ((U, I), (U, U), (U,)))
    outs = [b.output(t, seq[:2] + (U,))] + ([b.output(t, (B, U))] if state_output else [])
    b.operation(
        Op.UNIDIRECTIONAL_SEQUENCE_RNN,
        [x, w, rw, bias, b.const(t, (B, U), r(B, U)), b.i32(1), b.i32(int(time_major))],
        outs,
    )
    _check(device, b.build(), [r(*seq)])


@pytest.mark.parametrize("linking", ["none", "parallel", "cross"])
@pytest.mark.parametrize("merge", [False, True], ids=["separate", "merged"])
def test_bidirectional_sequence_rnn(device, linking, merge):
    r = _Random(SEED)
    t = T.TENSOR_FLOAT32
    b = ModelBuilder()
    x = b.input(t, (STEPS, B, I))
    aux_size = 2
    cells = []
    for n_in in (I, aux_size if linking == "parallel" else I):
        cells += [
            b.const(t, (U, n_in), r(U, n_in)),
            b.const(t, (U, U), r(U, U)),
            b.const(t, (U,), r(U)),
            b.const(t, (B, U), r(B, U)),
        ]
    aux = b.input(t, (STEPS, B, aux_size)) if linking != "none" else b.omitted(t, (STEPS, B, aux_size))
    aux_w = [
        b.const(t, (U, aux_size), r(U, aux_size)) if linking == "cross" else b.omitted(t, (U, aux_size))
        for _ in range(2)
    ]
    seq = [b.output(t, (STEPS, B, 2 * U))] if merge else [b.output(t, (STEPS, B, U)), b.output(t, (STEPS, B, U))]
    states = [b.output(t, (B, U)), b.output(t, (B, U))]
    b.operation(
        Op.BIDIRECTIONAL_SEQUENCE_RNN, [x, *cells, aux, *aux_w, b.i32(3), b.bool(True), b.bool(merge)], seq + states
    )
    inputs = [r(STEPS, B, I)] + ([r(STEPS, B, aux_size)] if linking != "none" else [])
    _check(device, b.build(), inputs)


# ---------------------------------------------------------------------------------------
# LSTM family
# ---------------------------------------------------------------------------------------

VARIANTS = {
    "full": dict(),
    "cifg": dict(cifg=True),
    "peephole": dict(peephole=True),
    "cifg_peephole": dict(cifg=True, peephole=True),
    "projection_clips": dict(projection=True, proj_bias=True, cell_clip=0.3, proj_clip=0.2),
    "layer_norm_peephole_projection": dict(layer_norm=True, peephole=True, projection=True),
    "layer_norm_cifg": dict(layer_norm=True, cifg=True),
    "activation_none": dict(act=0),  # the reference uses the cell gate for h (its quirk)
    "activation_relu6": dict(act=3),
    "activation_sigmoid": dict(act=6),
}


def _cell(b, r, t, n_in, v, as_inputs=()) -> tuple[list[int], list[int], int]:
    """The 17 cell tensors, the 4 layer-norm tensors and output_size for variant ``v``.
    Names in ``as_inputs`` become model inputs instead of constants."""
    n_out = 3 if v.get("projection") else U
    feeds = []

    def tensor(name, shape, present=True):
        if not present:
            return b.omitted(t, shape)
        if name in as_inputs:
            feeds.append(r(*shape))
            return b.input(t, shape)
        return b.const(t, shape, r(*shape))

    cifg, peep = v.get("cifg", False), v.get("peephole", False)
    cell = [tensor(f"i2{g}", (U, n_in), not (g == "i" and cifg)) for g in "ifco"]
    cell += [tensor(f"r2{g}", (U, n_out), not (g == "i" and cifg)) for g in "ifco"]
    cell += [tensor(f"c2{g}", (U,), peep and not (g == "i" and cifg)) for g in "ifo"]
    cell += [tensor(f"b{g}", (U,), not (g == "i" and cifg)) for g in "ifco"]
    cell += [
        tensor("proj", (n_out, U), v.get("projection", False)),
        tensor("proj_bias", (n_out,), v.get("proj_bias", False)),
    ]
    ln = [tensor(f"ln{g}", (U,), v.get("layer_norm", False) and not (g == "i" and cifg)) for g in "ifco"]
    return cell, ln, n_out, feeds


def _lstm_scalars(b, v, t):
    clip = b.f32 if t == T.TENSOR_FLOAT32 else b.f16
    return [b.i32(v.get("act", 4)), clip(v.get("cell_clip", 0.0)), clip(v.get("proj_clip", 0.0))]


@pytest.mark.parametrize("t", [T.TENSOR_FLOAT32, T.TENSOR_FLOAT16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_lstm(device, variant, t):
    v = VARIANTS[variant]
    r = _Random(SEED)
    dt = np.float16 if t == T.TENSOR_FLOAT16 else np.float32
    b = ModelBuilder()
    x = b.input(t, (B, I))
    cell, ln, n_out, _ = _cell(b, r, t, I, v)
    h, c = b.input(t, (B, n_out)), b.input(t, (B, U))
    scratch = (B, U * (3 if v.get("cifg") else 4))
    outs = [b.output(t, scratch), b.output(t, (B, n_out)), b.output(t, (B, U)), b.output(t, (B, n_out))]
    ins = [x, *cell, h, c, *_lstm_scalars(b, v, t)] + (ln if v.get("layer_norm") else [])
    b.operation(Op.LSTM, ins, outs)
    _check(device, b.build(), [r(B, I).astype(dt), r(B, n_out).astype(dt), r(B, U).astype(dt)])


@pytest.mark.parametrize("time_major", [True, False], ids=["time_major", "batch_major"])
@pytest.mark.parametrize("variant", ["full", "cifg_peephole", "layer_norm_peephole_projection", "projection_clips"])
def test_unidirectional_sequence_lstm(device, variant, time_major):
    v = VARIANTS[variant]
    r = _Random(SEED)
    t = T.TENSOR_FLOAT32
    seq = (STEPS, B, I) if time_major else (B, STEPS, I)
    b = ModelBuilder()
    x = b.input(t, seq)
    cell, ln, n_out, _ = _cell(b, r, t, I, v)
    h, c = b.const(t, (B, n_out), r(B, n_out)), b.const(t, (B, U), r(B, U))
    outs = [b.output(t, seq[:2] + (n_out,)), b.output(t, (B, n_out)), b.output(t, (B, U))]
    b.operation(
        Op.UNIDIRECTIONAL_SEQUENCE_LSTM, [x, *cell, h, c, *_lstm_scalars(b, v, t), b.bool(time_major), *ln], outs
    )
    _check(device, b.build(), [r(*seq)])


@pytest.mark.parametrize("linking", ["none", "parallel", "cross"])
@pytest.mark.parametrize("merge", [False, True], ids=["separate", "merged"])
@pytest.mark.parametrize("variant", ["full", "cifg_peephole", "layer_norm_peephole_projection"])
def test_bidirectional_sequence_lstm(device, variant, linking, merge):
    v = VARIANTS[variant]
    r = _Random(SEED)
    t = T.TENSOR_FLOAT32
    b = ModelBuilder()
    x = b.input(t, (STEPS, B, I))
    fw, fw_ln, n_out, _ = _cell(b, r, t, I, v)
    aux_size = I if linking == "cross" else 2
    bw, bw_ln, _, _ = _cell(b, r, t, aux_size if linking == "parallel" else I, v)
    states = [
        b.const(t, (B, n_out), r(B, n_out)),
        b.const(t, (B, U), r(B, U)),
        b.const(t, (B, n_out), r(B, n_out)),
        b.const(t, (B, U), r(B, U)),
    ]
    aux = b.input(t, (STEPS, B, aux_size)) if linking != "none" else b.omitted(t, (STEPS, B, aux_size))
    aux_w = [
        b.const(t, (U, aux_size), r(U, aux_size))
        if linking == "cross" and not (k % 4 == 0 and v.get("cifg"))
        else b.omitted(t, (U, aux_size))
        for k in range(8)
    ]
    seq = (
        [b.output(t, (STEPS, B, 2 * n_out))]
        if merge
        else [b.output(t, (STEPS, B, n_out)), b.output(t, (STEPS, B, n_out))]
    )
    st_out = [b.output(t, (B, n_out)), b.output(t, (B, U)), b.output(t, (B, n_out)), b.output(t, (B, U))]
    ins = [x, *fw, *bw, *states, aux, *aux_w, *_lstm_scalars(b, v, t), b.bool(merge), b.bool(True), *fw_ln, *bw_ln]
    b.operation(Op.BIDIRECTIONAL_SEQUENCE_LSTM, ins, seq + st_out)
    inputs = [r(STEPS, B, I)] + ([r(STEPS, B, aux_size)] if linking != "none" else [])
    _check(device, b.build(), inputs)


def test_omitted_optional_model_inputs_select_the_variant_per_request(device):
    """CTS style: every weight is a model input and the unused ones are passed without a value.
    The same prepared model runs the full LSTM and, with the input gate and peepholes omitted,
    the CIFG variant (a session per omission pattern)."""
    r = _Random(SEED)
    t = T.TENSOR_FLOAT32
    v = dict(peephole=True)
    b = ModelBuilder()
    x = b.input(t, (B, I))
    names = ["i2i", "i2f", "i2c", "i2o", "r2i", "r2f", "r2c", "r2o", "c2i", "c2f", "c2o", "bi", "bf", "bc", "bo"]
    cell, _, n_out, feeds = _cell(b, r, t, I, v, as_inputs=names)
    h, c = b.input(t, (B, n_out)), b.input(t, (B, U))
    outs = [b.output(t, (B, 0)), b.output(t, (B, n_out)), b.output(t, (B, U)), b.output(t, (B, n_out))]
    b.operation(Op.LSTM, [x, *cell, h, c, *_lstm_scalars(b, v, t)], outs)
    model = b.build()
    full = [r(B, I), *feeds, r(B, n_out), r(B, U)]
    _check(device, model, full)
    cifg = list(full)
    for k in (1, 5, 9, 12):  # input-to-input, recurrent-to-input, cell-to-input, input bias
        cifg[k] = None
    prepared = device.prepare(model)
    try:
        from nnconform.ir import Request

        got = prepared.execute(Request.from_arrays(model, cifg)).outputs
    finally:
        prepared.release()
    expected = reference(model, cifg)
    for k in (1, 2, 3):
        np.testing.assert_allclose(got[k], expected[k], rtol=1e-5, atol=1e-6)
    assert expected[0].shape == (B, 3 * U)  # the CIFG scratch buffer really ran CIFG


# ---------------------------------------------------------------------------------------
# Honesty
# ---------------------------------------------------------------------------------------


def test_quantized_lstms_are_refused_with_the_reason(device):
    from helpers import vector_cases, vectors_missing_reason

    cases = vector_cases(["QUANTIZED_16BIT_LSTM", "QUANTIZED_LSTM"])
    if not cases:
        pytest.skip(vectors_missing_reason() or "no quantized LSTM vectors")
    seen = set()
    for case in cases:
        (op,) = case.model.main.operations
        if op.type in seen:
            continue
        seen.add(op.type)
        assert device.supported_operations(case.model) == [False]
        # the operand-type check (no ONNX type for 16-bit quantised tensors) may speak first
        why = device.unsupported_reasons(case.model)[0]
        assert "fixed-point" in why or "QUANT16" in why, why
    assert seen == {Op.QUANTIZED_16BIT_LSTM, Op.QUANTIZED_LSTM}


def test_bidirectional_lstm_with_cells_of_different_variants_is_refused(device):
    r = _Random(SEED)
    t = T.TENSOR_FLOAT32
    b = ModelBuilder()
    x = b.input(t, (STEPS, B, I))
    fw, _, n_out, _ = _cell(b, r, t, I, VARIANTS["full"])
    bw, _, _, _ = _cell(b, r, t, I, VARIANTS["cifg"])
    states = [
        b.const(t, (B, n_out), r(B, n_out)),
        b.const(t, (B, U), r(B, U)),
        b.const(t, (B, n_out), r(B, n_out)),
        b.const(t, (B, U), r(B, U)),
    ]
    aux = [b.omitted(t, (STEPS, B, I))] + [b.omitted(t, (U, I)) for _ in range(8)]
    ln = [b.omitted(t, (U,)) for _ in range(8)]
    ins = [x, *fw, *bw, *states, *aux, *_lstm_scalars(b, {}, t), b.bool(False), b.bool(True), *ln]
    b.operation(Op.BIDIRECTIONAL_SEQUENCE_LSTM, ins, [b.output(t, (STEPS, B, n_out)), b.output(t, (STEPS, B, n_out))])
    model = b.build()
    assert device.supported_operations(model) == [False]
    assert "different variants" in device.unsupported_reasons(model)[0]


def test_sequence_of_unknown_length_is_refused(device):
    r = _Random(SEED)
    t = T.TENSOR_FLOAT32
    b = ModelBuilder()
    x = b.input(t, (0, B, I))
    w, rw, bias = (b.const(t, s, r(*s)) for s in ((U, I), (U, U), (U,)))
    b.operation(
        Op.UNIDIRECTIONAL_SEQUENCE_RNN,
        [x, w, rw, bias, b.const(t, (B, U), r(B, U)), b.i32(1), b.i32(1)],
        [b.output(t, (0, B, U))],
    )
    model = b.build()
    assert device.supported_operations(model) == [False]
    assert "unrolled" in device.unsupported_reasons(model)[0]


def test_runtime_activation_is_refused(device):
    r = _Random(SEED)
    t = T.TENSOR_FLOAT32
    b = ModelBuilder()
    x, h = b.input(t, (B, I)), b.input(t, (B, U))
    w, rw, bias = (b.const(t, s, r(*s)) for s in ((U, I), (U, U), (U,)))
    act = b.input(T.INT32)
    b.operation(Op.RNN, [x, w, rw, bias, h, act], [b.output(t, (B, U)), b.output(t, (B, U))])
    model = b.build()
    assert device.supported_operations(model) == [False]
    assert "not a constant" in device.unsupported_reasons(model)[0]
