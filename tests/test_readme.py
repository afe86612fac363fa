"""The README is what a new user follows: its example driver must work as written, and it
must give exactly two set-up commands."""

import csv
import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_driver_runs_the_generated_and_vts_suites(tmp_path):
    """The driver guide's example, run from its own folder as a new user would (no PYTHONPATH:
    the current directory is importable), through the generated suite and the vts API and
    request checks (deadlines, timing, output shapes, insufficient buffers).  The vts model
    mutations are left out: they take minutes and test nothing the example does itself."""
    text = README.read_text()
    code = re.search(r"```python\n(# mydriver\.py.*?)```", text, re.S).group(1)
    (tmp_path / "mydriver.py").write_text(code)
    report = tmp_path / "report"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "nnconform",
            "run",
            "--driver",
            "mydriver:MyDevice",
            "--suite",
            "generated",
            "--suite",
            "vts",
            "--report-dir",
            str(report),
            "--",
            "-k",
            "not model_mutation",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    with open(report / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert not [r["test_id"] for r in rows if r["outcome"] not in ("SKIP", "PASS")]
    relu = [r for r in rows if r["operations"] == "RELU" and "fp32" in r["data_types"] and r["suite"] == "generated"]
    assert relu and all(r["outcome"] == "PASS" for r in relu)
    # RELU of other types is refused (an unsupported parameter), so it is skipped with the reason
    other = [r for r in rows if r["operations"] == "RELU" and "fp32" not in r["data_types"]]
    assert other and all(r["outcome"] == "SKIP" and "RELU" in r["message"] for r in other)
    passed = {r["test_id"] for r in rows if r["outcome"] == "PASS"}
    for check in (
        "vts/api/deadline_passed/prepare",
        "vts/api/deadline_passed/execute",
        "vts/api/timing",
        "vts/request/output_buffer_too_small",
    ):
        assert check in passed, (check, sorted(passed))
    # everything skipped says why
    assert all(r["message"] for r in rows if r["outcome"] == "SKIP")


def test_readme_has_exactly_two_set_up_commands():
    section = README.read_text().split("## Set-up: the two commands", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```\n(.*?)```", section, re.S)
    assert len(blocks) == 2 and all(len(b.strip().splitlines()) == 1 for b in blocks), blocks
