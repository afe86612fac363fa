"""drivers/common decodes NNAPI's runtime-neutral rules the way the reference computes them.

Each check builds a one-operation model, decodes it through ``OperationContext`` (the base of
every adapter's per-operation context) and compares with the reference executor: the data
movement the decoded shapes and permutations describe must give the reference's output, and
parameters the decoders reject must make the reference fail the execution too.
"""

from __future__ import annotations

import numpy as np
import pytest

from nnconform.driver.support import Rejected, Unsupported
from nnconform.drivers.common import activation, converter, op_params, quant_rules, types
from nnconform.errors import OpFailure
from nnconform.ir import ModelBuilder, Operand
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.executor import execute
from nnconform.reference.ops.conv_common import ConvParams

F32, I32, U8 = T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM


def _ctx(model) -> converter.OperationContext:
    return converter.OperationContext(model.main, 0)


def _one_op(op, x_type, x_dims, params, out_dims, *, out_type=None, scale=0.0, zero_point=0):
    """A model: input 0 of ``x_dims``, ``params`` (callables on the builder) after it."""
    b = ModelBuilder()
    x = b.input(x_type, x_dims, scale=scale, zero_point=zero_point)
    y = b.output(out_type or x_type, out_dims, scale=scale, zero_point=zero_point)
    b.operation(op, [x] + [p(b) for p in params], [y])
    return b.build()


def _i32s(values):
    return lambda b: b.const(I32, [len(values)], np.asarray(values, np.int32))


def _i32_matrix(rows):
    arr = np.asarray(rows, np.int32)
    return lambda b: b.const(I32, list(arr.shape), arr)


def test_space_to_batch_shapes_move_data_as_the_reference():
    model = _one_op(
        Op.SPACE_TO_BATCH_ND, F32, [2, 3, 5, 4], [_i32s([2, 3]), _i32_matrix([[1, 0], [0, 1]])], [12, 2, 2, 4]
    )
    x = np.arange(2 * 3 * 5 * 4, dtype=np.float32).reshape(2, 3, 5, 4)
    p = op_params.batch_space(_ctx(model))
    assert (p.to_batch, p.block_h, p.block_w, p.pads, p.padded) == (True, 2, 3, (1, 0, 0, 1), (4, 6))
    view, perm, shape = p.space_to_batch_shapes()
    padded = np.pad(x, ((0, 0), (1, 0), (0, 1), (0, 0)))
    np.testing.assert_array_equal(padded.reshape(view).transpose(perm).reshape(shape), execute(model, [x])[0])


def test_batch_to_space_shapes_move_data_as_the_reference_nchw():
    b = ModelBuilder()
    x = b.input(F32, [8, 3, 2, 2])
    y = b.output(F32, [2, 3, 4, 4])
    b.operation(Op.BATCH_TO_SPACE_ND, [x, b.const(I32, [2], np.array([2, 2], np.int32)), b.bool(True)], [y])
    model = b.build()
    xv = np.arange(8 * 3 * 2 * 2, dtype=np.float32).reshape(8, 3, 2, 2)
    p = op_params.batch_space(_ctx(model))
    assert p.nchw and (p.batch, p.height, p.width, p.channels) == (8, 2, 2, 3)
    view, perm, shape = p.batch_to_space_shapes()
    nhwc = xv.transpose(0, 2, 3, 1).reshape(view).transpose(perm).reshape(shape)
    np.testing.assert_array_equal(nhwc.transpose(0, 3, 1, 2), execute(model, [xv])[0])


def test_a_block_that_does_not_divide_is_rejected_as_the_reference_fails():
    model = _one_op(Op.BATCH_TO_SPACE_ND, F32, [3, 2, 2, 1], [_i32s([2, 1])], [1, 4, 2, 1])
    with pytest.raises(Rejected, match="batch 3"):
        op_params.batch_space(_ctx(model))
    with pytest.raises(OpFailure):
        execute(model, [np.zeros((3, 2, 2, 1), np.float32)])


@pytest.mark.parametrize("groups, axis", [(2, -1), (3, 1), (1, 0)])
def test_channel_shuffle_view_and_permutation_match_the_reference(groups, axis):
    dims = [6, 6, 6]
    model = _one_op(Op.CHANNEL_SHUFFLE, F32, dims, [lambda b: b.i32(groups), lambda b: b.i32(axis)], dims)
    s = op_params.channel_shuffle(_ctx(model))
    x = np.arange(216, dtype=np.float32).reshape(dims)
    np.testing.assert_array_equal(x.reshape(s.grouped).transpose(s.perm).reshape(s.dims), execute(model, [x])[0])


def test_channel_shuffle_groups_that_do_not_divide_are_rejected():
    model = _one_op(Op.CHANNEL_SHUFFLE, F32, [1, 5], [lambda b: b.i32(2), lambda b: b.i32(1)], [1, 5])
    with pytest.raises(Rejected):
        op_params.channel_shuffle(_ctx(model))
    with pytest.raises(OpFailure):
        execute(model, [np.zeros((1, 5), np.float32)])


def test_resize_sizes_from_scales_are_the_references():
    b = ModelBuilder()
    x = b.input(F32, [1, 3, 5, 1])
    y = b.output(F32, [0, 0, 0, 0])
    b.operation(Op.RESIZE_NEAREST_NEIGHBOR, [x, b.f32(1.7), b.f32(2.5), b.bool(False), b.bool(True)], [y])
    model = b.build()
    r = op_params.resize(_ctx(model))
    xv = np.arange(15, dtype=np.float32).reshape(1, 3, 5, 1)
    expected = execute(model, [xv])[0]
    assert (r.in_h, r.in_w, r.out_h, r.out_w, r.align) == (3, 5, expected.shape[1], expected.shape[2], True)
    rows, cols = r.nearest()
    np.testing.assert_array_equal(xv[:, rows][:, :, cols], expected)


def test_resize_with_unknown_input_needs_it_only_for_scales():
    b = ModelBuilder()
    x = b.input(F32, [1, 0, 0, 1])
    y = b.output(F32, [1, 4, 6, 1])
    b.operation(Op.RESIZE_BILINEAR, [x, b.i32(6), b.i32(4)], [y])
    r = op_params.resize(_ctx(b.build()), known_input=False)
    assert (r.out_h, r.out_w) == (4, 6)
    with pytest.raises(Unsupported):
        op_params.resize(_ctx(b.build()))


def test_transpose_without_perm_beyond_2d_is_rejected_as_the_reference_fails():
    b = ModelBuilder()
    x = b.input(F32, [2, 3, 4])
    y = b.output(F32, [4, 3, 2])
    b.operation(Op.TRANSPOSE, [x, b.omitted(I32)], [y])
    model = b.build()
    with pytest.raises(Rejected):
        op_params.transpose_perm(_ctx(model))
    with pytest.raises(OpFailure):
        execute(model, [np.zeros((2, 3, 4), np.float32)])


def test_paddings_and_pad_values():
    model = _one_op(
        Op.PAD_V2, U8, [2, 2], [_i32_matrix([[1, 0], [0, 2]]), lambda b: b.i32(300)], [3, 4], scale=0.5, zero_point=7
    )
    c = _ctx(model)
    np.testing.assert_array_equal(op_params.paddings(c), [[1, 0], [0, 2]])
    # PAD_V2's value is stored as is and only its low byte counts; PAD pads with real 0.
    assert int(types.pad_fill(c, c.ins[0], 2)) == 300 % 256
    assert int(types.pad_fill(c, c.ins[0], None)) == 7
    xv = np.arange(4, dtype=np.uint8).reshape(2, 2)
    assert execute(model, [xv])[0][0, 0] == 300 % 256


def test_reductions_and_the_sequential_fold():
    assert op_params.reduced_shape([2, 3, 4], [1], True) == [2, 1, 4]
    assert op_params.reduced_shape([2, 3, 4], [0, 1, 2], False) == [1]
    fold = op_params.sequential_fold([2, 3, 4], [0, 2], False)
    assert (fold.count, fold.perm, fold.shape) == (8, [1, 0, 2], [3])
    with pytest.raises(Unsupported, match="unrolled"):
        op_params.sequential_fold([32, 32], [0, 1], True)


def test_backprop_padding_turns_a_negative_tail_into_output_padding():
    p = ConvParams(1, -1, 0, 0, 2, 2, 1, 1, 0, False, ())
    bp = op_params.backprop_padding(p)
    assert (bp.begin, bp.end, bp.output_padding) == ((1, 0), (0, 0), (1, 0))
    with pytest.raises(Unsupported):
        op_params.backprop_padding(ConvParams(0, -2, 0, 0, 2, 2, 1, 1, 0, False, ()))


def test_dequantization_per_tensor():
    model = _one_op(Op.DEQUANTIZE, U8, [2, 2], [], [2, 2], out_type=F32, scale=0.25, zero_point=3)
    d = op_params.dequantize(_ctx(model))
    xv = np.array([[0, 3], [7, 255]], np.uint8)
    np.testing.assert_array_equal(
        d.scale_for(model.main.operands[0]) * (xv.astype(np.float32) - d.zero_point), execute(model, [xv])[0]
    )


def test_activation_bounds():
    assert activation.float_bounds(activation.NONE) is None
    assert activation.float_bounds(activation.RELU) == (0.0, None)
    with pytest.raises(Unsupported):
        activation.check(7)
    out = Operand(U8, (1,), 1.0, 0)
    assert activation.quant_bounds(activation.NONE, out) is None
    assert activation.quant_bounds(2, out) == (0, 1)  # RELU1: [-1, 1] -> [0, 1]


def test_add_sub_multipliers_negate_input_1_for_sub():
    a, c, o = Operand(U8, (1,), 0.5), Operand(U8, (1,), 0.25), Operand(U8, (1,), 1.0)
    add = quant_rules.add_sub_multipliers(a, c, o, False)
    sub = quant_rules.add_sub_multipliers(a, c, o, True)
    assert add[0] == sub[0] and add[2] == sub[2] and sub[1] == (-add[1][0], add[1][1])
    with pytest.raises(Rejected):
        quant_rules.multiplier_below_one(1.5, "output")


def test_storage_table_covers_every_stored_type():
    table = types.storage_table("f32", "f16", "i32", "b", "u8", "i8")
    assert tuple(table) == types.STORED_TYPES and len(table) == 12
    assert {table[T.TENSOR_QUANT8_SYMM_PER_CHANNEL], table[T.TENSOR_QUANT8_ASYMM_SIGNED]} == {"i8"}


def test_by_name_registers_conv_functions_and_explicit_entries_win():
    def conv_squeeze(c):
        return "squeeze"

    def conv_helper(c):  # no operation of that name: not registered
        return "helper"

    def shared(c):
        return "shared"

    table = converter.by_name(
        {"conv_squeeze": conv_squeeze, "conv_helper": conv_helper, "conv_pad": 3},
        {Op.PAD: shared, Op.PAD_V2: shared, Op.SQUEEZE: shared},
    )
    assert table == {Op.PAD: shared, Op.PAD_V2: shared, Op.SQUEEZE: shared}
    assert converter.by_name({"conv_squeeze": conv_squeeze}, {}) == {Op.SQUEEZE: conv_squeeze}
