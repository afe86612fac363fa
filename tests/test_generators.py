"""The random-model generators: coverage of the registry, validity of thousands of draws,
value rules, CTS flags (doNotConnect, ignored outputs), profiles and the divergence hunt."""
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from nnconform.drivers.broken import QuantAddOffByTwo, Relu6Ignored
from nnconform.drivers.reference import ReferenceDevice
from nnconform.executor import Executor
from nnconform.generators import profiles, values
from nnconform.generators.diverge import expose_all, first_divergent_operation
from nnconform.generators.graphs import GraphConfig, generate
from nnconform.generators.signatures import EXCLUDED, GRAPH_TYPES, SIGNATURES
from nnconform.generators.strategies import RandomDrawer, random_graph, sample, single_operation
from nnconform.ir import Lifetime, ModelBuilder, OperandType as T, OperationType as Op
from nnconform.ops.registry import load_all
from nnconform.validation import validate_model

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


@pytest.mark.parametrize("n_ops,max_dim", [(5, 1000), (40, 10)])
def test_random_graph_draws_are_valid_and_connected(n_ops, max_dim):
    edges = 0
    for t, r, seed in itertools.product((T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32, T.TENSOR_BOOL8,
                                         T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED),
                                        (1, 2, 3, 4), range(6 if n_ops == 5 else 2)):
        case = sample(GraphConfig(dtype=t, n_ops=n_ops, rank=r, max_dim=max_dim), seed, edge=seed == 1)
        _check_case(case)
        m = case.model.main
        assert 1 <= len(m.operations) <= n_ops
        # Fresh shapes respect max_dim; outputs of PAD/TILE/CONCATENATION... may grow past
        # it (and inputs shaped like them), but element counts stay bounded.
        assert all(int(np.prod(o.dimensions)) <= 40 * 10000 for o in m.operands)
        edges += sum(m.operands[i].lifetime in (Lifetime.TEMPORARY_VARIABLE, Lifetime.SUBGRAPH_OUTPUT)
                     for op in m.operations for i in op.inputs)
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
    assert (np.abs(e) > 6.6e4).any() and (e == 0).any()      # beyond fp16 range, exact zeros
    pos = values.fill(rng, T.TENSOR_FLOAT32, (3000,), lo=0.1, hi=2.0, edge=True)
    assert pos.min() >= 0.1 and pos.max() <= 2.0               # a signature's range holds
    nz = values.fill(rng, T.TENSOR_FLOAT16, (3000,), nonzero=True)
    assert np.abs(nz).min() >= 0.25


def test_do_not_connect_and_ignored_outputs():
    for seed in range(40):
        case = sample(GraphConfig(dtype=T.TENSOR_FLOAT32, n_ops=6, rank=2, max_dim=10,
                                  ops=(Op.DIV, Op.POW, Op.REDUCE_PROD, Op.TOPK_V2, Op.ADD)), seed)
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
    ins = [i * 3 for i in ins]      # values above 6 and below 0, so RELU6 matters
    n, name, _ = first_divergent_operation(Relu6Ignored(), model, ins)
    assert (n, name) == (1, "RELU6")
    assert first_divergent_operation(ReferenceDevice(), model, ins) is None
    exposed = expose_all(model)
    assert len(exposed.main.output_indexes) == 2
    validate_model(exposed)
