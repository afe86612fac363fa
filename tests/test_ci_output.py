"""What a CI job reads from `nnconform run`: summary.json, JUnit properties, the skip-ratio gate,
GitHub annotations, expected failures (XFAIL / strict XPASS), --lf / --ff, --version, a quiet
end on a closed pipe, and drivers in the current directory."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import double

from nnconform.reports.summary import github_annotations
from nnconform.verdict.results import ResultRecord, read_results

REPO = Path(__file__).resolve().parents[1]
QADD = double("broken", "QuantAddOffByTwo")
# A small slice of the generated suite: quantised ADDs (which QuantAddOffByTwo gets wrong),
# fp32 ADDs and RELUs (which it gets right).
SLICE = "add_quant8 or add_fp32 or relu_fp32"


def nnconform(*args, cwd=None, env=None, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "nnconform", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout
    )


def _run(tmp_path, *extra, name="rep", pytest_args=(), env=None):
    rep = tmp_path / name
    r = nnconform(
        "run",
        "--driver",
        QADD,
        "--suite",
        "generated",
        "--report-dir",
        str(rep),
        "--seed",
        "5",
        *extra,
        "--",
        "-k",
        SLICE,
        *pytest_args,
        env=env,
    )
    return r, rep


def _write(path: Path, entries) -> Path:
    path.write_text(json.dumps({"expected_failures": entries}))
    return path


def test_summary_junit_and_annotations(tmp_path):
    env = dict(os.environ, GITHUB_ACTIONS="true")
    junit = tmp_path / "junit.xml"
    r, rep = _run(tmp_path, pytest_args=[f"--junitxml={junit}"], env=env)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    s = json.loads((rep / "summary.json").read_text())
    assert s["format"] == "nnconform-summary/1" and s["complete"] and s["seed"] == 5
    assert s["driver"] == QADD and s["versions"]["nnconform"]
    assert s["counts"]["FAIL"] > 0 and s["counts"]["PASS"] > 0
    assert s["cases"] == sum(s["counts"].values())
    assert set(s["per_operation"]["ADD"]) >= {"FAIL", "PASS"}
    assert "FAIL" not in s["per_operation"].get("RELU", {})
    assert {(b["operation"], b["data_type"]) for b in s["buckets"]} <= {("ADD", "quant8"), ("ADD", "quant8_signed")}
    assert all(b["replay"].startswith("nnconform replay ") for b in s["buckets"])
    # JUnit: run properties and per-case properties
    root = ET.parse(junit).getroot()
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["nnconform.driver"] == QADD and props["nnconform.seed"] == "5"
    assert props["nnconform.status"].startswith("complete")
    assert int(props["nnconform.count.FAIL"]) == s["counts"]["FAIL"]
    failing = [tc for tc in root.iter("testcase") if tc.find("failure") is not None]
    assert failing
    case_props = {p.get("name"): p.get("value") for p in failing[0].iter("property")}
    assert case_props["nnconform.blamed_operation"] == "ADD" and case_props["nnconform.outcome"] == "FAIL"
    # GitHub Actions workflow commands, one per bucket
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("::error ")]
    assert len(lines) == len(s["buckets"])
    assert re.match(
        r"::error title=nnconform%3A ADD quant8(_signed)? \(\d+ cases%2C wrong values\)::generated/",
        lines[0],
    ), lines[0]
    # the terminal: per-suite counts and the biggest buckets
    assert re.search(
        r"^nnconform: suite generated: \d+ PASS, \d+ FAIL|^nnconform: suite generated: \d+ FAIL, \d+ PASS",
        r.stdout,
        re.M,
    )
    assert re.search(r"^nnconform: \d+ failures in \d+ buckets:\n +\d+  ADD quant8", r.stdout, re.M)
    # and none without GITHUB_ACTIONS
    env.pop("GITHUB_ACTIONS")
    r2, _ = _run(tmp_path, name="rep2", env=env)
    assert "::error" not in r2.stdout


def test_annotations_escape_and_limit():
    rows = [
        ResultRecord(
            suite="vectors",
            test_id=f"t{i}",
            driver="d",
            outcome="FAIL",
            operations=[f"OP{i}"],
            data_types=["fp32"],
            message="50% off,\nsecond line: x",
        )
        for i in range(5)
    ]
    lines = github_annotations(rows, limit=3)
    assert len(lines) == 4 and lines[-1].startswith("::warning ") and "2 more" in lines[-1]
    assert "%25 off,%0Asecond line: x" in lines[0] and "\n" not in "".join(lines)


def test_max_skip_ratio_fails_a_run_that_tests_nothing(tmp_path):
    # The README's example driver claims only RELU: nearly every case SKIPs.
    (tmp_path / "mydriver.py").write_text(_readme_driver())
    args = ("run", "--driver", "mydriver:MyDevice", "--suite", "generated", "--seed", "1", "--", "-k", SLICE)
    ok = nnconform(*args[:1], "--report-dir", str(tmp_path / "a"), *args[1:], cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout[-2000:] + ok.stderr[-1000:]
    gated = nnconform(
        *args[:1], "--report-dir", str(tmp_path / "b"), "--max-skip-ratio", "0.5", *args[1:], cwd=tmp_path
    )
    assert gated.returncode == 1
    assert re.search(
        r"^nnconform: skip reasons \(\d+ skipped\), most common:\n +\d+  driver does not "
        r"support ADD",
        gated.stdout,
        re.M,
    ), gated.stdout[-3000:]
    assert "--max-skip-ratio 0.5" in gated.stdout
    s = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert s["skip_ratio"] > 0.5
    bad = nnconform("run", "--max-skip-ratio", "2", "--report-dir", str(tmp_path / "c"))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_expected_failures_xfail_and_strict_xpass(tmp_path):
    xf = _write(
        tmp_path / "xf.json",
        [{"pattern": "generated/*add_quant8*", "reason": "ADD off by two", "link": "https://example.invalid/1"}],
    )
    r, rep = _run(tmp_path, "--expected-failures", str(xf))
    assert r.returncode == 0, r.stdout[-3000:]
    rows = read_results(rep / "results.jsonl")
    assert {x.outcome for x in rows if "add_quant8" in x.test_id} == {"XFAIL"}
    assert all("ADD off by two" in x.message for x in rows if x.outcome == "XFAIL")
    assert "Expected failures (" in (rep / "report.html").read_text()
    # a listed case that passes is XPASS and fails the run ...
    xf2 = _write(
        tmp_path / "xf2.json", [{"patterns": ["generated/*add_quant8*", "generated/relu_fp32*"], "reason": "listed"}]
    )
    r, rep = _run(tmp_path, "--expected-failures", str(xf2), name="rep2")
    assert r.returncode == 1
    assert {x.outcome for x in read_results(rep / "results.jsonl") if x.test_id.startswith("generated/relu_fp32")} == {
        "XPASS"
    }
    # ... unless the entry is non-strict
    xf3 = _write(
        tmp_path / "xf3.json",
        [
            {"pattern": "generated/*add_quant8*", "reason": "r"},
            {"pattern": "generated/relu_fp32*", "reason": "r", "strict": False},
        ],
    )
    r, rep = _run(tmp_path, "--expected-failures", str(xf3), name="rep3")
    assert r.returncode == 0
    relu = [x for x in read_results(rep / "results.jsonl") if x.test_id.startswith("generated/relu_fp32")]
    assert relu and all(x.outcome == "PASS" and "stale" in x.extra["note"] for x in relu)
    # removing the expectation makes the failures count again
    r, _ = _run(tmp_path, name="rep4")
    assert r.returncode == 1


@pytest.mark.parametrize(
    "content,why",
    [
        ("{", "not valid JSON"),
        ('{"expected_failures": [{"pattern": "x"}]}', 'needs a "reason"'),
        ('{"expected_failures": [{"reason": "r"}]}', 'needs "pattern"'),
        ('{"expected_failures": [{"pattern": "x", "reason": "r", "strict": "no"}]}', '"strict" true or false'),
        ("[]", "needs an object"),
    ],
)
def test_bad_expected_failures_file_is_one_line(tmp_path, content, why):
    f = tmp_path / "xf.json"
    f.write_text(content)
    r = nnconform("run", "--expected-failures", str(f), "--report-dir", str(tmp_path / "r"))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and why in r.stderr and "Traceback" not in r.stderr


def test_last_failed_and_failed_first(tmp_path):
    r, rep = _run(tmp_path)
    assert r.returncode == 1
    failed = {x.extra["nodeid"] for x in read_results(rep / "results.jsonl") if x.outcome == "FAIL"}
    total = len(read_results(rep / "results.jsonl"))
    r = nnconform(
        "run",
        "--driver",
        QADD,
        "--suite",
        "generated",
        "--report-dir",
        str(rep),
        "--seed",
        "5",
        "--lf",
        "--",
        "-k",
        SLICE,
    )
    assert r.returncode == 1, r.stdout[-2000:]
    again = read_results(rep / "results.jsonl")
    assert {x.extra["nodeid"] for x in again} == failed
    r = nnconform(
        "run",
        "--driver",
        QADD,
        "--suite",
        "generated",
        "--report-dir",
        str(rep),
        "--seed",
        "5",
        "--ff",
        "--",
        "-k",
        SLICE,
    )
    order = [x.extra["nodeid"] for x in read_results(rep / "results.jsonl")]
    assert len(order) == total and set(order[: len(failed)]) == failed


def test_version_and_run_help():
    r = nnconform("--version")
    assert r.returncode == 0 and re.fullmatch(r"nnconform \d+\.\d+\.\d+\S*\n", r.stdout)
    h = nnconform("run", "--help").stdout
    assert "Anything after -- goes to pytest" in h and "--expected-failures" in h and "--lf" in h


def test_closed_pipe_ends_quietly():
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte: `nnconform coverage | head -0`
    p = subprocess.run(
        [sys.executable, "-m", "nnconform", "coverage"],
        stdout=write_end,
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
    )
    os.close(write_end)
    assert "Traceback" not in p.stderr and "BrokenPipeError" not in p.stderr
    assert p.returncode == 1


def _readme_driver() -> str:
    text = (REPO / "README.md").read_text()
    m = re.search(r"```python\n(# mydriver\.py.*?)```", text, re.S)
    assert m, "the README's driver example is missing"
    return m.group(1)


@pytest.mark.parametrize("isolation", [[], ["--in-process"]], ids=["driver-host", "in-process"])
def test_driver_in_the_current_directory(tmp_path, isolation):
    """`--driver mydriver:MyDevice` from the driver's own folder: the driver host runs in the
    same directory, which is importable (as it is for `python -m`)."""
    (tmp_path / "mydriver.py").write_text(_readme_driver())
    r = nnconform(
        "run",
        "--driver",
        "mydriver:MyDevice",
        "--suite",
        "generated",
        "--report-dir",
        str(tmp_path / "rep"),
        *isolation,
        "--",
        "-k",
        "relu",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = read_results(tmp_path / "rep" / "results.jsonl")
    assert any(x.outcome == "PASS" and x.operations == ["RELU"] for x in rows)
    assert {x.driver for x in rows} == {"acme-mydevice"}
