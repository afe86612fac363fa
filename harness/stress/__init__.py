"""Stress testing (MLTS crash tests and random graphs) in subprocess sandboxes.

``runner`` plans and runs a stress run (``nnconform stress``), ``tests`` defines the crash
tests, ``random_models`` builds random graphs from a seed, ``workload`` holds the known-good
models and the liveness probe, ``client`` is the multi-process tests' client program and
``progress`` the progress bar.  The sandbox itself is ``nnconform.isolation.sandbox``.
"""

# Here rather than in ``tests`` so that building the command line (``nnconform --help``, and
# every ``nnconform run``) can show the default without importing the stress tests (0.2-0.4 s).
SOAK_EXECUTIONS = 70_000  # execution-soak: past request counters that wrap at 2^16
