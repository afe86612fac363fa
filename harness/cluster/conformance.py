"""``nnconform run --cluster``: the conformance suites' cases on a Dask cluster.

The coordinator is an ordinary nnconform pytest session (``-p nnconform.cluster.conformance
--nn-cluster ADDRESS``): it collects with the run's seed, so selection, ``--resume``,
``--lf``, ``--only-supported`` and the report directory behave exactly as in a local run.
Only its test loop differs (``pytest_runtestloop``, as pytest-xdist's controller does): the
collected cases go to the cluster in batches (:mod:`.dispatch`), and the rows that come back
are written to the one journal, fsynced, as they arrive.  At the end the plugin's own
session finish writes the status, summary and reports from that journal.

On a worker, :func:`run_batch` runs one batch as an in-process pytest session over the batch's
node ids, with the run's driver, seed and options and a driver host of its own, into a
scratch report directory whose rows (and dumped failure specs) it sends back.  A row's
``extra.nodeid`` is the coordinator's node id; ``extra.cluster_worker`` names the worker.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import shutil
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import pytest

from nnconform.cluster.dispatch import (
    DISCONNECT_GRACE_S,
    Dispatcher,
    batch_size,
    send_rows,
    send_started,
    split,
    worker_address,
)
from nnconform.isolation import interrupts
from nnconform.plugin.cells import cell_nodeid, cells_of, item_nodeid_of

if TYPE_CHECKING:
    from nnconform.cluster.connect import ClusterHandle

STREAM_EVERY_S = 0.2


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("nnconform")
    g.addoption(
        "--nn-cluster",
        default=None,
        metavar="ADDRESS",
        help="run the cases on a Dask cluster: a scheduler address (tcp://host:8786) or local:N",
    )
    g.addoption(
        "--nn-worker-resources",
        default=None,
        metavar="NAME=N[,...]",
        help="run each batch only on workers that have these Dask resources, e.g. device=1",
    )
    g.addoption(
        "--nn-cluster-batch",
        type=int,
        default=None,
        metavar="N",
        help="cases per batch (default: about four batches per worker thread, at most 1000)",
    )
    g.addoption(
        "--nn-cluster-grace",
        type=float,
        default=DISCONNECT_GRACE_S,
        metavar="SECONDS",
        help="seconds to wait for a lost scheduler to come back before the run ends as interrupted",
    )


def case_key(nodeid: str) -> str:
    """A node id without its directory (``test_generated.py::test_x[...]``): the same case on
    a worker whose nnconform is installed elsewhere."""
    path, sep, rest = nodeid.partition("::")
    return f"{Path(path).name}{sep}{rest}"


# ---- coordinator ------------------------------------------------------------------------------


def _payload(config: pytest.Config, s) -> dict:
    vectors = config.getoption("nn_vectors")
    xf = config.getoption("nn_expected_failures")
    return {
        "driver": s.driver_spec,
        "seed": s.seed,
        "vectors": str(Path(vectors).resolve()) if vectors and Path(vectors).exists() else vectors,
        "variants": config.getoption("nn_variants"),
        "in_process": bool(config.getoption("nn_in_process")),
        "call_timeout": config.getoption("nn_call_timeout"),
        "mem_limit": config.getoption("nn_mem_limit"),
        "no_partition": bool(config.getoption("nn_no_partition")),
        "no_probe": bool(config.getoption("nn_no_probe")),
        "expected_failures": Path(xf).read_text(encoding="utf-8") if xf else None,
        "hypothesis_profile": config.getoption("nn_hypothesis_profile"),
        "max_examples": config.getoption("nn_max_examples"),
    }


class _Coordinator:
    def __init__(self, session: pytest.Session, items: list):
        from nnconform.plugin import session_of

        self.session, self.s = session, session_of(session.config)
        # case key -> (item, cell): a batched item (nnconform.plugin.cells) is one case per
        # cell, each dispatched, streamed back and lost on its own
        self.items: dict[str, tuple[Any, str | None]] = {}
        for it in items:
            cells = cells_of(it)
            if cells is None:
                self.items[case_key(it.nodeid)] = (it, None)
            else:
                for c in cells:
                    self.items[case_key(cell_nodeid(it.nodeid, c))] = (it, c)
        self.tr = session.config.pluginmanager.get_plugin("terminalreporter")

    def log(self, text: str) -> None:
        if self.tr is not None:
            self.tr.write_line(text)
        else:
            print(text, flush=True)

    def _count(self, outcome: str) -> None:
        from nnconform.verdict.results import BAD_OUTCOMES

        if outcome in BAD_OUTCOMES:
            self.session.testsfailed += 1

    def accept(self, rows: list[dict], worker: str) -> list[str]:
        """Write the rows not written yet (the first copy of each case) and fsync them."""
        from nnconform.verdict.results import ResultRecord

        written, records, seen = [], [], set()
        for row in rows:
            row = dict(row)
            key, spec = row.pop("_key", None), row.pop("_spec", None)
            found = self.items.get(key)
            if found is None or key in seen:
                continue
            item, cell = found
            extra = dict(row.get("extra") or {})
            nodeid = item.nodeid if cell is None else cell_nodeid(item.nodeid, cell)
            extra["nodeid"], extra["cluster_worker"] = nodeid, worker or extra.get("cluster_worker", "")
            row["extra"] = extra
            if spec and row.get("spec_path"):
                self._place_spec(row, spec)
            records.append(ResultRecord.from_dict(row))
            seen.add(key)
            written.append(key)
        # one write for the chunk (a worker sends its finished rows together)
        self.s.write_rows(records)
        for r in records:
            self._count(r.outcome)
        return written

    def sync(self) -> None:
        """fsync the journal: the dispatcher calls it once for the rows that arrived together."""
        if self.s._writer is not None:
            self.s._writer.sync()

    def _place_spec(self, row: dict, spec: dict) -> None:
        """A failure's spec, dumped on the worker, written into this run's failures/ folder;
        the row's paths and replay commands name the copy."""
        from nnconform.artifacts.reportdir import atomic_write

        path = self.s._unique_failure_path(str(row.get("test_id") or "case"))
        text = str(spec.get("text", ""))
        old = str(row["spec_path"])
        text = text.replace(json.dumps(old)[1:-1], json.dumps(str(path))[1:-1])
        atomic_write(path, text)
        row["spec_path"] = str(path)
        for k in ("replay",):
            if isinstance(row.get(k), str):
                row[k] = row[k].replace(shlex.quote(old), shlex.quote(str(path))).replace(old, str(path))

    def lost_case(self, key: str, worker: str, why: str) -> None:
        from nnconform.verdict.outcome import Outcome
        from nnconform.verdict.results import ResultRecord

        item, cell = self.items[key]
        s = self.s
        nodeid = item.nodeid if cell is None else cell_nodeid(item.nodeid, cell)
        suite = Path(str(item.path)).stem.removeprefix("test_")
        callspec = getattr(item, "callspec", None)
        # the suites name a case <suite>/<parameter id>; the test itself never ran to say so
        test_id = f"{suite}/{callspec.id}" if callspec is not None else item.name
        if cell is not None:
            test_id = f"{callspec.id if callspec is not None else item.name}[{cell}]"
        replay = (
            f"nnconform run --driver {shlex.quote(s.driver_spec)} --suite {suite} --seed {s.seed} "
            f"-- {shlex.quote(item.nodeid)}" + (f" -k {shlex.quote(test_id)}" if cell is not None else "")
        )
        row = ResultRecord(
            suite=suite,
            test_id=test_id,
            driver=s.driver_spec,
            outcome=Outcome.CRASH,
            seed=s.seed,
            message=f"cluster worker {worker} was lost while running this case, after the case had "
            f"been queued again once ({why})",
            replay=replay,
            extra={
                **((cells_of(item) or {}).get(cell) or {}),
                "nodeid": nodeid,
                "cluster_worker": worker,
                "criterion": "crash",
                "incident": {"cluster_worker": worker, "why": why},
            },
        )
        s.write_row(row)
        self._count("CRASH")
        self.log(f"nnconform cluster: CRASH {nodeid}: lost with worker {worker}")

    def run(self) -> None:
        from nnconform.cluster import ClusterError

        config = self.session.config
        address = config.getoption("nn_cluster")
        try:
            handle = (_EARLY.pop(config, None) or _EarlyCluster(config)).handle()
        except ClusterError as e:
            raise pytest.UsageError(str(e)) from None
        try:
            keys = list(self.items)
            slots = handle.slots()
            size = config.getoption("nn_cluster_batch") or batch_size(len(keys), slots)
            batches = []
            for _, group in _by_file(keys):
                batches += split(group, size)
            self.log(
                f"nnconform cluster: {len(keys)} case(s) in {len(batches)} batch(es) on {address} "
                f"({len(handle.workers())} worker(s), {slots} thread(s)), seed {self.s.seed}"
            )
            d = Dispatcher(
                handle,
                run_batch,
                _payload(config, self.s),
                accept=self.accept,
                lost_case=self.lost_case,
                sync=self.sync,
                log=self.log,
                disconnect_grace_s=config.getoption("nn_cluster_grace"),
            )
            try:
                stats = d.run(batches)
            except ClusterError as e:
                # rows so far are in the journal: an interrupted run that --resume finishes
                raise self.session.Interrupted(f"nnconform cluster: {e}; --resume runs the rest") from None
            self.log(
                f"nnconform cluster: {stats.rows} row(s) from {stats.batches} batch(es) in {stats.seconds:.1f} s"
                + (f"; {stats.lost_batches} batch(es) lost with a worker" if stats.lost_batches else "")
                + (f"; {len(stats.crashed)} case(s) CRASH with their worker" if stats.crashed else "")
            )
        finally:
            handle.close()


class _EarlyCluster:
    """The cluster, started on a thread while this session collects: a LocalCluster takes
    15-30 s to start its workers (and they their imports) on a loaded machine, and collecting
    the vectors suite here takes as long; one no longer waits for the other."""

    def __init__(self, config: pytest.Config):
        self.address = config.getoption("nn_cluster")
        self.resources = config.getoption("nn_worker_resources")
        self._handle: ClusterHandle | None = None
        self._error: BaseException | None = None
        # A plain thread (it may start local Dask workers, which would inherit a blocked signal
        # mask); the session's wait for it is sliced instead (nnconform.isolation.interrupts.join).
        self._thread = threading.Thread(target=self._open, name="nnconform-cluster-start", daemon=True)
        self._thread.start()

    def _open(self) -> None:
        from nnconform.cluster.connect import open_cluster, parse_resources

        try:
            self._handle = open_cluster(self.address, parse_resources(self.resources))
            # Each worker imports what its first batch needs (pytest, the plugin, the suites'
            # imports) now, while the coordinator still collects.
            self._handle.client.run(_warm_worker)
        except BaseException as e:
            self._error = e

    def handle(self):
        interrupts.join(self._thread)
        if self._error is not None:
            if self._handle is not None:
                self._handle.close()
            raise self._error
        return self._handle

    def close(self) -> None:
        """The session ended before its test loop (collection failed, --collect-only)."""
        interrupts.join(self._thread)
        if self._handle is not None:
            self._handle.close()


_EARLY: dict = {}  # config -> _EarlyCluster


def _warm_worker() -> bool:
    import importlib

    for name in ("pytest", "nnconform.plugin", "nnconform.verdict.runner", "nnconform.isolation.proxy"):
        importlib.import_module(name)
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if config.getoption("nn_cluster") and not config.option.collectonly and config not in _EARLY:
        _EARLY[config] = _EarlyCluster(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    early = _EARLY.pop(config, None)
    if early is not None:
        early.close()


def _by_file(keys: list[str]):
    """Runs of keys of one suite file, in collection order (one pytest module per batch)."""
    out: list[tuple[str, list[str]]] = []
    for k in keys:
        f = k.partition("::")[0]
        if out and out[-1][0] == f:
            out[-1][1].append(k)
        else:
            out.append((f, [k]))
    return out


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session):
    config = session.config
    if not config.getoption("nn_cluster") or config.option.collectonly:
        return None
    if session.testsfailed and not config.option.continue_on_collection_errors:
        raise session.Interrupted(f"{session.testsfailed} error(s) during collection")
    from nnconform.plugin import _is_case

    _Coordinator(session, [it for it in session.items if _is_case(it)]).run()
    return True


# ---- worker -----------------------------------------------------------------------------------

_ONE_SESSION = threading.Lock()  # pytest's state is per process: one session at a time
_HOSTS: dict[tuple[Any, ...], Any] = {}  # (IsolatedDevice) the driver host kept between this worker's batches


def _host_key(s) -> tuple:
    return (s.driver_spec, s.call_timeout, s.mem_limit, s.in_process)


class _Rows:
    """Reads the scratch journal of a worker's session; streams new rows at most every 0.2 s."""

    def __init__(self, journal: Path, topic: str | None, batch: int, keys: Sequence[str] = ()):
        self.journal, self.topic, self.batch = journal, topic, batch
        self.offset, self.sent_at = 0, 0.0
        self.rows: list[dict] = []
        # test function -> the parameter ids of this batch: a suite with thousands of cases
        # (the vectors suite) builds only these (NnSession.only_ids)
        self.wanted: dict[str, set[str]] = {}
        for k in keys:
            name, _, param = k.partition("::")[2].rpartition("::")[2].partition("[")
            if param:
                self.wanted.setdefault(name, set()).add(param[:-1])

    def read_new(self) -> list[dict]:
        try:
            with open(self.journal, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n") + 1
        self.offset += end
        new = []
        for line in data[:end].decode("utf-8", "replace").splitlines():
            if line.strip():
                new.append(_wire_row(json.loads(line)))
        self.rows += new
        return new

    def pytest_runtest_logreport(self, report) -> None:
        import time

        if report.when != "teardown" or not self.topic:
            return
        if time.monotonic() - self.sent_at >= STREAM_EVERY_S:
            self.sent_at = time.monotonic()
            send_rows(self.topic, self.read_new(), self.batch)

    # One driver host serves this worker's batches one after the other (as one serves an xdist
    # worker's whole share): starting one costs about a second, a batch a few cases.  A host
    # that crashed or hung, or still has a call out, is closed rather than passed on.
    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config) -> None:
        from nnconform.plugin import session_of

        s = session_of(config)
        s.only_ids = self.wanted or None
        dev = _HOSTS.pop(_host_key(s), None)
        if dev is not None and s._device is None:
            s._device = dev
        elif dev is not None:
            dev.close()

    @pytest.hookimpl(tryfirst=True)
    def pytest_unconfigure(self, config) -> None:
        from nnconform.plugin import session_of

        s = session_of(config)
        dev = s._device
        if dev is not None and getattr(dev, "isolated", False) and not dev.incidents and not dev.busy_calls():
            s._device = None
            old = _HOSTS.pop(_host_key(s), None)
            if old is not None:
                old.close()
            _HOSTS[_host_key(s)] = dev

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session) -> None:
        # The scratch directory needs no status file or report per batch: the coordinator
        # writes those for the run.
        from nnconform.artifacts.reportdir import release
        from nnconform.plugin import session_of

        s = session_of(session.config)
        if s._reportdir is not None:
            release(s._reportdir)
            s._reportdir = None


def _wire_row(row: dict) -> dict:
    """A journal row as sent back: its case key, and its dumped spec's text when it has one."""
    row["_key"] = case_key(str((row.get("extra") or {}).get("nodeid", "")))
    sp = row.get("spec_path")
    if sp and os.path.isfile(sp):
        with open(sp, encoding="utf-8") as f:
            row["_spec"] = {"name": os.path.basename(sp), "text": f.read()}
    return row


def worker_args(keys: list[str], payload: dict, report_dir: Path) -> list[str]:
    from nnconform.cli import quiet_plugins, suites_dir

    sd = suites_dir()
    args: list[str] = []
    suites = set()
    for k in keys:
        f, _, rest = k.partition("::")
        # a cell's key names its batched item; the item runs the batch's cells of it only
        # (_Rows.wanted), so each item is named once
        arg = f"{sd / f}::{item_nodeid_of(rest) or rest}"
        if not args or args[-1] != arg:
            args.append(arg)
        suites.add(Path(f).stem.removeprefix("test_"))
    args += [
        "--driver",
        payload["driver"],
        "--nn-seed",
        str(payload["seed"]),
        "--nn-report-dir",
        str(report_dir),
        "-p",
        "no:cacheprovider",
        "--import-mode=importlib",
        "-q",
        "--timeout",
        "0",
        "--capture=sys",
        "--nn-progress",
        "0",
        "-p",
        "no:randomly",
        *quiet_plugins(sorted(suites), []),
    ]
    for opt, key in (
        ("--nn-vectors", "vectors"),
        ("--nn-variants", "variants"),
        ("--nn-call-timeout", "call_timeout"),
        ("--nn-mem-limit", "mem_limit"),
        ("--nn-hypothesis-profile", "hypothesis_profile"),
        ("--nn-max-examples", "max_examples"),
    ):
        if payload.get(key) is not None:
            args += [opt, str(payload[key])]
    for opt, key in (
        ("--nn-in-process", "in_process"),
        ("--nn-no-partition", "no_partition"),
        ("--nn-no-probe", "no_probe"),
    ):
        if payload.get(key):
            args.append(opt)
    if payload.get("expected_failures") is not None:
        xf = report_dir / "expected-failures.json"
        xf.write_text(payload["expected_failures"], encoding="utf-8")
        args += ["--nn-expected-failures", str(xf)]
    return args


def run_batch(keys: list[str], payload: dict, topic: str | None = None, batch: int = 0) -> dict:
    """Run one batch of conformance cases on this worker; every row comes back (also streamed)."""
    with _ONE_SESSION:
        send_started(topic, batch)
        tmp = Path(tempfile.mkdtemp(prefix="nnconform-cluster-"))
        saved = os.environ.get("NNCONFORM_AUTO_PROBE")
        # The coordinator probed (or was told not to) for the run; a batch does not probe again.
        os.environ["NNCONFORM_AUTO_PROBE"] = "0"
        # The driver hosts this batch starts know they serve a cluster worker (for tests).
        os.environ["NNCONFORM_CLUSTER_WORKER"] = worker_address() or "unknown"
        out = io.StringIO()
        try:
            rows = _Rows(tmp / "results.jsonl", topic, batch, keys)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                code = int(pytest.main(worker_args(keys, payload, tmp), plugins=[rows]))
            rows.read_new()
            error = None
            if code not in (0, 1, 5):
                tail = " | ".join(out.getvalue().strip().splitlines()[-3:])
                error = f"pytest exit status {code} on the worker: {tail[:400]}"
            return {"rows": rows.rows, "worker": worker_address(), "error": error}
        finally:
            if saved is None:
                os.environ.pop("NNCONFORM_AUTO_PROBE", None)
            else:
                os.environ["NNCONFORM_AUTO_PROBE"] = saved
            shutil.rmtree(tmp, ignore_errors=True)
