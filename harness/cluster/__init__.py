"""Running nnconform's cases on a Dask cluster (``--cluster ADDRESS``; the ``[cluster]`` extra).

``nnconform run|stress|fuzz --cluster tcp://scheduler:8786`` (or ``local:N`` for a
LocalCluster of N worker processes on this machine) plans the cases here, with the run's seed,
exactly as a local run would, and sends them to the workers in batches.  Each worker runs its
batch with its own driver host (the same process boundary as a local run) and returns one row
per case; every row goes into the one journal in the report directory as it arrives, fsynced.

A batch lost with its worker (killed, out of memory, disconnected) is queued again once; lost
again, it is split into single cases, and a case still lost is a CRASH row naming the worker.
Nothing is lost and ``--resume`` continues a run cut short.

Modules: :mod:`.connect` (addresses, resources, the client), :mod:`.dispatch` (the batch
dispatcher every command shares), :mod:`.conformance` (``run``: a pytest plugin that sends
the collected items to the cluster), :mod:`.stress` and :mod:`.fuzz`.
"""

from __future__ import annotations

EXTRA_HINT = 'pip install "nnconform[cluster]"'


class ClusterError(Exception):
    """The cluster cannot be used (extra missing, bad address, no workers); one line."""


def require_dask() -> None:
    """ClusterError naming the extra when dask.distributed is not installed."""
    import importlib.util

    try:
        found = importlib.util.find_spec("distributed") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ClusterError(f"--cluster needs dask.distributed, which is not installed: {EXTRA_HINT}")
