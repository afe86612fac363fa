"""Stress testing (MLTS crash tests and random graphs) in subprocess sandboxes.

``runner`` plans and runs a stress run (``nnconform stress``), ``tests`` defines the crash
tests, ``random_models`` builds random graphs from a seed, ``workload`` holds the known-good
models and the liveness probe, ``client`` is the multi-process tests' client program and
``progress`` the progress bar.  The sandbox itself is ``nnconform.sandbox``.
"""
