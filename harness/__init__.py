"""nnconform: a conformance and stress test harness for neural-network drivers.

The repository's ``harness/`` folder is this package; ``drivers/``, ``generators/``,
``suites/`` and ``reports/`` install as its sub-packages.
"""

__version__ = "0.1.0"
