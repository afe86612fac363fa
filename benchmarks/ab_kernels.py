"""The reference's plan-time kernels on against off, model by model, in one process.

    python benchmarks/ab_kernels.py [--models a,b,...] [--rounds N]

Each round times five runs with every step through its operation's ``execute``
(``Executor(model, prepared_kernels=False)``) and five with the kernels, alternating, and
keeps each side's median; the ratio is the median of the rounds' on/off ratios.  Alternating
in one process puts both sides under the same load.  CPU clock.  NNCONFORM_JIT=0 times the
numpy-only reference; otherwise the compiled kernels are on when numba is installed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

DEFAULT_MODELS = (
    "mobilenet_v1_float,mobilenet_v2_float,mobilenet_v1_quant8,mobilenet_v2_quant8,"
    "face_detection_full_range_sparse,face_detection_short_range,hand_landmark_lite,iris_landmark"
)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--models",
        default=DEFAULT_MODELS,
        help="comma-separated names (built-in, or zoo after `nnconform models fetch`)",
    )
    p.add_argument("--rounds", type=int, default=9)
    a = p.parse_args()
    if a.rounds < 1:
        p.error(f"--rounds must be at least 1, got {a.rounds}")
    os.environ.setdefault("NNCONFORM_BLAS_THREADS", "1")
    from nnconform.reference.kernels import jit

    if os.environ.get("NNCONFORM_JIT") != "0":
        jit.turn_on_if_installed()
    from nnconform.models import available_models
    from nnconform.reference.executor import Executor

    entries = available_models()
    unknown = [n for n in a.models.split(",") if n not in entries]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)}; available: {', '.join(entries)}")
    print(f"reference: {jit.describe()}; {a.rounds} rounds")
    print(f"{'model':34s} {'off ms':>8s} {'on ms':>8s}  on/off (range)")
    for name in a.models.split(","):
        entry = entries[name]
        model, inputs = entry.load(), entry.inputs(0)
        on, off = Executor(model), Executor(model, prepared_kernels=False)
        for ex in (on, off):
            for _ in range(3):
                ex.run(inputs)
        t_on, t_off, ratios = [], [], []
        for _ in range(a.rounds):
            medians = []
            for ex in (off, on):
                samples = []
                for _ in range(5):
                    t = time.process_time()
                    ex.run(inputs)
                    samples.append(time.process_time() - t)
                medians.append(statistics.median(samples))
            t_off.append(medians[0])
            t_on.append(medians[1])
            ratios.append(medians[1] / medians[0])
        print(
            f"{name:34s} {statistics.median(t_off) * 1e3:8.2f} {statistics.median(t_on) * 1e3:8.2f}  "
            f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})",
            flush=True,
        )


if __name__ == "__main__":
    main()
