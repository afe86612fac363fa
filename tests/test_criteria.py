"""Accuracy criteria (nnconform.verdict.criteria): each rule with a small table."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as O
from nnconform.verdict import criteria as C
from nnconform.verdict.criteria import Tolerance, compare, default_criteria, ulp_distance

QUANT = {
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
    T.TENSOR_QUANT8_SYMM,
    T.TENSOR_QUANT16_ASYMM,
    T.TENSOR_QUANT16_SYMM,
}


def model_of(*out_types, relaxed=False, extra_fp16=False, dims=(4,)):
    """A model whose main graph has one output per type (contents irrelevant to comparison).
    LOGISTIC is not an exactly defined operation, so these outputs get the set's tolerances;
    the exact rule has its own tests below."""
    b = ModelBuilder()
    for t in out_types:
        kw = {"scale": 0.5} if t in QUANT else {}
        x = b.input(t, dims, **kw)
        y = b.output(t, dims, **kw)
        b.operation(O.LOGISTIC, [x], [y])
    if extra_fp16:
        b.input(T.TENSOR_FLOAT16, dims)
    return b.build(relaxed=relaxed)


def arr(values, t):
    from nnconform.ir import type_info

    return np.array(values, dtype=type_info(t).dtype)


# ---------------------------------------------------------------------------------------
# Default rows: boundaries exactly at atol (+ rtol*|e|).
# ---------------------------------------------------------------------------------------
F32_ATOL, F32_RTOL = 1e-5, 5 * 2.0**-23
F16_TOL = 5 * 2.0**-10


@pytest.mark.parametrize(
    "t, e, a, ok",
    [
        (T.TENSOR_QUANT8_ASYMM, 130, 131, True),
        (T.TENSOR_QUANT8_ASYMM, 130, 129, True),
        (T.TENSOR_QUANT8_ASYMM, 130, 132, False),
        (T.TENSOR_QUANT8_ASYMM, 0, 255, False),
        (T.TENSOR_QUANT8_ASYMM_SIGNED, -128, -127, True),
        (T.TENSOR_QUANT8_ASYMM_SIGNED, -128, 127, False),  # signed arithmetic, no wrap-around
        (T.TENSOR_QUANT8_SYMM, 5, 3, False),
        (T.TENSOR_QUANT16_ASYMM, 40000, 40001, True),
        (T.TENSOR_QUANT16_SYMM, -3, -5, False),
        (T.TENSOR_INT32, 7, 8, True),
        (T.TENSOR_INT32, 7, 9, False),
        (T.TENSOR_INT32, -(2**31), 2**31 - 1, False),
        # fp32: atol 1e-5 (+ 5 fp32 ULP relative); 0.0 vs 1e-5 sits on the boundary in float64.
        (T.TENSOR_FLOAT32, 0.0, 9.5e-6, True),
        (T.TENSOR_FLOAT32, 0.0, 1.1e-5, False),
        (T.TENSOR_FLOAT32, 1000.0, 1000.0 + 1e-5 + 1000 * F32_RTOL * 0.9, True),
        (T.TENSOR_FLOAT32, 1000.0, 1000.0 + 1e-5 + 1000 * F32_RTOL * 1.5, False),
        (T.TENSOR_FLOAT16, 1.0, 1.0 + 2 * F16_TOL, True),  # atol + rtol*1 = 2*F16_TOL exactly
        (T.TENSOR_FLOAT16, 1.0, 1.0 + 2 * F16_TOL + 2**-10, False),
        (T.TENSOR_FLOAT16, 0.0, 0.0048828125, True),  # exactly atol
        (T.TENSOR_FLOAT16, 0.0, 0.005859375, False),
    ],
)
def test_default_rows(t, e, a, ok):
    m = model_of(t)
    ea = arr([e, e, e, e], t)
    aa = ea.copy()
    aa[2] = arr([a], t)[0]
    c = compare(m, [ea], [aa])
    assert c.passed is ok, c.message
    if not ok:
        (mm,) = c.mismatches
        assert (mm.output, mm.kind, mm.flat_index, mm.index) == (0, "element", 2, [2])
        assert mm.num_bad == 1 and mm.type_name == t.name


def test_boundary_exactly_at_atol_passes_for_every_integer_type():
    for t in (T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT16_SYMM):
        m = model_of(t)
        assert compare(m, [arr([10, 10, 10, 10], t)], [arr([11, 9, 10, 11], t)]).passed


def test_quant8_atol_parameter_and_not_quant16():
    for t, ok3 in (
        (T.TENSOR_QUANT8_ASYMM, True),
        (T.TENSOR_QUANT8_ASYMM_SIGNED, True),
        (T.TENSOR_QUANT8_SYMM, True),
        (T.TENSOR_QUANT16_ASYMM, False),
    ):
        m = model_of(t)
        e, a = arr([10, 20, 30, 40], t), arr([13, 17, 30, 40], t)
        assert not compare(m, [e], [a]).passed
        assert compare(m, [e], [a], quant8_atol=3).passed is ok3
        assert not compare(m, [e], [arr([14, 20, 30, 40], t)], quant8_atol=3).passed


def test_message_format():
    m = model_of(T.TENSOR_QUANT8_ASYMM, dims=(2, 3))
    e = arr([[1, 2, 3], [4, 5, 130]], T.TENSOR_QUANT8_ASYMM)
    a = arr([[1, 2, 3], [4, 5, 132]], T.TENSOR_QUANT8_ASYMM)
    c = compare(m, [e], [a])
    assert c.message == (
        "output 0 (TENSOR_QUANT8_ASYMM [2, 3]) index [1, 2]: expected 130, "
        "actual 132, |diff| 2 > atol 1 + rtol 0*|e| (1 of 6 elements out of "
        "tolerance; max abs err 2, mean err 0.333333333)"
    )
    mm = c.mismatches[0]
    assert (mm.expected, mm.actual, mm.criterion, mm.atol, mm.rtol) == (130, 132, "default.quant8_asymm", 1, 0.0)
    assert mm.max_abs_error == 2.0 and mm.max_ulp is None


def test_first_failing_element_and_stats():
    m = model_of(T.TENSOR_FLOAT32, dims=(2, 3))
    e = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = e.copy()
    a[0, 2] += 0.5
    a[1, 1] -= 2.0
    c = compare(m, [e], [a])
    mm = c.mismatches[0]
    assert mm.index == [0, 2] and mm.flat_index == 2
    assert mm.num_bad == 2 and mm.num_compared == 6
    assert mm.max_abs_error == 2.0
    assert mm.mean_error == pytest.approx(-1.5 / 6)
    assert mm.max_ulp == ulp_distance(e, a).max()
    assert "max ULP" in c.message


# ---------------------------------------------------------------------------------------
# NaN, inf, skip_invalid_fp.
# ---------------------------------------------------------------------------------------


def test_expected_nan_fails_even_if_actual_nan():
    m = model_of(T.TENSOR_FLOAT32)
    e = np.array([1, np.nan, 3, 4], np.float32)
    for a in (e.copy(), np.array([1, 0, 3, 4], np.float32)):
        c = compare(m, [e], [a])
        assert not c.passed
        assert c.mismatches[0].kind == "nan_expected" and c.mismatches[0].index == [1]
        assert "NaN" in c.message


def test_actual_nan_fails_and_equal_infinities_pass():
    m = model_of(T.TENSOR_FLOAT32)
    e = np.array([1, np.inf, -np.inf, 4], np.float32)
    assert compare(m, [e], [e.copy()]).passed
    a = e.copy()
    a[0] = np.nan
    assert not compare(m, [e], [a]).passed
    a = e.copy()
    a[1] = 3.4e38
    assert not compare(m, [e], [a]).passed


def test_skip_invalid_fp_option():
    base = C.DEFAULT
    skipping = C.Criteria(name="skip", float32=base.float32, float16=base.float16, skip_invalid_fp=True)
    m = model_of(T.TENSOR_FLOAT32)
    e = np.array([np.inf, 2000.0, 500.0, np.nan], np.float32)
    a = np.array([0.0, 0.0, 0.0, 0.0], np.float32)
    c = compare(m, [e], [a], criteria=skipping)
    # inf and |e| > 1e3 are skipped; 500 is checked; NaN expected still fails.
    assert sorted(mm.flat_index for mm in c.mismatches) == [2]
    assert c.mismatches[0].num_bad == 2
    assert {mm.kind for mm in c.mismatches} == {"element"}
    e2 = np.array([np.inf, 2000.0, 0.0, 1.0], np.float32)
    a2 = np.array([0.0, 0.0, 0.0, 1.0], np.float32)
    assert compare(m, [e2], [a2], criteria=skipping).passed
    assert not compare(m, [e2], [a2]).passed  # off by default


def test_skip_invalid_fp_does_not_skip_all_fp16():
    # CTS's allowInvalidFpValues quirk skips every fp16 element; we check them.
    m = model_of(T.TENSOR_FLOAT16)
    e = np.array([1, 2, 150, 4], np.float16)
    a = np.array([1, 2, 0, 40], np.float16)
    c = compare(m, [e], [a], criteria=C.STRICT)
    assert not c.passed
    assert [mm.flat_index for mm in c.mismatches if mm.kind == "element"] == [3]


# ---------------------------------------------------------------------------------------
# Relaxed / fp16 switching.
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "relaxed, fp16, switched", [(False, False, False), (True, False, True), (False, True, True), (True, True, True)]
)
def test_relaxed_switching(relaxed, fp16, switched):
    m = model_of(T.TENSOR_FLOAT32, relaxed=relaxed, extra_fp16=fp16)
    crit = default_criteria(m)
    assert (crit.float32 == crit.float16) is switched
    e = np.ones(4, np.float32)
    a = e + np.float32(1e-3)  # outside fp32 tolerance, inside fp16 tolerance
    assert compare(m, [e], [a]).passed is switched


def test_fp16_operand_in_referenced_subgraph_switches():
    b = ModelBuilder()
    sub = b.subgraph("body")
    si = sub.input(T.TENSOR_FLOAT16, [1])
    so = sub.output(T.TENSOR_FLOAT16, [1])
    sub.operation(O.RELU, [si], [so])
    b.subgraph_ref(sub)
    x = b.input(T.TENSOR_FLOAT32, [4])
    y = b.output(T.TENSOR_FLOAT32, [4])
    b.operation(O.RELU, [x], [y])
    m = b.build()
    assert default_criteria(m).name == "default+relaxed"


def test_explicit_criteria_used_as_given():
    m = model_of(T.TENSOR_FLOAT32, relaxed=True)
    e = np.zeros(4, np.float32)
    a = np.full(4, 1e-4, np.float32)
    assert compare(m, [e], [a]).passed  # relaxed default: fp16 row
    assert not compare(m, [e], [a], criteria=C.DEFAULT).passed


# ---------------------------------------------------------------------------------------
# bias / mse.
# ---------------------------------------------------------------------------------------


def test_bias_and_mse_quant():
    crit = C.STRICT  # quant: bias 0.1, mse 0.1, atol 1
    m = model_of(T.TENSOR_QUANT8_ASYMM, dims=(10,))
    e = arr([100] * 10, T.TENSOR_QUANT8_ASYMM)
    one_off = arr([101] + [100] * 9, T.TENSOR_QUANT8_ASYMM)  # bias 0.1, mse 0.1: on limit
    assert compare(m, [e], [one_off], criteria=crit).passed
    two_off = arr([101, 101] + [100] * 8, T.TENSOR_QUANT8_ASYMM)  # bias 0.2, mse 0.2
    c = compare(m, [e], [two_off], criteria=crit)
    assert {mm.kind for mm in c.mismatches} == {"bias", "mse"}
    bias = next(mm for mm in c.mismatches if mm.kind == "bias")
    assert bias.measured_bias == pytest.approx(0.2) and bias.bias == 0.1
    assert bias.flat_index is None
    signed = arr([101, 99] * 5, T.TENSOR_QUANT8_ASYMM)  # bias 0, mse 1
    c = compare(m, [e], [signed], criteria=crit)
    assert [mm.kind for mm in c.mismatches] == ["mse"]


def test_bias_mse_need_ten_elements():
    m = model_of(T.TENSOR_QUANT8_ASYMM, dims=(9,))
    e = arr([100] * 9, T.TENSOR_QUANT8_ASYMM)
    a = arr([101] * 9, T.TENSOR_QUANT8_ASYMM)
    assert compare(m, [e], [a], criteria=C.STRICT).passed
    m10 = model_of(T.TENSOR_QUANT8_ASYMM, dims=(10,))
    assert not compare(
        m10, [arr([100] * 10, T.TENSOR_QUANT8_ASYMM)], [arr([101] * 10, T.TENSOR_QUANT8_ASYMM)], criteria=C.STRICT
    ).passed


def test_float_bias_is_relative():
    # diff / max(1, |e|): an error of 1e-6 on values of 100 is a relative 1e-8.
    m = model_of(T.TENSOR_FLOAT32, dims=(10,))
    e = np.full(10, 100.0, np.float32)
    a = (e.astype(np.float64) + 1e-5).astype(np.float32)
    c = compare(m, [e], [a], criteria=C.STRICT)
    assert c.passed, c.message  # relative bias ~1e-7 * 0.76
    e_small = np.full(10, 0.5, np.float32)
    a_small = e_small + np.float32(5e-7)  # atol ok (1e-6), bias 5e-7 > 1e-7
    c = compare(m, [e_small], [a_small], criteria=C.STRICT)
    assert [mm.kind for mm in c.mismatches] == ["bias"]


def test_default_criteria_never_check_bias():
    m = model_of(T.TENSOR_QUANT8_ASYMM, dims=(20,))
    e = arr([100] * 20, T.TENSOR_QUANT8_ASYMM)
    assert compare(m, [e], [arr([101] * 20, T.TENSOR_QUANT8_ASYMM)]).passed


# ---------------------------------------------------------------------------------------
# bool8.
# ---------------------------------------------------------------------------------------


def test_bool_default_is_exact():
    m = model_of(T.TENSOR_BOOL8)
    e = np.array([True, False, True, False])
    assert compare(m, [e], [e.copy()]).passed
    a = e.copy()
    a[3] = True
    c = compare(m, [e], [a])
    mm = c.mismatches[0]
    assert (mm.kind, mm.index, mm.expected, mm.actual) == ("bool_ratio", [3], False, True)


@pytest.mark.parametrize(
    "n, nbad, ok", [(4, 1, True), (10, 1, True), (10, 2, False), (20, 2, True), (20, 3, False), (11, 2, True)]
)
def test_bool_ratio(n, nbad, ok):
    m = model_of(T.TENSOR_BOOL8, dims=(n,))
    e = np.zeros(n, bool)
    a = e.copy()
    a[:nbad] = True
    assert compare(m, [e], [a], criteria=C.MEDIUM).passed is ok  # allowed ceil(0.1*n)


# ---------------------------------------------------------------------------------------
# Ignored outputs, counts, shapes, dtypes, unsupported types.
# ---------------------------------------------------------------------------------------


def test_ignored_outputs():
    m = model_of(T.TENSOR_INT32, T.TENSOR_FLOAT32)
    e = [arr([1, 2, 3, 4], T.TENSOR_INT32), np.zeros(4, np.float32)]
    a = [arr([9, 9, 9, 9], T.TENSOR_INT32), np.zeros(4, np.float32)]
    assert not compare(m, e, a).passed
    c = compare(m, e, a, ignored=[True, False])
    assert c.passed and "1 ignored" in c.message
    a[1] = np.ones(4, np.float32)
    c = compare(m, e, a, ignored=[True])  # a short list leaves the rest compared
    assert [mm.output for mm in c.mismatches] == [1]


def test_wrong_number_of_outputs():
    m = model_of(T.TENSOR_INT32, T.TENSOR_INT32)
    e = [arr([1, 2, 3, 4], T.TENSOR_INT32)] * 2
    c = compare(m, e, e[:1])
    assert not c.passed and c.mismatches[0].kind == "count"
    assert "actual outputs: got 1 arrays, the model has 2 outputs" in c.message
    c = compare(m, e[:1], e)
    assert c.mismatches[0].kind == "count" and c.message.startswith("expected outputs")
    assert compare(m, e, None).mismatches[0].kind == "count"


def test_shape_and_dtype_errors():
    m = model_of(T.TENSOR_FLOAT32, dims=(2, 2))
    e = np.zeros((2, 2), np.float32)
    c = compare(m, [e], [np.zeros(4, np.float32)])
    assert c.mismatches[0].kind == "shape" and "actual shape [4], expected [2, 2]" in c.message
    c = compare(m, [e], [np.zeros((2, 2), np.float64)])
    assert c.mismatches[0].kind == "dtype" and "float64" in c.message
    c = compare(m, [e], [[[0.0, 0.0], [0.0, 0.0]]])
    assert c.mismatches[0].kind == "dtype" and "list" in c.message
    # expected given as plain numbers (from a spec file) is fine
    assert compare(m, [[[0.0, 0.0], [0.0, 0.0]]], [e]).passed
    mq = model_of(T.TENSOR_QUANT8_ASYMM)
    c = compare(mq, [[1, 2, 3, 300]], [arr([1, 2, 3, 4], T.TENSOR_QUANT8_ASYMM)])
    assert c.mismatches[0].kind == "dtype"


def test_unsupported_type():
    m = model_of(T.TENSOR_QUANT8_SYMM_PER_CHANNEL)
    e = np.zeros(4, np.int8)
    c = compare(m, [e], [e])
    assert c.mismatches[0].kind == "unsupported_type"


def test_scalar_int32_output():
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [2, 3])
    r = b.output(T.INT32)
    b.operation(O.RANK, [x], [r])
    m = b.build()
    assert compare(m, [np.int32(2)], [np.array(2, np.int32)]).passed
    c = compare(m, [np.int32(2)], [np.array(4, np.int32)])
    assert c.mismatches[0].index == [] and "index []" in c.message


def test_several_mismatches_summarised():
    m = model_of(T.TENSOR_INT32, T.TENSOR_INT32)
    e = [arr([1, 2, 3, 4], T.TENSOR_INT32)] * 2
    a = [arr([5, 2, 3, 4], T.TENSOR_INT32)] * 2
    c = compare(m, e, a)
    assert [mm.output for mm in c.mismatches] == [0, 1]
    assert c.message.endswith("[+1 more mismatch(es)]")


def test_to_dict_is_json():
    m = model_of(T.TENSOR_FLOAT32)
    e = np.array([np.nan, 1, 2, 3], np.float32)
    c = compare(m, [e], [np.zeros(4, np.float32)])
    d = json.loads(json.dumps(c.to_dict(), allow_nan=False))
    assert d["passed"] is False and d["criteria"]["name"] == "default"
    assert d["criteria"]["float32"]["bias"] == "inf"
    assert d["mismatches"][0]["kind"] == "nan_expected"
    assert d["mismatches"][0]["index"] == [0]


# ---------------------------------------------------------------------------------------
# ULPs.
# ---------------------------------------------------------------------------------------


def test_ulp_distance():
    f = np.float32
    one = f(1.0)
    nxt = np.nextafter(one, f(2))
    e = np.array([1.0, 1.0, 0.0, -0.0, 1.0, np.nan, -1.0], f)
    a = np.array([1.0, nxt, -0.0, np.float32(1e-45), -1.0, 1.0, -1.0], f)
    d = ulp_distance(e, a)
    assert d[0] == 0 and d[1] == 1 and d[2] == 0 and d[3] == 1
    assert d[4] == 2 * 0x3F800000  # across zero
    assert d[5] == -1 and d[6] == 0
    h = np.float16
    eh = np.array([1.0, 0.0, 65504], h)
    ah = np.array([1.0 + 2**-10 * 3, -0.0, np.inf], h)
    assert ulp_distance(eh, ah).tolist() == [3, 0, 1]
    with pytest.raises(TypeError):
        ulp_distance(np.zeros(2), np.zeros(2))


def test_ulp_distance_is_the_count_of_values_between_for_every_fp16_pattern():
    # Oracle: the rank of each non-NaN fp16 value on the sorted line of distinct values (-0
    # and +0 share one rank); the distance is the difference of ranks.  Checked for every
    # pattern against a spread of others, NaNs included (-1).
    allv = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    finite = allv[~np.isnan(allv)]
    line = np.unique(finite.astype(np.float64))  # -0 and +0 are one float64 value
    rank = np.searchsorted(line, finite.astype(np.float64))
    rng = np.random.default_rng(403)  # fixed seed: the shifts are named in any failure
    for shift in rng.integers(1, 1 << 16, size=8):
        other = np.roll(allv, int(shift))
        got = ulp_distance(allv, other)
        nan = np.isnan(allv) | np.isnan(other)
        assert (got[nan] == -1).all(), shift
        keep = ~nan
        want = np.abs(
            np.searchsorted(line, other[keep].astype(np.float64)) - np.searchsorted(line, allv[keep].astype(np.float64))
        )
        assert np.array_equal(got[keep], want), shift
        assert got.dtype == np.int64
    assert rank.max() == line.size - 1


def test_identical_outputs_with_infinities_keep_the_bias_check():
    # A driver that returns the expected bits passes without the float64 passes, except
    # where an equal infinity reaches a checked bias: inf - inf is NaN there and that check
    # fails, as it always did (the shortcut must not change a verdict).
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, (64,))
    b.operation(O.RELU, [x], [b.output(T.TENSOR_FLOAT32, (64,))])
    m = b.build()
    e = np.linspace(-1, 1, 64).astype(np.float32)
    assert compare(m, [e], [e.copy()]).passed
    e_inf = e.copy()
    e_inf[5] = np.inf
    assert compare(m, [e_inf], [e_inf.copy()]).passed  # default criteria: no bias check on RELU
    crit = dataclasses.replace(default_criteria(m), float32=Tolerance(atol=1e-5, rtol=1e-5, bias=1e-3, mse=1e-3))
    crit = dataclasses.replace(crit, exact_where_defined=False, skip_invalid_fp=False)
    assert compare(m, [e], [e.copy()], criteria=crit).passed
    got = compare(m, [e_inf], [e_inf.copy()], criteria=crit)
    assert not got.passed and {mm.kind for mm in got.mismatches} == {"bias", "mse"}
    skipping = dataclasses.replace(crit, skip_invalid_fp=True)
    assert compare(m, [e_inf], [e_inf.copy()], criteria=skipping).passed  # the infinity is skipped


def test_relaxed_fp32_output_reports_fp32_ulps():
    m = model_of(T.TENSOR_FLOAT32, relaxed=True)
    e = np.ones(4, np.float32)
    a = e.copy()
    a[0] = 1.5
    assert compare(m, [e], [a]).mismatches[0].max_ulp == 2**22


# ---------------------------------------------------------------------------------------
# Random-graph sets.
# ---------------------------------------------------------------------------------------


def test_named_sets_numbers():
    assert C.STRICT.float32 == C.Tolerance(atol=1e-6, rtol=1e-6, bias=1e-7, mse=1e-10)
    assert C.MEDIUM.float16 == C.Tolerance(atol=1e-2, rtol=1e-2, bias=1e-3, mse=1e-5)
    assert C.RELAXED.quant8_asymm == C.Tolerance(atol=10, rtol=0, bias=1.5, mse=1.5)
    assert C.CONV.float32 == C.Tolerance(atol=2e-2, rtol=2e-2, bias=4e-4, mse=1e-5)
    assert C.SMALL_GRAPH.quant16_symm == C.Tolerance(atol=12, bias=2, mse=2)
    assert C.LARGE_GRAPH.float16 == C.Tolerance(atol=1.0, rtol=1.0, bias=1e-1, mse=5e-2)
    for s in C.RANDOM_GRAPH_SETS.values():
        assert s.int32 == C.Tolerance(atol=1) and s.bool8_ratio == 0.1
        assert s.quant8_asymm == s.quant8_asymm_signed == s.quant8_symm == s.quant16_asymm
    assert set(C.RANDOM_GRAPH_SETS) == {"Strict", "Medium", "Relaxed", "Conv", "SmallGraph", "LargeGraph"}


@pytest.mark.parametrize(
    "op, ver, name",
    [
        ("RESHAPE", "1.0", "Strict"),
        (O.ARGMAX, "1.2", "Strict"),
        ("TOPK_V2", "1.3", "Strict"),
        ("FILL", "1.3", "Strict"),
        (O.RANK, "1.3", "Strict"),
        ("LOGICAL_NOT", "1.2", "Strict"),
        ("ADD", "1.0", "Medium"),
        ("HARD_SWISH", "1.3", "Medium"),
        ("CAST", "1.2", "Medium"),
        ("DIV", "1.1", "Relaxed"),
        ("DIV", "1.2", "Relaxed"),
        ("DIV", "1.3", "Medium"),
        ("DIV", "V1_3", "Medium"),
        (int(O.SOFTMAX), "1.0", "Relaxed"),
        ("REDUCE_ANY", "1.2", "Relaxed"),
        ("HEATMAP_MAX_KEYPOINT", "1.2", "Relaxed"),
        ("CONV_2D", "1.0", "Conv"),
        ("TRANSPOSE_CONV_2D", "1.3", "Conv"),
    ],
)
def test_criteria_for_operation(op, ver, name):
    assert C.criteria_for_operation(op, ver).name == name


def test_criteria_for_operation_uncovered():
    with pytest.raises(KeyError, match="LSTM"):
        C.criteria_for_operation("LSTM")
    with pytest.raises(KeyError):
        C.criteria_for_operation("NOT_AN_OP")
    assert C.criteria_for_operation(O.WHILE, default=C.LARGE_GRAPH) is C.LARGE_GRAPH


def test_vectorised_on_large_output():
    m = model_of(T.TENSOR_FLOAT32, dims=(1_000_000,))
    rng = np.random.default_rng(0)
    e = rng.uniform(-2, 2, 1_000_000).astype(np.float32)
    a = e.copy()
    a[123_456] += 1
    c = compare(m, [e], [a])
    assert c.mismatches[0].flat_index == 123_456 and c.mismatches[0].num_bad == 1
    assert math.isclose(c.mismatches[0].max_abs_error, 1.0, rel_tol=1e-6)
