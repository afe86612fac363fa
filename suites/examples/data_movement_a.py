"""Examples for CONCATENATION, RESHAPE, SQUEEZE, EXPAND_DIMS, TRANSPOSE, TILE, REVERSE, PACK,
QUANTIZE, DEQUANTIZE, CAST, FILL, RANK and SELECT.  Expected values worked out by hand; the
arithmetic of the quantised ones is in the comments."""

import numpy as np

from nnconform.ir import ChannelQuant, ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.suites.examples import Example

F32, F16, I32 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32
Q8, QS8 = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED


def f32(v):
    return np.array(v, np.float32)


def f16(v):
    return np.array(v, np.float16)


def i32(v):
    return np.array(v, np.int32)


def u8(v):
    return np.array(v, np.uint8)


def s8(v):
    return np.array(v, np.int8)


def _q(t, scale, zp):
    return {"scale": scale, "zero_point": zp} if t in (Q8, QS8) else {}


def _with_int_tensor(op, t, in_dims, out_dims, param, scale=0.5, zp=3, omit=False, param_type=I32):
    """One input tensor, one constant parameter (a TENSOR_INT32 or an INT32 scalar), one output
    of the same type and quantisation.  ``omit`` leaves the parameter out (NO_VALUE)."""
    b = ModelBuilder()
    x = b.input(t, in_dims, **_q(t, scale, zp))
    if omit:
        p = b.omitted(I32, [0])
    elif param_type == T.INT32:
        p = b.i32(param)
    else:
        p = b.const(I32, [len(param)], param)
    y = b.output(t, out_dims, **_q(t, scale, zp))
    b.operation(op, [x, p], [y])
    return b.build()


def _unary(op, tin, tout, dims, qin=(0.0, 0), qout=(0.0, 0), cq=None):
    b = ModelBuilder()
    x = b.input(tin, dims, scale=qin[0], zero_point=qin[1], channel_quant=cq)
    y = b.output(tout, dims, scale=qout[0], zero_point=qout[1])
    b.operation(op, [x], [y])
    return b.build()


# CONCATENATION ----------------------------------------------------------------------------


def _concat(t, in_dims, out_dims, axis, quants=None, out_q=(0.0, 0)):
    b = ModelBuilder()
    quants = quants or [(0.0, 0)] * len(in_dims)
    xs = [b.input(t, d, scale=s, zero_point=z) for d, (s, z) in zip(in_dims, quants)]
    y = b.output(t, out_dims, scale=out_q[0], zero_point=out_q[1])
    b.operation(Op.CONCATENATION, [*xs, b.i32(axis)], [y])
    return b.build()


def _concat_after_zero_sized_fill():
    # FILL makes a [2, 0] tensor (no elements); concatenating it on axis 1 changes nothing.
    b = ModelBuilder()
    empty = b.temp(F32, [2, 0])
    b.operation(Op.FILL, [b.const(I32, [2], [2, 0]), b.f32(9.0)], [empty])
    x = b.input(F32, [2, 2])
    y = b.output(F32, [2, 2])
    b.operation(Op.CONCATENATION, [empty, x, b.i32(1)], [y])
    return b.build()


CONCAT = [
    Example(
        "concat_fp32_axis0",
        _concat(F32, [[1, 2], [2, 2]], [3, 2], 0),
        [f32([[1, 2]]), f32([[3, 4], [5, 6]])],
        [f32([[1, 2], [3, 4], [5, 6]])],
    ),
    Example(
        "concat_fp16_last_axis",
        _concat(F16, [[1, 2, 2], [1, 2, 1]], [1, 2, 3], 2),
        [f16([[[1, 2], [4, 5]]]), f16([[[3], [6]]])],
        [f16([[[1, 2, 3], [4, 5, 6]]])],
    ),
    Example(
        "concat_fp32_zero_sized_input",
        _concat_after_zero_sized_fill(),
        [f32([[1, 2], [3, 4]])],
        [f32([[1, 2], [3, 4]])],
    ),
    Example(
        "concat_quant8_same_quant",
        _concat(Q8, [[2], [1]], [3], 0, [(0.5, 128)] * 2, (0.5, 128)),
        [u8([0, 255]), u8([7])],
        [u8([0, 255, 7])],
        note="equal quantisation: a plain copy",
    ),
    # Input 0 (scale 0.5, zp 100) into the output (scale 1, zp 10): s = 0.5, b = -50,
    #   100 -> round(0) + 10 = 10, 101 -> round(0.5) = 1 -> 11, 103 -> round(1.5) = 2 -> 12,
    #   0 -> -50 + 10 -> clamp 0, 99 -> round(-0.5) = -1 (half away from zero) -> 9.
    # Input 1 (scale 1, zp 0): only the zero point differs: 3 -> 13, 255 -> 265 -> clamp 255.
    Example(
        "concat_quant8_mixed_quant",
        _concat(Q8, [[5], [2]], [7], 0, [(0.5, 100), (1.0, 0)], (1.0, 10)),
        [u8([100, 101, 103, 0, 99]), u8([3, 255])],
        [u8([10, 11, 12, 0, 9, 13, 255])],
    ),
    # The same numbers shifted by -128 (zp -28, -128 and -118): the result shifts by -128 too.
    Example(
        "concat_quant8_signed_mixed_quant",
        _concat(QS8, [[5], [2]], [7], 0, [(0.5, -28), (1.0, -128)], (1.0, -118)),
        [s8([-28, -27, -25, -128, -29]), s8([-125, 127])],
        [s8([-118, -117, -116, -128, -119, -115, 127])],
    ),
    Example(
        "concat_fp32_negative_axis_fails",
        _concat(F32, [[1, 2], [1, 2]], [2, 2], -2),
        [f32([[1, 2]]), f32([[3, 4]])],
        [f32([[1, 2], [3, 4]])],
        expect_failure=True,
        note="the reference accepts only 0 <= axis < rank",
    ),
]

# RESHAPE / SQUEEZE / EXPAND_DIMS ----------------------------------------------------------

RESHAPE = [
    Example(
        "reshape_fp32_minus_one",
        _with_int_tensor(Op.RESHAPE, F32, [2, 3], [3, 2], [3, -1]),
        [f32([[1, 2, 3], [4, 5, 6]])],
        [f32([[1, 2], [3, 4], [5, 6]])],
    ),
    Example(
        "reshape_fp16",
        _with_int_tensor(Op.RESHAPE, F16, [1, 4], [2, 2], [2, 2]),
        [f16([[1, 2, 3, 4]])],
        [f16([[1, 2], [3, 4]])],
    ),
    Example(
        "reshape_quant8",
        _with_int_tensor(Op.RESHAPE, Q8, [4], [2, 2], [2, 2]),
        [u8([0, 1, 254, 255])],
        [u8([[0, 1], [254, 255]])],
    ),
    Example(
        "reshape_quant8_signed_flatten",
        _with_int_tensor(Op.RESHAPE, QS8, [2, 2], [4], [-1]),
        [s8([[-128, -1], [0, 127]])],
        [s8([-128, -1, 0, 127])],
    ),
    # TENSOR_INT32 data: NNAPI feature level 6.  Row-major order is kept; the extremes of the
    # type pass through untouched (a byte copy, no arithmetic).
    Example(
        "reshape_int32_minus_one",
        _with_int_tensor(Op.RESHAPE, I32, [2, 3], [3, 2], [-1, 2]),
        [i32([[1, -2, 3], [2147483647, -2147483648, 0]])],
        [i32([[1, -2], [3, 2147483647], [-2147483648, 0]])],
        note="[2, 3] -> [-1, 2]: the -1 is 6 / 2 = 3",
    ),
    Example(
        "reshape_int32_rank4_to_1",
        _with_int_tensor(Op.RESHAPE, I32, [1, 2, 1, 2], [4], [4]),
        [i32([[[[7, 8]], [[9, 10]]]])],
        [i32([7, 8, 9, 10])],
    ),
    Example(
        "reshape_int32_count_mismatch_fails",
        _with_int_tensor(Op.RESHAPE, I32, [2, 2], [3], [3]),
        [i32([[1, 2], [3, 4]])],
        [i32([0, 0, 0])],
        expect_failure=True,
        note="3 elements asked of a 4-element tensor",
    ),
    Example(
        "reshape_fp32_two_minus_ones_fails",
        _with_int_tensor(Op.RESHAPE, F32, [2, 2], [4, 1], [-1, -1]),
        [f32([[1, 2], [3, 4]])],
        [f32([[1], [2], [3], [4]])],
        expect_failure=True,
    ),
    Example(
        "reshape_fp32_count_mismatch_fails",
        _with_int_tensor(Op.RESHAPE, F32, [2, 2], [5], [5]),
        [f32([[1, 2], [3, 4]])],
        [f32([0, 0, 0, 0, 0])],
        expect_failure=True,
    ),
]

SQUEEZE = [
    Example(
        "squeeze_fp32_all_size_one_axes",
        _with_int_tensor(Op.SQUEEZE, F32, [1, 3, 1], [3], None, omit=True),
        [f32([[[1], [2], [3]]])],
        [f32([1, 2, 3])],
    ),
    Example(
        "squeeze_fp16_negative_axis",
        _with_int_tensor(Op.SQUEEZE, F16, [1, 2, 1], [1, 2], [-1]),
        [f16([[[1], [2]]])],
        [f16([[1, 2]])],
    ),
    Example(
        "squeeze_quant8_everything_gives_1",
        _with_int_tensor(Op.SQUEEZE, Q8, [1, 1], [1], None, omit=True),
        [u8([[42]])],
        [u8([42])],
        note="all axes squeezed: NNAPI gives shape [1]",
    ),
    Example(
        "squeeze_quant8_signed_axis0",
        _with_int_tensor(Op.SQUEEZE, QS8, [1, 2], [2], [0]),
        [s8([[-5, 5]])],
        [s8([-5, 5])],
    ),
    Example(
        "squeeze_fp32_size_two_axis_fails",
        _with_int_tensor(Op.SQUEEZE, F32, [2, 1], [1], [0]),
        [f32([[1], [2]])],
        [f32([1])],
        expect_failure=True,
    ),
]

EXPAND_DIMS = [
    Example(
        "expand_dims_fp32_axis0",
        _with_int_tensor(Op.EXPAND_DIMS, F32, [2], [1, 2], 0, param_type=T.INT32),
        [f32([1, 2])],
        [f32([[1, 2]])],
    ),
    Example(
        "expand_dims_fp16_axis_minus1",
        _with_int_tensor(Op.EXPAND_DIMS, F16, [2], [2, 1], -1, param_type=T.INT32),
        [f16([1, 2])],
        [f16([[1], [2]])],
        note="-1 counts from the end of the rank-2 output",
    ),
    Example(
        "expand_dims_int32_middle",
        _with_int_tensor(Op.EXPAND_DIMS, I32, [2, 2], [2, 1, 2], 1, param_type=T.INT32),
        [i32([[1, 2], [3, 4]])],
        [i32([[[1, 2]], [[3, 4]]])],
    ),
    Example(
        "expand_dims_quant8_last",
        _with_int_tensor(Op.EXPAND_DIMS, Q8, [3], [3, 1], 1, param_type=T.INT32),
        [u8([1, 2, 3])],
        [u8([[1], [2], [3]])],
    ),
    Example(
        "expand_dims_quant8_signed_axis_minus2",
        _with_int_tensor(Op.EXPAND_DIMS, QS8, [1], [1, 1], -2, param_type=T.INT32),
        [s8([-7])],
        [s8([[-7]])],
    ),
    Example(
        "expand_dims_fp32_axis_out_of_range_fails",
        _with_int_tensor(Op.EXPAND_DIMS, F32, [2], [2, 1], 2, param_type=T.INT32),
        [f32([1, 2])],
        [f32([[1], [2]])],
        expect_failure=True,
        note="rank 1: axis in [-2, 2)",
    ),
]

# TRANSPOSE / TILE / REVERSE / PACK --------------------------------------------------------

TRANSPOSE = [
    Example(
        "transpose_fp32_2d",
        _with_int_tensor(Op.TRANSPOSE, F32, [2, 3], [3, 2], [1, 0]),
        [f32([[1, 2, 3], [4, 5, 6]])],
        [f32([[1, 4], [2, 5], [3, 6]])],
    ),
    Example(
        "transpose_fp32_omitted_perm",
        _with_int_tensor(Op.TRANSPOSE, F32, [2, 2], [2, 2], None, omit=True),
        [f32([[1, 2], [3, 4]])],
        [f32([[1, 3], [2, 4]])],
    ),
    # out[k, i, j] = x[i, j, k] for perm [2, 0, 1]; x is [2, 1, 3].
    Example(
        "transpose_fp16_3d",
        _with_int_tensor(Op.TRANSPOSE, F16, [2, 1, 3], [3, 2, 1], [2, 0, 1]),
        [f16([[[1, 2, 3]], [[4, 5, 6]]])],
        [f16([[[1], [4]], [[2], [5]], [[3], [6]]])],
    ),
    Example(
        "transpose_quant8_inner",
        _with_int_tensor(Op.TRANSPOSE, Q8, [1, 2, 2], [1, 2, 2], [0, 2, 1]),
        [u8([[[1, 2], [3, 4]]])],
        [u8([[[1, 3], [2, 4]]])],
    ),
    Example(
        "transpose_quant8_signed_2d",
        _with_int_tensor(Op.TRANSPOSE, QS8, [1, 3], [3, 1], [1, 0]),
        [s8([[-1, 0, 1]])],
        [s8([[-1], [0], [1]])],
    ),
    Example(
        "transpose_fp32_omitted_perm_3d_fails",
        _with_int_tensor(Op.TRANSPOSE, F32, [1, 1, 2], [2, 1, 1], None, omit=True),
        [f32([[[1, 2]]])],
        [f32([[[1]], [[2]]])],
        expect_failure=True,
        note="the reference only defaults the permutation for 2-D inputs",
    ),
]

TILE = [
    Example("tile_fp32_1d", _with_int_tensor(Op.TILE, F32, [2], [4], [2]), [f32([1, 2])], [f32([1, 2, 1, 2])]),
    Example(
        "tile_fp16_2d_columns",
        _with_int_tensor(Op.TILE, F16, [2, 2], [2, 4], [1, 2]),
        [f16([[1, 2], [3, 4]])],
        [f16([[1, 2, 1, 2], [3, 4, 3, 4]])],
    ),
    Example(
        "tile_int32_2d_rows",
        _with_int_tensor(Op.TILE, I32, [1, 2], [2, 2], [2, 1]),
        [i32([[5, 6]])],
        [i32([[5, 6], [5, 6]])],
    ),
    Example(
        "tile_quant8", _with_int_tensor(Op.TILE, Q8, [2], [6], [3]), [u8([0, 255])], [u8([0, 255, 0, 255, 0, 255])]
    ),
    Example(
        "tile_quant8_signed_both_axes",
        _with_int_tensor(Op.TILE, QS8, [2, 1], [4, 2], [2, 2]),
        [s8([[1], [2]])],
        [s8([[1, 1], [2, 2], [1, 1], [2, 2]])],
    ),
    Example(
        "tile_fp32_wrong_multiples_length_fails",
        _with_int_tensor(Op.TILE, F32, [2], [4], [2, 1]),
        [f32([1, 2])],
        [f32([1, 2, 1, 2])],
        expect_failure=True,
    ),
]

REVERSE = [
    Example("reverse_fp32_1d", _with_int_tensor(Op.REVERSE, F32, [3], [3], [0]), [f32([6, 7, 8])], [f32([8, 7, 6])]),
    Example(
        "reverse_fp16_axis1",
        _with_int_tensor(Op.REVERSE, F16, [2, 3], [2, 3], [1]),
        [f16([[1, 2, 3], [4, 5, 6]])],
        [f16([[3, 2, 1], [6, 5, 4]])],
    ),
    Example(
        "reverse_int32_axis0",
        _with_int_tensor(Op.REVERSE, I32, [2, 2], [2, 2], [0]),
        [i32([[1, 2], [3, 4]])],
        [i32([[3, 4], [1, 2]])],
    ),
    Example(
        "reverse_quant8_last_axis",
        _with_int_tensor(Op.REVERSE, Q8, [2, 1, 2], [2, 1, 2], [2]),
        [u8([[[1, 2]], [[3, 4]]])],
        [u8([[[2, 1]], [[4, 3]]])],
    ),
    Example(
        "reverse_quant8_signed",
        _with_int_tensor(Op.REVERSE, QS8, [3], [3], [0]),
        [s8([-128, 0, 127])],
        [s8([127, 0, -128])],
    ),
    Example(
        "reverse_fp32_axis_out_of_range_fails",
        _with_int_tensor(Op.REVERSE, F32, [3], [3], [1]),
        [f32([1, 2, 3])],
        [f32([3, 2, 1])],
        expect_failure=True,
    ),
]


def _pack(t, n, in_dims, out_dims, axis, q=(0.5, 3), out_q=None):
    b = ModelBuilder()
    quant = _q(t, *q)
    xs = [b.input(t, in_dims, **quant) for _ in range(n)]
    y = b.output(t, out_dims, **(_q(t, *out_q) if out_q else quant))
    b.operation(Op.PACK, [b.i32(axis), *xs], [y])
    return b.build()


PACK = [
    Example("pack_fp32_axis0", _pack(F32, 2, [2], [2, 2], 0), [f32([1, 2]), f32([3, 4])], [f32([[1, 2], [3, 4]])]),
    Example("pack_fp16_axis1", _pack(F16, 2, [2], [2, 2], 1), [f16([1, 2]), f16([3, 4])], [f16([[1, 3], [2, 4]])]),
    Example("pack_int32_single_input", _pack(I32, 1, [3], [1, 3], 0), [i32([7, 8, 9])], [i32([[7, 8, 9]])]),
    Example(
        "pack_quant8_three_inputs_axis1",
        _pack(Q8, 3, [1, 2], [1, 3, 2], 1),
        [u8([[1, 2]]), u8([[3, 4]]), u8([[5, 6]])],
        [u8([[[1, 2], [3, 4], [5, 6]]])],
    ),
    Example(
        "pack_quant8_signed_last_axis",
        _pack(QS8, 2, [2, 1], [2, 1, 2], 2),
        [s8([[1], [2]]), s8([[3], [4]])],
        [s8([[[1, 3]], [[2, 4]]])],
    ),
    Example(
        "pack_quant8_output_scale_mismatch_fails",
        _pack(Q8, 2, [1], [2, 1], 0, out_q=(1.0, 3)),
        [u8([1]), u8([2])],
        [u8([[1], [2]])],
        expect_failure=True,
    ),
]

# QUANTIZE / DEQUANTIZE --------------------------------------------------------------------

QUANTIZE = [
    # scale 0.5, zp 10: q = 10 + round(x / 0.5).  0.25 -> round(0.5) = 1 (halves go away from
    # zero), -0.25 -> -1, 0.75 -> 2, -6 -> -2 -> clamp 0, 200 -> 410 -> clamp 255.  NaN: the
    # reference's std::min(255.f, NaN) returns 255; +-inf clamp.
    Example(
        "quantize_fp32_quant8",
        _unary(Op.QUANTIZE, F32, Q8, [9], qout=(0.5, 10)),
        [f32([0, 0.25, -0.25, 0.75, 1.0, -6.0, 200.0, np.nan, -np.inf])],
        [u8([10, 11, 9, 12, 12, 0, 255, 255, 0])],
    ),
    # scale 0.25, zp -1: 0.125 -> 0.5 -> 1 -> 0, -0.125 -> -1 -> -2, 1 -> 4 -> 3, 40 -> 159 ->
    # 127, -40 -> -161 -> -128.
    Example(
        "quantize_fp16_quant8_signed",
        _unary(Op.QUANTIZE, F16, QS8, [5], qout=(0.25, -1)),
        [f16([0.125, -0.125, 1.0, 40.0, -40.0])],
        [s8([0, -2, 3, 127, -128])],
    ),
    # scale 2, zp 0: 3 -> round(1.5) = 2, -3 -> -2, 255 -> 127.5 -> 128, 1000 -> 127.
    Example(
        "quantize_fp32_quant8_signed",
        _unary(Op.QUANTIZE, F32, QS8, [4], qout=(2.0, 0)),
        [f32([3, -3, 255, 1000])],
        [s8([2, -2, 127, 127])],
    ),
    # scale 1, zp 128: 2.5 -> 3 -> 131, -2.5 -> -3 -> 125, -200 -> 0, 127.5 -> 128 -> 256 -> 255.
    Example(
        "quantize_fp16_quant8",
        _unary(Op.QUANTIZE, F16, Q8, [4], qout=(1.0, 128)),
        [f16([2.5, -2.5, -200, 127.5])],
        [u8([131, 125, 0, 255])],
    ),
]

DEQUANTIZE = [
    # (q - 128) * 0.5
    Example(
        "dequantize_quant8_fp32",
        _unary(Op.DEQUANTIZE, Q8, F32, [4], qin=(0.5, 128)),
        [u8([0, 128, 129, 255])],
        [f32([-64, 0, 0.5, 63.5])],
    ),
    Example("dequantize_quant8_fp16", _unary(Op.DEQUANTIZE, Q8, F16, [2], qin=(0.25, 4)), [u8([0, 8])], [f16([-1, 1])]),
    # (q + 1) * 0.25
    Example(
        "dequantize_quant8_signed_fp16",
        _unary(Op.DEQUANTIZE, QS8, F16, [4], qin=(0.25, -1)),
        [s8([-128, -1, 0, 127])],
        [f16([-31.75, 0, 0.25, 32])],
    ),
    Example(
        "dequantize_quant8_signed_fp32",
        _unary(Op.DEQUANTIZE, QS8, F32, [2], qin=(2.0, 10)),
        [s8([-128, 10])],
        [f32([-276, 0])],
    ),
    Example(
        "dequantize_quant8_symm_fp32",
        _unary(Op.DEQUANTIZE, T.TENSOR_QUANT8_SYMM, F32, [4], qin=(2.0, 0)),
        [s8([-128, -1, 0, 127])],
        [f32([-256, -2, 0, 254])],
    ),
    Example(
        "dequantize_quant8_symm_fp16",
        _unary(Op.DEQUANTIZE, T.TENSOR_QUANT8_SYMM, F16, [2], qin=(0.5, 0)),
        [s8([-3, 3])],
        [f16([-1.5, 1.5])],
    ),
    # channel dim 1, scales (1, 0.5, 0.25) per column.
    Example(
        "dequantize_per_channel_fp32",
        _unary(Op.DEQUANTIZE, T.TENSOR_QUANT8_SYMM_PER_CHANNEL, F32, [2, 3], cq=ChannelQuant((1.0, 0.5, 0.25), 1)),
        [s8([[4, 4, 4], [-8, 2, 1]])],
        [f32([[4, 2, 1], [-8, 1, 0.25]])],
    ),
    # channel dim 0, scales (2, 0.5) per row.
    Example(
        "dequantize_per_channel_fp16",
        _unary(Op.DEQUANTIZE, T.TENSOR_QUANT8_SYMM_PER_CHANNEL, F16, [2, 2], cq=ChannelQuant((2.0, 0.5), 0)),
        [s8([[1, -1], [3, -3]])],
        [f16([[2, -2], [1.5, -1.5]])],
    ),
]

# CAST -------------------------------------------------------------------------------------

CAST = [
    # Truncation toward zero; beyond the int32 range we saturate (C++ leaves it undefined,
    # ARM64 saturates).
    Example(
        "cast_fp32_to_int32",
        _unary(Op.CAST, F32, I32, [6]),
        [f32([1.9, -1.9, 0.5, -0.0, 3e9, -3e9])],
        [i32([1, -1, 0, 0, 2147483647, -2147483648])],
    ),
    Example("cast_fp16_to_int32", _unary(Op.CAST, F16, I32, [3]), [f16([2.5, -2.5, 1000])], [i32([2, -2, 1000])]),
    # below 0 -> 0, above 255 -> 255, else truncated.
    Example(
        "cast_fp32_to_quant8",
        _unary(Op.CAST, F32, Q8, [4], qout=(0.5, 128)),
        [f32([-1.0, 0.7, 254.9, 300.0])],
        [u8([0, 0, 254, 255])],
        note="scale and zero point are ignored",
    ),
    Example("cast_fp16_to_quant8", _unary(Op.CAST, F16, Q8, [2], qout=(1.0, 0)), [f16([-0.5, 3.75])], [u8([0, 3])]),
    Example(
        "cast_int32_to_quant8",
        _unary(Op.CAST, I32, Q8, [4], qout=(1.0, 0)),
        [i32([-5, 0, 200, 256])],
        [u8([0, 0, 200, 255])],
    ),
    # fp16 spacing is 2 at 2048: 2049 is a tie and goes to the even mantissa (2048);
    # 70000 is above the fp16 maximum 65504 -> inf.
    Example("cast_int32_to_fp16", _unary(Op.CAST, I32, F16, [3]), [i32([1, 2049, 70000])], [f16([1, 2048, np.inf])]),
    # fp32 spacing is 2 at 2**24: 16777217 is a tie -> 16777216.
    Example("cast_int32_to_fp32", _unary(Op.CAST, I32, F32, [2]), [i32([-7, 16777217])], [f32([-7, 16777216])]),
    Example(
        "cast_quant8_to_fp32",
        _unary(Op.CAST, Q8, F32, [2], qin=(0.5, 128)),
        [u8([0, 255])],
        [f32([0, 255])],
        note="raw uint8 values, not dequantised",
    ),
    Example("cast_quant8_to_fp16", _unary(Op.CAST, Q8, F16, [2], qin=(0.5, 128)), [u8([1, 200])], [f16([1, 200])]),
    Example("cast_quant8_to_int32", _unary(Op.CAST, Q8, I32, [2], qin=(0.5, 128)), [u8([3, 250])], [i32([3, 250])]),
    Example(
        "cast_quant8_to_quant8_other_scale",
        _unary(Op.CAST, Q8, Q8, [2], qin=(0.5, 128), qout=(2.0, 0)),
        [u8([3, 250])],
        [u8([3, 250])],
        note="a byte copy: quantisation is ignored",
    ),
    Example("cast_fp16_to_fp32", _unary(Op.CAST, F16, F32, [2]), [f16([0.5, -2.25])], [f32([0.5, -2.25])]),
    # 0.1 has no exact fp16 value: the nearest is 1638/16384 = 0.0999755859375; 1e5 -> inf.
    Example(
        "cast_fp32_to_fp16",
        _unary(Op.CAST, F32, F16, [3]),
        [f32([1.0, 1e5, 0.1])],
        [f16([1.0, np.inf, 0.0999755859375])],
    ),
    Example("cast_fp32_to_fp32", _unary(Op.CAST, F32, F32, [2]), [f32([1.5, -3])], [f32([1.5, -3])]),
    Example("cast_int32_to_int32", _unary(Op.CAST, I32, I32, [2]), [i32([-9, 9])], [i32([-9, 9])]),
    Example(
        "cast_bool8_identity",
        _unary(Op.CAST, T.TENSOR_BOOL8, T.TENSOR_BOOL8, [3]),
        [np.array([True, False, True])],
        [np.array([True, False, True])],
    ),
    Example(
        "cast_quant16_asymm_identity",
        _unary(Op.CAST, T.TENSOR_QUANT16_ASYMM, T.TENSOR_QUANT16_ASYMM, [2], (0.5, 7), (0.5, 7)),
        [np.array([0, 65535], np.uint16)],
        [np.array([0, 65535], np.uint16)],
    ),
    Example(
        "cast_quant16_symm_identity",
        _unary(Op.CAST, T.TENSOR_QUANT16_SYMM, T.TENSOR_QUANT16_SYMM, [2], (0.5, 0), (0.5, 0)),
        [np.array([-32768, 32767], np.int16)],
        [np.array([-32768, 32767], np.int16)],
    ),
    Example(
        "cast_quant8_signed_identity",
        _unary(Op.CAST, QS8, QS8, [2], (0.5, -3), (0.5, -3)),
        [s8([-128, 127])],
        [s8([-128, 127])],
    ),
    Example(
        "cast_quant8_symm_identity",
        _unary(Op.CAST, T.TENSOR_QUANT8_SYMM, T.TENSOR_QUANT8_SYMM, [2], (0.5, 0), (0.5, 0)),
        [s8([-128, 127])],
        [s8([-128, 127])],
    ),
    Example(
        "cast_quant8_signed_to_fp32_fails",
        _unary(Op.CAST, QS8, F32, [1], qin=(0.5, 0)),
        [s8([1])],
        [f32([1])],
        expect_failure=True,
        note="QUANT8_ASYMM_SIGNED casts only to itself",
    ),
]

# FILL / RANK / SELECT ---------------------------------------------------------------------


def _fill(t, dims, value):
    b = ModelBuilder()
    y = b.output(t, dims)
    scalar = {F16: b.f16, F32: b.f32, I32: b.i32}[t](value)
    b.operation(Op.FILL, [b.const(I32, [len(dims)], dims), scalar], [y])
    return b.build()


FILL = [
    Example("fill_fp32", _fill(F32, [2, 3], 1.5), [], [f32([[1.5] * 3] * 2)]),
    Example("fill_fp16", _fill(F16, [3], -0.5), [], [f16([-0.5, -0.5, -0.5])]),
    Example("fill_int32", _fill(I32, [1, 2, 1], 7), [], [i32([[[7], [7]]])]),
]


def _rank(t, dims, **kw):
    b = ModelBuilder()
    x = b.input(t, dims, **kw)
    y = b.output(T.INT32, [])
    b.operation(Op.RANK, [x], [y])
    return b.build()


RANK = [
    Example("rank_fp16", _rank(F16, [2]), [f16([1, 2])], [i32(1)]),
    Example("rank_fp32", _rank(F32, [1, 2, 1]), [f32([[[1], [2]]])], [i32(3)]),
    Example("rank_int32", _rank(I32, [1, 1, 1, 1, 1]), [i32([[[[[4]]]]])], [i32(5)]),
    Example("rank_quant8", _rank(Q8, [2, 2], scale=0.5, zero_point=1), [u8([[1, 2], [3, 4]])], [i32(2)]),
    Example("rank_quant8_signed", _rank(QS8, [3], scale=0.5, zero_point=1), [s8([1, 2, 3])], [i32(1)]),
    Example("rank_quant8_symm", _rank(T.TENSOR_QUANT8_SYMM, [1, 2], scale=0.5), [s8([[1, 2]])], [i32(2)]),
    Example(
        "rank_quant8_per_channel",
        _rank(T.TENSOR_QUANT8_SYMM_PER_CHANNEL, [2, 1, 1], channel_quant=ChannelQuant((0.5, 1.0), 0)),
        [s8([[[1]], [[2]]])],
        [i32(3)],
    ),
    Example("rank_quant16_symm", _rank(T.TENSOR_QUANT16_SYMM, [2], scale=0.5), [np.array([1, 2], np.int16)], [i32(1)]),
    Example(
        "rank_quant16_asymm",
        _rank(T.TENSOR_QUANT16_ASYMM, [1, 1], scale=0.5, zero_point=9),
        [np.array([[1]], np.uint16)],
        [i32(2)],
    ),
    Example("rank_bool8", _rank(T.TENSOR_BOOL8, [1, 1, 2, 1]), [np.array([[[[True], [False]]]])], [i32(4)]),
]


def _select(t, dims, q1=(0.0, 0), q2=(0.0, 0), qo=(0.0, 0)):
    b = ModelBuilder()
    c = b.input(T.TENSOR_BOOL8, dims)
    x1 = b.input(t, dims, scale=q1[0], zero_point=q1[1])
    x2 = b.input(t, dims, scale=q2[0], zero_point=q2[1])
    y = b.output(t, dims, scale=qo[0], zero_point=qo[1])
    b.operation(Op.SELECT, [c, x1, x2], [y])
    return b.build()


_C3 = np.array([True, False, True])
SELECT = [
    Example("select_fp32", _select(F32, [3]), [_C3, f32([1, 2, 3]), f32([4, 5, 6])], [f32([1, 5, 3])]),
    Example("select_fp16", _select(F16, [3]), [_C3, f16([1, 2, 3]), f16([4, 5, 6])], [f16([1, 5, 3])]),
    Example(
        "select_int32_2d",
        _select(I32, [2, 2]),
        [np.array([[False, True], [True, False]]), i32([[1, 2], [3, 4]]), i32([[5, 6], [7, 8]])],
        [i32([[5, 2], [3, 8]])],
    ),
    # Into scale 1, zp 5.  From input 1 (scale 0.5, zp 0): 3 -> 1.5 + 5 = 6.5 -> 7 (half away),
    # 255 -> 127.5 + 5 = 132.5 -> 133.  From input 2 (scale 2, zp 10): 9 -> -2 + 5 = 3,
    # 200 -> 380 + 5 -> clamp 255.
    Example(
        "select_quant8_requantized",
        _select(Q8, [4], (0.5, 0), (2.0, 10), (1.0, 5)),
        [np.array([True, True, False, False]), u8([3, 255, 0, 0]), u8([0, 0, 9, 200])],
        [u8([7, 133, 3, 255])],
    ),
    # Into scale 1, zp 0.  From input 1 (scale 0.5, zp -10): -7 -> 1.5 -> 2, -13 -> -1.5 -> -2.
    # From input 2 (scale 1, zp 0): copied, 100 and -128.
    Example(
        "select_quant8_signed_requantized",
        _select(QS8, [4], (0.5, -10), (1.0, 0), (1.0, 0)),
        [np.array([True, False, True, False]), s8([-7, 0, -13, 0]), s8([0, 100, 0, -128])],
        [s8([2, 100, -2, -128])],
    ),
]

EXAMPLES = (
    CONCAT
    + RESHAPE
    + SQUEEZE
    + EXPAND_DIMS
    + TRANSPOSE
    + TILE
    + REVERSE
    + PACK
    + QUANTIZE
    + DEQUANTIZE
    + CAST
    + FILL
    + RANK
    + SELECT
)
