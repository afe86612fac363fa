"""nnconform.blas: one OpenBLAS thread for the reference, same results as BLAS's own threading."""
from __future__ import annotations

import subprocess
import sys

_SCRIPT = """
import hashlib, numpy as np
from nnconform.models import builtin
from nnconform.executor import Executor
from nnconform import blas
h = hashlib.sha256()
for arch in builtin.ARCHITECTURES:
    m = builtin.build(arch, "float")
    for seed in range(3):
        for o in Executor(m).run(builtin.example_inputs(m, seed)):
            h.update(o.tobytes())
rng = np.random.default_rng(0)
a = rng.normal(size=(700, 300)).astype(np.float32); b = rng.normal(size=(300, 500)).astype(np.float32)
h.update((a @ b).tobytes())
print(blas.limit_blas_threads()); print(h.hexdigest())
"""


def _run(threads: str) -> list[str]:
    env_cmd = [sys.executable, "-c", _SCRIPT]
    import os
    env = dict(os.environ, NNCONFORM_BLAS_THREADS=threads)
    p = subprocess.run(env_cmd, capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout.split("\n")


def test_one_thread_gives_the_same_bits_as_blas_threading():
    one, free = _run("1"), _run("0")
    assert "set to 1" in one[0] or "no OpenBLAS" in one[0]
    assert "left to the BLAS library" in free[0]
    assert one[1] == free[1]
