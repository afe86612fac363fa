"""Small models shared by the harness's own tests."""

from nnconform.ir import ModelBuilder, OperandType as T, OperationType as Op


def add_model(t=T.TENSOR_FLOAT32, dims=(2, 2), scale=0.0, zp=0, act=0):
    b = ModelBuilder()
    x = b.input(t, dims, scale=scale, zero_point=zp)
    y = b.input(t, dims, scale=scale, zero_point=zp)
    out = b.output(t, dims, scale=scale, zero_point=zp)
    b.operation(Op.ADD, [x, y, b.i32(act)], [out])
    return b.build()


def relu_model(t=T.TENSOR_FLOAT32, dims=(4,)):
    b = ModelBuilder()
    x = b.input(t, dims)
    b.operation(Op.RELU, [x], [b.output(t, dims)])
    return b.build()
