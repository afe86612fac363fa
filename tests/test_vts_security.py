"""The vts security and robustness cases (suites/vts_security.py) end to end through
``nnconform run``: each deliberately broken driver is caught by exactly its case(s) among
them (the reference passing them all is checked in tests/test_vts.py)."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import double

# The cache cases are run against the broken cache drivers in-process (tests/test_cache_security.py,
# seconds instead of a vts run each); here: device, memory-domain and burst cases.
SELECT = "device or memory_domain or burst"
BROKEN = {
    double("broken_security", "AcceptsCycle"): {"vts/device/cycle"},
    double("broken_security", "SharedOutputBuffer"): {"vts/memory_domain/shared_buffer"},
    double("broken_security", "BurstDoubleFree"): {"vts/burst/memory_slots"},
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    procs = {}
    for driver in BROKEN:
        d = tmp_path_factory.mktemp("sec")
        cmd = [
            sys.executable,
            "-m",
            "nnconform",
            "run",
            "--driver",
            driver,
            "--suite",
            "vts",
            "--report-dir",
            str(d),
            "--seed",
            "4",
            "--",
            "-k",
            SELECT,
        ]
        procs[driver] = (subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True), d)
    out = {}
    for driver, (p, d) in procs.items():
        text, _ = p.communicate(timeout=900)
        path = Path(d) / "results.csv"
        out[driver] = (p.returncode, list(csv.DictReader(open(path, newline=""))) if path.exists() else [], text)
    return out


@pytest.mark.parametrize("driver", list(BROKEN), ids=lambda d: d.split(":")[1])
def test_broken_driver_caught_by_exactly_its_cases(runs, driver):
    code, rows, text = runs[driver]
    assert code == 1, text[-3000:]
    bad = {r["test_id"] for r in rows if r["outcome"] in ("FAIL", "ERROR", "CRASH", "HANG")}
    assert bad == BROKEN[driver], [
        (r["test_id"], r["outcome"], r["message"][:200]) for r in rows if r["test_id"] in bad
    ]
    ids = {r["test_id"] for r in rows}
    assert {
        "vts/device/basics",
        "vts/device/cycle",
        "vts/burst/memory_slots",
        "vts/memory_domain/shared_buffer",
        "vts/memory_domain/conv_quant8_signed",
    } <= ids
    if driver.endswith("BurstDoubleFree"):
        row = next(r for r in rows if r["test_id"] == "vts/burst/memory_slots")
        assert row["outcome"] == "CRASH", row
