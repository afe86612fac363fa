"""Small models shared by the harness's own tests, and the way they name the test drivers."""

from pathlib import Path

from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op

# The deliberately broken drivers the harness is tested against: files under tests/, not part
# of the installed package, named to the harness in the loader's path/to/file.py:Attr form.
DOUBLES_DIR = Path(__file__).resolve().parent / "drivers"


def double(module: str, attr: str = "") -> str:
    """The driver name of test driver ``attr`` in tests/drivers/``module``.py, with an absolute
    path (child processes may run elsewhere): double("broken", "ConvIgnoresBias").  Without
    ``attr`` it ends in ':', a prefix to append a class name to."""
    path = DOUBLES_DIR / f"{module}.py"
    if not path.is_file():
        raise FileNotFoundError(f"no test driver module {path}")
    return f"{path}:{attr}"


def double_module(module: str):
    """tests/drivers/``module``.py as a module, the same object the loader gives a run in this
    process (so its classes are the ones an in-process driver is made of)."""
    from nnconform.driver.loader import import_driver_file

    return import_driver_file(DOUBLES_DIR / f"{module}.py")


def add_model(t=T.TENSOR_FLOAT32, dims=(2, 2), scale=0.0, zp=0, act=0):
    b = ModelBuilder()
    x = b.input(t, dims, scale=scale, zero_point=zp)
    y = b.input(t, dims, scale=scale, zero_point=zp)
    out = b.output(t, dims, scale=scale, zero_point=zp)
    b.operation(Op.ADD, [x, y, b.i32(act)], [out])
    return b.build()


def relu_model(t=T.TENSOR_FLOAT32, dims=(4,)):
    b = ModelBuilder()
    x = b.input(t, dims)
    b.operation(Op.RELU, [x], [b.output(t, dims)])
    return b.build()


def check_example(ex) -> None:
    """Run one hand-checked example on the reference executor: an expect-failure example must
    be rejected; otherwise every output matches in dtype and shape, exactly for integer and
    bool types, and within 1e-5 (fp32) or 1e-3 (fp16) relative and absolute for floats."""
    import numpy as np
    import pytest

    from nnconform.errors import NnError
    from nnconform.ir.validation import validate_model
    from nnconform.reference.executor import execute

    if ex.expect_failure:
        with pytest.raises(NnError):
            validate_model(ex.model)
            execute(ex.model, list(ex.inputs))
        return
    validate_model(ex.model)
    actual = execute(ex.model, list(ex.inputs))
    assert len(actual) == len(ex.outputs), ex.name
    for got, want in zip(actual, ex.outputs):
        assert got.dtype == want.dtype and got.shape == want.shape, (ex.name, got.dtype, got.shape, want.shape)
        if want.dtype.kind in "iub":
            np.testing.assert_array_equal(got, want, err_msg=ex.name)
        else:
            tol = 1e-3 if want.dtype == np.float16 else 1e-5
            np.testing.assert_allclose(
                got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol, err_msg=ex.name
            )


def vectors_missing_reason() -> str:
    from nnconform.cases.vectors import default_root

    return f"AOSP vectors not found at {default_root()} (set NNCONFORM_VECTORS)"


def vector_cases(ops, also=()) -> list:
    """The AOSP vectors that use only ``ops`` (plus ``also``, e.g. the ADD of the lifetime
    variations); [] when the vectors directory is absent."""
    from nnconform.cases.vectors import default_root, load_cases

    if not default_root().is_dir():
        return []
    mine = {getattr(o, "name", o) for o in ops}
    allowed = mine | {getattr(o, "name", o) for o in also}
    return load_cases(ops=sorted(mine), within=sorted(allowed))


def vector_params(ops, also=()) -> list:
    """vector_cases as pytest params, or one skipped param that says why there are none."""
    import pytest

    cases = vector_cases(ops, also)
    if not cases:
        return [pytest.param(None, marks=pytest.mark.skip(reason=vectors_missing_reason()))]
    return [pytest.param(c, id=c.test_id) for c in cases]


def assert_vector_passes(case) -> None:
    from nnconform.cases.vectors import check_case

    status, message = check_case(case)
    assert status == "pass", message


def assert_examples_cover(ops, examples) -> None:
    """Every data type the registry claims for each of ``ops`` has an example (in
    ``examples``), judged as the coverage table judges it (the op's primary input type)."""
    from nnconform.cases.coverage import primary_types
    from nnconform.ir import SHORT_TYPE_NAME, OperationType
    from nnconform.reference.ops.registry import get_op

    covered: dict[str, set[str]] = {}
    for ex in examples:
        if not ex.expect_failure:
            for name, types in primary_types(ex.model).items():
                covered.setdefault(name, set()).update(types)
    for op in ops:
        op = OperationType[op] if isinstance(op, str) else OperationType(op)
        for t in get_op(op).data_types:
            assert SHORT_TYPE_NAME.get(t, t.name) in covered.get(op.name, set()), f"no example for {op.name} {t.name}"


def assert_rejected(model, *fragments) -> None:
    """The first operation's own signature check rejects ``model`` with a message that names
    the operation and contains every fragment (e.g. "input 1", "FLOAT")."""
    import pytest

    from nnconform.errors import ValidationError
    from nnconform.reference.ops.registry import OpView, get_op

    op = model.main.operations[0]
    with pytest.raises(ValidationError) as e:
        get_op(op.type).validate(OpView(model, model.main, 0))
    msg = str(e.value)
    assert op.name in msg, msg
    for f in fragments:
        assert f in msg, msg
