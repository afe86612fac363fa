"""Data-movement examples: PAD, PAD_V2, MIRROR_PAD, SLICE, STRIDED_SLICE, SPLIT, GATHER,
DEPTH_TO_SPACE, SPACE_TO_DEPTH, BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND, CHANNEL_SHUFFLE,
EMBEDDING_LOOKUP, HASHTABLE_LOOKUP.

Every expected output is written out by hand; the comment above each example says how it was
worked out.  None of these operations computes anything, so quantised examples check that
stored values are moved untouched and that fills use the zero point where NNAPI says so.
"""

import numpy as np

from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.suites.examples import Example

F32, F16, I32 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32
Q8, Q8S = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
_DTYPE = {F32: np.float32, F16: np.float16, I32: np.int32, Q8: np.uint8, Q8S: np.int8}


def _arr(t, values, dims):
    return np.array(values, dtype=_DTYPE[t]).reshape(dims)


class inp:
    """A parameter fed at run time (a graph input), so run-time checks get exercised."""

    def __init__(self, t, dims, value):
        self.t, self.dims, self.value = t, list(dims), value


_SCALAR_DTYPE = {T.INT32: np.int32}


def _model(op, t, in_dims, params, out_dims, scale=0.0, zp=0):
    """One operation; input 0 is a graph input, ``params`` build the other inputs (constants,
    or graph inputs for ``inp``), and one output per entry of ``out_dims`` shares the input's
    type and quantisation.  Returns the model and the values of the extra graph inputs."""
    b = ModelBuilder()
    ins = [b.input(t, in_dims, scale=scale, zero_point=zp)]
    extra = []
    for p in params:
        if isinstance(p, inp):
            ins.append(b.input(p.t, p.dims))
            dtype = _SCALAR_DTYPE.get(p.t) or _DTYPE[p.t]
            extra.append(np.array(p.value, dtype=dtype).reshape(p.dims))
        else:
            ins.append(p(b))
    outs = [b.output(t, d, scale=scale, zero_point=zp) for d in out_dims]
    b.operation(op, ins, outs)
    return b.build(), extra


def i32(v):
    return lambda b: b.i32(v)


def flag(v):
    return lambda b: b.bool(v)


def f32(v):
    return lambda b: b.f32(v)


def f16(v):
    return lambda b: b.f16(v)


def ti32(dims, values):
    return lambda b: b.const(T.TENSOR_INT32, dims, values)


def _ex(name, op, t, in_dims, x, params, out_dims, outs, scale=0.0, zp=0, fail=False):
    """``out_dims`` is one shape, or a list of shapes (then ``outs`` has one list per output)."""
    if t in (Q8, Q8S) and scale == 0.0:
        scale = 1.0
    multi = isinstance(out_dims[0], list)
    dims_list = out_dims if multi else [out_dims]
    model, extra = _model(op, t, in_dims, params, dims_list, scale, zp)
    if fail:
        expected = []
    elif multi:
        expected = [_arr(t, o, d) for o, d in zip(outs, dims_list)]
    else:
        expected = [_arr(t, outs, out_dims)]
    return Example(name, model, [_arr(t, x, in_dims), *extra], expected, expect_failure=fail)


EXAMPLES: list[Example] = []
E = EXAMPLES.append

# ---- PAD: zeros for floats, the zero point for quantised tensors -------------------------
# [[1,2,3],[4,5,6]] with one row before dim 0 and two columns after dim 1.
E(
    _ex(
        "pad_fp32_2d",
        Op.PAD,
        F32,
        [2, 3],
        [1, 2, 3, 4, 5, 6],
        [ti32([2, 2], [1, 0, 0, 2])],
        [3, 5],
        [0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 4, 5, 6, 0, 0],
    )
)
E(_ex("pad_fp16_1d", Op.PAD, F16, [3], [1.5, -2, 3], [ti32([1, 2], [2, 1])], [6], [0, 0, 1.5, -2, 3, 0]))
# zero point 10 fills: one row on top of H and one column right of W.
E(
    _ex(
        "pad_quant8_zero_point_fill",
        Op.PAD,
        Q8,
        [1, 2, 2, 1],
        [11, 12, 13, 14],
        [ti32([4, 2], [0, 0, 1, 0, 0, 1, 0, 0])],
        [1, 3, 3, 1],
        [10, 10, 10, 11, 12, 10, 13, 14, 10],
        scale=0.5,
        zp=10,
    )
)
E(_ex("pad_quant8_signed", Op.PAD, Q8S, [2], [5, -7], [ti32([1, 2], [1, 1])], [4], [-3, 5, -7, -3], zp=-3))
E(_ex("pad_negative_padding_fails", Op.PAD, F32, [2], [1, 2], [inp(I32, [1, 2], [-1, 1])], [4], [], fail=True))

# ---- PAD_V2: an explicit pad value (a stored value for quantised tensors) ----------------
E(
    _ex(
        "pad_v2_fp32",
        Op.PAD_V2,
        F32,
        [2, 2],
        [1, 2, 3, 4],
        [ti32([2, 2], [0, 1, 1, 0]), f32(-1.5)],
        [3, 3],
        [-1.5, 1, 2, -1.5, 3, 4, -1.5, -1.5, -1.5],
    )
)
E(_ex("pad_v2_fp16", Op.PAD_V2, F16, [2], [0.5, 0.25], [ti32([1, 2], [1, 1]), f16(9.0)], [4], [9, 0.5, 0.25, 9]))
# The pad value 7 is stored as is (scale 0.1, zero point 128 do not matter).
E(
    _ex(
        "pad_v2_quant8",
        Op.PAD_V2,
        Q8,
        [1, 2],
        [0, 255],
        [ti32([2, 2], [1, 0, 0, 1]), i32(7)],
        [2, 3],
        [7, 7, 7, 0, 255, 7],
        scale=0.1,
        zp=128,
    )
)
E(
    _ex(
        "pad_v2_quant8_signed",
        Op.PAD_V2,
        Q8S,
        [2],
        [-128, 127],
        [ti32([1, 2], [0, 2]), i32(-5)],
        [4],
        [-128, 127, -5, -5],
        scale=0.5,
    )
)

# ---- MIRROR_PAD: 0 REFLECT (border not repeated), 1 SYMMETRIC (border repeated) ---------
# Rows [r1 r0 r1 r0] (reflect 1 each side of 2 rows); each row [c2 c1 c0 c1 c2 c1 c0].
E(
    _ex(
        "mirror_pad_fp32_reflect_2d",
        Op.MIRROR_PAD,
        F32,
        [2, 3],
        [1, 2, 3, 4, 5, 6],
        [ti32([2, 2], [1, 1, 2, 2]), i32(0)],
        [4, 7],
        [6, 5, 4, 5, 6, 5, 4, 3, 2, 1, 2, 3, 2, 1, 6, 5, 4, 5, 6, 5, 4, 3, 2, 1, 2, 3, 2, 1],
    )
)
# Rows [r0 r0 r1 r1]; each row [c1 c0 c0 c1 c2 c2 c1] (TensorFlow's documented example).
E(
    _ex(
        "mirror_pad_fp32_symmetric_2d",
        Op.MIRROR_PAD,
        F32,
        [2, 3],
        [1, 2, 3, 4, 5, 6],
        [ti32([2, 2], [1, 1, 2, 2]), i32(1)],
        [4, 7],
        [2, 1, 1, 2, 3, 3, 2, 2, 1, 1, 2, 3, 3, 2, 5, 4, 4, 5, 6, 6, 5, 5, 4, 4, 5, 6, 6, 5],
    )
)
# NNAPI's documented example.
E(
    _ex(
        "mirror_pad_fp16_reflect_1d",
        Op.MIRROR_PAD,
        F16,
        [3],
        [1, 2, 3],
        [ti32([1, 2], [0, 2]), i32(0)],
        [5],
        [1, 2, 3, 2, 1],
    )
)
# SYMMETRIC may pad a full dimension (3 before a size-3 axis).
E(
    _ex(
        "mirror_pad_int32_symmetric_full",
        Op.MIRROR_PAD,
        I32,
        [3],
        [1, 2, 3],
        [ti32([1, 2], [3, 1]), i32(1)],
        [7],
        [3, 2, 1, 1, 2, 3, 3],
    )
)
E(
    _ex(
        "mirror_pad_quant8_reflect",
        Op.MIRROR_PAD,
        Q8,
        [4],
        [10, 20, 30, 40],
        [ti32([1, 2], [2, 1]), i32(0)],
        [7],
        [30, 20, 10, 20, 30, 40, 30],
        scale=0.5,
        zp=3,
    )
)
E(
    _ex(
        "mirror_pad_quant8_signed_reflect",
        Op.MIRROR_PAD,
        Q8S,
        [2],
        [-1, 5],
        [ti32([1, 2], [1, 1]), i32(0)],
        [4],
        [5, -1, 5, -1],
        zp=-4,
    )
)
# REFLECT cannot pad 3 before a size-3 axis.
E(
    _ex(
        "mirror_pad_reflect_too_wide_fails",
        Op.MIRROR_PAD,
        F32,
        [3],
        [1, 2, 3],
        [inp(I32, [1, 2], [3, 0]), i32(0)],
        [6],
        [],
        fail=True,
    )
)

# ---- SLICE ---------------------------------------------------------------------------------
# [[0..3],[4..7],[8..11]] rows 1..2, columns 1..end.
E(
    _ex(
        "slice_fp32_size_minus_one",
        Op.SLICE,
        F32,
        [3, 4],
        list(range(12)),
        [ti32([2], [1, 1]), ti32([2], [2, -1])],
        [2, 3],
        [5, 6, 7, 9, 10, 11],
    )
)
E(_ex("slice_fp16", Op.SLICE, F16, [4], [1, 2, 3, 4], [ti32([1], [1]), ti32([1], [2])], [2], [2, 3]))
# x[1, 0:2, 1:2] of 1..8 in shape [2,2,2].
E(
    _ex(
        "slice_int32_3d",
        Op.SLICE,
        I32,
        [2, 2, 2],
        [1, 2, 3, 4, 5, 6, 7, 8],
        [ti32([3], [1, 0, 1]), ti32([3], [1, 2, 1])],
        [1, 2, 1],
        [6, 8],
    )
)
E(
    _ex(
        "slice_quant8",
        Op.SLICE,
        Q8,
        [1, 4],
        [5, 6, 7, 8],
        [ti32([2], [0, 2]), ti32([2], [1, 2])],
        [1, 2],
        [7, 8],
        scale=0.25,
        zp=6,
    )
)
E(_ex("slice_quant8_signed", Op.SLICE, Q8S, [3], [-1, -2, -3], [ti32([1], [0]), ti32([1], [-1])], [3], [-1, -2, -3]))
E(
    _ex(
        "slice_out_of_range_fails",
        Op.SLICE,
        F32,
        [3],
        [1, 2, 3],
        [inp(I32, [1], [2]), ti32([1], [2])],
        [2],
        [],
        fail=True,
    )
)

# ---- STRIDED_SLICE ------------------------------------------------------------------------
# dim 1: stride -1 from -1 (= 2) to -4 (< -3, i.e. before the start): columns 2, 1, 0.
E(
    _ex(
        "strided_slice_fp32_negative_stride",
        Op.STRIDED_SLICE,
        F32,
        [2, 3],
        [1, 2, 3, 4, 5, 6],
        [ti32([2], [0, -1]), ti32([2], [2, -4]), ti32([2], [1, -1]), i32(0), i32(0), i32(0)],
        [2, 3],
        [3, 2, 1, 6, 5, 4],
    )
)
# begin_mask bit 0: rows from 0 to 2 step 2 -> row 0; end_mask bit 1: columns 1, 3.
E(
    _ex(
        "strided_slice_fp32_masks",
        Op.STRIDED_SLICE,
        F32,
        [3, 4],
        list(range(12)),
        [ti32([2], [2, 1]), ti32([2], [2, 0]), ti32([2], [2, 2]), i32(1), i32(2), i32(0)],
        [1, 2],
        [1, 3],
    )
)
# begin -10 clamps to 0.
E(
    _ex(
        "strided_slice_fp32_clamped_begin",
        Op.STRIDED_SLICE,
        F32,
        [4],
        [1, 2, 3, 4],
        [ti32([1], [-10]), ti32([1], [3]), ti32([1], [1]), i32(0), i32(0), i32(0)],
        [3],
        [1, 2, 3],
    )
)
# shrink bit 0: row 1 only, rank drops to 1.
E(
    _ex(
        "strided_slice_fp16_shrink",
        Op.STRIDED_SLICE,
        F16,
        [2, 3],
        [1, 2, 3, 4, 5, 6],
        [ti32([2], [1, 0]), ti32([2], [2, 3]), ti32([2], [1, 1]), i32(0), i32(0), i32(1)],
        [3],
        [4, 5, 6],
    )
)
# Every dimension shrinks: the output is [1], not a scalar.
E(
    _ex(
        "strided_slice_quant8_all_shrink",
        Op.STRIDED_SLICE,
        Q8,
        [2, 2],
        [1, 2, 3, 4],
        [ti32([2], [1, 0]), ti32([2], [2, 1]), ti32([2], [1, 1]), i32(0), i32(0), i32(3)],
        [1],
        [3],
        scale=0.5,
        zp=2,
    )
)
# end 10 clamps to 5; stride 2 from 1: indices 1, 3.
E(
    _ex(
        "strided_slice_quant8_signed_stride2",
        Op.STRIDED_SLICE,
        Q8S,
        [5],
        [-2, -1, 0, 1, 2],
        [ti32([1], [1]), ti32([1], [10]), ti32([1], [2]), i32(0), i32(0), i32(0)],
        [2],
        [-1, 1],
    )
)
# A shrunk dimension must select exactly one element.
E(
    _ex(
        "strided_slice_bad_shrink_fails",
        Op.STRIDED_SLICE,
        F32,
        [2, 3],
        [1, 2, 3, 4, 5, 6],
        [ti32([2], [0, 0]), ti32([2], [2, 3]), ti32([2], [1, 1]), i32(0), i32(0), i32(1)],
        [3],
        [],
        fail=True,
    )
)

# ---- SPLIT ---------------------------------------------------------------------------------
E(_ex("split_fp32_axis0", Op.SPLIT, F32, [2, 2], [1, 2, 3, 4], [i32(0), i32(2)], [[1, 2], [1, 2]], [[1, 2], [3, 4]]))
E(
    _ex(
        "split_fp16_negative_axis",
        Op.SPLIT,
        F16,
        [2, 4],
        [1, 2, 3, 4, 5, 6, 7, 8],
        [i32(-1), i32(2)],
        [[2, 2], [2, 2]],
        [[1, 2, 5, 6], [3, 4, 7, 8]],
    )
)
E(_ex("split_int32_three", Op.SPLIT, I32, [3], [7, 8, 9], [i32(0), i32(3)], [[1], [1], [1]], [[7], [8], [9]]))
E(
    _ex(
        "split_quant8",
        Op.SPLIT,
        Q8,
        [1, 4],
        [1, 2, 3, 4],
        [i32(1), i32(2)],
        [[1, 2], [1, 2]],
        [[1, 2], [3, 4]],
        scale=0.5,
        zp=1,
    )
)
E(_ex("split_quant8_signed", Op.SPLIT, Q8S, [2, 1], [-1, 1], [i32(0), i32(2)], [[1, 1], [1, 1]], [[-1], [1]]))
E(_ex("split_uneven_fails", Op.SPLIT, F32, [3], [1, 2, 3], [i32(0), i32(2)], [[1], [1]], [], fail=True))

# ---- GATHER --------------------------------------------------------------------------------
E(
    _ex(
        "gather_fp32_axis0",
        Op.GATHER,
        F32,
        [3, 2],
        [1, 2, 3, 4, 5, 6],
        [i32(0), ti32([2], [2, 0])],
        [2, 2],
        [5, 6, 1, 2],
    )
)
# Indices [[2,2],[0,1]] on the last axis of [[1,2,3],[4,5,6]]: shape [2] + [2,2].
E(
    _ex(
        "gather_fp16_2d_indices_negative_axis",
        Op.GATHER,
        F16,
        [2, 3],
        [1, 2, 3, 4, 5, 6],
        [i32(-1), ti32([2, 2], [2, 2, 0, 1])],
        [2, 2, 2],
        [3, 3, 1, 2, 6, 6, 4, 5],
    )
)
E(
    _ex(
        "gather_int32_repeated",
        Op.GATHER,
        I32,
        [4],
        [10, 20, 30, 40],
        [i32(0), ti32([3], [3, 3, 1])],
        [3],
        [40, 40, 20],
    )
)
E(
    _ex(
        "gather_quant8_axis1",
        Op.GATHER,
        Q8,
        [2, 2],
        [1, 2, 3, 4],
        [i32(1), ti32([1], [1])],
        [2, 1],
        [2, 4],
        scale=0.5,
        zp=3,
    )
)
E(_ex("gather_quant8_signed", Op.GATHER, Q8S, [3], [-3, 0, 3], [i32(0), ti32([2], [0, 2])], [2], [-3, 3]))
E(
    _ex(
        "gather_index_out_of_range_fails",
        Op.GATHER,
        F32,
        [3],
        [1, 2, 3],
        [i32(0), inp(I32, [1], [3])],
        [1],
        [],
        fail=True,
    )
)

# ---- DEPTH_TO_SPACE ------------------------------------------------------------------------
# Output pixel (dy, dx) of a block takes channel dy * 2 + dx.
E(
    _ex(
        "depth_to_space_fp32_block2",
        Op.DEPTH_TO_SPACE,
        F32,
        [1, 1, 1, 4],
        [1, 2, 3, 4],
        [i32(2)],
        [1, 2, 2, 1],
        [1, 2, 3, 4],
    )
)
# Two pixels (1..8, 9..16), 2 output channels: block (dy, dx) takes channels
# (dy*2+dx)*2 + {0,1}; row 0 = [1 2|3 4|9 10|11 12], row 1 = [5 6|7 8|13 14|15 16].
_D2S_OUT = [1, 2, 3, 4, 9, 10, 11, 12, 5, 6, 7, 8, 13, 14, 15, 16]
E(
    _ex(
        "depth_to_space_fp32_two_channels",
        Op.DEPTH_TO_SPACE,
        F32,
        [1, 1, 2, 8],
        list(range(1, 17)),
        [i32(2)],
        [1, 2, 4, 2],
        _D2S_OUT,
    )
)
# The same data in NCHW: input channel c holds (c+1, c+9); output channel 0 is the k=0
# entries of _D2S_OUT row by row, channel 1 the k=1 entries.
_NCHW_IN = [v for c in range(8) for v in (c + 1, c + 9)]
_D2S_NCHW_OUT = [1, 3, 9, 11, 5, 7, 13, 15, 2, 4, 10, 12, 6, 8, 14, 16]
E(
    _ex(
        "depth_to_space_fp32_nchw",
        Op.DEPTH_TO_SPACE,
        F32,
        [1, 8, 1, 2],
        _NCHW_IN,
        [i32(2), flag(True)],
        [1, 2, 2, 4],
        _D2S_NCHW_OUT,
    )
)
E(
    _ex(
        "depth_to_space_fp16",
        Op.DEPTH_TO_SPACE,
        F16,
        [1, 1, 1, 4],
        [0.5, 1, 1.5, 2],
        [i32(2), flag(False)],
        [1, 2, 2, 1],
        [0.5, 1, 1.5, 2],
    )
)
# Pixel 0 = 1..4, pixel 1 = 5..8, one output channel: row 0 [1 2 5 6], row 1 [3 4 7 8].
E(
    _ex(
        "depth_to_space_quant8",
        Op.DEPTH_TO_SPACE,
        Q8,
        [1, 1, 2, 4],
        list(range(1, 9)),
        [i32(2)],
        [1, 2, 4, 1],
        [1, 2, 5, 6, 3, 4, 7, 8],
        scale=0.5,
        zp=4,
    )
)
E(
    _ex(
        "depth_to_space_quant8_signed",
        Op.DEPTH_TO_SPACE,
        Q8S,
        [1, 1, 1, 4],
        [-4, -3, -2, -1],
        [i32(2)],
        [1, 2, 2, 1],
        [-4, -3, -2, -1],
        zp=-1,
    )
)
E(
    _ex(
        "depth_to_space_depth_not_divisible_fails",
        Op.DEPTH_TO_SPACE,
        F32,
        [1, 1, 1, 2],
        [1, 2],
        [i32(2)],
        [1, 2, 2, 1],
        [],
        fail=True,
    )
)

# ---- SPACE_TO_DEPTH: the inverses of the DEPTH_TO_SPACE examples --------------------------
E(
    _ex(
        "space_to_depth_fp32_block2",
        Op.SPACE_TO_DEPTH,
        F32,
        [1, 2, 2, 1],
        [1, 2, 3, 4],
        [i32(2)],
        [1, 1, 1, 4],
        [1, 2, 3, 4],
    )
)
E(
    _ex(
        "space_to_depth_fp32_two_channels",
        Op.SPACE_TO_DEPTH,
        F32,
        [1, 2, 4, 2],
        _D2S_OUT,
        [i32(2)],
        [1, 1, 2, 8],
        list(range(1, 17)),
    )
)
E(
    _ex(
        "space_to_depth_fp32_nchw",
        Op.SPACE_TO_DEPTH,
        F32,
        [1, 2, 2, 4],
        _D2S_NCHW_OUT,
        [i32(2), flag(True)],
        [1, 8, 1, 2],
        _NCHW_IN,
    )
)
E(
    _ex(
        "space_to_depth_fp16",
        Op.SPACE_TO_DEPTH,
        F16,
        [1, 2, 2, 1],
        [0.5, 1, 1.5, 2],
        [i32(2)],
        [1, 1, 1, 4],
        [0.5, 1, 1.5, 2],
    )
)
E(
    _ex(
        "space_to_depth_quant8",
        Op.SPACE_TO_DEPTH,
        Q8,
        [1, 2, 4, 1],
        [1, 2, 5, 6, 3, 4, 7, 8],
        [i32(2)],
        [1, 1, 2, 4],
        list(range(1, 9)),
        scale=0.5,
        zp=4,
    )
)
E(
    _ex(
        "space_to_depth_quant8_signed",
        Op.SPACE_TO_DEPTH,
        Q8S,
        [1, 2, 2, 1],
        [-4, -3, -2, -1],
        [i32(2), flag(False)],
        [1, 1, 1, 4],
        [-4, -3, -2, -1],
    )
)
E(
    _ex(
        "space_to_depth_height_not_divisible_fails",
        Op.SPACE_TO_DEPTH,
        F32,
        [1, 3, 2, 1],
        list(range(6)),
        [i32(2)],
        [1, 1, 1, 4],
        [],
        fail=True,
    )
)

# ---- BATCH_TO_SPACE_ND ---------------------------------------------------------------------
# Batch i*2+j becomes pixel (i, j) of each 2x2 block.
E(
    _ex(
        "batch_to_space_fp32_block2x2",
        Op.BATCH_TO_SPACE_ND,
        F32,
        [4, 1, 1, 1],
        [1, 2, 3, 4],
        [ti32([2], [2, 2])],
        [1, 2, 2, 1],
        [1, 2, 3, 4],
    )
)
# Batches [1 2] [3 4] [5 6] [7 8] (width 2): row 0 interleaves batches 0 and 1, row 1
# batches 2 and 3.
E(
    _ex(
        "batch_to_space_fp32_wide",
        Op.BATCH_TO_SPACE_ND,
        F32,
        [4, 1, 2, 1],
        list(range(1, 9)),
        [ti32([2], [2, 2])],
        [1, 2, 4, 1],
        [1, 3, 2, 4, 5, 7, 6, 8],
    )
)
# NCHW, two channels: batch b holds channels (2b+1, 2b+2); output channel 0 is [1 3 5 7].
E(
    _ex(
        "batch_to_space_fp32_nchw",
        Op.BATCH_TO_SPACE_ND,
        F32,
        [4, 2, 1, 1],
        list(range(1, 9)),
        [ti32([2], [2, 2]), flag(True)],
        [1, 2, 2, 2],
        [1, 3, 5, 7, 2, 4, 6, 8],
    )
)
E(
    _ex(
        "batch_to_space_fp16_block2x1",
        Op.BATCH_TO_SPACE_ND,
        F16,
        [2, 1, 1, 1],
        [1.5, 2.5],
        [ti32([2], [2, 1])],
        [1, 2, 1, 1],
        [1.5, 2.5],
    )
)
E(
    _ex(
        "batch_to_space_quant8",
        Op.BATCH_TO_SPACE_ND,
        Q8,
        [4, 1, 2, 1],
        list(range(1, 9)),
        [ti32([2], [2, 2])],
        [1, 2, 4, 1],
        [1, 3, 2, 4, 5, 7, 6, 8],
        scale=0.5,
        zp=128,
    )
)
E(
    _ex(
        "batch_to_space_quant8_signed",
        Op.BATCH_TO_SPACE_ND,
        Q8S,
        [2, 1, 1, 1],
        [-7, 7],
        [ti32([2], [1, 2]), flag(False)],
        [1, 1, 2, 1],
        [-7, 7],
    )
)
E(
    _ex(
        "batch_to_space_batch_not_divisible_fails",
        Op.BATCH_TO_SPACE_ND,
        F32,
        [3, 1, 1, 1],
        [1, 2, 3],
        [ti32([2], [2, 1])],
        [1, 2, 1, 1],
        [],
        fail=True,
    )
)

# ---- SPACE_TO_BATCH_ND ---------------------------------------------------------------------
E(
    _ex(
        "space_to_batch_fp32_block2x2",
        Op.SPACE_TO_BATCH_ND,
        F32,
        [1, 2, 2, 1],
        [1, 2, 3, 4],
        [ti32([2], [2, 2]), ti32([2, 2], [0, 0, 0, 0])],
        [4, 1, 1, 1],
        [1, 2, 3, 4],
    )
)
# Width [1 2 3] padded left by one: [0 1 2 3]; batch j takes columns j, j+2.
E(
    _ex(
        "space_to_batch_fp32_padding",
        Op.SPACE_TO_BATCH_ND,
        F32,
        [1, 1, 3, 1],
        [1, 2, 3],
        [ti32([2], [1, 2]), ti32([2, 2], [0, 0, 1, 0])],
        [2, 1, 2, 1],
        [0, 2, 1, 3],
    )
)
# Same with zero point 100: the fill is 100, the real value 0.
E(
    _ex(
        "space_to_batch_quant8_zero_point_fill",
        Op.SPACE_TO_BATCH_ND,
        Q8,
        [1, 1, 3, 1],
        [101, 102, 103],
        [ti32([2], [1, 2]), ti32([2, 2], [0, 0, 1, 0])],
        [2, 1, 2, 1],
        [100, 102, 101, 103],
        scale=0.5,
        zp=100,
    )
)
# NCHW input channels [1 2 3 4] and [5 6 7 8] (2x2): batch i*2+j holds pixel (i, j).
E(
    _ex(
        "space_to_batch_fp32_nchw",
        Op.SPACE_TO_BATCH_ND,
        F32,
        [1, 2, 2, 2],
        list(range(1, 9)),
        [ti32([2], [2, 2]), ti32([2, 2], [0, 0, 0, 0]), flag(True)],
        [4, 2, 1, 1],
        [1, 5, 2, 6, 3, 7, 4, 8],
    )
)
E(
    _ex(
        "space_to_batch_fp16",
        Op.SPACE_TO_BATCH_ND,
        F16,
        [1, 2, 1, 1],
        [0.5, -0.5],
        [ti32([2], [2, 1]), ti32([2, 2], [0, 0, 0, 0])],
        [2, 1, 1, 1],
        [0.5, -0.5],
    )
)
# Padded right with the zero point -1: [5, -1], split into two batches.
E(
    _ex(
        "space_to_batch_quant8_signed_zero_point_fill",
        Op.SPACE_TO_BATCH_ND,
        Q8S,
        [1, 1, 1, 1],
        [5],
        [ti32([2], [1, 2]), ti32([2, 2], [0, 0, 0, 1]), flag(False)],
        [2, 1, 1, 1],
        [5, -1],
        zp=-1,
    )
)
E(
    _ex(
        "space_to_batch_width_not_divisible_fails",
        Op.SPACE_TO_BATCH_ND,
        F32,
        [1, 1, 3, 1],
        [1, 2, 3],
        [ti32([2], [1, 2]), ti32([2, 2], [0, 0, 0, 0])],
        [2, 1, 1, 1],
        [],
        fail=True,
    )
)

# ---- CHANNEL_SHUFFLE: output channel i*G + j is input channel j*S + i ----------------------
E(
    _ex(
        "channel_shuffle_fp32_last_axis",
        Op.CHANNEL_SHUFFLE,
        F32,
        [1, 6],
        [0, 1, 2, 3, 4, 5],
        [i32(2), i32(-1)],
        [1, 6],
        [0, 3, 1, 4, 2, 5],
    )
)
# G=3, S=2 on axis 0: [in0, in2, in4, in1, in3, in5].
E(
    _ex(
        "channel_shuffle_fp32_axis0_three_groups",
        Op.CHANNEL_SHUFFLE,
        F32,
        [6, 1],
        [10, 11, 12, 13, 14, 15],
        [i32(3), i32(0)],
        [6, 1],
        [10, 12, 14, 11, 13, 15],
    )
)
# Middle axis of [2, 4, 1], G=2: each row [a0 a2 a1 a3].
E(
    _ex(
        "channel_shuffle_fp16_middle_axis",
        Op.CHANNEL_SHUFFLE,
        F16,
        [2, 4, 1],
        list(range(1, 9)),
        [i32(2), i32(1)],
        [2, 4, 1],
        [1, 3, 2, 4, 5, 7, 6, 8],
    )
)
E(
    _ex(
        "channel_shuffle_quant8",
        Op.CHANNEL_SHUFFLE,
        Q8,
        [1, 1, 1, 4],
        [9, 8, 7, 6],
        [i32(2), i32(3)],
        [1, 1, 1, 4],
        [9, 7, 8, 6],
        scale=0.5,
        zp=7,
    )
)
E(
    _ex(
        "channel_shuffle_quant8_signed",
        Op.CHANNEL_SHUFFLE,
        Q8S,
        [4],
        [-2, -1, 1, 2],
        [i32(2), i32(0)],
        [4],
        [-2, 1, -1, 2],
    )
)
E(
    _ex(
        "channel_shuffle_groups_not_divisor_fails",
        Op.CHANNEL_SHUFFLE,
        F32,
        [6],
        list(range(6)),
        [inp(T.INT32, [], 4), i32(0)],
        [6],
        [],
        fail=True,
    )
)


# ---- EMBEDDING_LOOKUP (data type = values, input 1) ---------------------------------------
def _embedding(t, lookups, values, vdims, out, odims, scale=0.0, zp=0, name="", fail=False):
    if t in (Q8, Q8S) and scale == 0.0:
        scale = 1.0
    b = ModelBuilder()
    lk = b.input(I32, [len(lookups)])
    val = b.input(t, vdims, scale=scale, zero_point=zp)
    b.operation(Op.EMBEDDING_LOOKUP, [lk, val], [b.output(t, odims, scale=scale, zero_point=zp)])
    return Example(
        name,
        b.build(),
        [np.array(lookups, np.int32), _arr(t, values, vdims)],
        [] if fail else [_arr(t, out, odims)],
        expect_failure=fail,
    )


E(_embedding(F32, [2, 0, 2], [1, 2, 3, 4, 5, 6], [3, 2], [5, 6, 1, 2, 5, 6], [3, 2], name="embedding_lookup_fp32"))
E(_embedding(F16, [1], [1, 2, 3, 4], [2, 1, 2], [3, 4], [1, 1, 2], name="embedding_lookup_fp16_3d"))
E(_embedding(I32, [0, 0], [7, 8, 9, 10], [2, 2], [7, 8, 7, 8], [2, 2], name="embedding_lookup_int32"))
E(_embedding(Q8, [1, 0], [1, 2, 3, 4], [2, 2], [3, 4, 1, 2], [2, 2], scale=0.5, zp=2, name="embedding_lookup_quant8"))
E(_embedding(Q8S, [1], [-1, -2, 3, 4], [2, 2], [3, 4], [1, 2], zp=-2, name="embedding_lookup_quant8_signed"))
E(_embedding(F32, [2], [1, 2, 3, 4], [2, 2], [], [1, 2], name="embedding_lookup_out_of_range_fails", fail=True))


# ---- HASHTABLE_LOOKUP: misses give zero bytes and a 0 hit ----------------------------------
def _hashtable(t, lookups, keys, values, vdims, out, hits, scale=0.0, zp=0, name=""):
    b = ModelBuilder()
    lk = b.input(I32, [len(lookups)])
    ky = b.input(I32, [len(keys)])
    val = b.input(t, vdims, scale=scale, zero_point=zp)
    odims = [len(lookups), *vdims[1:]]
    o = b.output(t, odims, scale=scale, zero_point=zp)
    h = b.output(Q8, [len(lookups)], scale=1.0, zero_point=0)
    b.operation(Op.HASHTABLE_LOOKUP, [lk, ky, val], [o, h])
    return Example(
        name,
        b.build(),
        [np.array(lookups, np.int32), np.array(keys, np.int32), _arr(t, values, vdims)],
        [_arr(t, out, odims), np.array(hits, np.uint8)],
    )


# Keys [-11, 0, 1234] -> rows 0..2; 5 is missing.
E(
    _hashtable(
        F32,
        [1234, 5, -11],
        [-11, 0, 1234],
        [1, 2, 3, 4, 5, 6],
        [3, 2],
        [5, 6, 0, 0, 1, 2],
        [1, 0, 1],
        name="hashtable_lookup_fp32",
    )
)
E(_hashtable(I32, [0, 7], [-1, 0, 3], [10, 20, 30], [3], [20, 0], [1, 0], name="hashtable_lookup_int32_rank1"))
# A miss stores 0 even though the zero point is 128.
E(
    _hashtable(
        Q8,
        [-11, 3],
        [-11, 0, 1234],
        [100, 150, 200],
        [3, 1],
        [100, 0],
        [1, 0],
        scale=0.5,
        zp=128,
        name="hashtable_lookup_quant8_miss_is_zero_byte",
    )
)
