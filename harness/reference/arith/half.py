"""TENSOR_FLOAT16 to float32 and back, for the operations that compute fp16 in float32.

NNAPI's reference computes most fp16 operations by widening the inputs to float32, computing
in float32 and rounding the result to fp16 once; the operations here do the same.  numpy
converts half floats in software, at 2-3 ns an element, which was most of an fp16
operation's time (an ADD of 800,000 elements: 10 of its 11 ms).  With the compiled kernels
on (``nnconform.reference.kernels.jit``) and a CPU that converts halves in hardware, large arrays go
through the hardware conversion instead: the same bits as numpy's ``astype``.
"""

from __future__ import annotations

import numpy as np

from nnconform.reference.kernels import jit


def compiled(size: int) -> bool:
    """Whether fp16 arrays of ``size`` elements go through the compiled conversions."""
    # From a few hundred elements: the compiled call costs ~2 us, numpy's conversion 2-3 ns
    # an element, and ~30 ns a subnormal half (a softmax's 1,000 small probabilities: 33 us)
    return jit.worth(size, at=256) and jit.half_instructions()


def widen(x: np.ndarray) -> np.ndarray:
    """``x`` as float32: fp16 converted (a new array), float32 as it is."""
    if x.dtype == np.float16 and compiled(x.size):
        return jit.widen_half(x)
    return x.astype(np.float32, copy=False)


def narrow(y: np.ndarray, dtype) -> np.ndarray:
    """A float32 result ``y`` in the output's ``dtype``: fp16 rounded to nearest even (a
    new array), any other dtype as ``astype`` gives it (``y`` itself when it has it)."""
    if y.dtype == np.float32 and np.dtype(dtype) == np.float16 and compiled(y.size):
        return jit.narrow_half(y)
    return y.astype(dtype, copy=False)
