"""RNN and LSTM families as ONNX graphs (being written: no operation mapped yet)."""
from __future__ import annotations

CONVERTERS: dict = {}
