"""Quantised ADD/SUB split into byte tables of each input and a carry (add_split.py), and
the compiled permute kernel that reads them (jit.split_add): every one of the 65,536 input
pairs gives the fixed-point kernel's output, for seeded quantisations, both 8-bit types,
ADD and SUB and every fused activation; a kernel whose tables are wrong is refused."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.executor import Executor
from nnconform.reference.kernels import add_split, jit, lut
from nnconform.reference.ops import add_sub
from nnconform.reference.ops.registry import OpView

SETTINGS = settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
ROWS = np.repeat(np.arange(256, dtype=np.uint8), 256)  # every (a, b) byte pair
COLS = np.tile(np.arange(256, dtype=np.uint8), 256)


def _model(
    signed: bool, subtract: bool, act: int, s1: float, s2: float, so: float, z1: int, z2: int, zo: int, shape=(1, 4)
):
    t = T.TENSOR_QUANT8_ASYMM_SIGNED if signed else T.TENSOR_QUANT8_ASYMM
    b = ModelBuilder()
    x = b.input(t, list(shape), scale=s1, zero_point=z1)
    y = b.input(t, list(shape), scale=s2, zero_point=z2)
    o = b.output(t, list(shape), scale=so, zero_point=zo)
    b.operation(Op.SUB if subtract else Op.ADD, [x, y, b.i32(act)], [o])
    return b.build()


def _parts(model, signed: bool):
    """(exact 256x256 table, add_sub's split) of the model's one ADD/SUB, as execute has them."""
    view = OpView(model, model.main, 0)
    ctx = view.static_context()
    act = ctx.scalar(2)
    _, kernel, split = add_sub._quant_add_kernel(ctx, act, model.main.operations[0].type == Op.SUB)
    dt = np.dtype(np.int8 if signed else np.uint8)
    domain = np.arange(256, dtype=np.uint8).view(dt)
    return kernel(domain[:, None], domain[None, :]), split(dt, dt)


quantisations = st.fixed_dictionaries(
    {
        "signed": st.booleans(),
        "subtract": st.booleans(),
        "act": st.sampled_from([0, 1, 2, 3]),
        "s1": st.floats(-9, 3),
        "s2": st.floats(-9, 3),
        "ratio": st.floats(-3.4, 4),
        "zeros": st.integers(0, 2**24 - 1),
    }
)


def _draw(q):
    """Log-scales from the strategy; the output scale within 2**-3.4 (about 1/10) and 2**4 of
    the larger input's, where every part fits int16 (so no example is vacuous)."""
    s1, s2 = float(2.0 ** q["s1"]), float(2.0 ** q["s2"])
    so = max(s1, s2) * float(2.0 ** q["ratio"])
    z = [(q["zeros"] >> (8 * k)) & 255 for k in range(3)]
    if q["signed"]:
        z = [v - 128 for v in z]
    return _model(q["signed"], q["subtract"], q["act"], s1, s2, so, *z), z[2]


@seed(20261129)
@SETTINGS
@given(q=quantisations)
def test_split_tables_give_every_output_of_the_fixed_point_kernel(q):
    model, zo = _draw(q)
    table, split = _parts(model, q["signed"])
    assert split.tables is not None and split.tables.shape == (9, 256) and split.tables.dtype == np.uint8
    assert split.zero_point == zo
    got = add_split.evaluate(split.tables, ROWS, COLS, split.zero_point, split.lo, split.hi)
    want = table.reshape(-1).astype(np.int32)
    assert np.count_nonzero(got != want) == 0, f"{np.count_nonzero(got != want)} of 65536 pairs differ"


@pytest.mark.parametrize("signed", [False, True], ids=["uint8", "int8"])
def test_benchmark_quantisation_and_its_half_way_cases(signed):
    """The benchmark's scales (0.05 + 0.07 -> 0.1): thousands of pairs land on a half-way
    output below the zero point, where G- and G+ differ; the tables give every output."""
    z = -128 if signed else 0
    model = _model(signed, False, 0, 0.05, 0.07, 0.1, z + 128, z + 120, z + 128)
    table, split = _parts(model, signed)
    t = split.tables
    a, b = ROWS.astype(np.intp), COLS.astype(np.intp)
    word = lambda r: (t[r].astype(np.int32) | (t[r + 1].astype(np.int32) << 8)).astype(np.uint16).view(np.int16)
    rank = t[8][b]
    plus = word(0)[a] + word(6)[b] + (rank > t[4][a])
    minus = word(2)[a] + word(6)[b] + (rank > t[5][a])
    assert np.count_nonzero((plus <= split.zero_point) & (plus != minus)) > 1000
    got = add_split.evaluate(t, ROWS, COLS, split.zero_point, split.lo, split.hi)
    assert np.array_equal(got, table.reshape(-1).astype(np.int32))


def test_no_tables_where_a_part_leaves_int16():
    """An output scale 1000x finer than the inputs': parts near 2**17, no tables."""
    model = _model(False, False, 0, 1.0, 1.0, 0.001, 128, 128, 128)
    _, split = _parts(model, False)
    assert split.tables is None


# --- the compiled kernel ---------------------------------------------------------------


@pytest.fixture
def kernels_on(monkeypatch):
    pytest.importorskip("numba", reason="the compiled split kernel needs the [fast] extra (numba)")
    monkeypatch.setenv("NNCONFORM_JIT", "1")
    monkeypatch.setattr(jit, "_state", {})
    if not jit._host_has("avx512f", "avx512bw", "avx512vbmi"):
        pytest.skip("this CPU has no AVX-512 VBMI byte permutes (the split kernel is x86-64 with VBMI only)")
    monkeypatch.setattr(lut, "_cache", type(lut._cache)())
    monkeypatch.setattr(lut, "_seen", type(lut._seen)())


@pytest.mark.parametrize("signed", [False, True], ids=["uint8", "int8"])
@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 130, 4099])
def test_compiled_split_add_gives_the_tables_bytes(kernels_on, signed, n):
    """Blocks of 64 and the tail past them: the exact table's byte for every element."""
    rng = np.random.default_rng(1129 + n)
    z = -128 if signed else 0
    for subtract, act in ((False, 0), (True, 1), (False, 3)):
        model = _model(signed, subtract, act, 0.05, 0.07, 0.1, z + 128, z + 120, z + 128)
        table, split = _parts(model, signed)
        a = rng.integers(0, 256, n, dtype=np.uint8)
        b = rng.integers(0, 256, n, dtype=np.uint8)
        got = jit.split_add(split.tables, table, a, b, split.zero_point, split.lo, split.hi, table.dtype)
        want = table.reshape(-1)[(a.astype(np.intp) << 8) | b]
        assert got.dtype == table.dtype and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("signed", [False, True], ids=["uint8", "int8"])
def test_add_and_sub_models_take_the_split_kernel_with_the_numpy_paths_bytes(kernels_on, monkeypatch, signed):
    """A 1x112x112x8 ADD and SUB through the executor: the split kernel runs, and gives the
    bytes of the numpy path (kernels off)."""
    calls = []
    real = jit.split_add
    monkeypatch.setattr(jit, "split_add", lambda *args: calls.append(args[2].size) or real(*args))
    rng = np.random.default_rng(29)
    z = -128 if signed else 0
    shape = (1, 112, 112, 8)
    for subtract in (False, True):
        model = _model(signed, subtract, 1, 0.031, 0.02, 0.04, z + 131, z + 97, z + 120, shape)
        dt = np.int8 if signed else np.uint8
        feeds = [rng.integers(0, 256, shape, dtype=np.uint8).view(dt) for _ in range(2)]
        got = Executor(model).run(feeds)[0]
        with monkeypatch.context() as mp:
            mp.setenv("NNCONFORM_JIT", "0")
            mp.setattr(jit, "_state", {})
            want = Executor(model).run(feeds)[0]
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    assert 65536 in calls and calls.count(int(np.prod(shape))) == 2  # checked once, then run


def test_wrong_tables_are_refused_and_the_table_is_used(kernels_on, caplog):
    """Tables that miss one output (a count off by one) fail the check on all 65,536
    pairs: logged, and lut.binary gathers from the exact table instead."""
    model = _model(False, False, 0, 0.05, 0.07, 0.1, 128, 120, 128)
    table, split = _parts(model, False)
    broken = split.tables.copy()
    broken[4, 77] = (int(broken[4, 77]) + 1) % 256
    wrong = split._replace(tables=broken)
    with caplog.at_level(logging.WARNING, logger="nnconform.reference.kernels.lut"):
        checked = lut._checked_split(wrong, table)
    assert checked.tables is None
    assert "differ from the exact table" in caplog.text
    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, 70000, dtype=np.uint8)
    b = rng.integers(0, 256, 70000, dtype=np.uint8)
    kernel = lambda x, y: table[x.view(np.uint8).astype(np.intp), y.view(np.uint8).astype(np.intp)]
    got = lut.binary(("broken split",), kernel, a, b, lambda da, db: wrong)
    assert got.tobytes() == table.reshape(-1)[(a.astype(np.intp) << 8) | b].tobytes()
    assert lut._checked_split(split, table).tables is split.tables


def test_the_kernel_passes_its_trial_on_this_cpu(kernels_on):
    """Where the CPU has the permutes, the kernel compiles and its trial gives add_split's
    formula (a failing trial would silently mean the gather: here it is a failure)."""
    assert jit.byte_permutes()


@pytest.mark.parametrize("failure", ["raises", "wrong"])
def test_a_kernel_that_fails_its_trial_leaves_the_gather(kernels_on, monkeypatch, caplog, failure):
    """Another numba or LLVM may reject the hand-written IR, or miscompile it: the trial
    fails, a warning says so, and ADD runs through the exact table as before."""

    def trial():
        if failure == "raises":
            raise RuntimeError("LLVM ERROR: Cannot select: intrinsic %llvm.x86.avx512.vpermi2var.qi.512")
        return False

    monkeypatch.setattr(jit, "_split_add_trial", trial)
    monkeypatch.setattr(jit, "split_add", lambda *a: pytest.fail("the split kernel ran"))
    with caplog.at_level(logging.WARNING, logger="nnconform.reference.kernels.jit"):
        assert not jit.byte_permutes()
    assert "split ADD kernel" in caplog.text and "using the numpy path" in caplog.text
    model = _model(False, False, 0, 0.05, 0.07, 0.1, 128, 120, 128, (1, 300))
    table, _ = _parts(model, False)
    rng = np.random.default_rng(8)
    feeds = [rng.integers(0, 256, (1, 300), dtype=np.uint8) for _ in range(2)]
    ex = Executor(model)
    for _ in range(2):  # asked twice: the table path
        got = ex.run(feeds)[0]
    assert got.tobytes() == table.reshape(-1)[(feeds[0].astype(np.intp) << 8) | feeds[1]].tobytes()
