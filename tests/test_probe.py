"""Capability probe (nnconform.cases.probe) and generators kept inside a driver's claimed set."""

import json
import subprocess
import sys

from helpers import double, double_module

from nnconform.cases.probe import HONEST, OVER, UNDER, ClaimCache, probe_cells
from nnconform.drivers.reference import ReferenceDevice
from nnconform.generators.graphs import GraphConfig
from nnconform.generators.strategies import sample
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op

_broken_partial = double_module("broken_partial")
FloorUnderClaim, HalfReferenceEven, QuantConvOverClaim = (
    _broken_partial.FloorUnderClaim,
    _broken_partial.HalfReferenceEven,
    _broken_partial.QuantConvOverClaim,
)


def _by_cell(cells):
    return {(c.operation, c.data_type, c.rank): c for c in cells}


def test_over_claimed_quant8_conv_is_flagged():
    cells = _by_cell(probe_cells(QuantConvOverClaim(), operations=[Op.CONV_2D]))
    bad = cells[("CONV_2D", "quant8", 4)]
    assert bad.status == OVER and bad.claimed == bad.samples and bad.worked == 0
    assert "GENERAL_FAILURE" in bad.message
    assert cells[("CONV_2D", "fp32", 4)].status == HONEST
    assert cells[("CONV_2D", "quant8_signed", 4)].status == HONEST


def test_refused_floor_that_works_is_an_under_claim():
    cells = probe_cells(FloorUnderClaim(), operations=[Op.FLOOR, Op.ABS])
    for c in cells:
        want = UNDER if c.operation == "FLOOR" else HONEST
        assert c.status == want, c
        if c.operation == "FLOOR":
            assert c.claimed == 0 and c.worked == c.samples > 0


def test_reference_is_honest():
    cells = probe_cells(ReferenceDevice(), operations=[Op.ADD, Op.SOFTMAX, Op.GATHER], samples=1)
    assert cells and {c.status for c in cells} == {HONEST}


def test_claims_restrict_the_generators():
    claims = ClaimCache(HalfReferenceEven())
    allowed = claims.allowed(T.TENSOR_FLOAT32)
    names = {op for op, _ in allowed}
    assert Op.FLOOR in names and Op.ADD in names
    assert not any(int(op) % 2 for op in names)
    cfg = GraphConfig(dtype=T.TENSOR_FLOAT32, n_ops=6, max_dim=8, max_elems=64, allowed=allowed)
    seen = set()
    for seed in range(15):
        case = sample(cfg, seed)
        seen.update(op.type for op in case.model.main.operations)
        claimed = HalfReferenceEven().supported_operations(case.model)
        assert all(claimed), [o.name for o in case.model.main.operations]
    assert len(seen) > 3


def test_probe_command_writes_the_matrix_and_fails_on_an_over_claim(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "nnconform",
            "probe",
            "--driver",
            double("broken_partial", "QuantConvOverClaim"),
            "--ops",
            "CONV_2D,FLOOR",
            "--report-dir",
            str(tmp_path),
            "--samples",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "over-claim: CONV_2D quant8 rank 4" in r.stdout
    (path,) = tmp_path.glob("capabilities-*.json")
    data = json.loads(path.read_text())
    assert data["driver"] == "broken-quant-conv-overclaim" and data["summary"][OVER] == 1
    assert "over-claims (1)" in (tmp_path / "capabilities.md").read_text()
    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "nnconform",
            "probe",
            "--driver",
            double("broken_partial", "QuantConvOverClaim"),
            "--ops",
            "CONV_2D",
            "--report-dir",
            str(tmp_path),
            "--samples",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 1 and "(0 probed now" in again.stdout  # reused from the cache


def test_control_flow_claims():
    class NoIf(ReferenceDevice):
        def supported_operations(self, model):
            return [op.type != Op.IF for op in model.main.operations]

    assert ClaimCache(ReferenceDevice()).control_flow_claimed("if", T.TENSOR_FLOAT32)
    assert not ClaimCache(NoIf()).control_flow_claimed("if", T.TENSOR_FLOAT32)
    assert ClaimCache(NoIf()).control_flow_claimed("while", T.TENSOR_FLOAT32)
