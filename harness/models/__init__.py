"""Real models for the benchmark and the models suite: the built-in MobileNet-like networks
(no download) and the fetched mediapipe zoo (imported from .tflite on use).

    entries = available_models()            # name -> ModelEntry, built-ins first
    e = entries["mobilenet_v2_quant8"]
    model = e.load(); inputs = e.inputs(seed)
"""

from __future__ import annotations

import functools
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from nnconform.ir import Model
from nnconform.models import builtin, zoo


@dataclass
class ModelEntry:
    name: str
    kind: str  # "builtin" or "zoo"
    classifier: bool  # output 0 is a class-probability vector (top-k agreement)
    source: str
    _load: Callable[[], Model]
    _inputs: Callable[[Model, int], list[np.ndarray]]
    _model: Model | None = None

    def load(self) -> Model:
        if self._model is None:
            self._model = self._load()
        return self._model

    def inputs(self, seed: int) -> list[np.ndarray]:
        return self._inputs(self.load(), seed)


def input_seed(run_seed: int, name: str) -> int:
    """The seed of a model's inputs in a models-suite run of seed ``run_seed``: each model
    gets its own, so that adding a model to the zoo changes no other model's inputs."""
    return (run_seed ^ zlib.crc32(name.encode())) & 0x7FFFFFFF


def builtin_entries() -> dict[str, ModelEntry]:
    out = {}
    for arch in builtin.ARCHITECTURES:
        for dt in builtin.DATA_TYPES:
            out[f"{arch}_{dt}"] = ModelEntry(
                f"{arch}_{dt}",
                "builtin",
                True,
                f"built-in ({arch}, {dt}, seed {builtin.SEED})",
                functools.partial(builtin.build, arch, dt),
                builtin.example_inputs,
            )
    return out


def _zoo_loader(path: Path) -> Callable[[], Model]:
    def load() -> Model:
        from nnconform.cases.tflite_import import import_tflite

        return import_tflite(path).model

    return load


def _zoo_inputs(model: Model, seed: int) -> list[np.ndarray]:
    from nnconform.cases.tflite_import import seeded_inputs

    return seeded_inputs(model, seed)


def zoo_entries(root: Path | None = None) -> dict[str, ModelEntry]:
    return {
        name: ModelEntry(name, "zoo", False, f"{zoo.ZOO_NAME}/{path.name}", _zoo_loader(path), _zoo_inputs)
        for name, path in sorted(zoo.cached_models(root).items())
    }


def available_models(root: Path | None = None) -> dict[str, ModelEntry]:
    return {**builtin_entries(), **zoo_entries(root)}
