"""RELU / RELU1 / RELU6 examples; expected values by hand."""

import numpy as np

from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.suites.examples import Example


def _unary(op, t, dims, scale=0.0, zp=0):
    b = ModelBuilder()
    x = b.input(t, dims, scale=scale, zero_point=zp)
    y = b.output(t, dims, scale=scale, zero_point=zp)
    b.operation(op, [x], [y])
    return b.build()


_X = np.array([-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 5.0, 7.0], np.float32)

EXAMPLES = [
    Example(
        "relu_fp32",
        _unary(Op.RELU, T.TENSOR_FLOAT32, [2, 4]),
        [_X.reshape(2, 4)],
        [np.array([[0, 0, 0, 0], [0.5, 1, 5, 7]], np.float32)],
    ),
    Example(
        "relu1_fp32",
        _unary(Op.RELU1, T.TENSOR_FLOAT32, [8]),
        [_X],
        [np.array([-1, -1, -0.5, 0, 0.5, 1, 1, 1], np.float32)],
    ),
    Example(
        "relu6_fp16",
        _unary(Op.RELU6, T.TENSOR_FLOAT16, [8]),
        [_X.astype(np.float16)],
        [np.array([0, 0, 0, 0, 0.5, 1, 5, 6], np.float16)],
    ),
    # scale 0.5, zp 128: real 0 is stored 128, real 6 is 140, real -1 is 126, real 1 is 130.
    Example(
        "relu_quant8",
        _unary(Op.RELU, T.TENSOR_QUANT8_ASYMM, [4], 0.5, 128),
        [np.array([0, 127, 128, 200], np.uint8)],
        [np.array([128, 128, 128, 200], np.uint8)],
    ),
    Example(
        "relu6_quant8",
        _unary(Op.RELU6, T.TENSOR_QUANT8_ASYMM, [4], 0.5, 128),
        [np.array([0, 130, 140, 141], np.uint8)],
        [np.array([128, 130, 140, 140], np.uint8)],
    ),
    Example(
        "relu1_quant8_signed",
        _unary(Op.RELU1, T.TENSOR_QUANT8_ASYMM_SIGNED, [4], 0.5, 0),
        [np.array([-128, -2, 1, 127], np.int8)],
        [np.array([-2, -2, 1, 2], np.int8)],
    ),
]

# The remaining type of each op.  quant8 scale 0.25, zp 100: real r is stored 100 + 4r, so
# RELU1 clamps stored values to [96, 104]; quant8_signed scale 0.5, zp -10: real 0 is -10,
# real 6 is 2.
EXAMPLES += [
    Example(
        "relu_fp16",
        _unary(Op.RELU, T.TENSOR_FLOAT16, [8]),
        [_X.astype(np.float16)],
        [np.array([0, 0, 0, 0, 0.5, 1, 5, 7], np.float16)],
    ),
    Example(
        "relu_quant8_signed",
        _unary(Op.RELU, T.TENSOR_QUANT8_ASYMM_SIGNED, [4], 0.5, -10),
        [np.array([-128, -11, -10, 127], np.int8)],
        [np.array([-10, -10, -10, 127], np.int8)],
    ),
    Example(
        "relu1_fp16",
        _unary(Op.RELU1, T.TENSOR_FLOAT16, [8]),
        [_X.astype(np.float16)],
        [np.array([-1, -1, -0.5, 0, 0.5, 1, 1, 1], np.float16)],
    ),
    Example(
        "relu1_quant8",
        _unary(Op.RELU1, T.TENSOR_QUANT8_ASYMM, [5], 0.25, 100),
        [np.array([0, 96, 100, 104, 255], np.uint8)],
        [np.array([96, 96, 100, 104, 104], np.uint8)],
    ),
    Example(
        "relu6_fp32",
        _unary(Op.RELU6, T.TENSOR_FLOAT32, [2, 4]),
        [_X.reshape(2, 4)],
        [np.array([[0, 0, 0, 0], [0.5, 1, 5, 6]], np.float32)],
    ),
    Example(
        "relu6_quant8_signed",
        _unary(Op.RELU6, T.TENSOR_QUANT8_ASYMM_SIGNED, [4], 0.5, -10),
        [np.array([-128, -10, 2, 100], np.int8)],
        [np.array([-10, -10, 2, 2], np.int8)],
    ),
]
