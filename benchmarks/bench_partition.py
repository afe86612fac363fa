"""Partitioned execution at full scale (too slow for CI; run it by hand and report the table).

    python benchmarks/bench_partition.py exact [--step N]

runs every AOSP vector (or every N-th) in-process through the reference driver wrapped to
claim only the operations with even codes, then only the odd ones
(``tests/drivers/broken_partial.py``), and prints per driver how many cases passed, skipped
(nothing supported) and ran partitioned.  Partitioning is exact when nothing fails.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

from nnconform.cases.vectors import case_from_dict, default_root, vector_files
from nnconform.driver.loader import import_driver_file
from nnconform.verdict.runner import run_case

# The partial drivers are test drivers of the repository, not part of the installed package.
_partial = import_driver_file(Path(__file__).resolve().parents[1] / "tests" / "drivers" / "broken_partial.py")
HalfReferenceEven, HalfReferenceOdd = _partial.HalfReferenceEven, _partial.HalfReferenceOdd


def exact(step: int) -> int:
    print(f"{'driver':22} {'cases':>6} {'PASS':>6} {'SKIP':>6} {'partitioned':>11} {'other':>6} {'seconds':>8}")
    bad_total = 0
    for cls in (HalfReferenceEven, HalfReferenceOdd):
        dev = cls()
        tally: collections.Counter = collections.Counter()
        bad = []
        t0 = time.perf_counter()
        k = 0
        for f in vector_files(default_root()):
            for d in json.loads(f.read_text()):
                k += 1
                if (k - 1) % step:
                    continue
                case = case_from_dict(d, str(f))
                ignored = [True] * len(case.outputs) if case.multinomial_tolerance > 0 else case.ignored
                out = run_case(
                    dev, case.model, case.inputs, case.outputs, ignored=ignored, expect_failure=case.expect_failure
                )
                tally["cases"] += 1
                tally[out.outcome] += 1
                tally["partitioned"] += bool(out.partition)
                if out.outcome not in ("PASS", "SKIP"):
                    bad.append(f"  {case.test_id}: {out.outcome} {out.message[:200]}")
        print(
            f"{dev.name:22} {tally['cases']:6} {tally['PASS']:6} {tally['SKIP']:6} {tally['partitioned']:11} "
            f"{len(bad):6} {time.perf_counter() - t0:8.0f}",
            flush=True,
        )
        print("\n".join(bad[:50]))
        bad_total += len(bad)
    return 1 if bad_total else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=("exact",))
    p.add_argument("--step", type=int, default=1, help="run every N-th vector (default: all)")
    a = p.parse_args(argv)
    return exact(max(1, a.step))


if __name__ == "__main__":
    sys.exit(main())
