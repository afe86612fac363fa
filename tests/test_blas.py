"""nnconform.reference.kernels.blas: one OpenBLAS thread for the reference, same results as BLAS's own threading."""

from __future__ import annotations

import subprocess
import sys

_SCRIPT = """
import hashlib, numpy as np
from nnconform.models import builtin
from nnconform.reference.executor import Executor
from nnconform.reference.kernels import blas
models, product = hashlib.sha256(), hashlib.sha256()
for arch in builtin.ARCHITECTURES:
    m = builtin.build(arch, "float")
    for seed in range(3):
        for o in Executor(m).run(builtin.example_inputs(m, seed)):
            models.update(o.tobytes())
rng = np.random.default_rng(0)
a = rng.normal(size=(700, 300)).astype(np.float32); b = rng.normal(size=(300, 500)).astype(np.float32)
product.update((a @ b).tobytes())
print(blas.limit_blas_threads()); print(models.hexdigest()); print(product.hexdigest())
"""


def _run(threads: str) -> list[str]:
    env_cmd = [sys.executable, "-c", _SCRIPT]
    import os

    env = dict(os.environ, NNCONFORM_BLAS_THREADS=threads)
    p = subprocess.run(env_cmd, capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout.split("\n")


def test_one_thread_gives_the_same_bits_as_blas_threading():
    """The reference's outputs on the built-in models do not depend on BLAS threading, and one
    thread (the default) is reproducible for any product.  A large plain product is not
    promised equal across thread counts: OpenBLAS 0.3.31 (numpy 2.4.6) gives a 700x300 by
    300x500 float32 product different bits with 2 threads than with 1."""
    one, again, free = _run("1"), _run("1"), _run("0")
    assert "set to 1" in one[0] or "no OpenBLAS" in one[0]
    assert "left to the BLAS library" in free[0]
    assert one[1] == free[1]  # the reference on real model shapes
    assert one[1:3] == again[1:3]  # one thread: the same bits every time
