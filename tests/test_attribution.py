"""Attribution: a failing case names the operation that diverged first, AOSP's helper ADDs are
never blamed for being in a case, and the report counts and buckets failures by it."""

from __future__ import annotations

from collections import Counter

import pytest
from helpers import double_module

from nnconform.cases.vectors import load_cases
from nnconform.drivers.reference import ReferenceDevice
from nnconform.reports import triage
from nnconform.verdict.attribution import blame, helper_operations
from nnconform.verdict.results import ResultRecord
from nnconform.verdict.runner import run_case

_broken = double_module("broken")
ConvIgnoresBias, QuantAddOffByTwo = _broken.ConvIgnoresBias, _broken.QuantAddOffByTwo


@pytest.fixture(scope="module")
def conv_cases():
    return load_cases(ops=["CONV_2D"], dirs=["V1_2"])


def _case(cases, *, internal: bool, quant: bool):
    for c in cases:
        if (
            ("all_inputs_as_internal" in c.variations) == internal
            and ("quant8" in c.variations) == quant
            and not c.expect_failure
            and c.model.main.operations
        ):
            return c
    pytest.fail("no such vectors case")


def _row(device, case) -> ResultRecord:
    out = run_case(device, case.model, case.inputs, case.outputs, ignored=case.ignored)
    b = blame(device, case.model, case.inputs, out, ignored=case.ignored)
    return ResultRecord(
        suite="vectors",
        test_id=case.test_id,
        driver=device.name,
        outcome=out.outcome,
        operations=list(case.operations),
        data_types=case.model.data_types(),
        message=out.message,
        blamed_operation=b.operation if b else "",
        blamed_data_type=b.data_type if b else "",
        extra=dict(b.to_extra(), criterion=b.criterion or "element") if b else {},
    )


def test_helper_adds_are_found_only_in_the_lifetime_variations(conv_cases):
    internal = _case(conv_cases, internal=True, quant=False)
    plain = _case(conv_cases, internal=False, quant=False)
    helpers = helper_operations(internal.model)
    assert helpers and all(internal.model.main.operations[i].name == "ADD" for i in helpers)
    assert helper_operations(plain.model) == set()


def test_a_conv_bug_blames_conv_not_the_helper_add(conv_cases):
    case = next(
        c
        for c in conv_cases
        if "all_inputs_as_internal" in c.variations and _row(ConvIgnoresBias(), c).outcome == "FAIL"
    )
    row = _row(ConvIgnoresBias(), case)
    assert row.blamed_operation == "CONV_2D"


def test_a_quant_add_bug_blames_add_even_inside_conv_vectors(conv_cases):
    case = _case(conv_cases, internal=True, quant=True)
    dev = QuantAddOffByTwo()
    out = run_case(dev, case.model, case.inputs, case.outputs, ignored=case.ignored)
    assert out.outcome == "FAIL"
    b = blame(dev, case.model, case.inputs, out, ignored=case.ignored)
    assert (b.operation, b.data_type, b.how) == ("ADD", "quant8", "helper ADD diverged")
    # a passing case is not blamed on anything
    ok = run_case(ReferenceDevice(), case.model, case.inputs, case.outputs, ignored=case.ignored)
    assert blame(ReferenceDevice(), case.model, case.inputs, ok) is None


def test_quant_add_failures_land_in_add_cells_and_few_buckets():
    cases = load_cases(ops=["CONV_2D", "ADD"], dirs=["V1_2"])
    dev = QuantAddOffByTwo()
    rows = [_row(dev, c) for c in cases if not c.expect_failure]
    failed = [r for r in rows if r.outcome == "FAIL"]
    assert len(failed) > 20
    assert {(r.blamed_operation, r.blamed_data_type) for r in failed} == {("ADD", "quant8")}
    m = triage.matrix(rows)
    assert all(m.cells[(op, t)]["bad"] == 0 for op, t in m.cells if op != "ADD")
    assert len(triage.buckets(rows)) <= 3


def test_normalised_messages_drop_numbers_and_operation_lists():
    a = triage.normalise_message("[ADD, CONV_2D] output 0: element [3] expected 5, got 7 (atol 1)")
    b = triage.normalise_message("[ADD, FULLY_CONNECTED] output 0: element [12] expected -1, got 1 (atol 1)")
    assert a == b and "ADD" not in a
    assert Counter([a, b]).most_common(1)[0][1] == 2


def test_a_failing_if_blames_the_operation_inside_the_branch_taken():
    from nnconform.suites.examples import all_examples

    ex = next(e for e in all_examples() if e.name == "if_then_taken_add_quant8")
    dev = QuantAddOffByTwo()
    out = run_case(dev, ex.model, ex.inputs, ex.outputs)
    assert out.outcome == "FAIL"
    b = blame(dev, ex.model, ex.inputs, out)
    assert (b.operation, b.data_type) == ("ADD", "quant8") and b.how.endswith("inside IF")
