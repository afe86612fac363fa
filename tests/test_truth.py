"""What nnconform tells about a run must be true (issue 46): the terminal ends with the digest,
buckets are keyed on the defect, crashes carry their stack, partial drivers are not green."""

import shlex
import subprocess
import sys

from helpers import double

from nnconform.plugin import _mostly_skipped_warning, _stale_expectations, _terminal_digest
from nnconform.reports import triage
from nnconform.reports.headline import headline
from nnconform.reports.html_report import render_html
from nnconform.verdict.results import ResultRecord, read_results


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


def test_a_vts_row_names_the_operation_its_message_embeds():
    from nnconform.plugin import _blamed

    rec = {
        "operations": [],
        "data_types": [],
        "extra": {},
        "message": "conv_2d_valid_2x2_fp32: " + MISMATCH.format(i=0),
    }
    assert _blamed(rec, "FAIL") == ("CONV_2D", "fp32")
    rec["message"] = "[ADD, CONV_2D] " + MISMATCH.format(i=0)  # two operations: nobody to blame
    assert _blamed(rec, "FAIL") == ("", "")


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
        "r",
        "--seed",
        "3",
        "--",
        "-k",
        "add_ or sub_ or mul_",
        cwd=tmp_path,
    )
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    lines = r.stdout.splitlines()
    failed = sum(1 for line in lines if line.startswith("FAILED "))
    assert failed == 20, failed
    more = [line for line in lines if "more failures not shown here" in line]
    assert len(more) == 1 and "report.html" in more[0]
    digest = next(i for i, line in enumerate(lines) if " failures in " in line and "bucket" in line)
    # the digest comes after every FAILED line, and names a replay command per bucket that
    # works from here; the rows' commands are relative to the report directory
    assert digest > max(i for i, line in enumerate(lines) if line.startswith("FAILED "))
    tail = "\n".join(lines[digest:])
    assert "raised ValueError in execute" in tail and "replay: nnconform replay r/failures/" in tail
    assert "reports ->" in tail
    rows = read_results(tmp_path / "r" / "results.jsonl")
    bad = [x for x in rows if x.outcome == "FAIL"]
    assert bad and all(x.replay.startswith("nnconform replay failures/") for x in bad)
    # the recorded command works from the report directory (as a downloaded CI artifact)
    again = nnconform(*shlex.split(bad[0].replay)[1:], cwd=tmp_path / "r")
    assert again.returncode == 1 and "FAIL" in again.stdout, again.stdout + again.stderr
    html = (tmp_path / "r" / "report.html").read_text()
    assert '<nav id="toc">' in html and 'href="#failures"' in html and 'href="#matrix"' in html


def test_crash_rows_carry_the_crashing_threads_stack(tmp_path):
    driver = double("broken_isolation", "Segfault")
    r = nnconform(
        "run", "--driver", driver, "--suite", "generated", "--report-dir", "r", "--", "-k", "floor_fp32", cwd=tmp_path
    )
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    crash = [x for x in read_results(tmp_path / "r" / "results.jsonl") if x.outcome == "CRASH"]
    assert len(crash) == 1
    stack = crash[0].extra["stack"]
    # the crashing thread (not an idle harness thread), innermost first: the driver's frame
    # comes before the host loop that called it
    at = next(i for i, f in enumerate(stack) if "broken_isolation.py" in f and "_segfault" in f)
    assert at < next(i for i, f in enumerate(stack) if "host.py" in f)
    assert crash[0].extra["driver_frame"].startswith("drivers/broken_isolation.py:")
    # the bucket is the crash signature; the terminal and the HTML show the stack
    assert "crash SIGSEGV at drivers/broken_isolation.py" in r.stdout and "crashing thread:" in r.stdout
    html = (tmp_path / "r" / "report.html").read_text()
    assert '<pre class="stack">' in html and "in _segfault</b>" in html
    assert 'id="stress-verdicts"' not in html  # a conformance CRASH is no stress verdict
    again = nnconform("replay", str(tmp_path / "r" / crash[0].spec_path), "--driver", driver)
    assert again.returncode == 1 and "CRASH" in again.stdout
    assert "crashing thread's stack" in again.stdout and "in _segfault" in again.stdout


def test_partial_driver_counts_only_what_it_computed():
    def ok(tid, ops, message="", **extra):
        return row(tid, message, ops=ops, outcome="PASS", extra=extra)

    rows = [
        ok("relu", ["RELU"]),
        ok("add_invalid", ["ADD"], "rejected as expected by prepare: bad rank", rejected_as_expected=True),
        ok("cast_invalid", ["CAST"], "rejected as expected by supported_operations: x"),
        ok("add_relu", ["ADD", "RELU"], partitioned="1/2", driver_operations=["RELU"]),
        *(row(f"s{i}", f"driver does not support DIV for fp{i}", ops=("DIV",), outcome="SKIP") for i in range(6)),
    ]
    m = triage.matrix(rows)
    assert m.cells[("RELU", "fp32")]["good"] == 2
    # refused must-reject cases and the reference's side of a partition colour no cell
    assert m.cells[("ADD", "fp32")]["good"] == 0 and m.cells[("ADD", "fp32")]["elsewhere"] == 2
    assert m.cells[("CAST", "fp32")]["good"] == 0
    h = headline(rows, {"status": "complete: 10 of 10 cases"})
    assert h.kind == "amber"
    assert "2 PASS computed on the driver, 2 rejected as expected, 6 SKIP (60% skipped)" in h.text
    html = render_html(rows, meta={"status": "complete: 10 of 10 cases"})
    assert '<section id="skips">' in html and "driver does not support DIV for fp3" in html
    assert 'class="num elsewhere" data-op="ADD" data-type="fp32"' in html and "not computed by the driver" in html
    assert 'class="num good" data-op="ADD"' not in html and 'class="num good" data-op="CAST"' not in html
    assert 'class="num good" data-op="RELU"' in html


def test_mostly_skipped_run_warns_in_the_terminal():
    lines = []

    class Terminal:
        def write_line(self, line, **kw):
            lines.append(line)

    rows = [row("a", "", outcome="PASS"), *(row(f"s{i}", "no", outcome="SKIP") for i in range(3))]
    _mostly_skipped_warning(Terminal(), rows)
    assert len(lines) == 1 and "75% of the 4 cases skipped; the driver computed 1" in lines[0]
    lines.clear()
    _mostly_skipped_warning(Terminal(), rows[:2])
    assert lines == []


def test_terminal_prints_real_skip_reasons_not_the_grouping_key():
    lines = []

    class Terminal:
        def write_line(self, line, **kw):
            lines.append(line)

    rows = [
        row("a", "needs mediapipe==0.10.14 (not installed)", outcome="SKIP"),
        row("b", "needs mediapipe==0.10.14 (not installed)", outcome="SKIP"),
        row("c", "tool 'flatc' not in PATH", outcome="SKIP"),
    ]
    _terminal_digest(Terminal(), rows)
    text = "\n".join(lines)
    assert "needs mediapipe==0.10.14 (not installed)" in text and "tool 'flatc' not in PATH" in text
    assert "#" not in text and "'…'" not in text


def test_stale_expected_failure_entries_warn(tmp_path):
    from nnconform.verdict.expectations import Expectation

    class Session:
        expectations = [Expectation("V1_0/conv*", "bias ignored"), Expectation("V1_0/no_such_vector", "typo")]

    rows = [row("V1_0/conv_float_2[general-async]", "x")]
    warnings = _stale_expectations(Session(), rows)
    assert len(warnings) == 1 and "'V1_0/no_such_vector' matches no case" in warnings[0]


def test_small_defects_are_one_line_errors(tmp_path):
    (tmp_path / "hist").write_text("not a directory\n")
    r = nnconform(
        "run", "--driver", "reference", "--report-dir", str(tmp_path / "r"), "--history", str(tmp_path / "hist")
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--history" in r.stderr and "is a file" in r.stderr
    assert not (tmp_path / "r" / "run.json").exists()
    (tmp_path / "notes.txt").write_text("hello\n")
    r = nnconform("coverage", "--results", str(tmp_path / "notes.txt"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    r = nnconform("run", "--driver", "reference", "--report-dir", str(tmp_path / "new"), "--lf")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no earlier run" in r.stderr
    assert not (tmp_path / "new" / "run.json").exists()


def test_interrupted_run_says_how_to_resume(tmp_path):
    r = nnconform(
        "run",
        "--driver",
        double("broken", "RaisesPlainError"),
        "--suite",
        "generated",
        "--report-dir",
        "r",
        "--",
        "-k",
        "add_",
        "--maxfail",
        "1",
        cwd=tmp_path,
    )
    assert r.returncode == 3, r.stdout[-3000:] + r.stderr[-2000:]
    hint = [line for line in r.stdout.splitlines() if "to run the rest: nnconform run --resume --report-dir" in line]
    assert len(hint) == 1 and hint[0].endswith(str(tmp_path / "r")), r.stdout[-3000:]


DUMP = """Fatal Python error: Aborted

Thread 0x00007f01 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 320 in wait
  File "/usr/lib/python3.11/queue.py", line 171 in get
  File "/x/harness/isolation/host.py", line 90 in reader

Current thread 0x00007f02 (most recent call first):
  File "/usr/lib/python3.11/selectors.py", line 415 in select
  File "/x/harness/isolation/host.py", line 172 in serve

Thread 0x00007f03 (most recent call first):
  File "/usr/lib/python3.11/site-packages/numpy/core/numeric.py", line 10 in convolve
  File "/home/me/acme/kernels.py", line 88 in conv
  File "/home/me/acme/driver.py", line 40 in execute
  File "/x/harness/isolation/host.py", line 336 in op_execute
"""


def test_crash_stack_is_the_thread_in_the_driver_not_an_idle_one():
    from nnconform.isolation.childproc import crash_stack, driver_frame

    stack = crash_stack(DUMP)
    # a hang's dump: the signalled thread is the host's idle loop; the thread in the driver
    # is the one shown, innermost first, the library frame it called kept above it
    assert stack == [
        "core/numeric.py:10 in convolve",
        "acme/kernels.py:88 in conv",
        "acme/driver.py:40 in execute",
        "isolation/host.py:336 in op_execute",
    ]
    assert driver_frame(DUMP) == "acme/kernels.py:88 in conv"


def test_the_html_shows_a_crash_stack_from_the_drivers_own_frame():
    # a library frame the driver called (ctypes) is innermost; the driver's line comes first
    stack = ["ctypes/__init__.py:519 in string_at", "drivers/mine.py:99 in _segfault", "drivers/mine.py:67 in execute"]
    crash = row(
        "generated/floor_fp32",
        "driver host killed by SIGSEGV",
        suite="generated",
        ops=("FLOOR",),
        outcome="CRASH",
        extra={"stack": stack, "driver_frame": stack[1], "incident": {"signal": 11}},
    )
    html = render_html([crash], title="t")
    block = html[html.index("crashing thread") :]
    assert block.index("drivers/mine.py:99 in _segfault") < block.index("drivers/mine.py:67 in execute")
    assert block.index("drivers/mine.py:67 in execute") < block.index("ctypes/__init__.py:519 in string_at")
    assert "what that frame had called" in block
