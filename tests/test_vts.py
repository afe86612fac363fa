"""The VTS mutations and suite: every mutation is really invalid, and the suite catches the
deliberately broken drivers of tests/drivers/broken_vts.py (and only with the expected ids)."""

import csv
import os
import subprocess
import sys

import numpy as np
import pytest
from helpers import add_model, double

from nnconform.driver import ExecutionPreference, Priority
from nnconform.errors import ValidationError
from nnconform.ir import Request
from nnconform.ir.validation import validate_model, validate_request
from nnconform.suites.examples import all_examples
from nnconform.vts.cache_checks import CHECKS as CACHE_CHECKS
from nnconform.vts.mutations import MODEL_CHANGING, MODEL_MUTATIONS, request_mutation_class, request_mutations

VALID = [e for e in all_examples() if not e.expect_failure]


@pytest.mark.parametrize("cls", MODEL_CHANGING)
def test_every_model_mutation_is_invalid(cls):
    made = 0
    accepted = []
    for e in VALID:
        for name, model, *_ in MODEL_MUTATIONS[cls](e.model):
            made += 1
            try:
                validate_model(model)
            except ValidationError:
                continue
            accepted.append(f"{e.name}: {name}")
    assert made > 0, f"no valid example yields a {cls} mutation"
    assert not accepted, f"{len(accepted)} {cls} mutations pass validation: {accepted[:5]}"


@pytest.mark.parametrize("cls", ["execution_preference", "priority"])
def test_argument_mutations_keep_the_model_and_break_the_argument(cls):
    model = add_model()
    muts = list(MODEL_MUTATIONS[cls](model))
    assert len(muts) == 2 and all(m.model is model and not m.query_support for m in muts)
    values = [m.preference if cls == "execution_preference" else m.priority for m in muts]
    valid = {int(v) for v in (ExecutionPreference if cls == "execution_preference" else Priority)}
    assert not set(values) & valid


def test_mutations_do_not_touch_the_original():
    e = next(x for x in VALID if len(x.model.main.operations) > 1)
    before = [(o.type, o.dimensions, o.scale, o.zero_point, o.lifetime, o.num_consumers) for o in e.model.main.operands]
    ops_before = e.model.main.operations
    for cls in MODEL_MUTATIONS:
        list(MODEL_MUTATIONS[cls](e.model))
    after = [(o.type, o.dimensions, o.scale, o.zero_point, o.lifetime, o.num_consumers) for o in e.model.main.operands]
    assert before == after and e.model.main.operations == ops_before
    validate_model(e.model)


def test_mutation_names_say_what_changed():
    names = [m.name for m in MODEL_MUTATIONS["operand_scale"](add_model())]
    assert names[0] == "operand_scale/operands[0](TENSOR_FLOAT32)=1"
    assert all(n.startswith("operand_scale/") for n in names)


def test_execution_order_moves_reader_before_writer():
    e = next(x for x in VALID if x.name == "concat_fp32_zero_sized_input")
    muts = list(MODEL_MUTATIONS["execution_order"](e.model))
    assert muts
    for m in muts:
        with pytest.raises(ValidationError, match="before any operation writes it"):
            validate_model(m.model)


def test_every_request_mutation_is_invalid():
    classes = set()
    accepted = []
    for e in VALID:
        request = Request.from_arrays(e.model, list(e.inputs))
        for rm in request_mutations(e.model, request):
            cls = request_mutation_class(rm.name)
            classes.add(cls)
            if cls == "output_buffer_too_small":
                # not a validation rule: the execution must report OUTPUT_INSUFFICIENT_SIZE
                k = e.model.main.output_indexes[int(rm.name.split("/")[1])]
                operand = e.model.main.operands[k]
                need = int(np.prod(operand.dimensions)) * operand.info.dtype.itemsize
                assert rm.request.outputs[int(rm.name.split("/")[1])].capacity < need
                continue
            try:
                validate_request(e.model, rm.request)
            except ValidationError:
                continue
            accepted.append(f"{e.name}: {rm.name}")
    assert not accepted, f"{len(accepted)} request mutations pass validation: {accepted[:5]}"
    assert classes == {
        "remove_input",
        "add_input",
        "remove_output",
        "add_output",
        "input_wrong_rank",
        "input_wrong_dimension",
        "input_zero_dimension",
        "input_buffer_too_small",
        "output_wrong_rank",
        "output_wrong_dimension",
        "output_buffer_too_small",
    }


# ---- the suite end to end, against the reference and the broken drivers ---------------------

DRIVERS = {
    "reference": "reference",
    "accepts_everything": double("broken_vts", "AcceptsEverything"),
    "shared_scratch": double("broken_vts", "SharedScratchBuffer"),
    "bad_timing": double("broken_vts", "BadTiming"),
}
# The model- and request-mutation cases are most of a vts run's time (thousands of mutated
# models, ~7,000 mutated requests) and check how invalid models and requests are rejected.  The
# two drivers whose bugs lie elsewhere inherit the reference's rejections unchanged, so they run
# the rest of the suite: "fails only its own case" is checked over everything but the mutations.
NOT_MUTATIONS = ["--", "-k", "not model_mutation and not request"]
SELECT = {"shared_scratch": NOT_MUTATIONS, "bad_timing": NOT_MUTATIONS}


# Each test runs the suite against its own driver in a subprocess.  They used to share one
# module fixture that started all four runs; under pytest-xdist every worker that drew one of
# these tests built that fixture again, so CI paid for each run twice.
pytestmark = pytest.mark.timeout(900)


def _run(key, tmp_path):
    """Run the vts suite against DRIVERS[key]: (exit code, rows of results.csv, output)."""
    cmd = [
        sys.executable,
        "-m",
        "nnconform",
        "run",
        "--driver",
        DRIVERS[key],
        "--suite",
        "vts",
        "--report-dir",
        str(tmp_path),
        "--seed",
        "11",
        *SELECT.get(key, []),
    ]
    # the cache TOCTOU cases run 100 iterations by default; 10 keep CI quick
    env = dict(os.environ, NNCONFORM_CACHE_TOCTOU_ITERATIONS="10")
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=840)
    csv_path = tmp_path / "results.csv"
    rows = list(csv.DictReader(open(csv_path, newline=""))) if csv_path.exists() else []
    return p.returncode, rows, p.stdout


def _failed(rows):
    return {r["test_id"] for r in rows if r["outcome"] in ("FAIL", "ERROR")}


@pytest.mark.long_run
def test_reference_passes_vts(tmp_path):
    code, rows, text = _run("reference", tmp_path)
    assert code == 0, text[-3000:]
    ids = {r["test_id"] for r in rows}
    assert {f"vts/model_mutation/{c}" for c in MODEL_MUTATIONS} <= ids
    assert {
        "vts/api/timing",
        "vts/concurrency/threads",
        "vts/optional/async",
        "vts/optional/caching",
        "vts/consistency/paths",
        "vts/api/dynamic_output_shape",
    } <= ids
    assert any(i.startswith("vts/quant_coupling/") for i in ids)
    outcome = {r["test_id"]: r["outcome"] for r in rows}
    # the reference implements every optional interface, so those tests really run
    optional = ["vts/optional/async", "vts/optional/caching", "vts/optional/fenced", "vts/optional/burst"]
    optional += [
        f"vts/optional/memory_domain/{c}"
        for c in ("output_role", "input_role", "bad_allocate", "uninitialised", "misuse")
    ]
    optional += [f"vts/cache/{c}" for c in CACHE_CHECKS] + ["vts/device/basics", "vts/device/cycle"]
    optional += [f"vts/memory_domain/conv_{t}" for t in ("fp32", "fp16", "quant8", "quant8_signed")]
    optional += ["vts/memory_domain/shared_buffer", "vts/burst/memory_slots", "vts/state/across_calls"]
    assert {i: outcome.get(i) for i in optional} == {i: "PASS" for i in optional}
    assert outcome["vts/consistency/paths"] == "PASS"
    assert all(r["suite"] == "vts" for r in rows)


@pytest.mark.long_run
def test_accepts_everything_fails_each_mutation_class(tmp_path):
    code, rows, text = _run("accepts_everything", tmp_path)
    assert code == 1, text[-3000:]
    # accepting everything includes a graph whose operations form a cycle
    assert _failed(rows) == {f"vts/model_mutation/{c}" for c in MODEL_MUTATIONS} | {"vts/device/cycle"}
    msg = {r["test_id"]: r["message"] for r in rows}
    assert "not rejected with INVALID_ARGUMENT" in msg["vts/model_mutation/operand_scale"]
    assert "prepare accepted it" in msg["vts/model_mutation/priority"]


@pytest.mark.long_run
def test_shared_scratch_buffer_fails_concurrency(tmp_path):
    code, rows, text = _run("shared_scratch", tmp_path)
    assert code == 1, text[-3000:]
    assert _failed(rows) == {"vts/concurrency/threads"}
    row = next(r for r in rows if r["test_id"] == "vts/concurrency/threads")
    assert "answer" in row["message"] and row["spec_path"]


@pytest.mark.long_run
def test_bad_timing_fails_timing(tmp_path):
    code, rows, text = _run("bad_timing", tmp_path)
    assert code == 1, text[-3000:]
    assert _failed(rows) == {"vts/api/timing"}
    row = next(r for r in rows if r["test_id"] == "vts/api/timing")
    assert "time_on_device" in row["message"] and "time_in_driver" in row["message"]
