"""Harness-side cost of one exhaustive sweep (issue 51): making the inputs, the reference's
expected output, ``criteria.compare`` and the sweep's error statistics, timed per step.

With ``--old DIR`` (a directory holding ``criteria.py`` and ``exhaustive.py`` of an earlier
commit, e.g. from ``git show``) the same steps of the old code run on the same arrays, and
every result is checked equal: the comparison (verdict, mismatches), the statistics
(failing elements, worst ULP and fraction, histogram, flushes) and the inputs.  The driver
outputs judged are the reference's own, and seeded perturbations of it (random ULP errors,
a flushed subnormal result, NaN, a swapped infinity) so the error paths are compared too.

    python benchmarks/bench_exhaustive_chunk.py --sweeps ADD-fp16-pairs-0486 POW-fp16-pairs-0022 \\
        --old /tmp/old --seed 51
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

from nnconform.cases import exhaustive as X
from nnconform.reference.executor import execute
from nnconform.verdict import criteria as C


def _load_old(folder: Path):
    def load(name: str, path: Path):
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod

    crit = load("old_criteria", folder / "criteria.py")
    # the old sweep module must use the old ULP distance, not this tree's
    src = (folder / "exhaustive.py").read_text()
    src = src.replace("from nnconform.verdict.criteria import", "from old_criteria import")
    (folder / "_old_exhaustive.py").write_text(src)
    return crit, load("old_exhaustive", folder / "_old_exhaustive.py")


def _perturbed(want: np.ndarray, inputs: list[np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Driver outputs to judge: the reference's own and seeded wrong ones."""
    out = {"same": want.copy()}
    if want.dtype.kind != "f":
        bad = want.copy()
        k = rng.choice(want.size, size=max(1, want.size // 1000), replace=False)
        bad[k] = ~bad[k] if want.dtype == np.bool_ else bad[k] + 1
        out["flipped"] = bad
        return out
    bits = np.uint16 if want.dtype == np.float16 else np.uint32
    ulps = want.copy()
    k = rng.choice(want.size, size=max(1, want.size // 100), replace=False)
    ulps.view(bits)[k] += rng.integers(1, 5, size=k.size).astype(bits)  # 1-4 ULP up (some to inf/NaN)
    out["1-4 ulp on 1%"] = ulps
    odd = want.copy()
    sub = np.flatnonzero((want != 0) & (np.abs(want) < np.finfo(want.dtype).tiny))
    if sub.size:
        odd[sub[0]] = 0  # a subnormal result flushed
    odd[rng.integers(want.size)] = np.nan
    fin = np.flatnonzero(np.isfinite(want))
    odd[fin[rng.integers(fin.size)]] = np.inf
    out["flush, NaN, inf"] = odd
    return out


def _same(x, y) -> bool:
    """Deep equality where NaN equals NaN and arrays compare by value."""
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        x, y = np.asarray(x), np.asarray(y)
        if x.dtype.kind == "f" and x.dtype == y.dtype:  # bit patterns: NaNs included
            return x.shape == y.shape and bool((x.view(f"u{x.itemsize}") == y.view(f"u{y.itemsize}")).all())
        return bool(np.array_equal(x, y))
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(_same(p, q) for p, q in zip(x, y))
    if isinstance(x, float) and isinstance(y, float) and np.isnan(x) and np.isnan(y):
        return True
    return type(x) is type(y) and x == y


def _cmp_key(c) -> list:
    return [c.passed, c.message] + [dataclasses.asdict(m) for m in c.mismatches]


def _stats_key(s) -> dict:
    return {"summary": s.summary(), "failing": s.failing, "worst": s.worst_index, "flushed": s.flushed}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweeps", nargs="+", required=True, help="sweep names of the full tier")
    ap.add_argument("--old", type=Path, help="folder with the old criteria.py and exhaustive.py")
    ap.add_argument("--seed", type=int, default=51)
    ap.add_argument("--repeat", type=int, default=3, help="timings are the best of this many")
    a = ap.parse_args(argv)
    print(f"seed {a.seed}")
    by_name = {s.name: s for s in X.sweeps("full")}
    old = _load_old(a.old) if a.old else None
    old_by_name = {s.name: s for s in old[1].sweeps("full")} if old else {}
    rows = []
    differ = 0
    for name in a.sweeps:
        sw = by_name[name]
        rng = np.random.default_rng([a.seed, len(name)])

        def best(fn):
            ts = []
            for _ in range(a.repeat):
                t = time.perf_counter()
                r = fn()
                ts.append(time.perf_counter() - t)
            return min(ts), r

        t_in, inputs = best(sw.make_inputs)
        model = sw.build(int(inputs[0].size))
        t_ref, expected = best(lambda: execute(model, inputs))
        want = expected[0]
        times = {"inputs": t_in, "reference": t_ref}
        if old:
            t_oin, oinputs = best(old_by_name[name].make_inputs)
            times["old_inputs"] = t_oin
            same_inputs = _same(list(oinputs), list(inputs))
            differ += not same_inputs
            if not same_inputs:
                print(f"DIFFERENT inputs: {name}")
        for label, got in _perturbed(want, inputs, rng).items():
            t_cmp, cmp = best(lambda: C.compare(model, [want], [got]))
            t_st, st = best(lambda: X.error_stats(model, want, got, inputs=inputs))
            t_sum, _ = best(st.summary)
            row = {"sweep": name, "actual": label, **times, "compare": t_cmp, "stats": t_st + t_sum}
            if old:
                ocrit, oexh = old
                t_ocmp, ocmp = best(lambda: ocrit.compare(model, [want], [got]))
                t_ost, ost = best(lambda: oexh.error_stats(model, want, got, inputs=inputs))
                t_osum, _ = best(ost.summary)
                row.update(old_compare=t_ocmp, old_stats=t_ost + t_osum)
                sk, osk = _stats_key(st), _stats_key(ost)
                ok = _same(_cmp_key(cmp), _cmp_key(ocmp)) and _same(sk, osk)
                row["same"] = ok
                differ += not ok
                if not ok:
                    print(
                        f"DIFFERENT: {name} / {label}\n new {sk['summary']} {_cmp_key(cmp)[:2]}\n old {osk['summary']} {_cmp_key(ocmp)[:2]}"
                    )
            rows.append(row)
    cols = ["sweep", "actual", "inputs", "reference", "compare", "stats"]
    cols += ["old_inputs", "old_compare", "old_stats", "same"] if old else []
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(f"{r[c]:.3f}" if isinstance(r[c], float) else str(r[c]) for c in cols) + " |")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
