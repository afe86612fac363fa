"""OpenVINO adapter: NNAPI models built as OpenVINO graphs and run on its CPU plugin.

Needs the optional extra (``pip install nnconform[openvino]``); registered as the driver
``openvino``.  Importing this package imports openvino, so a missing extra makes the driver
loader report "is its optional extra installed?" in one line.
"""
from .device import OpenVinoDevice, OpenVinoPreparedModel

__all__ = ["OpenVinoDevice", "OpenVinoPreparedModel"]
