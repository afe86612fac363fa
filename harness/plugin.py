"""The nnconform pytest plugin (registered under ``pytest11``).

Options: ``--driver`` (entry-point name or module:attribute), ``--nn-seed``, ``--nn-report-dir``,
``--nn-vectors``.  Fixtures: ``nn_device`` (the loaded driver), ``nn_session`` and
``nn_record`` (a dict a suite test fills with operations, data types, spec path...).  Every
test that uses ``nn_record`` becomes one result row, appended to ``results.jsonl`` as soon as
it finishes; at the end of the session ``results.csv`` and ``report.html`` are written.
"""
from __future__ import annotations

import datetime as _dt
import json
import random
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from . import __version__

_SESSION_KEY = pytest.StashKey["NnSession"]()
_PHASES_KEY = pytest.StashKey[dict]()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("nnconform", "nnconform driver conformance")
    g.addoption("--driver", default="reference",
                help="driver under test: an installed name (see `nnconform drivers`) or module:attribute")
    g.addoption("--nn-seed", type=int, default=None, help="seed for everything random (default: new, printed)")
    g.addoption("--nn-report-dir", default="nnconform-report", help="where results and reports go")
    g.addoption("--nn-vectors", default=None,
                help="directory of AOSP golden vectors (default: $NNCONFORM_VECTORS or ../shared/aosp_vectors)")
    g.addoption("--nn-hypothesis-profile", default="default", choices=("ci", "default", "nightly"),
                help="Hypothesis profile of the random suite: ci (small, derandomised), default, "
                     "nightly (many examples, no deadline)")
    g.addoption("--nn-max-examples", type=int, default=None,
                help="random suite: examples per test (overrides the profile's count)")


class NnSession:
    """Per-run state: the driver, the seed, the results journal."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.driver_spec: str = config.getoption("driver")
        seed = config.getoption("nn_seed")
        self.seed: int = seed if seed is not None else random.SystemRandom().randrange(2**31)
        self.report_dir = Path(config.getoption("nn_report_dir")).resolve()
        self.vectors_option = config.getoption("nn_vectors")
        self._device = None
        self._writer = None
        self.rows = 0
        self.started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")

    # driver -------------------------------------------------------------------------
    @property
    def device(self):
        if self._device is None:
            from .loader import load_driver
            from .errors import DriverLoadError
            try:
                self._device = load_driver(self.driver_spec)
            except DriverLoadError as e:
                pytest.exit(f"nnconform: {e}", returncode=4)
        return self._device

    @property
    def driver_name(self) -> str:
        return getattr(self._device, "name", None) or self.driver_spec

    # results --------------------------------------------------------------------------
    def meta(self) -> dict:
        # human-readable keys: the HTML report shows them as they are
        return {"driver": self.driver_spec, "seed": self.seed, "harness version": __version__,
                "started": self.started, "python": sys.version.split()[0]}

    def write_row(self, record) -> None:
        from .results import ResultsWriter
        if self._writer is None:
            self.report_dir.mkdir(parents=True, exist_ok=True)
            path = self.report_dir / "results.jsonl"
            if path.exists():
                path.unlink()  # a new run starts a new journal
            (self.report_dir / "run.json").write_text(json.dumps(self.meta(), indent=1))
            self._writer = ResultsWriter(path)
        self._writer.write(record)
        self.rows += 1

    def failure_dir(self) -> Path:
        d = self.report_dir / "failures"
        d.mkdir(parents=True, exist_ok=True)
        return d

    def dump_failure(self, test_id: str, model, inputs, expected, outcome, *, ignored=None,
                     expect_failure: bool = False, extra_meta: dict | None = None) -> tuple[str, str]:
        """Write a replayable spec for a failed case; returns (path, replay command)."""
        from .spec import SpecExample, SpecFile, dump_spec
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", test_id).strip("_")[:150]
        path = self.failure_dir() / f"{safe}.spec.json"
        meta = {"seed": self.seed, "driver": self.driver_spec, "harness_version": __version__,
                "test_id": test_id, "message": outcome.message, "stage": outcome.stage}
        if outcome.comparison is not None:
            meta["criterion"] = outcome.comparison.to_dict()
        if outcome.actual is not None:
            meta["actual_outputs"] = list(outcome.actual)   # spec.dump_spec encodes arrays
        meta.update(extra_meta or {})
        replay = f"nnconform replay {shlex.quote(str(path))} --driver {shlex.quote(self.driver_spec)}"
        meta["replay"] = replay
        ex = SpecExample("case", list(inputs), list(expected), tuple(ignored or ()), expect_failure)
        dump_spec(SpecFile(model, [ex], meta), path)
        return str(path), replay

    def conclude(self, record: dict, outcome, *, test_id: str, model, inputs, expected, ignored=None,
                 expect_failure: bool = False) -> None:
        """Turn a runner outcome into pytest's verdict (and a dumped spec on failure)."""
        record["message"] = outcome.message
        if outcome.outcome == "SKIP":
            pytest.skip(outcome.message)
        if outcome.outcome in ("FAIL", "ERROR"):
            try:
                record["spec_path"], record["replay"] = self.dump_failure(
                    test_id, model, inputs, expected, outcome, ignored=ignored, expect_failure=expect_failure)
            except Exception as e:  # the verdict matters more than the dump; say why it is missing
                record["message"] += f" (spec dump failed: {type(e).__name__}: {e})"
            pytest.fail(record["message"] + (f"\n  replay: {record['replay']}" if record.get("replay") else ""),
                        pytrace=False)


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_SESSION_KEY] = NnSession(config)
    config.addinivalue_line("markers", "nnconform: a conformance case recorded as a result row")


def pytest_report_header(config: pytest.Config) -> list[str]:
    s = config.stash[_SESSION_KEY]
    return [f"nnconform {__version__}: driver {s.driver_spec}, seed {s.seed} "
            f"(replay with --nn-seed {s.seed}), report dir {s.report_dir}"]


@pytest.fixture(scope="session")
def nn_session(request: pytest.FixtureRequest) -> NnSession:
    return request.config.stash[_SESSION_KEY]


@pytest.fixture(scope="session")
def nn_device(nn_session: NnSession):
    return nn_session.device


@pytest.fixture
def nn_record(request: pytest.FixtureRequest) -> dict:
    rec: dict[str, Any] = {"suite": "", "operations": [], "data_types": [], "spec_path": "",
                           "message": "", "replay": "", "extra": {}}
    request.node.stash[_PHASES_KEY] = {"record": rec, "reports": []}
    return rec


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    report = outcome.get_result()
    phases = item.stash.get(_PHASES_KEY, None)
    if phases is None:
        if "nn_record" not in getattr(item, "fixturenames", ()):
            return
        # setup failed before the fixture ran: still record the case
        phases = {"record": {"suite": "", "operations": [], "data_types": [], "spec_path": "",
                             "message": "", "replay": "", "extra": {}}, "reports": []}
        item.stash[_PHASES_KEY] = phases
    phases["reports"].append(report)
    if report.when == "teardown":
        _write_item_row(item, phases)


def _crash_line(report) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return crash.message.splitlines()[0]
    if isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:  # skip: (file, line, reason)
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    return str(report.longrepr).splitlines()[-1] if report.longrepr else ""


def _write_item_row(item: pytest.Item, phases: dict) -> None:
    from .results import ResultRecord
    session: NnSession = item.config.stash[_SESSION_KEY]
    rec = phases["record"]
    outcome, message = "PASS", rec.get("message", "")
    for r in phases["reports"]:
        if r.when == "setup" and r.failed:
            outcome, message = "ERROR", _crash_line(r)
            break
        if r.skipped:
            outcome, message = "SKIP", message or _crash_line(r)
            break
        if r.when == "call" and r.failed:
            outcome, message = "FAIL", message or _crash_line(r)
            break
        if r.when == "teardown" and r.failed:
            outcome, message = "ERROR", _crash_line(r)
    suite = rec.get("suite") or Path(str(item.fspath)).stem.removeprefix("test_")
    duration = sum(r.duration for r in phases["reports"])
    session.write_row(ResultRecord(
        suite=suite, test_id=rec.get("test_id") or item.name, driver=session.driver_name,
        operations=list(rec.get("operations", [])), data_types=list(rec.get("data_types", [])),
        outcome=outcome, duration_s=round(duration, 6), seed=session.seed,
        spec_path=rec.get("spec_path", ""), message=message, replay=rec.get("replay", ""),
        extra=rec.get("extra", {})))


def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    s: NnSession = session.config.stash[_SESSION_KEY]
    if s.rows:
        from .reports import build_reports
        # The coverage table describes the reference executor; show it on reference runs.
        s.reports = build_reports(s.report_dir, meta=s.meta(), with_coverage=s.driver_spec == "reference")


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    s: NnSession = config.stash[_SESSION_KEY]
    if s.rows and getattr(s, "reports", None):
        csv_path, html_path = s.reports
        terminalreporter.write_line(f"nnconform: {s.rows} results (seed {s.seed}) -> {csv_path}, {html_path}")
