"""End to end: `nnconform run --suite models` passes on the reference with the built-in models
(no download), catches deliberately broken drivers, localises the failure to the operation
that is wrong by itself, and dumps a spec that `nnconform replay` reproduces.  Zoo cases
skip with a reason when the cache is empty (a private XDG_CACHE_HOME here: CI never
downloads)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from nnconform.drivers.broken import ConvIgnoresBias
from nnconform.models import builtin
from nnconform.models.localise import first_failing_operation_alone, single_operation_model
from nnconform.executor import Executor
from nnconform.spec import load_spec
from nnconform.models.criteria import REAL_MODEL, judge, output_scale, scaled_criteria


def _run(tmp_path: Path, driver: str, *pytest_args: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    cmd = [sys.executable, "-m", "nnconform", "run", "--driver", driver, "--suite", "models",
           "--report-dir", str(tmp_path / "report"), "--seed", "11", "--", *pytest_args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    journal = tmp_path / "report" / "results.jsonl"
    rows = [json.loads(x) for x in journal.read_text().splitlines()] if journal.exists() else []
    return r, rows


def test_reference_passes_builtin_models_and_zoo_skips_with_reason(tmp_path):
    r, rows = _run(tmp_path, "reference")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    by_id = {row["test_id"]: row for row in rows}
    for name in ("mobilenet_v1_float", "mobilenet_v1_quant8", "mobilenet_v2_float", "mobilenet_v2_quant8"):
        assert by_id[f"models/{name}"]["outcome"] == "PASS"
    zoo_row = by_id["models/not-fetched"]
    assert zoo_row["outcome"] == "SKIP" and "nnconform models fetch" in zoo_row["message"]


def test_conv_ignoring_bias_is_caught_localised_and_replayable(tmp_path):
    driver = "nnconform.drivers.broken:ConvIgnoresBias"
    r, rows = _run(tmp_path, driver, "-k", "mobilenet_v1_float")
    assert r.returncode == 1, r.stdout[-3000:]
    (row,) = [x for x in rows if x["test_id"] == "models/mobilenet_v1_float"]
    assert row["outcome"] == "FAIL"
    assert row["extra"]["first_divergent_operation"] == "CONV_2D"
    assert row["extra"]["first_operation_failing_alone"] == "CONV_2D"
    assert "first operation failing on its own: #0 CONV_2D" in row["message"]
    spec = load_spec(row["spec_path"], validate=True)
    assert spec.meta["first_operation_failing_alone"]["index"] == 0
    assert spec.meta["models_criteria"]["name"].startswith("RealModel")
    assert spec.meta["criteria_set"] == "RealModel"
    rp = subprocess.run([sys.executable, "-m", "nnconform", "replay", row["spec_path"], "--driver", driver],
                        capture_output=True, text=True, timeout=300)
    assert rp.returncode == 1 and "FAIL" in rp.stdout
    assert "criteria: RealModel" in rp.stdout


def test_replay_judges_a_models_spec_as_the_suite_does(tmp_path):
    """An output with one element of 100 and the others near 0, off by 0.05 everywhere: far
    beyond RealModel's unscaled atol for the small ones, within it scaled by the output's
    magnitude (100).  Replayed as a models-suite
    spec it passes, as the suite would have judged it; as a plain spec (default criteria),
    or with the unscaled set forced by name on another suite's spec, it fails."""
    from nnconform.ir import ModelBuilder, OperandType as T, OperationType as Op
    from nnconform.spec import SpecExample, SpecFile, dump_spec
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [64])
    y = b.output(T.TENSOR_FLOAT32, [64])
    b.operation(Op.ADD, [x, b.const(T.TENSOR_FLOAT32, [64], np.eye(1, 64, dtype=np.float32)[0] * 100), b.i32(0)], [y])
    model = b.build()
    xv = np.linspace(-0.01, 0.01, 64).astype(np.float32)
    recorded = (Executor(model).run([xv])[0] + np.float32(0.05)).astype(np.float32)
    results = {}
    for label, meta in (("models", {"suite": "models", "criteria_set": "RealModel"}),
                        ("models-old-dump", {"suite": "models"}),
                        ("plain", {})):
        path = tmp_path / f"{label}.spec.json"
        dump_spec(SpecFile(model, [SpecExample("e", [xv], [recorded])], meta), path)
        rp = subprocess.run([sys.executable, "-m", "nnconform", "replay", str(path), "--driver", "reference",
                             "--in-process"], capture_output=True, text=True, timeout=300)
        results[label] = (rp.returncode, rp.stdout)
    assert results["models"][0] == 0 and "scaled by each output's magnitude" in results["models"][1], results
    assert results["models-old-dump"][0] == 0, results
    assert results["plain"][0] == 1 and "FAIL" in results["plain"][1], results


def test_single_operation_model_and_localiser_in_process():
    m = builtin.build("mobilenet_v2_quant8".rsplit("_", 1)[0], "quant8")
    x = builtin.example_inputs(m, 0)
    ex = Executor(m)
    ex.run(x)
    one, feeds = single_operation_model(m, 3, ex.main_values)
    assert len(one.main.operations) == 1
    got = Executor(one).run(feeds)
    assert all(np.array_equal(a, ex.main_values[i]) for a, i in zip(got, m.main.operations[3].outputs))
    found = first_failing_operation_alone(ConvIgnoresBias(), m, x)
    assert found is not None and found[1] == "CONV_2D" and found[0] == 0


def test_deep_graph_criteria_scale_with_the_output():
    assert output_scale(np.array([0.5, -0.2])) == 1.0
    assert output_scale(np.array([3.0, -1395.0, np.inf])) == 1395.0
    c = scaled_criteria(100.0)
    assert c.float32.atol == REAL_MODEL.float32.atol * 100 and c.float32.rtol == REAL_MODEL.float32.rtol
    assert c.quant8_asymm == REAL_MODEL.quant8_asymm
    m = builtin.build("mobilenet_v1", "float")
    e = Executor(m).run(builtin.example_inputs(m, 0))
    assert judge(m, e, [a.copy() for a in e]) is None
    assert judge(m, e, [a + 0.05 for a in e]) is not None
