"""OpenVINO adapter: NNAPI models built as OpenVINO graphs and run on its CPU plugin.

Needs the optional extra (``pip install nnconform[openvino]``); registered as the driver
``openvino``.  Importing this package imports openvino, so a missing extra makes the driver
loader report "is its optional extra installed?" in one line.
"""

import sys

# `import openvino` sends a usage event to OpenVINO's telemetry (openvino_telemetry, to Google
# Analytics) from a forked process, unless the user opted out or CI=true.  A conformance run
# should not phone home, and that fork, when it was still dying as the first case ended, was
# counted as a process the driver left running (a FAIL that came and went with DNS timing).
# Without the module, openvino falls back to its own no-op stub.  setdefault: a process that
# already imported it keeps it.
sys.modules.setdefault("openvino_telemetry", None)

from nnconform.drivers.openvino.device import OpenVinoDevice, OpenVinoPreparedModel  # noqa: E402

__all__ = ["OpenVinoDevice", "OpenVinoPreparedModel"]
