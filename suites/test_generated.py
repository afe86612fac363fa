"""Generated suite (CTS "TestGenerated"): hand-checked examples of every implemented operation
and data type, run through the driver under test and the default accuracy criteria."""

import pytest

from nnconform.suites.examples import all_examples
from nnconform.verdict.runner import Case, run

EXAMPLES = all_examples()


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_generated(example, nn_device, nn_session, nn_record):
    nn_record.update(
        suite="generated",
        test_id=f"generated/{example.name}",
        operations=example.operations,
        data_types=example.data_types,
    )
    case = Case(
        f"generated/{example.name}",
        example.model,
        example.inputs,
        example.outputs,
        ignored=example.ignored,
        expect_failure=example.expect_failure,
    )
    nn_session.conclude(nn_record, run(nn_device, case), case)
