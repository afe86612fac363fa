"""nnconform import: .tflite -> NNAPI IR.  Round trips through the TFLite adapter's own writer
(built-in MobileNets, float and quant8, per-channel convolutions), unmapped operations named,
the missing-extra message, and the mediapipe zoo when it has been fetched."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert", reason="TFLite import needs the 'tflite' extra: pip install nnconform[tflite]")

from nnconform.cases.tflite_import import TfliteImportError, UnmappedOperations, import_tflite_bytes, seeded_inputs
from nnconform.cli import main
from nnconform.drivers.tflite import convert
from nnconform.drivers.tflite.builder import BuiltinOperator as B
from nnconform.drivers.tflite.builder import FlatModel, TensorType
from nnconform.ir import ChannelQuant, ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.ir.spec import load_spec
from nnconform.ir.validation import validate_model
from nnconform.models import builtin, zoo
from nnconform.reference.executor import Executor


def _round_trip(model):
    raw, _, _ = convert.to_tflite(model)
    res = import_tflite_bytes(raw, "rt.tflite")
    validate_model(res.model)
    return raw, res


@pytest.mark.parametrize("arch", list(builtin.ARCHITECTURES))
@pytest.mark.parametrize("dtype", builtin.DATA_TYPES)
def test_builtin_round_trip_is_bit_identical(arch, dtype):
    model = builtin.build(arch, dtype)
    raw, res = _round_trip(model)
    assert [o.name for o in res.model.main.operations] == [o.name for o in model.main.operations]
    x = builtin.example_inputs(model, 3)
    for a, b in zip(Executor(model).run(x), Executor(res.model).run(x)):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    import hashlib

    assert res.meta["sha256"] == hashlib.sha256(raw).hexdigest()
    assert res.meta["source"] == "rt.tflite"


def test_per_channel_conv_and_bias_scale():
    b = ModelBuilder()
    x = b.input(T.TENSOR_QUANT8_ASYMM_SIGNED, [1, 4, 4, 2], scale=0.5, zero_point=-3)
    w = b.const(
        T.TENSOR_QUANT8_SYMM_PER_CHANNEL, [3, 1, 1, 2], np.arange(6) - 3, channel_quant=ChannelQuant((0.1, 0.2, 0.3), 0)
    )
    bias = b.const(T.TENSOR_INT32, [3], [1, -2, 3])
    y = b.output(T.TENSOR_QUANT8_ASYMM_SIGNED, [1, 4, 4, 3], scale=0.25, zero_point=1)
    b.operation(Op.CONV_2D, [x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(1)], [y])
    model = b.build()
    _, res = _round_trip(model)
    conv = res.model.main.operations[0]
    f = res.model.main.operands[conv.inputs[1]]
    assert f.type == T.TENSOR_QUANT8_SYMM_PER_CHANNEL and f.channel_quant.scales == pytest.approx((0.1, 0.2, 0.3))
    assert res.model.main.operands[conv.inputs[2]].scale == 0.0
    xin = seeded_inputs(model, 1)
    assert np.array_equal(Executor(model).run(xin)[0], Executor(res.model).run(xin)[0])


def _flat_with(code: int, n_out_shape=(1, 4)) -> bytes:
    fm = FlatModel()
    sg = fm.subgraph("main")
    x = sg.tensor([1, 4], TensorType.FLOAT32)
    y = sg.tensor(list(n_out_shape), TensorType.FLOAT32)
    z = sg.tensor([1, 4], TensorType.FLOAT32)
    sg.op(code, [x], [y])
    sg.op(B.RELU, [y], [z])
    sg.op(code, [z], [sg.tensor([1, 4], TensorType.FLOAT32)])
    sg.set_io([x], [sg.sg.operators[-1].outputs[0]])
    return fm.to_bytes()


def test_unmapped_operations_are_named_with_counts():
    with pytest.raises(UnmappedOperations) as e:
        import_tflite_bytes(_flat_with(B.CUMSUM), "m.tflite")
    assert e.value.unmapped == {"CUMSUM": 2}
    assert "CUMSUM x2" in str(e.value) and "no NNAPI equivalent" in str(e.value)


def test_not_a_flatbuffer_is_one_line():
    with pytest.raises(TfliteImportError, match="not a TFLite flatbuffer"):
        import_tflite_bytes(b"hello world, not tflite", "x.tflite")
    with pytest.raises(TfliteImportError, match="damaged"):
        import_tflite_bytes(b"\x10\x00\x00\x00TFL3" + b"\xff" * 40, "x.tflite")


def test_cli_import_writes_a_valid_spec_with_source_and_hash(tmp_path, capsys):
    src = tmp_path / "v2.tflite"
    src.write_bytes(convert.to_tflite(builtin.build("mobilenet_v2", "quant8"))[0])
    out = tmp_path / "v2.spec.json"
    assert main(["import", str(src), "-o", str(out)]) == 0
    assert "NNAPI operation(s)" in capsys.readouterr().out
    spec = load_spec(out, validate=True)
    assert spec.meta["source"] == "v2.tflite" and len(spec.meta["sha256"]) == 64
    assert len(spec.examples) == 1
    assert main(["replay", str(out), "--driver", "reference", "--in-process"]) == 0


def test_cli_import_unmapped_and_bad_file(tmp_path, capsys):
    bad = tmp_path / "c.tflite"
    bad.write_bytes(_flat_with(B.CUMSUM))
    assert main(["import", str(bad), "-o", str(tmp_path / "c.json")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "CUMSUM x2" in err
    assert not (tmp_path / "c.json").exists()
    assert main(["import", str(tmp_path / "missing.tflite")]) == 1
    assert capsys.readouterr().err.count("\n") == 1


def test_without_the_tflite_extra_the_error_names_it(tmp_path):
    src = tmp_path / "m.tflite"
    src.write_bytes(b"\x00" * 16)
    code = (
        "import sys; sys.modules['ai_edge_litert'] = None\n"
        "from nnconform.cli import main\n"
        f"sys.exit(main(['import', {str(src)!r}]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.strip().count("\n") == 0
    assert "[tflite] extra" in proc.stderr and "Traceback" not in proc.stderr


def _zoo_or_skip() -> dict[str, Path]:
    try:
        models = zoo.cached_models()
    except zoo.ZooError as e:
        pytest.skip(str(e))
    if not models:
        pytest.skip(
            f"the mediapipe zoo is not in {zoo.zoo_dir()} (needs `nnconform models fetch`, i.e. network "
            "access to PyPI); CI does not download it"
        )
    return models


def test_zoo_models_import_or_name_their_unmapped_operations():
    models = _zoo_or_skip()
    from nnconform.cases.tflite_import import import_tflite

    imported, unmapped = [], {}
    for name, path in sorted(models.items()):
        try:
            res = import_tflite(path)
        except UnmappedOperations as e:
            unmapped[name] = e.unmapped
            continue
        validate_model(res.model)
        imported.append(name)
    assert imported, "no zoo model imported"
    for name, ops in unmapped.items():
        assert all(k.startswith(("CUSTOM:", "DENSIFY")) for k in ops), (name, ops)


def test_zoo_model_matches_litert():
    models = _zoo_or_skip()
    from ai_edge_litert.interpreter import Interpreter

    from nnconform.cases.tflite_import import import_tflite

    path = models.get("hand_recrop")
    if path is None:
        pytest.skip("hand_recrop.tflite is not in the fetched zoo")
    res = import_tflite(path)
    x = seeded_inputs(res.model, 0)
    ours = Executor(res.model).run(x)
    it = Interpreter(model_path=str(path))
    it.allocate_tensors()
    for d, v in zip(it.get_input_details(), x):
        it.set_tensor(d["index"], v)
    it.invoke()
    for d, o in zip(it.get_output_details(), ours):
        np.testing.assert_allclose(it.get_tensor(d["index"]), o, atol=1e-3, rtol=1e-3)


def _dim(fmt, dense=0, segments=None, indices=None):
    from ai_edge_litert import schema_py_generated as S

    d = S.DimensionMetadataT()
    d.format, d.denseSize = fmt, dense
    if segments is not None:
        seg, idx = S.Int32VectorT(), S.Int32VectorT()
        seg.values, idx.values = list(segments), list(indices)
        d.arraySegmentsType, d.arraySegments = S.SparseIndexVector.Int32Vector, seg
        d.arrayIndicesType, d.arrayIndices = S.SparseIndexVector.Int32Vector, idx
    return d


def test_densify_csr_and_block_sparse():
    from ai_edge_litert import schema_py_generated as S

    from nnconform.cases.tflite_import import densify

    sp = S.SparsityParametersT()
    sp.traversalOrder, sp.blockMap = [0, 1], None
    sp.dimMetadata = [_dim(0, 2), _dim(1, segments=[0, 2, 3], indices=[1, 3, 0])]
    got = densify(np.array([1.0, 2.0, 3.0], np.float32), [2, 4], sp)
    np.testing.assert_array_equal(got, [[0, 1, 0, 2], [3, 0, 0, 0]])
    # 2x4 with 1x2 blocks along dim 1: rows 0 and 1 keep block 1 and block 0 respectively
    sp = S.SparsityParametersT()
    sp.traversalOrder, sp.blockMap = [0, 1, 2], [1]
    sp.dimMetadata = [_dim(0, 2), _dim(1, segments=[0, 1, 2], indices=[1, 0]), _dim(0, 2)]
    got = densify(np.array([5, 6, 7, 8], np.int8), [2, 4], sp)
    np.testing.assert_array_equal(got, [[0, 0, 5, 6], [7, 8, 0, 0]])


def test_fp16_model_round_trip():
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT16, [1, 5, 5, 2])
    w = b.const(T.TENSOR_FLOAT16, [3, 3, 3, 2], np.linspace(-1, 1, 54))
    bias = b.const(T.TENSOR_FLOAT16, [3], [0.5, -0.25, 0.0])
    y = b.output(T.TENSOR_FLOAT16, [1, 5, 5, 3])
    b.operation(Op.CONV_2D, [x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(3)], [y])
    model = b.build()
    _, res = _round_trip(model)
    assert res.model.main.operands[res.model.main.input_indexes[0]].type == T.TENSOR_FLOAT16
    assert "CONV_2D" in res.model.operation_names()
    xin = seeded_inputs(model, 2)
    np.testing.assert_array_equal(Executor(model).run(xin)[0], Executor(res.model).run(xin)[0])
