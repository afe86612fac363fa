"""nnconform.reference.kernels.heap: the reference's freed tensors stay in the heap instead of being faulted in
again on every inference, and the user's own glibc settings win."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from nnconform.reference.kernels import heap

# A model's working set in miniature: twenty 1 MiB tensors alive at once, then all freed, as
# an inference ends.  Counts the minor page faults of the rounds after the first.
_SCRIPT = r"""
import ctypes, json, resource, numpy as np
# 4 KiB pages whatever the machine's transparent-huge-page policy ("always" would fault the
# heap in 2 MiB at a time and hide the count): PR_SET_THP_DISABLE, Linux 3.15+
ctypes.CDLL(None).prctl(41, 1, 0, 0, 0)
from nnconform.reference.ops.registry import load_all
from nnconform.reference.kernels import heap
load_all()          # what every reference executor does first
def inference():
    arrays = [np.empty(1 << 20, np.uint8) for _ in range(20)]
    for a in arrays:
        a.fill(1)
inference()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    inference()
after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
print(json.dumps({"state": heap.retain_freed_memory(), "faults": (after - before) / 5}))
"""


def _run(**env: str) -> dict:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NNCONFORM_HEAP_RETAIN_MB", "GLIBC_TUNABLES") and not k.startswith("MALLOC_")
    }
    p = subprocess.run(
        [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=120, env={**clean, **env}
    )
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


needs_glibc = pytest.mark.skipif(
    heap._glibc() is None, reason="mallopt's thresholds are glibc's; this C library has none"
)


@needs_glibc
def test_freed_tensors_are_reused_without_page_faults():
    kept = _run()
    assert kept["state"].startswith("heap keeps up to 64 MiB freed"), kept
    # 20 MiB a round is 5,120 pages: with the heap kept, they are the same pages every round
    assert kept["faults"] < 100, kept
    # glibc's defaults trim the heap after each round and fault it in again: the cost removed
    left = _run(NNCONFORM_HEAP_RETAIN_MB="0")
    assert "left to glibc" in left["state"], left
    assert left["faults"] > 4000, left


@needs_glibc
def test_a_smaller_retention_is_honoured():
    # 8 MiB may stay free at the heap's top: the rest of the 20 MiB goes back every round
    small = _run(NNCONFORM_HEAP_RETAIN_MB="8")
    assert small["state"].startswith("heap keeps up to 8 MiB freed"), small
    assert small["faults"] > 1000, small


@needs_glibc
@pytest.mark.parametrize("variable", ["MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES"])
def test_the_users_own_glibc_settings_are_left_alone(variable):
    value = "glibc.malloc.trim_threshold=1048576" if variable == "GLIBC_TUNABLES" else "1048576"
    mine = _run(**{variable: value})
    assert mine["state"] == f"heap thresholds left as {variable} set them", mine
    assert mine["faults"] > 1000, mine  # their 1 MiB trim threshold, not ours


@pytest.mark.parametrize(
    "value, message",
    [
        ("lots", "NNCONFORM_HEAP_RETAIN_MB must be a whole number of MiB, got 'lots'"),
        ("-1", "NNCONFORM_HEAP_RETAIN_MB must be within 0..1024 MiB, got -1"),
    ],
)
def test_a_bad_setting_is_one_line_and_a_usage_exit(value, message):
    env = dict(os.environ, NNCONFORM_HEAP_RETAIN_MB=value)
    p = subprocess.run(
        [sys.executable, "-m", "nnconform", "drivers"], capture_output=True, text=True, timeout=120, env=env
    )
    assert p.returncode == 2
    assert p.stderr.strip() == f"nnconform: error: {message}"
    # a library caller (no CLI in front) keeps glibc's thresholds and says why
    state = subprocess.run(
        [sys.executable, "-c", "from nnconform.reference.kernels import heap; print(heap.retain_freed_memory())"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert state.returncode == 0, state.stderr[-2000:]
    assert state.stdout.strip() == f"{message}: heap thresholds unchanged"
