"""`nnconform vectors import`: AOSP test specs (*.mod.py) to golden-vector JSON, through the
checkout's own test generator.  The checkout here is a fake one: our stand-in generator
(tests/aosp_standin/standin_generator.py, the DSL subset and the interface the importer
uses) and two small spec files of our own (tests/aosp_standin/specs)."""

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nnconform.cases.vectors import check_case, load_cases
from nnconform.cases.vectors_import import ImportProblem, dumps_cases, import_vectors
from nnconform.cli import main
from nnconform.ir import OperandType as T

STANDIN = Path(__file__).resolve().parent / "aosp_standin"


def fake_checkout(root: Path, layout: str = "module") -> Path:
    """A directory shaped like packages/modules/NeuralNetworks (or frameworks/ml with 'ml')."""
    base = root / "nn" if layout == "ml" else root
    (base / "tools" / "test_generator").mkdir(parents=True)
    shutil.copy(STANDIN / "standin_generator.py", base / "tools" / "test_generator" / "test_generator.py")
    shutil.copytree(STANDIN / "specs", base / "runtime" / "test" / "specs")
    return root


def read(path: Path) -> list[dict]:
    return json.loads(path.read_text())


@pytest.fixture
def imported(tmp_path, capsys):
    aosp = fake_checkout(tmp_path / "aosp")
    out = tmp_path / "vectors"
    code = main(["vectors", "import", str(aosp), str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "7 cases in 2 files" in printed and f"--vectors {out}" in printed
    return out


def test_import_writes_one_file_per_spec_in_its_folder(imported):
    assert sorted(str(p.relative_to(imported)) for p in imported.rglob("*.json")) == [
        "AIDL_V9/tiny_more.json",
        "V1_0/tiny_add.json",
        "index.json",
    ]
    index = read(imported / "index.json")
    assert index["files"] == {"V1_0/tiny_add": 3, "AIDL_V9/tiny_more": 4}
    assert index["summary"]["total_test_cases"] == 7 and index["failures"] == {}
    # One compact case per line, as the bundled files are.
    text = (imported / "V1_0" / "tiny_add.json").read_text()
    assert text.startswith("[\n{") and text.endswith("}\n]\n") and len(text.splitlines()) == 5


def test_the_fields_follow_the_spec(imported):
    add = {c["name"]: c for c in read(imported / "V1_0" / "tiny_add.json")}
    assert list(add) == ["tiny_add", "tiny_add_relaxed", "tiny_add_float16"]
    assert [c["variations"] for c in add.values()] == [[], ["relaxed"], ["float16"]]
    assert (
        add["tiny_add"]["min_supported_version"] == "V1_0" and add["tiny_add_relaxed"]["min_supported_version"] is None
    )
    assert add["tiny_add_relaxed"]["model"]["relax_float32_to_float16"] is True
    fp16 = add["tiny_add_float16"]
    assert {o["type"] for o in fp16["model"]["main"]["operands"]} == {"TENSOR_FLOAT16", "INT32"}
    assert add["tiny_add"]["inputs"][0]["values"] == [1.0, 2.5, -3.0, 0.1]  # shortest round-trip text
    assert fp16["inputs"][0]["values"][3] == float(np.float32(np.float16(0.1)))
    act = add["tiny_add"]["model"]["main"]["operands"][2]
    assert act["lifetime"] == "CONSTANT_COPY" and act["value"] == [0] and act["dimensions"] == []

    more = read(imported / "AIDL_V9" / "tiny_more.json")
    assert [(c["name"], c["example_index"], c["model_name"], c["example_name"]) for c in more] == [
        ("tiny_more_reshape_flat", 0, "reshape", "flat"),
        ("tiny_more_reshape_flat_2", 1, "reshape", "flat"),
        ("tiny_more_rsqrt", 0, "rsqrt", None),
        ("tiny_more_bad_reshape", 0, "bad_reshape", None),
    ]
    assert {c["spec_dir"] for c in more} == {"AIDL_V9"} and {c["spec"] for c in more} == {"tiny_more"}
    rsqrt = more[2]
    q = rsqrt["model"]["main"]["operands"][0]
    assert (q["type"], q["scale"], q["zero_point"], q["num_consumers"]) == ("TENSOR_QUANT8_ASYMM", 0.25, 0, 2)
    assert [o["ignored"] for o in rsqrt["outputs"]] == [False, True]
    assert rsqrt["outputs"][1]["values"] == [0, 0, 0]
    assert more[3]["expect_failure"] is True and more[1]["inputs"][0]["values"][3] == 2147483647


def test_the_imported_vectors_load_and_pass_on_the_reference(imported):
    cases = load_cases(imported)
    assert [c.test_id for c in cases][:2] == ["V1_0/tiny_add", "V1_0/tiny_add_relaxed"]
    assert {c.feature_level for c in cases} == {1, 13}
    for c in cases:
        status, message = check_case(c)
        assert status == "pass", (c.test_id, message)
    reshape = next(c for c in cases if c.name == "tiny_more_reshape_flat_2")
    assert reshape.model.main.operands[0].type == T.TENSOR_INT32
    np.testing.assert_array_equal(reshape.outputs[0], np.array([[-7, 0], [7, 2147483647], [-2147483648, 1]]))


def test_the_imported_vectors_run_as_a_suite(imported, tmp_path):
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
            str(imported),
            "--report-dir",
            str(tmp_path / "report"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    with open(tmp_path / "report" / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert all(row["outcome"] in ("PASS", "SKIP") for row in rows if "[" in row["test_id"])  # matrix variants
    rows = [row for row in rows if "[" not in row["test_id"]]
    assert len(rows) == 7 and {row["outcome"] for row in rows} == {"PASS"}
    assert {json.loads(row["extra"])["feature_level"] for row in rows} == {"V1_0", "AIDL_V9"}


def test_a_frameworks_ml_layout_and_one_folder(tmp_path):
    aosp = fake_checkout(tmp_path / "ml", layout="ml")
    out = tmp_path / "out"
    res = import_vectors(aosp, out, folders=["AIDL_V9"])
    assert res.files == {"AIDL_V9/tiny_more": 4} and not (out / "V1_0").exists()
    # A later import of another folder keeps what the index already lists.
    import_vectors(aosp, out, folders=["V1_0"])
    index = read(out / "index.json")
    assert index["files"] == {"AIDL_V9/tiny_more": 4, "V1_0/tiny_add": 3}
    assert [i["folders"] for i in index["imports"]] == [["AIDL_V9"], ["V1_0"]]


def test_a_broken_spec_is_reported_and_the_others_are_written(tmp_path, capsys):
    aosp = fake_checkout(tmp_path / "aosp")
    (aosp / "runtime" / "test" / "specs" / "V1_0" / "a_broken.mod.py").write_text(
        'x = Input("x", ("TENSOR_FLOAT32", [1]))\nModel().Operation("RELU", x).To(undefined_name)\n'
    )
    code = main(["vectors", "import", str(aosp), str(tmp_path / "out"), "--folder", "V1_0"])
    captured = capsys.readouterr()
    assert code == 1 and "V1_0/a_broken" in captured.err
    index = read(tmp_path / "out" / "index.json")
    assert "NameError" in index["failures"]["V1_0/a_broken"] and "line 2" in index["failures"]["V1_0/a_broken"]
    assert index["files"] == {"V1_0/tiny_add": 3}


@pytest.mark.parametrize(
    "make,args,message",
    [
        (lambda p: p, [], "no test_generator.py"),
        (lambda p: fake_checkout(p), ["--folder", "AIDL_V4"], "no spec folder AIDL_V4"),
    ],
)
def test_unusable_checkouts_are_one_line_errors(tmp_path, capsys, make, args, message):
    aosp = make(tmp_path / "aosp")
    aosp.mkdir(parents=True, exist_ok=True)
    code = main(["vectors", "import", str(aosp), str(tmp_path / "out"), *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err


def test_something_that_is_not_a_generator_is_refused(tmp_path):
    aosp = fake_checkout(tmp_path / "aosp")
    (aosp / "tools" / "test_generator" / "test_generator.py").write_text("VALUE = 1\n")
    with pytest.raises(ImportProblem, match="not an AOSP NNAPI test generator"):
        import_vectors(aosp, tmp_path / "out")


def test_special_floats_are_strings():
    text = dumps_cases([{"v": "nan"}, {"v": 1.5}])
    assert text == '[\n{"v":"nan"},\n{"v":1.5}\n]\n'


def test_unpack_and_list(tmp_path, capsys):
    assert main(["vectors", "unpack", str(tmp_path / "v")]) == 0
    assert "9374 cases" in capsys.readouterr().out
    assert main(["vectors", "list", "--vectors", str(tmp_path / "v")]) == 0
    out = capsys.readouterr().out
    assert "AIDL_V3" in out and "feature level  7" in out and "9374 cases" in out
