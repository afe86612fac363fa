"""Accuracy on golden data.

Each model gets a small fixed set of inputs (its seeded inputs, seeds ``seed .. seed+n-1``)
and their golden outputs, computed once by the reference executor and stored in the cache
(``$XDG_CACHE_HOME/nnconform/golden/``, one ``.npz`` per model digest, seed set and
harness version; a damaged or mismatching file is recomputed).  Then, per model:

- classifiers: top-1 agreement (the driver's best class is the golden one) and top-5
  agreement (the golden best class is among the driver's five best);
- every model: the largest and the mean absolute error over all outputs (quantised outputs
  dequantised), the mean squared error, and the fraction of output elements within the
  models suite's tolerance (``RealModel``: for float outputs atol and rtol scaled by the
  output's magnitude, for quantised ones 3 steps of the output's scale);
- a verdict: the models suite's (``nnconform.models.criteria.judge`` per input).  A failing
  input whose every operation is within its own CTS criteria on the values the driver fed it
  is accumulated rounding (WARN); otherwise the model is traced to the first operation that
  diverges (the models suite's localisation), which the row names.
"""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from nnconform.ir import Model
from nnconform.models.criteria import REAL_MODEL, output_scale

PASS, WARN, FAIL = "PASS", "WARN", "FAIL"


def golden_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "nnconform" / "golden"


def model_digest(model: Model) -> str:
    """A digest of the main graph: operations, operand types, shapes, quantisation and
    constant values (a rebuilt or re-imported model that changed gets new golden outputs)."""
    h = hashlib.sha256()
    sg = model.main
    for op in sg.operations:
        h.update(f"{int(op.type)}:{op.inputs}:{op.outputs};".encode())
    for o in sg.operands:
        h.update(f"{int(o.type)}:{o.dimensions}:{o.scale}:{o.zero_point}:{int(o.lifetime)};".encode())
        if isinstance(o.value, np.ndarray):
            h.update(np.ascontiguousarray(o.value).tobytes())
        elif o.value is not None:
            h.update(repr(o.value).encode())
    h.update(f"{sg.input_indexes}:{sg.output_indexes}".encode())
    return h.hexdigest()


def _key(entry, model: Model, seeds: Sequence[int]) -> str:
    from nnconform import __version__

    text = f"{entry.name}|{model_digest(model)}|{list(seeds)}|{__version__}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def golden_set(entry, model: Model, seeds: Sequence[int], root: Path | None = None):
    """(inputs, golden outputs, where they came from): 'stored' or 'computed'."""
    from nnconform.reference.executor import Executor

    inputs = [entry.inputs(s) for s in seeds]
    path = (root or golden_root()) / f"{entry.name}-{_key(entry, model, seeds)}.npz"
    digest = hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for x in inputs for a in x)).hexdigest()
    try:
        with np.load(path, allow_pickle=False) as z:
            if str(z["inputs_sha256"]) == digest:
                n_out = int(z["outputs"])
                return inputs, [[z[f"o{k}_{j}"] for j in range(n_out)] for k in range(len(seeds))], "stored"
    except (OSError, KeyError, ValueError):
        pass  # absent or damaged: computed again below and stored over it
    ex = Executor(model)
    golden = [[np.array(o, copy=True) for o in ex.run(x)] for x in inputs]
    arrays: dict[str, Any] = {f"o{k}_{j}": o for k, outs in enumerate(golden) for j, o in enumerate(outs)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".part.npz")
        arrays["inputs_sha256"] = np.array(digest)
        arrays["outputs"] = np.array(len(golden[0]) if golden else 0)
        np.savez(tmp, **arrays)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache only costs recomputing next time; the numbers are the same
    return inputs, golden, "computed"


def _as_float(model: Model, k: int, arr: np.ndarray) -> np.ndarray:
    op = model.main.operands[model.main.output_indexes[k]]
    a = np.asarray(arr)
    if op.info.is_quant:
        return (a.astype(np.float64) - op.zero_point) * op.scale
    return a.astype(np.float64)


def _tolerance(model: Model, k: int, expected: np.ndarray) -> np.ndarray | float:
    op = model.main.operands[model.main.output_indexes[k]]
    if op.info.is_quant:
        return REAL_MODEL.quant8_asymm.atol * op.scale
    if op.info.is_float:
        t = REAL_MODEL.float16 if "FLOAT16" in op.type.name else REAL_MODEL.float32
        return t.atol * output_scale(expected) + t.rtol * np.abs(expected)
    return 0.0


def metrics(
    model: Model, expected: Sequence[Sequence[np.ndarray]], actual: Sequence[Sequence[np.ndarray]], classifier: bool
) -> dict:
    """See the module docstring; every figure over every input and output."""
    max_err, abs_sum, sq, n, within = 0.0, 0.0, 0.0, 0, 0
    top1 = top5 = 0
    for exp, act in zip(expected, actual):
        for k, (e, a) in enumerate(zip(exp, act)):
            ef, af = _as_float(model, k, e), _as_float(model, k, a)
            if ef.shape != af.shape:
                return {
                    "max_single_error": math.inf,
                    "mean_abs_error": math.inf,
                    "mse": math.inf,
                    "within_tolerance": 0.0,
                    "top1_agreement": 0.0 if classifier else None,
                    "top5_agreement": 0.0 if classifier else None,
                }
            d = np.abs(ef - af)
            bad = ~np.isfinite(d)
            max_err = max(max_err, math.inf if bad.any() else float(d.max(initial=0.0)))
            clean = np.where(bad, 0.0, d)
            abs_sum += float(clean.sum())
            sq += float(np.sum(clean**2))
            n += d.size
            within += int(np.count_nonzero(~bad & (d <= _tolerance(model, k, ef))))
        if classifier:
            e0 = _as_float(model, 0, exp[0]).reshape(-1)
            a0 = _as_float(model, 0, act[0]).reshape(-1)
            ref_top = int(np.argmax(e0))
            top1 += int(int(np.argmax(a0)) == ref_top)
            top5 += int(ref_top in np.argsort(-a0, kind="stable")[:5])
    count = max(len(expected), 1)
    return {
        "max_single_error": max_err,
        "mean_abs_error": abs_sum / n if n else 0.0,
        "mse": sq / n if n else 0.0,
        "within_tolerance": within / n if n else 1.0,
        "top1_agreement": top1 / count if classifier else None,
        "top5_agreement": top5 / count if classifier else None,
    }


def verdict(device, model: Model, inputs, expected, actual) -> tuple[str, str, str]:
    """(PASS/WARN/FAIL, message, traced operation '#n NAME' or '')."""
    from nnconform.models.criteria import judge
    from nnconform.models.localise import check_steps, first_failing_operation_alone

    for k, (x, e, a) in enumerate(zip(inputs, expected, actual)):
        cmp = judge(model, e, a)
        if cmp is None:
            continue
        steps = check_steps(device, model, x, a)
        if steps.accumulated_rounding:
            return WARN, f"input {k}: {cmp.message[:200]}; but {steps.describe()}", ""
        if steps.step is not None:
            n, name, step_cmp = steps.step
            return FAIL, f"input {k}: {cmp.message[:240]}; first diverging operation #{n} {name}", f"#{n} {name}"
        alone = first_failing_operation_alone(device, model, x)
        if alone is not None:
            n, name, _, _ = alone
            return FAIL, f"input {k}: {cmp.message[:240]}; first diverging operation #{n} {name}", f"#{n} {name}"
        return FAIL, f"input {k}: {cmp.message[:200]}; no single operation fails alone ({steps.describe()[:120]})", ""
    return PASS, f"{len(inputs)} golden input(s) within RealModel", ""
