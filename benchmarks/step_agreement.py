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
``nnconform run --suite models --seed S``.
"""
from __future__ import annotations

import argparse
import collections
import itertools

import numpy as np

from nnconform.errors import NnError
from nnconform.executor import Executor
from nnconform.ir import Request
from nnconform.loader import load_driver
from nnconform.models import available_models, input_seed
from nnconform.models.localise import single_operation_model
from nnconform.tflite_import import TfliteImportError


def _run(device, model, feeds) -> list[np.ndarray]:
    pm = device.prepare(model)
    try:
        return [np.asarray(a) for a in pm.execute(Request.from_arrays(model, list(feeds))).outputs]
    finally:
        pm.release()


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
    entries = available_models()
    if a.model not in entries:
        p.error(f"unknown model {a.model!r}; available: {', '.join(entries)}")
    entry = entries[a.model]
    try:
        model = entry.load()
    except (NnError, TfliteImportError) as e:    # a zoo model with unmapped operations
        p.error(f"{a.model} does not import: {str(e).splitlines()[0][:200]}")
    seed = input_seed(a.seed, a.model)
    inputs = entry.inputs(seed)
    print(f"{a.model}: run seed {a.seed}, input seed {seed}")
    ex = Executor(model)
    final_ref = ex.run(inputs)
    values = ex.main_values
    devices = {}
    for name in a.drivers:
        try:
            devices[name] = load_driver(name)
        except NnError as e:
            p.error(f"driver {name}: {e}")
    for name, dev in devices.items():
        got = _run(dev, model, inputs)[0]
        print(f"  {name:12s} output 0: {np.asarray(got).ravel()[:12].tolist()}")
    print(f"  {'reference':12s} output 0: {np.asarray(final_ref[0]).ravel()[:12].tolist()}")

    # (op type, driver) -> [elements differing, elements, sum of differences, max |difference|]
    agg: dict[tuple[str, str], list] = collections.defaultdict(lambda: [0, 0, 0.0, 0.0])
    same = collections.Counter()
    failed = []
    ops = model.main.operations
    for k, op in enumerate(ops):
        one, feeds = single_operation_model(model, k, values)
        ref = _wide(values[op.outputs[0]])
        outs = {}
        for name, dev in devices.items():
            try:
                outs[name] = _wide(_run(dev, one, feeds)[0])
            except NnError as e:
                failed.append(f"operation {k} {op.type.name} on {name}: {str(e)[:100]}")
                continue
            if outs[name].shape != ref.shape:
                failed.append(f"operation {k} {op.type.name} on {name}: shape {outs[name].shape}, "
                              f"reference {ref.shape}")
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
