"""Exhaustive suite (issue 51): every fp16 value, every 8-bit code and every byte pair of the
element-wise operations, run through the driver as one request each
(``nnconform.cases.exhaustive`` makes the sweeps and states the domain rules).

The default run holds the ``quick`` tier (seconds); ``nnconform run --suite exhaustive`` runs
the ``full`` tier (the whole quantisation grid with every fused activation, relaxed fp32,
every fp16 pair of the binary float operations), ``--shard i/n`` every n-th sweep of it.

Each sweep is judged by the tolerances the vectors use (exact where NNAPI defines the result
exactly).  Its row records the worst error in ULPs (codes for quantised outputs) and as a
fraction of the tolerance, and a histogram of the ULP errors.  A failing sweep is shrunk: the
worst failing element alone, then the first, worst and last, then up to 64 failing elements
are run again on the driver, and the first set that still fails is the dumped, replayable
spec (a driver that fails only on a big tensor keeps the whole sweep as its spec).
"""

from __future__ import annotations

import pytest

from nnconform.cases.exhaustive import Sweep, error_stats, flush_verdict, run_sweep, shard, subsets, sweep_case, sweeps
from nnconform.verdict.runner import FAIL, PASS, run


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "sweep" not in metafunc.fixturenames:
        return
    tier = metafunc.config.getoption("nn_exhaustive", None) or "quick"
    spec = metafunc.config.getoption("nn_shard", None)
    items = shard(sweeps(tier), spec)
    metafunc.parametrize("sweep", items, ids=[s.name for s in items])


def test_exhaustive(sweep: Sweep, nn_device, nn_session, nn_record):
    nn_record.update(suite="exhaustive", test_id=sweep.test_id)
    nn_record["extra"]["exhaustive"] = {}
    swept = run_sweep(nn_device, sweep)
    case, outcome, info, stats = swept.case, swept.outcome, swept.info, swept.stats
    nn_record.update(operations=case.model.operation_names(), data_types=case.model.data_types())
    nn_record["extra"]["exhaustive"] = info
    if stats is None or outcome.outcome != FAIL or not stats.failing.size:
        nn_session.conclude(nn_record, outcome, case)
        return
    given = [x for x in case.inputs if x is not None]
    frac = info["worst_fraction"]
    frac_text = f"{frac:.3g}" if isinstance(frac, float) else str(frac)
    head = (
        f"{stats.failing.size} of {stats.elements} inputs fail (worst {info['worst_ulp']} ULP, "
        f"{frac_text} x the tolerance)"
    )
    worst = stats.worst_index
    assert worst is not None
    for subset in subsets(stats.failing, worst):
        small = sweep_case(sweep, [x[subset] for x in given])
        again = run(nn_device, small)
        if again.outcome == PASS and again.actual is not None:
            again = flush_verdict(
                again,
                error_stats(
                    small.model, small.expected[0], again.actual[0], inputs=[x for x in small.inputs if x is not None]
                ),
            )
        if again.outcome == FAIL:
            info["failing_inputs"] = [x.tolist() for x in small.inputs if x is not None]
            info["shrunk_to"] = int(subset.size)
            again.message = f"{head}; shrunk to {subset.size} input(s): {again.message}"
            nn_session.conclude(nn_record, again, small)
            return
    info["shrunk_to"] = stats.elements
    outcome.message = f"{head}; no subset of the failing inputs fails alone, the spec holds them all: {outcome.message}"
    nn_session.conclude(nn_record, outcome, case)
