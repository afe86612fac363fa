"""The random-model generators: coverage of the registry, validity of thousands of draws,
value rules, CTS flags (doNotConnect, ignored outputs), profiles and the divergence hunt."""

import itertools

import numpy as np
import pytest
from helpers import double_module
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nnconform.drivers.reference import ReferenceDevice
from nnconform.generators import profiles, values
from nnconform.generators.diverge import expose_all, first_divergent_operation
from nnconform.generators.graphs import GraphConfig, generate
from nnconform.generators.signatures import EXCLUDED, GRAPH_TYPES, SIGNATURES
from nnconform.generators.strategies import RandomDrawer, random_graph, sample, single_operation
from nnconform.ir import Lifetime, ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.ir.validation import validate_model
from nnconform.reference.executor import Executor
from nnconform.reference.ops.registry import load_all

_broken = double_module("broken")
QuantAddOffByTwo, Relu6Ignored = _broken.QuantAddOffByTwo, _broken.Relu6Ignored

REGISTRY = load_all()
SINGLE = [(op, t) for op, s in sorted(SIGNATURES.items(), key=lambda kv: kv[0].name) for t in s.types]


def _check_case(case):
    validate_model(case.model)
    out = Executor(case.model).run(case.inputs)
    m = case.model.main
    for k, (i, arr) in enumerate(zip(m.output_indexes, out)):
        assert np.array_equal(arr, case.values[i], equal_nan=True), f"output {k} differs from the generation run"
        if arr.dtype.kind == "f":
            assert not np.isnan(arr).any()
    assert len(case.ignored) == len(m.output_indexes)


def test_every_registered_operation_has_a_signature_or_a_documented_exclusion():
    for op in REGISTRY:
        assert (op in SIGNATURES) != (op in EXCLUDED), op.name
    for op, reason in EXCLUDED.items():
        assert len(reason) > 15, op.name
    assert len(SIGNATURES) >= 70


def test_signature_types_come_from_the_registry():
    for op, s in SIGNATURES.items():
        assert s.types, f"{op.name}: no random-graph data type"
        scalar_to_tensor = {T.FLOAT32: T.TENSOR_FLOAT32, T.FLOAT16: T.TENSOR_FLOAT16, T.INT32: T.TENSOR_INT32}
        registered = {scalar_to_tensor.get(t, t) for t in REGISTRY[op].data_types}
        assert set(s.types) <= registered & set(GRAPH_TYPES), op.name


def test_thousands_of_single_operation_draws_are_valid():
    n = 0
    for (op, t), seed in itertools.product(SINGLE, range(8)):
        case = sample(GraphConfig(dtype=t, n_ops=1, ops=(op,)), seed, edge=seed % 4 == 3)
        assert case.operations == [op.name]
        _check_case(case)
        n += 1
    assert n >= 1500


@pytest.mark.parametrize(
    "op,t", [(Op.RESHAPE, T.TENSOR_INT32), (Op.RSQRT, T.TENSOR_QUANT8_ASYMM), (Op.RSQRT, T.TENSOR_QUANT8_ASYMM_SIGNED)]
)
def test_signature_extensions_after_hal_1_3_are_drawn(op, t):
    """RESHAPE of TENSOR_INT32 (feature level 6) and quantised RSQRT (feature level 7) are
    random-graph signatures too; RSQRT's draws keep a positive input and an output range that
    holds the result, so no element saturates."""
    assert t in SIGNATURES[op].types
    for seed in range(40):
        case = sample(GraphConfig(dtype=t, n_ops=1, ops=(op,)), seed, edge=seed % 4 == 3)
        _check_case(case)
        if op == Op.RSQRT:
            x = case.model.main.operands[case.model.main.input_indexes[0]]
            assert (case.inputs[0].astype(np.int64) > x.zero_point).all()
            out = case.values[case.model.main.output_indexes[0]]
            assert (out < np.iinfo(out.dtype).max).all() and (out > np.iinfo(out.dtype).min).all()


@pytest.mark.parametrize("n_ops,max_dim", [(5, 1000), (40, 10)])
def test_random_graph_draws_are_valid_and_connected(n_ops, max_dim):
    edges = 0
    for t, r, seed in itertools.product(
        (
            T.TENSOR_FLOAT32,
            T.TENSOR_FLOAT16,
            T.TENSOR_INT32,
            T.TENSOR_BOOL8,
            T.TENSOR_QUANT8_ASYMM,
            T.TENSOR_QUANT8_ASYMM_SIGNED,
        ),
        (1, 2, 3, 4),
        range(6 if n_ops == 5 else 2),
    ):
        case = sample(GraphConfig(dtype=t, n_ops=n_ops, rank=r, max_dim=max_dim), seed, edge=seed == 1)
        _check_case(case)
        m = case.model.main
        assert 1 <= len(m.operations) <= n_ops
        # Fresh shapes respect max_dim; outputs of PAD/TILE/CONCATENATION... may grow past
        # it (and inputs shaped like them), but element counts stay bounded.
        assert all(int(np.prod(o.dimensions)) <= 40 * 10000 for o in m.operands)
        edges += sum(
            m.operands[i].lifetime in (Lifetime.TEMPORARY_VARIABLE, Lifetime.SUBGRAPH_OUTPUT)
            for op in m.operations
            for i in op.inputs
        )
    assert edges > 0, "no operation ever fed another"


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_hypothesis_draws_are_valid(data):
    t = data.draw(st.sampled_from(GRAPH_TYPES))
    if data.draw(st.booleans()):
        op = data.draw(st.sampled_from([o for o, tt in SINGLE if tt == t]))
        case = data.draw(single_operation(op, t, value_mode="mixed"))
    else:
        case = data.draw(random_graph(t, data.draw(st.integers(1, 4)), 5, 1000, value_mode="mixed"))
    _check_case(case)


def test_values_follow_the_cts_rules():
    rng = np.random.default_rng(0)
    f = values.fill(rng, T.TENSOR_FLOAT32, (1000,))
    assert f.dtype == np.float32 and f.min() >= -2 and f.max() <= 2
    i = values.fill(rng, T.TENSOR_INT32, (1000,))
    assert i.min() >= 0 and i.max() <= 255
    q = values.fill(rng, T.TENSOR_QUANT8_ASYMM_SIGNED, (5000,))
    assert q.min() == -128 and q.max() == 127
    b = values.fill(rng, T.TENSOR_BOOL8, (1000,))
    assert b.dtype == np.bool_ and 300 < b.sum() < 700
    e = values.fill(rng, T.TENSOR_FLOAT32, (3000,), edge=True)
    assert (e == 0).any()  # exact zeros
    # beyond the fp16 range: in about half of the tensors, and never twice in one (two such
    # terms in a sum cancel catastrophically, which no tolerance can judge)
    huge = [int((np.abs(values.fill(rng, T.TENSOR_FLOAT32, (300,), edge=True)) > 6.6e4).sum()) for _ in range(40)]
    assert max(huge) == 1 and 10 <= sum(huge) <= 30
    pos = values.fill(rng, T.TENSOR_FLOAT32, (3000,), lo=0.1, hi=2.0, edge=True)
    assert pos.min() >= 0.1 and pos.max() <= 2.0  # a signature's range holds
    nz = values.fill(rng, T.TENSOR_FLOAT16, (3000,), nonzero=True)
    assert np.abs(nz).min() >= 0.25


def test_do_not_connect_and_ignored_outputs():
    for seed in range(40):
        case = sample(
            GraphConfig(
                dtype=T.TENSOR_FLOAT32,
                n_ops=6,
                rank=2,
                max_dim=10,
                ops=(Op.DIV, Op.POW, Op.REDUCE_PROD, Op.TOPK_V2, Op.ADD),
            ),
            seed,
        )
        m = case.model.main
        consumed = {i for op in m.operations for i in op.inputs}
        for op in m.operations:
            if op.type in (Op.DIV, Op.POW, Op.REDUCE_PROD):
                assert op.outputs[0] not in consumed
            if op.type == Op.TOPK_V2:
                assert op.outputs[1] not in consumed
                assert case.ignored[list(m.output_indexes).index(op.outputs[1])]


def test_scalars_are_constants_and_inputs_are_kept():
    case = sample(GraphConfig(dtype=T.TENSOR_FLOAT32, n_ops=5, rank=4, max_dim=10), 3)
    for o in case.model.main.operands:
        if o.info.is_scalar:
            assert o.lifetime == Lifetime.CONSTANT_COPY


def test_generation_is_deterministic_per_seed():
    a = sample(GraphConfig(dtype=T.TENSOR_QUANT8_ASYMM, n_ops=5, rank=4), 11)
    b = sample(GraphConfig(dtype=T.TENSOR_QUANT8_ASYMM, n_ops=5, rank=4), 11)
    assert a.operations == b.operations
    assert all(np.array_equal(x, y) for x, y in zip(a.inputs, b.inputs))


def test_rejects_when_nothing_fits():
    with pytest.raises(ValueError):
        generate(RandomDrawer(0), GraphConfig(dtype=T.TENSOR_BOOL8, ops=(Op.CONV_2D,)), 0)


def test_profiles():
    ci = profiles.settings_for("ci", graph=False)
    assert ci.derandomize and ci.database is None
    d = profiles.settings_for("default", graph=True, max_examples=7, report_dir="/tmp/x")
    assert d.max_examples == 7 and not d.derandomize and d.database is not None
    n = profiles.settings_for("nightly", graph=False)
    assert n.deadline is None and n.max_examples > d.max_examples
    with pytest.raises(ValueError):
        profiles.settings_for("weekly", graph=False)


def _two_op_model(second: Op, quant: bool):
    b = ModelBuilder()
    t = T.TENSOR_QUANT8_ASYMM if quant else T.TENSOR_FLOAT32
    q = dict(scale=0.5, zero_point=100) if quant else {}
    x = b.input(t, [2, 6], **q)
    y = b.input(t, [2, 6], **q)
    s = b.temp(t, [2, 6], **q)
    b.operation(Op.ADD, [x, y, b.i32(0)], [s])
    b.operation(second, [s], [b.output(t, [2, 6], **q)])
    rng = np.random.default_rng(1)
    ins = [values.fill(rng, t, (2, 6)), values.fill(rng, t, (2, 6))]
    return b.build(), ins


def test_divergence_names_the_first_operation_that_goes_wrong():
    model, ins = _two_op_model(Op.RELU6, quant=True)
    n, name, cmp = first_divergent_operation(QuantAddOffByTwo(), model, ins)
    assert (n, name) == (0, "ADD") and not cmp.passed
    model, ins = _two_op_model(Op.RELU6, quant=False)
    ins = [i * 3 for i in ins]  # values above 6 and below 0, so RELU6 matters
    n, name, _ = first_divergent_operation(Relu6Ignored(), model, ins)
    assert (n, name) == (1, "RELU6")
    assert first_divergent_operation(ReferenceDevice(), model, ins) is None
    exposed = expose_all(model)
    assert len(exposed.main.output_indexes) == 2
    validate_model(exposed)


# ---------------------------------------------------------------------------------------
# Control flow: generated graphs wrapped in IF / WHILE (generators/control_flow.py)
# ---------------------------------------------------------------------------------------

from nnconform.generators import control_flow as cf  # noqa: E402
from nnconform.generators.graphs import GeneratedCase  # noqa: E402
from nnconform.verdict.runner import PASS, SKIP, run_case  # noqa: E402

CF_TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


def _fully_specified(model, detail: str = ""):
    """Every operand fully specified, except (an IF whose branches give different shapes) the
    main graph's outputs and (a WHILE with a shrinking variable) that variable, whose
    dimensions NNAPI lets be unknown."""
    dynamic = {id(model.main.operands[i]) for i in model.main.output_indexes} if "branch-dependent" in detail else set()
    for sg in model.subgraphs():
        for o in sg.operands:
            if id(o) in dynamic or ("shrinking" in detail and o.name == "s"):  # the shrinking loop variable
                continue
            if o.lifetime not in (Lifetime.NO_VALUE, Lifetime.SUBGRAPH):
                assert o.fully_specified, f"{sg.name}: {o.describe()} is not fully specified"


def test_hundreds_of_wrapped_draws_are_valid_and_cover_the_variants():
    seen = set()
    for kind, t, seed in itertools.product(cf.KINDS, CF_TYPES, range(30)):
        case = cf.sample_wrapped(kind, t, seed, edge=seed % 4 == 3)
        _check_case(case)
        _fully_specified(case.model, case.detail)
        (top,) = case.model.main.operations
        assert top.type == (Op.IF if kind == "if" else Op.WHILE)
        assert case.operations[0] == kind.upper() and case.operations[1:] == case.inner.operations
        if kind == "if":
            cond = case.model.main.operands[case.model.main.input_indexes[0]]
            assert (cond.type, cond.dimensions) == (T.TENSOR_BOOL8, (1,))
            seen.add(("cond", bool(case.inputs[0][0])))
            seen.add(("else", "same graph" not in case.detail))
        else:
            body = case.model.referenced[1]
            counter_out = body.operands[body.output_indexes[-1]]
            assert (counter_out.type, counter_out.dimensions) == (T.TENSOR_INT32, (1,))
            seen.add(("nested", any(op.type == Op.IF for op in body.operations)))
            seen.add(("fed back", " 0 fed-back" not in case.detail))
            seen.add(("N input", "model input" in case.detail))
    assert seen >= {
        ("cond", True),
        ("cond", False),
        ("else", True),
        ("else", False),
        ("nested", True),
        ("nested", False),
        ("fed back", True),
        ("fed back", False),
        ("N input", True),
        ("N input", False),
    }, seen


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_hypothesis_wrapped_draws_are_valid(data):
    kind = data.draw(st.sampled_from(cf.KINDS))
    case = data.draw(cf.control_flow_cases(kind, data.draw(st.sampled_from(CF_TYPES)), value_mode="mixed"))
    _check_case(case)
    _fully_specified(case.model, case.detail)


class _Scripted:
    """A Drawer that gives back a fixed list of answers (integers, booleans, choice indexes)."""

    def __init__(self, answers):
        self.answers = list(answers)

    def integer(self, lo, hi):
        v = self.answers.pop(0)
        assert lo <= v <= hi, (v, lo, hi)
        return v

    def boolean(self):
        return bool(self.answers.pop(0))

    def choice(self, seq):
        return seq[self.integer(0, len(seq) - 1)]


def _g(op: Op, x_vals, c_vals=None):
    """G = op(x[, c]) on fp32 [2]: a model input x, an optional constant c, one output."""
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, (2,))
    y = b.output(T.TENSOR_FLOAT32, (2,))
    if c_vals is None:
        b.operation(op, [x], [y])
    else:
        b.operation(op, [x, b.const(T.TENSOR_FLOAT32, (2,), c_vals), b.i32(0)], [y])
    model = b.build()
    xs = [np.array(x_vals, np.float32)]
    out = Executor(model).run(xs)
    vals = [None] * len(model.main.operands)
    vals[x], vals[y] = xs[0], out[0]
    return GeneratedCase(model, xs, [False], [op.name], vals)


def test_while_feeds_the_output_back_n_times():
    g = _g(Op.ADD, [0.5, -0.25], [1.0, 2.0])
    # 3 trips, N constant, no nesting, take the (x, y) pair
    case = cf.wrap_while(_Scripted([3, False, 0, 3]), g, 0, shrink_p=0)
    assert "3 iteration(s)" in case.detail and "1 fed-back" in case.detail
    (out,) = Executor(case.model).run(case.inputs)
    np.testing.assert_array_equal(out, [3.5, 5.75])
    # nested: IF(i < 1, G, G') with G' = G with c scaled by 0.5: x + c + 0.5c + 0.5c
    case = cf.wrap_while(_Scripted([3, False, 7, 1, 0, 0, True, 2, 3]), g, 0, shrink_p=0)
    assert any(op.type == Op.IF for op in case.model.referenced[1].operations)
    (out,) = Executor(case.model).run(case.inputs)
    np.testing.assert_array_equal(out, [2.5, 3.75])


def test_if_takes_the_drawn_branch_of_g_and_perturbed_g():
    g = _g(Op.ADD, [0.5, -0.25], [1.0, 2.0])
    # else = G with c * 1.5 (no branch-dependent shape: 0); condition False
    case = cf.wrap_if(_Scripted([0, 0, True, 6, 0, False]), g, 0)
    assert case.inputs[0].tolist() == [False]
    (out,) = Executor(case.model).run(case.inputs)
    np.testing.assert_array_equal(out, [2.0, 2.75])
    (out,) = Executor(case.model).run([np.array([True])] + case.inputs[1:])
    np.testing.assert_array_equal(out, [1.5, 1.75])


def test_feedback_that_gives_nan_is_dropped_and_do_not_connect_outputs_are_never_fed_back():
    g = _g(Op.LOG, [0.5, 1.5])  # log(log(0.5)) is NaN: the pair must go
    case = cf.wrap_while(_Scripted([3, False, 0, 3]), g, 0, shrink_p=0)
    assert "0 fed-back" in case.detail
    (out,) = Executor(case.model).run(case.inputs)
    np.testing.assert_allclose(out, np.log(np.float32([0.5, 1.5])), rtol=1e-6)
    assert cf.loop_variable_pairs(_g(Op.DIV, [0.5, 1.5], [1.0, 2.0])) == []
    assert cf.loop_variable_pairs(_g(Op.ADD, [0.5, 1.5], [1.0, 2.0])) == [(0, 0)]


class _NoControlFlow(ReferenceDevice):
    def supported_operations(self, model):
        return [
            ok and op.type not in (Op.IF, Op.WHILE)
            for ok, op in zip(super().supported_operations(model), model.main.operations)
        ]


def test_reference_passes_and_a_driver_without_control_flow_skips_with_the_reason():
    for kind in cf.KINDS:
        case = cf.sample_wrapped(kind, T.TENSOR_FLOAT32, 5)
        expected = Executor(case.model).run(case.inputs)
        assert run_case(ReferenceDevice(), case.model, case.inputs, expected, ignored=case.ignored).outcome == PASS
        out = run_case(_NoControlFlow(), case.model, case.inputs, expected, ignored=case.ignored)
        assert out.outcome == SKIP and kind.upper() in out.message, out.message


def test_a_broken_operation_in_a_while_body_fails_the_case_and_the_inner_hunt_names_it():
    g = _g(Op.RELU6, [-1.0, 7.0])
    case = cf.wrap_while(_Scripted([2, True, 0, 3]), g, 0, shrink_p=0)  # N a model input, RELU6 fed back
    expected = Executor(case.model).run(case.inputs)
    np.testing.assert_array_equal(expected[0], [0.0, 6.0])
    out = run_case(Relu6Ignored(), case.model, case.inputs, expected, ignored=case.ignored)
    assert out.outcome != PASS
    n, name, _ = first_divergent_operation(Relu6Ignored(), case.inner.model, case.inner.inputs)
    assert (n, name) == (0, "RELU6")
