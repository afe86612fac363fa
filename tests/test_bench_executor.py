"""benchmarks/bench_executor.py compares like with like: in every data type, each case's
onnxruntime graph computes what the reference computes (so a ratio in its table is the time
of the same operation), and the reference runs every case it times."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from nnconform.reference.executor import Executor

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_executor as be


@pytest.mark.parametrize("t", be.TYPES)
@pytest.mark.parametrize("label, kind, make", be.CASES, ids=[c[1] for c in be.CASES])
def test_the_benchmarks_onnxruntime_graph_computes_the_references_operation(label, kind, make, t):
    pytest.importorskip("onnxruntime", reason="the onnxruntime side needs the [onnx] extra")
    model, inputs, params = make(be.Typed(t, np.random.default_rng(be.SEED)))
    ref = Executor(model).run(inputs)[0]
    theirs = be.ort_session(kind, t, inputs, params, 1)()[0]
    if kind in ("conv", "depthwise"):
        theirs = theirs.transpose(0, 2, 3, 1)  # NCHW back to NNAPI's NHWC
    theirs = theirs.reshape(ref.shape)
    assert theirs.dtype == ref.dtype
    diff = np.abs(ref.astype(np.float64) - theirs.astype(np.float64))
    if t in ("quant8", "int8"):
        # onnxruntime rounds in float where NNAPI's kernels use fixed point: a code or two
        assert diff.max() <= 2 and diff.mean() < 0.5, (diff.max(), diff.mean())
        assert len(np.unique(ref)) > 5  # not a saturated, meaningless output
    else:
        span = float(np.abs(ref).max())
        rtol = 1e-3 if t == "fp16" else 1e-6
        assert diff.max() <= rtol * span, (diff.max(), span)


def test_every_type_has_its_own_operand_type_and_seeded_data():
    a = be.add_case(be.Typed("int8", np.random.default_rng(be.SEED)))
    b = be.add_case(be.Typed("int8", np.random.default_rng(be.SEED)))
    assert a[1][0].dtype == np.int8 and np.array_equal(a[1][0], b[1][0])
    types = {t: be.Typed(t, np.random.default_rng(0)).type.name for t in be.TYPES}
    assert types == {
        "fp32": "TENSOR_FLOAT32",
        "fp16": "TENSOR_FLOAT16",
        "quant8": "TENSOR_QUANT8_ASYMM",
        "int8": "TENSOR_QUANT8_ASYMM_SIGNED",
    }
