"""Freed heap memory kept for the reference's next tensors (glibc only).

The reference executor allocates every operation's output as a fresh numpy array and, since
the tenth speed round, frees each intermediate after its last reader.  glibc's malloc gives
large freed blocks back to the system: a block above its mmap threshold is unmapped on free,
and free space above its trim threshold at the top of the heap is returned with sbrk.  Both
thresholds adapt (the mmap threshold rises to the largest block freed, up to 32 MiB, and the
trim threshold follows at twice that), but a model whose tensors are around a megabyte may
still have its heap trimmed at the end of each inference and faulted in again, page by page,
in the next.  Whether it does depends on the heap's layout, so on what else the process did:
face_detection_full_range_sparse took 1,400-3,100 minor faults and 4-9 ms of system time per
~44 ms inference with numpy only in some processes, none in others.  onnxruntime keeps an
arena of its own for this reason.

``retain_freed_memory()`` fixes both thresholds once per process with ``mallopt``: blocks
below 32 MiB come from the heap, and up to ``NNCONFORM_HEAP_RETAIN_MB`` (default 64) of free
space stays at its top for reuse.  Blocks of 32 MiB and more are still mapped and unmapped
per allocation; for them the faults are a small share of the work on their data.  Only the
process's resident size is affected, never a result: its RSS stays near the peak of the
working set instead of dropping back between inferences, a plateau that the stress suite's
leak checks (growth after a warm-up) do not count.

``NNCONFORM_HEAP_RETAIN_MB=0`` leaves glibc's defaults.  Thresholds the user chose through
glibc's own environment (``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_MMAP_THRESHOLD_``,
``MALLOC_TOP_PAD_`` or ``glibc.malloc`` tunables) are left as chosen.  Elsewhere than glibc it
does nothing and says so in its return value.
"""

from __future__ import annotations

import ctypes
import os

DEFAULT_RETAIN_MB = 64
MMAP_THRESHOLD = 32 << 20  # glibc's own ceiling for its adaptive mmap threshold (64-bit)
_M_TRIM_THRESHOLD = -1  # mallopt parameter numbers (malloc.h)
_M_MMAP_THRESHOLD = -3
_GLIBC_VARIABLES = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_")
_done: str | None = None


def _glibc():
    """The process's C library when it is glibc (it has mallopt's thresholds), else None.
    The symbols the interpreter already has loaded: ctypes.util.find_library would start an
    ldconfig subprocess in every process that loads the operations (a stress worker too)."""
    try:
        lib = ctypes.CDLL(None)
    except OSError:
        return None
    if not hasattr(lib, "gnu_get_libc_version") or not hasattr(lib, "mallopt"):
        return None
    lib.mallopt.argtypes, lib.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return lib


def check_environment() -> None:
    """Raise ValueError (one line) when NNCONFORM_HEAP_RETAIN_MB is not a usable value."""
    _retain_mb()


def _retain_mb() -> int:
    raw = os.environ.get("NNCONFORM_HEAP_RETAIN_MB", "").strip()
    if not raw:
        return DEFAULT_RETAIN_MB
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"NNCONFORM_HEAP_RETAIN_MB must be a whole number of MiB, got {raw!r}") from None
    if not 0 <= value <= 1024:
        raise ValueError(f"NNCONFORM_HEAP_RETAIN_MB must be within 0..1024 MiB, got {value}")
    return value


def retain_freed_memory() -> str:
    """Apply NNCONFORM_HEAP_RETAIN_MB once per process; returns what was done (for headers)."""
    global _done
    if _done is not None:
        return _done
    try:
        mb = _retain_mb()
    except ValueError as e:  # the CLI refuses it up front; a library caller keeps glibc's
        _done = f"{e}: heap thresholds unchanged"
        return _done
    if mb == 0:
        _done = "heap thresholds left to glibc (NNCONFORM_HEAP_RETAIN_MB=0)"
        return _done
    chosen = [v for v in _GLIBC_VARIABLES if os.environ.get(v)]
    if "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", ""):
        chosen.append("GLIBC_TUNABLES")
    if chosen:
        _done = f"heap thresholds left as {', '.join(chosen)} set them"
        return _done
    lib = _glibc()
    if lib is None:
        _done = "not glibc: heap thresholds unchanged"
        return _done
    # the mmap threshold first: setting either one stops glibc adapting both, and a trim
    # threshold alone would leave every block above 128 KiB mapped and unmapped per use
    if lib.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) != 1 or lib.mallopt(_M_TRIM_THRESHOLD, mb << 20) != 1:
        _done = "glibc refused the heap thresholds: unchanged"
        return _done
    _done = f"heap keeps up to {mb} MiB freed (glibc mmap threshold {MMAP_THRESHOLD >> 20} MiB)"
    return _done
