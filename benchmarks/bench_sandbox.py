"""Sandbox speed: per-case overhead (warm worker vs a fresh interpreter per case) and stress
throughput with 1 and 2 workers on the reference driver.

    python benchmarks/bench_sandbox.py [--cases N] [--throughput-cases N]

Overhead = the parent's wall time for a case minus the time the case function took inside the
worker, for a case that does nothing (``nnconform.isolation.sandbox:noop_case``).  Throughput runs the
same list of random-inference cases (10-op graphs, dims <= 1000, and 600-op graphs, dims <= 10,
alternating) through 1 and then 2 sandbox slots.  Goals: <= 10 ms overhead with a warm worker;
2 workers >= 1.8x of 1 (needs 2 free cores).
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time

from nnconform.isolation.sandbox import Sandbox
from nnconform.stress.runner import build_plan

NOOP = "nnconform.isolation.sandbox:noop_case"
CASE = "nnconform.stress.tests:run_case"


def overhead(mode: str, n: int) -> tuple[float, float, float]:
    """(median, p90, mean) overhead per case in ms; the warm worker's start-up is excluded."""
    with Sandbox("reference", mode=mode) as box:
        if mode == "warm":
            box.start()
        samples = []
        for _ in range(n):
            t = time.perf_counter()
            r = box.run(NOOP, {}, timeout=60)
            wall = time.perf_counter() - t
            assert r.verdict == "SUCCESS", r.reason
            samples.append((wall - (r.case_s or 0.0)) * 1e3)
    samples.sort()
    return statistics.median(samples), samples[int(0.9 * (len(samples) - 1))], statistics.fmean(samples)


def throughput(workers: int, cases: list) -> float:
    """Cases per second through ``workers`` warm slots (worker start-up excluded)."""
    boxes = [Sandbox("reference") for _ in range(workers)]
    for b in boxes:
        b.start()
        b.run(CASE, {"test": cases[0].test, "params": cases[0].params}, timeout=60)  # warm the imports
    todo = list(cases)
    lock = threading.Lock()

    def slot(box: Sandbox) -> None:
        while True:
            with lock:
                if not todo:
                    return
                c = todo.pop(0)
            r = box.run(CASE, {"test": c.test, "params": c.params}, timeout=60)
            assert r.verdict == "SUCCESS", r.reason

    t = time.perf_counter()
    threads = [threading.Thread(target=slot, args=(b,)) for b in boxes]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    dt = time.perf_counter() - t
    for b in boxes:
        b.close()
    return len(cases) / dt


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--cases", type=int, default=300, help="cases for the warm overhead (fresh: a tenth)")
    p.add_argument("--throughput-cases", type=int, default=120)
    a = p.parse_args()
    print(f"machine: {os.cpu_count()} CPUs")
    warm = overhead("warm", a.cases)
    fresh = overhead("fresh", max(5, a.cases // 10))
    print("\n| sandbox mode | overhead per case: median | p90 | mean |")
    print("|---|---|---|---|")
    print(f"| warm worker (reused interpreter) | {warm[0]:.2f} ms | {warm[1]:.2f} ms | {warm[2]:.2f} ms |")
    print(f"| fresh interpreter per case | {fresh[0]:.0f} ms | {fresh[1]:.0f} ms | {fresh[2]:.0f} ms |")

    from nnconform.stress.tests import StressOptions

    plan = build_plan({"random-inference": a.throughput_cases}, 1, StressOptions())
    t1 = throughput(1, plan)
    t2 = throughput(2, plan)
    print("\n| workers | random-inference cases/s | speed-up |")
    print("|---|---|---|")
    print(f"| 1 | {t1:.1f} | 1.00x |")
    print(f"| 2 | {t2:.1f} | {t2 / t1:.2f}x |")


if __name__ == "__main__":
    main()
