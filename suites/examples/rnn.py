"""RNN, UNIDIRECTIONAL_SEQUENCE_RNN, BIDIRECTIONAL_SEQUENCE_RNN, SVDF, LSH_PROJECTION and
RANDOM_MULTINOMIAL examples.  Expected values worked out by hand (the arithmetic is in the
comments); every value is exact in fp16, so the fp16 variants expect the same numbers."""

import numpy as np

from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.suites.examples import Example

F32, F16, I32 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32
NONE, RELU, RELU1, RELU6 = 0, 1, 2, 3


def _arr(values, t):
    return np.array(values, {F32: np.float32, F16: np.float16, I32: np.int32, T.TENSOR_QUANT8_ASYMM: np.uint8}[t])


# ---------------------------------------------------------------------------------------
# RNN: batch 2, input_size 2, num_units 2.
#   row 0: x = [1, 2], h = [0.5, -0.25]
#     x.W^T = [1*1 + 2*0, 1*0.5 + 2*-1] = [1, -1.5]
#     h.R^T = [0.5*1 + -0.25*1, 0.5*0 + -0.25*2] = [0.25, -0.5]
#     + bias [0.25, 0.5] -> [1.5, -1.5]
#   row 1: x = 0, h = 0 -> bias [0.25, 0.5]
# ---------------------------------------------------------------------------------------
_RNN_IN = ([[1, 2], [0, 0]], [[1, 0], [0.5, -1]], [[1, 1], [0, 2]], [0.25, 0.5], [[0.5, -0.25], [0, 0]])


def _rnn(t, act):
    b = ModelBuilder()
    ins = [b.input(t, d) for d in ((2, 2), (2, 2), (2, 2), (2,), (2, 2))]
    outs = [b.output(t, (2, 2)), b.output(t, (2, 2))]
    b.operation(Op.RNN, ins + [b.i32(act)], outs)
    return b.build()


def _rnn_example(name, t, act, want):
    w = _arr(want, t)
    return Example(name, _rnn(t, act), [_arr(v, t) for v in _RNN_IN], [w, w.copy()])


RNN_EXAMPLES = [
    _rnn_example("rnn_fp32_none", F32, NONE, [[1.5, -1.5], [0.25, 0.5]]),
    _rnn_example("rnn_fp32_relu", F32, RELU, [[1.5, 0], [0.25, 0.5]]),
    _rnn_example("rnn_fp32_relu1", F32, RELU1, [[1, -1], [0.25, 0.5]]),
    _rnn_example("rnn_fp16_relu6", F16, RELU6, [[1.5, 0], [0.25, 0.5]]),
    _rnn_example("rnn_fp16_none", F16, NONE, [[1.5, -1.5], [0.25, 0.5]]),
]


# ---------------------------------------------------------------------------------------
# UNIDIRECTIONAL_SEQUENCE_RNN: input_size 1, num_units 1, W = 2, R = 0.5, bias = 1.
#   batch major, one batch, x = [1, -1, 2], h0 = 0, NONE:
#     h1 = 2*1 + 0 + 1 = 3;  h2 = -2 + 1.5 + 1 = 0.5;  h3 = 4 + 0.25 + 1 = 5.25
#   time major, batches 2, x[t][b] = [[1, 0], [-1, 2]], h0 = [0, 4], RELU6:
#     b0: 3, then -2 + 1.5 + 1 = 0.5;  b1: 0 + 2 + 1 = 3, then 4 + 1.5 + 1 = 6.5 -> 6
# ---------------------------------------------------------------------------------------


def _uni(t, x_dims, batch, act, time_major, with_state):
    b = ModelBuilder()
    x = b.input(t, x_dims)
    ins = [x] + [b.input(t, d) for d in ((1, 1), (1, 1), (1,), (batch, 1))]
    steps = x_dims[0] if time_major else x_dims[1]
    out_dims = (steps, batch, 1) if time_major else (batch, steps, 1)
    outs = [b.output(t, out_dims)] + ([b.output(t, (batch, 1))] if with_state else [])
    b.operation(Op.UNIDIRECTIONAL_SEQUENCE_RNN, ins + [b.i32(act), b.i32(int(time_major))], outs)
    return b.build()


def _uni_inputs(t, x, h0):
    return [_arr(x, t), _arr([[2]], t), _arr([[0.5]], t), _arr([1], t), _arr(h0, t)]


UNI_EXAMPLES = [
    Example(
        "unidirectional_sequence_rnn_fp32_batch_major",
        _uni(F32, (1, 3, 1), 1, NONE, False, True),
        _uni_inputs(F32, [[[1], [-1], [2]]], [[0]]),
        [_arr([[[3], [0.5], [5.25]]], F32), _arr([[5.25]], F32)],
    ),
    Example(
        "unidirectional_sequence_rnn_fp32_time_major_relu6",
        _uni(F32, (2, 2, 1), 2, RELU6, True, False),
        _uni_inputs(F32, [[[1], [0]], [[-1], [2]]], [[0], [4]]),
        [_arr([[[3], [3]], [[0.5], [6]]], F32)],
    ),
    Example(
        "unidirectional_sequence_rnn_fp16_time_major_state",
        _uni(F16, (2, 2, 1), 2, RELU6, True, True),
        _uni_inputs(F16, [[[1], [0]], [[-1], [2]]], [[0], [4]]),
        [_arr([[[3], [3]], [[0.5], [6]]], F16), _arr([[0.5], [6]], F16)],
    ),
]


# ---------------------------------------------------------------------------------------
# BIDIRECTIONAL_SEQUENCE_RNN: one batch, 2 steps, input_size 1, 1 unit per direction, NONE.
#   forward W = 1, R = 1, bias 0, h0 0;  backward W = 2, R = 0.5, bias 1, h0 0;  x = [1, 3]
#   no linking:   fw: 1, then 3 + 1 = 4
#                 bw (t = 1 first): 2*3 + 1 = 7, then t = 0: 2*1 + 0.5*7 + 1 = 6.5
#   parallel, aux = [0, 1] feeds the backward cell:  t = 1: 2*1 + 1 = 3;  t = 0: 0 + 1.5 + 1 = 2.5
#   cross, aux = [0.5, -1], fw aux weight 2, bw aux weight -1:
#     fw: 1 + 2*0.5 = 2;  3 + 2*-1 + 2 = 3
#     bw: t = 1: 6 + 1 + 0 + 1 = 8;  t = 0: 2 - 0.5 + 0.5*8 + 1 = 6.5
# ---------------------------------------------------------------------------------------


def _bidi(t, mode, time_major, merge, with_state):
    b = ModelBuilder()
    x_dims = (2, 1, 1) if time_major else (1, 2, 1)
    x = b.input(t, x_dims)
    cells = [b.input(t, d) for d in ((1, 1), (1, 1), (1,), (1, 1)) * 2]
    aux = b.input(t, x_dims) if mode != "none" else b.omitted(t)
    aux_w = [b.input(t, (1, 1)) for _ in range(2)] if mode == "cross" else [b.omitted(t), b.omitted(t)]
    params = [b.i32(NONE), b.bool(time_major), b.bool(merge)]
    out_dims = (2, 1) if time_major else (1, 2)
    outs = [b.output(t, out_dims + (2 if merge else 1,))]
    if not merge:
        outs.append(b.output(t, out_dims + (1,)))
    if with_state:
        outs += [b.output(t, (1, 1)), b.output(t, (1, 1))]
    b.operation(Op.BIDIRECTIONAL_SEQUENCE_RNN, [x, *cells, aux, *aux_w, *params], outs)
    return b.build()


def _bidi_inputs(t, time_major, aux=None, aux_w=()):
    shape = (2, 1, 1) if time_major else (1, 2, 1)
    vals = [_arr([1, 3], t).reshape(shape)]
    vals += [_arr(v, t) for v in ([[1]], [[1]], [0], [[0]], [[2]], [[0.5]], [1], [[0]])]
    if aux is not None:
        vals.append(_arr(aux, t).reshape(shape))
    vals += [_arr([[w]], t) for w in aux_w]
    return vals


def _seq(values, t, time_major, units=1):
    return _arr(values, t).reshape((2, 1, units) if time_major else (1, 2, units))


BIDI_EXAMPLES = [
    Example(
        "bidirectional_sequence_rnn_fp32_separate",
        _bidi(F32, "none", False, False, False),
        _bidi_inputs(F32, False),
        [_seq([1, 4], F32, False), _seq([6.5, 7], F32, False)],
    ),
    Example(
        "bidirectional_sequence_rnn_fp32_merged_time_major_state",
        _bidi(F32, "none", True, True, True),
        _bidi_inputs(F32, True),
        [_seq([[1, 6.5], [4, 7]], F32, True, 2), _arr([[4]], F32), _arr([[6.5]], F32)],
    ),
    Example(
        "bidirectional_sequence_rnn_fp32_parallel_linking",
        _bidi(F32, "parallel", False, False, True),
        _bidi_inputs(F32, False, aux=[0, 1]),
        [_seq([1, 4], F32, False), _seq([2.5, 3], F32, False), _arr([[4]], F32), _arr([[2.5]], F32)],
    ),
    Example(
        "bidirectional_sequence_rnn_fp32_cross_linking",
        _bidi(F32, "cross", False, False, False),
        _bidi_inputs(F32, False, aux=[0.5, -1], aux_w=(2, -1)),
        [_seq([2, 3], F32, False), _seq([6.5, 8], F32, False)],
    ),
    Example(
        "bidirectional_sequence_rnn_fp16_merged",
        _bidi(F16, "none", False, True, False),
        _bidi_inputs(F16, False),
        [_seq([[1, 6.5], [4, 7]], F16, False, 2)],
    ),
    Example(
        "bidirectional_sequence_rnn_fp16_cross_linking_state",
        _bidi(F16, "cross", True, False, True),
        _bidi_inputs(F16, True, aux=[0.5, -1], aux_w=(2, -1)),
        [_seq([2, 3], F16, True), _seq([6.5, 8], F16, True), _arr([[3]], F16), _arr([[6.5]], F16)],
    ),
]


# ---------------------------------------------------------------------------------------
# SVDF: input_size 2, 2 filters, memory_size 3.  Wf = identity, x = [2, -1] -> feature
# activations [2, -1] overwrite each filter's newest memory cell.
#   state in (per filter, oldest first): f0 [1, 2, 9], f1 [3, 4, 9]
#   memory: f0 [1, 2, 2], f1 [3, 4, -1];  Wt = [[1, 0, 1], [0.5, 0.5, 2]]
#   s0 = 1 + 0 + 2 = 3;  s1 = 1.5 + 2 - 2 = 1.5
#   rank 1 (2 units), bias [0.5, -2]: [3.5, -0.5];  rank 2 (1 unit), no bias: [4.5]
#   state out: f0 [2, 2, 0], f1 [4, -1, 0]
#   a second batch row with x = 0 and state 0 gives the bias and a zero state.
# ---------------------------------------------------------------------------------------


def _svdf(t, batch, rank, act, with_bias):
    b = ModelBuilder()
    units = 2 // rank
    ins = [
        b.input(t, (batch, 2)),
        b.input(t, (2, 2)),
        b.input(t, (2, 3)),
        b.input(t, (units,)) if with_bias else b.omitted(t),
        b.input(t, (batch, 6)),
    ]
    b.operation(Op.SVDF, ins + [b.i32(rank), b.i32(act)], [b.output(t, (batch, 6)), b.output(t, (batch, units))])
    return b.build()


def _svdf_inputs(t, batch, bias=None):
    x, state = [[2, -1], [0, 0]][:batch], [[1, 2, 9, 3, 4, 9], [0] * 6][:batch]
    vals = [_arr(x, t), _arr([[1, 0], [0, 1]], t), _arr([[1, 0, 1], [0.5, 0.5, 2]], t)]
    vals += [_arr(bias, t)] if bias is not None else []
    return vals + [_arr(state, t)]


_SVDF_STATE = [[2, 2, 0, 4, -1, 0], [0] * 6]

SVDF_EXAMPLES = [
    Example(
        "svdf_fp32_rank1_bias",
        _svdf(F32, 1, 1, NONE, True),
        _svdf_inputs(F32, 1, [0.5, -2]),
        [_arr(_SVDF_STATE[:1], F32), _arr([[3.5, -0.5]], F32)],
    ),
    Example(
        "svdf_fp32_rank1_relu_batch2",
        _svdf(F32, 2, 1, RELU, True),
        _svdf_inputs(F32, 2, [0.5, -2]),
        [_arr(_SVDF_STATE, F32), _arr([[3.5, 0], [0.5, 0]], F32)],
    ),
    Example(
        "svdf_fp32_rank2_no_bias",
        _svdf(F32, 1, 2, NONE, False),
        _svdf_inputs(F32, 1),
        [_arr(_SVDF_STATE[:1], F32), _arr([[4.5]], F32)],
    ),
    Example(
        "svdf_fp32_rank2_relu1",
        _svdf(F32, 1, 2, RELU1, False),
        _svdf_inputs(F32, 1),
        [_arr(_SVDF_STATE[:1], F32), _arr([[1]], F32)],
    ),
    Example(
        "svdf_fp16_rank1_batch2",
        _svdf(F16, 2, 1, NONE, True),
        _svdf_inputs(F16, 2, [0.5, -2]),
        [_arr(_SVDF_STATE, F16), _arr([[3.5, -0.5], [0.5, -2]], F16)],
    ),
]


# ---------------------------------------------------------------------------------------
# LSH_PROJECTION.  The bits depend on FarmHash Fingerprint64 of key = float32(seed) bytes +
# item bytes (little endian).  These fingerprints, as signed int64, come from Google's farmhash
# C++ library (through the pyfarmhash bindings), not from our port:
#   int32 item 7:      seed 0.5 -> +771653451777785055     seed -1.0 -> -8207883313999726544
#                      seed 2.0 -> -1429885972088162383    seed 3.0 -> +3224572209280410137
#   int32 item -3:     seed 0.5 -> +8129287289617929577    seed -1.0 -> -2891014746258735362
#                      seed 2.0 -> +2222320260062782926    seed 3.0 -> +4677940355447153815
#   uint8 item [1, 2]: seed 0.25 -> +1136601481796502256   seed -0.75 -> -6002150485501468472
#                      seed 1.5 -> -150263515111515328
#   uint8 item [3, 4]: seed 0.25 -> -3656236120078579991   seed -0.75 -> +3717768080595295878
#                      seed 1.5 -> +3477651309200499287
# Sparse, seeds [[0.5, -1], [2, 3]], input [7]: bits 1 0 | 0 1 -> rows 0b10 = 2, 0b01 = 1;
#   SPARSE adds row * 2**2: [2, 5];  SPARSE_DEPRECATED: [2, 1].
# Dense, same seeds, input [7, -3], weights [1, -0.5]: sign of h7 - 0.5 * h(-3) per seed:
#   0.5: 0.77e18 - 4.06e18 < 0 -> 0;  -1: -8.21e18 + 1.45e18 < 0 -> 0;
#   2: -1.43e18 - 1.11e18 < 0 -> 0;   3: 3.22e18 - 2.34e18 > 0 -> 1
# Dense, fp16 seeds [[0.25, -0.75, 1.5]], quant8 input [[1, 2], [3, 4]], weights [1, 1]:
#   0.25: 1.14e18 - 3.66e18 < 0 -> 0;  -0.75: -6.00e18 + 3.72e18 < 0 -> 0;  1.5: -0.15e18 + 3.48e18 > 0 -> 1
# ---------------------------------------------------------------------------------------


def _lsh(hash_t, seeds, in_t, in_dims, kind, weight):
    b = ModelBuilder()
    h = b.const(hash_t, np.shape(seeds), seeds)
    x = b.input(in_t, in_dims, scale=1.0 if in_t == T.TENSOR_QUANT8_ASYMM else 0.0)
    w = b.input(hash_t, (in_dims[0],)) if weight else b.omitted(hash_t)
    n = np.size(seeds) if kind == 2 else np.shape(seeds)[0]
    b.operation(Op.LSH_PROJECTION, [h, x, w, b.i32(kind)], [b.output(I32, (n,))])
    return b.build()


_SEEDS = [[0.5, -1.0], [2.0, 3.0]]

LSH_EXAMPLES = [
    Example(
        "lsh_projection_fp32_sparse", _lsh(F32, _SEEDS, I32, (1,), 3, False), [_arr([7], I32)], [_arr([2, 5], I32)]
    ),
    Example(
        "lsh_projection_fp32_sparse_deprecated",
        _lsh(F32, _SEEDS, I32, (1,), 1, False),
        [_arr([7], I32)],
        [_arr([2, 1], I32)],
    ),
    Example(
        "lsh_projection_fp32_dense",
        _lsh(F32, _SEEDS, I32, (2,), 2, True),
        [_arr([7, -3], I32), _arr([1, -0.5], F32)],
        [_arr([0, 0, 0, 1], I32)],
    ),
    Example(
        "lsh_projection_fp16_sparse", _lsh(F16, _SEEDS, I32, (1,), 3, False), [_arr([7], I32)], [_arr([2, 5], I32)]
    ),
    Example(
        "lsh_projection_fp16_dense_quant8_input",
        _lsh(F16, [[0.25, -0.75, 1.5]], T.TENSOR_QUANT8_ASYMM, (2, 2), 2, True),
        [_arr([[1, 2], [3, 4]], T.TENSOR_QUANT8_ASYMM), _arr([1, 1], F16)],
        [_arr([0, 0, 1], I32)],
    ),
]


# ---------------------------------------------------------------------------------------
# RANDOM_MULTINOMIAL: rows with a single finite logit can only ever draw that class
# (-inf logits have probability 0), so the output is known whatever the random stream.
# ---------------------------------------------------------------------------------------


def _multinomial(t, samples, seeds):
    b = ModelBuilder()
    x = b.input(t, (2, 3))
    b.operation(Op.RANDOM_MULTINOMIAL, [x, b.i32(samples), b.const(I32, (2,), seeds)], [b.output(I32, (2, samples))])
    return b.build()


_ONE_HOT_LOGITS = [[0.0, -np.inf, -np.inf], [-np.inf, -np.inf, 5.0]]

MULTINOMIAL_EXAMPLES = [
    Example(
        "random_multinomial_fp32_single_class",
        _multinomial(F32, 5, [37, 42]),
        [_arr(_ONE_HOT_LOGITS, F32)],
        [_arr([[0] * 5, [2] * 5], I32)],
    ),
    Example(
        "random_multinomial_fp16_single_class",
        _multinomial(F16, 4, [0, 0]),
        [_arr(_ONE_HOT_LOGITS, F16)],
        [_arr([[0] * 4, [2] * 4], I32)],
    ),
]

EXAMPLES = RNN_EXAMPLES + UNI_EXAMPLES + BIDI_EXAMPLES + SVDF_EXAMPLES + LSH_EXAMPLES + MULTINOMIAL_EXAMPLES
