"""Deprecated import name of :mod:`nnconform.driver.support` (the checks every driver makes).

Drivers written before the layers moved import ``nnconform.driver_support``; it keeps working
for one release, with a warning.  New code: ``from nnconform.driver import support``.
"""

import sys
import warnings

from nnconform.driver import support

warnings.warn(
    "nnconform.driver_support is deprecated: import nnconform.driver.support", DeprecationWarning, stacklevel=2
)
sys.modules[__name__] = support
