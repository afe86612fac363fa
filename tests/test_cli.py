"""The nnconform command end to end, as a user runs it (subprocesses, real report files)."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import double

from nnconform.cases.vectors import default_root, vector_files


def nnconform(*args, cwd=None, timeout=900):
    return subprocess.run(
        [sys.executable, "-m", "nnconform", *args], capture_output=True, text=True, cwd=cwd, timeout=timeout
    )


def rows(report_dir: Path) -> list[dict]:
    with open(report_dir / "results.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def test_generated_suite_passes_on_reference(tmp_path):
    r = nnconform("run", "--driver", "reference", "--suite", "generated", "--report-dir", str(tmp_path), "--seed", "7")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    got = rows(tmp_path)
    assert got and {row["outcome"] for row in got} == {"PASS"}
    assert all(row["seed"] == "7" for row in got)
    html = (tmp_path / "report.html").read_text()
    assert "generated" in html and "PASS" in html


def test_broken_quant_add_fails_with_replayable_spec(tmp_path):
    r = nnconform(
        "run", "--driver", double("broken", "QuantAddOffByTwo"), "--suite", "generated", "--report-dir", str(tmp_path)
    )
    assert r.returncode == 1
    failed = [row for row in rows(tmp_path) if row["outcome"] == "FAIL"]
    assert failed and all("ADD" in row["operations"] for row in failed)
    assert all("quant8" in row["data_types"] for row in failed)
    spec = Path(failed[0]["spec_path"])
    assert spec.exists() and "nnconform replay" in failed[0]["replay"]
    meta = json.loads(spec.read_text())["meta"]
    assert meta["driver"].endswith("QuantAddOffByTwo") and "actual_outputs" in meta and "criterion" in meta
    again = nnconform("replay", str(spec), "--driver", double("broken", "QuantAddOffByTwo"))
    assert again.returncode == 1 and "FAIL" in again.stdout and "ADD" in again.stdout
    fixed = nnconform("replay", str(spec), "--driver", "reference")
    assert fixed.returncode == 0 and "PASS" in fixed.stdout


def test_unknown_driver_is_one_line(tmp_path):
    r = nnconform("run", "--driver", "nosuchdriver", "--report-dir", str(tmp_path))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "unknown driver 'nosuchdriver'" in r.stderr


def test_a_selection_of_no_case_is_a_one_line_usage_error(tmp_path):
    """A -k that matches nothing ran nothing: exit 2 with a line saying so, not a silent 3."""
    r = nnconform(
        "run", "--driver", "reference", "--suite", "generated", "--report-dir", str(tmp_path / "r"),
        "--no-probe", "--", "-k", "no_case_is_named_like_this",
    )  # fmt: skip
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    assert r.stderr.strip().count("\n") == 0 and "the selection holds no case" in r.stderr


@pytest.mark.parametrize(
    "content,fragment",
    [
        ("{not json", "JSON"),
        ('{"format": "nnconform-spec", "version": 99}', "version"),
    ],
)
def test_validate_rejects_malformed_spec_in_one_line(tmp_path, content, fragment):
    p = tmp_path / "bad.spec.json"
    p.write_text(content)
    r = nnconform("validate", str(p))
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0, r.stderr
    assert fragment.lower() in r.stderr.lower()


def test_validate_and_replay_missing_file(tmp_path):
    for args in (("validate", str(tmp_path / "nope.json")), ("replay", str(tmp_path / "nope.json"))):
        r = nnconform(*args)
        assert r.returncode == 2 and "nope.json" in r.stderr and "Traceback" not in r.stderr


def test_drivers_lists_reference():
    r = nnconform("drivers")
    assert r.returncode == 0 and "reference" in r.stdout and "CompilationCaching" in r.stdout


@pytest.mark.long_run
@pytest.mark.skipif(
    not default_root().is_dir(), reason=f"AOSP vectors not found at {default_root()} (set NNCONFORM_VECTORS)"
)
@pytest.mark.timeout(1800)  # every vector: minutes
def test_vectors_suite_on_reference(tmp_path):
    """Every vector whose operations the reference implements must pass; the rest skip with a
    reason.  The plain runs only: the execution matrix on the reference is tests/test_variants.py's
    (and the main run's, whose default is rotate).

    In-process and in one pytest process: what is checked here is the reference's arithmetic
    over every vector, which a driver host does not change.  The host costs this run 40% more
    CPU, and a second xdist worker another collection of the whole suite, on a CI machine whose
    two cores the outer pytest workers already fill.  Every vector's model still crosses a driver
    host in CI: tests/test_onnxruntime_driver.py sends the whole set to onnxruntime's."""
    r = nnconform(
        "run",
        "--driver",
        "reference",
        "--suite",
        "vectors",
        "--report-dir",
        str(tmp_path),
        "--variants",
        "none",
        "--in-process",
        timeout=1800,
    )
    got = rows(tmp_path)
    outcomes = {o: sum(1 for row in got if row["outcome"] == o) for o in ("PASS", "FAIL", "SKIP", "ERROR")}
    print("vectors:", outcomes)
    failures = [f"{row['test_id']}: {row['message']}" for row in got if row["outcome"] in ("FAIL", "ERROR")]
    assert not failures, "\n".join(failures[:20])
    assert r.returncode == 0
    total = sum(len(json.loads(f.read_text())) for f in vector_files(default_root()))
    assert len(got) == total and total >= 9374 and outcomes["PASS"] > 0
    assert not [row for row in got if "[" in row["test_id"]]  # --variants none: no matrix cells
    assert "in-process" in json.loads((tmp_path / "run.json").read_text())["isolation"]
    skips = [row["message"] for row in got if row["outcome"] == "SKIP"]
    assert all(m for m in skips), "every skip says why"


def test_resume_runs_the_rest_of_the_recorded_selection(tmp_path):
    """--resume without --suite / --variants / --vectors / -k continues the cases the run was
    started with, not every suite with the default variants.  A small vectors tree (V1_0's
    files, the -k then picks some of them) keeps collection short: the bundled set with
    --variants general is 56,000 cells to collect, twice."""
    import shutil

    vectors = tmp_path / "vectors" / "V1_0"
    vectors.mkdir(parents=True)
    for f in vector_files(default_root()):
        if f.parent.name == "V1_0":
            shutil.copy(f, vectors / f.name)
    report = tmp_path / "report"
    r = nnconform(
        "run",
        "--driver",
        "reference",
        "--suite",
        "vectors",
        "--variants",
        "general",
        "--seed",
        "4",
        "--vectors",
        str(vectors.parent),
        "--report-dir",
        str(report),
        "--",
        "-k",
        "V1_0 and (relu or floor)",
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    status = json.loads((report / "run.json").read_text())
    assert status["suites"] == "vectors" and status["vectors variants"] == "general"
    assert status["vectors directory"] == str(vectors.parent)
    assert status["pytest arguments"] == "-k 'V1_0 and (relu or floor)'"
    journal = report / "results.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    planned = status["planned"]
    assert len(lines) == planned and any("[general-async" in line for line in lines)
    # Cut the run short, as Ctrl-C or a killed machine leaves it; resume without repeating the selection.
    journal.write_text("".join(lines[:3]))
    (report / "run.json").write_text(json.dumps(dict(status, status=f"interrupted after 3 of {planned} cases")))
    r = nnconform("run", "--driver", "reference", "--resume", "--report-dir", str(report))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "resuming with the run's recorded suites vectors; variants general" in r.stdout
    final = json.loads((report / "run.json").read_text())
    assert final["status"] == f"complete: {planned} of {planned} cases", final
    ids = [json.loads(line)["extra"]["nodeid"] for line in journal.read_text().splitlines()]
    assert len(ids) == planned == len(set(ids)), "every case of the selection once, nothing else"
    assert sorted(ids) == sorted(json.loads(line)["extra"]["nodeid"] for line in lines)


def test_recorded_selection_says_when_the_arguments_cannot_be_read(tmp_path):
    from nnconform.cli import recorded_selection

    (tmp_path / "run.json").write_text(
        json.dumps({"suites": "vectors, vts", "vectors variants": "all", "pytest arguments": "-k 'unclosed"})
    )
    rec = recorded_selection(tmp_path)
    assert rec["suites"] == ["vectors", "vts"] and rec["variants"] == "all"
    assert "pytest_args" not in rec and "quotation" in rec["pytest_args_problem"]
    (tmp_path / "run.json").write_text("[1, 2]")
    assert recorded_selection(tmp_path) == {}


def test_a_run_drops_the_plugins_it_has_no_use_for():
    """unraisableexception (a gc.collect at both ends of every session) is off in every run;
    hypothesis's plugin only where no suite uses hypothesis and no --hypothesis-* option asks
    for it (pytest would reject the option without the plugin)."""
    from nnconform.cli import quiet_plugins

    both = ["-p", "no:unraisableexception", "-p", "no:hypothesispytest"]
    assert quiet_plugins(["vectors", "vts"], []) == both
    assert quiet_plugins(["vectors", "random"], []) == both[:2]
    assert quiet_plugins(["generated"], ["-k", "relu", "--hypothesis-seed=3"]) == both[:2]


def test_a_hypothesis_option_still_reaches_pytest(tmp_path):
    r = nnconform(
        "run",
        "--driver",
        "reference",
        "--suite",
        "generated",
        "--report-dir",
        str(tmp_path),
        "--seed",
        "7",
        "--",
        "-k",
        "relu1_fp32",
        "--hypothesis-seed",
        "3",
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert {row["outcome"] for row in rows(tmp_path)} == {"PASS"}
