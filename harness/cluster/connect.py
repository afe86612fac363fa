"""The cluster a run uses: ``local:N`` (a LocalCluster of N single-threaded worker processes on
this machine) or the address of a running ``dask scheduler``; worker resources.

A worker that dies while it runs a batch must surface here at once, as a lost batch, so the
dispatcher applies its own rule (queue again once, then split, then CRASH naming the worker).
The LocalCluster's scheduler is told so (``allowed-failures`` 0); a remote scheduler keeps its
own setting, which re-runs a task on that many other workers before giving up on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from nnconform.cluster import ClusterError, require_dask

LOCAL_RE = re.compile(r"local:(\d+)")


def parse_resources(text: str | None) -> dict[str, float]:
    """``device=1`` or ``device=1,gpu=2`` -> {"device": 1.0, ...}; None or '' -> {}."""
    out: dict[str, float] = {}
    for part in (p.strip() for p in (text or "").split(",")):
        if not part:
            continue
        name, sep, value = part.partition("=")
        try:
            amount = float(value)
        except ValueError:
            amount = -1.0
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", name.strip()) or amount <= 0:
            raise ClusterError(f"--worker-resources: bad entry {part!r} (expected NAME=AMOUNT, e.g. device=1)")
        out[name.strip()] = amount
    return out


def check_address(address: str) -> None:
    m = LOCAL_RE.fullmatch(address)
    if m:
        if int(m.group(1)) < 1:
            raise ClusterError(f"--cluster {address}: a local cluster needs at least one worker")
        return
    if not re.fullmatch(r"(tcp|tls|inproc|ucx|ws|wss)://\S+|[A-Za-z0-9_.-]+:\d+", address):
        raise ClusterError(f"--cluster {address!r}: expected local:N or a scheduler address such as tcp://host:8786")


@dataclass
class ClusterHandle:
    address: str
    client: Any  # a dask.distributed Client (an optional dependency, untyped here)
    cluster: Any = None  # the LocalCluster we started, closed with us
    resources: dict = field(default_factory=dict)

    def workers(self) -> dict[str, dict]:
        return self.client.scheduler_info().get("workers", {})

    def slots(self) -> int:
        """Tasks the cluster runs at once (worker threads; at least 1)."""
        return max(1, sum(int(w.get("nthreads", 1)) for w in self.workers().values()))

    def close(self) -> None:
        try:
            self.client.close()
        finally:
            if self.cluster is not None:
                self.cluster.close()


def open_cluster(address: str, resources: dict[str, float] | None = None, timeout: float = 60.0) -> ClusterHandle:
    """Connect (or start ``local:N``) and wait for a first worker; ClusterError in one line."""
    require_dask()
    check_address(address)
    import dask
    from distributed import Client, LocalCluster

    resources = dict(resources or {})
    m = LOCAL_RE.fullmatch(address)
    cluster = None
    try:
        if m:
            with dask.config.set(
                {
                    "distributed.scheduler.allowed-failures": 0,
                    "distributed.worker.daemon": False,  # workers start driver hosts
                    # Workers log at shutdown when the scheduler goes first ("Failed
                    # to communicate with scheduler during heartbeat", with a
                    # traceback): noise, since a batch a worker loses is the
                    # dispatcher's own one-line verdict.
                    "distributed.logging.distributed": "critical",
                    # Dask's sampling profiler walks the task thread's stack every
                    # 10 ms, and a pytest batch's stacks are deep: it cost a worker
                    # half again the CPU of the same batch outside Dask (2,000
                    # vectors cases: 19.7 s against 12.9 s).  Nobody reads it here.
                    "distributed.worker.profile.enabled": False,
                }
            ):
                cluster = LocalCluster(
                    n_workers=int(m.group(1)),
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    resources=resources or None,
                    silence_logs=50,
                )
            client = Client(cluster, timeout=timeout)
            # The scheduler runs in this process: its "worker died" errors are the dispatcher's
            # one line ("batch ... lost on ...") here.
            import logging

            logging.getLogger("distributed.scheduler").setLevel(logging.CRITICAL)
        else:
            client = Client(address, timeout=timeout)
            client.wait_for_workers(1, timeout=timeout)
    except (OSError, TimeoutError, RuntimeError) as e:
        if cluster is not None:
            cluster.close()
        raise ClusterError(f"--cluster {address}: cannot reach the scheduler or its workers ({e})") from None
    handle = ClusterHandle(address, client, cluster, resources)
    if resources:
        have = [
            a
            for a, w in handle.workers().items()
            if all(w.get("resources", {}).get(k, 0) >= v for k, v in resources.items())
        ]
        if not have:
            handle.close()
            want = ",".join(f"{k}={v:g}" for k, v in resources.items())
            raise ClusterError(
                f"--worker-resources {want}: no worker of {address} has these resources "
                f'(start workers with `dask worker ... --resources "{want.replace(",", " ")}"`)'
            )
    return handle
