"""The models suite's criteria for deep graphs (``REAL_MODEL``, scaled per output), shared by
``suites/test_models.py`` and ``nnconform replay`` so that a dumped models-suite failure is
judged again exactly as the suite judged it.  Why these values: the suite's docstring.

A verdict is: pass under ``REAL_MODEL`` as it is, or else pass :func:`judge` (every float
output under ``REAL_MODEL`` with its fp32/fp16 rows scaled by that output's magnitude).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from nnconform.verdict.criteria import Comparison, Criteria, Tolerance, compare

_Q8 = Tolerance(atol=3, rtol=0.0, bias=0.5, mse=1.0)
REAL_MODEL = Criteria(
    name="RealModel",
    float32=Tolerance(atol=5e-3, rtol=5e-3, bias=1e-3, mse=1e-5),
    float16=Tolerance(atol=0.1, rtol=0.1, bias=0.05, mse=1e-2),
    int32=Tolerance(atol=0),
    quant8_asymm=_Q8,
    quant8_asymm_signed=_Q8,
    quant8_symm=_Q8,
)


def output_scale(expected: np.ndarray) -> float:
    e = np.abs(np.asarray(expected, dtype=np.float64))
    e = e[np.isfinite(e)]
    return max(1.0, float(e.max())) if e.size else 1.0


def scaled_criteria(scale: float) -> Criteria:
    def sc(t: Tolerance) -> Tolerance:
        return Tolerance(atol=t.atol * scale, rtol=t.rtol, bias=t.bias * scale, mse=t.mse * scale * scale)

    return dataclasses.replace(
        REAL_MODEL, name=f"RealModel(scale {scale:.4g})", float32=sc(REAL_MODEL.float32), float16=sc(REAL_MODEL.float16)
    )


def judge(model, expected, actual) -> Comparison | None:
    """None when every output passes REAL_MODEL scaled by its own magnitude, else the first
    failing output's Comparison."""
    main = model.main
    for k, idx in enumerate(main.output_indexes):
        one = dataclasses.replace(model, main=dataclasses.replace(main, output_indexes=(idx,)))
        floaty = main.operands[idx].info.is_float
        crit = scaled_criteria(output_scale(expected[k])) if floaty else REAL_MODEL
        cmp = compare(one, [expected[k]], [actual[k]], criteria=crit)
        if not cmp.passed:
            return cmp
    return None
