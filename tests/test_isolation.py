"""Driver isolation, end to end, with deliberately hostile drivers (tests/drivers/broken_isolation.py).

Each hostile driver strikes only on the generated suite's FLOOR cases.  For each one, as a user
runs it (``nnconform run --suite generated`` in a subprocess): the FLOOR cases get the right
verdict, every other case the reference driver's outcome, report.html exists with the run's
status, the exit code is non-zero, and no process of the run is left behind.
"""

from __future__ import annotations

import csv
import ctypes
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
from helpers import double

HOSTILE = double("broken_isolation")
FLOOR_CASES = {"generated/floor_fp32", "generated/floor_fp16"}
# The hostile drivers run a slice of the generated suite: the FLOOR cases where they strike,
# cases of several types before them and cases after them (FLOOR is near the suite's end: ELU
# and HARD_SWISH follow it), so "the run goes on" is still checked after each strike.  The
# whole suite (636 cases) cost each of these runs ~5 s more and showed nothing the slice does
# not; the scribbling driver, whose harm could land in any operation, still runs all of it.
SLICE = "add_fp32 or relu6 or softmax_quant8 or floor or elu or hard_swish"
CALL_TIMEOUT = "10"  # seconds: the HANG drivers are caught at this bound; generous, so a busy machine never turns a slow honest call into a HANG


def run_cli(*args, env=None, timeout=600, preexec_fn=None):
    return subprocess.run(
        [sys.executable, "-m", "nnconform", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        preexec_fn=preexec_fn,
    )


def rows(report_dir: Path) -> list[dict]:
    with open(report_dir / "results.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def with_default_signals(*args: str, ignored: tuple = ()) -> list[str]:
    """`python -m nnconform *args`, started with SIGINT, SIGTERM and SIGHUP at their defaults
    (bar ``ignored``), whatever this process inherited: a shell without job control starts a
    background job with SIGINT ignored (``cmd &`` in a script), Python then leaves it ignored,
    and a Ctrl-C test run that way sent its SIGINT into nothing.  A small Python sets them and
    execs nnconform (dispositions set to default or ignore survive exec); a preexec_fn would
    force a plain fork, which JAX, imported by other tests in this worker, warns about."""
    setup = (
        "import os, signal, sys\n"
        "for s in ('SIGINT', 'SIGTERM', 'SIGHUP'):\n"
        "    signal.signal(getattr(signal, s), signal.SIG_IGN if s in sys.argv[1].split(',') else signal.SIG_DFL)\n"
        "os.execv(sys.executable, [sys.executable, '-m', 'nnconform', *sys.argv[2:]])\n"
    )
    return [sys.executable, "-c", setup, ",".join(signal.Signals(s).name for s in ignored), *args]


def marked_env() -> tuple[dict, str]:
    """An environment with a unique marker: every process the run starts inherits it, so any
    survivor can be found in /proc afterwards."""
    mark = uuid.uuid4().hex
    return dict(os.environ, NNCONFORM_TEST_MARK=mark), mark


def survivors(mark: str) -> list[str]:
    found = []
    needle = f"NNCONFORM_TEST_MARK={mark}".encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle in f.read():
                    with open(f"/proc/{pid}/cmdline", "rb") as c:
                        cmd = c.read().replace(b"\0", b" ").decode(errors="replace")[:100]
                    found.append(f"{pid}: {cmd}")
        except OSError:
            continue  # gone, or a zombie (no environ): not running
    return found


def no_survivors(mark: str) -> list[str]:
    # A SIGKILLed process can take a moment to leave the process table.
    for _ in range(50):
        left = survivors(mark)
        if not left:
            return []
        time.sleep(0.1)
    return left


def _reference_outcomes(d: Path, *pytest_args: str) -> dict[str, str]:
    r = run_cli(
        "run", "--driver", "reference", "--suite", "generated", "--report-dir", str(d), "--seed", "11", *pytest_args
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return {row["test_id"]: row["outcome"] for row in rows(d)}


@pytest.fixture(scope="module")
def reference_outcomes(tmp_path_factory) -> dict[str, str]:
    """The reference's outcome of every generated case."""
    return _reference_outcomes(tmp_path_factory.mktemp("reference"))


@pytest.fixture(scope="module")
def slice_outcomes(tmp_path_factory) -> dict[str, str]:
    """The reference's outcomes of SLICE: before, at and after the FLOOR cases."""
    got = _reference_outcomes(tmp_path_factory.mktemp("reference-slice"), "--", "-k", SLICE)
    ids = list(got)
    first, last = min(ids.index(t) for t in FLOOR_CASES), max(ids.index(t) for t in FLOOR_CASES)
    assert first >= 5 and len(ids) - last >= 5, f"SLICE must have cases on both sides of FLOOR: {ids}"
    return got


# driver, verdict of the FLOOR cases, a fragment of their message
CASES = [
    ("Segfault", "CRASH", "killed by SIGSEGV"),
    ("ExitZero", "CRASH", "exited with code 0"),
    ("GarblesPipe", "CRASH", "broke the wire protocol"),
    ("SysExit", "FAIL", "SystemExit: 3"),
    ("KeyboardInterrupts", "FAIL", "KeyboardInterrupt"),
    ("HangsInExecute", "HANG", "execute did not return within 10 s"),
    ("HangsInPrepare", "HANG", "prepare did not return within 10 s"),
    ("Allocates30GB", "FAIL", "MemoryError"),
    ("LyingArray", "FAIL", "actual 0, |diff|"),
    ("PatchesNnconform", "FAIL", "actual 0, |diff|"),
    ("ForksChild", "FAIL", "left 1 process(es) running"),
    ("SetsidChild", "FAIL", "left 1 process(es) running"),
    ("DoubleForks", "FAIL", "process(es) running"),
]


@pytest.mark.parametrize("driver,verdict,fragment", CASES, ids=[c[0] for c in CASES])
def test_hostile_driver_gets_its_verdict_and_the_run_goes_on(driver, verdict, fragment, tmp_path, slice_outcomes):
    env, mark = marked_env()
    r = run_cli(
        "run",
        "--driver",
        HOSTILE + driver,
        "--suite",
        "generated",
        "--report-dir",
        str(tmp_path),
        "--seed",
        "11",
        "--call-timeout",
        CALL_TIMEOUT,
        "--",
        "-k",
        SLICE,
        env=env,
    )
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    got = {row["test_id"]: row for row in rows(tmp_path)}
    assert set(got) == set(slice_outcomes), "every case has exactly one row"
    for tid in FLOOR_CASES:
        assert got[tid]["outcome"] == verdict, got[tid]
        assert fragment in got[tid]["message"], got[tid]["message"]
        if verdict in ("CRASH", "HANG"):
            assert "liveness OK" in got[tid]["message"], got[tid]["message"]
            assert got[tid]["spec_path"] and Path(got[tid]["spec_path"]).exists()
    others = {tid: row["outcome"] for tid, row in got.items() if tid not in FLOOR_CASES}
    assert others == {tid: o for tid, o in slice_outcomes.items() if tid not in FLOOR_CASES}
    status = json.loads((tmp_path / "run.json").read_text())["status"]
    assert status.startswith("complete"), status
    assert "Run status: complete" in (tmp_path / "report.html").read_text()
    assert no_survivors(mark) == []


def test_scribbling_on_inputs_harms_nobody(tmp_path, reference_outcomes):
    """The driver zeroes its input arrays after every execution where it can make them
    writable; in its host they are read-only views of the request pool, which numpy will not
    make writable, so it gives up, every case has the reference outcome and the dumps are
    untouched (a driver that writes anyway is tests/test_pools.py's inputs_unchanged)."""
    env, mark = marked_env()
    r = run_cli(
        "run",
        "--driver",
        HOSTILE + "ScribblesInputs",
        "--suite",
        "generated",
        "--report-dir",
        str(tmp_path),
        "--seed",
        "11",
        env=env,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert {row["test_id"]: row["outcome"] for row in rows(tmp_path)} == reference_outcomes
    assert no_survivors(mark) == []


def test_in_process_mode_is_recorded(tmp_path):
    r = run_cli(
        "run",
        "--driver",
        "reference",
        "--suite",
        "generated",
        "--report-dir",
        str(tmp_path),
        "--in-process",
        "--",
        "-k",
        "relu",
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    got = rows(tmp_path)
    assert got and all(json.loads(row["extra"])["isolation"] == "in-process" for row in got)
    assert "in-process" in (tmp_path / "report.html").read_text()
    assert "in-process" in json.loads((tmp_path / "run.json").read_text())["isolation"]


# ---- replay ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def floor_spec(tmp_path_factory) -> Path:
    """A dumped failure of the FLOOR case, to replay against each hostile driver."""
    d = tmp_path_factory.mktemp("floor")
    r = run_cli(
        "run",
        "--driver",
        HOSTILE + "LyingArray",
        "--suite",
        "generated",
        "--report-dir",
        str(d),
        "--",
        "-k",
        "floor_fp32",
    )
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    (row,) = [row for row in rows(d) if row["test_id"] == "generated/floor_fp32"]
    return Path(row["spec_path"])


@pytest.mark.parametrize("driver,verdict,fragment", CASES, ids=[c[0] for c in CASES])
def test_replay_of_a_hostile_driver(driver, verdict, fragment, floor_spec):
    env, mark = marked_env()
    r = run_cli(
        "replay", str(floor_spec), "--driver", HOSTILE + driver, "--call-timeout", CALL_TIMEOUT, env=env, timeout=300
    )
    assert r.returncode == 1, r.stdout + r.stderr
    if verdict in ("CRASH", "HANG"):
        assert f": {verdict}:" in r.stdout and "liveness OK" in r.stdout, r.stdout
    elif "process(es)" in fragment:
        assert "left" in r.stdout and "process(es) running" in r.stdout, r.stdout
    else:
        assert ": FAIL:" in r.stdout and fragment in r.stdout, r.stdout
    assert "Traceback" not in r.stderr
    assert no_survivors(mark) == []


def test_replay_on_reference_still_passes(floor_spec):
    r = run_cli("replay", str(floor_spec), "--driver", "reference")
    assert r.returncode == 0 and ": PASS" in r.stdout, r.stdout + r.stderr


# ---- pytest -n 2 -------------------------------------------------------------------------


@pytest.mark.parametrize("driver,verdict", [("Segfault", "CRASH"), ("SetsidChild", "FAIL"), ("HangsInExecute", "HANG")])
def test_pytest_xdist_with_a_hostile_driver(driver, verdict, tmp_path, slice_outcomes):
    """`pytest --driver X -n 2`: one host per worker, every row in one journal, one report."""
    env, mark = marked_env()
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--pyargs",
            "nnconform.suites.test_generated",
            "--driver",
            HOSTILE + driver,
            "--nn-report-dir",
            str(tmp_path),
            "--nn-seed",
            "11",
            "--nn-call-timeout",
            CALL_TIMEOUT,
            "-n",
            "2",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            SLICE,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=tmp_path,
    )
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    journal = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(journal) == len(slice_outcomes), "no row lost, none twice"
    got = {row["test_id"]: row["outcome"] for row in rows(tmp_path)}
    assert {tid: got[tid] for tid in FLOOR_CASES} == {tid: verdict for tid in FLOOR_CASES}
    assert {t: o for t, o in got.items() if t not in FLOOR_CASES} == {
        t: o for t, o in slice_outcomes.items() if t not in FLOOR_CASES
    }
    assert "Run status: complete" in (tmp_path / "report.html").read_text()
    assert no_survivors(mark) == []


# ---- the report directory ------------------------------------------------------------------


def test_second_run_into_a_busy_report_dir_fails_in_one_line(tmp_path):
    from nnconform.artifacts.reportdir import ReportDir

    holder = ReportDir(tmp_path)
    holder.lock()
    try:
        r = run_cli("run", "--driver", "reference", "--suite", "generated", "--report-dir", str(tmp_path))
    finally:
        holder.unlock()
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "in use by another nnconform run" in r.stderr, r.stderr


def test_a_new_run_rotates_the_previous_results(tmp_path):
    for seed in ("1", "2"):
        r = run_cli(
            "run",
            "--driver",
            HOSTILE + "LyingArray",
            "--suite",
            "generated",
            "--report-dir",
            str(tmp_path),
            "--seed",
            seed,
            "--",
            "-k",
            "floor or relu",
        )
        assert r.returncode == 1, r.stderr
    (prev,) = list((tmp_path / "previous").iterdir())
    old = [json.loads(line) for line in (prev / "results.jsonl").read_text().splitlines()]
    assert old and {row["seed"] for row in old} == {1}
    assert (prev / "report.html").exists() and any((prev / "failures").iterdir())
    new = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert {row["seed"] for row in new} == {2} and len(new) == len(old)
    assert "moved to" in r.stdout


def test_ctrl_c_writes_an_interrupted_report_and_resume_finishes_the_run(tmp_path):
    env, mark = marked_env()
    args = [
        "run",
        "--driver",
        HOSTILE + "HangsInExecute",
        "--suite",
        "generated",
        "--report-dir",
        str(tmp_path),
        "--seed",
        "5",
        "--call-timeout",
        "120",
        "--",
        "-k",
        SLICE,
    ]
    p = subprocess.Popen(
        with_default_signals(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    # Wait until the run is stuck in the hanging FLOOR case, then press Ctrl-C.
    journal = tmp_path / "results.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if journal.exists() and journal.stat().st_size > 0 and p.poll() is None:
            break
        time.sleep(0.2)
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 3, out[-2000:] + err[-2000:]
    status = json.loads((tmp_path / "run.json").read_text())
    assert status["status"].startswith("interrupted after"), status
    done_before = len(journal.read_text().splitlines())
    assert 0 < done_before < status["planned"]
    assert "Run status: interrupted" in (tmp_path / "report.html").read_text()
    assert no_survivors(mark) == []

    r = run_cli(
        "run",
        "--driver",
        HOSTILE + "HangsInExecute",
        "--suite",
        "generated",
        "--report-dir",
        str(tmp_path),
        "--resume",
        "--call-timeout",
        CALL_TIMEOUT,
        env=env,
    )
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    final = json.loads((tmp_path / "run.json").read_text())
    assert final["status"].startswith("complete"), final
    assert final["seed"] == 5
    ids = [json.loads(line)["extra"]["nodeid"] for line in journal.read_text().splitlines()]
    assert len(set(ids)) == final["planned"], "every case recorded once after resuming"
    assert not (tmp_path / "previous").exists(), "resume keeps the run's own files"
    assert no_survivors(mark) == []


def _start_stuck_run(tmp_path, env, ignored: tuple = ()):
    """`nnconform run` of 14 passing cases, then FLOOR's execute hanging under a 600 s bound;
    returns once the 14 rows are recorded (the run is then in, or entering, the hanging call).
    The process is nnconform's own (the signal set-up execs it: same pid)."""
    p = subprocess.Popen(
        with_default_signals(
            "run",
            "--driver",
            HOSTILE + "HangsInExecute",
            "--suite",
            "generated",
            "--report-dir",
            str(tmp_path),
            "--seed",
            "5",
            "--call-timeout",
            "600",
            "--",
            "-k",
            "relu6 or floor",
            ignored=ignored,
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    journal = tmp_path / "results.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and p.poll() is None:
        if journal.exists() and len(journal.read_text().splitlines()) >= 14:
            break
        time.sleep(0.2)
    time.sleep(1.0)
    return p


def _ended(p) -> tuple[str, str]:
    """The stuck run's output once it has ended (killed if it has not within 120 s, which a
    600 s call bound cannot explain: the signal was not acted on)."""
    try:
        return p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()


def _interrupted_before_the_hanging_call(tmp_path, mark) -> None:
    status = json.loads((tmp_path / "run.json").read_text())
    assert status["status"].startswith("interrupted after 14 of"), status
    assert "Run status: interrupted" in (tmp_path / "report.html").read_text()
    outcomes = [json.loads(line)["outcome"] for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert outcomes == ["PASS"] * 14, "the hanging call was interrupted, not judged"
    assert no_survivors(mark) == []


def _blocked_signals(pid: int, tid: int) -> int:
    with open(f"/proc/{pid}/task/{tid}/status") as f:
        return int(next(line for line in f if line.startswith("SigBlk:")).split()[1], 16)


def test_ctrl_c_taken_by_a_helper_thread_still_stops_a_run_stuck_in_a_driver_call(tmp_path):
    """The kernel gives a process-wide SIGINT to any thread not blocking it, and passes over the
    main thread when that one has a signal pending.  Python acts on it only in the main thread,
    which sat in its wait for the hanging driver until the call bound ran out: the interrupt
    came after a HANG verdict, minutes late.  Here the run is stuck in FLOOR's hanging execute
    with a 600 s bound.  Its helper threads (the host's reply reader and deadline monitor) must
    block SIGINT, and a SIGINT sent straight to a thread that does not block it (OpenBLAS's
    worker, started by numpy before any harness code runs) must still stop the run now."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "tgkill"):
        pytest.skip("this C library has no tgkill(): a signal cannot be aimed at one thread")
    env, mark = marked_env()
    env["NNCONFORM_AUTO_PROBE"] = "0"
    p = _start_stuck_run(tmp_path, env)
    try:
        assert p.poll() is None, p.communicate()[1][-2000:]
        others = [int(t) for t in os.listdir(f"/proc/{p.pid}/task") if int(t) != p.pid]
        sigint = 1 << (signal.SIGINT - 1)
        blocked = [t for t in others if _blocked_signals(p.pid, t) & sigint]
        assert len(blocked) >= 2, f"threads {others}: only {blocked} block SIGINT"
        open_ = [t for t in others if t not in blocked]
        if not open_:
            pytest.skip(
                "every thread of the run but the main one blocks SIGINT (no BLAS worker thread "
                "here), so the kernel can only give Ctrl-C to the main thread"
            )
        assert libc.tgkill(p.pid, open_[0], signal.SIGINT) == 0, os.strerror(ctypes.get_errno())
    except BaseException:
        p.kill()
        p.communicate()
        raise
    out, err = _ended(p)
    assert p.returncode == 3, out[-2000:] + err[-2000:]
    _interrupted_before_the_hanging_call(tmp_path, mark)


def test_sigterm_ends_a_run_as_interrupted_and_nohup_keeps_sighup_ignored(tmp_path):
    """A nightly job's `timeout` sends SIGTERM; a closed terminal, SIGHUP.  Either ends the run
    as Ctrl-C does (interrupted report, exit 3, --resume-able), except a SIGHUP that the run
    was started ignoring (nohup), which stays ignored.  Before, SIGTERM ended the process with
    report.html and run.json still saying "running"."""
    env, mark = marked_env()
    env["NNCONFORM_AUTO_PROBE"] = "0"
    p = _start_stuck_run(tmp_path, env, ignored=(signal.SIGHUP,))
    assert p.poll() is None, p.communicate()[1][-2000:]
    p.send_signal(signal.SIGHUP)  # ignored, as nohup wants
    p.send_signal(signal.SIGTERM)
    out, err = _ended(p)
    assert p.returncode == 3, out[-2000:] + err[-2000:]
    assert "nnconform: SIGTERM: stopping the run as Ctrl-C would" in err and "SIGHUP" not in err, err[-2000:]
    _interrupted_before_the_hanging_call(tmp_path, mark)


def test_symlinks_in_the_report_dir_are_replaced_not_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    report = tmp_path / "report"
    report.mkdir()
    for name in ("report.html", "results.csv", "run.json"):
        (report / name).symlink_to(victim)
    (report / "failures").symlink_to(tmp_path)
    r = run_cli(
        "run",
        "--driver",
        HOSTILE + "LyingArray",
        "--suite",
        "generated",
        "--report-dir",
        str(report),
        "--",
        "-k",
        "floor",
    )
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    assert victim.read_text() == "precious"
    assert not (report / "report.html").is_symlink() and (report / "report.html").stat().st_size > 0
    assert not any(p.name.endswith(".spec.json") for p in tmp_path.iterdir())


def test_resume_refuses_a_symlinked_journal_in_one_line(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    report = tmp_path / "report"
    report.mkdir()
    (report / "run.json").write_text(
        json.dumps(
            {
                "status": "interrupted after 1 of 9 cases",
                "driver": "reference",
                "seed": 3,
                "started": "2026-01-01T00:00:00+00:00",
            }
        )
    )
    (report / "results.jsonl").symlink_to(victim)
    r = run_cli(
        "run",
        "--driver",
        "reference",
        "--suite",
        "generated",
        "--report-dir",
        str(report),
        "--resume",
        "--",
        "-k",
        "relu",
    )
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    assert "symbolic link" in r.stdout + r.stderr and "Traceback" not in r.stderr
    assert victim.read_text() == "precious"


def _limit_file_size():
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))


def test_full_disk_is_one_line_and_rows_stay_valid(tmp_path):
    """A file-size limit makes writes fail the way a full disk does (Python ignores SIGXFSZ)."""
    r = run_cli(
        "run",
        "--driver",
        "reference",
        "--suite",
        "generated",
        "--report-dir",
        str(tmp_path),
        preexec_fn=_limit_file_size,
    )
    assert r.returncode == 3, r.stdout[-2000:] + r.stderr[-2000:]
    assert "cannot write to" in r.stdout + r.stderr and "Traceback" not in r.stderr
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert lines and all(json.loads(line)["outcome"] == "PASS" for line in lines)
    assert json.loads((tmp_path / "run.json").read_text())["status"].startswith("interrupted")


def test_read_only_report_dir_is_one_line(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    if (
        subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)], capture_output=True).returncode
        != 0
    ):
        pytest.skip("cannot mount a read-only tmpfs here (needs root with CAP_SYS_ADMIN)")
    try:
        r = run_cli("run", "--driver", "reference", "--suite", "generated", "--report-dir", str(ro / "out"))
    finally:
        subprocess.run(["umount", str(ro)], check=True)
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    assert r.stderr.strip().count("\n") == 0 and "read-only" in r.stderr, r.stderr


def test_unknown_driver_is_one_line_and_never_imported_into_the_harness(tmp_path):
    r = run_cli("run", "--driver", "no.such.module:Device", "--report-dir", str(tmp_path))
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "cannot import" in r.stderr, r.stderr


@pytest.mark.parametrize(
    "extra,hosts",
    [([], 1), (["--call-timeout", "30"], 1), (["-n", "2"], 3), (["--", "-n", "2"], 3)],
    ids=["plain", "call-timeout", "workers", "xdist-after-dashes"],
)
def test_the_driver_loads_once_per_host_and_the_checking_host_is_the_run_s(tmp_path, extra, hosts):
    """``nnconform run`` loads the driver in a host before pytest starts (a one-line error
    before the report directory is touched); a run in that process keeps that host instead of
    starting a second.  With workers, each starts its own and the checking host is closed.
    Counted by the driver's own import-time code, and nothing of the run is left running."""
    log = tmp_path / "imports.txt"
    (tmp_path / "counting_driver.py").write_text(
        textwrap.dedent(f"""
        import os
        from nnconform.drivers.reference import ReferenceDevice
        with open({str(log)!r}, "a") as f:
            f.write(f"{{os.getpid()}}\\n")
        class Counting(ReferenceDevice):
            pass
    """)
    )
    env, mark = marked_env()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tmp_path), env.get("PYTHONPATH")) if p)
    report = tmp_path / "report"
    args = [
        "run",
        "--driver",
        "counting_driver:Counting",
        "--suite",
        "generated",
        "--report-dir",
        str(report),
        "--seed",
        "3",
        *extra,
    ]
    if "--" not in extra:
        args += ["--"]
    r = run_cli(*args, "-k", "floor_fp32 or relu_fp32", env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert {row["outcome"] for row in rows(report)} == {"PASS"} and len(rows(report)) >= 2
    pids = log.read_text().split()
    assert len(pids) == hosts and len(set(pids)) == hosts, pids
    assert no_survivors(mark) == []


def test_replay_of_a_runaway_allocation_is_bounded(tmp_path):
    """A tiny spec whose FILL asks for 10 GB: replay runs it in the driver host under the
    memory limit, so it is a one-line FAIL, not a harness killed by the OOM killer."""
    import numpy as np

    from nnconform.ir import ModelBuilder
    from nnconform.ir import OperandType as T
    from nnconform.ir import OperationType as Op
    from nnconform.ir.spec import SpecExample, SpecFile, dump_spec

    b = ModelBuilder()
    x = b.input(T.TENSOR_INT32, [2])
    y = b.output(T.TENSOR_FLOAT32, [0, 0])
    b.operation(Op.FILL, [x, b.f32(1.0)], [y])
    spec = tmp_path / "fill.spec.json"
    dump_spec(
        SpecFile(
            b.build(), [SpecExample("huge", [np.array([50000, 50000], np.int32)], [np.zeros((1, 1), np.float32)])], {}
        ),
        spec,
    )
    assert spec.stat().st_size < 2000
    env, mark = marked_env()
    r = run_cli("replay", str(spec), "--driver", "reference", "--mem-limit", "2G", env=env, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    assert ": FAIL:" in r.stdout and ("MemoryError" in r.stdout or "memory" in r.stdout.lower()), r.stdout
    assert "Traceback" not in r.stderr
    assert no_survivors(mark) == []


def test_failures_whose_names_clean_alike_get_separate_dumps(tmp_path):
    """Two test ids that differ only in characters a file name cannot keep must not
    overwrite each other's dumped spec."""
    suite = tmp_path / "test_collide.py"
    suite.write_text(
        "import numpy as np, pytest\n"
        "from nnconform.verdict.runner import Case, CaseOutcome\n"
        "from helpers_collide import relu\n"
        "@pytest.mark.parametrize('tid', ['dup/case', 'dup:case'])\n"
        "def test_case(tid, nn_session, nn_record):\n"
        "    nn_record.update(suite='collide', test_id=tid)\n"
        "    model, x = relu()\n"
        "    nn_session.conclude(nn_record, CaseOutcome('FAIL', f'planted failure of {tid}', 'compare'),\n"
        "                        Case(tid, model, [x], [x]))\n"
    )
    (tmp_path / "helpers_collide.py").write_text(
        "import numpy as np\n"
        "from nnconform.ir import ModelBuilder, OperandType as T, OperationType as Op\n"
        "def relu():\n"
        "    b = ModelBuilder(); x = b.input(T.TENSOR_FLOAT32, [2]); y = b.output(T.TENSOR_FLOAT32, [2])\n"
        "    b.operation(Op.RELU, [x], [y])\n"
        "    return b.build(), np.array([1, -1], np.float32)\n"
    )
    report = tmp_path / "report"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(suite),
            "--nn-report-dir",
            str(report),
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    specs = sorted((report / "failures").glob("*.spec.json"))
    assert len(specs) == 2, specs
    messages = {json.loads(p.read_text())["meta"]["message"] for p in specs}
    assert messages == {"planted failure of dup/case", "planted failure of dup:case"}


def test_reply_headers_nested_too_deep_are_a_protocol_violation_however_they_are_checked():
    """A reply header's nesting is bounded (hostproto._MAX_DEPTH), whether the header has few
    brackets (counted, no walk) or many (walked byte by byte)."""
    from nnconform.isolation import hostproto as wire

    limit = wire._MAX_DEPTH
    ok = ("[" * limit + "1" + "]" * limit).encode()
    assert wire.parse_json(ok) == eval("[" * limit + "1" + "]" * limit)
    with pytest.raises(wire.ProtocolViolation, match="nested deeper"):
        wire.parse_json(("[" * (limit + 1) + "1" + "]" * (limit + 1)).encode())
    # many brackets, none deep: walked, and accepted
    wide = json.dumps({"outputs": [[i] for i in range(3 * limit)]}).encode()
    assert wire.parse_json(wide)["outputs"][5] == [5]
    # few brackets and shallow: counted only, and still strict about the rest
    assert wire.parse_json(b'{"ok": [1, 2]}') == {"ok": [1, 2]}
    with pytest.raises(wire.ProtocolViolation, match="NaN in a reply"):
        wire.parse_json(b'{"ok": NaN}')


def test_a_closed_host_never_touches_a_reused_descriptor():
    """After close() the old host's reader has ended and its writers are refused: the pipe
    numbers it held go to the next pipes opened (the next host's), where a late read would
    steal that host's replies and a late write would land in its requests."""
    import select

    from nnconform.isolation import hostproto as wire
    from nnconform.isolation.proxy import IsolatedDevice

    dev = IsolatedDevice("reference")
    h = dev._current
    dev.capabilities()
    old_req, old_res = h.req_fd, h.res_fd
    dev.close()
    assert not h.thread.is_alive()
    fresh = [os.pipe() for _ in range(4)]  # likely to be given the old numbers again
    try:
        h.notify("drop", {"handles": [1]})  # a late notice from another thread: dropped
        # a writer that checked the host was alive just before close(): refused, not written
        with pytest.raises(BrokenPipeError):
            h._write(wire.encode_call(99, "capabilities", {}))
        for r, w in fresh:
            assert select.select([r], [], [], 0)[0] == [], "a closed host wrote into a reused pipe"
        reused = {old_req, old_res} & {fd for pair in fresh for fd in pair}
        assert reused, "the test meant to reuse the closed host's descriptor numbers"
    finally:
        for r, w in fresh:
            os.close(r)
            os.close(w)


def test_call_frames_carry_small_and_big_arguments_and_a_cut_frame_is_a_violation():
    """harness -> host frames (one pickle a call): a small call, a call bigger than the pipe
    buffer (written as two parts, read in place), and a frame cut short by a closing pipe."""
    import threading

    from nnconform.isolation import hostproto as wire

    big = np.arange(3 << 20, dtype=np.uint8)  # 3 MiB: several pipe buffers, read in place
    r, w = os.pipe()
    frames = [wire.encode_call(1, "status", {}), wire.encode_call(2, "execute", {"x": big})]
    assert [len(f) for f in frames] == [1, 2]

    def write():
        for f in frames:
            wire.send_call(w, f)
        os.write(w, wire.encode_call(3, "status", {})[0][:5])  # a frame cut short
        os.close(w)

    t = threading.Thread(target=write)
    t.start()
    got = wire.FrameReader(r).calls()
    assert next(got) == (1, "status", {})
    call_id, op, args = next(got)
    assert (call_id, op) == (2, "execute") and np.array_equal(args["x"], big)
    with pytest.raises(wire.ProtocolViolation, match="middle of a frame"):
        next(got)
    t.join()
    os.close(r)
