"""Batched items (nnconform.plugin.cells): the vectors matrix runs one pytest item per vector
and records one row per cell, and what users rely on stays per cell: -k by cell name, rows
with their own ids and node ids, a crash confined to its cell, --lf by cell, JUnit."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter

import pytest
from _pytest.mark import KeywordMatcher, _parse_expression
from helpers import double

from nnconform.cases.vectors import default_root
from nnconform.plugin.cells import _CellMatcher, cell_nodeid, item_nodeid_of

FILES = ("add.json", "add_quant8.json")  # V1_0: four vectors, six general cells each
VECTORS = sorted(f"V1_0/{d['name']}" for f in FILES for d in json.loads((default_root() / "V1_0" / f).read_text()))


@pytest.fixture
def tree(tmp_path):
    d = tmp_path / "vectors" / "V1_0"
    d.mkdir(parents=True)
    for f in FILES:
        shutil.copy(default_root() / "V1_0" / f, d / f)
    return d.parent


def nnconform(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "nnconform", *args], capture_output=True, text=True, timeout=timeout)


def run(tree, report, *extra, driver="reference", pytest_args=()):
    return nnconform(
        "run",
        "--driver",
        driver,
        "--suite",
        "vectors",
        "--variants",
        "general",
        "--seed",
        "5",
        "--no-probe",
        "--vectors",
        str(tree),
        "--report-dir",
        str(report),
        *extra,
        "--",
        *pytest_args,
    )


def rows(report) -> list[dict]:
    return [json.loads(line) for line in (report / "results.jsonl").read_text().splitlines()]


def test_a_cells_node_id_names_its_item():
    item = "suites/test_vectors.py::test_vector_variant[V1_2/add]"
    cell = cell_nodeid(item, "general-async")
    assert cell == "suites/test_vectors.py::test_vector_variant[V1_2/add[general-async]]"
    assert item_nodeid_of(cell) == item
    assert item_nodeid_of(item) is None  # an item's own id holds no cell
    assert item_nodeid_of("suites/test_generated.py::test_random[3]") is None


@pytest.mark.parametrize(
    "expression",
    ["general-async", "not general-async", "ADD and Burst", "vectors and timing", "V1_2/add[general", "quant8", "xyz"],
)
def test_the_cell_matcher_is_pytests_keyword_matcher(expression):
    """The same verdict as pytest's KeywordMatcher over the item's names with the cell's name
    in place of the item's, also for a word asked a second time (cached)."""
    names = {"test_vectors.py", "vectors", "add", "fp32", "suites"}
    expr = _parse_expression(expression, "bad -k")
    m = _CellMatcher(names)
    for cell in ("general-async", "general-burst-timing", "general-sync", "mutation-add_input"):
        name = cell_nodeid("test_vector_variant[V1_2/add]", cell)
        m.cell = name.lower()
        want = expr.evaluate(KeywordMatcher(names | {name}))
        assert expr.evaluate(m) is want, (expression, cell)
        assert expr.evaluate(m) is want  # the cached words answer the same


def test_k_selects_cells_and_each_cell_is_its_own_row(tree, tmp_path):
    report = tmp_path / "r"
    junit = tmp_path / "junit.xml"
    r = run(tree, report, pytest_args=["-k", "general-async and not timing", f"--junitxml={junit}"])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    got = rows(report)
    assert sorted(x["test_id"] for x in got) == [f"{v}[general-async]" for v in VECTORS]
    for x in got:
        assert x["outcome"] == "PASS" and x["extra"]["variant"] == "general-async"
        vid = x["test_id"].split("[")[0]
        assert x["extra"]["nodeid"].endswith(f"::test_vector_variant[{vid}[general-async]]")
    status = json.loads((report / "run.json").read_text())
    n = len(VECTORS)
    assert status["planned"] == n and status["status"] == f"complete: {n} of {n} cases"
    # JUnit: one test case per vector, with the number of cells it recorded
    cases = ET.parse(junit).getroot().iter("testcase")
    cells = {
        c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")}.get("nnconform.cells") for c in cases
    }
    assert cells == {f"test_vector_variant[{v}]": "1" for v in VECTORS}


def test_a_crash_is_its_cells_row_and_lf_reruns_those_cells(tree, tmp_path):
    """A driver that aborts on the async path: the async cells are CRASH rows, every other
    cell of the same items still runs and passes; --lf then runs exactly the CRASH cells."""
    report = tmp_path / "r"
    driver = double("broken_matrix", "AsyncAborts")
    r = run(tree, report, driver=driver)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    first = {x["test_id"]: x["outcome"] for x in rows(report)}
    crashed = {t for t, o in first.items() if o == "CRASH"}
    assert crashed == {f"{v}[general-async{t}]" for v in VECTORS for t in ("", "-timing")}
    assert {o for t, o in first.items() if t not in crashed} == {"PASS"}
    assert "2 of 5 cells failed" in r.stdout  # the item names its failed cells
    r = run(tree, report, "--lf", driver=driver)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    again = Counter((x["test_id"], x["outcome"]) for x in rows(report))
    assert set(again) == {(t, "CRASH") for t in crashed}


@pytest.mark.skipif(
    importlib.util.find_spec("distributed") is None,
    reason='dask.distributed not installed: pip install "nnconform[cluster]"',
)
def test_the_cluster_dispatches_cells_and_gives_the_local_rows(tree, tmp_path):
    """--cluster: each cell is a case of its own (dispatched, streamed back, written with the
    coordinator's cell node id); the rows are the local run's."""
    local, remote = tmp_path / "local", tmp_path / "cluster"
    select = ["-k", "not burst"]
    r = run(tree, local, pytest_args=select)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    r = run(tree, remote, "--cluster", "local:2", pytest_args=select)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    want = {(x["extra"]["nodeid"], x["test_id"], x["outcome"]) for x in rows(local)}
    got = rows(remote)
    assert len(got) == len(want) == 4 * len(VECTORS)  # sync-timing, async, async-timing, plain
    assert {(x["extra"]["nodeid"], x["test_id"], x["outcome"]) for x in got} == want
    assert f"{len(want)} case(s) in" in r.stdout


@pytest.mark.skipif(
    importlib.util.find_spec("distributed") is None,
    reason='dask.distributed not installed: pip install "nnconform[cluster]"',
)
def test_a_cell_that_always_kills_its_cluster_worker_is_a_crash_row_of_that_cell(tmp_path):
    """A driver that kills the Dask worker on L2_POOL_2D: that vector's cell is lost twice and
    becomes a CRASH row with the cell's own test id, node id and variant; the add cells pass."""
    d = tmp_path / "vectors" / "V1_0"
    d.mkdir(parents=True)
    for f in ("add.json", "l2_pool_float.json"):
        shutil.copy(default_root() / "V1_0" / f, d / f)
    report = tmp_path / "r"
    r = run(
        d.parent,
        report,
        "--cluster",
        "local:1",
        driver=double("broken_cluster", "KillsWorkerOnL2Pool"),
        pytest_args=["-k", "(add or l2_pool_float) and not internal and general-async and not timing"],
    )
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    got = {x["test_id"]: x for x in rows(report)}
    assert set(got) == {"V1_0/add[general-async]", "V1_0/l2_pool_float[general-async]"}
    crash = got["V1_0/l2_pool_float[general-async]"]
    assert crash["outcome"] == "CRASH" and "cluster worker" in crash["message"]
    assert crash["extra"]["nodeid"].endswith("::test_vector_variant[V1_0/l2_pool_float[general-async]]")
    assert crash["extra"]["variant"] == "general-async"
    assert "-k 'V1_0/l2_pool_float[general-async]'" in crash["replay"]
    assert got["V1_0/add[general-async]"]["outcome"] == "PASS"
