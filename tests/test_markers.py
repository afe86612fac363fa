"""Selection by marker: every conformance case carries its suite, its NNAPI operations and its
data types as pytest markers, the same names in every suite (`-m "conv_2d and quant8"`)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest


def collected(tmp_path, *suites_and_marker):
    *suites, marker = suites_and_marker
    args = [a for s in suites for a in ("--suite", s)]
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "nnconform",
            "run",
            *args,
            "--report-dir",
            str(tmp_path / "r"),
            "--",
            "-m",
            marker,
            "--collect-only",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    ids = re.findall(r"^(\S*test_\w+\.py::test_\w+\[.*\])$", r.stdout, re.M)
    return ids, r


@pytest.mark.parametrize(
    "suites,marker,must",
    [
        (["generated"], "relu6 and fp16", "relu6"),
        (["generated", "vectors"], "conv_2d and quant8", "conv"),
        (["random"], "add and quant8_signed", "ADD"),
    ],
)
def test_marker_selection(tmp_path, suites, marker, must):
    ids, r = collected(tmp_path, *suites, marker)
    assert ids, r.stdout[-2000:] + r.stderr[-2000:]
    assert all(must.lower() in i.lower() for i in ids), [i for i in ids if must.lower() not in i.lower()][:5]


def test_suite_markers(tmp_path):
    ids, _ = collected(tmp_path, "generated", "vts", "vts")
    assert ids and all("test_vts.py::" in i for i in ids)  # only the vts suite's cases
    ids_g, _ = collected(tmp_path, "generated", "vts", "generated")
    ids_gq, _ = collected(tmp_path, "generated", "vts", "generated and quant8")
    assert set(ids_gq) < set(ids_g) and all("test_generated.py::" in i for i in ids_g)
    assert sum("quant8" in i for i in ids_gq) > len(ids_gq) / 2


RELU_ONLY = '''
from nnconform.drivers.reference import ReferenceDevice
from nnconform.ir import OperationType


class ReluOnly(ReferenceDevice):
    """The reference, claiming RELU alone (invalid models still raise INVALID_ARGUMENT)."""
    def supported_operations(self, model):
        claims = super().supported_operations(model)
        return [c and op.type == OperationType.RELU for c, op in zip(claims, model.main.operations)]
'''


def test_only_supported_runs_just_what_the_driver_claims(tmp_path):
    """--only-supported deselects the cases the driver does not claim entirely, instead of
    recording them as SKIP rows; the invalid models it must reject still run."""
    (tmp_path / "reluonly.py").write_text(RELU_ONLY)
    out = tmp_path / "r"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "nnconform",
            "run",
            "--driver",
            "reluonly:ReluOnly",
            "--suite",
            "generated",
            "--only-supported",
            "--report-dir",
            str(out),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    import csv
    import json

    with open(out / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert rows and all(row["outcome"] == "PASS" for row in rows), [row for row in rows if row["outcome"] != "PASS"][:3]
    assert any(row["operations"] == "RELU" for row in rows)
    rejected = [row for row in rows if row["operations"] != "RELU"]
    assert rejected and all("rejected as expected" in row["message"] for row in rejected)
    m = re.search(r"(\d+) passed, (\d+) deselected", r.stdout)
    assert m and int(m.group(1)) == len(rows) and int(m.group(2)) > 500
    assert f"--only-supported: {m.group(2)} cases" in r.stdout
    assert "only-supported" in json.loads((out / "run.json").read_text()).get("selection", "")


def test_collection_is_frozen_during_a_session_and_released_after(tmp_path):
    """A conformance session freezes what collection built (plugin.pytest_collection) and gives
    it back at the end: a process that runs session after session (a cluster worker, one per
    batch) keeps none of them.  A plain pytest session, naming no driver, is left alone."""
    script = tmp_path / "two_sessions.py"
    script.write_text(
        "import gc, sys, pytest\n"
        "class Watch:\n"
        "    def pytest_sessionfinish(self, session):\n"
        "        print('during', gc.get_freeze_count() > 0, file=sys.stderr)\n"
        "for i, args in enumerate([['--driver', 'reference', '--nn-report-dir', sys.argv[1] + '/a'],\n"
        "                          ['--driver', 'reference', '--nn-report-dir', sys.argv[1] + '/b'], []]):\n"
        "    rc = pytest.main(['--pyargs', 'nnconform.suites.test_generated', '-q', '-p', 'no:cacheprovider',\n"
        "                      '-k', 'floor_fp32', *args], plugins=[Watch()])\n"
        "    print('session', i, rc, 'after', gc.get_freeze_count(), file=sys.stderr)\n"
    )
    r = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=300)
    lines = [x for x in r.stderr.splitlines() if x.startswith(("during", "session"))]
    assert lines == [
        "during True",
        "session 0 0 after 0",
        "during True",
        "session 1 0 after 0",
        "during False",
        "session 2 0 after 0",
    ], r.stdout[-2000:] + r.stderr[-2000:]
