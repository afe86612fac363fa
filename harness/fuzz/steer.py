"""Steering and planning of a fuzz run (issue 47): the budget goes to finding new buckets.

**Plan.**  The first ``len(KINDS)`` cases of a run are one of each case kind (a model from
nothing, then a golden example with each mutation first), so every kind gets its first case
before any gets its second; :func:`plan` says before the run which kinds a budget or a case
count may not reach.

**Steering.**  Every bucket has a trigger: the malformation features (and the case kind, the
mutations) that all its cases so far had in common (nnconform.fuzz.generate.case_features).
A new bucket starts with the features of its first case that its minimal (shrunk) case kept;
each repeat narrows the trigger to what it shares with the repeat, so the trigger converges
on what the bug needs.  A case drawn with every feature of some bucket's trigger is a
*predicted repeat*: it is kept only with probability ``REPEAT_ACCEPT``, else a new case is
drawn for the same index (``MAX_DRAWS`` at most; the last draw is kept); the more
predictions of a bucket have come true, the rarer the exceptions.  The draws and the
keep/reject coin are seeded by the run seed and the case index; with the journal's buckets
and findings, a resumed run steers as the interrupted one did.

A trigger of nothing but the case's origin (``origin:random`` / ``origin:mutate``) says
nothing about the bug and steers nothing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from nnconform.fuzz.generate import KINDS, TracedCase, make_traced_case

# A predicted repeat still runs now and then (the prediction may be wrong): with probability
# REPEAT_ACCEPT / (1 + k)**2, k the predicted repeats of that bucket already run and found
# right.  A prediction confirmed again and again is trusted more: the checks grow like the
# cube root of the draws, not in proportion (a known hang costs a driver host restart every
# time; at 5% / (1 + k) a 10-minute run still spent 30% of its budget on them).
REPEAT_ACCEPT = 0.05
MAX_DRAWS = 24


def draw_seed(run_seed: int, index: int, attempt: int) -> int:
    """The case seed of draw ``attempt`` for case ``index`` (draw 0: the historical case seed)."""
    text = f"nnconform-fuzz:{run_seed}:{index}" + (f":{attempt}" if attempt else "")
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def kind_of_index(index: int) -> str | None:
    """The kind forced on case ``index`` by the plan (its first round), else None (drawn)."""
    return KINDS[index] if 0 <= index < len(KINDS) else None


def plan(budget_s: float | None, max_cases: int | None, case_bound_s: float) -> dict:
    """The first round of a run: every kind once, in KINDS order; and the kinds whose first
    case may not fit.  ``case_bound_s`` is what one case can cost at worst before the next one
    starts (a call bound and a driver host restart): with a wall-clock budget, the kinds from
    ``budget // case_bound`` on may not be reached; with a case count, those past it are not."""
    kinds = list(KINDS)
    if max_cases is not None:
        sure = min(len(kinds), max(0, int(max_cases)))
    elif budget_s is not None and case_bound_s > 0:
        sure = min(len(kinds), int(budget_s // case_bound_s))
    else:
        sure = len(kinds)
    return {"first_round": kinds, "case_bound_s": round(case_bound_s, 3), "may_not_fit": kinds[sure:]}


@dataclass
class Draw:
    case: TracedCase
    attempt: int  # the draw kept (0: the first)
    rejected: int  # predicted repeats drawn and put back before it
    predicted: str | None  # the bucket key the kept case is predicted to repeat, if any


def _informative(trigger: frozenset) -> bool:
    return any(not f.startswith("origin:") for f in trigger)


@dataclass
class Steering:
    triggers: dict = field(default_factory=dict)  # bucket key -> frozenset of features
    enabled: bool = True
    confirmed: dict = field(default_factory=dict)  # bucket key -> predicted repeats run and found right

    def confirm(self, key: str) -> None:
        """A case predicted to repeat bucket ``key`` did."""
        self.confirmed[key] = self.confirmed.get(key, 0) + 1

    def learn(self, key: str, features) -> None:
        """A case of bucket ``key`` had ``features``: the trigger keeps what they share."""
        feats = frozenset(features)
        old = self.triggers.get(key)
        self.triggers[key] = feats if old is None else old & feats

    def predicts(self, features: frozenset) -> str | None:
        """The known bucket whose whole trigger ``features`` has (the most specific one)."""
        best, size = None, -1
        for key, trig in self.triggers.items():
            if _informative(trig) and trig <= features and len(trig) > size:
                best, size = key, len(trig)
        return best

    def draw(self, run_seed: int, index: int) -> Draw:
        kind = kind_of_index(index)
        coin = np.random.default_rng([int(run_seed) & (2**63 - 1), int(index), 47])
        rejected = 0
        for attempt in range(MAX_DRAWS):
            case = make_traced_case(draw_seed(run_seed, index, attempt), kind)
            predicted = self.predicts(case.features) if self.enabled else None
            keep = REPEAT_ACCEPT / (1 + self.confirmed.get(predicted, 0)) ** 2
            if predicted is None or coin.random() < keep or attempt == MAX_DRAWS - 1:
                return Draw(case, attempt, rejected, predicted)
            rejected += 1
        raise AssertionError("unreachable: the last draw is always kept")

    def as_json(self) -> dict:
        return {k: sorted(v) for k, v in self.triggers.items()}


__all__ = ["Draw", "Steering", "draw_seed", "kind_of_index", "plan", "REPEAT_ACCEPT", "MAX_DRAWS"]
