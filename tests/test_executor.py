import numpy as np
import pytest

from nnconform.errors import NotImplementedOperation, OpFailure, ValidationError
from nnconform.executor import Executor, clamp_loop_timeout, execute
from nnconform.ir import ModelBuilder, OperandType as T, OperationType as Op

from helpers import relu_model


def test_chain_with_temporaries_and_unknown_dims():
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [0])          # unknown dim: taken from the request
    t = b.temp(T.TENSOR_FLOAT32, [0])
    y = b.output(T.TENSOR_FLOAT32, [0])
    b.operation(Op.RELU, [x], [t])
    b.operation(Op.RELU1, [t], [y])
    out = execute(b.build(), [np.array([-2, 0.5, 3], np.float32)])
    assert out[0].tolist() == [0.0, 0.5, 1.0]


def test_input_shape_mismatch_is_a_validation_error():
    with pytest.raises(ValidationError, match=r"request.inputs\[0\]"):
        execute(relu_model(dims=(4,)), [np.zeros(3, np.float32)])


def test_unimplemented_operation_says_so():
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [1, 1])
    b.operation(Op.OEM_OPERATION, [x], [b.output(T.TENSOR_FLOAT32, [1, 1])])
    with pytest.raises(NotImplementedOperation, match="not implemented"):
        execute(b.build(), [np.zeros((1, 1), np.float32)])


def test_declared_output_shape_is_enforced():
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [4])
    b.operation(Op.RELU, [x], [b.output(T.TENSOR_FLOAT32, [5])])
    with pytest.raises(OpFailure, match="output 0 has shape"):
        execute(b.build(), [np.zeros(4, np.float32)])


def test_intermediate_values_are_kept_for_divergence_hunts():
    ex = Executor(relu_model())
    ex.run([np.array([-1, 1, -2, 2], np.float32)])
    assert ex.main_values[1].tolist() == [0, 1, 0, 2]


@pytest.mark.parametrize("requested,expected", [(None, 2.0), (0.001, 0.001), (60, 15.0), (-1, 0.0)])
def test_loop_timeout_default_and_clamp(requested, expected):
    assert clamp_loop_timeout(requested) == expected
