"""Reference executor speed, side by side with onnxruntime (CPU) when it is installed.

    python benchmarks/bench_executor.py [--repeats N] [--threads T] [--clock wall|cpu]

Prints one row per case: median milliseconds per execution for the reference executor and for
onnxruntime running the same operation (NHWC/NCHW transposes are not timed on either side),
and the ratio.  ``--threads`` applies to both sides: onnxruntime's intra-op threads and the
BLAS threads numpy uses (OPENBLAS_NUM_THREADS etc., unless already set in the environment;
they must be set before numpy is imported).  On a loaded machine wall-clock medians are noisy
and oversubscribed BLAS threads can stall small GEMMs; ``--clock cpu`` measures process CPU
time (time.process_time) instead.  The issue's goals: conv/depthwise/FC within 3x of onnxruntime fp32,
elementwise within 1.5x.  onnxruntime is optional (`pip install nnconform[onnx]`).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys


def _threads_from_argv(argv: list[str]) -> str:
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
    return "1"


if __name__ == "__main__":
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NNCONFORM_BLAS_THREADS"):
        os.environ.setdefault(_var, _threads_from_argv(sys.argv[1:]))   # nnconform.blas honours the last

import numpy as np  # noqa: E402

from nnconform.executor import Executor  # noqa: E402
from nnconform.ir import ModelBuilder, OperandType as T, OperationType as Op  # noqa: E402
from sidebyside import CLOCKS, interleaved, round_ratio  # noqa: E402

RNG = np.random.default_rng(0)


# ---- nnconform models --------------------------------------------------------------------

def conv_case(quant: bool, depthwise: bool):
    n, h, w, c_in, c_out = 1, 112, 112, 32, (32 if depthwise else 64)
    b = ModelBuilder()
    if quant:
        tq, s_in, s_w, s_out = T.TENSOR_QUANT8_ASYMM, 0.05, 0.02, 0.1
        x_val = RNG.integers(0, 256, (n, h, w, c_in), dtype=np.uint8)
        w_shape = (1, 3, 3, c_out) if depthwise else (c_out, 3, 3, c_in)
        w_val = RNG.integers(0, 256, w_shape, dtype=np.uint8)
        bias = RNG.integers(-1000, 1000, c_out).astype(np.int32)
        x = b.input(tq, [n, h, w, c_in], scale=s_in, zero_point=128)
        wt = b.const(tq, w_shape, w_val, scale=s_w, zero_point=128)
        bs = b.const(T.TENSOR_INT32, [c_out], bias, scale=s_in * s_w)
        y = b.output(tq, [n, h, w, c_out], scale=s_out, zero_point=128)
    else:
        x_val = RNG.uniform(-1, 1, (n, h, w, c_in)).astype(np.float32)
        w_shape = (1, 3, 3, c_out) if depthwise else (c_out, 3, 3, c_in)
        w_val = RNG.uniform(-1, 1, w_shape).astype(np.float32)
        bias = RNG.uniform(-1, 1, c_out).astype(np.float32)
        x = b.input(T.TENSOR_FLOAT32, [n, h, w, c_in])
        wt = b.const(T.TENSOR_FLOAT32, w_shape, w_val)
        bs = b.const(T.TENSOR_FLOAT32, [c_out], bias)
        y = b.output(T.TENSOR_FLOAT32, [n, h, w, c_out])
    # implicit padding SAME (1), stride 1, no activation
    if depthwise:
        b.operation(Op.DEPTHWISE_CONV_2D, [x, wt, bs, b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(0)], [y])
    else:
        b.operation(Op.CONV_2D, [x, wt, bs, b.i32(1), b.i32(1), b.i32(1), b.i32(0)], [y])
    return b.build(), [x_val], (w_val, bias)


def fc_case(quant: bool):
    b = ModelBuilder()
    if quant:
        x_val = RNG.integers(0, 256, (1, 1024), dtype=np.uint8)
        w_val = RNG.integers(0, 256, (1000, 1024), dtype=np.uint8)
        bias = RNG.integers(-1000, 1000, 1000).astype(np.int32)
        x = b.input(T.TENSOR_QUANT8_ASYMM, [1, 1024], scale=0.05, zero_point=128)
        wt = b.const(T.TENSOR_QUANT8_ASYMM, [1000, 1024], w_val, scale=0.02, zero_point=128)
        bs = b.const(T.TENSOR_INT32, [1000], bias, scale=0.05 * 0.02)
        y = b.output(T.TENSOR_QUANT8_ASYMM, [1, 1000], scale=0.5, zero_point=128)
    else:
        x_val = RNG.uniform(-1, 1, (1, 1024)).astype(np.float32)
        w_val = RNG.uniform(-1, 1, (1000, 1024)).astype(np.float32)
        bias = RNG.uniform(-1, 1, 1000).astype(np.float32)
        x = b.input(T.TENSOR_FLOAT32, [1, 1024])
        wt = b.const(T.TENSOR_FLOAT32, [1000, 1024], w_val)
        bs = b.const(T.TENSOR_FLOAT32, [1000], bias)
        y = b.output(T.TENSOR_FLOAT32, [1, 1000])
    b.operation(Op.FULLY_CONNECTED, [x, wt, bs, b.i32(0)], [y])
    return b.build(), [x_val], (w_val, bias)


def add_case(quant: bool):
    dims = [1, 112, 112, 64]
    b = ModelBuilder()
    if quant:
        a_val = RNG.integers(0, 256, dims, dtype=np.uint8)
        b_val = RNG.integers(0, 256, dims, dtype=np.uint8)
        x = b.input(T.TENSOR_QUANT8_ASYMM, dims, scale=0.05, zero_point=128)
        z = b.input(T.TENSOR_QUANT8_ASYMM, dims, scale=0.07, zero_point=120)
        y = b.output(T.TENSOR_QUANT8_ASYMM, dims, scale=0.1, zero_point=128)
    else:
        a_val = RNG.uniform(-1, 1, dims).astype(np.float32)
        b_val = RNG.uniform(-1, 1, dims).astype(np.float32)
        x = b.input(T.TENSOR_FLOAT32, dims)
        z = b.input(T.TENSOR_FLOAT32, dims)
        y = b.output(T.TENSOR_FLOAT32, dims)
    b.operation(Op.ADD, [x, z, b.i32(0)], [y])
    return b.build(), [a_val, b_val], ()


def softmax_case(quant: bool):
    b = ModelBuilder()
    if quant:
        x_val = RNG.integers(0, 256, (1, 1000), dtype=np.uint8)
        x = b.input(T.TENSOR_QUANT8_ASYMM, [1, 1000], scale=0.1, zero_point=128)
        y = b.output(T.TENSOR_QUANT8_ASYMM, [1, 1000], scale=1 / 256, zero_point=0)
    else:
        x_val = RNG.uniform(-4, 4, (1, 1000)).astype(np.float32)
        x = b.input(T.TENSOR_FLOAT32, [1, 1000])
        y = b.output(T.TENSOR_FLOAT32, [1, 1000])
    b.operation(Op.SOFTMAX, [x, b.f32(1.0)], [y])
    return b.build(), [x_val], ()


# ---- onnxruntime equivalents -------------------------------------------------------------

def ort_session(kind: str, quant: bool, inputs, params, threads: int):

    from onnx import TensorProto, helper, numpy_helper
    import onnxruntime as ort

    nodes, inits, ins = [], [], []
    f32, u8 = TensorProto.FLOAT, TensorProto.UINT8

    def init(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))

    def qparams(prefix, scale, zp):
        init(prefix + "_s", np.array(scale, np.float32))
        init(prefix + "_z", np.array(zp, np.uint8))
        return [prefix + "_s", prefix + "_z"]

    feeds = {}
    if kind in ("conv", "depthwise"):
        x = np.ascontiguousarray(inputs[0].transpose(0, 3, 1, 2))
        w, bias = params
        # NNAPI filter [out, kh, kw, in] (depthwise [1, kh, kw, out]) -> ONNX [out, in/group, kh, kw]
        w_onnx = w.transpose(3, 0, 1, 2) if kind == "depthwise" else w.transpose(0, 3, 1, 2)
        group = x.shape[1] if kind == "depthwise" else 1
        attrs = dict(pads=[1, 1, 1, 1], group=group, kernel_shape=[3, 3])
        ins.append(helper.make_tensor_value_info("x", u8 if quant else f32, list(x.shape)))
        init("w", np.ascontiguousarray(w_onnx))
        init("b", bias)
        if quant:
            nodes.append(helper.make_node("QLinearConv", ["x", *qparams("x", 0.05, 128), "w", *qparams("w", 0.02, 128),
                                                          *qparams("y", 0.1, 128), "b"], ["y"], **attrs))
        else:
            nodes.append(helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs))
        feeds["x"] = x
    elif kind == "fc":
        w, bias = params
        ins.append(helper.make_tensor_value_info("x", u8 if quant else f32, [1, 1024]))
        if quant:
            init("wt", np.ascontiguousarray(w.T))
            nodes.append(helper.make_node("QLinearMatMul", ["x", *qparams("x", 0.05, 128), "wt", *qparams("w", 0.02, 128),
                                                            *qparams("y", 0.5, 128)], ["y"]))
        else:
            init("w", w)
            init("b", bias)
            nodes.append(helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1))
        feeds["x"] = inputs[0]
    elif kind == "add":
        for n, v in zip("ab", inputs):
            ins.append(helper.make_tensor_value_info(n, u8 if quant else f32, list(v.shape)))
            feeds[n] = v
        if quant:
            nodes.append(helper.make_node("QLinearAdd", ["a", *qparams("a", 0.05, 128), "b", *qparams("b", 0.07, 120),
                                                         *qparams("y", 0.1, 128)], ["y"], domain="com.microsoft"))
        else:
            nodes.append(helper.make_node("Add", ["a", "b"], ["y"]))
    elif kind == "softmax":
        ins.append(helper.make_tensor_value_info("x", u8 if quant else f32, [1, 1000]))
        feeds["x"] = inputs[0]
        if quant:
            nodes.append(helper.make_node("QLinearSoftmax", ["x", *qparams("x", 0.1, 128), *qparams("y", 1 / 256, 0)],
                                          ["y"], axis=-1, opset=13, domain="com.microsoft"))
        else:
            nodes.append(helper.make_node("Softmax", ["x"], ["y"], axis=-1))
    out = helper.make_tensor_value_info("y", u8 if quant else f32, None)
    graph = helper.make_graph(nodes, kind, ins, [out], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return lambda: sess.run(None, feeds)


CASES = [
    ("CONV_2D 1x112x112x32 3x3x32->64", "conv", lambda q: conv_case(q, False)),
    ("DEPTHWISE_CONV_2D 1x112x112x32 3x3", "depthwise", lambda q: conv_case(q, True)),
    ("FULLY_CONNECTED 1x1024->1000", "fc", fc_case),
    ("ADD 1x112x112x64", "add", add_case),
    ("SOFTMAX 1x1000", "softmax", softmax_case),
]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--threads", type=int, default=1,
                   help="onnxruntime intra-op threads and BLAS threads (default 1)")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="wall: time.perf_counter; cpu: time.process_time (steadier on a loaded machine)")
    p.add_argument("-k", dest="only", default="", help="only the cases whose name contains this text (e.g. DEPTHWISE)")
    a = p.parse_args()
    if a.repeats < 1:
        p.error(f"--repeats must be at least 1, got {a.repeats}")
    if not any(a.only in label for label, _, _ in CASES):
        p.error(f"no case matches -k {a.only!r}; cases: {', '.join(label for label, _, _ in CASES)}")
    clock = CLOCKS[a.clock]
    try:
        import onnxruntime  # noqa: F401
        have_ort = True
    except ImportError:
        have_ort = False
        print("onnxruntime is not installed (pip install nnconform[onnx]): reference column only")
    from nnconform.ops import jit
    jit.turn_on_if_installed()      # compiled kernels when numba is there, unless NNCONFORM_JIT says
    print(f"reference: {jit.describe()}; load average {os.getloadavg()[0]:.1f}")
    print(f"{'case':40s} {'type':7s} {'reference ms':>13s} {'onnxruntime ms':>15s} {'ratio':>7s}")
    for label, kind, make in CASES:
        if a.only not in label:
            continue
        for quant in (False, True):
            model, inputs, params = make(quant)
            ex = Executor(model)
            ref = lambda: ex.run(inputs)   # noqa: E731
            ort_fn = None
            if have_ort:
                try:
                    ort_fn = ort_session(kind, quant, inputs, params, a.threads)
                except Exception as e:  # an ORT build without this contrib op: show why, keep going
                    print(f"  (onnxruntime cannot run {kind} {'quant8' if quant else 'fp32'}: "
                          f"{type(e).__name__}: {str(e).splitlines()[0][:80]})")
            samples = interleaved([ref] if ort_fn is None else [ref, ort_fn], a.repeats, clock)
            ref_ms = statistics.median(samples[0])
            ort_ms = statistics.median(samples[1]) if ort_fn is not None else None
            ratio_x = round_ratio(samples[0], samples[1] if ort_fn is not None else None)
            ratio = f"{ratio_x:6.2f}x" if ratio_x else "-"
            ort_txt = f"{ort_ms:15.3f}" if ort_ms else f"{'-':>15s}"
            print(f"{label:40s} {'quant8' if quant else 'fp32':7s} {ref_ms:13.3f} {ort_txt} {ratio:>7s}", flush=True)


if __name__ == "__main__":
    main()
