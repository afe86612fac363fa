import numpy as np
import pytest
from helpers import relu_model

from nnconform.errors import NotImplementedOperation, OpFailure, ValidationError
from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.executor import Executor, clamp_loop_timeout, execute


def test_chain_with_temporaries_and_unknown_dims():
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [0])  # unknown dim: taken from the request
    t = b.temp(T.TENSOR_FLOAT32, [0])
    y = b.output(T.TENSOR_FLOAT32, [0])
    b.operation(Op.RELU, [x], [t])
    b.operation(Op.RELU1, [t], [y])
    out = execute(b.build(), [np.array([-2, 0.5, 3], np.float32)])
    assert out[0].tolist() == [0.0, 0.5, 1.0]


def test_input_shape_mismatch_is_a_validation_error():
    with pytest.raises(ValidationError, match=r"request.inputs\[0\]"):
        execute(relu_model(dims=(4,)), [np.zeros(3, np.float32)])


def test_unimplemented_operation_says_so():
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [1, 1])
    b.operation(Op.OEM_OPERATION, [x], [b.output(T.TENSOR_FLOAT32, [1, 1])])
    with pytest.raises(NotImplementedOperation, match="not implemented"):
        execute(b.build(), [np.zeros((1, 1), np.float32)])


def test_declared_output_shape_is_enforced():
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [4])
    b.operation(Op.RELU, [x], [b.output(T.TENSOR_FLOAT32, [5])])
    with pytest.raises(OpFailure, match="output 0 has shape"):
        execute(b.build(), [np.zeros(4, np.float32)])


def test_intermediate_values_are_kept_for_divergence_hunts():
    ex = Executor(relu_model(), keep_values=True)
    ex.run([np.array([-1, 1, -2, 2], np.float32)])
    assert ex.main_values[1].tolist() == [0, 1, 0, 2]
    plain = Executor(relu_model())
    plain.run([np.array([-1, 1, -2, 2], np.float32)])
    assert plain.main_values is None  # nothing is held past the run unless asked for


def _chain_model():
    """x -RELU-> t1 -RELU1-> t2 -LOGISTIC-> t3 (read by nothing) ; t2 -TANH-> y."""
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [3])
    t1, t2, t3 = (b.temp(T.TENSOR_FLOAT32, [3]) for _ in range(3))
    y = b.output(T.TENSOR_FLOAT32, [3])
    b.operation(Op.RELU, [x], [t1])
    b.operation(Op.RELU1, [t1], [t2])
    b.operation(Op.LOGISTIC, [t2], [t3])
    b.operation(Op.TANH, [t2], [y])
    return b.build(), (x, t1, t2, t3, y)


def test_release_plan_drops_only_temporaries_after_their_last_reader():
    from nnconform.reference.executor import plan_for

    model, (x, t1, t2, t3, y) = _chain_model()
    releases = plan_for(model.main).releases
    # t1 after RELU1 (its only reader), t3 right after LOGISTIC (nothing reads it), t2 after
    # TANH; the model's input and output are never dropped
    assert releases == ((), (t1,), (t3,), (t2,))


@pytest.mark.parametrize("keep", [False, True])
def test_an_intermediate_is_freed_once_no_later_operation_reads_it(keep):
    import weakref

    from nnconform.reference.ops.registry import get_op

    model, _ = _chain_model()
    seen: dict[str, object] = {}

    def remembering(op, name):
        real = get_op(op).execute

        def fn(ctx):
            outs = real(ctx)
            seen[name] = weakref.ref(outs[0])
            return outs

        return fn

    def tanh_checks(ctx):
        # TANH runs after RELU1 (t1's last reader) and LOGISTIC (whose t3 nobody reads)
        seen["alive at TANH"] = (seen["t1"]() is not None, seen["t3"]() is not None)
        return get_op(Op.TANH).execute(ctx)

    ex = Executor(
        model,
        keep_values=keep,
        overrides={
            Op.RELU: remembering(Op.RELU, "t1"),
            Op.LOGISTIC: remembering(Op.LOGISTIC, "t3"),
            Op.TANH: tanh_checks,
        },
    )
    x = np.array([-1.0, 0.25, 3.0], np.float32)
    out = ex.run([x])
    np.testing.assert_allclose(out[0], np.tanh(np.clip(x, 0, 1)), rtol=1e-6)
    assert seen["alive at TANH"] == ((True, True) if keep else (False, False))


@pytest.mark.parametrize("requested,expected", [(None, 2.0), (0.001, 0.001), (60, 15.0), (-1, 0.0)])
def test_loop_timeout_default_and_clamp(requested, expected):
    assert clamp_loop_timeout(requested) == expected


# ---- the shared per-subgraph plan (model-only work done once per model) ------------------


def test_plan_is_built_once_per_model_and_shared_between_executors():
    m = relu_model()
    first, second = Executor(m), Executor(m)
    assert first._plan(m.main)[0] is second._plan(m.main)[0]
    other = relu_model()
    assert Executor(other)._plan(other.main)[0] is not first._plan(m.main)[0]  # another model: its own
    x = np.array([-1, 2, -3, 4], np.float32)
    assert first.run([x])[0].tolist() == second.run([x])[0].tolist() == [0, 2, 0, 4]


def test_overrides_stay_with_their_executor():
    m = relu_model()
    broken = Executor(m, overrides={Op.RELU: lambda ctx: [ctx.inputs[0] * 2]})
    x = np.array([-1, 2, -3, 4], np.float32)
    assert broken.run([x])[0].tolist() == [-2, 4, -6, 8]
    assert Executor(m).run([x])[0].tolist() == [0, 2, 0, 4]  # the shared plan is untouched


def test_request_inputs_are_still_checked_and_converted():
    m = relu_model(dims=(0,))  # unknown dimension
    assert execute(m, [np.array([-1.0, 3.0])])[0].dtype == np.float32  # float64 -> float32
    assert execute(m, [[-1.0, 2.0, 5.0]])[0].tolist() == [0, 2, 5]  # a list
    with pytest.raises(ValidationError, match="cannot hold"):
        execute(m, [np.array(["a"])])
    with pytest.raises(ValidationError, match="does not match"):
        execute(relu_model(dims=(2, 2)), [np.zeros((2, 3), np.float32)])
    with pytest.raises(ValidationError, match="takes 1 inputs"):
        execute(m, [])


def test_operation_context_sees_actual_dims_and_constant_scalars():
    """A planned context substitutes the request's shape for unknown dims, and reads constant
    scalar parameters from the plan; both agree with the values themselves."""
    from nnconform.reference.executor import plan_for
    from nnconform.reference.ops.registry import OpContext

    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [0, 3])
    z = b.input(T.TENSOR_FLOAT32, [0, 3])
    b.operation(Op.ADD, [x, z, b.i32(1)], [b.output(T.TENSOR_FLOAT32, [0, 3])])
    m = b.build()
    plan = plan_for(m.main)
    values = list(plan.template)
    values[0] = values[1] = np.ones((2, 3), np.float32)
    ctx = OpContext.planned(Executor(m), m.main, plan.steps[0], values)
    assert ctx.in_operands[0].dimensions == (2, 3) and m.main.operands[0].dimensions == (0, 3)
    assert ctx.scalar(2) == 1 == ctx.inputs[2].item()
    assert execute(m, [np.full((2, 3), -1, np.float32), np.zeros((2, 3), np.float32)])[0].tolist() == [[0] * 3] * 2


def test_fused_requantizer_cache_follows_array_identity_and_content():
    """Read-only arrays (model constants) are found by identity; a writable bias changed in
    place between calls is found by content, so it never gets a stale requantiser."""
    from nnconform.ir import Operand
    from nnconform.reference.ops import conv_common as cc

    out = Operand(T.TENSOR_QUANT8_ASYMM, (1, 4), scale=0.5, zero_point=128)
    mult = np.full(4, 1 << 30, np.int64)
    shift = np.full(4, -3, np.int64)
    mult.setflags(write=False)
    shift.setflags(write=False)
    acc = np.array([[100.0, -200.0, 3000.0, -7.0]], np.float32)
    bias = np.array([10, 20, 30, 40], np.int32)

    def expected(bias):  # the step-by-step formula, no cache involved
        scaled = cc.multiply_by_quantized_multiplier(acc.astype(np.int64) + bias, int(mult[0]), int(shift[0]))
        return np.clip(scaled + 128, 0, 255).astype(np.uint8)

    got = cc.requantize(acc, bias, mult, shift, out, 0, acc_bound=4000)
    assert np.array_equal(got, expected(bias))
    bias[:] = [-500, 0, 500, 1000]  # writable: content key, not identity
    assert np.array_equal(cc.requantize(acc, bias, mult, shift, out, 0, acc_bound=4000), expected(bias))
    frozen = bias.copy()
    frozen.setflags(write=False)
    before = len(cc._FUSED_BY_ID)
    first = cc.requantize(acc, frozen, mult, shift, out, 0, acc_bound=4000)
    assert len(cc._FUSED_BY_ID) == min(before + 1, 256)
    assert np.array_equal(cc.requantize(acc, frozen, mult, shift, out, 0, acc_bound=4000), first)
    assert len(cc._FUSED_BY_ID) == min(before + 1, 256)  # the second call was an identity hit
    assert np.array_equal(first, expected(frozen))


def _div_model():
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [3])
    z = b.input(T.TENSOR_FLOAT32, [3])
    b.operation(Op.DIV, [x, z, b.i32(0)], [b.output(T.TENSOR_FLOAT32, [3])])
    return b.build()


@pytest.mark.parametrize("state", ["prebuilt", "np.errstate"])
def test_a_run_is_quiet_about_ieee_results_and_leaves_the_callers_error_state(recwarn, monkeypatch, state):
    """x / 0, 0 / 0 and overflow give inf/NaN without a numpy warning or error inside a run,
    even when the caller has made them errors; the caller's state is back after the run, and
    after a run that fails.  Both ways of setting it: numpy 2's prebuilt state and the
    np.errstate fallback (older numpy, or internals that changed)."""
    from nnconform.reference import executor

    if state == "np.errstate":
        monkeypatch.setattr(executor, "_ERR_STATE", None)
    elif executor._ERR_STATE is None:
        pytest.skip("this numpy has no prebuilt error state (numpy < 2, or its internals changed)")
    ex = Executor(_div_model())
    seen = []
    overrides = {Op.RELU: lambda ctx: (seen.append(np.geterr()), [ctx.inputs[0]])[1]}
    with np.errstate(all="raise"):
        out = ex.run([np.array([1, 0, 3e38], np.float32), np.array([0, 0, 1e-38], np.float32)])
        assert np.isinf(out[0][0]) and np.isnan(out[0][1]) and np.isinf(out[0][2])
        assert np.geterr() == {"divide": "raise", "over": "raise", "under": "raise", "invalid": "raise"}
        with pytest.raises(ValidationError):
            ex.run([np.zeros(2, np.float32), np.zeros(3, np.float32)])
        assert np.geterr()["divide"] == "raise"
        Executor(relu_model(dims=(2,)), overrides=overrides).run([np.zeros(2, np.float32)])
        assert seen == [{"divide": "ignore", "over": "ignore", "under": "ignore", "invalid": "ignore"}]
        assert np.geterr()["invalid"] == "raise"
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def _same_bits(a, b) -> bool:
    return len(a) == len(b) and all(
        x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes() for x, y in zip(a, b)
    )


@pytest.mark.parametrize(
    "t",
    [
        T.TENSOR_FLOAT32,
        T.TENSOR_FLOAT16,
        T.TENSOR_INT32,
        T.TENSOR_QUANT8_ASYMM,
        T.TENSOR_QUANT8_ASYMM_SIGNED,
        T.TENSOR_BOOL8,
    ],
)
def test_dropping_intermediates_changes_no_output_of_random_graphs_or_their_if_and_while(t):
    """Random 30-operation graphs (seeded), and the same wrapped in IF and in WHILE (whose
    body runs through run_subgraph with its own release plan): the outputs are the same bits
    whether the run keeps every value or drops each after its last reader."""
    from nnconform.generators import control_flow as cf
    from nnconform.generators.graphs import GraphConfig
    from nnconform.generators.strategies import RandomDrawer, sample

    checked = 0
    for seed in range(4):
        case = sample(GraphConfig(dtype=t, n_ops=30, rank=2 + seed % 3, max_dim=6), seed)
        cases = [
            case,
            cf.wrap_if(RandomDrawer(100 * seed), case, seed),
            cf.wrap_while(RandomDrawer(100 * seed + 1), case, seed),
        ]
        for c in cases:
            kept = Executor(c.model, keep_values=True).run(list(c.inputs))
            dropped = Executor(c.model).run(list(c.inputs))
            assert _same_bits(kept, dropped), (t.name, seed, type(c).__name__)
            checked += 1
    assert checked == 12
