"""The coverage table is generated from the registry, and the README's copy is current."""
import subprocess
import sys
from pathlib import Path

from nnconform.coverage import coverage, readme_rows, to_markdown
from nnconform.ir import OperationType
from nnconform.ops.registry import REGISTRY, load_all

README = Path(__file__).resolve().parents[1] / "README.md"


def test_every_operation_has_a_row_and_registered_ones_list_their_types():
    load_all()
    rows = {r.operation: r for r in coverage()}
    assert set(rows) == {t.name for t in OperationType if t != OperationType.OEM_OPERATION}
    for t, opdef in REGISTRY.items():
        assert rows[t.name].implemented, t.name


def test_every_claimed_operation_and_type_has_a_hand_checked_example():
    missing = [f"{r.operation}/{t}" for r in coverage() for t in r.implemented if not r.examples.get(t)]
    assert not missing, missing


def test_readme_table_matches_the_registry():
    stated = readme_rows(README)
    for r in coverage():
        impl = ", ".join(r.implemented) if r.implemented else "**not implemented**"
        assert stated.get(r.operation) == (impl, str(sum(r.examples.values()))), (
            f"README coverage for {r.operation} is stale: run `nnconform coverage --write-readme README.md "
            f"--results <vectors run>/results.jsonl`")


def test_cli_prints_markdown():
    out = subprocess.run([sys.executable, "-m", "nnconform", "coverage"], capture_output=True, text=True)
    assert out.returncode == 0 and "| 3 | CONV_2D |" in out.stdout
    assert to_markdown(coverage()).splitlines()[0] in out.stdout
