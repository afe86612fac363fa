import time

import numpy as np
import pytest
from helpers import relu_model

from nnconform.driver import AsyncExecution, DriverError, ErrorStatus
from nnconform.drivers.reference import ReferenceDevice
from nnconform.ir import ModelBuilder, Request, RequestArgument
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op

X = np.array([-1, 2, -3, 4], np.float32)


@pytest.fixture
def dev():
    return ReferenceDevice()


def test_supported_operations_one_per_operation(dev):
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [4])
    t = b.temp(T.TENSOR_FLOAT32, [4])
    b.operation(Op.RELU, [x], [t])
    b.operation(Op.OEM_OPERATION, [t], [b.output(T.TENSOR_FLOAT32, [4])])
    assert dev.supported_operations(b.build()) == [True, False]


def test_invalid_model_is_invalid_argument(dev):
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [4])
    b.operation(Op.RELU, [x], [b.output(T.TENSOR_INT32, [4])])  # RELU cannot produce int32
    for call in (dev.supported_operations, dev.prepare):
        with pytest.raises(DriverError) as e:
            call(b.build())
        assert e.value.status == ErrorStatus.INVALID_ARGUMENT


def test_timing_only_when_asked(dev):
    pm = dev.prepare(relu_model())
    req = Request.from_arrays(pm.model, [X])
    assert pm.execute(req).timing.time_on_device is None
    t = pm.execute(req, measure_timing=True).timing
    assert t.time_on_device is not None and t.time_on_device <= t.time_in_driver


def test_output_insufficient_size(dev):
    pm = dev.prepare(relu_model())
    req = Request((RequestArgument(value=X),), (RequestArgument(capacity=X.nbytes - 4),))
    with pytest.raises(DriverError) as e:
        pm.execute(req)
    assert e.value.status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE
    assert e.value.output_shapes[0].dimensions == (4,) and not e.value.output_shapes[0].is_sufficient


def test_bad_request_is_invalid_argument(dev):
    pm = dev.prepare(relu_model())
    with pytest.raises(DriverError) as e:
        pm.execute(Request((), (RequestArgument(),)))
    assert e.value.status == ErrorStatus.INVALID_ARGUMENT


def test_deadline_already_passed(dev):
    pm = dev.prepare(relu_model())
    with pytest.raises(DriverError) as e:
        pm.execute(Request.from_arrays(pm.model, [X]), deadline=time.monotonic() - 1)
    assert e.value.status in (ErrorStatus.MISSED_DEADLINE_TRANSIENT, ErrorStatus.MISSED_DEADLINE_PERSISTENT)


def test_async_and_caching(dev):
    token = bytes(range(32))
    pm = dev.prepare(relu_model(), cache_token=token)
    assert isinstance(pm, AsyncExecution)
    fut = pm.execute_async(Request.from_arrays(pm.model, [X]))
    assert fut.result(timeout=10).outputs[0].tolist() == [0, 2, 0, 4]
    pm.release()
    again = dev.prepare_from_cache(token)
    assert again.execute(Request.from_arrays(again.model, [X])).outputs[0].tolist() == [0, 2, 0, 4]
    with pytest.raises(DriverError) as e:
        dev.prepare_from_cache(bytes(32))
    assert e.value.status == ErrorStatus.GENERAL_FAILURE


def test_release_then_execute_fails(dev):
    pm = dev.prepare(relu_model())
    pm.release()
    with pytest.raises(DriverError):
        pm.execute(Request.from_arrays(pm.model, [X]))
