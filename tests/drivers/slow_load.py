"""A driver that never finishes loading: asking this module for ``NeverLoads`` waits forever
(as a driver waiting on a device that never answers does), so the driver host never starts,
and the harness must say where the load is stuck (tests/test_loader.py).  Importing the
module itself is quick: other tests import every test driver file."""

import time


def _wait_for_a_device_that_never_answers() -> None:
    while True:
        time.sleep(0.05)


def __getattr__(name: str):
    if name == "NeverLoads":
        _wait_for_a_device_that_never_answers()
    raise AttributeError(name)
