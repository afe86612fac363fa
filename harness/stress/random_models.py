"""Random valid models from a seed, for the random-graph stress tests (MLTS's random-graph
model-load and inference stress).

    rm = random_model(seed=42, num_ops=10, max_dim=1000)
    rm.model, rm.inputs          # a Model that passes validation, one array per input

The graphs come from ``nnconform.generators`` (the same builder the random suite uses with
Hypothesis), driven by a plain seeded drawer: graphs of one data type (``dtype``, a short
name such as ``fp32`` or ``quant8``) of ``num_ops`` candidate operations, dimensions <=
``max_dim`` and at most 10,000 elements per freshly drawn operand.  ``cells`` keeps the draw
inside what the driver claims (``"OPERATION:rank"`` strings, from the capability claims the
stress runner asks once per run); None draws from every operation the generators cover.
``value_classes`` draws inputs from the operations' declared value classes (negatives,
limits, subnormals, signed zeros, the zero point, ...: ``generators.values``) rather than
plain uniform values, as the random suite's edge-value examples do.  A candidate the operation's own validation
rejects is dropped, so a graph may hold somewhat fewer operations than asked.  Same seed,
same arguments -> the same model and inputs, on every machine.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnconform.ir import SHORT_TYPE_NAME, Model
from nnconform.ir import OperationType as Op

TYPE_BY_SHORT_NAME = {v: k for k, v in SHORT_TYPE_NAME.items()}

# The two graph sizes of MLTS's random-graph crash tests, scaled to this harness.
GRAPH_SIZES = {"10ops-dims1000": (10, 1000), "600ops-dims10": (600, 10)}


@dataclass
class RandomModel:
    model: Model
    inputs: list[np.ndarray]
    seed: int
    num_ops: int
    max_dim: int
    # per main-graph output: not comparable (e.g. TOPK_V2 indices, whose order on ties NNAPI
    # leaves to the implementation), as the random suite marks them
    ignored: tuple[bool, ...] = ()
    dtype: str = "fp32"
    value_classes: bool = False

    def describe(self) -> str:
        ops = self.model.operation_names()
        return (
            f"{self.dtype}{' value-class' if self.value_classes else ''} graph: "
            f"{len(self.model.main.operations)} ops (dims <= {self.max_dim}), "
            f"{len(self.inputs)} inputs, {len(self.model.main.output_indexes)} outputs: {', '.join(ops)}"
        )


def parse_cells(cells) -> frozenset | None:
    """``["CONV_2D:4", ...]`` -> {(Op.CONV_2D, 4), ...} for GraphConfig.allowed (None stays None)."""
    if cells is None:
        return None
    out = set()
    for c in cells:
        name, _, rank = str(c).rpartition(":")
        out.add((Op[name], int(rank)))
    return frozenset(out)


def random_model(
    seed: int,
    num_ops: int = 10,
    max_dim: int = 1000,
    max_elements: int = 10000,
    dtype: str = "fp32",
    cells=None,
    value_classes: bool = False,
) -> RandomModel:
    if num_ops < 1:
        raise ValueError("num_ops must be >= 1")
    from nnconform.generators.graphs import GraphConfig
    from nnconform.generators.strategies import sample

    if dtype not in TYPE_BY_SHORT_NAME:
        raise ValueError(f"unknown data type {dtype!r} (one of {', '.join(sorted(TYPE_BY_SHORT_NAME))})")
    cfg = GraphConfig(
        dtype=TYPE_BY_SHORT_NAME[dtype],
        n_ops=num_ops,
        rank=None,
        max_dim=max_dim,
        max_elems=max_elements,
        allowed=parse_cells(cells),
    )
    case = sample(cfg, seed, edge=value_classes)
    return RandomModel(case.model, list(case.inputs), seed, num_ops, max_dim, tuple(case.ignored), dtype, value_classes)
