"""Operand values for random models (CTS ``RandomGraphGenerator`` value rules, plus edge values).

``fill(rng, type, dims, ...)`` returns an array in the operand type's storage dtype:

- floats: U(-2, 2), or U(lo, hi) when the signature narrows the range (LOG's input is
  positive, DIV's divisor keeps away from zero);
- TENSOR_INT32: U[0, 255] (CTS), or [lo, hi];
- ``nonzero``: a divisor: floats keep |x| >= 0.25, integers avoid 0;
- quantised: the whole stored range of the type (a signature may narrow it);
- TENSOR_BOOL8: Bernoulli(0.5).

``edge=True`` replaces about a third of the elements by values that trip implementations up:
exact zeros of both signs, +-1, +-2, small and tiny magnitudes, and for the integer and
quantised types the ends of the range.  Besides, a float tensor gets (one time in two) a
single element of a magnitude beyond the float16 range: an fp32 operation computed in half
precision turns it into inf, which shows wherever it meets a small weight and the exact result
stays moderate (|e| <= 1e3, so the random-graph criteria do not skip it).  Only one per
tensor: two such terms in one sum cancel catastrophically (1e10 - 1e10 + 4), and then a
correct fp32 implementation differs from the reference by far more than any tolerance, which
would blame drivers for an ill-conditioned test.  A signature's own value range
still holds (edge values outside its [lo, hi] are not used); the default U(-2, 2) does not limit them.  The reference never needs to produce NaN
from them: the graph builder drops any operation whose reference output has a NaN.

Value classes (issue 20).  ``classes=`` names the classes of :data:`VALUE_CLASSES` to draw on
purpose: each named class gets at least one element (when the tensor has room), more in about
``CLASS_FRACTION`` of the elements.  The operation declares which classes are meaningful for it
(``signatures.Signature.value_classes``), so nothing draws inputs that make the expected value
undefined.  ``classify(array, type, zero_point)`` says which classes an array holds (vectorised),
which is what the domain-coverage ledger records: the classes an operation really received.

=======  ====================================================================================
float    ``subnormal`` (fp32 1e-40 / 1.4e-45, fp16 6e-8 / 3e-5), ``signed_zero`` (-0.0),
         ``inf`` (+-inf), ``nan``, ``fp16_overflow`` (|x| beyond or near the fp16 maximum,
         one per tensor), ``tie`` (x.5: rounding and truncation differ)
int32    ``negative``, ``zero``, ``unit`` (+-1), ``limit`` (INT32_MIN/MAX and their
         neighbours), ``div_rounding`` (negative odd values: floor and truncation differ)
quant    ``stored_min``, ``stored_max``, ``zero_point`` (the type's stored extremes, the zp)
=======  ====================================================================================
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import type_info

FLOAT_RANGE = (-2.0, 2.0)
INT32_RANGE = (0, 255)
EDGE_FRACTION = 1 / 3
CLASS_FRACTION = 1 / 4
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

VALUE_CLASSES: dict[str, tuple[str, ...]] = {
    "float": ("subnormal", "signed_zero", "inf", "nan", "fp16_overflow", "tie"),
    "int32": ("negative", "zero", "unit", "limit", "div_rounding"),
    "quant": ("stored_min", "stored_max", "zero_point"),
    "bool": (),
}
_CLASS_VALUES = {
    (T.TENSOR_FLOAT32, "subnormal"): (1e-40, -1e-40, 1.4e-45, -1.4e-45, 5.9e-39, -5.9e-39),
    (T.TENSOR_FLOAT16, "subnormal"): (6.0e-8, -6.0e-8, 3.0e-5, -3.0e-5, 1.2e-6, -1.2e-6),
    "signed_zero": (-0.0,),
    "inf": (np.inf, -np.inf),
    "nan": (np.nan,),
    (T.TENSOR_FLOAT32, "fp16_overflow"): (7.0e4, -7.0e4, 1.0e5),
    (T.TENSOR_FLOAT16, "fp16_overflow"): (6.0e4, -6.0e4, 65504.0, -65504.0),
    "tie": (0.5, -0.5, 1.5, -1.5, 2.5, -2.5),
    "zero": (0,),
    "unit": (1, -1),
    "limit": (INT32_MIN, INT32_MAX, INT32_MIN + 1, INT32_MAX - 1),
    "div_rounding": (-7, -5, -3, -9, -255),
}

_FLOAT_EDGES = {
    T.TENSOR_FLOAT32: (0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 1e-3, -1e-3, 1e-7, -1e-7),
    T.TENSOR_FLOAT16: (0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 1e-3, -1e-3, 6.0e-8, -6.0e-8),
}
# At most one element per tensor (see the module docstring).
_HUGE = {
    T.TENSOR_FLOAT32: (7.0e4, -7.0e4, 1.0e5),
    T.TENSOR_FLOAT16: (6.0e4, -6.0e4),
}
_QUANT_RANGE = {
    T.TENSOR_QUANT8_ASYMM: (0, 255),
    T.TENSOR_QUANT8_ASYMM_SIGNED: (-128, 127),
    T.TENSOR_QUANT8_SYMM: (-127, 127),
    T.TENSOR_QUANT16_ASYMM: (0, 65535),
    T.TENSOR_QUANT16_SYMM: (-32768, 32767),
}


def stored_range(t: T) -> tuple[int, int]:
    """The full range of stored values of a quantised type."""
    return _QUANT_RANGE[T(t)]


def type_family(t: T) -> str:
    """ "float", "int32", "quant" or "bool": which row of VALUE_CLASSES a type draws from."""
    t = T(t)
    if t in (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.FLOAT32, T.FLOAT16):
        return "float"
    if t in (T.TENSOR_INT32, T.INT32):
        return "int32"
    if t in _QUANT_RANGE:
        return "quant"
    return "bool"


def class_values(
    t: T,
    cls: str,
    lo: float | None = None,
    hi: float | None = None,
    zero_point: int = 0,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """The candidate values of one class for type ``t`` (float64), inside [lo, hi] when given."""
    t = T(t)
    fam = type_family(t)
    vals: tuple[float, ...]
    if cls not in VALUE_CLASSES[fam]:
        raise ValueError(f"{cls!r} is not a value class of {fam} ({', '.join(VALUE_CLASSES[fam])})")
    if fam == "quant":
        a, b = stored_range(t)
        vals = {"stored_min": (a,), "stored_max": (b,), "zero_point": (zero_point,)}[cls]
    elif cls == "negative":
        r = rng if rng is not None else np.random.default_rng(0)
        vals = tuple(int(v) for v in r.integers(-255, -1, 4, endpoint=True))
    else:
        tt = T.TENSOR_FLOAT32 if t == T.FLOAT32 else T.TENSOR_FLOAT16 if t == T.FLOAT16 else t
        vals = _CLASS_VALUES.get((tt, cls), _CLASS_VALUES.get(cls, ()))
    v = np.asarray(vals, dtype=np.float64)
    if cls == "nan":  # NaN is never inside a range; a range means "no NaN here"
        return v if lo is None and hi is None else v[:0]
    keep = np.ones(v.shape, dtype=bool)
    if lo is not None:
        keep &= v >= lo
    if hi is not None:
        keep &= v <= hi
    return v[keep]


def classify(arr, t: T, zero_point: int = 0) -> set[str]:
    """The value classes present in ``arr`` (stored representation of type ``t``)."""
    a = np.asarray(arr)
    if a.size == 0:
        return set()
    fam = type_family(t)
    found: set[str] = set()
    if fam == "float":
        tiny = np.finfo(a.dtype if a.dtype.kind == "f" else np.float32).tiny
        x = a.astype(np.float64)
        fin = np.isfinite(x)
        ax = np.abs(x)
        with np.errstate(invalid="ignore"):
            checks = {
                "subnormal": (x != 0) & (ax < tiny),
                "signed_zero": (x == 0) & np.signbit(x),
                "inf": np.isinf(x),
                "nan": np.isnan(x),
                "fp16_overflow": fin & (ax >= (3.2e4 if a.dtype == np.float16 else 65520.0)),
                "tie": fin & (ax < 2**20) & (x - np.floor(x) == 0.5),
            }
    elif fam == "int32":
        x = a.astype(np.int64)
        checks = {
            "negative": x < 0,
            "zero": x == 0,
            "unit": np.abs(x) == 1,
            "limit": (x <= INT32_MIN + 1) | (x >= INT32_MAX - 1),
            "div_rounding": (x < -1) & (x % 2 == 1),
        }
    elif fam == "quant":
        x = a.astype(np.int64)
        lo, hi = stored_range(t)
        checks = {"stored_min": x == lo, "stored_max": x == hi, "zero_point": x == zero_point}
    else:
        return found
    return {k for k, m in checks.items() if bool(np.any(m))}


def _inject_classes(rng: np.random.Generator, t: T, flat: np.ndarray, classes, lo, hi, zero_point: int) -> np.ndarray:
    """Put every value class of ``classes`` into ``flat``: one element each at distinct random
    positions (as many as fit), and about CLASS_FRACTION more drawn from all of them.  The
    fp16_overflow class stays at one element (see the module docstring)."""
    n = flat.size
    pools = []
    for c in classes:
        v = class_values(t, c, lo, hi, zero_point, rng)
        if v.size:
            pools.append((c, v))
    if not pools or not n:
        return flat
    flat = np.array(flat, dtype=np.float64)
    spread = [v for c, v in pools if c != "fp16_overflow"]
    if spread:
        allv = np.concatenate(spread)
        mask = rng.random(n) < CLASS_FRACTION
        flat = np.where(mask, rng.choice(allv, n), flat)
    order = rng.permutation(len(pools))
    pos = rng.permutation(n)
    for j, k in enumerate(order[:n]):
        flat[pos[j]] = rng.choice(pools[k][1])
    return flat


def fill(
    rng: np.random.Generator,
    t: T,
    dims,
    lo: float | None = None,
    hi: float | None = None,
    edge: bool = False,
    nonzero: bool = False,
    classes=(),
    zero_point: int = 0,
) -> np.ndarray:
    t = T(t)
    info = type_info(t)
    dims = tuple(int(d) for d in dims)
    n = int(np.prod(dims)) if dims else 1
    flat: np.ndarray  # float64, bool or int64 by the type's family
    if info.is_float:
        a, b = (FLOAT_RANGE[0] if lo is None else lo), (FLOAT_RANGE[1] if hi is None else hi)
        flat = rng.uniform(a, b, n)

        # The default range does not limit edge values; a signature's own range does.
        def in_range(e: float) -> bool:
            return (lo is None or lo <= e) and (hi is None or e <= hi)

        edges = [e for e in _FLOAT_EDGES.get(t, _FLOAT_EDGES[T.TENSOR_FLOAT16]) if in_range(e)]
        huge = [e for e in _HUGE.get(t, ()) if in_range(e)]
    elif t in (T.TENSOR_BOOL8, T.BOOL):
        flat = rng.random(n) < 0.5
        edges, huge = [], []
    else:
        if t in (T.TENSOR_INT32, T.INT32):
            a, b = INT32_RANGE
        else:
            a, b = stored_range(t)
        a, b = (a if lo is None else int(lo)), (b if hi is None else int(hi))
        flat = rng.integers(a, b, n, endpoint=True)
        edges = sorted({a, b, min(max(0, a), b), min(max(1, a), b)})
        huge = []
    if edge and edges and n:
        mask = rng.random(n) < EDGE_FRACTION
        flat = np.where(mask, rng.choice(np.asarray(edges, dtype=np.float64), n), flat)
    if edge and huge and n and "fp16_overflow" not in classes and rng.random() < 0.5:
        flat = np.array(flat, dtype=np.float64)
        flat[rng.integers(n)] = rng.choice(np.asarray(huge, dtype=np.float64))
    if classes and n:
        flat = _inject_classes(rng, t, np.asarray(flat), classes, lo, hi, zero_point)
    if nonzero:
        # Divisors: floats keep |x| >= 0.25 (no inf from a tiny divisor), integers avoid 0.
        if info.is_float:
            flat = np.where(np.abs(flat) < 0.25, np.where(flat < 0, -0.25, 0.25), flat)
        else:
            flat = np.where(flat == 0, 1, flat)
    arr = np.asarray(flat).astype(info.dtype)
    return arr.reshape(dims) if not info.is_scalar else arr.reshape(())
