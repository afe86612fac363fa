"""Throughput of the random suite on the reference driver, per core.

    python benchmarks/bench_random.py [--cases 600] [--graphs 200] [--seed 0]

Prints, for single-operation cases and 5-operation graphs (dims <= 1000), cases per second
and where the time goes: generation (drawing the model and its values, which runs each
operation once to learn its output shape), reference execution (the expected outputs),
driver execution (supported_operations + prepare + execute) and comparison.  The phase
figures use the generator with a seeded ``random.Random``; the last column runs the same
strategies through Hypothesis (its engine's overhead included), which is what the suite does.
"""

from __future__ import annotations

import argparse
import itertools
import time

from hypothesis import HealthCheck, Phase, given, settings

from nnconform.drivers.reference import ReferenceDevice
from nnconform.generators.graphs import GraphConfig
from nnconform.generators.signatures import SIGNATURES
from nnconform.generators.strategies import random_graph, sample, single_operation
from nnconform.ir import OperandType as T
from nnconform.ir import Request
from nnconform.reference.executor import Executor
from nnconform.verdict.criteria import MEDIUM, SMALL_GRAPH, compare, criteria_for_operation

GRAPH_TYPES = (
    T.TENSOR_FLOAT32,
    T.TENSOR_FLOAT16,
    T.TENSOR_INT32,
    T.TENSOR_BOOL8,
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
)


def _phases(configs, n: int, seed: int, device) -> dict:
    t = dict(gen=0.0, ref=0.0, drv=0.0, cmp=0.0)
    for k, (cfg, crit) in zip(range(n), itertools.cycle(configs)):
        t0 = time.process_time()
        case = sample(cfg, seed + k, edge=k % 4 == 3)
        t1 = time.process_time()
        expected = Executor(case.model).run(case.inputs)
        t2 = time.process_time()
        assert all(device.supported_operations(case.model))
        pm = device.prepare(case.model)
        result = pm.execute(Request.from_arrays(case.model, case.inputs))
        pm.release()
        t3 = time.process_time()
        cmp = compare(case.model, expected, list(result.outputs), criteria=crit, ignored=case.ignored)
        t4 = time.process_time()
        assert cmp.passed, cmp.message
        t["gen"] += t1 - t0
        t["ref"] += t2 - t1
        t["drv"] += t3 - t2
        t["cmp"] += t4 - t3
    return t


def _through_hypothesis(strategies, n: int) -> float:
    per = max(1, n // len(strategies))
    total = 0
    t0 = time.process_time()
    for strat in strategies:

        @settings(
            max_examples=per,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.generate],
        )
        @given(strat)
        def run(case):
            Executor(case.model).run(case.inputs)

        run()
        total += per
    return total / (time.process_time() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=600)
    ap.add_argument("--graphs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    device = ReferenceDevice()
    single = [
        (GraphConfig(dtype=t, n_ops=1, ops=(op,)), criteria_for_operation(op, default=MEDIUM))
        for op, s in sorted(SIGNATURES.items(), key=lambda kv: kv[0].name)
        for t in s.types
    ]
    graphs = [
        (GraphConfig(dtype=t, n_ops=5, rank=r, max_dim=1000), SMALL_GRAPH) for t in GRAPH_TYPES for r in (1, 2, 3, 4)
    ]
    _phases(single[:40], 40, a.seed, device)  # warm-up (imports, lookup tables)
    rows = []
    for name, configs, n, strats in (
        ("single-op", single, a.cases, [single_operation(c.ops[0], c.dtype) for c, _ in single[::7]]),
        ("5-op graph", graphs, a.graphs, [random_graph(c.dtype, c.rank, 5, 1000) for c, _ in graphs[::3]]),
    ):
        t = _phases(configs, n, a.seed, device)
        total = sum(t.values())
        hyp = _through_hypothesis(strats, max(len(strats) * 3, n // 2))
        rows.append((name, n, n / total, *(1000 * t[k] / n for k in ("gen", "ref", "drv", "cmp")), hyp))
    print(
        f"{'case':<11} {'n':>5} {'cases/s':>8} {'gen ms':>7} {'ref ms':>7} {'drv ms':>7} {'cmp ms':>7} "
        f"{'via Hypothesis/s':>17}"
    )
    for r in rows:
        print(f"{r[0]:<11} {r[1]:>5} {r[2]:>8.0f} {r[3]:>7.2f} {r[4]:>7.2f} {r[5]:>7.2f} {r[6]:>7.2f} {r[7]:>17.0f}")


if __name__ == "__main__":
    main()
