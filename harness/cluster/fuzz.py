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

from nnconform.cluster.dispatch import _killed_worker, _why, worker_address

_DEVICES: dict[tuple, object] = {}
_LOCK = threading.Lock()


def fuzz_chunk(
    driver: str, call_timeout: float, mem_limit: int, slow_s: float, run_seed: int, start: int, count: int
) -> dict:
    """On a worker: cases start..start+count-1 on this worker thread's driver host."""
    import os

    from nnconform.fuzz.generate import make_case
    from nnconform.fuzz.runner import case_seed, run_one
    from nnconform.isolation.proxy import open_isolated

    key = (driver, call_timeout, mem_limit, threading.get_ident())
    with _LOCK:
        dev = _DEVICES.get(key)
        if dev is None:
            dev = _DEVICES[key] = open_isolated(driver, call_timeout=call_timeout, mem_limit=mem_limit)
    os.environ["NNCONFORM_CLUSTER_WORKER"] = worker_address() or "unknown"
    out = []
    for i in range(start, start + count):
        seed = case_seed(run_seed, i)
        model, inputs = make_case(seed)
        f = run_one(dev, model, inputs, slow_s)
        out.append((i, seed, dataclasses.asdict(f) if f is not None else None))
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

    def source(cfg, start: int, should_stop):
        from distributed import as_completed

        from nnconform.fuzz.runner import Finding, case_seed

        kw = {"resources": dict(handle.resources)} if handle.resources else {}
        limit = max(2, 2 * handle.slots())
        ac = as_completed()
        flight: dict = {}  # future key -> (future, start, count, attempt)
        ready: dict[int, tuple] = {}  # index -> (seed, Finding | None)
        nxt, want = start, start

        def submit(s: int, n: int, attempt: int) -> None:
            fut = handle.client.submit(
                fuzz_chunk, cfg.driver, cfg.call_timeout, cfg.mem_limit, cfg.slow_s, cfg.seed, s, n, pure=False, **kw
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
                        ready[s] = (case_seed(cfg.seed, s), lost_finding(w, why))
                else:
                    for i, seed, f in res["cases"]:
                        ready[i] = (seed, Finding(**f) if f is not None else None)
                finally:
                    fut.release()
                while want in ready:
                    seed, f = ready.pop(want)
                    yield want, seed, None, None, f
                    want += 1
        finally:
            for fut, *_ in flight.values():
                fut.cancel()

    return source
