"""Reference executor before/after a change, measured in the same conditions.

    git archive <commit> harness | tar -x -C /tmp/before     # the 'before' tree
    python benchmarks/ab_reference.py --before /tmp/before [--models a,b,...] [--rounds N]

On a shared, loaded machine a benchmark's absolute times (and even its ratios to another
runtime) move by 30-100 % between runs.  This script runs the reference from the exported
tree (``--before``: a directory holding ``harness/``) and from this checkout in alternating
subprocesses, round after round, and keeps each side's best median: both sides see the same
load.  Without ``--models`` it times benchmarks/bench_executor.py's operation cases; with it,
whole models (built-in names or fetched zoo names).  CPU clock, one BLAS thread (as the
harness sets it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

CHILD = r"""
import os, sys, time, statistics, json
os.environ.setdefault("NNCONFORM_BLAS_THREADS", "1")
sys.path.insert(0, sys.argv[2])
what = sys.argv[1]
res = {}
if what == "ops":
    import bench_executor as B
    from sidebyside import median_ms
    for label, kind, make in B.CASES:
        for q in (False, True):
            model, inputs, params = make(q)
            ex = B.Executor(model)
            res[f"{label} {'quant8' if q else 'fp32'}"] = median_ms(lambda: ex.run(inputs), 15, time.process_time)
else:
    from nnconform.reference.executor import Executor
    from nnconform.models import available_models
    entries = available_models()
    for name in what.split(","):
        e = entries[name]; m = e.load(); inp = e.inputs(0); ex = Executor(m); ex.run(inp)
        s = []
        for _ in range(7):
            t = time.process_time(); ex.run(inp); s.append(time.process_time() - t)
        res[name] = statistics.median(s) * 1e3
print(json.dumps(res))
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", required=True, help="directory holding the 'before' harness/ (git archive)")
    p.add_argument("--models", help="comma-separated model names (default: the operation cases)")
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    before = Path(a.before).resolve()
    if not (before / "harness" / "executor.py").is_file():
        sys.exit(f"ab_reference: {before}/harness/executor.py not found (export with git archive)")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "nnconform").symlink_to(before / "harness")  # the package name over the old tree
        best: dict[str, dict[str, float]] = {"before": {}, "after": {}}
        for _ in range(a.rounds):
            for side in ("before", "after"):
                env = dict(os.environ)
                if side == "before":
                    env["PYTHONPATH"] = tmp
                else:
                    env.pop("PYTHONPATH", None)
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, a.models or "ops", str(HERE)], env=env, capture_output=True, text=True
                )
                if out.returncode:
                    sys.exit(f"ab_reference: the {side} run failed:\n{out.stderr[-2000:]}")
                for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items():
                    best[side][k] = min(v, best[side].get(k, float("inf")))
    print(f"{'case':50s} {'before ms':>10s} {'after ms':>10s} {'after/before':>13s}   (best of {a.rounds} rounds)")
    for k, after in best["after"].items():
        b = best["before"][k]
        print(f"{k:50s} {b:10.3f} {after:10.3f} {after / b:12.2f}")


if __name__ == "__main__":
    main()
