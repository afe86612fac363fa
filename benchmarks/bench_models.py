"""Reference executor speed on real models, side by side with onnxruntime and LiteRT.

    python benchmarks/bench_models.py [--models NAME ...] [--repeats N] [--clock wall|cpu]

One row per model (built-in MobileNets, and the fetched zoo models that import): median
milliseconds per inference of the reference executor, of the onnxruntime driver and of the
tflite (LiteRT) driver, all in this process (no driver host: only the computation is timed),
and the reference's ratio to the faster of the two runtimes that can run the model (the median
of each round's own ratio: the runtimes are timed in interleaved rounds).  The
issue's goal: every zoo model within 5x.  ``--clock cpu`` measures process CPU time, steadier
on a loaded machine (it sums a runtime's threads, so it favours neither side).
onnxruntime and LiteRT are optional extras; a missing one is a '-' column.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics

from sidebyside import CLOCKS, interleaved, round_ratio

from nnconform.driver.loader import load_driver
from nnconform.errors import NnError
from nnconform.ir import Request
from nnconform.models import available_models
from nnconform.reference.executor import Executor


def _prepare(device, model, inputs, stack: contextlib.ExitStack):
    """The driver's execute call for this model, or None when it cannot run it; the prepared
    model is released when ``stack`` closes."""
    if device is None or not all(device.supported_operations(model)):
        return None
    try:
        pm = device.prepare(model)
    except NnError:
        return None
    stack.callback(pm.release)
    req = Request.from_arrays(model, inputs)
    return lambda: pm.execute(req)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="*", help="model names (default: every available model)")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    a = p.parse_args()
    if a.repeats < 1:
        p.error(f"--repeats must be at least 1, got {a.repeats}")
    drivers = {}
    for name in ("onnxruntime", "tflite"):
        try:
            drivers[name] = load_driver(name)
        except NnError as e:
            print(f"{name}: not available ({e})")
            drivers[name] = None
    entries = available_models()
    names = a.models or list(entries)
    unknown = [n for n in names if n not in entries]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)}; available: {', '.join(entries)}")
    from nnconform.reference.kernels import jit

    jit.turn_on_if_installed()  # compiled kernels when numba is there, unless NNCONFORM_JIT says
    print(f"reference: {jit.describe()}")
    print(
        f"{'model':34s} {'ops':>4s} {'reference':>10s} {'onnxruntime':>12s} {'tflite':>8s} {'ref/best':>9s} {'ref/ort':>8s}"
        f"   (median ms, {a.clock} clock, {a.repeats} runs)"
    )
    for name in names:
        entry = entries[name]
        try:
            model = entry.load()
        except Exception as e:  # an unmapped zoo model: say so and go on
            print(f"{name:34s}    -  not imported: {str(e)[:90]}")
            continue
        inputs = entry.inputs(0)
        ex = Executor(model)
        with contextlib.ExitStack() as stack:
            runtimes = {k: _prepare(drivers[k], model, inputs, stack) for k in ("onnxruntime", "tflite")}
            names_run = [k for k, fn in runtimes.items() if fn is not None]
            samples = interleaved(
                [lambda: ex.run(inputs)] + [runtimes[k] for k in names_run], a.repeats, CLOCKS[a.clock]
            )
        by = dict(zip(["reference"] + names_run, samples))
        med = {k: statistics.median(v) for k, v in by.items()}
        ref, ort, tfl = med["reference"], med.get("onnxruntime"), med.get("tflite")
        best_name = min(names_run, key=med.__getitem__, default=None)
        to_best = round_ratio(by["reference"], by.get(best_name))
        to_ort = round_ratio(by["reference"], by.get("onnxruntime"))

        def f(v, w):
            return f"{v:{w}.2f}" if v is not None else f"{'-':>{w}s}"

        print(
            f"{name:34s} {len(model.main.operations):4d} {f(ref, 10)} {f(ort, 12)} {f(tfl, 8)} "
            f"{(f'{to_best:8.1f}x' if to_best else '        -')} {(f'{to_ort:7.1f}x' if to_ort else '       -')}"
        )


if __name__ == "__main__":
    main()
