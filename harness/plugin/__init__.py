"""The nnconform pytest plugin (registered under ``pytest11``).

Options: ``--driver`` (entry-point name or module:attribute), ``--nn-seed``, ``--nn-report-dir``,
``--nn-vectors``, ``--nn-variants``, ``--nn-in-process``, ``--nn-call-timeout``, ``--nn-mem-limit``,
``--nn-resume``.  Fixtures: ``nn_device`` (the driver under test), ``nn_session`` and
``nn_record`` (a dict a suite test fills with operations, data types, spec path...).

The driver runs in a driver host process (nnconform.isolation.proxy), one per pytest process (so one
per xdist worker); ``nn_device`` is the proxy.  ``--nn-in-process`` loads it into this process
instead, for debugging a driver under pdb.

Every test that uses ``nn_record`` becomes one result row, appended to ``results.jsonl`` as
soon as it finishes (xdist workers append to the same journal).  The row's outcome is CRASH or
HANG when the driver host died or hung during the test, whatever the test itself concluded.
The controlling process owns the report directory: it locks it, moves an earlier run's
results to ``previous/``, keeps ``run.json``'s status (running / complete / interrupted) and
writes ``results.csv`` and ``report.html`` at the end, also after Ctrl-C.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import gc
import os
import random
import re
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pytest

from nnconform import __version__
from nnconform.cli.options import add_pytest_options
from nnconform.plugin import cells as _cells
from nnconform.verdict.outcome import ExitStatus, Outcome

if TYPE_CHECKING:
    from nnconform.artifacts.reportdir import ReportDir
    from nnconform.ir import OperationType
    from nnconform.isolation.proxy import IsolatedDevice
    from nnconform.verdict.results import ResultRecord, ResultsWriter
    from nnconform.verdict.runner import Case, CaseOutcome

_SESSION_KEY = pytest.StashKey["NnSession"]()
_PHASES_KEY = pytest.StashKey[dict]()
_MARK_KEY = pytest.StashKey[int]()
MESSAGE_LIMIT = 2000


def host_options(call_timeout: float | None, mem_limit: int | None) -> tuple[float, int]:
    """A driver host's call bound and memory limit from their parsed options (None: the shared
    option table's defaults).  One rule for the run's session and for the command line, which
    hands the session the host it checked the driver in only when both give the same
    (nnconform.isolation.proxy.claim)."""
    from nnconform.cli.options import OPTIONS

    return (
        float(call_timeout if call_timeout is not None else OPTIONS["--call-timeout"].default),
        int(mem_limit if mem_limit is not None else OPTIONS["--mem-limit"].default),
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("nnconform", "nnconform driver conformance")
    # --driver, --nn-report-dir, --nn-seed, --nn-call-timeout, --nn-mem-limit, --nn-resume and
    # --nn-in-process: the shared option table's entries, parsed by the same functions as the CLI's.
    add_pytest_options(g)
    g.addoption(
        "--nn-vectors",
        default=None,
        help="directory of AOSP golden vectors (default: $NNCONFORM_VECTORS or the bundled copy)",
    )
    g.addoption(
        "--nn-hypothesis-profile",
        default="default",
        choices=("ci", "default", "nightly"),
        help="Hypothesis profile of the random suite: ci (small, derandomised), default, "
        "nightly (many examples, no deadline)",
    )
    g.addoption(
        "--nn-max-examples",
        type=int,
        default=None,
        help="random suite: examples per test (overrides the profile's count)",
    )
    g.addoption(
        "--nn-expected-failures",
        default=None,
        metavar="FILE",
        help="JSON file of test-id patterns the driver is expected to fail, with reasons "
        "(nnconform.verdict.expectations): those cases are XFAIL; one that passes is XPASS and "
        "fails the run unless marked non-strict",
    )
    g.addoption(
        "--nn-last-failed",
        action="store_true",
        help="run only the cases that failed (FAIL, ERROR, CRASH, HANG, XPASS) in the last run "
        "recorded in the report directory (all of them if none failed)",
    )
    g.addoption(
        "--nn-failed-first",
        action="store_true",
        help="run the cases that failed in the last run recorded in the report directory first",
    )
    g.addoption(
        "--nn-history",
        default=None,
        metavar="DIR",
        help="append this run's summary to DIR/history.jsonl; the report shows the trend",
    )
    g.addoption(
        "--nn-only-supported",
        action="store_true",
        help="run only the cases whose every operation the driver claims in "
        "supported_operations (and the invalid-model cases it must reject); the rest are "
        "deselected, not recorded as SKIP rows",
    )
    g.addoption(
        "--nn-progress",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="print cases done, elapsed time and an estimate of the time left every SECONDS (default 30; 0: never)",
    )
    g.addoption(
        "--nn-no-partition",
        "--no-partition",
        action="store_true",
        dest="nn_no_partition",
        help="skip a case unless the driver supports every operation of it (default: run "
        "the supported operations on the driver, the rest on the reference, partitioned)",
    )
    g.addoption(
        "--nn-no-probe",
        "--no-probe",
        action="store_true",
        dest="nn_no_probe",
        help="no capability probe at the start of the run (nnconform.cases.probe), and the random "
        "suite draws from every operation, not only those the driver claims",
    )
    g.addoption(
        "--nn-variants",
        default="rotate",
        metavar="MODE",
        help="the vectors suite's execution matrix (nnconform.cases.variants): rotate (default: each "
        "vector runs plain sync plus one variant chosen from the seed and the vector), all "
        "(the full matrix), none (plain sync only), or a comma list of kinds, e.g. "
        "general,dynamic_shape",
    )
    g.addoption(
        "--nn-selection",
        default=None,
        metavar="JSON",
        help="(set by `nnconform run`) the suites and pytest arguments the run was started "
        "with, recorded in run.json so that --resume runs the same cases",
    )
    g.addoption(
        "--nn-exhaustive",
        default="quick",
        choices=("quick", "full"),
        help="the exhaustive suite's tier: quick (default: seconds) or full (the whole grid and "
        "every fp16 pair; `nnconform run --suite exhaustive` sets it)",
    )
    g.addoption(
        "--nn-max-skip-ratio",
        type=float,
        default=None,
        help="fail the run when more than this share (0..1) of its cases SKIP: a run that tests nothing is not a pass",
    )


def _resumed_seed(report_dir: Path) -> int | None:
    """The seed of the run --nn-resume continues, known before collection: the vectors
    variants a run selects depend on it.  Problems with the file are reported later, when the
    report directory is opened."""
    import json

    from nnconform.artifacts.reportdir import STATUS_FILE

    try:
        seed = json.loads((report_dir / STATUS_FILE).read_text(encoding="utf-8")).get("seed")
    except (OSError, ValueError, AttributeError):
        return None
    return seed if isinstance(seed, int) else None


class NnSession:
    """Per-process state: the driver, the seed, the results journal."""

    # Set only at the end of a run (pytest_sessionfinish and its helpers), read with getattr
    # where they may be missing; declared here for the type checker alone.
    status_line: str
    final_status: str
    final_counts: dict[str, int]
    rows_read: list[ResultRecord]
    summary_path: Path
    reports: tuple[Path, Path]
    skip_gate: str
    digest_done = False  # the digest is printed once (terminal summary and the interrupt path)
    probe_ops: list[OperationType] | None = None  # the operations the auto probe covers (None: all)
    cell_plan: Any = None  # xdist: the first worker's planned cases by suite (nnconform.plugin.cells)
    exit_status: ExitStatus

    def __init__(self, config: pytest.Config):
        self.config = config
        # A relative driver file path is made absolute in the process that parsed it and
        # written back, so xdist workers (sent the controller's options) and cluster workers
        # load the same file.
        from nnconform.driver.loader import resolve_driver_spec

        self.driver_spec: str = resolve_driver_spec(config.getoption("driver"))
        config.option.driver = self.driver_spec
        self.workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
        self.is_worker = self.workerinput is not None
        self.report_dir = Path(config.getoption("nn_report_dir")).resolve()
        self.vectors_option = config.getoption("nn_vectors")
        self.in_process: bool = bool(config.getoption("nn_in_process"))
        try:
            self.call_timeout, self.mem_limit = host_options(
                config.getoption("nn_call_timeout"), config.getoption("nn_mem_limit")
            )
        except ValueError as e:
            raise pytest.UsageError(f"--nn-mem-limit: {e}") from None
        if self.call_timeout <= 0:
            raise pytest.UsageError("--nn-call-timeout must be > 0 seconds")
        from nnconform.cases.variants import parse_mode

        try:
            self.variants = parse_mode(config.getoption("nn_variants"))
        except ValueError as e:
            raise pytest.UsageError(f"--nn-variants: {e}") from None
        self.resume: bool = bool(config.getoption("nn_resume"))
        self.expectations = []
        xf = config.getoption("nn_expected_failures")
        if xf:
            from nnconform.verdict.expectations import ExpectationsError, load_expectations

            try:
                self.expectations = load_expectations(xf)
            except ExpectationsError as e:
                raise pytest.UsageError(f"--expected-failures: {e}") from None
        self.done_nodeids: set[str] = set()
        self.last_failed: list[str] | None = None  # node ids that failed in the last run
        self.previous: Path | None = None
        self.planned: int | None = None
        self.not_claimed = 0  # cases --nn-only-supported deselected (this process)
        self.warnings: list[str] = []  # printed before the digest at the end of the run
        # A cluster worker's batch (nnconform.cluster): test function -> the parameter ids it
        # runs, so a suite with thousands of cases builds only those; None: all.
        self.only_ids: dict[str, set[str]] | None = None
        seed = config.getoption("nn_seed")
        if self.workerinput is not None:  # the same test as self.is_worker
            seed = self.workerinput.get("nn_seed", seed)
            self.done_nodeids = set(self.workerinput.get("nn_done", ()))
            lf = self.workerinput.get("nn_last_failed")
            self.last_failed = list(lf) if lf is not None else None
        if seed is None and self.resume and not self.is_worker:
            seed = _resumed_seed(self.report_dir)
        self.seed: int = seed if seed is not None else random.SystemRandom().randrange(2**31)
        # The driver: a Device, or (isolated, the default) an IsolatedDevice that also answers
        # incidents / busy_calls / liveness; Any because which one is known only at run time.
        self._device: Any = None
        self._claims: Any = None
        self.capability_text = ""
        # How far the run got, for a report of a run stopped early: "collection", "probe"
        # (the capability probe, during collection), "cases", "report writing".
        self.stage = "collection"
        self._writer: ResultsWriter | None = None
        self._reportdir: ReportDir | None = None
        self.rows = 0
        self.started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")

    # report directory (controlling process only) -----------------------------------------
    def open_report_dir(self, probe: bool = True) -> None:
        """Lock the report directory, move an earlier run's results aside (or, resuming, read
        which cases are done) and mark the run as running, then (``probe``) run the capability
        probe.  Idempotent."""
        from nnconform.artifacts.reportdir import ReportDirError, acquire
        from nnconform.verdict.results import read_results

        if self._reportdir is not None:
            return
        try:
            self._reportdir = acquire(self.report_dir)
            if self.resume:
                try:
                    status = self._reportdir.read_status()
                except (OSError, ValueError) as e:
                    raise ReportDirError(f"--resume: no run to resume in {self.report_dir} ({e})") from None
                if status.get("driver") and status["driver"] != self.driver_spec:
                    raise ReportDirError(
                        f"--resume: {self.report_dir} holds a run of driver "
                        f"{status['driver']!r}, not {self.driver_spec!r}"
                    )
                if self.config.getoption("nn_seed") is None and isinstance(status.get("seed"), int):
                    self.seed = status["seed"]
                self.started = str(status.get("started", self.started))
                journal = self.report_dir / "results.jsonl"
                if journal.is_symlink():
                    raise ReportDirError(f"--resume: {journal} is a symbolic link (not followed)")
                if journal.exists():
                    self.done_nodeids = {
                        str(r.extra.get("nodeid")) for r in read_results(journal) if r.extra.get("nodeid")
                    }
            else:
                self.previous = self._reportdir.rotate()
                if self.config.getoption("nn_last_failed") or self.config.getoption("nn_failed_first"):
                    self.last_failed = self._failed_in(self.previous)
            self.write_status("running")
            if probe:
                self.auto_probe()
        except ReportDirError as e:
            raise pytest.UsageError(str(e)) from None
        except ValueError as e:  # a damaged journal or run.json
            raise pytest.UsageError(f"--resume: {e}") from None
        except OSError as e:
            from nnconform.artifacts.reportdir import describe_os_error

            raise pytest.UsageError(describe_os_error(e, self.report_dir)) from None

    @staticmethod
    def _failed_in(run_dir: Path | None) -> list[str]:
        """Node ids whose last row in ``run_dir``'s journal is a failure."""
        from nnconform.verdict.results import BAD_OUTCOMES, read_results

        journal = None if run_dir is None else run_dir / "results.jsonl"
        if journal is None or not journal.is_file() or journal.is_symlink():
            return []
        latest: dict[str, str] = {}
        for r in read_results(journal):
            if r.extra.get("nodeid"):
                latest[str(r.extra["nodeid"])] = r.outcome
        return sorted(n for n, o in latest.items() if o in BAD_OUTCOMES)

    def write_status(self, status: str, done: int | None = None, exit_status: int | None = None) -> None:
        if self._reportdir is None:
            return
        meta = dict(
            self.meta(),
            command="run",
            status=status,
            planned=self.planned,
            done=done,
            driver=self.driver_spec,
            seed=self.seed,
            started=self.started,
            exit_status=exit_status,
        )
        self._reportdir.write_status(meta)

    def close_writer(self) -> None:
        """Close the journal (its last rows fsynced).  An error here is reported, not raised:
        every row is already written."""
        writer, self._writer = self._writer, None
        if writer is not None:
            try:
                writer.close()
            except OSError as e:
                from nnconform.artifacts.reportdir import describe_os_error

                self.status_line = f"nnconform: {describe_os_error(e, self.report_dir / 'results.jsonl')}"

    def close_report_dir(self) -> None:
        from nnconform.artifacts.reportdir import release

        if self._reportdir is not None:
            release(self._reportdir)
            self._reportdir = None

    # driver -------------------------------------------------------------------------
    @property
    def device(self):
        if self._device is None:
            from nnconform.errors import DriverLoadError

            try:
                if self.in_process:
                    from nnconform.driver.loader import load_driver

                    self._device = load_driver(self.driver_spec)
                else:
                    from nnconform.isolation.proxy import claim, open_isolated

                    self._device = claim(self.driver_spec, self.call_timeout, self.mem_limit) or open_isolated(
                        self.driver_spec, call_timeout=self.call_timeout, mem_limit=self.mem_limit
                    )
            except DriverLoadError as e:
                pytest.exit(f"nnconform: {e}", returncode=2)
        return self._device

    def auto_probe(self) -> None:
        """At the start of a run: the capability matrix of this driver, from the report
        directory's cache (same driver files, version and probe settings) or probed now, each
        call bounded by --probe-timeout, a crashing or hanging operation quarantined
        (nnconform.cases.probe).  Off with --no-probe or NNCONFORM_AUTO_PROBE=0 (the harness's
        own tests set it: a full probe costs 20-30 s); --reprobe ignores the cache."""
        if self.config.getoption("nn_no_probe", False) or os.environ.get("NNCONFORM_AUTO_PROBE", "1") == "0":
            return
        from nnconform.cases.probe import CRASH, HANG, OVER, UNDER, CapabilityCache, summary_text

        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        say = tr.write_line if tr is not None else (lambda line: None)
        self.stage = "probe"
        self.write_status("running: capability probe")
        cache = CapabilityCache(
            self.device,
            self.report_dir,
            driver_spec=self.driver_spec,
            call_timeout=self.config.getoption("nn_probe_timeout", None),
            fresh=bool(self.config.getoption("nn_reprobe", False)),
        )
        complete = cache.ensure_needed(getattr(self, "probe_ops", None)) == 0
        say(
            f"nnconform: capability matrix of {cache.name} {cache.version}: {cache.path}"
            + (f" ({cache.stale})" if cache.stale and not complete else "")
            + ("" if complete else f" (probing now, each call bounded by {cache.call_timeout:g} s)")
            + (f" (made {cache.created})" if complete and cache.created else "")
        )
        from nnconform.cli import ProbeProgress

        try:
            cache.ensure(self.probe_ops, progress=ProbeProgress(say))
        except KeyboardInterrupt:
            # the report of the stopped run says how far the probe got (cells kept in the file)
            self.capability_text = f"probe stopped after {len(cache.cells)} cells ({cache.path.name})"
            raise
        data = cache.data()
        s = data["summary"]
        bad = [f"{c['operation']} {c['data_type']} rank {c['rank']}" for c in data["cells"] if c["status"] == OVER]
        stuck = [
            f"{c['operation']} {c['data_type']} ({c['incident']})"
            for c in data["cells"]
            if c["status"] in (CRASH, HANG)
        ]
        self.capability_text = (
            summary_text(s)
            + f" ({cache.path.name}"
            + (f", made {cache.created}" if cache.created else "")
            + (f"; over-claims: {', '.join(bad[:8])}" if bad else "")
            + (f"; crashed or hung in the probe: {', '.join(stuck[:8])}" if stuck else "")
            + ")"
        )
        say(f"nnconform: capabilities: {self.capability_text}")
        if s[UNDER]:
            say(f"nnconform: {s[UNDER]} under-claimed cell(s): see {cache.path.parent / 'capabilities.md'}")
        self.stage = "collection"

    def claims(self):
        """What the driver claims per operation x type x rank (nnconform.cases.probe.ClaimCache),
        asked lazily; None under --no-probe (generators then draw from every operation)."""
        if self.config.getoption("nn_no_probe", False):
            return None
        if self._claims is None:
            from nnconform.cases.probe import ClaimCache

            self._claims = ClaimCache(self.device)
        return self._claims

    @property
    def isolated(self) -> bool:
        return self._device is not None and getattr(self._device, "isolated", False)

    @property
    def driver_name(self) -> str:
        return getattr(self._device, "name", None) or self.driver_spec

    def isolation_text(self) -> str:
        if self.in_process:
            return "in-process (--nn-in-process: no driver host, no crash/hang protection)"
        limit = f"{self.mem_limit / 2**30:g} GiB" if self.mem_limit else "none"
        return f"driver host per test process; call bound {self.call_timeout:g} s; memory limit {limit}"

    def close_device(self) -> None:
        dev, self._device = self._device, None
        from nnconform.cases.variants import forget_shared

        forget_shared()  # nothing may hold this device's prepared models past its close
        if dev is not None and hasattr(dev, "close") and getattr(dev, "isolated", False):
            dev.close()

    # results --------------------------------------------------------------------------
    def meta(self) -> dict:
        # human-readable keys: the HTML report shows them as they are
        meta = {
            "driver": self.driver_spec,
            "seed": self.seed,
            "harness version": __version__,
            "started": self.started,
            "python": sys.version.split()[0],
            "isolation": self.isolation_text(),
            **({"capabilities": self.capability_text} if self.capability_text else {}),
            "partitioning": "off (--no-partition)"
            if self.config.getoption("nn_no_partition", False)
            else "on (partly supported cases run partitioned)",
            "vectors variants": self.variants if isinstance(self.variants, str) else ",".join(sorted(self.variants)),
        }
        meta.update(self.selection_meta())
        if self.config.getoption("nn_only_supported"):
            meta["selection"] = "only the cases the driver claims (--only-supported); the rest were not run"
        return meta

    def selection_meta(self) -> dict:
        """What `nnconform run` chose (suites, vectors directory, arguments after ``--``), under
        the run.json keys --resume reads back (nnconform.cli.recorded_selection)."""
        import json
        import shlex

        text = self.config.getoption("nn_selection", None)
        if not text:
            return {}
        try:
            sel = json.loads(text)
        except ValueError:
            return {}
        out = {}
        if sel.get("suites"):
            out["suites"] = ", ".join(sel["suites"])
        if sel.get("vectors"):
            out["vectors directory"] = str(sel["vectors"])
        if sel.get("exhaustive") and "exhaustive" in (sel.get("suites") or ()):
            out["exhaustive tier"] = str(sel["exhaustive"])
        if sel.get("pytest_args"):
            out["pytest arguments"] = shlex.join(sel["pytest_args"])
        return out

    def write_row(self, record) -> None:
        self.write_rows([record])

    def write_rows(self, records: list) -> None:
        """Append rows to the journal, several with one write (the cluster coordinator writes a
        worker's chunk of rows at once)."""
        from nnconform.artifacts.reportdir import describe_os_error
        from nnconform.verdict.results import ResultsWriter

        if not records:
            return
        try:
            if self._writer is None:
                self.report_dir.mkdir(parents=True, exist_ok=True)
                self._writer = ResultsWriter(self.report_dir / "results.jsonl")
            if len(records) == 1:
                self._writer.write(records[0])
            else:
                self._writer.write_many(records)
        except OSError as e:
            # Rows already written stay valid (each is one whole line); these cannot be.
            pytest.exit(f"nnconform: {describe_os_error(e, self.report_dir / 'results.jsonl')}", returncode=3)
        self.rows += len(records)

    def failure_dir(self) -> Path:
        d = self.report_dir / "failures"
        if os.path.islink(d):
            os.unlink(d)  # a planted link is replaced, never written through
        d.mkdir(parents=True, exist_ok=True)
        return d

    def _unique_failure_path(self, test_id: str) -> Path:
        """A new file for this failure: two test ids that clean to the same name (or two xdist
        workers) must not overwrite each other's dump.  O_EXCL reserves the name."""
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", test_id).strip("_.")[:150] or "case"
        d = self.failure_dir()
        for n in range(1, 10_000):
            path = d / (f"{safe}.spec.json" if n == 1 else f"{safe}.{n}.spec.json")
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))
                return path
            except FileExistsError:
                continue
        raise FileExistsError(f"{d}: too many failures named {safe}")

    def dump_failure(
        self,
        test_id: str,
        model,
        inputs,
        expected,
        outcome,
        *,
        ignored=None,
        expect_failure: bool = False,
        extra_meta: dict | None = None,
    ) -> tuple[str, str]:
        """Write a replayable spec for a failed case; returns (path, replay command)."""
        from nnconform.artifacts.reportdir import atomic_write
        from nnconform.ir.spec import SpecExample, SpecFile, dumps_spec

        path = self._unique_failure_path(test_id)
        meta = {
            "seed": self.seed,
            "driver": self.driver_spec,
            "harness_version": __version__,
            "test_id": test_id,
            "message": outcome.message,
            "stage": outcome.stage,
        }
        if outcome.comparison is not None:
            meta["criterion"] = outcome.comparison.to_dict()
        if outcome.actual is not None:
            meta["actual_outputs"] = list(outcome.actual)  # spec.dump_spec encodes arrays
        meta.update(extra_meta or {})
        # relative to the report directory, where the command is meant to be run: a report
        # downloaded as a CI artifact has another absolute path (the terminal digest prints
        # it as seen from the current directory, see replay_here)
        where = os.path.relpath(path, self.report_dir)
        replay = f"nnconform replay {shlex.quote(where)} --driver {shlex.quote(self.driver_spec)}"
        meta["replay"] = replay
        ex = SpecExample("case", list(inputs), list(expected), tuple(ignored or ()), expect_failure)
        atomic_write(path, dumps_spec(SpecFile(model, [ex], meta)))
        return str(path), replay

    def attribute(self, record: dict, model, inputs, outcome, *, ignored=None, criteria=None) -> None:
        """Name the operation a failure is blamed on (nnconform.verdict.attribution) in the record."""
        from nnconform.verdict.attribution import blame

        # Only a comparison failure re-runs the model (the divergence hunt) on the driver.
        device = self.device if outcome.outcome == "FAIL" and outcome.stage == "compare" else None
        b = blame(device, model, inputs, outcome, ignored=ignored, criteria=criteria)
        if b is not None:
            record["blamed_operation"], record["blamed_data_type"] = b.operation, b.data_type
            record["extra"].update(b.to_extra())
        record["extra"]["criterion"] = b.criterion if b is not None and b.criterion else criterion_of(outcome)

    def conclude(self, record: dict, outcome: CaseOutcome, case: Case) -> None:
        """Record a runner outcome as the case's verdict (with a dumped spec on failure).  A
        verdict other than PASS ends the test (:class:`Concluded`); pytest's report of it is
        made from the verdict (pytest_runtest_makereport), never the other way round."""
        self.settle(record, outcome, case)
        if outcome.outcome == "SKIP":
            raise Concluded(record["message"])
        if outcome.outcome in ("FAIL", "ERROR", "CRASH", "HANG"):
            raise Concluded(record["message"] + (f"\n  replay: {record['replay']}" if record.get("replay") else ""))

    def settle(self, record: dict, outcome: CaseOutcome, case: Case) -> None:
        """Put a runner outcome in the record as the case's verdict: its message, the blamed
        operation and a dumped spec of a failure (conclude, and a batched item's cells)."""
        from nnconform.textsafe import clean_text

        record["message"] = clean_text(outcome.message)[:MESSAGE_LIMIT]
        note_partition(record, outcome)
        record["verdict"] = Outcome.parse(outcome.outcome)
        if outcome.outcome == "PASS" and case.expect_failure:
            # a must-reject case refused: a pass, but nothing the driver computed (the
            # headline and the matrix do not count it as computed, nnconform.reports.triage)
            record["extra"]["rejected_as_expected"] = True
        if outcome.outcome in ("CRASH", "HANG"):
            note_incident(record, outcome.details or {})
        if outcome.outcome in ("FAIL", "ERROR", "CRASH", "HANG"):
            self.attribute(record, case.model, case.inputs, outcome, ignored=case.ignored)
            try:
                record["spec_path"], record["replay"] = self.dump_failure(
                    case.test_id,
                    case.model,
                    case.inputs,
                    case.expected,
                    outcome,
                    ignored=case.ignored,
                    expect_failure=case.expect_failure,
                )
            except Exception as e:  # the verdict matters more than the dump; say why it is missing
                record["message"] += f" (spec dump failed: {type(e).__name__}: {e})"


class Concluded(BaseException):
    """A case reached its verdict (NnSession.conclude put it in the record): the test ends here.
    A BaseException, as pytest's own outcomes are, so that no ``except Exception`` in a suite
    swallows it."""


def _call_verdict(item: pytest.Item, rec: dict, call, report) -> Outcome:
    """The nnconform verdict of a test's call phase: the one conclude() recorded when the test
    ended with it; else what ended the test (pytest.skip: SKIP, any failure: FAIL); else the
    recorded verdict of a test that went on after a PASS, or PASS."""
    excinfo = call.excinfo
    if excinfo is None:
        return Outcome.parse(rec.get("verdict", Outcome.PASS))
    if excinfo.errisinstance(Concluded):
        return Outcome.parse(rec["verdict"])
    if report.skipped:
        return Outcome.SKIP
    return Outcome.FAIL


def _report_from_verdict(item: pytest.Item, report, verdict: Outcome, call) -> None:
    """pytest's report of the call phase, made from the case's verdict."""
    report.outcome = verdict.pytest_outcome()
    if call.excinfo is None or not call.excinfo.errisinstance(Concluded):
        return  # pytest's own report already says what ended the test
    text = str(call.excinfo.value)
    if report.outcome == "skipped":
        report.longrepr = (str(item.path), (item.location[1] or 0) + 1, f"Skipped: {text}")
    else:
        report.longrepr = text


def note_partition(record: dict, outcome) -> None:
    """A partitioned case says so in its row: ``extra.partitioned`` is "k/n" (k of the n
    operations of its main graph ran on the driver) and ``extra.driver_operations`` lists them."""
    info = getattr(outcome, "partition", None)
    if info:
        record["extra"]["partitioned"] = f"{info['on_driver']}/{info['operations']}"
        record["extra"]["driver_operations"] = list(info.get("driver_operations", ()))


def criterion_of(outcome) -> str:
    """What a failure broke, for grouping failures: the first mismatch's kind and tolerance
    ("element: atol 1, rtol 0"), else the stage the case ended in ("supported", "prepare",
    "execute") or the host incident (crash, hang)."""
    from nnconform.verdict.attribution import criterion_label

    if outcome.outcome in ("CRASH", "HANG"):
        return outcome.outcome.lower()
    return criterion_label(outcome.comparison) or outcome.stage or "unknown"


def _incident_extra(details: dict) -> dict:
    keep = ("stderr_tail", "host_pid", "signal", "exit_code", "protocol", "liveness")
    return {k: details[k] for k in keep if k in details}


def incident_stack(details: dict) -> list[str]:
    """The crashing (or hung) thread's stack of a driver-host incident, driver frames first,
    from the whole faulthandler dump the host left (the 30-line stderr tail keeps idle
    threads and cuts the top frames); the tail when there is no dump."""
    from nnconform.isolation.childproc import crash_stack

    return crash_stack(str(details.get("fault_dump") or details.get("stderr_tail") or ""))


def note_incident(record: dict, details: dict) -> None:
    """A CRASH or HANG row's incident details, and its stack in ``extra.stack``."""
    from nnconform.isolation.childproc import driver_frame

    record["extra"]["incident"] = _incident_extra(details)
    stack = incident_stack(details)
    if stack:
        record["extra"]["stack"] = stack
        record["extra"]["driver_frame"] = driver_frame(str(details.get("fault_dump") or details.get("stderr_tail")))


def pytest_configure(config: pytest.Config) -> None:
    s = NnSession(config)
    config.stash[_SESSION_KEY] = s
    from nnconform.verdict.runner import set_partitioning

    set_partitioning(not config.getoption("nn_no_partition", False))
    config.addinivalue_line("markers", "nnconform: a conformance case recorded as a result row")
    for name, what in _case_markers().items():
        config.addinivalue_line("markers", f"{name}: {what}")
    # Without xdist the report directory is taken once collection shows conformance cases (so
    # a pytest run of unrelated tests never touches it).  With xdist the workers collect, and
    # may start writing rows as soon as the controller schedules them: the controller prepares
    # the directory now, when the run names a driver or a report directory.
    if not s.is_worker and _xdist_active(config) and _names_nnconform_options(config):
        s.open_report_dir()
    interval = config.getoption("nn_progress")
    if interval is not None and interval < 0:
        raise pytest.UsageError("--nn-progress must be >= 0 seconds")
    if not s.is_worker and interval:
        from nnconform.plugin.progress import ProgressReporter

        config.pluginmanager.register(ProgressReporter(config, interval), "nnconform-progress")


@functools.lru_cache(maxsize=1024)
def _marker_name(name: str) -> str:
    return re.sub(r"[^a-z0-9_]+", "_", name.lower()).strip("_")


def marker_name(name: str) -> str:
    """The pytest marker of an NNAPI operation or data type name: CONV_2D -> conv_2d.
    (Cached: collection asks it for every one of the ~530,000 cells of --variants all.)"""
    return _marker_name(str(name))


def _case_markers() -> dict[str, str]:
    """Every marker a conformance case can carry: its suite, the NNAPI operations of its model
    and its data types (``-m "conv_2d and quant8"``)."""
    from nnconform.ir import SHORT_TYPE_NAME, OperationType

    out = {marker_name(op.name): f"cases with an NNAPI {op.name} operation" for op in OperationType}
    for t in (*SHORT_TYPE_NAME.values(), "relaxed"):
        out.setdefault(marker_name(t), f"cases on data type {t}")
    from nnconform import suites

    for f in sorted(Path(suites.__file__).parent.glob("test_*.py")):
        out.setdefault(marker_name(f.stem.removeprefix("test_")), f"cases of the {f.stem.removeprefix('test_')} suite")
    return out


def case_marks(operations, data_types) -> list:
    """pytest marks for a case of these operations and data types (for pytest.param)."""
    return [getattr(pytest.mark, marker_name(n)) for n in sorted({*operations, *data_types}) if marker_name(n)]


_PLAIN_PARAMS = (tuple, str, int, type(None))


def pytest_itemcollected(item) -> None:
    """Mark every conformance case with its suite, and with the operations and data types its
    parameters name (an Example, an OperationType, an OperandType)."""
    if not _is_case(item):
        return
    from nnconform.ir import SHORT_TYPE_NAME, OperandType, OperationType

    _cells.declare(item)
    item.add_marker(marker_name(item.path.stem.removeprefix("test_")))
    names: set[str] = set()
    for v in getattr(getattr(item, "callspec", None), "params", {}).values():
        if type(v) in _PLAIN_PARAMS:  # a vectors cell's (kind, file, index) and Variant: nothing to mark
            continue
        if isinstance(v, OperationType):
            names.add(v.name)
        elif isinstance(v, OperandType):
            names.add(SHORT_TYPE_NAME.get(v, v.name))
        elif hasattr(v, "operations") and hasattr(v, "data_types") and not isinstance(v, (str, bytes, tuple)):
            names.update(str(x) for x in (*v.operations, *v.data_types))
    for n in sorted(names):
        if marker_name(n):
            item.add_marker(marker_name(n))


def _xdist_active(config: pytest.Config) -> bool:
    return bool(getattr(config.option, "numprocesses", None)) and getattr(config.option, "dist", "no") != "no"


def _names_nnconform_options(config: pytest.Config) -> bool:
    args = [str(a) for a in config.invocation_params.args]
    return any(
        a == opt or a.startswith(opt + "=") for a in args for opt in ("--driver", "--nn-report-dir", "--nn-resume")
    )


_FROZE_KEY = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session):
    """A conformance run collects thousands of cases (56,000 with ``--variants general``), and
    every object they are made of is alive until the run ends.  Python's cyclic collector
    still walks them all, again and again while collection allocates, and then at every full
    collection during the run: half of the time of collecting 56,000 cells.  So collection
    runs with the collector paused, and what it built is then frozen out of the collector's
    reach (gc.freeze) until pytest_unconfigure gives it back: a process that runs one session
    after another (a cluster worker runs one per batch) must not keep every batch's items.
    Garbage made during the run is collected as usual.  Only a pytest session that names a
    driver or a report directory is changed, and none that finds objects already frozen by
    someone else (gc.unfreeze would release theirs too)."""
    config = session.config
    if not _names_nnconform_options(config) or not gc.isenabled() or gc.get_freeze_count():
        return (yield)
    gc.disable()
    try:
        return (yield)
    finally:
        gc.enable()
        gc.freeze()
        config.stash[_FROZE_KEY] = True


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist: every worker uses the controller's seed and skips what a resumed run has done."""
    s: NnSession = node.config.stash[_SESSION_KEY]
    node.workerinput["nn_seed"] = s.seed
    node.workerinput["nn_done"] = sorted(s.done_nodeids)
    node.workerinput["nn_last_failed"] = s.last_failed


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """xdist: a worker's --only-supported deselection count, for the controller's summary."""
    s: NnSession = node.config.stash[_SESSION_KEY]
    s.not_claimed = max(s.not_claimed, int(getattr(node, "workeroutput", {}).get("nn_not_claimed", 0)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids) -> None:
    s: NnSession = node.config.stash[_SESSION_KEY]
    plan = _cells.read_plan(s, node)  # the cells of batched items, which ids do not show
    planned = (sum(plan.values()) if plan is not None else len(ids)) + len(s.done_nodeids)
    s.cell_plan = plan
    if s.planned is None or planned > s.planned:
        s.planned = planned
        s.write_status("running")


def _probed_operations(items: list) -> list[OperationType] | None:
    """The operations the auto probe covers: those of the selected cases (their markers), so
    a ``-k`` selection of a few cases is not preceded by a probe of all 1,125 cells; None
    (every operation) when a case's operations are not known from its markers (the random
    suite's draws)."""
    from nnconform.generators.signatures import SIGNATURES

    by_marker = {marker_name(op.name): op for op in SIGNATURES}
    ops: set = set()
    for it in items:
        if not _is_case(it):
            continue
        mine = {by_marker[m.name] for m in it.iter_markers() if m.name in by_marker}
        if not mine:
            return None
        ops |= mine
    return sorted(ops, key=lambda op: op.name)


def _is_case(item) -> bool:
    return "nn_record" in getattr(item, "fixturenames", ())


@pytest.hookimpl(wrapper=True, specname="pytest_collection_modifyitems")
def pytest_collection_modifyitems_by_cell(session, config: pytest.Config, items: list):
    """``-k`` is evaluated here, not by pytest's own hook, when a batched item (one item, a
    row per cell: nnconform.plugin.cells) was collected: its cells are matched one by one."""
    keyword = config.option.keyword
    if not keyword or not keyword.strip() or not any(_cells.cells_of(it) is not None for it in items):
        return (yield)
    _cells.select_by_keyword(config, items, keyword.lstrip())
    config.option.keyword = ""
    try:
        return (yield)
    finally:
        config.option.keyword = keyword


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config: pytest.Config, items: list) -> None:
    s: NnSession = config.stash[_SESSION_KEY]
    # The vectors suite's placeholder when --nn-variants selects no cell: not a case.
    empty = [it for it in items if it.name.endswith("[no-variants]")]
    if empty:
        config.hook.pytest_deselected(items=empty)
        items[:] = [it for it in items if not it.name.endswith("[no-variants]")]
    if not s.is_worker:
        s.planned = _cells.count(items)
        s.probe_ops = _probed_operations(items)
        if s.planned:
            s.open_report_dir()
    if s.last_failed:
        failed = set(s.last_failed)
        if config.getoption("nn_last_failed"):
            # (none of the failed cases in this selection: the selection runs)
            if any(_has_case_in(it, failed) for it in items):
                _cells.narrow(config, items, lambda nodeid: nodeid in failed)
        else:  # --nn-failed-first: a stable reorder (a batched item by any failed cell)
            items[:] = sorted(items, key=lambda it: not _has_case_in(it, failed))
        if not s.is_worker:
            s.planned = _cells.count(items)
    if config.getoption("nn_only_supported") and (s.is_worker or not _xdist_active(config)):
        _keep_only_supported(s, config, items)
        if not s.is_worker:
            s.planned = _cells.count(items)
    if s.done_nodeids:
        done = s.done_nodeids
        _cells.narrow(config, items, lambda nodeid: nodeid not in done)
    if s.is_worker:
        _cells.write_plan(s, items)
    if not s.is_worker:
        s.write_status("running")


def _has_case_in(item, nodeids: set) -> bool:
    cells = _cells.cells_of(item)
    if cells is None:
        return item.nodeid in nodeids
    return any(_cells.cell_nodeid(item.nodeid, c) in nodeids for c in cells)


def case_model(item):
    """(model, expect_failure) of a collected case when its model is known at collection: a
    suite module may say with ``nn_case_model(item)``; otherwise a parameter with a ``model``
    (an Example).  None when the model is only drawn in the test (the random suite)."""
    from nnconform.ir import Model

    hook = getattr(getattr(item, "module", None), "nn_case_model", None)
    if hook is not None:
        return hook(item)
    for v in getattr(getattr(item, "callspec", None), "params", {}).values():
        m = getattr(v, "model", None)
        if isinstance(m, Model):
            return m, bool(getattr(v, "expect_failure", False))
    return None


def _keep_only_supported(s: NnSession, config: pytest.Config, items: list) -> None:
    """--nn-only-supported: deselect the cases the driver does not claim entirely (for the
    random suite: the tests whose cell the capability probe found claimed nowhere).  A case
    whose support query raises (an invalid model the driver must reject) or answers garbage
    stays, so its own test records that.  A valid model that must fail at execution is
    deselected like any other when the driver does not claim it."""
    keep, drop = [], []
    for it in items:
        found = case_model(it) if _is_case(it) else None
        if found is None:
            # The model is only drawn when the test runs (the random suite); its module may
            # still say from the capability probe that the driver claims the test's
            # (operation, type) cell nowhere, so no draw could be run.
            claimed = getattr(getattr(it, "module", None), "nn_case_claimed", None)
            if claimed is not None and _is_case(it) and claimed(it, s) is False:
                drop.append(it)
            else:
                keep.append(it)
            continue
        try:
            claims = s.device.supported_operations(found[0])
        except Exception:  # an invalid model it rejects (the case checks that), or a driver
            keep.append(it)  # bug the case itself will record
            continue
        ok = (
            isinstance(claims, (list, tuple))
            and len(claims) > 0
            and all(isinstance(c, (bool, np.bool_)) for c in claims)
        )
        (keep if not ok or all(claims) else drop).append(it)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    s.not_claimed = len(drop)


def pytest_report_header(config: pytest.Config) -> list[str]:
    s = config.stash[_SESSION_KEY]
    lines = [
        f"nnconform {__version__}: driver {s.driver_spec}, seed {s.seed} "
        f"(replay with --nn-seed {s.seed}), report dir {s.report_dir}",
        f"nnconform isolation: {s.isolation_text()}",
    ]
    if s.previous is not None:
        lines.append(f"nnconform: the earlier run's results were moved to {s.previous}")
    if s.resume:
        lines.append(f"nnconform: resuming, {len(s.done_nodeids)} cases already recorded")
    return lines


def session_of(config: pytest.Config) -> NnSession:
    """The run's NnSession (for collection hooks, which have no fixtures)."""
    return config.stash[_SESSION_KEY]


@pytest.fixture(scope="session")
def nn_session(request: pytest.FixtureRequest) -> NnSession:
    return request.config.stash[_SESSION_KEY]


@pytest.fixture(scope="session")
def nn_device(nn_session: NnSession):
    return nn_session.device


def _new_record() -> dict:
    return {"suite": "", "operations": [], "data_types": [], "spec_path": "", "message": "", "replay": "", "extra": {}}


@pytest.fixture
def nn_record(request: pytest.FixtureRequest) -> dict:
    rec: dict[str, Any] = _new_record()
    request.node.stash[_PHASES_KEY] = {"record": rec, "reports": []}
    return rec


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """Collection (and the capability probe in it) is over: from here a stop is "during cases"."""
    s: NnSession | None = session.config.stash.get(_SESSION_KEY, None)
    if s is not None:
        s.stage = "cases"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Incidents (host crashes and hangs) from here on belong to this test.
    s: NnSession = item.config.stash[_SESSION_KEY]
    item.stash[_MARK_KEY] = len(s._device.incidents) if s.isolated else 0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    report = outcome.get_result()
    phases = item.stash.get(_PHASES_KEY, None)
    if phases is None:
        if not _is_case(item):
            return
        # setup failed before the fixture ran: still record the case
        phases = {"record": _new_record(), "reports": []}
        item.stash[_PHASES_KEY] = phases
    if report.when == "call":
        verdict = _call_verdict(item, phases["record"], call, report)
        phases["record"]["call_verdict"] = verdict
        _report_from_verdict(item, report, verdict, call)
        if _cells.cells_of(item) is None:  # a batched item's cells meet their entries one by one
            _apply_expectation(item, phases["record"], report)
    phases["reports"].append(report)
    if report.when == "teardown":
        row = _write_item_row(item, phases)
        if row is None:  # a batched item: its cells' rows are written; the progress line counts them
            report.user_properties.append(("nnconform.cells", str(len(_cells.cells_of(item) or ()))))
            return
        # JUnit XML: every case's nnconform verdict as <property> elements of its testcase
        # (plain strings: xdist's wire format carries no enum)
        report.user_properties.extend(
            (f"nnconform.{k}", str(v))
            for k, v in (
                ("outcome", row.outcome),
                ("suite", row.suite),
                ("test_id", row.test_id),
                ("blamed_operation", row.blamed_operation),
                ("blamed_data_type", row.blamed_data_type),
                ("replay", row.replay),
            )
            if v
        )


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report) -> None:
    """After every other plugin has seen a passed phase report, drop what only they read of it:
    the terminal reporter keeps every phase report of the run until the end (three per case;
    1.6 million for --variants all, 7 GB of the xdist controller), and a passed one is only
    counted there.  Its keywords (the node's names and marks) and its user properties (the
    nnconform.* verdict for JUnit XML, already written) were two thirds of each."""
    if report.passed and not hasattr(report, "wasxfail"):
        report.keywords = {}
        report.user_properties = []


def _expectation(s: NnSession, rec: dict, *, failed: bool, crashlike: bool, test_id: str = ""):
    """--expected-failures for a finished case: ("XFAIL", entry) for a listed case that
    failed, ("XPASS", entry) for one with a strict entry that passed, else None (a non-strict
    entry of a case that passed is noted in the record as stale)."""
    if not s.expectations:
        return None
    from nnconform.verdict.expectations import match

    test_id = str(rec.get("test_id") or test_id)
    exp = match(s.expectations, test_id)
    inherited = False
    if rec["extra"].get("variant") not in (None, "general-sync"):
        # A vectors variant (nnconform.cases.variants) inherits the entry of its vector's plain id:
        # it fails for the same documented reason, or it does not exercise what fails (e.g. a
        # rejection check), which makes no entry stale.  An entry naming the variant itself
        # (and not the plain id) stays strict.
        base = match(s.expectations, test_id.split("[", 1)[0])
        if base is not None and (exp is None or exp is base):
            exp, inherited = base, True
    if exp is None:
        return None
    rec["extra"]["expected_failure"] = exp.to_dict()
    if inherited and not failed:
        return None
    if failed and not crashlike:
        rec["expectation"] = "XFAIL"
        return "XFAIL", exp
    if not failed and exp.strict:
        rec["expectation"] = "XPASS"
        return "XPASS", exp
    if not failed:
        rec["extra"]["note"] = f"listed as an expected failure ({exp.pattern}) but passed: the entry is stale"
    return None


def expectation_for(s: NnSession, rec: dict, *, failed: bool, crashlike: bool) -> tuple[Outcome, str] | None:
    """A batched item's cell (nnconform.plugin.cells): its row's (outcome, message) when an
    --expected-failures entry turns it XFAIL or XPASS, else None."""
    found = _expectation(s, rec, failed=failed, crashlike=crashlike)
    if found is None:
        return None
    kind, exp = found
    if kind == "XFAIL":
        return Outcome.XFAIL, f"expected failure: {exp.describe()}; {rec.get('message', '')}"
    return Outcome.XPASS, f"[XPASS(strict)] expected to fail ({exp.describe()}) but passed"


def _apply_expectation(item: pytest.Item, rec: dict, report) -> None:
    """--expected-failures: a listed case that failed is reported as xfail (pytest's own
    representation, so the terminal, JUnit and the exit status agree); one that passed is a
    strict XPASS failure, or a PASS with a note when its entry is non-strict."""
    s: NnSession = item.config.stash[_SESSION_KEY]
    crashlike = rec.get("call_verdict") in (Outcome.CRASH, Outcome.HANG)
    found = _expectation(s, rec, failed=report.failed, crashlike=crashlike, test_id=item.name)
    if found is None:
        return
    kind, exp = found
    if kind == "XFAIL":
        report.outcome, report.wasxfail = "skipped", exp.describe()
    else:
        report.outcome = "failed"
        report.longrepr = f"[XPASS(strict)] expected to fail ({exp.describe()}) but passed"


def _crash_line(report) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return crash.message.splitlines()[0] if crash.message else ""
    if isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:  # skip: (file, line, reason)
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    return str(report.longrepr).splitlines()[-1] if report.longrepr else ""


def _host_verdict(session: NnSession, item: pytest.Item, rec: dict) -> tuple[str, str] | None:
    """CRASH/HANG if the driver host died or hung during this test; a FAIL if the driver left
    processes running.  None when the host behaved."""
    if not session.isolated:
        return None
    dev = cast("IsolatedDevice", session._device)  # session.isolated: the proxy
    busy = dev.busy_calls()
    if busy:
        # The test stopped waiting (its own watchdog fired) but the call never answered.
        dev.declare_hang(f"the test ended with driver call(s) still unanswered: {', '.join(sorted(set(busy)))}")
    new = dev.incidents[item.stash.get(_MARK_KEY, 0) :]
    if new:
        first = new[0]
        first["liveness"] = dev.liveness()
        note_incident(rec, first)
        if len(new) > 1:
            rec["extra"]["incidents"] = len(new)
        return first["verdict"], f"{first['message']}; {first['liveness']}"
    left = dev.end_case()["processes"]
    if left:
        rec["extra"]["leftover_processes"] = left
        return "FAIL", (f"driver left {len(left)} process(es) running after the case (killed): " + "; ".join(left[:3]))
    return None


def _blamed(rec: dict, outcome: str) -> tuple[str, str]:
    """(blamed operation, its data type) of a finished case: what conclude() or the suite put
    in the record; else the random suite's first divergent operation; else the case's only
    operation.  Empty for cases that did not fail, and for failures of several operations
    nobody attributed."""
    if outcome not in ("FAIL", "ERROR", "CRASH", "HANG"):
        return "", ""
    types = [str(t) for t in rec.get("data_types", [])]
    first_type = types[0] if types else ""
    if rec.get("blamed_operation"):
        return str(rec["blamed_operation"]), str(rec.get("blamed_data_type") or first_type)
    div = rec.get("extra", {}).get("first_divergent_operation")
    if isinstance(div, str) and div:
        return div, first_type
    ops = sorted({str(o) for o in rec.get("operations", [])})
    if len(ops) == 1:
        return ops[0], first_type
    # a vts check that embeds one operation's mismatch ("[CONV_2D] output 0 (TENSOR_...")
    from nnconform.reports.triage import named_in_message

    op, dtype = named_in_message(str(rec.get("message", "")))
    if op and (not ops or op in ops):
        return op, dtype or first_type
    return "", ""


def _row_outcome(rec: dict, reports: list) -> tuple[Outcome, str]:
    """The row's outcome: the call phase's verdict (nnconform's, see _call_verdict), turned
    XFAIL / XPASS by an expectation; ERROR when the case's set-up or tear-down broke (no
    verdict, or a verdict the harness could not finish); SKIP when set-up skipped it."""
    message = rec.get("message", "")
    by_phase = {r.when: r for r in reports}
    setup, call, teardown = by_phase.get("setup"), by_phase.get("call"), by_phase.get("teardown")
    if setup is not None and setup.failed:
        return Outcome.ERROR, _crash_line(setup)
    if setup is not None and setup.skipped:
        return Outcome.SKIP, message or _crash_line(setup)
    verdict = Outcome.parse(rec.get("call_verdict", Outcome.PASS))
    if rec.get("expectation") == "XFAIL":
        return Outcome.XFAIL, f"expected failure: {getattr(call, 'wasxfail', '')}; {message}"
    if rec.get("expectation") == "XPASS":
        return Outcome.XPASS, _crash_line(call) if call is not None else message
    if verdict is not Outcome.PASS:
        return verdict, message or (_crash_line(call) if call is not None else "")
    if teardown is not None and teardown.failed:
        return Outcome.ERROR, _crash_line(teardown)
    return verdict, message


def _write_item_row(item: pytest.Item, phases: dict):
    """The row of a finished item (tear-down): its verdict, with the driver host's incidents
    during it; a batched item (nnconform.plugin.cells) writes the rows of the cells it did
    not record itself and returns None."""
    session: NnSession = item.config.stash[_SESSION_KEY]
    rec = phases["record"]
    outcome, message = _row_outcome(rec, phases["reports"])
    duration = sum(r.duration for r in phases["reports"])
    if _cells.cells_of(item) is not None:
        if _cells.write_unfinished(session, item, rec, outcome, message, duration) and outcome.bad:
            _fail_teardown(phases, f"nnconform: {outcome}: {message}")
        return None
    row = write_case_row(session, item, rec, outcome, message, duration, item.nodeid, phases=phases)
    return row


def _fail_teardown(phases: dict, text: str) -> None:
    """Make pytest's own verdict agree with the rows: an item whose case the host broke did
    not pass.  Its call phase is already reported (to the terminal, to the xdist controller),
    so the tear-down report, not yet sent, carries it."""
    if not any(r.failed for r in phases["reports"]):
        teardown = phases["reports"][-1]
        teardown.outcome, teardown.longrepr = "failed", text


def write_case_row(
    session: NnSession, item, rec: dict, outcome: Outcome, message: str, duration: float, nodeid: str, phases=None
):
    """Write one case's row: its verdict combined with the driver host's incidents since the
    case began (a CRASH or HANG overrides what the test concluded)."""
    from nnconform.textsafe import clean_text
    from nnconform.verdict.results import ResultRecord

    host = _host_verdict(session, item, rec)
    if host is not None:
        verdict, why = host
        if verdict in ("CRASH", "HANG") and outcome not in ("CRASH", "HANG"):
            outcome, message = Outcome.parse(verdict), why + (f" (the test said: {message})" if message else "")
        elif verdict in ("CRASH", "HANG"):
            message = message if "liveness" in message else f"{message}; {why.rsplit('; ', 1)[-1]}"
        elif outcome in ("PASS", "SKIP"):
            outcome, message = Outcome.parse(verdict), why
        else:
            message = f"{message}; {why}"
        if phases is not None:
            _fail_teardown(phases, f"nnconform: {outcome}: {why}")
    rec["extra"]["nodeid"] = nodeid
    version = getattr(session._device, "version", None) if session._device is not None else None
    if isinstance(version, str) and version:
        rec["extra"].setdefault("driver_version", version[:200])  # nnconform diff: same driver?
    if session.in_process:
        rec["extra"]["isolation"] = "in-process"
    suite = rec.get("suite") or Path(str(item.fspath)).stem.removeprefix("test_")
    blamed, blamed_type = _blamed(rec, outcome)
    row = ResultRecord(
        suite=suite,
        test_id=rec.get("test_id") or item.name,
        driver=session.driver_name,
        operations=list(rec.get("operations", [])),
        data_types=list(rec.get("data_types", [])),
        outcome=Outcome.parse(outcome),
        duration_s=round(duration, 6),
        seed=session.seed,
        blamed_operation=blamed,
        blamed_data_type=blamed_type,
        spec_path=rec.get("spec_path", ""),
        message=clean_text(message)[:MESSAGE_LIMIT],
        replay=rec.get("replay", ""),
        extra=rec.get("extra", {}),
    )
    session.write_row(row)
    return row


def _case_counts(rows: list) -> tuple[int, dict]:
    """Distinct cases recorded (by node id) and outcome counts, from the journal's rows."""
    latest: dict[str, str] = {}
    for i, r in enumerate(rows):
        latest[str(r.extra.get("nodeid") or f"#{i}")] = r.outcome
    counts: dict[str, int] = {}
    for o in latest.values():
        counts[o] = counts.get(o, 0) + 1
    return len(latest), counts


def _junit_xml(config: pytest.Config):
    from _pytest.junitxml import xml_key

    return config.stash.get(xml_key, None)


def pytest_sessionstart(session: pytest.Session) -> None:
    s: NnSession = session.config.stash[_SESSION_KEY]
    if not s.is_worker:
        _cap_terminal(session.config)  # the terminal reporter exists by now
    xml = _junit_xml(session.config)
    if xml is not None and not s.is_worker:
        for k, v in (
            ("driver", s.driver_spec),
            ("seed", s.seed),
            ("harness_version", __version__),
            ("isolation", s.isolation_text()),
            ("report_dir", str(s.report_dir)),
        ):
            xml.add_global_property(f"nnconform.{k}", v)


@pytest.hookimpl(tryfirst=True)  # before junitxml writes its file, so the properties are in it
def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    s: NnSession = session.config.stash[_SESSION_KEY]
    s.close_writer()
    if s.is_worker:
        s.close_device()
        # every worker collects (and deselects) the same items: the controller keeps the largest
        out = getattr(session.config, "workeroutput", None)
        if out is not None:
            out["nn_not_claimed"] = s.not_claimed
        return
    if s._reportdir is None:
        if not (exitstatus == pytest.ExitCode.INTERRUPTED and _names_nnconform_options(session.config)):
            return  # no conformance case in this pytest run
        try:  # a conformance run stopped during collection: its report says so
            s.open_report_dir(probe=False)
        except pytest.UsageError:
            return  # (the directory is another run's, or unusable: nothing of ours to report)
    # The journal is read once here, for the status, the summary and the reports (a
    # --variants all run has 538,000 rows: each read took 20 s).
    journal = s.report_dir / "results.jsonl"
    # The report stage makes no reference cycles worth collecting, and the cyclic collector,
    # counting containers, walked the whole matrix's 538,000 records again and again: a third
    # of the stage (in a process that ends right after it).
    collecting = gc.isenabled()
    gc.disable()
    try:
        _report_stage(session, s, exitstatus, journal)
    finally:
        if collecting:
            gc.enable()


def _report_stage(session: pytest.Session, s: NnSession, exitstatus: int | pytest.ExitCode, journal: Path) -> None:
    from nnconform.artifacts.reportdir import describe_os_error
    from nnconform.verdict.results import read_results

    try:
        rows = read_results(journal) if journal.exists() else []
        done, counts = _case_counts(rows)
    except (OSError, ValueError) as e:
        s.status_line = f"nnconform: cannot read the results journal: {e}"
        return
    interrupted = bool(exitstatus == pytest.ExitCode.INTERRUPTED or session.shouldstop or session.shouldfail)
    status = _run_status(s, done, interrupted)
    s.warnings.extend(_stale_expectations(s, rows))
    try:
        s.stage = "report writing"
        try:
            _write_run_reports(session, s, status, done, rows, counts)
        except KeyboardInterrupt:
            # Stopped while writing the reports: write them again, saying so, with the stop
            # signals held back meanwhile (they stay pending, and are acted on after), so that
            # report.html and summary.json exist and are whole.
            status = _run_status(s, done, True) + " (stopped while the reports were written)"
            with _signals_held():
                _write_run_reports(session, s, status, done, rows, counts)
    except OSError as e:
        s.status_line = f"nnconform: {describe_os_error(e, s.report_dir)}; rows already in results.jsonl are valid"


def _stale_expectations(s: NnSession, rows: list) -> list[str]:
    """One warning per expected-failures entry that matched no case of this run (a typo, a
    renamed vector, or a selection that left its cases out): such an entry silently excuses
    nothing, and a typo in it hides the failure it was meant to excuse."""
    import fnmatch

    if not s.expectations:
        return []
    ids = {str(r.test_id) for r in rows}
    ids |= {t.split("[", 1)[0] for t in ids}  # a variant inherits its vector's entry
    out = []
    for e in s.expectations:
        rx = re.compile(fnmatch.translate(e.pattern))
        if not any(rx.match(t) for t in ids):
            out.append(f"nnconform: --expected-failures: {e.pattern!r} matches no case of this run ({e.reason})")
    return out


_STAGE_WORDS = {"collection": "during collection", "probe": "during the capability probe", "cases": ""}


def _run_status(s: NnSession, done: int, interrupted: bool) -> str:
    """run.json's and the reports' status line: complete, or how far an interrupted run got."""
    planned = s.planned
    if not interrupted and (planned is None or done >= planned):
        return f"complete: {done} of {planned} cases" if planned is not None else f"complete: {done} cases"
    where = _STAGE_WORDS.get(s.stage, "")
    return (
        "interrupted "
        + (f"{where}, " if where else "")
        + (f"after {done} of {planned} cases" if planned is not None else f"after {done} cases")
    )


@contextlib.contextmanager
def _signals_held():
    """The stop signals blocked in this thread while inside; a pending one is delivered, and
    its KeyboardInterrupt dropped, on the way out (the run has already stopped and said so)."""
    import signal

    from nnconform.isolation.interrupts import STOP_SIGNALS

    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        except KeyboardInterrupt:
            pass  # a second stop request for a run that is already stopping: nothing left to stop


def _write_run_reports(session: pytest.Session, s: NnSession, status: str, done: int, rows, counts) -> None:
    """run.json, summary.json, results.csv and report.html of the run, also when no case ran
    (stopped in collection or in the probe: the report says how far the run got)."""
    s.final_status, s.final_counts = status, counts
    s.write_status(status, done)
    from nnconform.reports import build_reports
    from nnconform.reports.summary import build_summary, write_summary

    meta = dict(s.meta(), status=status)
    s.rows_read = rows
    summary = build_summary(rows, meta)
    s.summary_path = write_summary(s.report_dir, rows, meta, summary=summary)
    history = None
    if session.config.getoption("nn_history"):
        from nnconform.reports.history import append_history, read_history

        try:
            append_history(session.config.getoption("nn_history"), summary)
            history = read_history(session.config.getoption("nn_history"))
        except OSError as e:
            # the history is an extra: the run's own reports are written all the same
            from nnconform.artifacts.reportdir import describe_os_error

            s.warnings.append(
                f"nnconform: --history: {describe_os_error(e, Path(session.config.getoption('nn_history')))}"
            )
    # The coverage table describes the reference executor; show it on reference runs.
    s.reports = build_reports(
        s.report_dir, meta=meta, with_coverage=s.driver_spec == "reference", history=history, records=rows
    )
    _finish_ci(session, s, summary)
    # The exit status is decided here, from the outcomes, and recorded: `nnconform run`
    # reads it from run.json rather than working it out again.
    s.exit_status = _exit_status(session, s, status, counts)
    s.write_status(status, done, exit_status=int(s.exit_status))


def _exit_status(session: pytest.Session, s: NnSession, status: str, counts: dict) -> ExitStatus:
    """The run's exit status by the one table (nnconform.verdict.outcome.ExitStatus)."""
    code = ExitStatus.of(counts, complete=status.startswith("complete"))
    if code is ExitStatus.CLEAN and (
        getattr(s, "skip_gate", None)
        or session.exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
    ):
        code = ExitStatus.FAILURES  # the skip gate, or pytest failed for a reason no row shows
    return code


def _finish_ci(session: pytest.Session, s: NnSession, summary: dict) -> None:
    """JUnit run properties, and the skip-ratio gate."""
    xml = _junit_xml(session.config)
    if xml is not None:
        xml.add_global_property("nnconform.status", summary["status"])
        for outcome, n in sorted(summary["counts"].items()):
            xml.add_global_property(f"nnconform.count.{outcome}", n)
        xml.add_global_property("nnconform.skip_ratio", summary["skip_ratio"])
    limit = session.config.getoption("nn_max_skip_ratio")
    if limit is not None and summary["cases"] and summary["skip_ratio"] > limit:
        s.skip_gate = (
            f"nnconform: {summary['skip_ratio']:.0%} of the {summary['cases']} cases skipped, more "
            f"than --max-skip-ratio {limit:g}: the run fails"
        )
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    s: NnSession | None = config.stash.get(_SESSION_KEY, None)
    if s is not None:
        # The rows the reports were written from go now: pytest's unraisable-exception plugin
        # then runs full garbage collections, each of which walked a whole matrix's 538,000
        # records while they were alive (1.3 s a collection, measured alone).
        s.rows_read = []
    if config.stash.get(_FROZE_KEY, False):
        gc.unfreeze()  # the session's objects become collectable again (see pytest_collection)
    if s is None:
        return
    s.close_device()
    s.close_writer()
    s.close_report_dir()


# Failure blocks (pytest's FAILURES section) and FAILED lines shown in the terminal: the rest
# are in report.html.  1,685 failures printed 6,793 lines and buried the digest.
FAILURE_BLOCKS = 20
DIGEST_BUCKETS = 10
SKIP_REASONS = 5
# operation names and data-type lists in a skip reason ("does not support WHILE for int32")
_SKIP_NAMES = re.compile(
    r"\b[A-Z][A-Z0-9_]{2,}\b|\b(?:fp16|fp32|int32|bool8|relaxed|quant\w*)(?:/(?:fp16|fp32|int32|bool8|quant\w*))*\b"
)


def _cap_terminal(config: pytest.Config) -> None:
    """Make pytest's failure sections show the first FAILURE_BLOCKS failures and errors of a
    conformance run, and end the terminal output with nnconform's digest (after pytest's
    short summary, which comes after every plugin's terminal summary)."""
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is None:
        return
    getreports, short_summary = tr.getreports, tr.short_test_summary

    def conformance() -> bool:
        return getattr(config.stash.get(_SESSION_KEY, None), "_reportdir", None) is not None

    def capped_getreports(name: str = ""):
        reports = getreports(name)
        return reports[:FAILURE_BLOCKS] if name in ("failed", "error") and conformance() else reports

    def capped_short_summary() -> None:
        if not conformance():
            return short_summary()
        full = {k: tr.stats.get(k) for k in ("failed", "error")}
        try:
            for k, v in full.items():
                if v is not None:
                    tr.stats[k] = v[:FAILURE_BLOCKS]
            short_summary()
        finally:
            for k, v in full.items():
                if v is not None:
                    tr.stats[k] = v
        _nn_terminal_end(tr, config, hidden=sum(max(0, len(v or []) - FAILURE_BLOCKS) for v in full.values()))

    tr.getreports, tr.short_test_summary = capped_getreports, capped_short_summary


def _terminal_digest(tr, rows, report_dir: Path | None = None) -> None:
    """Per-suite counts, the most common skip reasons (their real text) and the failure
    buckets, each with its replay command."""
    from collections import Counter

    from nnconform.reports import triage
    from nnconform.reports.summary import latest_rows

    rows = latest_rows(rows)
    lenient = Counter(r.suite for r in rows if r.outcome == "PASS" and (r.extra or {}).get("accumulated_rounding"))
    for suite, c in triage.per_suite(rows).items():
        note = f" ({lenient[suite]} of the PASSes as accumulated rounding: see the report)" if lenient[suite] else ""
        tr.write_line(f"nnconform: suite {suite}: " + ", ".join(f"{n} {o}" for o, n in c.most_common()) + note)
    skipped = [r for r in rows if r.outcome == "SKIP"]
    if skipped:
        # grouped by their text without numbers, names, operations and types; each group shown
        # by a real reason (never the grouping key, "mediapipe==#.14"); report.html lists
        # them per operation
        groups: dict[str, list[str]] = {}
        for r in skipped:
            text = (r.message or "(no reason given)").splitlines()[0]
            groups.setdefault(_SKIP_NAMES.sub("X", triage.normalise_message(text)), []).append(text)
        tr.write_line(f"nnconform: skip reasons ({len(skipped)} skipped), most common:")
        for _, texts in sorted(groups.items(), key=lambda kv: -len(kv[1]))[:SKIP_REASONS]:
            others = len(set(texts)) - 1
            tr.write_line(
                f"  {len(texts):6d}  {texts[0][:150]}" + (f" (and {others} like it: see report.html)" if others else "")
            )
    buckets = triage.buckets(rows)
    if buckets:
        tr.write_line(f"nnconform: {sum(b.count for b in buckets)} failures in {len(buckets)} buckets:", red=True)
        for b in buckets[:DIGEST_BUCKETS]:
            tr.write_line(
                f"  {b.count:6d}  {b.operation} {b.data_type}: {b.criterion} ({b.outcomes}), "
                f"e.g. {b.representative.test_id}"
            )
            replay = triage.replay_here(b.replay, report_dir) if report_dir is not None and b.replay else b.replay
            tr.write_line(f"          {'replay: ' + replay if replay else b.no_replay}")
            stack = [str(f) for f in b.representative.extra.get("stack") or []]
            if stack:
                # from the driver's innermost frame on (the library frame it called is above it)
                frame = str(b.representative.extra.get("driver_frame") or "")
                start = stack.index(frame) if frame in stack else 0
                tr.write_line("          crashing thread: " + " <- ".join(stack[start : start + 3]))
        if len(buckets) > DIGEST_BUCKETS:
            tr.write_line(f"  ... {len(buckets) - DIGEST_BUCKETS} more buckets in report.html")


def _mostly_skipped_warning(tr, rows) -> None:
    """A run in which most cases skip is no pass (its badge is amber): say so, with what the
    driver actually computed (cases it ran, apart from the must-reject cases it refused)."""
    from nnconform.reports import triage
    from nnconform.reports.headline import MOSTLY_SKIPPED
    from nnconform.reports.summary import latest_rows, skip_ratio

    rows = latest_rows(rows)
    ratio = skip_ratio(rows)
    if ratio <= MOSTLY_SKIPPED:
        return
    computed = sum(1 for r in rows if triage.kind(r.outcome) != "skip" and not triage.rejected_as_expected(r))
    tr.write_line(
        f"nnconform: WARNING: {ratio:.0%} of the {len(rows)} cases skipped; the driver computed {computed} of them "
        "(must-reject cases it refused not counted): this run is not a pass (--max-skip-ratio makes it fail)",
        yellow=True,
        bold=True,
    )


def _nn_terminal_end(tr, config: pytest.Config, hidden: int = 0) -> None:
    """The last lines of a conformance run's terminal output: how many failure blocks were
    left out, the run's status, the digest and the report's path."""
    s: NnSession = config.stash[_SESSION_KEY]
    if s.digest_done:
        return
    s.digest_done = True
    if hidden:
        tr.write_line(f"nnconform: {hidden} more failures not shown here: see {s.report_dir / 'report.html'}")
    status = getattr(s, "final_status", None)
    if status is not None:
        counts = ", ".join(f"{n} {o}" for o, n in sorted(s.final_counts.items()))
        tr.write_line(f"nnconform: run {status} ({counts or 'no rows'}), seed {s.seed}")
        if status.startswith("interrupted"):
            tr.write_line(
                f"nnconform: to run the rest: nnconform run --resume --report-dir {shlex.quote(str(s.report_dir))}",
                yellow=True,
            )
    for line in getattr(s, "warnings", []):
        tr.write_line(line, yellow=True)
    rows = getattr(s, "rows_read", None)
    if rows:
        _terminal_digest(tr, rows, s.report_dir)
        _mostly_skipped_warning(tr, rows)
    if getattr(s, "reports", None):
        csv_path, html_path = s.reports
        tr.write_line(f"nnconform: reports -> {csv_path}, {html_path}, {s.summary_path}")
    if getattr(s, "skip_gate", None):
        tr.write_line(s.skip_gate, red=True)


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    s: NnSession = config.stash[_SESSION_KEY]
    if s.is_worker:
        return
    if getattr(s, "status_line", None):
        terminalreporter.write_line(s.status_line, red=True)
    if s.previous is not None:
        terminalreporter.write_line(f"nnconform: the earlier run's results were moved to {s.previous}")
    if s.not_claimed:
        terminalreporter.write_line(
            f"nnconform: --only-supported: {s.not_claimed} cases the driver does not claim entirely were not run"
        )
    if not terminalreporter.reportchars or config.option.no_summary:
        _nn_terminal_end(terminalreporter, config)  # pytest's short summary will not follow
    if os.environ.get("GITHUB_ACTIONS") == "true" and getattr(s, "rows_read", None):
        # GitHub Actions reads these workflow commands from the log as annotations.
        from nnconform.reports.summary import github_annotations

        for line in github_annotations(s.rows_read):
            terminalreporter.write_line(line)
