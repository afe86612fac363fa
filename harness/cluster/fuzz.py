"""``nnconform fuzz --cluster``: fuzz cases on a Dask cluster.

Case ``i`` is drawn from the run seed and ``i`` alone (``nnconform.fuzz.runner.case_seed``),
so the cluster runs index ranges (chunks) on its workers, each worker with its own driver
host, and returns only the verdicts.  The coordinator takes them in index order, so the
journal, the buckets, ``--resume`` (which continues at the first index not taken) and the
verdicts are those of a local run with the same seed; a new bucket's case is drawn again
here from its seed and shrunk on a local driver host.

A chunk lost with its worker is sent again once; lost again, it is split into single
cases, and a single case lost at that point is a CRASH finding naming the worker.
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

from nnconform.cluster.dispatch import _killed_worker, _why, worker_address

_DEVICES: dict[tuple, object] = {}
_LOCK = threading.Lock()


def fuzz_chunk(
    driver: str,
    call_timeout: float,
    mem_limit: int,
    slow_s: float,
    run_seed: int,
    start: int,
    count: int,
    steer: dict | None = None,
) -> dict:
    """On a worker: cases start..start+count-1 on this worker thread's driver host, drawn with
    the coordinator's steering as it was when the chunk was sent (``steer``: triggers, the
    known hang keys, the repeat bound, whether to steer)."""
    import os
    import time

    from nnconform.fuzz.runner import FuzzConfig, run_bounded
    from nnconform.fuzz.steer import Steering
    from nnconform.isolation.proxy import open_isolated

    key = (driver, call_timeout, mem_limit, threading.get_ident())
    with _LOCK:
        dev = _DEVICES.get(key)
        if dev is None:
            dev = _DEVICES[key] = open_isolated(driver, call_timeout=call_timeout, mem_limit=mem_limit)
    os.environ["NNCONFORM_CLUSTER_WORKER"] = worker_address() or "unknown"
    steer = steer or {}
    steering = Steering(
        {k: frozenset(v) for k, v in steer.get("triggers", {}).items()},
        steer.get("enabled", True),
        dict(steer.get("confirmed", {})),
    )
    hang_keys = set(steer.get("hang_keys", ()))
    cfg = FuzzConfig(
        driver, report_dir=Path("."), seed=run_seed, call_timeout=call_timeout, mem_limit=mem_limit, slow_s=slow_s
    )
    cfg.repeat_hang_timeout = float(steer.get("repeat_hang_timeout", cfg.repeat_hang_timeout))
    out = []
    for i in range(start, start + count):
        d = steering.draw(run_seed, i)
        t0 = time.monotonic()
        f, short = run_bounded(dev, d.case.model, d.case.inputs, cfg, hang_keys)
        out.append(
            {
                "index": i,
                "seed": d.case.seed,
                "kind": d.case.kind,
                "features": sorted(d.case.features),
                "finding": dataclasses.asdict(f) if f is not None else None,
                "duration_s": time.monotonic() - t0,
                "attempt": d.attempt,
                "rejected": d.rejected,
                "predicted": d.predicted,
                "short_bound": short,
            }
        )
    return {"cases": out, "worker": worker_address()}


def lost_finding(worker: str, why: str):
    from nnconform.fuzz.runner import Finding

    return Finding(
        verdict="CRASH",
        key=f"CRASH cluster worker lost ({why})"[:200],
        stage="cluster",
        message=f"cluster worker {worker} was lost while running this case, after the case had been "
        f"queued again once ({why})",
        signal="",
        frames=[],
        operations=[],
        duration_s=0.0,
    )


def cluster_cases(handle, chunk: int = 16, log=print):
    """A ``cases`` source for :func:`nnconform.fuzz.runner.run_fuzz` running on ``handle``."""

    def source(cfg, start: int, should_stop, state):
        from distributed import as_completed

        from nnconform.fuzz.runner import CaseRun, Finding

        kw = {"resources": dict(handle.resources)} if handle.resources else {}
        limit = max(2, 2 * handle.slots())
        ac = as_completed()
        flight: dict = {}  # future key -> (future, start, count, attempt)
        ready: dict[int, CaseRun] = {}  # index -> the case as run
        nxt, want = start, start

        def submit(s: int, n: int, attempt: int) -> None:
            steer = {
                "triggers": state.steering.as_json(),
                "confirmed": dict(state.steering.confirmed),
                "enabled": cfg.steer,
                "hang_keys": sorted(state.hang_keys),
                "repeat_hang_timeout": cfg.repeat_hang_timeout,
            }
            fut = handle.client.submit(
                fuzz_chunk,
                cfg.driver,
                cfg.call_timeout,
                cfg.mem_limit,
                cfg.slow_s,
                cfg.seed,
                s,
                n,
                steer,
                pure=False,
                **kw,
            )
            flight[fut.key] = (fut, s, n, attempt)
            ac.add(fut)

        try:
            while True:
                while len(flight) < limit and not should_stop(nxt):
                    n = chunk if cfg.max_cases is None else max(1, min(chunk, cfg.max_cases - nxt))
                    submit(nxt, n, 0)
                    nxt += n
                if not flight:
                    break
                fut = next(ac)
                _, s, n, attempt = flight.pop(fut.key)
                try:
                    res = fut.result()
                except Exception as e:
                    w, why = _killed_worker(e) or "an unknown worker", _why(e)
                    log(f"nnconform cluster: fuzz cases {s}..{s + n - 1} lost with worker {w} ({why})")
                    if attempt == 0:
                        submit(s, n, 1)
                    elif n > 1:
                        for i in range(s, s + n):
                            submit(i, 1, 2)
                    else:
                        # the case is drawn again here for its kind and features
                        d = state.steering.draw(cfg.seed, s)
                        ready[s] = CaseRun(s, d.case.seed, d.case.kind, d.case.features, lost_finding(w, why), 0.0)
                else:
                    for c in res["cases"]:
                        f = c["finding"]
                        ready[c["index"]] = CaseRun(
                            c["index"],
                            c["seed"],
                            c["kind"],
                            frozenset(c["features"]),
                            Finding(**f) if f is not None else None,
                            c["duration_s"],
                            c["attempt"],
                            c["rejected"],
                            c["predicted"],
                            c["short_bound"],
                        )
                finally:
                    fut.release()
                while want in ready:
                    yield ready.pop(want)
                    want += 1
        finally:
            for fut, *_ in flight.values():
                fut.cancel()

    return source
