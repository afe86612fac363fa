"""Hand-checked examples for the generated suite (CTS "TestGenerated").

One module per operation family defines ``EXAMPLES: list[Example]``.  Expected outputs are
worked out by hand (or by an independent one-line numpy formula written in the example), never
by running the reference executor: these examples are what keeps the executor honest.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from nnconform.ir import Model


@dataclass(frozen=True, eq=False)
class Example:
    name: str  # unique, used in the test id: "add_broadcast_quant8"
    model: Model
    # one per main-graph input, stored representation (a scalar operand's may be a numpy scalar)
    inputs: Sequence[np.ndarray | np.generic]
    outputs: Sequence[np.ndarray]  # expected, one per main-graph output
    expect_failure: bool = False  # the model is invalid or execution must fail
    note: str = ""  # how the expected values were derived
    # outputs whose values NNAPI leaves undefined (LSTM's scratch buffer: CTS ignores it too);
    # the expected values stay, for the reference's own tests, but a driver is not held to them
    ignored: Sequence[bool] | None = None

    @property
    def operations(self) -> list[str]:
        return self.model.operation_names()

    @property
    def data_types(self) -> list[str]:
        return self.model.data_types()


def all_examples() -> list[Example]:
    out: list[Example] = []
    seen: dict[str, str] = {}
    for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        mod = importlib.import_module(f"{__name__}.{m.name}")
        for ex in getattr(mod, "EXAMPLES", []):
            if ex.name in seen:
                raise RuntimeError(f"example name {ex.name!r} used twice ({seen[ex.name]} and {m.name})")
            seen[ex.name] = m.name
            out.append(ex)
    return out
