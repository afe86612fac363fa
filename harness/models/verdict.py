"""The models suite's verdict on a failed comparison, shared by ``suites/test_models.py`` and
``nnconform replay`` so that a dumped failure is judged again exactly as the suite judged it.

A driver's outputs that fail ``REAL_MODEL`` as it is get two more chances, in this order:

1. ``scaled``: every float output passes ``REAL_MODEL`` with its rows scaled by that output's
   magnitude (:func:`nnconform.models.criteria.judge`);
2. ``accumulated rounding``: every operation of the driver's own run is within that
   operation's CTS criteria on the very inputs the driver fed it, and that run (with every
   operation output exposed) gave the same final outputs
   (:func:`nnconform.models.localise.check_steps`).  Such a result is a chain of conformant
   steps; how far it ends from the reference's chain is a property of the network (a quantised
   classifier's softmax turns 1-LSB steps into 10-LSB probabilities), not a driver defect.

Only a value comparison is reconsidered: a FAIL for anything else (wrong output shapes, an
exception, a wrong output count) stands.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from nnconform.ir import Model
from nnconform.models.criteria import judge
from nnconform.models.localise import StepCheck, check_steps
from nnconform.verdict.runner import FAIL, CaseOutcome

SCALED = "scaled"
ACCUMULATED = "accumulated rounding"


@dataclass
class Reconsidered:
    accepted: str | None = None  # SCALED, ACCUMULATED or None (the FAIL stands)
    message: str = ""  # why it was accepted
    steps: StepCheck | None = None  # the step check, when it was made (its exposed run is reusable)


def reconsider(
    device, model: Model, inputs: Sequence[np.ndarray], expected: Sequence[np.ndarray], outcome: CaseOutcome
) -> Reconsidered:
    """See the module docstring.  When the FAIL stands, ``outcome`` carries the scaled
    comparison (the one the suite reports).  The step check runs the model once more on the
    driver; its errors propagate (the caller records them next to the FAIL)."""
    cmp = outcome.comparison
    if outcome.outcome != FAIL or outcome.stage != "compare" or outcome.actual is None or cmp is None or cmp.passed:
        return Reconsidered()
    scaled = judge(model, expected, outcome.actual)
    if scaled is None:
        return Reconsidered(SCALED, "passes RealModel scaled by each output's magnitude")
    outcome.comparison, outcome.message = scaled, scaled.message
    steps = check_steps(device, model, inputs, outcome.actual)
    if steps.accumulated_rounding:
        return Reconsidered(ACCUMULATED, f"{scaled.message}; but {steps.describe()}", steps)
    return Reconsidered(None, "", steps)
