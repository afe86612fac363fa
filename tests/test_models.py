"""Built-in models (MobileNet-v1/v2-like, float and quant8) and the zoo cache: valid,
deterministic, quant8 close to float, and `nnconform models fetch --wheel` extracting only the
.tflite files of a wheel.  No network: the zoo download itself is never needed here."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

from nnconform.cli import main
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.ir.validation import validate_model
from nnconform.models import available_models, builtin, builtin_entries, zoo
from nnconform.reference.executor import Executor

BUILTINS = [(a, d) for a in builtin.ARCHITECTURES for d in builtin.DATA_TYPES]


@pytest.mark.parametrize("arch,dtype", BUILTINS, ids=[f"{a}_{d}" for a, d in BUILTINS])
def test_builtin_models_are_valid_and_small(arch, dtype):
    m = builtin.build(arch, dtype)
    validate_model(m)
    assert 15 <= len(m.main.operations) <= 40
    ops = {o.type for o in m.main.operations}
    assert {Op.CONV_2D, Op.DEPTHWISE_CONV_2D, Op.FULLY_CONNECTED, Op.SOFTMAX} <= ops
    if arch == "mobilenet_v2":
        assert Op.ADD in ops  # residual connections
    want = T.TENSOR_FLOAT32 if dtype == "float" else T.TENSOR_QUANT8_ASYMM
    assert all(m.main.operands[i].type == want for i in (*m.main.input_indexes, *m.main.output_indexes))


def test_builtin_weights_are_seeded():
    a = builtin._Net(False, None, builtin.SEED)
    builtin.ARCHITECTURES["mobilenet_v2"](a)
    b = builtin.build("mobilenet_v2", "float")
    for x, y in zip(a.b.build().main.operands, b.main.operands):
        if x.is_constant:
            assert np.array_equal(x.value, y.value)


@pytest.mark.parametrize("arch", list(builtin.ARCHITECTURES))
def test_quant8_follows_float(arch):
    f = builtin.build(arch, "float")
    q = builtin.build(arch, "quant8")
    agree = 0
    for seed in range(4):
        img = builtin.calibration_images(1, seed)[0]
        pf = Executor(f).run([img])[0][0]
        pq = Executor(q).run([builtin.quantize_input(img)])[0][0].astype(np.float64) / 256.0
        assert np.max(np.abs(pf - pq)) < 0.1
        agree += int(np.argmax(pf) == np.argmax(pq))
    assert agree >= 3


def test_classifier_outputs_are_distinct_enough_for_top5():
    m = builtin.build("mobilenet_v1", "float")
    p = Executor(m).run(builtin.example_inputs(m, 0))[0][0]
    top = np.sort(p)[::-1][:6]
    assert np.all(np.diff(top) < 0)


def _fake_wheel(path):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("mediapipe/__init__.py", "raise SystemExit('never imported')\n")
        z.writestr("mediapipe/modules/a/tiny_model.tflite", b"\x18\x00\x00\x00TFL3" + b"\x00" * 20)
        z.writestr("mediapipe/modules/b/other.tflite", b"\x18\x00\x00\x00TFL3" + b"\x01" * 20)


def test_fetch_from_a_wheel_extracts_only_tflite(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    wheel = tmp_path / "mediapipe-0.10.14-py3-none-any.whl"
    _fake_wheel(wheel)
    assert main(["models", "fetch", "--wheel", str(wheel)]) == 0
    d = zoo.zoo_dir()
    assert sorted(p.name for p in d.iterdir()) == ["MANIFEST.json", "other.tflite", "tiny_model.tflite"]
    manifest = json.loads((d / "MANIFEST.json").read_text())
    assert [e["name"] for e in manifest["models"]] == ["other", "tiny_model"]
    assert all(len(e["sha256"]) == 64 for e in manifest["models"])
    assert set(zoo.cached_models()) == {"other", "tiny_model"}
    entries = available_models()
    assert list(entries)[:4] == list(builtin_entries()) and entries["other"].kind == "zoo"


def test_fetch_errors_are_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    bad = tmp_path / "bad.whl"
    bad.write_bytes(b"not a zip")
    assert main(["models", "fetch", "--wheel", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot read the wheel" in err
    zoo.zoo_dir().mkdir(parents=True, exist_ok=True)
    (zoo.zoo_dir() / "MANIFEST.json").write_text("{broken")
    assert main(["models", "list"]) == 1
    assert "damaged manifest" in capsys.readouterr().err


def test_models_list_without_zoo(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty"))
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert "mobilenet_v2_quant8" in out and "not fetched" in out
