"""TFLite (LiteRT) adapter: NNAPI models written as .tflite flatbuffers and run on the LiteRT
interpreter.

Needs the optional extra (``pip install nnconform[tflite]``: ai-edge-litert and flatbuffers);
registered as the driver ``tflite``.  Importing this package imports ai_edge_litert, so a
missing extra makes the driver loader report it in one line.
"""

from nnconform.drivers.tflite.device import TfliteDevice, TflitePreparedModel

__all__ = ["TfliteDevice", "TflitePreparedModel"]
