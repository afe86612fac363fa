"""What nnconform tells about a run must be true (issue 46): the terminal ends with the digest,
buckets are keyed on the defect, crashes carry their stack, partial drivers are not green."""

import subprocess
import sys

from helpers import double

from nnconform.reports import triage
from nnconform.verdict.results import ResultRecord


def nnconform(*args, cwd=None, timeout=900):
    return subprocess.run(
        [sys.executable, "-m", "nnconform", *args], capture_output=True, text=True, cwd=cwd, timeout=timeout
    )


def row(test_id, message, *, suite="vectors", ops=("CONV_2D",), types=("fp32",), outcome="FAIL", **kw):
    return ResultRecord(
        suite=suite,
        test_id=test_id,
        driver="d",
        operations=list(ops),
        data_types=list(types),
        outcome=outcome,
        duration_s=0.0,
        seed=1,
        message=message,
        **kw,
    )


MISMATCH = "output 0 (TENSOR_FLOAT32 [1, 3, 4, 1]) index [0, 0, 0, {i}]: expected {i}, actual 105, |diff| 105 > atol 1"


def test_one_bug_is_one_bucket_whatever_the_message_says():
    rows = [
        row("V1_0/conv_float_2", "[CONV_2D] " + MISMATCH.format(i=0), extra={"criterion": "element: atol 1e-05"}),
        # a variant's message carries its variant name and no criterion label
        row("V1_0/conv[deadline-5ms]", "[deadline-5ms] " + MISMATCH.format(i=3), extra={"criterion": "compare"}),
        # vts checks: one names the operation, one the example model; neither has operations
        row(
            "vts/quant_coupling/x",
            "twin of conv_2d_x disagrees: [CONV_2D] " + MISMATCH.format(i=1),
            suite="vts",
            ops=(),
            types=(),
        ),
        row("vts/optional/async", "conv_2d_valid_2x2_fp32: " + MISMATCH.format(i=2), suite="vts", ops=(), types=()),
    ]
    got = triage.buckets(rows)
    assert [(b.operation, b.data_type, b.criterion, b.count) for b in got] == [("CONV_2D", "fp32", "wrong values", 4)]


def test_unattributed_checks_and_other_defects_stay_apart():
    rows = [
        row("vts/capabilities", "capability 3 is negative", suite="vts", ops=(), types=()),
        row("vts/cache_token", "token size 0 accepted", suite="vts", ops=(), types=()),
        row("V1_0/add", "driver raised in execute on [ADD]: ValueError: bad", ops=("ADD",)),
        row("V1_0/add_2", "driver raised in execute on [ADD]: ValueError: other text 7", ops=("ADD",)),
        row("V1_0/add_3", "[ADD] " + MISMATCH.format(i=0), ops=("ADD",)),
    ]
    got = {(b.operation, b.criterion): b.count for b in triage.buckets(rows)}
    assert got == {
        ("ADD", "raised ValueError in execute"): 2,
        ("ADD", "wrong values"): 1,
        (triage.UNATTRIBUTED, "fail (vts/capabilities)"): 1,
        (triage.UNATTRIBUTED, "fail (vts/cache_token)"): 1,
    }


def test_every_bucket_has_a_replay_command_or_says_why_not():
    with_spec = row("V1_0/a", "x", replay="nnconform replay failures/a.spec.json --driver d")
    check = row("vts/optional/async", "y", suite="vts", ops=(), extra={"nodeid": "suites/test_vts.py::test_async"})
    bare = row("vts/caps", "z", suite="vts", ops=())
    buckets = {b.rows[0].test_id: b for b in triage.buckets([with_spec, check, bare])}
    assert buckets["V1_0/a"].replay == "nnconform replay failures/a.spec.json --driver d"
    assert buckets["vts/optional/async"].replay == "nnconform run --suite vts --driver d -- -k test_async"
    assert buckets["vts/caps"].replay == "" and buckets["vts/caps"].no_replay.startswith("no replay:")


def test_crashes_bucket_on_signal_and_driver_frame():
    def crash(tid, frame, sig=6):
        return row(
            tid, f"driver host died {tid}", outcome="CRASH", extra={"incident": {"signal": sig}, "stack": [frame]}
        )

    got = triage.buckets([crash("a", "drv.py:12 in run"), crash("b", "drv.py:12 in run"), crash("c", "drv.py:40 in x")])
    assert [(b.criterion, b.count) for b in got] == [
        ("crash SIGABRT at drv.py:12 in run", 2),
        ("crash SIGABRT at drv.py:40 in x", 1),
    ]


def test_terminal_ends_with_the_digest_and_caps_failure_blocks(tmp_path):
    r = nnconform(
        "run",
        "--driver",
        double("broken", "RaisesPlainError"),
        "--suite",
        "generated",
        "--report-dir",
        str(tmp_path / "r"),
        "--seed",
        "3",
        cwd=tmp_path,
    )
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    lines = r.stdout.splitlines()
    failed = sum(1 for line in lines if line.startswith("FAILED "))
    assert failed == 20, failed
    more = [line for line in lines if "more failures not shown here" in line]
    assert len(more) == 1 and "report.html" in more[0]
    digest = next(i for i, line in enumerate(lines) if " failures in " in line and "bucket" in line)
    # the digest comes after every FAILED line, and names a replay command per bucket
    assert digest > max(i for i, line in enumerate(lines) if line.startswith("FAILED "))
    assert "replay: nnconform replay r/failures/" in "\n".join(lines[digest:])
    assert "reports ->" in "\n".join(lines[digest:])
