"""Vectors suite: every AOSP CTS golden vector (JSON, shared/aosp_vectors/SCHEMA.md) found in
the directory given by --nn-vectors (or $NNCONFORM_VECTORS, or ../shared/aosp_vectors), run
through the driver under test.  Vectors of operations the driver does not support are skipped
with the reason; validation vectors (expect_failure) must be rejected."""
from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from nnconform.runner import run_case
from nnconform.vectors import case_from_dict, default_root, vector_files


@functools.lru_cache(maxsize=2)
def _file_cases(path: str) -> list:
    with open(path) as fh:
        return json.load(fh)


def pytest_generate_tests(metafunc):
    if "vector" not in metafunc.fixturenames:
        return
    opt = metafunc.config.getoption("nn_vectors")
    root = Path(opt) if opt else default_root()
    if not root.is_dir():
        reason = (f"no AOSP vectors at {root}: give --nn-vectors DIR or set NNCONFORM_VECTORS "
                  f"(see shared/aosp_vectors/SCHEMA.md)")
        metafunc.parametrize("vector", [pytest.param(None, marks=pytest.mark.skip(reason=reason))],
                             ids=["vectors-missing"])
        return
    params, ids = [], []
    for f in vector_files(root):
        for i, d in enumerate(_file_cases(str(f))):
            params.append((str(f), i))
            ids.append(f"{d.get('spec_dir', f.parent.name)}/{d['name']}")
    _file_cases.cache_clear()
    metafunc.parametrize("vector", params, ids=ids)


def test_vector(vector, nn_device, nn_session, nn_record):
    path, index = vector
    case = case_from_dict(_file_cases(path)[index], path)
    nn_record.update(suite="vectors", test_id=case.test_id, operations=list(case.operations),
                     data_types=case.model.data_types())
    nn_record["extra"]["hal"] = case.spec_dir
    multinomial = case.multinomial_tolerance > 0
    # RANDOM_MULTINOMIAL's samples are random: element-wise comparison is off and the class
    # frequencies are checked against softmax(logits) instead, as CTS does.
    ignored = [True] * len(case.outputs) if multinomial else case.ignored
    outcome = run_case(nn_device, case.model, case.inputs, case.outputs, ignored=ignored,
                       expect_failure=case.expect_failure)
    if multinomial and outcome.outcome == "PASS":
        from nnconform.ops.random_multinomial import check_multinomial
        ok, msg = check_multinomial(case.inputs[0], outcome.actual[0], case.multinomial_tolerance)
        if not ok:
            outcome.outcome, outcome.message = "FAIL", f"[RANDOM_MULTINOMIAL] {msg}"
    nn_session.conclude(nn_record, outcome, test_id=case.test_id, model=case.model, inputs=case.inputs,
                        expected=case.outputs, ignored=case.ignored, expect_failure=case.expect_failure)
