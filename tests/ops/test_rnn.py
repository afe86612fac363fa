"""RNN, UNIDIRECTIONAL_SEQUENCE_RNN, BIDIRECTIONAL_SEQUENCE_RNN, SVDF, LSH_PROJECTION,
RANDOM_MULTINOMIAL: hand-checked examples, signature validation, run-time failures, the
FarmHash port, the multinomial distribution check, AOSP vectors."""

import numpy as np
import pytest
from helpers import assert_rejected, check_example, vector_cases, vectors_missing_reason

from nnconform.errors import OpFailure
from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.ir.validation import validate_model
from nnconform.reference.executor import execute
from nnconform.reference.ops.lsh_projection import fingerprint64, fingerprint64_bytes
from nnconform.reference.ops.random_multinomial import check_multinomial
from nnconform.reference.ops.registry import OpView, get_op
from nnconform.suites.examples.rnn import EXAMPLES

MY_OPS = {
    "RNN",
    "UNIDIRECTIONAL_SEQUENCE_RNN",
    "BIDIRECTIONAL_SEQUENCE_RNN",
    "SVDF",
    "LSH_PROJECTION",
    "RANDOM_MULTINOMIAL",
}
F32, F16, I32 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32


# (a) hand-checked examples -------------------------------------------------------------


@pytest.mark.parametrize("ex", EXAMPLES, ids=lambda e: e.name)
def test_example(ex):
    check_example(ex)


# (b) validation --------------------------------------------------------------------------


def _rnn(t=F32, x_dims=(2, 3), w_dims=(4, 3), act=1, w_t=None, n_in=6):
    b = ModelBuilder()
    ins = [
        b.input(t, x_dims),
        b.input(w_t or t, w_dims),
        b.input(t, (4, 4)),
        b.input(t, (4,)),
        b.input(t, (2, 4)),
        b.i32(act),
    ][:n_in]
    b.operation(Op.RNN, ins, [b.output(t, (2, 4)), b.output(t, (2, 4))])
    return b.build()


def _uni(t=F32, x_dims=(2, 5, 3), time_major=0, n_out=1):
    b = ModelBuilder()
    ins = [
        b.input(t, x_dims),
        b.input(t, (4, 3)),
        b.input(t, (4, 4)),
        b.input(t, (4,)),
        b.input(t, (2, 4)),
        b.i32(1),
        b.i32(time_major),
    ]
    b.operation(Op.UNIDIRECTIONAL_SEQUENCE_RNN, ins, [b.output(t, (2, 5, 4)), b.output(t, (2, 4))][:n_out])
    return b.build()


def _bidi(t=F32, merge=False, n_out=2, aux="none", time_major_t=T.BOOL):
    b = ModelBuilder()
    ins = [b.input(t, (2, 5, 3))] + [b.input(t, d) for d in ((4, 3), (4, 4), (4,), (2, 4)) * 2]
    ins.append(b.input(t, (2, 5, 3)) if aux in ("parallel", "cross") else b.omitted(t))
    ins.append(b.const(t, (4, 3), np.zeros((4, 3))) if aux in ("cross", "weights_only") else b.omitted(t))
    ins.append(b.const(t, (4, 3), np.zeros((4, 3))) if aux == "cross" else b.omitted(t))
    ins += [b.i32(0), b.const(time_major_t, (), 0), b.bool(merge)]
    outs = [b.output(t, (2, 5, 4)) for _ in range(n_out)]
    b.operation(Op.BIDIRECTIONAL_SEQUENCE_RNN, ins, outs)
    return b.build()


def _svdf(t=F32, rank=1, act=0, wf_dims=(4, 3), bias=True, state=True):
    b = ModelBuilder()
    ins = [
        b.input(t, (2, 3)),
        b.input(t, wf_dims),
        b.input(t, (4, 10)),
        b.input(t, (4 // max(rank, 1),)) if bias else b.omitted(t),
        b.input(t, (2, 40)) if state else b.omitted(t),
        b.i32(rank),
        b.i32(act),
    ]
    b.operation(Op.SVDF, ins, [b.output(t, (2, 40)), b.output(t, (2, 4))])
    return b.build()


def _lsh(hash_t=F32, hash_dims=(4, 2), in_t=I32, kind=2, weight="input", out_t=I32):
    b = ModelBuilder()
    h = b.const(hash_t, hash_dims, np.ones(hash_dims))
    x = b.input(in_t, (3, 2))
    w = {
        "input": lambda: b.input(hash_t, (3,)),
        "omitted": lambda: b.omitted(hash_t),
        "const": lambda: b.const(hash_t, (3,), [1, 1, 1]),
    }[weight]()
    b.operation(Op.LSH_PROJECTION, [h, x, w, b.i32(kind)], [b.output(out_t, (8,))])
    return b.build()


def _multinomial(t=F32, samples=4, seeds_dims=(2,), out_t=I32, seeds_t=I32):
    b = ModelBuilder()
    x = b.input(t, (1, 3))
    seeds = b.const(seeds_t, seeds_dims, np.ones(seeds_dims))
    b.operation(Op.RANDOM_MULTINOMIAL, [x, b.i32(samples), seeds], [b.output(out_t, (1, 4))])
    return b.build()


BAD = [
    ("rnn_int32", _rnn(t=I32), ["input 0", "FLOAT"]),
    ("rnn_five_inputs", _rnn(n_in=5), ["inputs"]),
    ("rnn_activation_tanh", _rnn(act=4), ["input 5", "activation"]),
    ("rnn_weights_columns", _rnn(w_dims=(4, 2)), ["input 1", "input_size"]),
    ("rnn_mixed_types", _rnn(t=F16, w_t=F32), ["input 1", "FLOAT16"]),
    ("rnn_input_rank3", _rnn(x_dims=(1, 2, 3)), ["input 0", "rank"]),
    ("uni_time_major_2", _uni(time_major=2), ["input 6", "time_major"]),
    ("uni_input_rank2", _uni(x_dims=(2, 3)), ["input 0", "rank"]),
    ("uni_quant8", _uni(t=T.TENSOR_QUANT8_ASYMM), ["input 0"]),
    ("bidi_merge_two_outputs", _bidi(merge=True, n_out=2), ["merge_outputs", "outputs"]),
    ("bidi_separate_three_outputs", _bidi(merge=False, n_out=3), ["outputs"]),
    ("bidi_aux_weights_without_input", _bidi(aux="weights_only"), ["input 9", "aux"]),
    ("bidi_time_major_int", _bidi(time_major_t=T.INT32), ["input 13", "BOOL"]),
    ("svdf_rank0", _svdf(rank=0), ["input 5", "rank"]),
    ("svdf_rank_not_dividing", _svdf(rank=3), ["input 1", "multiple"]),
    ("svdf_state_omitted", _svdf(state=False), ["input 4", "omitted"]),
    ("svdf_activation", _svdf(act=6), ["input 6", "activation"]),
    ("lsh_hash_int32", _lsh(hash_t=I32), ["input 0"]),
    ("lsh_input_quant8_signed", _lsh(in_t=T.TENSOR_QUANT8_ASYMM_SIGNED), ["input 1"]),
    ("lsh_type_4", _lsh(kind=4), ["input 3", "projection type"]),
    ("lsh_dense_without_weight", _lsh(weight="omitted"), ["input 2", "DENSE"]),
    ("lsh_sparse_with_weight", _lsh(kind=3, weight="const"), ["input 2", "SPARSE"]),
    ("lsh_33_bits", _lsh(hash_dims=(1, 33)), ["input 0", "32"]),
    ("lsh_float_output", _lsh(out_t=F32), ["output 0"]),
    ("multinomial_int_logits", _multinomial(t=I32), ["input 0"]),
    ("multinomial_negative_samples", _multinomial(samples=-1), ["input 1", "sample count"]),
    ("multinomial_three_seeds", _multinomial(seeds_dims=(3,)), ["input 2", "[2]"]),
    ("multinomial_float_seeds", _multinomial(seeds_t=F32), ["input 2"]),
    ("multinomial_float_output", _multinomial(out_t=F32), ["output 0"]),
]


@pytest.mark.parametrize("model,fragments", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_validateassert_rejected(model, fragments):
    assert_rejected(model, *fragments)


def test_validate_accepts_valid_signatures():
    good = [
        _rnn(),
        _rnn(t=F16, act=3),
        _uni(time_major=1, n_out=2),
        _uni(t=F16),
        _bidi(),
        _bidi(merge=True, n_out=1),
        _bidi(merge=True, n_out=3),
        _bidi(n_out=4),
        _bidi(aux="parallel"),
        _bidi(aux="cross", t=F32),
        _svdf(),
        _svdf(bias=False, rank=2, act=2, wf_dims=(4, 3)),
        _svdf(t=F16),
        _lsh(),
        _lsh(kind=3, weight="omitted"),
        _lsh(kind=1, weight="omitted"),
        _lsh(hash_t=F16, in_t=T.TENSOR_QUANT8_ASYMM),
        _multinomial(),
        _multinomial(t=F16),
    ]
    for m in good:
        get_op(m.main.operations[0].type).validate(OpView(m, m.main, 0))


# run-time failures the reference reports as OP_FAILED --------------------------------------


def test_bidi_runtime_aux_combination_refused():
    b = ModelBuilder()
    t = F32
    ins = [b.input(t, (1, 2, 1))] + [b.input(t, d) for d in ((1, 1), (1, 1), (1,), (1, 1)) * 2]
    ins += [b.input(t, (1, 2, 1)), b.input(t, (1, 1)), b.input(t, (1, 1))]
    ins += [b.i32(0), b.bool(False), b.bool(True)]
    b.operation(Op.BIDIRECTIONAL_SEQUENCE_RNN, ins, [b.output(t, (1, 2, 2))])
    one = np.ones((1, 1), np.float32)
    vals = [np.ones((1, 2, 1), np.float32)] + [one, one, np.ones(1, np.float32), one] * 2
    with pytest.raises(OpFailure, match="aux"):
        execute(b.build(), vals + [None, one, one])  # aux weights without the aux input


def test_svdf_refuses_documented_state_size():
    # NeuralNetworks.h's (memory_size - 1) * num_filters; the reference needs memory_size * num_filters
    b = ModelBuilder()
    ins = [
        b.input(F32, (1, 2)),
        b.input(F32, (2, 2)),
        b.input(F32, (2, 3)),
        b.omitted(F32),
        b.input(F32, (1, 4)),
        b.i32(1),
        b.i32(0),
    ]
    b.operation(Op.SVDF, ins, [b.output(F32, (1, 6)), b.output(F32, (1, 2))])
    vals = [
        np.ones((1, 2), np.float32),
        np.eye(2, dtype=np.float32),
        np.ones((2, 3), np.float32),
        np.zeros((1, 4), np.float32),
    ]
    with pytest.raises(OpFailure, match="memory_size"):
        execute(b.build(), vals)


def test_lsh_dense_weight_length_checked():
    b = ModelBuilder()
    h = b.const(F32, (4, 2), np.ones((4, 2)))
    x, w = b.input(I32, (3, 2)), b.input(F32, (0,))  # weight length left unknown
    b.operation(Op.LSH_PROJECTION, [h, x, w, b.i32(2)], [b.output(I32, (8,))])
    m = b.build()
    with pytest.raises(OpFailure, match="weight"):
        execute(m, [np.zeros((3, 2), np.int32), np.ones(2, np.float32)])


def test_rnn_hidden_state_shape_checked():
    b = ModelBuilder()
    ins = [b.input(F32, d) for d in ((2, 3), (4, 3), (4, 4), (4,), (0, 4))]  # state batch unknown
    b.operation(Op.RNN, ins + [b.i32(0)], [b.output(F32, (2, 4)), b.output(F32, (2, 4))])
    m = b.build()
    vals = [
        np.ones((2, 3), np.float32),
        np.ones((4, 3), np.float32),
        np.ones((4, 4), np.float32),
        np.ones(4, np.float32),
        np.ones((1, 4), np.float32),
    ]
    with pytest.raises(OpFailure, match="hidden state"):
        execute(m, vals)


def test_sequence_rnn_matches_stepwise_rnn_fp32():
    # UNIDIRECTIONAL_SEQUENCE_RNN == RNN applied step by step; BIDIRECTIONAL's forward output too
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 3)).astype(np.float32)  # batch major
    w, r = rng.standard_normal((5, 3)).astype(np.float32), (0.3 * rng.standard_normal((5, 5))).astype(np.float32)
    bias, h0 = rng.standard_normal(5).astype(np.float32), rng.standard_normal((2, 5)).astype(np.float32)
    b = ModelBuilder()
    ins = [b.input(F32, d) for d in ((2, 4, 3), (5, 3), (5, 5), (5,), (2, 5))]
    b.operation(Op.UNIDIRECTIONAL_SEQUENCE_RNN, ins + [b.i32(0), b.i32(0)], [b.output(F32, (2, 4, 5))])
    (seq,) = execute(b.build(), [x, w, r, bias, h0])
    h = h0
    for t in range(4):
        h = x[:, t] @ w.T + h @ r.T + bias  # activation NONE
        np.testing.assert_allclose(seq[:, t], h, rtol=1e-5, atol=1e-5)


# (d) FarmHash Fingerprint64 -------------------------------------------------------------
# Expected values from Google's farmhash C++ library (util::Fingerprint64, via the pyfarmhash
# bindings), one per length class of the algorithm (0, 1-3, 4-7, 8-16, 17-32, 33-64, > 64).

FINGERPRINTS = [
    (b"", 0x9AE16A3B2F90404F),
    (b"a", 0xB3454265B6DF75E3),
    (b"abc", 0x24A5B3A074E7F369),
    (b"hello", 0xB48BE5A931380CE8),
    (b"0123456789abcdef01", 0x1B204D9CFC377E6A),
    (b"The quick brown fox jumps over the lazy dog", 0xABBE83F33B1B5134),
    (bytes(range(64)), 0xF58504BB53DECC4B),
    (bytes(range(65)), 0xC6A3282C3E793DBE),
    (bytes(range(200)), 0x074C7FCC26D66FB3),
]


@pytest.mark.parametrize("data,want", FINGERPRINTS, ids=[str(len(d)) for d, _ in FINGERPRINTS])
def test_fingerprint64_known_values(data, want):
    assert fingerprint64_bytes(data) == want


def test_fingerprint64_vectorised_rows_match_single():
    rng = np.random.default_rng(0)
    for n in (5, 12, 20, 40, 64, 100, 129):
        keys = rng.integers(0, 256, (4, n), dtype=np.uint8)
        batch = fingerprint64(keys)
        assert [int(v) for v in batch] == [fingerprint64_bytes(k.tobytes()) for k in keys]


# (e) RANDOM_MULTINOMIAL ------------------------------------------------------------------


def _sampler(t=F32, batches=1, classes=4, samples=2000, seeds=(37, 42)):
    b = ModelBuilder()
    x = b.input(t, (batches, classes))
    b.operation(
        Op.RANDOM_MULTINOMIAL, [x, b.i32(samples), b.const(I32, (2,), list(seeds))], [b.output(I32, (batches, samples))]
    )
    return b.build()


def test_multinomial_is_seeded_and_follows_softmax():
    logits = np.log(np.array([[0.1, 0.2, 0.3, 0.4]], np.float32))
    m = _sampler()
    (a,) = execute(m, [logits])
    (b,) = execute(m, [logits])
    np.testing.assert_array_equal(a, b)  # same seeds, same draws
    assert a.min() >= 0 and a.max() < 4
    ok, msg = check_multinomial(logits, a, 0.025)
    assert ok, msg


def test_multinomial_zero_seeds_draw_randomly_but_validly():
    logits = np.zeros((2, 3), np.float16)
    (a,) = execute(_sampler(F16, 2, 3, 50, seeds=(0, 0)), [logits])
    assert a.shape == (2, 50) and a.dtype == np.int32 and a.min() >= 0 and a.max() < 3


def test_multinomial_never_draws_minus_inf_or_nan():
    logits = np.array([[0.0, -np.inf, 1.0, np.nan]], np.float32)
    (a,) = execute(_sampler(samples=500), [logits])
    assert set(np.unique(a)) <= {0, 2}


def test_check_multinomial_accepts_andassert_rejected():
    logits = np.log(np.array([[0.25, 0.75]], np.float32))
    assert check_multinomial(logits, np.array([[0, 1, 1, 1]]), 0.01)[0]
    ok, msg = check_multinomial(logits, np.array([[0, 0, 1, 1]]), 0.2)
    assert not ok and "class 0" in msg and "0.5" in msg
    ok, msg = check_multinomial(logits, np.array([[0, 2, 1, 1]]), 0.5)
    assert not ok and "class index" in msg


def test_check_multinomial_mirrors_aosp_quirks():
    # 2 rows of 4 classes.  AOSP reads row 1 at flat offset batches*1 = 2: [0, 0, 0, 0] ->
    # uniform 0.25 each, like row 0; the true row 1 ([0, 0, -inf, -inf]) would expect
    # [0.5, 0.5, 0, 0].  Counts are pooled over both rows and divided by samples per row:
    # each class drawn 4 times out of 8 per row -> frequency 0.5, within 0.3 of 0.25.
    logits = np.array([[0, 0, 0, 0], [0, 0, -np.inf, -np.inf]], np.float32)
    samples = np.array([[0, 1, 2, 3] * 2, [0, 1, 2, 3] * 2])
    ok, msg = check_multinomial(logits, samples, 0.3)
    assert ok, msg
    # with the reading offset past the end (3 rows of 2 classes: row 2 at offset 6) it fails
    # (rows 0 and 1 pass: pooled frequency 6/4 = 1.5, within 1.0 of 0.5)
    ok, msg = check_multinomial(np.zeros((3, 2), np.float32), np.array([[0, 1, 0, 1]] * 3), 1.0)
    assert not ok and "offset 6" in msg


# (c) AOSP vectors ----------------------------------------------------------------------------

_CASES = vector_cases(MY_OPS)


@pytest.mark.skipif(not _CASES, reason=vectors_missing_reason())
@pytest.mark.parametrize("case", _CASES, ids=lambda c: c.test_id)
def test_aosp_vector(case):
    if case.multinomial_tolerance > 0:
        # random output: AOSP compares class frequencies with softmax(logits) instead
        validate_model(case.model)
        (samples,) = execute(case.model, list(case.inputs))
        ok, message = check_multinomial(case.inputs[0], samples, case.multinomial_tolerance)
        assert ok, message
        return
    from nnconform.cases.vectors import check_case

    status, message = check_case(case)
    assert status == "pass", message
