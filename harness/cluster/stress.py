"""``nnconform stress --cluster``: stress cases on a Dask cluster.

The stress runner plans and journals as it does locally (same seed, same plan, same
manifest, ``--resume``); only its slots change.  A slot is a :class:`ClusterBox`: it sends
each case to the cluster, where :func:`run_in_sandbox` runs it in that worker's own sandbox
(a warm sandbox worker kept per worker thread, as a local slot keeps one) and returns the
sandbox's verdict.  The runner writes the row (fsynced) as soon as the case returns.

A case whose cluster worker dies or disconnects is sent again once; lost again, it is a
CRASH naming the worker.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from typing import TYPE_CHECKING

from nnconform.cluster.dispatch import worker_address

if TYPE_CHECKING:
    from nnconform.isolation.sandbox import Sandbox

_BOXES: dict[tuple[str, int | None, int], Sandbox] = {}
_BOXES_LOCK = threading.Lock()


def run_in_sandbox(
    driver: str, mem_limit: int, target: str, kwargs: dict, timeout: float, case_key: str, seed: int | None
) -> dict:
    """On a worker: run one stress case in this worker thread's sandbox."""
    from nnconform.isolation.sandbox import Sandbox

    key = (driver, mem_limit, threading.get_ident())
    with _BOXES_LOCK:
        box = _BOXES.get(key)
        if box is None:
            box = _BOXES[key] = Sandbox(driver, mem_limit=mem_limit)
    os.environ["NNCONFORM_CLUSTER_WORKER"] = worker_address() or "unknown"
    res = box.run(target, kwargs, timeout=timeout, case_key=case_key, seed=seed)
    return {"result": dataclasses.asdict(res), "worker": worker_address()}


class ClusterBox:
    """A stress slot whose cases run on the cluster (the Sandbox interface the runner uses)."""

    _worker = None  # no local sandbox worker to kill on Ctrl-C

    def __init__(self, handle, driver: str, mem_limit: int, log=print):
        self.handle, self.driver, self.mem_limit, self.log = handle, driver, mem_limit, log

    def run(
        self, target: str, kwargs: dict | None = None, *, timeout: float, case_key: str = "", seed: int | None = None
    ):
        from nnconform.cluster.dispatch import _killed_worker, _why
        from nnconform.isolation.sandbox import SandboxResult
        from nnconform.verdict.results import CRASH

        kw = {"resources": dict(self.handle.resources)} if self.handle.resources else {}
        lost = ""
        for attempt in (0, 1):
            fut = self.handle.client.submit(
                run_in_sandbox,
                self.driver,
                self.mem_limit,
                target,
                kwargs or {},
                timeout,
                case_key,
                seed,
                pure=False,
                **kw,
            )
            try:
                d = fut.result()
            except Exception as e:
                lost = _killed_worker(e) or "an unknown worker"
                why = _why(e)
                self.log(
                    f"nnconform cluster: stress case {case_key} lost with worker {lost} ({why})"
                    + ("; queued again" if attempt == 0 else "; recorded CRASH")
                )
                continue
            finally:
                fut.release()
            res = SandboxResult(**d["result"])
            res.extra["cluster_worker"] = d["worker"]
            return res
        return SandboxResult(
            verdict=CRASH,
            reason=f"cluster worker {lost} was lost while running this case, "
            f"after the case had been queued again once ({why})",
            extra={"cluster_worker": lost},
        )

    def close(self) -> None:
        pass
