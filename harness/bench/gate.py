"""The fall-back gate: how much of a model ran on the driver, and must all of it have?

A partial driver's model is split by the runtime: the operations the driver refuses run on
the CPU.  The bench reports, per model, the operations the driver takes and an *estimated*
share of the time they stand for (an operation's cost is the number of elements it reads and
writes, plus for convolutions and fully-connected layers one multiply-add per output element
per filter element: a model of the work, not a measurement).

``--must-accelerate FILE`` lists what must run wholly on a driver, one rule a line::

    # driver-pattern   model-pattern          [minimum feature level]
    tflite             mobilenet_*
    *                  selfie_segmentation    7

Patterns are shell globs (driver patterns match the ``--driver`` spelling or the device's
name); a rule with a feature level applies only to a driver at that level or newer.  A model
a rule names that the driver does not take whole fails the gate, and its row fails.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from nnconform.ir import Model
from nnconform.ir import OperationType as Op

# Operations whose work is output elements x filter elements (filter = input 1).
_MAC_OPS = {Op.CONV_2D, Op.DEPTHWISE_CONV_2D, Op.FULLY_CONNECTED, Op.TRANSPOSE_CONV_2D, Op.GROUPED_CONV_2D}


def _elements(model: Model, idx: int) -> int:
    o = model.main.operands[idx]
    if o.info.is_scalar:
        return 0
    return int(np.prod([max(int(d), 1) for d in o.dimensions], dtype=np.int64)) if o.dimensions else 1


def operation_costs(model: Model) -> np.ndarray:
    costs = []
    for op in model.main.operations:
        c = sum(_elements(model, i) for i in op.inputs) + sum(_elements(model, i) for i in op.outputs)
        if op.type in _MAC_OPS and len(op.inputs) > 1 and op.outputs:
            w = model.main.operands[op.inputs[1]]
            dims = [max(int(d), 1) for d in w.dimensions] or [1]
            per_out = int(np.prod(dims[1:])) if op.type != Op.DEPTHWISE_CONV_2D else int(np.prod(dims[1:3]))
            c += _elements(model, op.outputs[0]) * per_out
        costs.append(c)
    return np.asarray(costs, dtype=np.float64)


@dataclass
class Share:
    on_driver: int
    total: int
    time_share: float  # estimated, 0..1
    refused: list[str]  # names of the refused operations (with their index)

    @property
    def whole(self) -> bool:
        return self.on_driver == self.total


def share(model: Model, supported: Sequence[bool]) -> Share:
    s = np.asarray([bool(x) for x in supported], dtype=bool)
    costs = operation_costs(model)
    total = float(costs.sum())
    refused = [f"#{k} {model.main.operations[k].name}" for k in np.nonzero(~s)[0]]
    return Share(int(s.sum()), int(s.size), float(costs[s].sum() / total) if total > 0 else float(s.all()), refused)


@dataclass(frozen=True)
class Rule:
    driver: str
    model: str
    min_feature_level: int | None
    line: int

    def applies(self, driver_names: Sequence[str], feature_level: int, model: str) -> bool:
        return (
            any(fnmatch.fnmatchcase(d, self.driver) for d in driver_names)
            and fnmatch.fnmatchcase(model, self.model)
            and (self.min_feature_level is None or feature_level >= self.min_feature_level)
        )


def load_rules(path: str | Path) -> list[Rule]:
    """The rules of a --must-accelerate file; ValueError (one line) on a bad file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"--must-accelerate {p}: cannot read it ({getattr(e, 'strerror', None) or e})") from None
    rules = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].split()
        if not line:
            continue
        if len(line) not in (2, 3):
            raise ValueError(f"--must-accelerate {p}:{n}: want 'DRIVER-PATTERN MODEL-PATTERN [FEATURE-LEVEL]'")
        level = None
        if len(line) == 3:
            if not line[2].isdigit():
                raise ValueError(f"--must-accelerate {p}:{n}: feature level {line[2]!r} is not a number")
            level = int(line[2])
        rules.append(Rule(line[0], line[1], level, n))
    return rules


def check(
    rules: Sequence[Rule], driver_names: Sequence[str], feature_level: int, model: str, got: Share
) -> tuple[str, str]:
    """(verdict, message): PASS, FAIL, or '' when no rule names this driver and model."""
    named = [r for r in rules if r.applies(driver_names, feature_level, model)]
    if not named:
        return "", ""
    where = f"--must-accelerate line {named[0].line}"
    if got.whole:
        return "PASS", f"runs wholly on the driver ({where})"
    return "FAIL", (
        f"falls back: {got.on_driver}/{got.total} operations on the driver (~{got.time_share:.0%} of the work), "
        f"refused {', '.join(got.refused[:5])}{' ...' if len(got.refused) > 5 else ''} ({where})"
    )
