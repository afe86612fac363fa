"""Plan-time kernels (an operation's ``prepare`` in the registry) give the bits of the
operation's ``execute``, cover only the steps they say they cover, and never stand in for an
operation a broken driver replaced."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from nnconform.cases.vectors import load_cases
from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.models import builtin_entries, zoo_entries
from nnconform.reference.executor import MAX_LOOP_TIMEOUT, Executor
from nnconform.reference.kernels import jit
from nnconform.reference.ops.registry import load_all

HAVE_NUMBA = importlib.util.find_spec("numba") is not None


@pytest.fixture(params=["numpy only", "compiled"])
def kernels(request, monkeypatch):
    """Both of the reference's kernel sets: a plan-time kernel may lean on a compiled call
    (DEPTHWISE_CONV_2D's does) or share its helpers' choice between the two."""
    if request.param == "compiled" and not HAVE_NUMBA:
        pytest.skip("the compiled kernels need the [fast] extra (numba)")
    monkeypatch.setenv("NNCONFORM_JIT", "1" if request.param == "compiled" else "0")
    monkeypatch.setattr(jit, "_state", {})
    return request.param


def _kernel_ops() -> list[str]:
    return sorted(t.name for t, d in load_all().items() if d.prepare is not None)


def _outcome(model, inputs, prepared: bool):
    """What a run gives: every output's dtype, shape and bytes, or the error it raised.  The
    loop timeout is NNAPI's longest (15 s): a vector's WHILE loop that ends in milliseconds
    must not time out on one path and not the other because the machine is busy."""
    ex = Executor(model, prepared_kernels=prepared)
    try:
        outs = ex.run(list(inputs), loop_timeout=MAX_LOOP_TIMEOUT)
    except Exception as e:  # the comparison is the point: both paths must fail alike
        return ("raised", type(e).__name__, str(e)), ex
    return ("ran", [(o.dtype.str, o.shape, o.tobytes()) for o in outs]), ex


def _kernels_in(ex: Executor, model) -> int:
    return sum(k is not None for k in ex._plan(model.main)[2])


def test_there_are_kernels_to_test():
    assert _kernel_ops() == KERNEL_OPS


KERNEL_OPS = ["ADD", "CONV_2D", "DEPTHWISE_CONV_2D", "RESHAPE", "SOFTMAX", "SUB"]


@pytest.mark.parametrize("op", KERNEL_OPS)
def test_every_golden_vector_with_a_kernel_gives_the_same_bits_either_way(op, kernels):
    # (not the endless WHILE loops: they end at the loop timeout, after as many iterations
    # as the machine managed, which is all their outcome says)
    cases = [c for c in load_cases(ops=[op]) if "infinite_loop" not in c.name]
    assert len(cases) > 30
    with_kernel = 0
    for case in cases:
        without, _ = _outcome(case.model, case.inputs, prepared=False)
        with_, ex = _outcome(case.model, case.inputs, prepared=True)
        assert with_ == without, case.test_id
        with_kernel += _kernels_in(ex, case.model) > 0
    # the vectors' NHWC convolutions and one-row float softmaxes run through their kernels
    assert with_kernel >= 10, with_kernel


@pytest.mark.parametrize("name", [*builtin_entries(), *zoo_entries()])
def test_whole_models_give_the_same_bits_with_and_without_kernels(name, kernels):
    """The built-in MobileNets (and the zoo's models, when `nnconform models fetch` has
    run): every operation of a real network, its convolutions through their kernels."""
    from nnconform.cases.tflite_import import TfliteImportError, UnmappedOperations

    entry = {**builtin_entries(), **zoo_entries()}[name]
    try:
        model = entry.load()
    except UnmappedOperations as e:
        pytest.skip(f"{name} does not import (TFLite operations without an NNAPI equivalent): {e}")
    except TfliteImportError as e:  # fetched models, but no [tflite] extra to read them
        pytest.skip(f"{name}: {e}")
    inputs = entry.inputs(0)
    without, _ = _outcome(model, inputs, prepared=False)
    with_, ex = _outcome(model, inputs, prepared=True)
    assert without[0] == "ran", without
    assert with_ == without
    main = model.main
    convs = sum(
        o.type in (Op.CONV_2D, Op.DEPTHWISE_CONV_2D)
        and main.operands[o.inputs[0]].type in (T.TENSOR_FLOAT32, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
        for o in main.operations
    )
    assert _kernels_in(ex, model) >= convs  # every float32 and 8-bit convolution of these models


DTYPE = {T.TENSOR_FLOAT32: np.float32, T.TENSOR_FLOAT16: np.float16}


def _softmax_model(dims, t, beta, axis, beta_input=False):
    b = ModelBuilder()
    x = b.input(t, dims)
    beta_t = T.FLOAT16 if t == T.TENSOR_FLOAT16 else T.FLOAT32
    beta_op = b.input(beta_t) if beta_input else b.const(beta_t, [], np.array(beta, DTYPE[t]))
    ins = [x, beta_op]
    if axis == "omitted":
        ins.append(b.omitted(T.INT32))
    elif axis is not None:
        ins.append(b.i32(axis))
    b.operation(Op.SOFTMAX, ins, [b.output(t, dims)])
    return b.build()


@seed(16031)
@settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.integers(0, 2**32 - 1))
def test_a_one_row_float_softmax_gives_executes_bits(kernels, s):
    """Random classifier heads: rank 1-4 with one row, fp32 or fp16, any beta, the axis
    given as -1 or rank-1, omitted or absent; logits from a few units to thousands; numpy
    only and with the compiled first pass."""
    rng = np.random.default_rng(s)
    print("numpy seed", s)
    n = int(rng.integers(1, 3000))
    dims = [1] * int(rng.integers(0, 4)) + [n]
    t = T.TENSOR_FLOAT16 if rng.random() < 0.3 else T.TENSOR_FLOAT32
    beta = float(2.0 ** rng.uniform(-4, 2)) if rng.random() < 0.7 else 1.0
    axis = [None, "omitted", -1, len(dims) - 1][int(rng.integers(0, 4))]
    model = _softmax_model(dims, t, beta, axis)
    x = (rng.standard_normal(dims) * 2.0 ** rng.uniform(-2, 12)).astype(DTYPE[t])
    without, _ = _outcome(model, [x], prepared=False)
    with_, ex = _outcome(model, [x], prepared=True)
    assert with_ == without
    assert _kernels_in(ex, model) == 1


@pytest.mark.parametrize(
    "what, dims, beta, axis, beta_input",
    [
        ("two rows", [2, 10], 1.0, None, False),
        ("the axis not the last", [1, 10], 1.0, 0, False),
        ("unknown dimensions", [1, 0], 1.0, None, False),
        ("beta from the request", [1, 10], 1.0, None, True),
        ("beta not above 0 (execute fails the run)", [1, 10], 0.0, None, False),
        ("the axis out of range (execute fails the run)", [1, 10], 1.0, 2, False),
    ],
)
def test_a_kernel_is_planned_only_for_what_it_covers(what, dims, beta, axis, beta_input):
    model = _softmax_model(dims, T.TENSOR_FLOAT32, beta, axis, beta_input)
    x = np.linspace(-3, 3, 20, dtype=np.float32)[: max(1, int(np.prod([d or 10 for d in dims])))]
    x = x.reshape([d or 10 for d in dims])
    inputs = [x, np.float32(beta)] if beta_input else [x]
    without, _ = _outcome(model, inputs, prepared=False)
    with_, ex = _outcome(model, inputs, prepared=True)
    assert _kernels_in(ex, model) == 0, what
    assert with_ == without
    if "fails" in what:
        assert with_[0] == "raised" and "OpFailure" in with_[1], with_


def test_a_broken_drivers_override_is_called_instead_of_the_kernel():
    """The deliberately wrong drivers replace an operation's execute; a kernel planned for
    the reference's own SOFTMAX must not quietly compute the right answer in its place."""
    model = _softmax_model([1, 10], T.TENSOR_FLOAT32, 1.0, None)
    assert _kernels_in(Executor(model), model) == 1
    calls = []

    def wrong(ctx):
        calls.append(ctx.index)
        return [np.zeros(ctx.inputs[0].shape, np.float32)]

    ex = Executor(model, overrides={Op.SOFTMAX: wrong})
    out = ex.run([np.arange(10, dtype=np.float32).reshape(1, 10)])[0]
    assert calls == [0] and not out.any()
    assert _kernels_in(ex, model) == 0


def test_a_prepare_that_cannot_settle_a_step_leaves_it_to_execute_and_a_bug_surfaces(monkeypatch):
    """Malformed operands (a ValueError, an IndexError, ...) leave the step to execute,
    which reports them when the step runs; any other exception from a prepare is a bug in
    the reference and stops the plan."""
    import dataclasses

    from nnconform.reference.ops import registry

    def refusing(v):
        raise ValueError("a constant the prepare cannot read")

    def buggy(v):
        raise RuntimeError("a bug in a prepare")

    x = np.linspace(-3, 3, 10, dtype=np.float32).reshape(1, 10)
    expected = Executor(_softmax_model([1, 10], T.TENSOR_FLOAT32, 1.0, None), prepared_kernels=False).run([x])[0]
    opdef = registry.REGISTRY[Op.SOFTMAX]
    monkeypatch.setitem(registry.REGISTRY, Op.SOFTMAX, dataclasses.replace(opdef, prepare=refusing))
    model = _softmax_model([1, 10], T.TENSOR_FLOAT32, 1.0, None)  # a new subgraph: planned anew
    ex = Executor(model)
    assert _kernels_in(ex, model) == 0
    assert ex.run([x])[0].tobytes() == expected.tobytes()
    monkeypatch.setitem(registry.REGISTRY, Op.SOFTMAX, dataclasses.replace(opdef, prepare=buggy))
    with pytest.raises(RuntimeError, match="a bug in a prepare"):
        Executor(_softmax_model([1, 10], T.TENSOR_FLOAT32, 1.0, None))


@pytest.mark.parametrize("quant", [False, True], ids=["float", "quant8"])
def test_a_plan_with_kernels_goes_with_its_model(quant):
    """Plans live in a weak dictionary keyed by their subgraph: a kernel that kept the
    subgraph (through the static context it was planned from, say) would keep every model
    the harness ever ran, and its plan, alive."""
    import gc
    import weakref

    b = ModelBuilder()
    if quant:
        q = dict(scale=0.1, zero_point=128)
        x = b.input(T.TENSOR_QUANT8_ASYMM, [1, 8, 8, 4], **q)
        w = b.const(
            T.TENSOR_QUANT8_ASYMM, [4, 3, 3, 4], np.full((4, 3, 3, 4), 130, np.uint8), scale=0.05, zero_point=128
        )
        dw = b.const(
            T.TENSOR_QUANT8_ASYMM, [1, 3, 3, 4], np.full((1, 3, 3, 4), 131, np.uint8), scale=0.05, zero_point=128
        )
        bias = b.const(T.TENSOR_INT32, [4], np.zeros(4, np.int32), scale=0.005)
        t1, t2, t3 = (b.temp(T.TENSOR_QUANT8_ASYMM, [1, 8, 8, 4], **q) for _ in range(3))
        y = b.output(T.TENSOR_QUANT8_ASYMM, [1, 256], **q)
        x_val = np.full((1, 8, 8, 4), 140, np.uint8)
    else:
        x = b.input(T.TENSOR_FLOAT32, [1, 8, 8, 4])
        w = b.const(T.TENSOR_FLOAT32, [4, 3, 3, 4], np.full((4, 3, 3, 4), 0.1, np.float32))
        dw = b.const(T.TENSOR_FLOAT32, [1, 3, 3, 4], np.full((1, 3, 3, 4), 0.2, np.float32))
        bias = b.const(T.TENSOR_FLOAT32, [4], np.zeros(4, np.float32))
        t1, t2, t3 = (b.temp(T.TENSOR_FLOAT32, [1, 8, 8, 4]) for _ in range(3))
        y = b.output(T.TENSOR_FLOAT32, [1, 256])
        x_val = np.ones((1, 8, 8, 4), np.float32)
    b.operation(Op.CONV_2D, [x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(0)], [t1])
    b.operation(Op.DEPTHWISE_CONV_2D, [t1, dw, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(0)], [t2])
    b.operation(Op.ADD, [t1, t2, b.i32(0)], [t3])
    b.operation(Op.RESHAPE, [t3, b.const(T.TENSOR_INT32, [2], np.array([1, 256], np.int32))], [y])
    model = b.build()
    ex = Executor(model)
    ex.run([x_val])
    assert _kernels_in(ex, model) >= 3
    subgraph, plan = weakref.ref(model.main), weakref.ref(ex._plan(model.main)[0])
    del model, ex
    gc.collect()
    assert subgraph() is None and plan() is None


def _quant_softmax_model(dims, t, in_scale, beta, axis=None, out_scale=1 / 256, out_zp=None):
    b = ModelBuilder()
    signed = t == T.TENSOR_QUANT8_ASYMM_SIGNED
    x = b.input(t, dims, scale=in_scale, zero_point=-3 if signed else 125)
    ins = [x, b.f32(beta)] + ([] if axis is None else [b.i32(axis)])
    out_zp = (-128 if signed else 0) if out_zp is None else out_zp
    b.operation(Op.SOFTMAX, ins, [b.output(t, dims, scale=out_scale, zero_point=out_zp)])
    return b.build()


@seed(16032)
@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.integers(0, 2**32 - 1))
def test_a_quantised_softmax_gives_executes_bytes(kernels, s):
    """Random 8-bit softmaxes along the last axis: rank 1-4, one row or many, uint8 or
    int8, any beta and input scale the fixed-point kernel takes.  Compiled, the kernel runs;
    numpy only, it leaves each run to execute."""
    rng = np.random.default_rng(s)
    print("numpy seed", s)
    rank = int(rng.integers(1, 5))
    dims = [int(d) for d in rng.integers(1, 5, rank - 1)] + [int(rng.integers(1, 1500))]
    t = T.TENSOR_QUANT8_ASYMM_SIGNED if rng.random() < 0.5 else T.TENSOR_QUANT8_ASYMM
    in_scale = float(2.0 ** rng.uniform(-8, 2))
    beta = float(2.0 ** rng.uniform(-3, 3))
    axis = [None, -1, rank - 1][int(rng.integers(0, 3))]
    model = _quant_softmax_model(dims, t, in_scale, beta, axis)
    dtype = np.int8 if t == T.TENSOR_QUANT8_ASYMM_SIGNED else np.uint8
    x = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max + 1, dims).astype(dtype)
    without, _ = _outcome(model, [x], prepared=False)
    with_, ex = _outcome(model, [x], prepared=True)
    assert with_ == without
    assert without[0] == "ran"
    assert _kernels_in(ex, model) == 1


@pytest.mark.parametrize(
    "what, kw",
    [
        ("an output scale other than 1/256 (execute fails the run)", dict(out_scale=1 / 128)),
        ("an output zero point other than 0 (execute fails the run)", dict(out_zp=3)),
        ("beta * scale too small for the kernel (execute fails the run)", dict(in_scale=1e-30)),
        ("the axis not the last", dict(axis=0)),
    ],
)
def test_a_quantised_softmax_kernel_is_planned_only_for_what_it_covers(what, kw, kernels):
    args = dict(dims=[3, 40], t=T.TENSOR_QUANT8_ASYMM, in_scale=0.1, beta=1.0)
    args.update(kw)
    model = _quant_softmax_model(**args)
    x = np.arange(120, dtype=np.uint8).reshape(3, 40)
    without, _ = _outcome(model, [x], prepared=False)
    with_, ex = _outcome(model, [x], prepared=True)
    assert _kernels_in(ex, model) == 0, what
    assert with_ == without
    if "fails" in what:
        assert with_[0] == "raised" and "OpFailure" in with_[1], with_


@pytest.mark.parametrize("t", [T.TENSOR_FLOAT16, T.TENSOR_FLOAT32], ids=["fp16", "fp32"])
@pytest.mark.parametrize("special", ["inf", "-inf", "nan", "none"])
def test_a_float_softmax_row_with_special_values_gives_executes_bits(special, t, kernels):
    """The compiled fp16 row and fp32 first pass leave a row with a NaN or an infinity to
    numpy's row (which NaN comes out follows numpy's own order of operations); -inf logits
    stay on them."""
    model = _softmax_model([1, 600], t, 0.7, None)
    x = np.linspace(-8, 8, 600).astype(DTYPE[t]).reshape(1, 600)
    if special != "none":
        x[0, [5, 300]] = {"inf": np.inf, "-inf": -np.inf, "nan": np.nan}[special]
    without, _ = _outcome(model, [x], prepared=False)
    with_, ex = _outcome(model, [x], prepared=True)
    assert with_ == without and with_[0] == "ran"
    assert _kernels_in(ex, model) == 1
