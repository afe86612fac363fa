"""A flaky driver, for ``nnconform diff``'s tests: its quantised ADD is off by two on about
half of its executions.  Which ones is drawn from ``NNCONFORM_FLAKY_SEED`` (default 0), so a
run is reproducible and two runs with different values disagree on some cases."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from nnconform.driver.loader import import_driver_file
from nnconform.ir import OperationType as Op
from nnconform.reference.ops import get_op

# The test drivers are files, not a package: the shared base class comes from broken.py
# loaded by path, as the loader loads any driver file (one module per file, one class).
_OverridingDevice = import_driver_file(Path(__file__).with_name("broken.py"))._OverridingDevice


class FlakyQuantAdd(_OverridingDevice):
    name = "broken-flaky-quant-add"

    def __init__(self):
        super().__init__()
        self._rng = np.random.default_rng(int(os.environ.get("NNCONFORM_FLAKY_SEED", "0")))
        self.overrides = {Op.ADD: self._add}

    def _add(self, ctx):
        (out,) = get_op(Op.ADD).execute(ctx)
        if ctx.out_operands[0].info.is_quant and self._rng.random() < 0.5:
            info = np.iinfo(out.dtype)
            out = np.clip(out.astype(np.int64) + 2, info.min, info.max).astype(out.dtype)
        return [out]
