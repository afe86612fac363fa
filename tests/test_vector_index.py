"""The vectors suite's collection index (nnconform.cases.vector_index): facts are derived once per
file and reused while the file and the deriving code are unchanged."""

import json
import os

import pytest

from nnconform.cases.vector_index import VectorIndex, code_key, index_path


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = tmp_path / "vectors"
    (root / "V1_0").mkdir(parents=True)
    for name, n in (("a.json", 2), ("b.json", 3)):
        (root / "V1_0" / name).write_text(json.dumps([{"name": f"{name}-{i}"} for i in range(n)]))
    return root


def _files(root):
    return sorted(root.rglob("*.json"))


def _derive(calls):
    def derive(path):
        calls.append(path.name)
        return {"cases": [d["name"] for d in json.loads(path.read_text())]}

    return derive


def test_facts_are_derived_once_and_reused(tree):
    calls = []
    idx = VectorIndex(tree, "k1", _derive(calls))
    first = [idx.facts(f) for f in _files(tree)]
    idx.save(_files(tree))
    assert calls == ["a.json", "b.json"] and index_path(tree).is_file()
    again = VectorIndex(tree, "k1", _derive(calls))
    assert [again.facts(f) for f in _files(tree)] == first
    assert calls == ["a.json", "b.json"] and again.derived == 0


def test_a_changed_file_or_changed_code_is_derived_again(tree):
    calls = []
    idx = VectorIndex(tree, "k1", _derive(calls))
    [idx.facts(f) for f in _files(tree)]
    idx.save(_files(tree))
    b = tree / "V1_0" / "b.json"
    b.write_text(json.dumps([{"name": "new"}]))
    idx = VectorIndex(tree, "k1", _derive(calls))
    assert idx.facts(b) == {"cases": ["new"]} and idx.facts(tree / "V1_0" / "a.json")["cases"] == [
        "a.json-0",
        "a.json-1",
    ]
    assert calls == ["a.json", "b.json", "b.json"]
    idx.save(_files(tree))
    VectorIndex(tree, "k2", _derive(calls)).facts(tree / "V1_0" / "a.json")  # other code: not reused
    assert calls[-1] == "a.json" and len(calls) == 4


def test_a_damaged_index_is_ignored_and_replaced(tree):
    calls = []
    path = index_path(tree)
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    idx = VectorIndex(tree, "k1", _derive(calls))
    assert idx.facts(tree / "V1_0" / "a.json")["cases"] == ["a.json-0", "a.json-1"]
    idx.save(_files(tree))
    assert json.loads(path.read_text())["code"] == "k1"


def test_an_unwritable_cache_costs_only_speed(tree):
    # a file where the cache directory should be: every write fails (also for root)
    index_path(tree).parent.parent.mkdir(parents=True)
    index_path(tree).parent.write_text("in the way")
    idx = VectorIndex(tree, "k1", _derive([]))
    assert idx.facts(tree / "V1_0" / "a.json")["cases"]
    idx.save(_files(tree))
    assert index_path(tree).parent.read_text() == "in the way"


def test_save_failure_leaves_no_temp_file(tree, monkeypatch):
    idx = VectorIndex(tree, "k1", _derive([]))
    idx.facts(tree / "V1_0" / "a.json")

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    idx.save(_files(tree))
    assert not index_path(tree).exists()
    assert not [p for p in index_path(tree).parent.iterdir()]


def test_code_key_follows_the_source(tmp_path):
    a = tmp_path / "a.py"
    a.write_text("x = 1\n")
    k = code_key(a)
    a.write_text("x = 2\n")
    assert code_key(a) != k and len(k) == 16


def test_a_saved_index_is_not_written_again_by_the_same_process(tree):
    """A cluster worker collects once per batch with the same VectorIndex: after one save,
    nothing new was derived, so the next save leaves the file alone."""
    idx = VectorIndex(tree, "k1", _derive([]))
    [idx.facts(f) for f in _files(tree)]
    idx.save(_files(tree))
    p = index_path(tree)
    before = p.stat().st_mtime_ns
    os.utime(p, ns=(before - 10**9, before - 10**9))  # so a rewrite would show
    [idx.facts(f) for f in _files(tree)]
    idx.save(_files(tree))
    assert p.stat().st_mtime_ns == before - 10**9 and idx.derived == 0
