"""RELU / RELU1 / RELU6 examples; expected values by hand."""
import numpy as np

from nnconform.ir import ModelBuilder, OperandType as T, OperationType as Op

from . import Example


def _unary(op, t, dims, scale=0.0, zp=0):
    b = ModelBuilder()
    x = b.input(t, dims, scale=scale, zero_point=zp)
    y = b.output(t, dims, scale=scale, zero_point=zp)
    b.operation(op, [x], [y])
    return b.build()


_X = np.array([-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 5.0, 7.0], np.float32)

EXAMPLES = [
    Example("relu_fp32", _unary(Op.RELU, T.TENSOR_FLOAT32, [2, 4]), [_X.reshape(2, 4)],
            [np.array([[0, 0, 0, 0], [0.5, 1, 5, 7]], np.float32)]),
    Example("relu1_fp32", _unary(Op.RELU1, T.TENSOR_FLOAT32, [8]), [_X],
            [np.array([-1, -1, -0.5, 0, 0.5, 1, 1, 1], np.float32)]),
    Example("relu6_fp16", _unary(Op.RELU6, T.TENSOR_FLOAT16, [8]), [_X.astype(np.float16)],
            [np.array([0, 0, 0, 0, 0.5, 1, 5, 6], np.float16)]),
    # scale 0.5, zp 128: real 0 is stored 128, real 6 is 140, real -1 is 126, real 1 is 130.
    Example("relu_quant8", _unary(Op.RELU, T.TENSOR_QUANT8_ASYMM, [4], 0.5, 128),
            [np.array([0, 127, 128, 200], np.uint8)], [np.array([128, 128, 128, 200], np.uint8)]),
    Example("relu6_quant8", _unary(Op.RELU6, T.TENSOR_QUANT8_ASYMM, [4], 0.5, 128),
            [np.array([0, 130, 140, 141], np.uint8)], [np.array([128, 130, 140, 140], np.uint8)]),
    Example("relu1_quant8_signed", _unary(Op.RELU1, T.TENSOR_QUANT8_ASYMM_SIGNED, [4], 0.5, 0),
            [np.array([-128, -2, 1, 127], np.int8)], [np.array([-2, -2, 1, 2], np.int8)]),
]
