"""Checks shared by the runtime adapters' test files (tests/test_{onnxruntime,openvino,jax,
torch,tflite}_driver.py).

The ``test_*`` functions here are imported by name into each adapter's test file; pytest
collects them there and runs them with that file's ``device`` fixture, so every adapter is
held to the same NNAPI behaviour (this module is not a test file itself).  ``run`` executes a
model once; ``generated_suite`` runs the generated suite (or a slice of it) through a
subprocess and returns its result rows after checking none failed.
"""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nnconform.driver import DriverError, ErrorStatus
from nnconform.ir import ModelBuilder, Request, RequestArgument
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op

REPO = Path(__file__).resolve().parents[1]


def run(device, model, *inputs):
    """Prepare ``model``, execute it once on ``inputs`` (timing measured), release it."""
    prepared = device.prepare(model)
    try:
        return prepared.execute(Request.from_arrays(model, list(inputs)), measure_timing=True)
    finally:
        prepared.release()


def generated_suite(command: list[str], min_pass: int) -> list[dict]:
    """Run ``python -m <command>`` from the repository (an ``nnconform run`` or a pytest of
    suites/test_generated.py, which write results.csv into their report directory, the
    argument after ``--report-dir`` / ``--nn-report-dir``): it must exit 0, record rows, fail
    none and pass more than ``min_pass``."""
    flag = next(a for a in command if a in ("--report-dir", "--nn-report-dir"))
    report = Path(command[command.index(flag) + 1])
    proc = subprocess.run([sys.executable, "-m", *command], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    with open(report / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert rows, "no result rows recorded"
    failed = [r["test_id"] for r in rows if r["outcome"] in ("FAIL", "ERROR")]
    assert not failed, failed
    assert sum(r["outcome"] == "PASS" for r in rows) > min_pass
    return rows


def test_add_with_fused_relu6_and_broadcast(device):
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [2, 3])
    y = b.output(T.TENSOR_FLOAT32, [2, 3])
    b.operation(Op.ADD, [x, b.const(T.TENSOR_FLOAT32, [3], [1.0, -10.0, 5.0]), b.i32(3)], [y])
    res = run(device, b.build(), np.array([[0.5, 2, 3], [-4, 20, 0]], np.float32))
    np.testing.assert_array_equal(res.outputs[0], [[1.5, 0, 6], [0, 6, 5]])
    assert res.timing.time_on_device is not None and res.timing.time_in_driver >= res.timing.time_on_device


def test_conv_2d_nhwc_same_padding_matches_hand_computation(device):
    # 3x3 input, 2x2 all-ones filter, SAME, stride 1: the odd padding goes to the bottom/right,
    # so output[i, j] sums the window starting at (i, j).
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [1, 3, 3, 1])
    y = b.output(T.TENSOR_FLOAT32, [1, 3, 3, 1])
    f = b.const(T.TENSOR_FLOAT32, [1, 2, 2, 1], np.ones(4))
    bias = b.const(T.TENSOR_FLOAT32, [1], [0.5])
    b.operation(Op.CONV_2D, [x, f, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(0)], [y])
    img = np.arange(9, dtype=np.float32).reshape(1, 3, 3, 1)
    padded = np.pad(img[0, :, :, 0], ((0, 1), (0, 1)))
    want = np.array([[padded[i : i + 2, j : j + 2].sum() for j in range(3)] for i in range(3)]) + 0.5
    np.testing.assert_allclose(run(device, b.build(), img).outputs[0][0, :, :, 0], want)


def test_invalid_model_is_invalid_argument(device):
    """Both getSupportedOperations and prepareModel answer an invalid model INVALID_ARGUMENT."""
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [2])
    y = b.output(T.TENSOR_FLOAT32, [2])
    b.operation(Op.ADD, [x, x, b.i32(9)], [y])  # activation 9 does not exist
    model = b.build()
    for call in (device.supported_operations, device.prepare):
        with pytest.raises(DriverError) as e:
            call(model)
        assert e.value.status == ErrorStatus.INVALID_ARGUMENT


def test_invalid_request_is_invalid_argument_and_small_buffers_insufficient(device):
    """A value of the wrong shape or a missing input is INVALID_ARGUMENT; an output buffer too
    small for the result is OUTPUT_INSUFFICIENT_SIZE."""
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [2])
    y = b.output(T.TENSOR_FLOAT32, [2])
    b.operation(Op.RELU, [x], [y])
    model = b.build()
    prepared = device.prepare(model)
    try:
        wrong_shape = Request((RequestArgument(value=np.zeros(3, np.float32), dimensions=(3,)),), (RequestArgument(),))
        too_few = Request((), (RequestArgument(),))
        for bad in (wrong_shape, too_few):
            with pytest.raises(DriverError) as e:
                prepared.execute(bad)
            assert e.value.status == ErrorStatus.INVALID_ARGUMENT
        small = Request.from_arrays(model, [np.ones(2, np.float32)])
        small = Request(small.inputs, (RequestArgument(capacity=4),))
        with pytest.raises(DriverError) as e:
            prepared.execute(small)
        assert e.value.status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE
    finally:
        prepared.release()
