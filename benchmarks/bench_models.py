"""Reference executor speed on real models, side by side with onnxruntime and LiteRT.

    python benchmarks/bench_models.py [--models NAME ...] [--repeats N] [--clock wall|cpu]

One row per model (built-in MobileNets, and the fetched zoo models that import): median
milliseconds per inference of the reference executor, of the onnxruntime driver and of the
tflite (LiteRT) driver, all in this process (no driver host: only the computation is timed),
and the reference's ratio to the faster of the two runtimes that can run the model.  The
issue's goal: every zoo model within 5x.  ``--clock cpu`` measures process CPU time, steadier
on a loaded machine (it sums a runtime's threads, so it favours neither side).
onnxruntime and LiteRT are optional extras; a missing one is a '-' column.
"""
from __future__ import annotations

import argparse
import statistics
import time

from nnconform.errors import NnError
from nnconform.executor import Executor
from nnconform.ir import Request
from nnconform.loader import load_driver
from nnconform.models import available_models


def _timer(clock: str):
    return time.process_time if clock == "cpu" else time.perf_counter


def _median_ms(fn, repeats: int, clock: str) -> float:
    t = _timer(clock)
    fn()   # warm-up
    samples = []
    for _ in range(repeats):
        t0 = t()
        fn()
        samples.append((t() - t0) * 1e3)
    return statistics.median(samples)


def _driver_ms(device, model, inputs, repeats: int, clock: str) -> float | None:
    if device is None or not all(device.supported_operations(model)):
        return None
    try:
        pm = device.prepare(model)
    except NnError:
        return None
    req = Request.from_arrays(model, inputs)
    try:
        return _median_ms(lambda: pm.execute(req), repeats, clock)
    finally:
        pm.release()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="*", help="model names (default: every available model)")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    a = p.parse_args()
    drivers = {}
    for name in ("onnxruntime", "tflite"):
        try:
            drivers[name] = load_driver(name)
        except NnError as e:
            print(f"{name}: not available ({e})")
            drivers[name] = None
    entries = available_models()
    names = a.models or list(entries)
    from nnconform.ops import jit
    jit.turn_on_if_installed()      # compiled kernels when numba is there, unless NNCONFORM_JIT says
    print(f"reference: {jit.describe()}")
    print(f"{'model':34s} {'ops':>4s} {'reference':>10s} {'onnxruntime':>12s} {'tflite':>8s} {'ref/best':>9s} {'ref/ort':>8s}"
          f"   (median ms, {a.clock} clock, {a.repeats} runs)")
    for name in names:
        entry = entries[name]
        try:
            model = entry.load()
        except Exception as e:   # an unmapped zoo model: say so and go on
            print(f"{name:34s}    -  not imported: {str(e)[:90]}")
            continue
        inputs = entry.inputs(0)
        ex = Executor(model)
        ref = _median_ms(lambda: ex.run(inputs), a.repeats, a.clock)
        ort = _driver_ms(drivers["onnxruntime"], model, inputs, a.repeats, a.clock)
        tfl = _driver_ms(drivers["tflite"], model, inputs, a.repeats, a.clock)
        best = min((v for v in (ort, tfl) if v), default=None)

        def f(v, w):
            return f"{v:{w}.2f}" if v is not None else f"{'-':>{w}s}"
        print(f"{name:34s} {len(model.main.operations):4d} {f(ref, 10)} {f(ort, 12)} {f(tfl, 8)} "
              f"{(f'{ref / best:8.1f}x' if best else '        -')} {(f'{ref / ort:7.1f}x' if ort else '       -')}")


if __name__ == "__main__":
    main()
