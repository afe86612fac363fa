"""What the harness costs per cell of the vectors execution matrix, against the driver's own work.

    python benchmarks/bench_matrix.py                       # every kind, 6 sampled files each
    python benchmarks/bench_matrix.py --files 3 --kinds general,deadline

For each variant kind (and ``plain``, the sync run of test_vector) the same cells run two ways:

- **harness**: ``nnconform run --driver reference --suite vectors --variants KIND`` on a vectors
  tree holding only the sampled files, as a user runs it (a subprocess: pytest, the plugin,
  one driver host, the journal and the reports; ``-k test_vector_variant`` keeps the plain
  runs out of a kind's row).  Its fixed cost (start-up and collection) is measured by the
  same command with ``-k`` matching no cell, and subtracted; that run starts no driver host
  and writes no report, so those count in the per-cell cost, the one the matrix pays 538,000
  times.
- **bare loop**: in this process, one driver host (the same ``IsolatedDevice``, its start
  timed, as the harness's run pays it) and a loop that calls ``run_variant`` (or the plain
  runner) on exactly the cells the harness recorded, with the same requests, checks and
  comparison, and no pytest.

It prints cells/s both ways (medians of ``--repeat`` runs) and their ratio per kind, and
checks that the bare loop reached
the same (cell, outcome) rows as the harness.  The sampled files are drawn with ``--seed``
(printed) from the files that have cells of the kind; nothing is asserted about speed.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nnconform.cases.variants import KINDS, applicable, mutation_eligible, run_variant, select_mutations
from nnconform.cases.vectors import case_from_dict, resolve_root, vector_files
from nnconform.isolation.proxy import open_isolated
from nnconform.verdict.runner import Case, run

NO_CELL = "no_such_cell_matches_this_expression"


def _kinds_of(d: dict) -> set[str]:
    kinds = {v.kind for v in applicable(d)}
    if mutation_eligible(d):
        kinds |= {"mutation", "request_mutation"}
    return kinds | {"plain"}


def kinds_by_file(root: Path) -> dict[Path, set[str]]:
    """The kinds each vectors file has cells of (every file read once, for every kind)."""
    out = {}
    for f in vector_files(root):
        try:
            cases = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        out[f] = set().union(*(_kinds_of(d) for d in cases if isinstance(d, dict)))
    return out


def sample_files(kinds: dict[Path, set[str]], kind: str, n: int, rng: random.Random) -> list[Path]:
    having = [f for f, ks in kinds.items() if kind in ks]
    return sorted(rng.sample(having, min(n, len(having))))


def harness(tree: Path, kind: str, k: str | None, seed: int) -> tuple[float, list[dict]]:
    variants = "none" if kind == "plain" else kind
    with tempfile.TemporaryDirectory(prefix="bench-matrix-") as d:
        cmd = [sys.executable, "-m", "nnconform", "run", "--driver", "reference", "--suite", "vectors"]
        cmd += ["--vectors", str(tree), "--variants", variants, "--no-probe", "--seed", str(seed)]
        cmd += ["--report-dir", d, "--", "-q", "-p", "no:cacheprovider"]
        if k:
            cmd += ["-k", k]
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if r.returncode != 0 and not (k == NO_CELL and r.returncode == 2):  # 2: no cell selected
            raise SystemExit(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
        journal = Path(d) / "results.jsonl"
        rows = [json.loads(ln) for ln in journal.read_text().splitlines()] if journal.exists() else []
    return wall, rows


def bare_loop(tree: Path, rows: list[dict], seed: int) -> tuple[float, list[tuple[str, str]]]:
    """Run exactly the harness's cells through one driver host, without pytest."""
    by_id: dict[str, tuple] = {}
    eligible = []
    files = vector_files(tree)
    for f in files:
        for d in json.loads(f.read_text()):
            vid = f"{f.parent.name}/{d['name']}"
            by_id[vid] = (d, str(f))
            m = mutation_eligible(d)
            if m:
                eligible.append((vid, m))
    mutations = select_mutations(eligible, "all", seed)
    cells = []
    for r in rows:
        tid = r["test_id"]
        vid, _, vpart = tid.partition("[")
        d, path = by_id[vid]
        variant = None
        if vpart:
            known = {v.id: v for v in (*applicable(d), *mutations.get(vid, []))}
            variant = known[vpart.rstrip("]")]
        cells.append((tid, d, path, variant))
    # The host's start is timed: the harness's run starts one too (its fixed-cost run, which
    # selects no cell, does not), so each way pays it once over the same cells.
    t0 = time.perf_counter()
    device = open_isolated("reference", call_timeout=60.0, mem_limit=4 << 30)
    got = []
    try:
        cache: dict[str, object] = {}
        for tid, d, path, variant in cells:
            # the harness builds a vector's case once for all its cells; so does this loop
            case = cache.get(tid.split("[", 1)[0])
            if case is None:
                cache.clear()
                case = cache[tid.split("[", 1)[0]] = case_from_dict(d, path)
            if variant is None:
                c = Case(
                    tid, case.model, case.inputs, case.outputs, ignored=case.ignored, expect_failure=case.expect_failure
                )
                out = run(device, c, ignored=case.ignored)
            else:
                out = run_variant(device, case, variant, seed=seed, mutation_cap=None)
            got.append((tid, out.outcome))
        elapsed = time.perf_counter() - t0
    finally:
        device.close()
    return elapsed, got


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=6, help="vector files sampled per kind (default 6)")
    ap.add_argument("--kinds", default="plain," + ",".join(KINDS), help="comma list (default: plain and every kind)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each way per kind; medians are shown (default 3)")
    a = ap.parse_args(argv)
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(2**31)
    print(f"bench_matrix: seed {seed}, {a.files} file(s) per kind", flush=True)
    rng = random.Random(seed)
    kinds = kinds_by_file(resolve_root(None))
    table = []
    for kind in a.kinds.split(","):
        files = sample_files(kinds, kind, a.files, rng)
        with tempfile.TemporaryDirectory(prefix="bench-matrix-tree-") as t:
            tree = Path(t)
            for f in files:
                (tree / f.parent.name).mkdir(exist_ok=True)
                shutil.copy(f, tree / f.parent.name / f.name)
            # medians of --repeat runs: a kind's run is a second or two, so one run is noisy
            fixed = statistics.median(harness(tree, kind, NO_CELL, seed)[0] for _ in range(a.repeat))
            # a kind's run is its cells alone: test_vector's plain runs are the "plain" row
            runs = [
                harness(tree, kind, None if kind == "plain" else "test_vector_variant", seed) for _ in range(a.repeat)
            ]
            wall, rows = statistics.median(w for w, _ in runs), runs[0][1]
            bares = [bare_loop(tree, rows, seed) for _ in range(a.repeat)]
            bare, got = statistics.median(b for b, _ in bares), bares[0][1]
        want = sorted((r["test_id"], r["outcome"]) for r in rows)
        same = "yes" if sorted(got) == want else f"NO ({len(set(got) ^ set(want))} differ)"
        n = len(rows)
        per_cell = max(wall - fixed, 1e-9)
        table.append((kind, n, fixed, wall, n / per_cell, n / max(bare, 1e-9), per_cell / max(bare, 1e-9), same))
        print(f"  {kind}: {n} cells, harness {wall:.1f} s (fixed {fixed:.1f} s), bare loop {bare:.1f} s", flush=True)
    print()
    print("| kind | cells | harness fixed s | harness wall s | harness cells/s | bare cells/s | ratio | same rows |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for kind, n, fixed, wall, hs, bs, ratio, same in table:
        print(f"| {kind} | {n} | {fixed:.1f} | {wall:.1f} | {hs:.0f} | {bs:.0f} | {ratio:.2f} | {same} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
