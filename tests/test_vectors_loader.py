"""AOSP vectors load into valid models, and a vector case survives a spec-file round trip
(that is how a failing vector is dumped and replayed)."""
import numpy as np
import pytest

from nnconform.executor import execute
from nnconform.spec import SpecExample, SpecFile, dump_spec, load_spec
from nnconform.validation import validate_model
from nnconform.vectors import default_root, load_cases

pytestmark = pytest.mark.skipif(not default_root().is_dir(),
                                reason=f"AOSP vectors not found at {default_root()} (set NNCONFORM_VECTORS)")


@pytest.mark.parametrize("op,hal", [("CONV_2D", "V1_0"), ("WHILE", "V1_3"), ("LSTM", "V1_0"),
                                    ("BOX_WITH_NMS_LIMIT", "V1_2")])
def test_vector_case_round_trips_through_a_spec_file(tmp_path, op, hal):
    cases = [c for c in load_cases(ops=[op], dirs=[hal]) if not c.expect_failure][:3]
    assert cases, f"no {op} vectors"
    for c in cases:
        validate_model(c.model)
        path = tmp_path / "case.spec.json"
        dump_spec(SpecFile(c.model, [SpecExample(c.name, list(c.inputs), list(c.outputs), c.ignored)]), path)
        back = load_spec(path, validate=True)
        want = execute(c.model, list(c.inputs))
        got = execute(back.model, list(back.examples[0].inputs))
        assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(want, got)), c.name


def test_empty_input_is_omitted_and_empty_output_is_zero_sized():
    lstm = next(c for c in load_cases(ops=["LSTM"], dirs=["V1_0"]) if any(v is None for v in c.inputs))
    assert any(v is None for v in lstm.inputs)
    zero = next(c for c in load_cases(name_contains="zero_sized", dirs=["V1_2"])
                if any(o.size == 0 for o in c.outputs))
    assert all(o is not None for o in zero.outputs)
