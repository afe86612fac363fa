"""PAD, PAD_V2, MIRROR_PAD, SLICE, STRIDED_SLICE, SPLIT, GATHER, DEPTH_TO_SPACE, SPACE_TO_DEPTH,
BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND, CHANNEL_SHUFFLE, EMBEDDING_LOOKUP, HASHTABLE_LOOKUP:
hand-checked examples, signature validation and the AOSP golden vectors."""

import numpy as np
import pytest
from helpers import assert_examples_cover, assert_vector_passes, check_example, vector_params

from nnconform.errors import ValidationError
from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.executor import execute
from nnconform.reference.ops.registry import OpView, get_op
from nnconform.suites.examples import data_movement_b

F32, F16, I32 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32
Q8, Q8S = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED

OPS = (
    Op.PAD,
    Op.PAD_V2,
    Op.MIRROR_PAD,
    Op.SLICE,
    Op.STRIDED_SLICE,
    Op.SPLIT,
    Op.GATHER,
    Op.DEPTH_TO_SPACE,
    Op.SPACE_TO_DEPTH,
    Op.BATCH_TO_SPACE_ND,
    Op.SPACE_TO_BATCH_ND,
    Op.CHANNEL_SHUFFLE,
    Op.EMBEDDING_LOOKUP,
    Op.HASHTABLE_LOOKUP,
)
OP_NAMES = {o.name for o in OPS}


# ---- (a) hand-checked examples ------------------------------------------------------------


@pytest.mark.parametrize("ex", data_movement_b.EXAMPLES, ids=lambda e: e.name)
def test_example(ex):
    check_example(ex)


def test_every_op_and_type_has_an_example():
    assert_examples_cover(OPS, data_movement_b.EXAMPLES)


def test_pad_v2_quant8_keeps_low_byte_of_pad_value():
    # The reference reads the INT32 pad value as a byte: 300 pads like 44, -1 like 255.
    for value, fill in ((300, 44), (-1, 255)):
        b = ModelBuilder()
        x = b.input(Q8, [1], scale=1.0)
        b.operation(Op.PAD_V2, [x, b.const(I32, [1, 2], [1, 0]), b.i32(value)], [b.output(Q8, [2], scale=1.0)])
        (out,) = execute(b.build(), [np.array([9], np.uint8)])
        assert out.tolist() == [fill, 9]


def test_hashtable_hits_are_uint8_and_misses_zero_rows():
    ex = next(e for e in data_movement_b.EXAMPLES if e.name == "hashtable_lookup_quant8_miss_is_zero_byte")
    out, hits = execute(ex.model, list(ex.inputs))
    assert hits.dtype == np.uint8 and out[1].tolist() == [0]


# ---- (b) validation rejects bad uses -------------------------------------------------------


def _model(op, inputs, outputs):
    """``inputs``: callables b -> operand index; ``outputs``: (type, dims[, scale, zp])."""
    b = ModelBuilder()
    ins = [f(b) for f in inputs]
    outs = [
        b.output(o[0], o[1], scale=o[2] if len(o) > 2 else 0.0, zero_point=o[3] if len(o) > 3 else 0) for o in outputs
    ]
    b.operation(op, ins, outs)
    return b.build()


def inp(t, dims, scale=0.0, zp=0):
    return lambda b: b.input(t, dims, scale=scale, zero_point=zp)


def const(t, dims, values):
    return lambda b: b.const(t, dims, values)


def i32(v):
    return lambda b: b.i32(v)


def scalar(t, v):
    return lambda b: b.const(t, (), v)


PADS22 = const(I32, [2, 2], [0, 1, 1, 0])
BAD = [
    # (id, op, inputs, outputs, expected words in the location)
    ("pad_three_inputs", Op.PAD, [inp(F32, [2, 2]), PADS22, i32(0)], [(F32, [3, 3])], None),
    ("pad_float_paddings", Op.PAD, [inp(F32, [2, 2]), const(F32, [2, 2], [0, 1, 1, 0])], [(F32, [3, 3])], "input 1"),
    (
        "pad_rank5",
        Op.PAD,
        [inp(F32, [1, 1, 1, 1, 2]), const(I32, [5, 2], [0] * 10)],
        [(F32, [1, 1, 1, 1, 2])],
        "input 0",
    ),
    (
        "pad_negative_constant",
        Op.PAD,
        [inp(F32, [2, 2]), const(I32, [2, 2], [0, -1, 1, 0])],
        [(F32, [2, 3])],
        "input 1",
    ),
    ("pad_paddings_rows_vs_rank", Op.PAD, [inp(F32, [2, 2]), const(I32, [3, 2], [0] * 6)], [(F32, [2, 2])], "input 1"),
    ("pad_quant_output_scale", Op.PAD, [inp(Q8, [2, 2], 0.5, 0), PADS22], [(Q8, [3, 3], 0.25, 0)], "output 0"),
    ("pad_int32_input", Op.PAD, [inp(I32, [2, 2]), PADS22], [(I32, [3, 3])], "input 0"),
    (
        "pad_v2_float_value_for_quant",
        Op.PAD_V2,
        [inp(Q8, [2, 2], 0.5, 0), PADS22, scalar(T.FLOAT32, 0.0)],
        [(Q8, [3, 3], 0.5, 0)],
        "input 2",
    ),
    (
        "pad_v2_fp16_value_for_fp32",
        Op.PAD_V2,
        [inp(F32, [2, 2]), PADS22, scalar(T.FLOAT16, 0.0)],
        [(F32, [3, 3])],
        "input 2",
    ),
    ("mirror_pad_bad_mode", Op.MIRROR_PAD, [inp(F32, [2, 2]), PADS22, i32(2)], [(F32, [3, 3])], "input 2"),
    ("mirror_pad_output_type", Op.MIRROR_PAD, [inp(F32, [2, 2]), PADS22, i32(0)], [(F16, [3, 3])], "output 0"),
    (
        "mirror_pad_bool_input",
        Op.MIRROR_PAD,
        [inp(T.TENSOR_BOOL8, [2, 2]), PADS22, i32(0)],
        [(T.TENSOR_BOOL8, [3, 3])],
        "input 0",
    ),
    (
        "slice_float_begin",
        Op.SLICE,
        [inp(F32, [3]), const(F32, [1], [0]), const(I32, [1], [1])],
        [(F32, [1])],
        "input 1",
    ),
    (
        "slice_begin_length",
        Op.SLICE,
        [inp(F32, [3, 3]), const(I32, [1], [0]), const(I32, [2], [1, 1])],
        [(F32, [1, 1])],
        "input 1",
    ),
    (
        "slice_quant_output_zero_point",
        Op.SLICE,
        [inp(Q8S, [3], 1.0, 0), const(I32, [1], [0]), const(I32, [1], [1])],
        [(Q8S, [1], 1.0, 5)],
        "output 0",
    ),
    (
        "strided_slice_zero_stride",
        Op.STRIDED_SLICE,
        [inp(F32, [3]), const(I32, [1], [0]), const(I32, [1], [3]), const(I32, [1], [0]), i32(0), i32(0), i32(0)],
        [(F32, [3])],
        "input 3",
    ),
    (
        "strided_slice_rank5",
        Op.STRIDED_SLICE,
        [
            inp(F32, [1, 1, 1, 1, 1]),
            const(I32, [5], [0] * 5),
            const(I32, [5], [1] * 5),
            const(I32, [5], [1] * 5),
            i32(0),
            i32(0),
            i32(0),
        ],
        [(F32, [1, 1, 1, 1, 1])],
        "input 0",
    ),
    (
        "strided_slice_six_inputs",
        Op.STRIDED_SLICE,
        [inp(F32, [3]), const(I32, [1], [0]), const(I32, [1], [3]), const(I32, [1], [1]), i32(0), i32(0)],
        [(F32, [3])],
        None,
    ),
    ("split_count_mismatch", Op.SPLIT, [inp(F32, [6]), i32(0), i32(3)], [(F32, [3]), (F32, [3])], "input 2"),
    ("split_axis_range", Op.SPLIT, [inp(F32, [2, 2]), i32(2), i32(2)], [(F32, [1, 2]), (F32, [1, 2])], "input 1"),
    (
        "split_second_output_quant",
        Op.SPLIT,
        [inp(Q8, [2], 0.5, 1), i32(0), i32(2)],
        [(Q8, [1], 0.5, 1), (Q8, [1], 0.5, 2)],
        "output 1",
    ),
    ("gather_axis_range", Op.GATHER, [inp(F32, [2, 2]), i32(-3), const(I32, [1], [0])], [(F32, [1, 2])], "input 1"),
    ("gather_float_indices", Op.GATHER, [inp(F32, [2, 2]), i32(0), const(F32, [1], [0])], [(F32, [1, 2])], "input 2"),
    ("depth_to_space_block0", Op.DEPTH_TO_SPACE, [inp(F32, [1, 1, 1, 4]), i32(0)], [(F32, [1, 1, 1, 4])], "input 1"),
    ("depth_to_space_rank3", Op.DEPTH_TO_SPACE, [inp(F32, [1, 1, 4]), i32(2)], [(F32, [1, 2, 2, 1])], "input 0"),
    (
        "depth_to_space_int_layout",
        Op.DEPTH_TO_SPACE,
        [inp(F32, [1, 1, 1, 4]), i32(2), i32(0)],
        [(F32, [1, 2, 2, 1])],
        "input 2",
    ),
    ("space_to_depth_int32", Op.SPACE_TO_DEPTH, [inp(I32, [1, 2, 2, 1]), i32(2)], [(I32, [1, 1, 1, 4])], "input 0"),
    (
        "batch_to_space_block0",
        Op.BATCH_TO_SPACE_ND,
        [inp(F32, [4, 1, 1, 1]), const(I32, [2], [0, 2])],
        [(F32, [1, 1, 2, 1])],
        "input 1",
    ),
    (
        "batch_to_space_block_shape",
        Op.BATCH_TO_SPACE_ND,
        [inp(F32, [4, 1, 1, 1]), const(I32, [3], [1, 2, 2])],
        [(F32, [1, 2, 2, 1])],
        "input 1",
    ),
    (
        "space_to_batch_negative_padding",
        Op.SPACE_TO_BATCH_ND,
        [inp(F32, [1, 2, 2, 1]), const(I32, [2], [2, 2]), const(I32, [2, 2], [0, 0, -1, 1])],
        [(F32, [4, 1, 1, 1])],
        "input 2",
    ),
    (
        "space_to_batch_paddings_shape",
        Op.SPACE_TO_BATCH_ND,
        [inp(F32, [1, 2, 2, 1]), const(I32, [2], [2, 2]), const(I32, [2, 3], [0] * 6)],
        [(F32, [4, 1, 1, 1])],
        "input 2",
    ),
    ("channel_shuffle_zero_groups", Op.CHANNEL_SHUFFLE, [inp(F32, [4]), i32(0), i32(0)], [(F32, [4])], "input 1"),
    ("channel_shuffle_axis_range", Op.CHANNEL_SHUFFLE, [inp(F32, [2, 4]), i32(2), i32(2)], [(F32, [2, 4])], "input 2"),
    (
        "embedding_lookup_float_lookups",
        Op.EMBEDDING_LOOKUP,
        [inp(F32, [1]), inp(F32, [2, 2])],
        [(F32, [1, 2])],
        "input 0",
    ),
    ("embedding_lookup_values_rank1", Op.EMBEDDING_LOOKUP, [inp(I32, [1]), inp(F32, [2])], [(F32, [1])], "input 1"),
    (
        "embedding_lookup_output_scale",
        Op.EMBEDDING_LOOKUP,
        [inp(I32, [1]), inp(Q8, [2, 2], 0.5, 0)],
        [(Q8, [1, 2], 1.0, 0)],
        "output 0",
    ),
    (
        "hashtable_lookup_int32_hits",
        Op.HASHTABLE_LOOKUP,
        [inp(I32, [1]), inp(I32, [2]), inp(F32, [2, 2])],
        [(F32, [1, 2]), (I32, [1])],
        "output 1",
    ),
    (
        "hashtable_lookup_hits_scale",
        Op.HASHTABLE_LOOKUP,
        [inp(I32, [1]), inp(I32, [2]), inp(F32, [2, 2])],
        [(F32, [1, 2]), (Q8, [1], 0.5, 0)],
        "output 1",
    ),
    (
        "hashtable_lookup_fp16_values",
        Op.HASHTABLE_LOOKUP,
        [inp(I32, [1]), inp(I32, [2]), inp(F16, [2, 2])],
        [(F16, [1, 2]), (Q8, [1], 1.0, 0)],
        "input 2",
    ),
    (
        "hashtable_lookup_one_output",
        Op.HASHTABLE_LOOKUP,
        [inp(I32, [1]), inp(I32, [2]), inp(F32, [2, 2])],
        [(F32, [1, 2])],
        None,
    ),
]


@pytest.mark.parametrize("case_id, op, inputs, outputs, where", BAD, ids=[b[0] for b in BAD])
def test_validate_rejects(case_id, op, inputs, outputs, where):
    model = _model(op, inputs, outputs)
    with pytest.raises(ValidationError) as info:
        get_op(op).validate(OpView(model, model.main, 0))
    assert f"({op.name})" in info.value.where
    if where is not None:
        assert info.value.where.endswith(where), info.value.where


@pytest.mark.parametrize(
    "ex",
    [e for e in data_movement_b.EXAMPLES if not e.expect_failure][:1]
    + [
        e
        for e in data_movement_b.EXAMPLES
        if e.name
        in (
            "split_quant8",
            "hashtable_lookup_fp32",
            "space_to_batch_fp32_nchw",
            "mirror_pad_int32_symmetric_full",
            "strided_slice_fp32_masks",
        )
    ],
    ids=lambda e: e.name,
)
def test_validate_accepts_examples(ex):
    for i, op in enumerate(ex.model.main.operations):
        get_op(op.type).validate(OpView(ex.model, ex.model.main, i))


# ---- (c) AOSP golden vectors ---------------------------------------------------------------


@pytest.mark.parametrize("case", vector_params(OP_NAMES))
def test_aosp_vector(case):
    assert_vector_passes(case)
