"""``--cluster`` (nnconform.cluster) on a LocalCluster: the same rows as a local run with the
same seed, nothing lost when a worker dies, --resume, the missing-extra error."""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import double

from nnconform.verdict.results import read_results

HAVE_DASK = importlib.util.find_spec("distributed") is not None
needs_dask = pytest.mark.skipif(
    not HAVE_DASK, reason='dask.distributed not installed: pip install "nnconform[cluster]"'
)

KILLER = double("broken_cluster", "KillsWorkerOnL2Pool")
SELECT = ["--", "-k", "relu1 or l2_pool"]  # 14 generated cases, one of them L2_POOL_2D
SEED = "7"


def nnconform(*args, env=None, timeout=600):
    e = dict(os.environ, NNCONFORM_AUTO_PROBE="0", **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "nnconform", *args], capture_output=True, text=True, timeout=timeout, env=e
    )


def verdicts(report_dir: Path) -> dict[str, str]:
    rows = read_results(report_dir / "results.jsonl")
    ids = [r.extra["nodeid"] for r in rows]
    assert len(ids) == len(set(ids)), "a case has two rows"
    return {r.extra["nodeid"]: r.outcome for r in rows}


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    """The killer driver run locally is the reference driver: the rows every cluster run must give."""
    d = tmp_path_factory.mktemp("local")
    r = nnconform("run", "--driver", KILLER, "--suite", "generated", "--seed", SEED, "--report-dir", str(d), *SELECT)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    got = verdicts(d)
    assert len(got) == 14 and set(got.values()) == {"PASS"}
    return got


def test_missing_extra_is_one_line(monkeypatch, capsys, tmp_path):
    from nnconform import cli

    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    code = cli.main(["run", "--suite", "generated", "--report-dir", str(tmp_path), "--cluster", "local:2"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and 'pip install "nnconform[cluster]"' in err
    assert not (tmp_path / "results.jsonl").exists()


@needs_dask
def test_bad_cluster_options_are_usage_errors(tmp_path):
    r = nnconform("run", "--report-dir", str(tmp_path), "--cluster", "local:2", "-n", "2")
    assert r.returncode == 2 and "not both" in r.stderr
    r = nnconform("run", "--report-dir", str(tmp_path), "--cluster", "local:1", "--worker-resources", "device")
    assert r.returncode == 2 and "NAME=AMOUNT" in r.stderr
    r = nnconform("run", "--report-dir", str(tmp_path), "--cluster", "local:1", "--cluster-grace", "0")
    assert r.returncode == 2 and "--cluster-grace: not a duration: '0'" in r.stderr
    r = nnconform("run", "--report-dir", str(tmp_path), "--cluster-grace", "5")
    assert r.returncode == 2 and "--cluster-grace needs --cluster" in r.stderr


@needs_dask
@pytest.mark.timeout(1200)  # four runs, two LocalClusters whose workers are killed: slow on a loaded machine
def test_killed_worker_loses_no_row_and_resume(local_run, tmp_path):
    """The first L2_POOL_2D execution kills its worker: its batch is queued again and every case
    still ends with the row the local run gave.  Then --resume of a run cut short."""
    d = tmp_path / "cluster"
    flag = tmp_path / "killed-once"
    r = nnconform(
        "run",
        "--driver",
        KILLER,
        "--suite",
        "generated",
        "--seed",
        SEED,
        "--report-dir",
        str(d),
        "--cluster",
        "local:2",
        *SELECT,
        env={"NNCONFORM_KILL_WORKER_ONCE": str(flag)},
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert flag.exists(), "the driver never killed its worker"
    assert "lost on tcp://" in r.stdout and "queued again" in r.stdout
    assert verdicts(d) == local_run
    rows = read_results(d / "results.jsonl")
    assert all(r_.extra.get("cluster_worker", "").startswith("tcp://") for r_ in rows)
    assert all(r_.seed == int(SEED) for r_ in rows)
    assert json.loads((d / "run.json").read_text())["status"] == "complete: 14 of 14 cases"

    # Cut the run short after 5 rows, as a killed coordinator leaves it; --resume finishes it.
    lines = (d / "results.jsonl").read_text().splitlines(keepends=True)
    (d / "results.jsonl").write_text("".join(lines[:5]))
    status = json.loads((d / "run.json").read_text())
    (d / "run.json").write_text(json.dumps(dict(status, status="interrupted after 5 of 14 cases")))
    shutil.rmtree(d / "failures", ignore_errors=True)
    r = nnconform(
        "run",
        "--driver",
        KILLER,
        "--suite",
        "generated",
        "--resume",
        "--report-dir",
        str(d),
        "--cluster",
        "local:2",
        *SELECT,
        env={"NNCONFORM_KILL_WORKER_ONCE": str(flag)},
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "9 case(s)" in r.stdout
    assert verdicts(d) == local_run
    assert (d / "results.jsonl").read_text().startswith("".join(lines[:5]))


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_cluster(port: int) -> list:
    """A scheduler and one worker as separate processes, as on a farm."""
    address = f"tcp://127.0.0.1:{port}"
    sched = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "distributed.cli.dask_scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-dashboard",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # no nanny: killing this process then kills the worker itself, not only its babysitter
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "distributed.cli.dask_worker",
            address,
            "--nthreads",
            "1",
            "--no-nanny",
            "--no-dashboard",
            "--death-timeout",
            "30",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return [sched, worker]


@needs_dask
@pytest.mark.timeout(900)
def test_losing_the_scheduler_interrupts_the_run_and_resume_finishes_it(tmp_path):
    """The scheduler dies mid-run: the coordinator does not wait forever on its futures; the run
    ends as interrupted (exit non-zero, one line saying why) with every row written so far
    kept, and --resume on a new cluster runs exactly the rest."""
    import time

    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = _start_cluster(port)
    d = tmp_path / "run"
    # a short grace: the default waits a minute for a scheduler that will not come back
    args = [
        "run",
        "--suite",
        "generated",
        "--seed",
        SEED,
        "--report-dir",
        str(d),
        "--cluster",
        address,
        "--cluster-grace",
        "3",
    ]
    try:
        run = subprocess.Popen(
            [sys.executable, "-m", "nnconform", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, NNCONFORM_AUTO_PROBE="0"),
        )
        journal = d / "results.jsonl"
        for _ in range(6000):  # until the first rows are on disk (or the run ended)
            if run.poll() is not None or (journal.exists() and journal.read_text().count("\n") >= 5):
                break
            time.sleep(0.05)
        assert run.poll() is None, "the run ended before the scheduler could be killed"
        procs[0].kill()
        out, err = run.communicate(timeout=600)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert run.returncode != 0
    assert "lost the connection to the scheduler" in out + err, out[-2000:] + err[-2000:]
    # the run waited out the grace it was given (or the client closed at once), no less
    waited = re.search(r"\(client (\w+) for (\d+) s\)", out + err)
    assert waited and (waited[1] == "closed" or int(waited[2]) >= 3), out[-2000:] + err[-2000:]
    kept = verdicts(d)
    assert 5 <= len(kept) < 636 and set(kept.values()) == {"PASS"}
    assert json.loads((d / "run.json").read_text())["status"].startswith("interrupted after")

    procs = _start_cluster(port)
    try:
        r = nnconform(
            "run", "--resume", "--suite", "generated", "--report-dir", str(d), "--cluster", address, timeout=800
        )
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    final = verdicts(d)
    assert len(final) == 636 and set(final.values()) == {"PASS"}
    assert all(final[k] == v for k, v in kept.items())


@needs_dask
@pytest.mark.timeout(900)
def test_case_that_always_kills_its_worker_is_a_crash_naming_it(tmp_path):
    r = nnconform(
        "run",
        "--driver",
        KILLER,
        "--suite",
        "generated",
        "--seed",
        SEED,
        "--report-dir",
        str(tmp_path),
        "--cluster",
        "local:1",
        "--",
        "-k",
        "l2_pool_2d_fp32_explicit_relu or relu1_fp32",
    )
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    rows = {x.test_id: x for x in read_results(tmp_path / "results.jsonl")}
    crash = rows.pop("generated/l2_pool_2d_fp32_explicit_relu")
    assert crash.outcome == "CRASH" and "cluster worker tcp://" in crash.message
    assert crash.extra["cluster_worker"].startswith("tcp://")
    assert "--seed 7" in crash.replay and "l2_pool_2d_fp32_explicit_relu" in crash.replay
    assert rows and {x.outcome for x in rows.values()} == {"PASS"}


@needs_dask
def test_stress_on_cluster_gives_the_local_verdicts(tmp_path):
    cases = [a for i in (0, 1) for t in ("random-model-load", "random-inference") for a in ("--case", f"{t}#{i}")]
    common = ["stress", "--driver", "reference", "--budget", "5m", "--workers", "2", "--seed", "3", "--no-probe"]
    got = {}
    for name, extra in (("local", []), ("cluster", ["--cluster", "local:2"])):
        r = nnconform(*common, "--report-dir", str(tmp_path / name), *cases, *extra)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        rows = read_results(tmp_path / name / "results.jsonl")
        got[name] = {x.test_id: (x.outcome, x.seed) for x in rows}
    assert len(got["local"]) == 4 and got["cluster"] == got["local"]
    assert all(
        x.extra["cluster_worker"].startswith("tcp://") for x in read_results(tmp_path / "cluster" / "results.jsonl")
    )


@needs_dask
def test_fuzz_on_cluster_gives_the_local_buckets(tmp_path):
    """The fragile driver's first planted bug (an OOM at case 0 of seed 3) found alike.  Only
    the first bucket is compared: after it, a local run steers at once while a chunk on the
    cluster draws with the triggers known when it was sent."""
    common = [
        "fuzz",
        "--driver",
        double("fragile", "FragileDevice"),
        "--cases",
        "6",
        "--seed",
        "3",
        "--call-timeout",
        "2",
    ]
    got = {}
    for name, extra in (("local", []), ("cluster", ["--cluster", "local:2"])):
        r = nnconform(*common, "--report-dir", str(tmp_path / name), *extra)
        assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]  # found something
        rep = json.loads((tmp_path / name / "fuzz-report.json").read_text())
        assert rep["cases"] == 6
        got[name] = [(b["verdict"], b["key"], b["first_index"]) for b in rep["buckets"]][:1]
        assert rep["kinds"] and sum(rep["kinds"].values()) == 6
    assert got["local"] and got["local"][0][0] == "OOM" and got["cluster"] == got["local"]


def test_a_streamed_row_repeated_in_the_result_is_written_once():
    """Rows stream back in chunks and every row comes again in its batch's result: the writer
    hands each case to ``accept`` once, one call per chunk, and fsyncs once per group."""
    from nnconform.cluster.dispatch import Dispatcher

    calls, syncs = [], []
    d = Dispatcher(
        None,
        None,
        {},
        accept=lambda rows, w: calls.append([r["_key"] for r in rows]) or calls[-1],
        lost_case=lambda *a: None,
        sync=lambda: syncs.append(1),
        log=lambda s: None,
    )
    d.start_writer()
    rows = [{"_key": f"k{i}", "outcome": "PASS"} for i in range(6)]
    d._accept(rows[:4], "tcp://w1", 1)  # streamed chunk
    d._settle()
    d._accept(rows, "tcp://w1", 1)  # the result: all six again
    d._settle()
    d._inbox.put(None)
    d._writer.join(timeout=10)
    assert calls == [["k0", "k1", "k2", "k3"], ["k4", "k5"]]
    assert d.done == {f"k{i}" for i in range(6)} and d.stats.rows == 6
    assert len(syncs) == 2 and d.stats.first_row_s > 0


class _FakeCompleted:
    """as_completed's surface that ``_completed`` uses: batches of (future, result) pairs."""

    def __init__(self, batches):
        import threading

        self.batches, self.thread_condition = list(batches), threading.Condition()
        self.left = sum(len(b) for b in self.batches)

    def is_empty(self):
        return self.left == 0

    def count(self):
        return self.left

    def next_batch(self, block=True):
        got = self.batches.pop(0) if self.batches else []
        self.left -= len(got)
        return got


class _Client:
    def __init__(self, status):
        self.status = status


def test_results_are_yielded_while_the_client_is_connected():
    from nnconform.cluster.dispatch import _completed

    ac = _FakeCompleted([[("f1", 1)], [], [("f2", 2), ("f3", 3)]])
    assert list(_completed(ac, _Client("running"), grace_s=0.0)) == [("f1", 1), ("f2", 2), ("f3", 3)]


@pytest.mark.parametrize("status", ["closed", "connecting"])
def test_a_client_that_lost_its_scheduler_ends_the_dispatch_instead_of_waiting_forever(status):
    """The coordinator once hung on futures of a scheduler it had lost; now a closed client,
    or one still reconnecting after the grace period, is a ClusterError naming what is left."""
    from nnconform.cluster import ClusterError
    from nnconform.cluster.dispatch import _completed

    ac = _FakeCompleted([[("f1", 1)], [], [], [("f2", 2)]])  # f2 would never come
    gen = _completed(ac, _Client(status), grace_s=0.0)
    assert next(gen) == ("f1", 1)
    with pytest.raises(ClusterError, match=f"lost the connection to the scheduler \\(client {status}.*1 batch"):
        next(gen)


def _worker_settings() -> dict:
    import dask

    return {
        "profile": dask.config.get("distributed.worker.profile.enabled"),
        "log": dask.config.get("distributed.logging.distributed"),
    }


@needs_dask
def test_local_workers_run_without_the_sampling_profiler():
    """Dask's profiler sampled a batch's deep pytest stacks every 10 ms (a worker's CPU for the
    same cases +50 %): local:N workers have it off, and log only critical errors."""
    from nnconform.cluster.connect import open_cluster

    handle = open_cluster("local:1")
    try:
        got = list(handle.client.run(_worker_settings).values())
    finally:
        handle.close()
    assert got == [{"profile": False, "log": "critical"}]
