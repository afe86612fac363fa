"""Hypothesis profiles of the random suite.

    ci       small and derandomised: the same draws on every run (a fixed function seed)
    default  the everyday run, drawing from the session seed (--nn-seed)
    nightly  many examples, no deadline

``--nn-hypothesis-profile`` picks one, ``--nn-max-examples`` overrides its example count.
The example database (failures found earlier are replayed first) lives in the report
directory, ``<report dir>/hypothesis``; the ci profile keeps none.
"""

from __future__ import annotations

import datetime
from pathlib import Path

from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase

# (examples for single-operation tests, examples for graph tests)
EXAMPLES = {"ci": (4, 3), "default": (25, 15), "nightly": (500, 200)}
DEADLINE = {"ci": None, "default": datetime.timedelta(seconds=20), "nightly": None}
PROFILES = tuple(EXAMPLES)

_SUPPRESS = [
    HealthCheck.too_slow,
    HealthCheck.filter_too_much,
    HealthCheck.data_too_large,
    HealthCheck.differing_executors,
]


def settings_for(
    profile: str, *, graph: bool, max_examples: int | None = None, report_dir: str | Path | None = None
) -> settings:
    if profile not in EXAMPLES:
        raise ValueError(f"unknown Hypothesis profile {profile!r} (choose from {', '.join(PROFILES)})")
    n = max_examples if max_examples is not None else EXAMPLES[profile][1 if graph else 0]
    db = None
    if profile != "ci" and report_dir is not None:
        db = DirectoryBasedExampleDatabase(str(Path(report_dir) / "hypothesis"))
    return settings(
        max_examples=n,
        deadline=DEADLINE[profile],
        derandomize=profile == "ci",
        database=db,
        suppress_health_check=_SUPPRESS,
        report_multiple_bugs=False,
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
        print_blob=False,
    )
