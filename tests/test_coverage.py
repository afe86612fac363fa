"""The coverage table is generated from the registry, and the copy in docs/coverage.md is current."""

import json
import subprocess
import sys
from pathlib import Path

from nnconform.cases.coverage import coverage, levels_cell, readme_rows, to_markdown, types_cell
from nnconform.cases.vectors import default_root, vector_files
from nnconform.ir import SHORT_TYPE_NAME, OperandType, OperationType
from nnconform.reference.ops.feature_levels import feature_level, folder_level
from nnconform.reference.ops.registry import REGISTRY, load_all

COVERAGE_DOC = Path(__file__).resolve().parents[1] / "docs" / "coverage.md"


def test_every_operation_has_a_row_and_registered_ones_list_their_types():
    load_all()
    rows = {r.operation: r for r in coverage()}
    assert set(rows) == {t.name for t in OperationType if t != OperationType.OEM_OPERATION}
    for t, opdef in REGISTRY.items():
        assert rows[t.name].implemented, t.name


def test_every_claimed_operation_and_type_has_a_hand_checked_example():
    missing = [f"{r.operation}/{t}" for r in coverage() for t in r.implemented if not r.examples.get(t)]
    assert not missing, missing


def test_coverage_doc_table_matches_the_registry():
    stated = readme_rows(COVERAGE_DOC)
    for r in coverage():
        assert stated.get(r.operation) == (types_cell(r), levels_cell(r), str(sum(r.examples.values()))), (
            f"docs/coverage.md for {r.operation} is stale: run `nnconform coverage --write-readme docs/coverage.md "
            f"--results <vectors run>/results.jsonl`"
        )


def test_feature_levels_cover_every_implemented_type_and_match_the_header():
    rows = {r.operation: r for r in coverage()}
    for r in rows.values():
        assert set(r.feature_levels) == set(r.implemented), r.operation
        assert all(1 <= lvl <= 7 and lvl != 5 for lvl in r.feature_levels.values()), r.operation
    # A few facts straight from NeuralNetworksTypes.h
    assert rows["ADD"].feature_levels == {"fp32": 1, "fp16": 3, "quant8": 1, "quant8_signed": 4, "int32": 4}
    assert rows["RESHAPE"].feature_levels["int32"] == 6
    assert rows["RSQRT"].feature_levels == {"fp32": 3, "fp16": 3, "quant8": 7, "quant8_signed": 7}
    assert rows["EMBEDDING_LOOKUP"].feature_levels == {
        "fp32": 1,
        "fp16": 4,
        "int32": 3,
        "quant8": 3,
        "quant8_signed": 4,
    }
    assert set(rows["BATCH_MATMUL"].feature_levels.values()) == {6}
    assert set(rows["MIRROR_PAD"].feature_levels.values()) == {7}
    assert rows["CAST"].feature_levels["bool8"] == 4 and rows["CAST"].feature_levels["fp16"] == 3


def test_folder_feature_levels():
    assert [
        folder_level(f)
        for f in ("V1_0", "V1_1", "V1_2", "V1_3", "V1_3_cts_only", "AIDL_V2", "AIDL_V3", "AIDL_V12", "mine")
    ] == [1, 2, 3, 4, 4, 6, 7, 16, None]


def test_no_golden_vector_uses_a_type_before_its_feature_level():
    """Cross-check of the feature-level table against the bundled golden vectors: every
    operation x primary type a (valid) vector of a folder uses is available at that folder's
    feature level.  Reads the JSON directly (the models are not built)."""
    load_all()
    root = default_root()
    checked, late = 0, []
    for f in vector_files(root):
        level = folder_level(f.parent.name)
        for d in json.loads(f.read_text()):
            if d.get("expect_failure"):
                continue
            for sg in (d["model"]["main"], *d["model"]["referenced"]):
                for o in sg["operations"]:
                    op = OperationType[o["type"]]
                    k = REGISTRY[op].primary_input
                    if k >= len(o["inputs"]):
                        continue
                    t = OperandType[sg["operands"][o["inputs"][k]]["type"]]
                    fl = feature_level(op, SHORT_TYPE_NAME.get(t, t.name))
                    checked += 1
                    if level is not None and fl > level:
                        late.append(f"{f.parent.name}/{d['name']}: {op.name} {t.name} is level {fl}")
    assert checked > 10000
    assert not late, late[:10]


def test_cli_prints_markdown():
    out = subprocess.run([sys.executable, "-m", "nnconform", "coverage"], capture_output=True, text=True)
    assert out.returncode == 0 and "| 3 | CONV_2D |" in out.stdout
    assert to_markdown(coverage()).splitlines()[0] in out.stdout
