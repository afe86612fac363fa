"""Make tests/helpers.py importable (tests run with --import-mode=importlib)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

# A run's automatic capability probe (nnconform.cases.probe) costs 20-30 s per fresh report
# directory; the harness's own tests start dozens of runs, so they do without it (the probe
# has its own tests in test_probe.py).
import os

os.environ.setdefault("NNCONFORM_AUTO_PROBE", "0")


def pytest_configure(config):
    # xdist's load scheduler hands each worker a first chunk of a quarter of its share of the
    # collection (~800 tests here): every long_run test, collected first, would land on one
    # worker.  With one test per send (xdist keeps two pending per worker) the long ones spread
    # over the workers as they free up.  An explicit --maxschedchunk wins.
    if getattr(config.option, "maxschedchunk", "absent") is None:
        config.option.maxschedchunk = 1
    config.addinivalue_line(
        "markers",
        "long_run: a test that runs a whole suite in a subprocess (minutes); it is "
        "collected first so pytest-xdist starts it at once instead of leaving it for the tail",
    )


def pytest_collection_modifyitems(session, config, items):
    # xdist's load scheduler hands out the first items round-robin; the few multi-minute tests
    # go there so that the short ones fill in around them and the run does not end waiting on
    # one worker.  The order among the others is unchanged (a stable sort).
    items.sort(key=lambda item: item.get_closest_marker("long_run") is None)
