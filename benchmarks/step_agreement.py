"""How far real runtimes are from the reference, operation by operation, on one model.

    python benchmarks/step_agreement.py mobilenet_v2_quant8 --seed 16 [--drivers tflite onnxruntime]

The models suite passes a quantised network whose output is a few LSB from the reference when
every operation is within its own criteria ("accumulated rounding").  This script measures
what those steps are.  The model runs once on the reference, which gives every operand's value.
Each operation then runs alone on every driver, fed the reference's values of its inputs.  Its
output is compared with the reference's, element by element.

The output has three parts:
- one line per driver with its final output next to the reference's (the whole-model run);
- a table per operation type: how many output elements differ, the largest difference, and
  the sum of the differences;
- the operations on which every pair of drivers gave the same bits.
``--seed`` is the models suite's run seed: the inputs are those of
``nnconform run --suite models --seed S``.  Each driver runs in its own driver host and every
call goes through ``run_case``, as in the suites: a driver that crashes, hangs, raises or
returns garbage on an operation leaves that operation "not compared", with the reason.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools

import numpy as np

from nnconform.cases.tflite_import import TfliteImportError
from nnconform.driver.loader import check_driver_name
from nnconform.errors import NnError
from nnconform.isolation.proxy import open_isolated
from nnconform.models import available_models, input_seed
from nnconform.models.localise import single_operation_model
from nnconform.reference.executor import Executor
from nnconform.verdict.runner import run_case


def _run(device, model, feeds, expected) -> tuple[np.ndarray | None, str]:
    """(the driver's output 0, "") or (None, why there is none): the suites' run_case, so that
    whatever the driver does is a reason, not a traceback.  No partitioning: a model the driver
    supports only in part is not compared."""
    out = run_case(device, model, feeds, expected, partition=False)
    if out.actual is None or not out.actual:
        return None, f"{out.outcome}: {out.message}"
    return out.actual[0], ""


def _wide(a) -> np.ndarray:
    """Codes as int64 (differences in LSB), floats as float64."""
    a = np.asarray(a)
    return a.astype(np.float64) if a.dtype.kind == "f" else a.astype(np.int64)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("--seed", type=int, default=1, help="the models suite's run seed (default 1)")
    p.add_argument("--drivers", nargs="+", default=["tflite", "onnxruntime"])
    a = p.parse_args()
    for name in a.drivers:
        try:
            check_driver_name(name)
        except NnError as e:
            p.error(f"driver {name}: {e}")
    entries = available_models()
    if a.model not in entries:
        p.error(f"unknown model {a.model!r}; available: {', '.join(entries)}")
    entry = entries[a.model]
    try:
        model = entry.load()
    except (NnError, TfliteImportError) as e:  # a zoo model with unmapped operations
        p.error(f"{a.model} does not import: {str(e).splitlines()[0][:200]}")
    seed = input_seed(a.seed, a.model)
    inputs = entry.inputs(seed)
    print(f"{a.model}: run seed {a.seed}, input seed {seed}")
    ex = Executor(model, keep_values=True)
    final_ref = ex.run(inputs)
    values = ex.main_values
    with contextlib.ExitStack() as stack:
        devices = {}
        for name in a.drivers:
            try:
                devices[name] = open_isolated(name)
            except NnError as e:  # a driver that fails as it loads
                p.error(f"driver {name}: {str(e).splitlines()[0][:200]}")
            stack.callback(devices[name].close)
        _compare(model, inputs, final_ref, values, devices)


def _compare(model, inputs, final_ref, values, devices) -> None:
    """Print the whole-model line of each driver, then the per-operation table (``values``:
    every operand's reference value, from the reference's run of ``inputs``)."""
    for name, dev in devices.items():
        got, why = _run(dev, model, inputs, final_ref)
        shown = np.asarray(got).ravel()[:12].tolist() if got is not None else why[:160]
        print(f"  {name:12s} output 0: {shown}")
    print(f"  {'reference':12s} output 0: {np.asarray(final_ref[0]).ravel()[:12].tolist()}")

    # (op type, driver) -> [elements differing, elements, sum of differences, max |difference|]
    agg: dict[tuple[str, str], list] = collections.defaultdict(lambda: [0, 0, 0.0, 0.0])
    same = collections.Counter()
    failed = []
    ops = model.main.operations
    for k, op in enumerate(ops):
        one, feeds = single_operation_model(model, k, values)
        expected = [values[i] for i in op.outputs]
        ref = _wide(expected[0])
        outs = {}
        for name, dev in devices.items():
            got, why = _run(dev, one, feeds, expected)
            if got is None:
                failed.append(f"operation {k} {op.type.name} on {name}: {why[:160]}")
                continue
            outs[name] = _wide(got)
            if outs[name].shape != ref.shape:
                failed.append(
                    f"operation {k} {op.type.name} on {name}: shape {outs[name].shape}, reference {ref.shape}"
                )
                del outs[name]
                continue
            diff = outs[name] - ref
            row = agg[(op.type.name, name)]
            row[0] += int(np.count_nonzero(diff))
            row[1] += diff.size
            row[2] += float(diff.sum())
            row[3] = max(row[3], float(np.abs(diff).max(initial=0)))
        for x, y in itertools.combinations(sorted(outs), 2):
            same[(x, y)] += bool(np.array_equal(outs[x], outs[y]))
    print(f"\n{'operation':22s} {'driver':12s} {'differ':>16s} {'share':>7s} {'max':>8s} {'sum':>10s}")
    for (t, name), (nd, total, sm, mx) in sorted(agg.items()):
        print(f"{t:22s} {name:12s} {nd:7d} / {total:7d} {100 * nd / max(total, 1):6.2f}% {mx:8.3g} {sm:+10.4g}")
    for (x, y), n in sorted(same.items()):
        print(f"\n{x} and {y} gave the same bits on {n} of {len(ops)} operations")
    for line in failed:
        print(f"not compared: {line}")


if __name__ == "__main__":
    main()
