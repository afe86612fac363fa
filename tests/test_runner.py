"""The runner turns every driver behaviour into an outcome with a readable message."""

import numpy as np
import pytest
from helpers import add_model, double_module, relu_model

from nnconform.drivers.reference import ReferenceDevice
from nnconform.ir import OperandType as T
from nnconform.verdict.runner import run_case

broken = double_module("broken")

QA = add_model(T.TENSOR_QUANT8_ASYMM, (2, 2), scale=0.5, zp=100)
QA_IN = [np.array([[100, 102], [104, 110]], np.uint8), np.array([[100, 101], [100, 90]], np.uint8)]
# real values: (0, 1, 2, 5) + (0, 0.5, 0, -5) = (0, 1.5, 2, 0) -> stored 100 + 2*v
QA_OUT = [np.array([[100, 103], [104, 100]], np.uint8)]


def test_reference_passes_quant_add():
    assert run_case(ReferenceDevice(), QA, QA_IN, QA_OUT).outcome == "PASS"


def test_quant_add_off_by_two_names_op_index_expected_actual_criterion():
    out = run_case(broken.QuantAddOffByTwo(), QA, QA_IN, QA_OUT)
    assert out.outcome == "FAIL"
    for fragment in ("ADD", "output 0", "index [0, 0]", "expected 100", "actual 102", "atol 1"):
        assert fragment in out.message, (fragment, out.message)


@pytest.mark.parametrize(
    "driver,fragment",
    [
        (broken.RaisesPlainError(), "driver raised in execute on [RELU]: ValueError: simulated driver bug"),
        (broken.WrongShape(), "shape"),
        (broken.WrongDtype(), "dtype"),
        (broken.GarbageResult(), "execute returned str, not an ExecutionResult"),
    ],
)
def test_misbehaving_drivers_become_fail_rows(driver, fragment):
    x = np.array([-1, 2, -3, 4], np.float32).reshape(2, 2)
    out = run_case(driver, relu_model(dims=(2, 2)), [x], [np.maximum(x, 0)])
    assert out.outcome == "FAIL" and fragment in out.message, out.message
    assert "\n" not in out.message


def test_unsupported_is_skip():
    from nnconform.ir import ModelBuilder
    from nnconform.ir import OperationType as Op

    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [1])
    b.operation(Op.OEM_OPERATION, [x], [b.output(T.TENSOR_FLOAT32, [1])])
    out = run_case(ReferenceDevice(), b.build(), [np.zeros(1, np.float32)], [np.zeros(1, np.float32)])
    assert out.outcome == "SKIP" and "OEM_OPERATION" in out.message


def test_expect_failure_must_be_rejected():
    from nnconform.ir import ModelBuilder
    from nnconform.ir import OperationType as Op

    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [2])
    y = b.input(T.TENSOR_FLOAT32, [2])
    b.operation(Op.ADD, [x, y, b.i32(7)], [b.output(T.TENSOR_FLOAT32, [2])])  # activation 7 is invalid
    z = np.zeros(2, np.float32)
    assert run_case(ReferenceDevice(), b.build(), [z, z], [z], expect_failure=True).outcome == "PASS"
    assert run_case(ReferenceDevice(), add_model(dims=(2,)), [z, z], [z], expect_failure=True).outcome == "FAIL"


def test_an_in_process_array_that_says_it_equals_anything_is_judged_by_its_data():
    """broken_isolation.LyingArray returns zeros as an ndarray subclass whose ==, != and
    all() claim a match; without a host in between, the runner still judges the data."""
    LyingArray = double_module("broken_isolation").LyingArray
    from nnconform.ir import ModelBuilder
    from nnconform.ir import OperationType as Op
    from nnconform.reference.executor import Executor

    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [1, 8])
    b.operation(Op.FLOOR, [x], [b.output(T.TENSOR_FLOAT32, [1, 8])])  # FLOOR is its trigger
    m = b.build()
    xv = np.arange(8, dtype=np.float32).reshape(1, 8) + np.float32(0.5)
    out = run_case(LyingArray(), m, [xv], Executor(m).run([xv]))
    assert out.outcome == "FAIL" and "actual 0" in out.message, out.message
    assert all(type(a) is np.ndarray for a in out.actual)
