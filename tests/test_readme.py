"""The README is what a new user follows: its example driver must work as written, and it
must give exactly two set-up commands."""
import csv
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_driver_runs_the_generated_suite(tmp_path):
    text = README.read_text()
    code = re.search(r"```python\n(# mydriver\.py.*?)```", text, re.S).group(1)
    (tmp_path / "mydriver.py").write_text(code)
    report = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "nnconform", "run", "--driver", "mydriver:MyDevice",
                           "--suite", "generated", "--report-dir", str(report)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    with open(report / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert not [r["test_id"] for r in rows if r["outcome"] in ("FAIL", "ERROR")]
    relu = [r for r in rows if r["operations"] == "RELU"]
    assert relu and all(r["outcome"] == "PASS" for r in relu)
    # everything else is skipped with the reason, or (for invalid models) rightly rejected
    assert all(r["outcome"] in ("SKIP", "PASS") and (r["outcome"] == "PASS" or r["message"]) for r in rows)


def test_readme_has_exactly_two_set_up_commands():
    section = README.read_text().split("## Set-up: the two commands", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```\n(.*?)```", section, re.S)
    assert len(blocks) == 2 and all(len(b.strip().splitlines()) == 1 for b in blocks), blocks
