"""onnxruntime adapter: NNAPI models converted to ONNX and run on onnxruntime.

Needs the optional extra (``pip install nnconform[onnx]``); registered as the driver
``onnxruntime``.  Importing this package imports onnx and onnxruntime, so a missing extra
makes the driver loader report "is its optional extra installed?" in one line.
"""

from nnconform.drivers.onnxruntime.device import OnnxRuntimeDevice, OnnxRuntimePreparedModel

__all__ = ["OnnxRuntimeDevice", "OnnxRuntimePreparedModel"]
