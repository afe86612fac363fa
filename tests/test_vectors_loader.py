"""The golden vectors: the bundled copy (packing, unpacking, the cache), discovery of every
feature-level folder, loading into valid models, a spec-file round trip (that is how a
failing vector is dumped and replayed), and the suite's handling of a malformed file."""

import csv
import json
import lzma
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nnconform import vectors_data
from nnconform.cases.vectors import default_root, load_cases, resolve_root, vector_files, vector_folders
from nnconform.ir.spec import SpecExample, SpecFile, dump_spec, load_spec
from nnconform.ir.validation import validate_model
from nnconform.reference.executor import execute

FOLDERS = ["V1_0", "V1_1", "V1_2", "V1_3", "V1_3_cts_only", "AIDL_V2", "AIDL_V3"]


# ---- the bundled copy --------------------------------------------------------------------------


def test_the_bundle_holds_every_case_of_every_feature_level():
    man = vectors_data.manifest()
    assert list(sorted(man["folders"], key=vectors_data.folder_order)) == FOLDERS
    assert man["total_cases"] == 9374 and man["total_files"] == 611
    assert man["folders"]["AIDL_V2"]["cases"] == 75 and man["folders"]["AIDL_V3"]["cases"] == 172
    assert "7541c8a3e958585308b82beff3eb8e5dde2c3432" in man["source"]["source"]
    assert "690f68ca686fbbcf815c27cca67ad84a3c797ddd" in man["source"]["source_aidl"]
    notice = (Path(vectors_data.__file__).parent / "NOTICE.md").read_text()
    assert "Apache License, Version 2.0" in notice and "690f68ca686fbbcf815c27cca67ad84a3c797ddd" in notice


def test_default_root_is_the_unpacked_bundle_unless_the_environment_says_otherwise(monkeypatch, tmp_path):
    monkeypatch.delenv("NNCONFORM_VECTORS", raising=False)
    root = default_root()
    assert root.name == f"vectors-{vectors_data.data_key()}"
    assert [d.name for d in vector_folders(root)] == FOLDERS
    files = vector_files(root)
    assert len(files) == 611 and sum(len(json.loads(f.read_text())) for f in files) == 9374
    assert (root / "SCHEMA.md").is_file()
    monkeypatch.setenv("NNCONFORM_VECTORS", str(tmp_path))
    assert default_root() == tmp_path
    assert resolve_root(str(root)) == root  # an explicit option wins over the environment


def test_unpacking_goes_to_the_cache_once_and_repairs_a_damaged_copy(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("NNCONFORM_VECTORS", raising=False)
    root = vectors_data.bundled_root()
    assert root.parent == tmp_path / "nnconform"
    stamp = (root / "AIDL_V2" / "pack.json").stat().st_mtime_ns
    assert vectors_data.bundled_root() == root
    assert (root / "AIDL_V2" / "pack.json").stat().st_mtime_ns == stamp  # not unpacked again
    (root / "AIDL_V3" / "reverse.json").unlink()
    assert vectors_data.bundled_root() == root and (root / "AIDL_V3" / "reverse.json").is_file()
    assert not [p for p in root.parent.iterdir() if p.name.endswith(".partial")]


def _small_tree(root: Path) -> Path:
    for folder, name, cases in [
        ("V1_0", "a.json", [{"name": "a", "x": 1.5}]),
        ("V1_0", "b.json", [{"name": "b"}, {"name": "b_2"}]),
        ("AIDL_V9", "c.json", [{"name": "c"}]),
    ]:
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / name).write_text(json.dumps(cases))
    (root / "SCHEMA.md").write_text("schema\n")
    (root / "index.json").write_text(json.dumps({"source": "here", "files": {}}))
    return root


def test_pack_is_deterministic_and_round_trips(tmp_path, monkeypatch):
    src = _small_tree(tmp_path / "src")
    man1 = vectors_data.pack(src, tmp_path / "out1")
    man2 = vectors_data.pack(src, tmp_path / "out2")
    assert man1 == man2 and man1["total_cases"] == 4 and man1["source"] == {"source": "here"}
    assert list(man1["folders"]) == ["V1_0", "AIDL_V9"]
    for f in (tmp_path / "out1").iterdir():
        assert f.read_bytes() == (tmp_path / "out2" / f.name).read_bytes(), f.name
    # The archives are xz; read back through the package's own reader, the tree is identical.
    monkeypatch.setattr(vectors_data, "_data", lambda name: (tmp_path / "out1" / name).read_bytes())
    back = vectors_data.extract(tmp_path / "back")
    for f in src.rglob("*"):
        if f.is_file():
            assert (back / f.relative_to(src)).read_bytes() == f.read_bytes(), f
    assert lzma.decompress((tmp_path / "out1" / "V1_0.tar.xz").read_bytes())


def test_a_damaged_archive_is_refused(tmp_path, monkeypatch):
    src = _small_tree(tmp_path / "src")
    vectors_data.pack(src, tmp_path / "out")
    blob = bytearray((tmp_path / "out" / "V1_0.tar.xz").read_bytes())
    blob[-20] ^= 0xFF
    (tmp_path / "out" / "V1_0.tar.xz").write_bytes(bytes(blob))
    monkeypatch.setattr(vectors_data, "_data", lambda name: (tmp_path / "out" / name).read_bytes())
    with pytest.raises(vectors_data.BundleError, match="checksum"):
        vectors_data.extract(tmp_path / "back")


def test_the_pack_command(tmp_path):
    src = _small_tree(tmp_path / "src")
    r = subprocess.run(
        [sys.executable, "-m", "nnconform.cases.vectors", "pack", str(src), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "4 cases in 3 files" in r.stdout and (tmp_path / "o" / "MANIFEST.json").is_file()


# ---- discovery and loading -------------------------------------------------------------------------


def test_every_folder_is_discovered_in_feature_level_order(tmp_path):
    tree = _small_tree(tmp_path)
    (tree / "notes").mkdir()
    assert [d.name for d in vector_folders(tree)] == ["V1_0", "AIDL_V9"]
    assert [f.name for f in vector_files(tree)] == ["a.json", "b.json", "c.json"]
    assert [f.name for f in vector_files(tree, dirs=["AIDL_V9"])] == ["c.json"]
    # A folder given on its own is one folder.
    assert [f.name for f in vector_files(tree / "V1_0")] == ["a.json", "b.json"]


@pytest.mark.parametrize(
    "op,folder",
    [
        ("CONV_2D", "V1_0"),
        ("WHILE", "V1_3"),
        ("LSTM", "V1_0"),
        ("BOX_WITH_NMS_LIMIT", "V1_2"),
        ("BATCH_MATMUL", "AIDL_V2"),
        ("RSQRT", "AIDL_V3"),
    ],
)
def test_vector_case_round_trips_through_a_spec_file(tmp_path, op, folder):
    cases = [c for c in load_cases(ops=[op], dirs=[folder]) if not c.expect_failure][:3]
    assert cases, f"no {op} vectors"
    for c in cases:
        assert c.spec_dir == folder and c.test_id.startswith(folder + "/")
        validate_model(c.model)
        path = tmp_path / "case.spec.json"
        dump_spec(SpecFile(c.model, [SpecExample(c.name, list(c.inputs), list(c.outputs), c.ignored)]), path)
        back = load_spec(path, validate=True)
        want = execute(c.model, list(c.inputs))
        got = execute(back.model, list(back.examples[0].inputs))
        assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(want, got)), c.name


def test_the_folder_is_the_feature_level():
    rsqrt = load_cases(ops=["RSQRT"], dirs=["AIDL_V3"])
    assert rsqrt and {c.feature_level for c in rsqrt} == {7}
    assert {c.feature_level for c in load_cases(ops=["PACK"])} == {6}


def test_empty_input_is_omitted_and_empty_output_is_zero_sized():
    lstm = next(c for c in load_cases(ops=["LSTM"], dirs=["V1_0"]) if any(v is None for v in c.inputs))
    assert any(v is None for v in lstm.inputs)
    zero = next(c for c in load_cases(name_contains="zero_sized", dirs=["V1_2"]) if any(o.size == 0 for o in c.outputs))
    assert all(o is not None for o in zero.outputs)


def test_an_operation_filtered_load_opens_only_files_with_a_wanted_case(tmp_path, monkeypatch):
    """load_cases(ops=..., within=...) learns each file's operations once (an index kept in the
    cache between processes) and then skips the files with no wanted case unread; ``within``
    drops cases that also use other operations."""
    import nnconform.cases.vectors as vectors_module

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    tree = tmp_path / "vectors" / "V1_0"
    tree.mkdir(parents=True)
    (tree / "floor.json").write_text(json.dumps(_raw("V1_0", "floor.json")[:1]))
    relu, mixed = _raw("V1_0", "relu_float_1.json")[:2]  # RELU alone; ADD and RELU
    assert len({o["type"] for o in mixed["model"]["main"]["operations"]}) == 2
    (tree / "relu.json").write_text(json.dumps([relu, mixed]))
    root = tree.parent
    vectors_module._ops_index.cache_clear()  # as a new process would start
    assert [c.name for c in load_cases(root, ops=["RELU"])] == [relu["name"], mixed["name"]]
    assert [c.name for c in load_cases(root, ops=["RELU"], within=["RELU"])] == [relu["name"]]
    # floor.json, made unreadable without changing its size or time, is not opened again
    vectors_module._ops_index.cache_clear()
    st = (tree / "floor.json").stat()
    (tree / "floor.json").write_text("x" * st.st_size)
    os.utime(tree / "floor.json", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert [c.name for c in load_cases(root, ops=["RELU"], within=["RELU"])] == [relu["name"]]
    with pytest.raises(ValueError):  # ... but a load that wants it does read it
        load_cases(root, ops=["FLOOR"])


def _raw(folder: str, name: str) -> list:
    return json.loads((default_root() / folder / name).read_text())


# ---- the suite on a vectors directory with broken files ------------------------------------------------


def _run_suite(vectors: Path, report: Path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "nnconform",
            "run",
            "--driver",
            "reference",
            "--suite",
            "vectors",
            "--vectors",
            str(vectors),
            "--report-dir",
            str(report),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    with open(report / "results.csv", newline="") as fh:
        return r, {row["test_id"]: row for row in csv.DictReader(fh)}


def test_a_malformed_file_is_one_error_row_and_the_rest_still_runs(tmp_path):
    good = default_root() / "AIDL_V2" / "reshape_int32.json"
    tree = tmp_path / "vectors"
    (tree / "V1_0").mkdir(parents=True)
    (tree / "AIDL_V9").mkdir()
    shutil.copy(good, tree / "AIDL_V9" / "reshape_int32.json")
    (tree / "V1_0" / "broken.json").write_text('[{"name": "x", "model": ')
    (tree / "V1_0" / "not_a_list.json").write_text('{"name": "x"}')
    cases = json.loads(good.read_text())
    del cases[1]["model"]
    (tree / "V1_0" / "one_bad_case.json").write_text(json.dumps(cases))
    r, got = _run_suite(tree, tmp_path / "report")
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    assert got["V1_0/broken.json"]["outcome"] == "ERROR"
    assert "not valid JSON" in got["V1_0/broken.json"]["message"]
    assert got["V1_0/not_a_list.json"]["outcome"] == "ERROR"
    assert "not a JSON list" in got["V1_0/not_a_list.json"]["message"]
    # A good file in a folder of a later feature level runs, with the folder in its rows.
    # (the vectors execution matrix adds variant rows, "id[variant]": they must pass or skip too)
    assert all(v["outcome"] in ("PASS", "SKIP") for k, v in got.items() if "[" in k)
    got = {k: v for k, v in got.items() if "[" not in k}
    later = {k: v for k, v in got.items() if k.startswith("AIDL_V9/")}
    assert len(later) == 2 and {v["outcome"] for v in later.values()} == {"PASS"}
    extra = json.loads(later["AIDL_V9/reshape_int32"]["extra"])
    assert extra["feature_level"] == "AIDL_V9" and extra["hal"] == "AIDL_V9" and extra["nnapi_feature_level"] == 13
    # In a readable file, one malformed case is its own ERROR row; its neighbour passes.
    assert got["V1_0/reshape_int32"]["outcome"] == "PASS"
    bad = got["V1_0/reshape_int32_all_tensors_as_inputs"]
    assert bad["outcome"] == "ERROR" and "malformed" in bad["message"] and "model" in bad["message"]
    assert len(got) == 6


def test_a_missing_vectors_directory_is_an_error_row(tmp_path):
    r, got = _run_suite(tmp_path / "nowhere", tmp_path / "report")
    assert r.returncode != 0
    assert list(got) == ["vectors-missing"] and got["vectors-missing"]["outcome"] == "ERROR"
    assert "nowhere" in got["vectors-missing"]["message"]


def test_the_suite_reads_the_bundled_copy_by_default(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NNCONFORM_VECTORS"}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "nnconform",
            "run",
            "--driver",
            "reference",
            "--suite",
            "vectors",
            "--report-dir",
            str(tmp_path),
            "--",
            "-k",
            "AIDL_V2 and reshape",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    with open(tmp_path / "results.csv", newline="") as fh:
        got = list(csv.DictReader(fh))
    plain = [row["test_id"] for row in got if "[" not in row["test_id"]]  # the rest: rotate's matrix cells
    assert plain == ["AIDL_V2/reshape_int32", "AIDL_V2/reshape_int32_all_tensors_as_inputs"]
    assert {row["outcome"] for row in got} == {"PASS"}
