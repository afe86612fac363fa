"""Spec files: bit-exact round trips (Hypothesis) and one-line errors for malformed input."""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import nnconform
from nnconform.errors import SpecError
from nnconform.ir import ZERO_POINT_RANGE, ChannelQuant, Model, ModelBuilder, type_info
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.ir.spec import (
    INLINE_MAX,
    SpecExample,
    SpecFile,
    decode_tensor,
    dump_spec,
    dumps_spec,
    encode_tensor,
    failure_meta,
    load_spec,
    loads_spec,
    model_from_dict,
    model_to_dict,
    replay_command,
)

QUANT = (
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
    T.TENSOR_QUANT8_SYMM,
    T.TENSOR_QUANT16_ASYMM,
    T.TENSOR_QUANT16_SYMM,
)
TENSOR_TYPES = (
    T.TENSOR_FLOAT32,
    T.TENSOR_FLOAT16,
    T.TENSOR_INT32,
    T.TENSOR_BOOL8,
    T.TENSOR_QUANT8_SYMM_PER_CHANNEL,
) + QUANT
SCALAR_TYPES = (T.FLOAT32, T.FLOAT16, T.INT32, T.UINT32, T.BOOL)
RELU_TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


# ---------------------------------------------------------------------------------------
# Comparison: identical models, bitwise-identical arrays
# ---------------------------------------------------------------------------------------


def same_array(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def same_float(a: float, b: float) -> bool:
    return np.float64(a).tobytes() == np.float64(b).tobytes()


def assert_same_model(m1: Model, m2: Model) -> None:
    assert m1.relax_fp32_to_fp16 == m2.relax_fp32_to_fp16
    assert len(m1.referenced) == len(m2.referenced)
    for s1, s2 in zip(m1.subgraphs(), m2.subgraphs()):
        assert (s1.name, s1.input_indexes, s1.output_indexes) == (s2.name, s2.input_indexes, s2.output_indexes)
        assert s1.operations == s2.operations
        assert len(s1.operands) == len(s2.operands)
        for o1, o2 in zip(s1.operands, s2.operands):
            assert (o1.type, o1.dimensions, o1.zero_point, o1.lifetime, o1.num_consumers, o1.name) == (
                o2.type,
                o2.dimensions,
                o2.zero_point,
                o2.lifetime,
                o2.num_consumers,
                o2.name,
            )
            assert same_float(o1.scale, o2.scale)
            if o1.channel_quant is None:
                assert o2.channel_quant is None
            else:
                assert o1.channel_quant.channel_dim == o2.channel_quant.channel_dim
                assert all(same_float(a, b) for a, b in zip(o1.channel_quant.scales, o2.channel_quant.scales))
                assert len(o1.channel_quant.scales) == len(o2.channel_quant.scales)
            if isinstance(o1.value, np.ndarray):
                assert same_array(o1.value, o2.value)
                assert not o2.value.flags.writeable
            else:
                assert o1.value == o2.value


def assert_same_spec(a: SpecFile, b: SpecFile) -> None:
    assert_same_model(a.model, b.model)
    assert len(a.examples) == len(b.examples)
    for e1, e2 in zip(a.examples, b.examples):
        assert (e1.name, tuple(e1.ignored), e1.expect_failure) == (e2.name, tuple(e2.ignored), e2.expect_failure)
        for v1, v2 in (
            (v1, v2)
            for l1, l2 in ((e1.inputs, e2.inputs), (e1.outputs, e2.outputs))
            for v1, v2 in zip(l1, l2, strict=True)
        ):
            assert (v1 is None and v2 is None) or same_array(v1, v2)
    assert set(a.meta) == set(b.meta)
    for k in a.meta:
        if k == "actual_outputs":
            assert all(same_array(x, y) for x, y in zip(a.meta[k], b.meta[k], strict=True))
        else:
            assert a.meta[k] == b.meta[k]


# ---------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------

small_dims = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)
any_dims = st.one_of(small_dims, st.just((9, 8)), st.just((70,)), st.just((3, 0)))  # 72/70 > INLINE_MAX
pos_float = st.floats(min_value=1e-30, max_value=1e30, allow_nan=False, allow_infinity=False)


def values_for(t: T, shape):
    return arrays(type_info(t).dtype, shape)


@st.composite
def quant_params(draw, t: T) -> dict:
    if t in QUANT:
        lo, hi = ZERO_POINT_RANGE.get(t, (0, 0))
        return {"scale": draw(pos_float), "zero_point": draw(st.integers(lo, hi))}
    if t == T.TENSOR_INT32:
        return {"scale": draw(st.one_of(st.just(0.0), pos_float))}
    return {}


@st.composite
def unknown_some(draw, dims):
    return tuple(0 if draw(st.booleans()) and draw(st.booleans()) else d for d in dims)


@st.composite
def models(draw) -> Model:
    b = ModelBuilder(name=draw(st.text(max_size=6)))
    t = draw(st.sampled_from(RELU_TYPES))
    q = draw(quant_params(t))
    dims = draw(unknown_some(draw(small_dims)))
    x = b.input(t, dims, **q)
    y = b.output(t, dims, **q)
    b.operation(Op.RELU, [x], [y])
    for _ in range(draw(st.integers(0, 4))):  # unused constants: every type, every encoding
        ct = draw(st.sampled_from(TENSOR_TYPES + SCALAR_TYPES))
        if type_info(ct).is_scalar:
            b.const(ct, (), draw(values_for(ct, ())), name=draw(st.text(max_size=4)))
            continue
        cd = draw(any_dims)
        kw = draw(quant_params(ct))
        if ct == T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
            cd = tuple(d or 1 for d in cd)
            ch = draw(st.integers(0, len(cd) - 1))
            kw["channel_quant"] = ChannelQuant(tuple(draw(st.lists(pos_float, min_size=cd[ch], max_size=cd[ch]))), ch)
        b.const(ct, cd, draw(values_for(ct, cd)), **kw)
    for _ in range(draw(st.integers(0, 2))):  # unused inputs, maybe with unknown dims
        it = draw(st.sampled_from(TENSOR_TYPES[:4] + SCALAR_TYPES))
        idims = () if type_info(it).is_scalar else draw(unknown_some(draw(small_dims)))
        b.input(it, idims)
    if draw(st.booleans()):
        sub = b.subgraph("sub")
        si, so = sub.input(T.TENSOR_FLOAT32, [2]), sub.output(T.TENSOR_FLOAT32, [2])
        sub.operation(Op.RELU, [si], [so])
        b.subgraph_ref(sub)
    model = b.build(relaxed=draw(st.booleans()))
    if draw(st.booleans()):  # spell num_consumers out
        uses = [0] * len(model.main.operands)
        for op in model.main.operations:
            for i in op.inputs:
                uses[i] += 1
        ops = tuple(dataclasses.replace(o, num_consumers=uses[i]) for i, o in enumerate(model.main.operands))
        model = dataclasses.replace(model, main=dataclasses.replace(model.main, operands=ops))
    return model


@st.composite
def io_value(draw, operand, allow_none: bool):
    if allow_none and draw(st.integers(0, 9)) == 0:
        return None
    shape = tuple(d or draw(st.integers(1, 3)) for d in operand.dimensions)
    return draw(values_for(operand.type, shape))


@st.composite
def specs(draw) -> SpecFile:
    model = draw(models())
    ops = model.main.operands
    examples = []
    for k in range(draw(st.integers(0, 3))):
        ins = [draw(io_value(ops[i], True)) for i in model.main.input_indexes]
        outs = [draw(io_value(ops[i], False)) for i in model.main.output_indexes]
        ignored = (
            tuple(draw(st.lists(st.booleans(), min_size=len(outs), max_size=len(outs)))) if draw(st.booleans()) else ()
        )
        examples.append(SpecExample(f"example_{k}", ins, outs, ignored, draw(st.booleans())))
    meta = {}
    if draw(st.booleans()):
        meta = failure_meta(
            seed=draw(st.integers(0, 2**63)),
            driver="broken",
            actual_outputs=[draw(io_value(ops[i], False)) for i in model.main.output_indexes],
            criterion={"kind": "fp32", "atol": 1e-5, "rtol": 5e-7},
            replay=replay_command("failures/x.json", "broken"),
            example="example_0",
        )
    return SpecFile(model, examples, meta)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(specs())
def test_round_trip(spec):
    text = dumps_spec(spec)
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    back = loads_spec(text)
    assert_same_spec(spec, back)
    assert dumps_spec(back) == text


@given(
    st.sampled_from(TENSOR_TYPES + SCALAR_TYPES).flatmap(
        lambda t: arrays(type_info(t).dtype, st.one_of(st.just(()), small_dims, st.just((65,))))
    )
)
@settings(max_examples=200, deadline=None)
def test_tensor_round_trip_is_bitwise(arr):
    enc = encode_tensor(arr)
    assert same_array(decode_tensor(json.loads(json.dumps(enc)), arr.dtype, None, "t"), arr)
    if arr.size > INLINE_MAX:
        assert isinstance(enc, dict) and "base64" in enc


def test_every_float16_is_exact_inline():
    every = np.arange(65536, dtype=np.uint16).view(np.float16)
    finite = every[np.isfinite(every)]
    for chunk in np.array_split(finite, len(finite) // INLINE_MAX + 1):
        enc = encode_tensor(chunk)
        assert isinstance(enc, list)
        assert same_array(decode_tensor(json.loads(json.dumps(enc)), np.float16, None, "t"), chunk)


def test_nan_and_inf_inline_words():
    arr = np.array([np.nan, np.inf, -np.inf, -0.0, 1.5], np.float32)
    enc = encode_tensor(arr)
    assert enc == ["nan", "inf", "-inf", -0.0, 1.5]
    assert same_array(decode_tensor(enc, np.float32, None, "t"), arr)


def test_nan_payload_goes_base64():
    arr = np.array([0x7F800001, 0xFFC00123], np.uint32).view(np.float32)  # signalling / payload NaNs
    enc = encode_tensor(arr)
    assert enc["dtype"] == "<f4"
    assert same_array(decode_tensor(enc, np.float32, None, "t"), arr)


def test_empty_tensor_keeps_its_shape():
    arr = np.zeros((0, 3), np.int32)
    enc = encode_tensor(arr)
    assert enc == {"shape": [0, 3], "values": []}
    assert same_array(decode_tensor(enc, np.int32, None, "t"), arr)


def test_flat_list_against_known_dims():
    assert decode_tensor([1, 2, 3, 4, 5, 6], np.float32, (2, 3), "t").shape == (2, 3)


# ---------------------------------------------------------------------------------------
# Files, provenance
# ---------------------------------------------------------------------------------------


def base_spec() -> SpecFile:
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [2, 3])  # 0
    b.const(T.TENSOR_QUANT8_ASYMM, [2, 3], np.arange(6), scale=0.5, zero_point=3)  # 1
    b.const(T.TENSOR_FLOAT16, [70], np.linspace(-1, 1, 70))  # 2 (base64)
    y = b.output(T.TENSOR_FLOAT32, [2, 3])  # 3
    b.const(T.TENSOR_BOOL8, [2], [True, False])  # 4
    b.operation(Op.RELU, [x], [y])
    x0 = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    return SpecFile(b.build(), [SpecExample("relu", [x0], [np.maximum(x0, 0)])])


def test_dump_and_load_file(tmp_path):
    spec = base_spec()
    path = tmp_path / "deep" / "case.json"
    dump_spec(spec, path)
    dump_spec(spec, path)  # replaces in place
    assert os.listdir(path.parent) == ["case.json"]  # no temporary left behind
    assert_same_spec(spec, load_spec(path))


def test_failure_meta_round_trip(tmp_path):
    spec = base_spec()
    actual = [np.full((2, 3), np.nan, np.float32)]
    path = tmp_path / "fail.json"
    spec.meta = failure_meta(
        seed=42,
        driver="mydrv",
        actual_outputs=actual,
        criterion={
            "kind": "fp32",
            "output": 0,
            "index": [0, 1],
            "expected": 1.0,
            "actual": np.float32(np.nan),
            "atol": 1e-5,
        },
        replay=replay_command(path, "mydrv"),
        example="relu",
    )
    dump_spec(spec, path)
    back = load_spec(path)
    assert back.meta["harness_version"] == nnconform.__version__
    assert back.meta["replay"] == f"nnconform replay {path} --driver mydrv"
    assert back.meta["criterion"]["actual"] == "nan"  # meta is strict JSON
    assert (back.meta["seed"], back.meta["driver"], back.meta["example"]) == (42, "mydrv", "relu")
    assert same_array(back.meta["actual_outputs"][0], actual[0])


def test_invalid_model_round_trips_without_validation():
    spec = base_spec()
    m = spec.model
    ops = list(m.main.operands)
    ops[1] = dataclasses.replace(ops[1], scale=0.0, type=16)
    bad = dataclasses.replace(m, main=dataclasses.replace(m.main, operands=tuple(ops)))
    spec = SpecFile(bad, [])
    text = dumps_spec(spec)
    assert '"type": 16' in text
    assert_same_model(bad, loads_spec(text, validate=False).model)
    with pytest.raises(SpecError, match=r"^model\.main\.operands\[1\]\.type: unknown operand type code 16"):
        loads_spec(text)


def test_model_dict_round_trip():
    m = base_spec().model
    assert_same_model(m, model_from_dict(json.loads(json.dumps(model_to_dict(m)))))


def test_load_spec_errors(tmp_path):
    with pytest.raises(SpecError, match=r"^file: cannot read \(No such file"):
        load_spec(tmp_path / "missing.json")
    p = tmp_path / "bad.json"
    p.write_text('{"format": "nnconform-spec", "version": 7}')
    with pytest.raises(SpecError) as info:
        load_spec(p)
    assert (
        str(info.value) == f"version: unsupported spec version 7 (this nnconform "
        f"{nnconform.__version__} reads version 1)"
    )
    p.write_bytes(b"\xff\xfe{")
    with pytest.raises(SpecError, match="^file: not UTF-8"):
        load_spec(p)


# ---------------------------------------------------------------------------------------
# Malformed input: one line, naming the field
# ---------------------------------------------------------------------------------------


def _at(doc, path):
    for k in path[:-1]:
        doc = doc[k]
    return doc, path[-1]


def set_(*path_value):
    *path, value = path_value

    def mutate(doc):
        d, k = _at(doc, path)
        d[k] = value

    return mutate


def del_(*path):
    def mutate(doc):
        d, k = _at(doc, path)
        del d[k]

    return mutate


OPS = ("model", "main", "operands")
EX = ("examples", 0)
B64_I32 = {"dtype": "<i4", "shape": [2, 3], "base64": base64.b64encode(bytes(24)).decode()}

MALFORMED = [
    # (id, mutation or raw text, field path, message fragment)
    ("bad-json", "{", "spec", "not valid JSON (Expecting property name"),
    ("truncated-json", lambda text: text[:-20], "spec", "not valid JSON"),
    ("not-object", "[1, 2]", "spec", "must be an object"),
    ("unknown-top-field", set_("extra", 1), "spec", "unknown field 'extra'"),
    ("wrong-format", set_("format", "onnx"), "format", "expected 'nnconform-spec', got 'onnx'"),
    ("missing-format", del_("format"), "format", "required field is missing"),
    ("wrong-version", set_("version", 2), "version", "unsupported spec version 2"),
    ("version-string", set_("version", "1"), "version", "must be an integer"),
    ("missing-model", del_("model"), "model", "required field is missing"),
    ("model-not-object", set_("model", []), "model", "must be an object"),
    ("missing-main", del_("model", "main"), "model.main", "required field is missing"),
    (
        "unknown-operand-type",
        set_(*OPS, 3, "type", "TENSOR_FLOAT33"),
        "model.main.operands[3].type",
        "unknown operand type 'TENSOR_FLOAT33'",
    ),
    ("operand-type-float", set_(*OPS, 0, "type", 3.5), "model.main.operands[0].type", "must be an operand type name"),
    (
        "unknown-lifetime",
        set_(*OPS, 0, "lifetime", "CONSTANT"),
        "model.main.operands[0].lifetime",
        "unknown lifetime 'CONSTANT'",
    ),
    ("missing-lifetime", del_(*OPS, 0, "lifetime"), "model.main.operands[0].lifetime", "required"),
    ("unknown-operand-field", set_(*OPS, 0, "zeropoint", 1), "model.main.operands[0]", "unknown field 'zeropoint'"),
    (
        "dims-not-list",
        set_(*OPS, 0, "dimensions", "2x3"),
        "model.main.operands[0].dimensions",
        "must be a list of integers",
    ),
    (
        "dim-not-int",
        set_(*OPS, 0, "dimensions", [2, "3"]),
        "model.main.operands[0].dimensions[1]",
        "must be an integer",
    ),
    ("scale-not-number", set_(*OPS, 1, "scale", "big"), "model.main.operands[1].scale", "must be a number"),
    ("zero-point-float", set_(*OPS, 1, "zero_point", 1.5), "model.main.operands[1].zero_point", "must be an integer"),
    ("name-not-string", set_(*OPS, 0, "name", 5), "model.main.operands[0].name", "must be a string"),
    (
        "num-consumers-string",
        set_(*OPS, 0, "num_consumers", "one"),
        "model.main.operands[0].num_consumers",
        "must be an integer",
    ),
    (
        "channel-quant-no-dim",
        set_(*OPS, 1, "channel_quant", {"scales": [1.0]}),
        "model.main.operands[1].channel_quant.channel_dim",
        "required",
    ),
    (
        "channel-quant-scales",
        set_(*OPS, 1, "channel_quant", {"scales": 1.0, "channel_dim": 0}),
        "model.main.operands[1].channel_quant.scales",
        "must be a list",
    ),
    (
        "value-too-few",
        set_(*OPS, 1, "value", [1, 2, 3, 4, 5]),
        "model.main.operands[1].value",
        "expected 6 values for dims [2, 3], got 5",
    ),
    (
        "value-wrong-shape",
        set_(*OPS, 1, "value", [[1, 2], [3, 4], [5, 6]]),
        "model.main.operands[1].value",
        "shape [3, 2] does not fit dims [2, 3]",
    ),
    ("value-ragged", set_(*OPS, 1, "value", [[1, 2, 3], [4, 5]]), "model.main.operands[1].value", "ragged"),
    (
        "value-element-string",
        set_(*OPS, 1, "value", ["a", 1, 2, 3, 4, 5]),
        "model.main.operands[1].value",
        "element 0 is 'a', expected an integer",
    ),
    (
        "value-uint8-range",
        set_(*OPS, 1, "value", [0, 1, 2, 3, 4, 256]),
        "model.main.operands[1].value",
        "value 256 is out of range for uint8",
    ),
    (
        "value-fp16-overflow",
        set_(*OPS, 2, "value", [1e6] * 70),
        "model.main.operands[2].value",
        "element 0 (1000000.0) does not fit float16",
    ),
    (
        "value-bad-float-word",
        set_(*OPS, 2, "value", ["nope"] * 70),
        "model.main.operands[2].value",
        "expected a number, 'nan', 'inf' or '-inf'",
    ),
    (
        "value-bool",
        set_(*OPS, 4, "value", [True, 2]),
        "model.main.operands[4].value",
        "element 1 is 2, expected true or false",
    ),
    ("value-not-tensor", set_(*OPS, 1, "value", {"data": [1]}), "model.main.operands[1].value", "unknown field 'data'"),
    (
        "values-count",
        set_(*OPS, 1, "value", {"shape": [2, 3], "values": [1]}),
        "model.main.operands[1].value.values",
        "expected 6 values for shape [2, 3], got 1",
    ),
    (
        "base64-garbage",
        set_(*OPS, 2, "value", "base64", "@@@@"),
        "model.main.operands[2].value.base64",
        "not valid base64",
    ),
    (
        "base64-length",
        set_(*OPS, 2, "value", "base64", base64.b64encode(bytes(10)).decode()),
        "model.main.operands[2].value.base64",
        "decodes to 10 bytes, shape [70] of <f2 needs 140",
    ),
    (
        "base64-not-string",
        set_(*OPS, 2, "value", "base64", 12),
        "model.main.operands[2].value.base64",
        "must be a string",
    ),
    (
        "base64-dtype-unknown",
        set_(*OPS, 2, "value", "dtype", "<f8"),
        "model.main.operands[2].value.dtype",
        "unknown dtype '<f8'",
    ),
    (
        "base64-dtype-mismatch",
        set_(*OPS, 2, "value", "dtype", "<i2"),
        "model.main.operands[2].value.dtype",
        "is <i2, the operand is stored as <f2",
    ),
    ("base64-missing-shape", del_(*OPS, 2, "value", "shape"), "model.main.operands[2].value.shape", "required"),
    (
        "base64-bad-shape",
        set_(*OPS, 2, "value", "shape", [-70]),
        "model.main.operands[2].value.shape",
        "must be a list of integers >= 0",
    ),
    (
        "unknown-operation-type",
        set_("model", "main", "operations", 0, "type", "CONV_3D"),
        "model.main.operations[0].type",
        "unknown operation type 'CONV_3D'",
    ),
    (
        "operation-inputs",
        set_("model", "main", "operations", 0, "inputs", 0),
        "model.main.operations[0].inputs",
        "must be a list of integers",
    ),
    (
        "operation-no-outputs",
        del_("model", "main", "operations", 0, "outputs"),
        "model.main.operations[0].outputs",
        "required",
    ),
    ("operands-not-list", set_(*OPS, {}), "model.main.operands", "must be a list"),
    ("referenced-not-list", set_("model", "referenced", 1), "model.referenced", "must be a list"),
    ("relax-not-bool", set_("model", "relax_fp32_to_fp16", "yes"), "model.relax_fp32_to_fp16", "must be true or false"),
    ("examples-not-list", set_("examples", {}), "examples", "must be a list"),
    ("example-no-name", del_(*EX, "name"), "examples[0].name", "required"),
    ("example-unknown-field", set_(*EX, "expected", []), "examples[0]", "unknown field 'expected'"),
    ("example-input-count", set_(*EX, "inputs", []), "examples[0].inputs", "the model has 1 inputs, got 0"),
    (
        "example-input-size",
        set_(*EX, "inputs", 0, [1, 2, 3, 4, 5]),
        "examples[0].inputs[0]",
        "expected 6 values for dims [2, 3], got 5",
    ),
    (
        "example-input-shape",
        set_(*EX, "inputs", 0, [[1, 2], [3, 4], [5, 6]]),
        "examples[0].inputs[0]",
        "shape [3, 2] does not fit dims [2, 3]",
    ),
    ("example-output-count", set_(*EX, "outputs", []), "examples[0].outputs", "the model has 1 outputs, got 0"),
    (
        "example-output-dtype",
        set_(*EX, "outputs", 0, B64_I32),
        "examples[0].outputs[0].dtype",
        "is <i4, the operand is stored as <f4",
    ),
    ("ignored-length", set_(*EX, "ignored", [True, False]), "examples[0].ignored", "one flag per output (1), got 2"),
    ("ignored-not-bool", set_(*EX, "ignored", [1]), "examples[0].ignored[0]", "must be true or false"),
    (
        "expect-failure-not-bool",
        set_(*EX, "expect_failure", "no"),
        "examples[0].expect_failure",
        "must be true or false",
    ),
    ("meta-not-object", set_("meta", []), "meta", "must be an object"),
    (
        "meta-actual-count",
        set_("meta", {"actual_outputs": [[1] * 6, [1] * 6]}),
        "meta.actual_outputs",
        "the model has 1 outputs, got 2",
    ),
    (
        "meta-actual-size",
        set_("meta", {"actual_outputs": [[1] * 5]}),
        "meta.actual_outputs[0]",
        "expected 6 values for dims [2, 3], got 5",
    ),
    # validate_model failures, mapped onto the spec's paths
    (
        "invalid-scale",
        set_(*OPS, 1, "scale", 0.0),
        "model.main.operands[1].scale",
        "must be > 0 for TENSOR_QUANT8_ASYMM",
    ),
    ("invalid-input-index", set_("model", "main", "input_indexes", [9]), "model.main.input_indexes[0]", "out of range"),
    ("invalid-operand-code", set_(*OPS, 0, "type", 16), "model.main.operands[0].type", "unknown operand type code 16"),
    (
        "invalid-operation-code",
        set_("model", "main", "operations", 0, "type", 106),
        "model.main.operations[0].type",
        "unknown operation type code 106",
    ),
    ("invalid-signature", set_(*OPS, 3, "type", "TENSOR_INT32"), "model.main.operations[0] (RELU) output 0", "must be"),
]


@pytest.mark.parametrize("mutation,where,fragment", [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_malformed(mutation, where, fragment):
    good = dumps_spec(base_spec())
    if isinstance(mutation, str):
        text = mutation
    elif mutation.__name__ == "<lambda>":
        text = mutation(good)
    else:
        doc = json.loads(good)
        mutation(doc)
        text = json.dumps(doc)
    with pytest.raises(SpecError) as info:
        loads_spec(text)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(f"{where}: "), msg
    assert fragment in msg, msg


def test_base_spec_is_valid_and_names_operands_as_in_the_table():
    doc = json.loads(dumps_spec(base_spec()))
    types = [o["type"] for o in doc["model"]["main"]["operands"]]
    assert types == ["TENSOR_FLOAT32", "TENSOR_QUANT8_ASYMM", "TENSOR_FLOAT16", "TENSOR_FLOAT32", "TENSOR_BOOL8"]
    assert "base64" in doc["model"]["main"]["operands"][2]["value"]
    loads_spec(json.dumps(copy.deepcopy(doc)))


def test_example_values_are_stored_in_the_operand_dtype():
    b = ModelBuilder()
    x = b.input(T.TENSOR_QUANT8_ASYMM, [3], scale=0.5, zero_point=0)
    y = b.output(T.TENSOR_QUANT8_ASYMM, [3], scale=0.5, zero_point=0)
    b.operation(Op.RELU, [x], [y])
    m = b.build()
    big = np.arange(100, dtype=np.int64) % 7  # a large int64 array holding uint8 data
    back = loads_spec(
        dumps_spec(SpecFile(m, [SpecExample("e", [[1, 2, 3]], [np.array([1, 2, 3])])], {"actual_outputs": [big[:3]]}))
    )
    assert same_array(back.examples[0].inputs[0], np.array([1, 2, 3], np.uint8))
    assert same_array(back.meta["actual_outputs"][0], big[:3].astype(np.uint8))
    with pytest.raises(SpecError, match=r"^examples\[0\]\.outputs\[0\]: a float64 value does not fit"):
        dumps_spec(SpecFile(m, [SpecExample("e", [[1, 2, 3]], [np.array([0.5, 1, 2])])]))
    with pytest.raises(SpecError, match=r"^examples\[0\]\.inputs\[0\]: a int64 value does not fit"):
        dumps_spec(SpecFile(m, [SpecExample("e", [[1, 2, 300]], [big[:3]])]))


def test_unstorable_values_are_one_line_errors():
    spec = base_spec()
    spec.examples[0].outputs[0] = np.array([{"x": 1}, None], dtype=object)
    with pytest.raises(SpecError, match=r"^examples\[0\]\.outputs\[0\]: a object value cannot be stored"):
        dumps_spec(spec)
    m = base_spec().model
    ops = list(m.main.operands)
    ops[1] = dataclasses.replace(ops[1], value=np.zeros((2, 3), np.float64))  # a VTS-style dtype mutation
    bad = dataclasses.replace(m, main=dataclasses.replace(m.main, operands=tuple(ops)))
    with pytest.raises(SpecError, match=r"^model\.main\.operands\[1\]\.value: float64 values cannot be stored"):
        dumps_spec(SpecFile(bad, []))
