"""How much of each runtime adapter is text another adapter also carries.

Issue #45 asks that runtime-neutral NNAPI rules live once, so that no pair of adapters shares
more than 10% of its lines.  This script measures it, for every ordered pair (A, B) of the
five adapters under ``drivers/`` (each adapter is every ``*.py`` file of its folder):

* **run**: the fraction of A's substantive lines that belong to a run of at least ``--run``
  (6) consecutive substantive lines standing verbatim, in the same order, in B.  This is the
  copied-block measure the 10% target is about.
* **any**: the fraction of A's substantive lines whose text stands anywhere in B, alone.
  This counts short common lines too (``else:``, ``return out``), so it never reaches 0; it
  is the kind of figure the issue's "35-46%" was.

A substantive line is a non-blank line that is not comment-only and not part of an import
statement, with its whitespace folded (so indentation does not hide a copy).  Runs do not
cross file boundaries.

Usage: ``python benchmarks/adapter_overlap.py [--drivers DIR] [--run N]``.
"""

from __future__ import annotations

import argparse
import itertools
import re
from pathlib import Path

ADAPTERS = ("onnxruntime", "openvino", "jax", "torch", "tflite")

_IMPORT = re.compile(r"^(import\s|from\s+\S+\s+import\b)")


def substantive_lines(text: str) -> list[str]:
    """The lines that count, folded; a multi-line ``from x import (...)`` is skipped whole."""
    out: list[str] = []
    in_import = False
    for raw in text.splitlines():
        line = " ".join(raw.split())
        if in_import:
            # An import in parentheses ends at the line that closes them.
            if ")" in line:
                in_import = False
            continue
        if not line or line.startswith("#"):
            continue
        if _IMPORT.match(line):
            in_import = "(" in line and ")" not in line
            continue
        out.append(line)
    return out


def adapter_files(root: Path, name: str) -> list[list[str]]:
    """One list of substantive lines per source file of an adapter."""
    return [
        substantive_lines(p.read_text(encoding="utf-8"))
        for p in sorted((root / name).rglob("*.py"))
        if "__pycache__" not in p.parts
    ]


def ngrams(files: list[list[str]], n: int) -> set[tuple[str, ...]]:
    return {tuple(f[i : i + n]) for f in files for i in range(len(f) - n + 1)}


def overlap(a: list[list[str]], b: list[list[str]], run: int) -> tuple[float, float, int]:
    """(run fraction, any fraction, substantive line count) of ``a`` against ``b``."""
    b_grams = ngrams(b, run)
    b_lines = {line for f in b for line in f}
    total = in_run = anywhere = 0
    for f in a:
        covered = [False] * len(f)
        for i in range(len(f) - run + 1):
            if tuple(f[i : i + run]) in b_grams:
                covered[i : i + run] = [True] * run
        total += len(f)
        in_run += sum(covered)
        anywhere += sum(line in b_lines for line in f)
    if total == 0:
        return 0.0, 0.0, 0
    return in_run / total, anywhere / total, total


def main(argv: list[str] | None = None) -> int:
    here = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--drivers", type=Path, default=here / "drivers")
    ap.add_argument("--run", type=int, default=6, help="shortest run that counts (lines)")
    args = ap.parse_args(argv)

    files = {name: adapter_files(args.drivers, name) for name in ADAPTERS}
    width = max(map(len, ADAPTERS))
    print("substantive lines: " + ", ".join(f"{n} {sum(map(len, files[n]))}" for n in ADAPTERS))
    print(f"cell = run(>={args.run} lines)% / any-line% of the ROW adapter's lines found in the COLUMN adapter")
    print(" " * width + " | " + " | ".join(f"{n:>13}" for n in ADAPTERS))
    worst_run = worst_any = 0.0
    for a in ADAPTERS:
        cells = []
        for b in ADAPTERS:
            if a == b:
                cells.append(f"{'-':>13}")
                continue
            r, x, _ = overlap(files[a], files[b], args.run)
            worst_run, worst_any = max(worst_run, r), max(worst_any, x)
            cells.append(f"{100 * r:5.1f} / {100 * x:5.1f}")
        print(f"{a:>{width}} | " + " | ".join(cells))
    # Against all the other adapters together: the "appears in another adapter".
    print("against all others together (run% / any%):")
    for a in ADAPTERS:
        others = list(itertools.chain.from_iterable(files[b] for b in ADAPTERS if b != a))
        r, x, _ = overlap(files[a], others, args.run)
        print(f"  {a:>{width}}: {100 * r:5.1f} / {100 * x:5.1f}")
    print(f"worst pair: run {100 * worst_run:.1f}%, any {100 * worst_any:.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
