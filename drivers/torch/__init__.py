"""torch adapter: NNAPI models mapped onto torch operations, run eagerly or through
``torch.compile``.

Needs the optional extra (``pip install nnconform[torch]``); registered as the drivers
``torch`` (eager) and ``torch-compile`` (inductor).  Importing this package imports torch, so
a missing extra makes the driver loader report "is its optional extra installed?" in one line.
"""

from nnconform.drivers.torch.device import TorchCompileDevice, TorchDevice, TorchPreparedModel

__all__ = ["TorchCompileDevice", "TorchDevice", "TorchPreparedModel"]
