"""Hypothesis strategies for random models.

- ``single_operation(op, dtype)``: one operation with random valid operands;
- ``random_graph(dtype, rank, n_ops, max_dim)``: N operations wired together (graphs.py);
- ``cases(config)``: the general form both use.

Every structural choice (which operation, shapes, parameters, edges, constant or input) is a
Hypothesis draw, so a failing case shrinks: slots disappear, dimensions go to 1, parameters to
their simplest value.  Tensor values come from a numpy generator seeded by one drawn integer
(drawing thousands of elements through Hypothesis would be slow and shrink badly).

``value_mode``: "uniform" (CTS: floats U(-2, 2), ...), "edge" (values.py edge values in about a
third of the elements, and every value class the operation declares meaningful drawn on
purpose), or "mixed" (each case draws; one in two uses edge values and classes, and shrinking
goes back to uniform).

``RandomDrawer`` makes the same models from a plain seeded ``random.Random`` (benchmarks,
quick scripts), without Hypothesis.
"""

from __future__ import annotations

import functools
import random
from typing import Any, Sequence

from hypothesis import reject
from hypothesis import strategies as st

from nnconform.generators.graphs import GeneratedCase, GraphConfig, generate
from nnconform.generators.signatures import Reject
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op


@functools.lru_cache(maxsize=4096)
def _ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.integers(lo, hi)


class HypothesisDrawer:
    def __init__(self, draw):
        self._draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return self._draw(_ints(lo, hi)) if hi > lo else lo

    def boolean(self) -> bool:
        return self._draw(_ints(0, 1)) == 1

    def choice(self, seq: Sequence[Any]) -> Any:
        return seq[self.integer(0, len(seq) - 1)]


class RandomDrawer:
    def __init__(self, seed: int):
        self._r = random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return self._r.randint(lo, hi) if hi > lo else lo

    def boolean(self) -> bool:
        return self._r.random() < 0.5

    def choice(self, seq: Sequence[Any]) -> Any:
        return seq[self._r.randrange(len(seq))]


VALUE_MODES = ("uniform", "edge", "mixed")


@st.composite
def cases(draw, config: GraphConfig, value_mode: str = "uniform") -> GeneratedCase:
    if value_mode not in VALUE_MODES:
        raise ValueError(f"value_mode must be one of {VALUE_MODES}, got {value_mode!r}")
    value_seed = draw(st.integers(0, 2**32 - 1))
    edge = value_mode == "edge" or (value_mode == "mixed" and draw(_ints(0, 1)) == 1)
    try:
        return generate(HypothesisDrawer(draw), config, value_seed, edge=edge)
    except Reject:
        reject()


def single_operation(
    op: Op,
    dtype: T,
    *,
    max_dim: int = 1000,
    max_elems: int = 10000,
    value_mode: str = "uniform",
    allowed: frozenset | None = None,
) -> st.SearchStrategy[GeneratedCase]:
    cfg = GraphConfig(
        dtype=T(dtype),
        n_ops=1,
        max_dim=max_dim,
        max_elems=max_elems,
        ops=(Op(op),),
        allowed=allowed,
        shape_classes=True,
    )
    return cases(cfg, value_mode)


def random_graph(
    dtype: T,
    rank: int | None,
    n_ops: int,
    max_dim: int,
    *,
    max_elems: int = 10000,
    ops: tuple[Op, ...] | None = None,
    value_mode: str = "uniform",
    allowed: frozenset | None = None,
) -> st.SearchStrategy[GeneratedCase]:
    cfg = GraphConfig(
        dtype=T(dtype),
        n_ops=n_ops,
        rank=rank,
        max_dim=max_dim,
        max_elems=max_elems,
        ops=ops,
        allowed=allowed,
        shape_classes=True,
    )
    return cases(cfg, value_mode)


def sample(config: GraphConfig, seed: int, edge: bool = False, tries: int = 20) -> GeneratedCase:
    """One model from a seed without Hypothesis (retries a few seeds on Reject)."""
    for k in range(tries):
        try:
            return generate(RandomDrawer(seed * 7919 + k), config, seed * 104729 + k, edge=edge)
        except Reject:
            continue
    raise Reject(f"no valid model from seed {seed} after {tries} tries")
