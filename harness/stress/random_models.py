"""Random valid models from a seed, for the random-graph stress tests (MLTS's random-graph
model-load and inference stress).

    rm = random_model(seed=42, num_ops=10, max_dim=1000)
    rm.model, rm.inputs          # a Model that passes validation, one array per input

The graphs come from ``nnconform.generators`` (the same builder the random suite uses with
Hypothesis), driven by a plain seeded drawer: TENSOR_FLOAT32 graphs of ``num_ops`` candidate
operations over every fp32 operation the generators cover, dimensions <= ``max_dim`` and at
most 10,000 elements per freshly drawn operand.  A candidate the operation's own validation
rejects is dropped, so a graph may hold somewhat fewer operations than asked.  Same seed,
same arguments -> the same model and inputs, on every machine.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import Model, OperandType as T

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

    def describe(self) -> str:
        ops = self.model.operation_names()
        return (f"{len(self.model.main.operations)} ops (dims <= {self.max_dim}), "
                f"{len(self.inputs)} inputs, {len(self.model.main.output_indexes)} outputs: {', '.join(ops)}")


def random_model(seed: int, num_ops: int = 10, max_dim: int = 1000, max_elements: int = 10000) -> RandomModel:
    if num_ops < 1:
        raise ValueError("num_ops must be >= 1")
    from ..generators.graphs import GraphConfig
    from ..generators.strategies import sample
    cfg = GraphConfig(dtype=T.TENSOR_FLOAT32, n_ops=num_ops, rank=None, max_dim=max_dim, max_elems=max_elements)
    case = sample(cfg, seed)
    return RandomModel(case.model, list(case.inputs), seed, num_ops, max_dim, tuple(case.ignored))
