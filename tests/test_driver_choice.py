"""Which driver a command runs when --driver is left out (issue 46, point 2): replay takes the
spec file's recorded driver and --resume the run's, each saying so; other commands say they
use the bundled reference; a resume that would switch drivers is refused and writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import double

from nnconform.cli import main

BROKEN_ADD = double("broken", "QuantAddOffByTwo")


def _run(tmp_path: Path, *extra: str, driver: str | None = BROKEN_ADD) -> int:
    args = ["run", "--suite", "generated", "--seed", "5", "--report-dir", str(tmp_path / "r")]
    if driver is not None:
        args += ["--driver", driver]
    return main([*args, *extra, "--", "-k", "add and quant8 and not broadcast"])


def test_replay_without_driver_uses_the_recorded_one_and_says_so(tmp_path, capsys):
    assert _run(tmp_path) == 1
    spec = sorted((tmp_path / "r" / "failures").glob("*.spec.json"))[0]
    capsys.readouterr()
    assert main(["replay", str(spec)]) == 1  # the defect is reproduced, not a reference PASS
    out = capsys.readouterr()
    assert "as recorded in the spec file" in out.err and "QuantAddOffByTwo" in out.err
    assert "FAIL" in out.out


def test_a_command_without_driver_says_it_uses_the_reference(tmp_path, capsys):
    assert _run(tmp_path, driver=None) == 0
    assert "no --driver given: using the bundled reference driver" in capsys.readouterr().err


def test_resume_keeps_the_recorded_driver(tmp_path, capsys):
    assert _run(tmp_path) == 1
    run_json = tmp_path / "r" / "run.json"
    before = run_json.read_bytes()
    capsys.readouterr()
    code = main(["run", "--resume", "--report-dir", str(tmp_path / "r"), "--driver", "reference"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "a resumed run keeps its driver" in err, err
    assert run_json.read_bytes() == before  # a refused command writes nothing
    main(["run", "--resume", "--report-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert "as recorded in" in err and "QuantAddOffByTwo" in err
    assert json.loads(run_json.read_text())["driver"] == BROKEN_ADD
