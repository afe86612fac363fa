"""--cluster speed: the vectors suite on a LocalCluster against pytest-xdist, and the
coordinator's dispatch rate.

    python benchmarks/bench_cluster.py [-k EXPR] [--seed S] [--dispatch-cases N] [--dispatch-workers W]
                                       [--skip-vectors] [--skip-dispatch]

1. The vectors suite (``--variants rotate``, the default matrix) run twice with the same seed:
   ``nnconform run -n 2`` and ``nnconform run --cluster local:2``; wall time of each, the
   cluster's overhead in per cent, and whether both journals hold the same (case, outcome)
   rows.  ``-k`` narrows the suite (the whole suite is ~19,000 cases).  Goal: overhead <= 15 %.
2. Dispatch rate: ``--dispatch-workers`` (16) LocalCluster workers run ``--dispatch-cases``
   no-op cases (a driver whose execute does nothing, in the worker) through the same
   dispatcher as ``run --cluster`` (batches, row streaming, journal writes and fsyncs on the
   coordinator); cases per second from the first submit to the last row on disk.
   Goal: >= 2,000 cases/s dispatched.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _run(args: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "nnconform", *args], capture_output=True, text=True)
    return time.perf_counter() - t, r


def _rows(report_dir: Path) -> dict[str, str]:
    from nnconform.verdict.results import read_results

    return {r.extra["nodeid"]: r.outcome for r in read_results(report_dir / "results.jsonl")}


def bench_vectors(expr: str | None, seed: int, tmp: Path) -> list[tuple]:
    sel = ["--", "-k", expr] if expr else []
    base = ["run", "--suite", "vectors", "--variants", "rotate", "--seed", str(seed)]
    out = []
    for name, extra in (("local -n 2", ["-n", "2"]), ("--cluster local:2", ["--cluster", "local:2"])):
        wall, r = _run([*base, "--report-dir", str(tmp / name.replace(" ", "_")), *extra, *sel])
        if r.returncode not in (0, 1):
            raise SystemExit(f"{name}: exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
        out.append((name, wall, _rows(tmp / name.replace(" ", "_"))))
        for line in r.stdout.splitlines():  # the cluster's own timings: batches, dispatch seconds
            if line.startswith("nnconform cluster:"):
                print(f"  {line}")
    return out


STREAM_EVERY_S = 0.2


def noop_batch(keys, payload, topic=None, batch=0):
    """A worker task: each case executes a no-op driver and becomes a PASS row."""
    from nnconform.cluster.dispatch import send_rows, send_started

    class NoopPrepared:
        def execute(self, request):
            return request

    send_started(topic, batch)
    pm, rows, sent, sent_at = NoopPrepared(), [], 0, time.monotonic()
    for k in keys:
        pm.execute(k)
        rows.append(
            {
                "suite": "noop",
                "test_id": k,
                "driver": "noop",
                "outcome": "PASS",
                "seed": payload["seed"],
                "extra": {"nodeid": k},
                "_key": k,
            }
        )
        if time.monotonic() - sent_at >= STREAM_EVERY_S:  # as run_batch streams its rows
            send_rows(topic, rows[sent:], batch)
            sent, sent_at = len(rows), time.monotonic()
    return {"rows": rows[sent:], "error": None}


def _warm() -> bool:
    import importlib

    importlib.import_module("nnconform.cluster.dispatch")
    return True


def bench_dispatch(n: int, workers: int, tmp: Path) -> tuple[float, float, int]:
    from nnconform.cluster.connect import open_cluster
    from nnconform.cluster.dispatch import Dispatcher, batch_size, split
    from nnconform.verdict.results import ResultRecord, ResultsWriter

    t0 = time.perf_counter()
    handle = open_cluster(f"local:{workers}")
    handle.client.wait_for_workers(workers, timeout=300)
    # Start-up, not dispatch: every worker imports nnconform's dispatch module once (a real
    # run's first batch does the same, as part of its worker's start).
    handle.client.run(_warm)
    started = time.perf_counter() - t0
    writer = ResultsWriter(tmp / "dispatch.jsonl")

    def accept(rows, worker):  # as the conformance coordinator's: one write per chunk
        done, records = [], []
        for row in rows:
            row = dict(row)
            done.append(row.pop("_key"))
            records.append(ResultRecord.from_dict(row))
        writer.write_many(records)
        return done

    keys = [f"case-{i}" for i in range(n)]
    try:
        d = Dispatcher(
            handle,
            noop_batch,
            {"seed": 0},
            accept=accept,
            sync=writer.sync,
            lost_case=lambda *a: None,
            log=lambda s: None,
        )
        stats = d.run(split(keys, batch_size(n, handle.slots())))
    finally:
        writer.close()
        handle.close()
    assert stats.rows == n and not stats.crashed, stats
    return stats.seconds, started, stats.batches, stats.first_row_s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-k", dest="expr", default=None, help="pytest -k expression narrowing the vectors suite")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dispatch-cases", type=int, default=20000)
    ap.add_argument("--dispatch-workers", type=int, default=16)
    ap.add_argument("--skip-vectors", action="store_true")
    ap.add_argument("--skip-dispatch", action="store_true")
    a = ap.parse_args()
    os.environ.setdefault("NNCONFORM_AUTO_PROBE", "0")  # both runs alike: no capability probe
    print(f"bench_cluster: seed {a.seed}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as d:
        tmp = Path(d)
        if not a.skip_vectors:
            res = bench_vectors(a.expr, a.seed, tmp)
            (ln, lt, lrows), (cn, ct, crows) = res
            print(f"\nvectors suite (variants rotate{', -k ' + repr(a.expr) if a.expr else ''}), seed {a.seed}")
            print(f"{'mode':20s} {'cases':>7s} {'wall s':>8s} {'cases/s':>8s}")
            for name, wall, rows in res:
                print(f"{name:20s} {len(rows):7d} {wall:8.1f} {len(rows) / wall:8.1f}")
            print(
                f"cluster overhead: {(ct - lt) / lt * 100:+.1f} % (goal <= 15 %); "
                f"same rows (case, outcome): {'yes' if lrows == crows else 'NO'}"
            )
        if not a.skip_dispatch:
            secs, started, batches, first = bench_dispatch(a.dispatch_cases, a.dispatch_workers, tmp)
            print(
                f"\ndispatch: {a.dispatch_cases} no-op cases in {batches} batches on {a.dispatch_workers} local "
                f"workers (started in {started:.1f} s): {secs:.2f} s, "
                f"{a.dispatch_cases / secs:,.0f} cases/s (goal >= 2,000); first row on disk after {first:.2f} s, "
                f"then {(a.dispatch_cases) / max(1e-9, secs - first):,.0f} cases/s"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
