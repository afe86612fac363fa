"""End to end: `nnconform run --suite random` passes on the reference driver and catches the
deliberately broken drivers with a minimal dumped spec that `nnconform replay` reproduces."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import double, double_module

from nnconform.ir.spec import load_spec
from nnconform.verdict.criteria import RANDOM_GRAPH_SETS
from nnconform.verdict.runner import run_case

broken = double_module("broken")

BROKEN = double("broken")


def _run(tmp_path: Path, driver: str, *pytest_args: str) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "nnconform",
        "run",
        "--driver",
        driver,
        "--suite",
        "random",
        "--report-dir",
        str(tmp_path / "report"),
        "--seed",
        "7",
        "--",
        *pytest_args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900)


@pytest.mark.long_run
def test_reference_passes_the_whole_random_suite_ci_profile(tmp_path):
    r = _run(tmp_path, "reference", "--nn-hypothesis-profile", "ci")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    rows = [json.loads(x) for x in (tmp_path / "report" / "results.jsonl").read_text().splitlines()]
    assert len(rows) > 300 and all(row["outcome"] == "PASS" for row in rows)
    assert {row["seed"] for row in rows} == {7}


@pytest.mark.parametrize(
    "driver_cls,selection",
    [
        (broken.QuantAddOffByTwo, "single_operation and ADD and quant8"),
        (broken.ConvFp32InFp16, "single_operation and CONV_2D-fp32"),
        (broken.Relu6Ignored, "RELU6 or small-fp32-rank2"),
    ],
)
def test_broken_driver_fails_with_a_minimal_replayable_spec(tmp_path, driver_cls, selection):
    driver = BROKEN + driver_cls.__name__
    r = _run(tmp_path, driver, "-k", selection, "--nn-max-examples", "40")
    assert r.returncode != 0, r.stdout[-3000:]
    specs = sorted((tmp_path / "report" / "failures").glob("*.spec.json"))
    assert specs, r.stdout[-3000:]
    for path in specs:
        spec = load_spec(path)
        meta = spec.meta
        ops = spec.model.main.operations
        assert 1 <= len(ops) <= 2, f"{path.name}: {[o.name for o in ops]}"
        assert meta["seed"] == 7 and meta["driver"] == driver
        assert meta["actual_outputs"] and meta["criterion"]["mismatches"]
        assert meta["first_divergent_operation"]["name"] in {o.name for o in ops}
        # Re-running the spec under its recorded criteria gives the recorded mismatch ...
        ex = spec.examples[0]
        out = run_case(
            driver_cls(),
            spec.model,
            ex.inputs,
            ex.outputs,
            ignored=ex.ignored or None,
            criteria=RANDOM_GRAPH_SETS[meta["criteria_set"]],
        )
        recorded = meta["criterion"]["mismatches"][0]
        got = out.comparison.mismatches[0]
        assert (got.kind, got.index, got.output) == (recorded["kind"], recorded["index"], recorded["output"])
        assert out.message.split("(")[0] == meta["message"].split("(")[0]
        # ... and the replay command fails the same case on the broken driver.
        rp = subprocess.run(
            [sys.executable, "-m", "nnconform", "replay", str(path), "--driver", driver],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert rp.returncode == 1 and ": FAIL:" in rp.stdout, rp.stdout + rp.stderr
        assert f"output {recorded['output']} " in rp.stdout


def test_control_flow_random_tests_pass_on_the_reference(tmp_path):
    r = _run(tmp_path, "reference", "-k", "control_flow")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    rows = [json.loads(x) for x in (tmp_path / "report" / "results.jsonl").read_text().splitlines()]
    assert sorted(row["test_id"] for row in rows) == sorted(
        f"random/control_flow/{k}/{t}"
        for k in ("if", "while")
        for t in ("fp32", "fp16", "int32", "quant8", "quant8_signed")
    )
    assert all(row["outcome"] == "PASS" for row in rows)


def test_a_broken_operation_inside_an_if_branch_is_caught_and_dumped(tmp_path):
    driver = BROKEN + "Relu6Ignored"
    r = _run(tmp_path, driver, "-k", "control_flow_if and fp32", "--nn-max-examples", "300")
    assert r.returncode != 0, r.stdout[-3000:]
    path = tmp_path / "report" / "failures" / "random_control_flow_if_fp32.spec.json"
    spec = load_spec(path)
    meta, model = spec.meta, spec.model
    assert [op.name for op in model.main.operations] == ["IF"]
    assert meta["first_divergent_operation"]["name"] == "IF"
    # The hunt goes on inside the branch and names the broken operation.
    assert meta["first_divergent_operation_inside"]["name"] == "RELU6"
    assert "RELU6" in {op.name for sg in model.referenced for op in sg.operations}
    assert len(model.referenced[0].operations) <= 2  # shrunk
    assert "inside it: #" in r.stdout and "RELU6" in r.stdout
    rp = subprocess.run(
        [sys.executable, "-m", "nnconform", "replay", str(path), "--driver", driver],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert rp.returncode == 1 and ": FAIL:" in rp.stdout, rp.stdout + rp.stderr


def test_parameter_dependent_refusals_are_redrawn_not_skipped(tmp_path):
    """Issue 13: a driver that refuses one parameter value of a cell it claims (MIRROR_PAD in
    SYMMETRIC mode) gets no skipped example: the refused draws are replaced."""
    r = _run(
        tmp_path,
        double("broken_partial", "MirrorPadReflectOnly"),
        "-k",
        "single_operation and MIRROR_PAD and (fp32 or int32)",
        "--nn-max-examples",
        "12",
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    rows = [json.loads(x) for x in (tmp_path / "report" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(row["outcome"] == "PASS" for row in rows), rows
    assert all(row["extra"]["skipped"] == 0 and row["extra"]["passed"] == 12 for row in rows)
    assert sum(row["extra"]["refused_redrawn"] for row in rows) > 0


def test_only_supported_drops_tests_whose_cell_is_claimed_nowhere(tmp_path):
    """Issue 13: by default a test whose (operation, type) the driver claims nowhere is one SKIP
    that says so; with --only-supported it is not run at all, and the run says how many."""
    driver = double("broken_partial", "HalfReferenceEven")  # FLOOR (8) yes, RELU (19), PRELU (71) no
    sel = ("-k", "single_operation and (FLOOR- or RELU-)", "--nn-max-examples", "5")
    r = _run(tmp_path, driver, *sel)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    rows = [json.loads(x) for x in (tmp_path / "report" / "results.jsonl").read_text().splitlines()]
    outcomes = {(row["operations"][0], row["outcome"]) for row in rows}
    assert outcomes == {("FLOOR", "PASS"), ("RELU", "SKIP"), ("PRELU", "SKIP")}, outcomes
    assert all("nowhere (capability probe)" in row["message"] for row in rows if row["outcome"] == "SKIP")
    skipped = sum(1 for row in rows if row["outcome"] == "SKIP")
    only = tmp_path / "only"
    only.mkdir()
    r = _run(only, driver, *sel, "--nn-only-supported")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    rows = [json.loads(x) for x in (only / "report" / "results.jsonl").read_text().splitlines()]
    assert rows and {row["operations"][0] for row in rows} == {"FLOOR"}
    assert all(row["outcome"] == "PASS" for row in rows)
    assert f"--only-supported: {skipped} cases" in r.stdout


def test_a_driver_crash_is_shrunk_and_dumped_for_replay(tmp_path):
    """A value-dependent native crash (SIGABRT inside SUB) is a CRASH row with a minimal dumped
    spec, and `nnconform replay` reproduces the crash; it used to be a CRASH with no spec."""
    driver = BROKEN + "AbortsOnLargeSub"
    cmd = [
        sys.executable,
        "-m",
        "nnconform",
        "run",
        "--driver",
        driver,
        "--suite",
        "random",
        "--report-dir",
        str(tmp_path / "report"),
        "--seed",
        "7",
        "--",
        "-k",
        "single_operation and SUB-fp32",
        "--nn-max-examples",
        "40",
    ]
    env = dict(os.environ, NNCONFORM_SHRINK_BUDGET_S="20")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    (row,) = [json.loads(x) for x in (tmp_path / "report" / "results.jsonl").read_text().splitlines()]
    assert row["outcome"] == "CRASH" and "SIGABRT" in row["message"], row
    assert row["extra"]["incident"]["signal"] == signal.SIGABRT
    spec = load_spec(row["spec_path"])
    assert [o.type.name for o in spec.model.main.operations] == ["SUB"]
    assert spec.meta["seed"] == 7 and spec.meta["driver"] == driver
    rp = subprocess.run(
        [sys.executable, "-m", "nnconform", "replay", row["spec_path"], "--driver", driver],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert rp.returncode == 1 and ": CRASH: driver host killed by SIGABRT" in rp.stdout, rp.stdout + rp.stderr
    # the reference runs the same spec cleanly: the crash is the driver's
    ok = subprocess.run(
        [sys.executable, "-m", "nnconform", "replay", row["spec_path"], "--driver", "reference"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0 and ": PASS" in ok.stdout, ok.stdout + ok.stderr
