"""Every float32 bit pattern through the compiled fp16 narrowing against numpy's astype.

    NNCONFORM_JIT=1 python benchmarks/half_exhaustive.py

A one-off check (~8 minutes on two cores) beside tests/ops/test_half.py, which takes the
rounding boundaries, NaN classes and random floats.  Prints how many of the 2**32 patterns
differ (0 expected).  Needs the [fast] extra and a CPU with half-float conversions.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from nnconform.reference.kernels import jit


def main() -> int:
    jit.turn_on_if_installed()
    if not (jit.enabled() and jit.half_instructions()):
        print(f"no compiled half conversions here ({jit.describe()}); nothing to check")
        return 1
    t0 = time.time()
    step = 1 << 24
    differ = 0
    with np.errstate(all="ignore"):
        for start in range(0, 1 << 32, step):
            f = np.arange(start, start + step, dtype=np.uint64).astype(np.uint32).view(np.float32)
            got = jit.narrow_half(f).view(np.uint16)
            differ += int(np.count_nonzero(got != f.astype(np.float16).view(np.uint16)))
    print(f"all 2**32 float32 patterns: {differ} differ from numpy's astype(float16); {time.time() - t0:.0f} s")
    return 0 if differ == 0 else 2


if __name__ == "__main__":
    sys.exit(main())
