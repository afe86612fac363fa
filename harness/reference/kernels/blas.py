"""One BLAS thread for the reference executor.

The reference's convolutions and fully connected layers are numpy matrix products, and
numpy's OpenBLAS starts one thread per core for each of them.  The products of a real model
are small (a 1x1 convolution at 12x12x256 is a 144x256 by 256x256 product) and nnconform runs
several processes at once (the harness, a driver host per worker, xdist workers), so those
threads mostly wait for each other: measured on the mediapipe zoo on 2 shared cores, one
thread made the reference 3-7x faster (palm_detection_lite 1.09 s -> 0.30 s, iris_landmark
0.52 s -> 0.10 s per inference).  One thread also keeps the bits independent of the machine's
core count: on the built-in models the reference gives the same bits either way, but
OpenBLAS may split the K-dimension sums of a large product across threads (0.3.31, in numpy
2.4.6, does for a 700x300 by 300x500 float32 product), which changes its rounding.

``limit_blas_threads()`` sets the count through OpenBLAS's own ``set_num_threads`` (found in
the process's loaded libraries, the way threadpoolctl does it).  ``NNCONFORM_BLAS_THREADS``
chooses the count (default 1; ``0`` leaves BLAS alone).  Without a loaded OpenBLAS it does
nothing and says so in its return value.
"""

from __future__ import annotations

import ctypes
import os

_SYMBOLS = (
    "scipy_openblas_set_num_threads64_",
    "scipy_openblas_set_num_threads_64_",
    "scipy_openblas_set_num_threads",
    "openblas_set_num_threads64_",
    "openblas_set_num_threads",
)
_done: str | None = None


def _loaded_openblas() -> list[str]:
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.lower() and "/" in line}
    except OSError:
        return []
    return sorted(p for p in paths if os.path.isfile(p))


def limit_blas_threads() -> str:
    """Apply NNCONFORM_BLAS_THREADS once per process; returns what was done (for headers/logs)."""
    global _done
    if _done is not None:
        return _done
    import numpy  # noqa: F401  (loads numpy's BLAS, so it is in the maps)

    raw = os.environ.get("NNCONFORM_BLAS_THREADS", "1").strip()
    try:
        count = int(raw)
    except ValueError:
        count = 1
    if count <= 0:
        _done = "BLAS threads left to the BLAS library (NNCONFORM_BLAS_THREADS=0)"
        return _done
    for path in _loaded_openblas():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for sym in _SYMBOLS:
            fn = getattr(lib, sym, None)
            if fn is not None:
                fn.argtypes, fn.restype = [ctypes.c_int], None
                fn(count)
                _done = f"OpenBLAS threads set to {count} ({os.path.basename(path)})"
                return _done
    _done = "no OpenBLAS loaded: BLAS threads unchanged"
    return _done
