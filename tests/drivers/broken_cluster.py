"""A driver that kills the Dask worker it runs under, for ``--cluster``'s own tests.

Its L2_POOL_2D execution sends SIGKILL to the process that started its driver host: on a
cluster worker that is the worker itself (``nnconform.cluster`` runs a batch's pytest session
in the worker process and sets ``NNCONFORM_CLUSTER_WORKER`` for it).  Outside a cluster worker
it is the reference driver, so a local run gives the rows a cluster run must match.

``NNCONFORM_KILL_WORKER_ONCE=PATH``: only the first such execution kills (it creates PATH;
later ones find it and compute normally), so the re-queued case passes on another worker.
Unset: every such execution kills, so the case ends as a CRASH naming the worker.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from nnconform.driver.loader import import_driver_file
from nnconform.ir import OperationType as Op
from nnconform.reference.ops import get_op

# The test drivers are files, not a package: the shared base class comes from broken.py
# loaded by path, as the loader loads any driver file (one module per file, one class).
_OverridingDevice = import_driver_file(Path(__file__).with_name("broken.py"))._OverridingDevice


def _kill_worker(ctx):
    if os.environ.get("NNCONFORM_CLUSTER_WORKER"):
        once = os.environ.get("NNCONFORM_KILL_WORKER_ONCE")
        first = True
        if once:
            try:
                os.close(os.open(once, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            except FileExistsError:
                first = False
        if first:
            os.kill(os.getppid(), signal.SIGKILL)
    return get_op(Op.L2_POOL_2D).execute(ctx)


class KillsWorkerOnL2Pool(_OverridingDevice):
    name = "broken-cluster-kills-worker"

    def __init__(self):
        super().__init__()
        self.overrides = {Op.L2_POOL_2D: _kill_worker}
