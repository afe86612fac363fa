"""CONCATENATION, RESHAPE, QUANTIZE, DEQUANTIZE, CAST, SQUEEZE, EXPAND_DIMS, TRANSPOSE, FILL,
RANK, SELECT, REVERSE, PACK, TILE: hand-checked examples, signature validation and the AOSP
golden vectors."""

import numpy as np
import pytest
from helpers import assert_examples_cover, check_example

from nnconform.cases import vectors
from nnconform.errors import ValidationError
from nnconform.ir import ChannelQuant, ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.executor import execute
from nnconform.reference.ops.registry import OpView, get_op
from nnconform.suites.examples import data_movement_a

F32, F16, I32 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32
Q8, Q8S = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED

OPS = (
    Op.CONCATENATION,
    Op.RESHAPE,
    Op.QUANTIZE,
    Op.DEQUANTIZE,
    Op.CAST,
    Op.SQUEEZE,
    Op.EXPAND_DIMS,
    Op.TRANSPOSE,
    Op.FILL,
    Op.RANK,
    Op.SELECT,
    Op.REVERSE,
    Op.PACK,
    Op.TILE,
)
OP_NAMES = {o.name for o in OPS}


# ---- (a) hand-checked examples ------------------------------------------------------------


@pytest.mark.parametrize("ex", data_movement_a.EXAMPLES, ids=lambda e: e.name)
def test_example(ex):
    check_example(ex)


def test_every_op_and_type_has_an_example():
    assert_examples_cover(OPS, data_movement_a.EXAMPLES)


def test_quantize_rounds_just_below_half_down():
    # 0.49999997 is the float32 just below 0.5: std::round gives 0, floor(x + 0.5) would give 1.
    b = ModelBuilder()
    x = b.input(F32, [2])
    b.operation(Op.QUANTIZE, [x], [b.output(Q8, [2], scale=1.0, zero_point=100)])
    (out,) = execute(b.build(), [np.array([0.49999997, -0.49999997], np.float32)])
    assert out.tolist() == [100, 100]


def test_reshape_output_is_a_copy_of_a_constant():
    b = ModelBuilder()
    x = b.const(F32, [2], [1, 2])
    b.operation(Op.RESHAPE, [x, b.const(I32, [2], [1, 2])], [b.output(F32, [1, 2])])
    (out,) = execute(b.build(), [])
    out[0, 0] = 5  # must not write into the model's read-only constant
    assert out.tolist() == [[5, 2]]


def test_rank_of_unknown_rank_operand_is_the_run_time_rank():
    b = ModelBuilder()
    x = b.input(F32, [])
    b.operation(Op.RANK, [x], [b.output(T.INT32, [])])
    (out,) = execute(b.build(), [np.zeros((1, 2, 3), np.float32)])
    assert out.dtype == np.int32 and out.shape == () and int(out) == 3


def test_dynamic_output_shape_is_filled_in():
    # Output dims left unknown (0): the executor takes the computed [3, 2].
    b = ModelBuilder()
    x = b.input(F32, [2, 3])
    b.operation(Op.TRANSPOSE, [x, b.const(I32, [2], [1, 0])], [b.output(F32, [0, 0])])
    (out,) = execute(b.build(), [np.arange(6, dtype=np.float32).reshape(2, 3)])
    assert out.shape == (3, 2) and out[2, 1] == 5


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


def inp(t, dims, scale=0.0, zp=0, **kw):
    return lambda b: b.input(t, dims, scale=scale, zero_point=zp, **kw)


def const(t, dims, value):
    return lambda b: b.const(t, dims, value)


def i32(v):
    return lambda b: b.i32(v)


def omitted(t=I32):
    return lambda b: b.omitted(t, [0])


BAD = [
    # (id, operation, inputs, outputs, text expected in the message, where: "input k"/"output k"/None)
    ("concat_one_input", Op.CONCATENATION, [inp(F32, [2])], [(F32, [2])], "at least 2", None),
    ("concat_int32", Op.CONCATENATION, [inp(I32, [2]), inp(I32, [2]), i32(0)], [(I32, [4])], "TENSOR_INT32", "input 0"),
    (
        "concat_mixed_types",
        Op.CONCATENATION,
        [inp(F32, [2]), inp(F16, [2]), i32(0)],
        [(F32, [4])],
        "differs",
        "input 1",
    ),
    (
        "concat_axis_not_int32",
        Op.CONCATENATION,
        [inp(F32, [2]), inp(F32, [2]), inp(F32, [1])],
        [(F32, [4])],
        "INT32",
        "input 2",
    ),
    (
        "concat_rank5",
        Op.CONCATENATION,
        [inp(F32, [1] * 5), inp(F32, [1] * 5), i32(0)],
        [(F32, [2] + [1] * 4)],
        "rank",
        "input 0",
    ),
    ("concat_axis_range", Op.CONCATENATION, [inp(F32, [2]), inp(F32, [2]), i32(1)], [(F32, [4])], "axis 1", "input 2"),
    (
        "concat_rank_mismatch",
        Op.CONCATENATION,
        [inp(F32, [2]), inp(F32, [2, 1]), i32(0)],
        [(F32, [4])],
        "different ranks",
        "input 1",
    ),
    ("reshape_shape_float", Op.RESHAPE, [inp(F32, [4]), inp(F32, [2])], [(F32, [2, 2])], "TENSOR_INT32", "input 1"),
    (
        "reshape_quant_change",
        Op.RESHAPE,
        [inp(Q8, [4], 0.5, 1), const(I32, [1], [4])],
        [(Q8, [4], 0.25, 1)],
        "scale/zero point",
        "output 0",
    ),
    (
        "reshape_two_minus_ones",
        Op.RESHAPE,
        [inp(F32, [4]), const(I32, [2], [-1, -1])],
        [(F32, [2, 2])],
        "more than one -1",
        "input 1",
    ),
    ("reshape_bad_count", Op.RESHAPE, [inp(F32, [4]), const(I32, [1], [5])], [(F32, [5])], "5 elements", "input 1"),
    ("reshape_rank5", Op.RESHAPE, [inp(F32, [1] * 5), const(I32, [1], [1])], [(F32, [1])], "rank", "input 0"),
    ("reshape_int32_to_float", Op.RESHAPE, [inp(I32, [4]), const(I32, [1], [4])], [(F32, [4])], "differs", "output 0"),
    (
        "reshape_bool",
        Op.RESHAPE,
        [inp(T.TENSOR_BOOL8, [4]), const(I32, [1], [4])],
        [(T.TENSOR_BOOL8, [4])],
        "TENSOR_BOOL8",
        "input 0",
    ),
    ("squeeze_int32", Op.SQUEEZE, [inp(I32, [1, 2]), omitted()], [(I32, [2])], "TENSOR_INT32", "input 0"),
    (
        "squeeze_bool",
        Op.SQUEEZE,
        [inp(T.TENSOR_BOOL8, [1]), omitted()],
        [(T.TENSOR_BOOL8, [1])],
        "TENSOR_BOOL8",
        "input 0",
    ),
    ("squeeze_non_one_axis", Op.SQUEEZE, [inp(F32, [2, 1]), const(I32, [1], [0])], [(F32, [1])], "size 2", "input 1"),
    ("squeeze_axis_range", Op.SQUEEZE, [inp(F32, [1, 1]), const(I32, [1], [2])], [(F32, [1])], "outside", "input 1"),
    ("squeeze_type_change", Op.SQUEEZE, [inp(F32, [1, 2]), omitted()], [(F16, [2])], "differs", "output 0"),
    (
        "expand_dims_axis_tensor",
        Op.EXPAND_DIMS,
        [inp(F32, [2]), const(I32, [1], [0])],
        [(F32, [1, 2])],
        "INT32",
        "input 1",
    ),
    ("expand_dims_axis_range", Op.EXPAND_DIMS, [inp(F32, [2]), i32(-3)], [(F32, [1, 2])], "outside", "input 1"),
    (
        "expand_dims_quant_change",
        Op.EXPAND_DIMS,
        [inp(Q8S, [2], 0.5, 0), i32(0)],
        [(Q8S, [1, 2], 0.5, 1)],
        "scale/zero point",
        "output 0",
    ),
    ("transpose_int32", Op.TRANSPOSE, [inp(I32, [2, 2]), omitted()], [(I32, [2, 2])], "TENSOR_INT32", "input 0"),
    (
        "transpose_not_a_permutation",
        Op.TRANSPOSE,
        [inp(F32, [2, 2]), const(I32, [2], [0, 0])],
        [(F32, [2, 2])],
        "not a permutation",
        "input 1",
    ),
    (
        "transpose_perm_length",
        Op.TRANSPOSE,
        [inp(F32, [2, 2]), const(I32, [3], [0, 1, 2])],
        [(F32, [2, 2])],
        "3 entries",
        "input 1",
    ),
    (
        "transpose_omitted_perm_rank3",
        Op.TRANSPOSE,
        [inp(F32, [1, 2, 2]), omitted()],
        [(F32, [2, 2, 1])],
        "2-D",
        "input 0",
    ),
    ("quantize_int_input", Op.QUANTIZE, [inp(I32, [2])], [(Q8, [2], 0.5, 0)], "TENSOR_FLOAT32", "input 0"),
    (
        "quantize_to_symm",
        Op.QUANTIZE,
        [inp(F32, [2])],
        [(T.TENSOR_QUANT8_SYMM, [2], 0.5, 0)],
        "TENSOR_QUANT8_ASYMM",
        "output 0",
    ),
    ("quantize_zero_scale", Op.QUANTIZE, [inp(F32, [2])], [(Q8, [2], 0.0, 0)], "scale", "output 0"),
    ("dequantize_from_float", Op.DEQUANTIZE, [inp(F32, [2])], [(F32, [2])], "TENSOR_QUANT8_ASYMM", "input 0"),
    ("dequantize_to_int", Op.DEQUANTIZE, [inp(Q8, [2], 0.5, 0)], [(I32, [2])], "TENSOR_FLOAT32", "output 0"),
    ("dequantize_rank5", Op.DEQUANTIZE, [inp(Q8, [1] * 5, 0.5, 0)], [(F32, [1] * 5)], "rank", "input 0"),
    ("cast_signed_to_float", Op.CAST, [inp(Q8S, [2], 0.5, 0)], [(F32, [2])], "only be cast to itself", "output 0"),
    ("cast_float_to_bool", Op.CAST, [inp(F32, [2])], [(T.TENSOR_BOOL8, [2])], "cannot cast", "output 0"),
    ("cast_shape_change", Op.CAST, [inp(F32, [2, 3])], [(I32, [6])], "differs", "output 0"),
    ("cast_two_inputs", Op.CAST, [inp(F32, [2]), inp(F32, [2])], [(F32, [2])], "takes 1", None),
    (
        "fill_value_type",
        Op.FILL,
        [const(I32, [1], [2]), lambda b: b.f32(1.0)],
        [(I32, [2])],
        "must be INT32",
        "input 1",
    ),
    ("fill_quant_output", Op.FILL, [const(I32, [1], [2]), i32(1)], [(Q8, [2], 0.5, 0)], "TENSOR_FLOAT16", "output 0"),
    ("fill_negative_dim", Op.FILL, [const(I32, [1], [-2]), i32(1)], [(I32, [2])], "negative", "input 0"),
    ("rank_scalar_input", Op.RANK, [i32(3)], [(T.INT32, [])], "TENSOR", "input 0"),
    ("rank_tensor_output", Op.RANK, [inp(F32, [2])], [(I32, [1])], "INT32", "output 0"),
    (
        "select_cond_not_bool",
        Op.SELECT,
        [inp(I32, [2]), inp(F32, [2]), inp(F32, [2])],
        [(F32, [2])],
        "TENSOR_BOOL8",
        "input 0",
    ),
    (
        "select_type_mismatch",
        Op.SELECT,
        [inp(T.TENSOR_BOOL8, [2]), inp(F32, [2]), inp(F16, [2])],
        [(F32, [2])],
        "differs",
        "input 2",
    ),
    (
        "select_shape_mismatch",
        Op.SELECT,
        [inp(T.TENSOR_BOOL8, [2]), inp(F32, [2]), inp(F32, [3])],
        [(F32, [2])],
        "differs",
        "input 2",
    ),
    (
        "tile_multiples_length",
        Op.TILE,
        [inp(F32, [2, 2]), const(I32, [1], [2])],
        [(F32, [4, 2])],
        "1 multiples",
        "input 1",
    ),
    ("tile_negative_multiple", Op.TILE, [inp(F32, [2]), const(I32, [1], [-1])], [(F32, [2])], "negative", "input 1"),
    (
        "tile_quant_change",
        Op.TILE,
        [inp(Q8, [2], 0.5, 0), const(I32, [1], [1])],
        [(Q8, [2], 0.5, 2)],
        "scale/zero point",
        "output 0",
    ),
    (
        "reverse_axis_shape",
        Op.REVERSE,
        [inp(F32, [2, 2]), const(I32, [2], [0, 1])],
        [(F32, [2, 2])],
        "shape [1]",
        "input 1",
    ),
    ("reverse_axis_range", Op.REVERSE, [inp(F32, [2]), const(I32, [1], [1])], [(F32, [2])], "outside", "input 1"),
    ("reverse_rank9", Op.REVERSE, [inp(F32, [1] * 9), const(I32, [1], [0])], [(F32, [1] * 9)], "rank", "input 0"),
    (
        "reverse_quant8_symm",
        Op.REVERSE,
        [inp(T.TENSOR_QUANT8_SYMM, [2], 0.5), const(I32, [1], [0])],
        [(T.TENSOR_QUANT8_SYMM, [2], 0.5)],
        "TENSOR_QUANT8_SYMM",
        "input 0",
    ),
    ("pack_axis_tensor", Op.PACK, [inp(I32, [1]), inp(F32, [2])], [(F32, [1, 2])], "INT32", "input 0"),
    ("pack_type_mismatch", Op.PACK, [i32(0), inp(F32, [2]), inp(F16, [2])], [(F32, [2, 2])], "differs", "input 2"),
    (
        "pack_quant_mismatch",
        Op.PACK,
        [i32(0), inp(Q8, [2], 0.5, 0)],
        [(Q8, [1, 2], 0.5, 1)],
        "scale/zero point",
        "input 1",
    ),
    ("pack_rank_mismatch", Op.PACK, [i32(0), inp(F32, [2, 1])], [(F32, [1, 2])], "rank 2", "input 1"),
    ("pack_axis_range", Op.PACK, [i32(2), inp(F32, [2])], [(F32, [2, 1])], "outside", "input 0"),
    ("pack_no_tensor", Op.PACK, [i32(0)], [(F32, [1])], "at least one tensor", None),
]


@pytest.mark.parametrize("case", BAD, ids=lambda c: c[0])
def test_validate_rejects(case):
    name, op, inputs, outputs, text, where = case
    model = _model(op, inputs, outputs)
    with pytest.raises(ValidationError) as info:
        get_op(op).validate(OpView(model, model.main, 0))
    msg = str(info.value)
    assert op.name in msg and text in msg, msg
    if where is not None:
        assert f"{op.name}) {where}" in msg, msg


def test_validate_accepts_unknown_shapes():
    # Unknown rank / dims must not trip the static checks.
    for op, inputs, outputs in [
        (Op.CONCATENATION, [inp(F32, []), inp(F32, [0, 2]), i32(1)], [(F32, [])]),
        (Op.RESHAPE, [inp(Q8, [], 0.5, 1), inp(I32, [0])], [(Q8, [], 0.5, 1)]),
        (Op.SQUEEZE, [inp(F32, [0, 1]), const(I32, [1], [1])], [(F32, [0])]),
        (Op.TRANSPOSE, [inp(F32, []), inp(I32, [])], [(F32, [])]),
        (Op.PACK, [i32(1), inp(F32, []), inp(F32, [2])], [(F32, [])]),
        (Op.REVERSE, [inp(I32, []), inp(I32, [0])], [(I32, [])]),
    ]:
        model = _model(op, inputs, outputs)
        get_op(op).validate(OpView(model, model.main, 0))


def test_dequantize_per_channel_needs_matching_scales():
    b = ModelBuilder()
    x = b.input(T.TENSOR_QUANT8_SYMM_PER_CHANNEL, [2, 3], channel_quant=ChannelQuant((1.0, 2.0), 1))
    b.operation(Op.DEQUANTIZE, [x], [b.output(F32, [2, 3])])
    model = b.build()
    with pytest.raises(ValidationError, match="DEQUANTIZE.*2 scales for 3 channels"):
        get_op(Op.DEQUANTIZE).validate(OpView(model, model.main, 0))


# ---- (c) AOSP golden vectors ---------------------------------------------------------------


def _own_cases():
    own = vectors.load_cases(vectors.default_root(), ops=sorted(OP_NAMES), within=sorted(OP_NAMES))
    return [pytest.param(c, id=c.test_id) for c in own]


@pytest.mark.parametrize("case", _own_cases())
def test_aosp_vector(case):
    status, msg = vectors.check_case(case)
    assert status == "pass", msg
