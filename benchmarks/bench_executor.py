"""Reference executor speed, side by side with onnxruntime (CPU) when it is installed.

    python benchmarks/bench_executor.py [--repeats N] [--threads T] [--clock wall|cpu]
                                        [-k TEXT] [--types fp32 fp16 quant8 int8]

Prints one row per case and data type (NNAPI's TENSOR_FLOAT32, TENSOR_FLOAT16,
TENSOR_QUANT8_ASYMM and TENSOR_QUANT8_ASYMM_SIGNED; the data are seeded, and the seed is
printed): median milliseconds per execution for the reference executor and for onnxruntime
running the same operation in the same type (NHWC/NCHW transposes are not timed on either
side), and the ratio.  Where onnxruntime has no CPU kernel for fp16, the row compares with
its fp32 on the same values and says so.  ``--threads`` applies to both sides: onnxruntime's intra-op threads and the
BLAS threads numpy uses (OPENBLAS_NUM_THREADS etc., unless already set in the environment;
they must be set before numpy is imported).  On a loaded machine wall-clock medians are noisy
and oversubscribed BLAS threads can stall small GEMMs; ``--clock cpu`` measures process CPU
time (time.process_time) instead.  The issue's goals: conv/depthwise/FC within 3x of onnxruntime,
elementwise within 1.5x, in every data type.  onnxruntime is optional (`pip install nnconform[onnx]`).
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
        os.environ.setdefault(
            _var, _threads_from_argv(sys.argv[1:])
        )  # nnconform.reference.kernels.blas honours the last

import numpy as np  # noqa: E402
from sidebyside import CLOCKS, interleaved, round_ratio  # noqa: E402

from nnconform.ir import ModelBuilder  # noqa: E402
from nnconform.ir import OperandType as T  # noqa: E402
from nnconform.ir import OperationType as Op  # noqa: E402
from nnconform.reference.executor import Executor  # noqa: E402

# ---- nnconform models --------------------------------------------------------------------

# The data types each case runs in: NNAPI's two floats and two 8-bit quantised types.
TYPES = ("fp32", "fp16", "quant8", "int8")
SEED = 0


class Typed:
    """What a case needs of its data type ``t``: the operand type, the stored values and, for
    the 8-bit types, zero points (given for uint8 storage; int8's sit 128 lower, as the same
    real values do: the filters' 128 becomes 0, symmetric, as in TFLite's int8 models)."""

    def __init__(self, t: str, rng: np.random.Generator):
        self.t, self.rng = t, rng
        self.quant = t in ("quant8", "int8")
        self.type = {
            "fp32": T.TENSOR_FLOAT32,
            "fp16": T.TENSOR_FLOAT16,
            "quant8": T.TENSOR_QUANT8_ASYMM,
            "int8": T.TENSOR_QUANT8_ASYMM_SIGNED,
        }[t]
        self.dtype = {"fp32": np.float32, "fp16": np.float16, "quant8": np.uint8, "int8": np.int8}[t]

    def zp(self, z: int) -> int:
        return z if self.t == "quant8" else z - 128

    def codes(self, shape) -> np.ndarray:
        u = self.rng.integers(0, 256, shape, dtype=np.uint8)
        return u if self.t == "quant8" else (u ^ 0x80).view(np.int8)

    def floats(self, shape, lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
        return self.rng.uniform(lo, hi, shape).astype(self.dtype)


def conv_case(t: Typed, depthwise: bool):
    n, h, w, c_in, c_out = 1, 112, 112, 32, (32 if depthwise else 64)
    b = ModelBuilder()
    w_shape = (1, 3, 3, c_out) if depthwise else (c_out, 3, 3, c_in)
    if t.quant:
        s_in, s_w, s_out = 0.05, 0.02, 0.1
        x_val, w_val = t.codes((n, h, w, c_in)), t.codes(w_shape)
        bias = t.rng.integers(-1000, 1000, c_out).astype(np.int32)
        x = b.input(t.type, [n, h, w, c_in], scale=s_in, zero_point=t.zp(128))
        wt = b.const(t.type, w_shape, w_val, scale=s_w, zero_point=t.zp(128))
        bs = b.const(T.TENSOR_INT32, [c_out], bias, scale=s_in * s_w)
        y = b.output(t.type, [n, h, w, c_out], scale=s_out, zero_point=t.zp(128))
    else:
        x_val, w_val, bias = t.floats((n, h, w, c_in)), t.floats(w_shape), t.floats(c_out)
        x = b.input(t.type, [n, h, w, c_in])
        wt = b.const(t.type, w_shape, w_val)
        bs = b.const(t.type, [c_out], bias)
        y = b.output(t.type, [n, h, w, c_out])
    # implicit padding SAME (1), stride 1, no activation
    if depthwise:
        b.operation(Op.DEPTHWISE_CONV_2D, [x, wt, bs, b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(0)], [y])
    else:
        b.operation(Op.CONV_2D, [x, wt, bs, b.i32(1), b.i32(1), b.i32(1), b.i32(0)], [y])
    return b.build(), [x_val], (w_val, bias)


def fc_case(t: Typed):
    b = ModelBuilder()
    if t.quant:
        x_val, w_val = t.codes((1, 1024)), t.codes((1000, 1024))
        bias = t.rng.integers(-1000, 1000, 1000).astype(np.int32)
        x = b.input(t.type, [1, 1024], scale=0.05, zero_point=t.zp(128))
        wt = b.const(t.type, [1000, 1024], w_val, scale=0.02, zero_point=t.zp(128))
        bs = b.const(T.TENSOR_INT32, [1000], bias, scale=0.05 * 0.02)
        y = b.output(t.type, [1, 1000], scale=0.5, zero_point=t.zp(128))
    else:
        x_val, w_val, bias = t.floats((1, 1024)), t.floats((1000, 1024)), t.floats(1000)
        x = b.input(t.type, [1, 1024])
        wt = b.const(t.type, [1000, 1024], w_val)
        bs = b.const(t.type, [1000], bias)
        y = b.output(t.type, [1, 1000])
    b.operation(Op.FULLY_CONNECTED, [x, wt, bs, b.i32(0)], [y])
    return b.build(), [x_val], (w_val, bias)


def add_case(t: Typed):
    dims = [1, 112, 112, 64]
    b = ModelBuilder()
    if t.quant:
        a_val, b_val = t.codes(dims), t.codes(dims)
        x = b.input(t.type, dims, scale=0.05, zero_point=t.zp(128))
        z = b.input(t.type, dims, scale=0.07, zero_point=t.zp(120))
        y = b.output(t.type, dims, scale=0.1, zero_point=t.zp(128))
    else:
        a_val, b_val = t.floats(dims), t.floats(dims)
        x, z, y = b.input(t.type, dims), b.input(t.type, dims), b.output(t.type, dims)
    b.operation(Op.ADD, [x, z, b.i32(0)], [y])
    return b.build(), [a_val, b_val], ()


def softmax_case(t: Typed):
    b = ModelBuilder()
    if t.quant:
        # NNAPI fixes a quantised SOFTMAX's output at scale 1/256, zero point 0 (int8: -128)
        x_val = t.codes((1, 1000))
        x = b.input(t.type, [1, 1000], scale=0.1, zero_point=t.zp(128))
        y = b.output(t.type, [1, 1000], scale=1 / 256, zero_point=t.zp(0))
    else:
        x_val = t.floats((1, 1000), -4, 4)
        x, y = b.input(t.type, [1, 1000]), b.output(t.type, [1, 1000])
    b.operation(Op.SOFTMAX, [x, b.f16(1.0) if t.t == "fp16" else b.f32(1.0)], [y])
    return b.build(), [x_val], ()


# ---- onnxruntime equivalents -------------------------------------------------------------


def ort_session(kind: str, t: str, inputs, params, threads: int):
    """An onnxruntime session computing case ``kind`` in data type ``t`` on the same data;
    raises when this onnxruntime cannot (fp16 kernels are missing from most CPU builds)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, ins = [], [], []
    quant = t in ("quant8", "int8")
    elem = {
        "fp32": TensorProto.FLOAT,
        "fp16": TensorProto.FLOAT16,
        "quant8": TensorProto.UINT8,
        "int8": TensorProto.INT8,
    }[t]
    zdtype = np.uint8 if t == "quant8" else np.int8

    def init(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))

    def qparams(prefix, scale, zp):
        init(prefix + "_s", np.array(scale, np.float32))
        init(prefix + "_z", np.array(zp if t == "quant8" else zp - 128, zdtype))
        return [prefix + "_s", prefix + "_z"]

    feeds = {}
    if kind in ("conv", "depthwise"):
        x = np.ascontiguousarray(inputs[0].transpose(0, 3, 1, 2))
        w, bias = params
        # NNAPI filter [out, kh, kw, in] (depthwise [1, kh, kw, out]) -> ONNX [out, in/group, kh, kw]
        w_onnx = w.transpose(3, 0, 1, 2) if kind == "depthwise" else w.transpose(0, 3, 1, 2)
        group = x.shape[1] if kind == "depthwise" else 1
        attrs = dict(pads=[1, 1, 1, 1], group=group, kernel_shape=[3, 3])
        ins.append(helper.make_tensor_value_info("x", elem, list(x.shape)))
        init("w", np.ascontiguousarray(w_onnx))
        init("b", bias)
        if quant:
            nodes.append(
                helper.make_node(
                    "QLinearConv",
                    ["x", *qparams("x", 0.05, 128), "w", *qparams("w", 0.02, 128), *qparams("y", 0.1, 128), "b"],
                    ["y"],
                    **attrs,
                )
            )
        else:
            nodes.append(helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs))
        feeds["x"] = x
    elif kind == "fc":
        w, bias = params
        ins.append(helper.make_tensor_value_info("x", elem, [1, 1024]))
        if quant:
            init("wt", np.ascontiguousarray(w.T))
            nodes.append(
                helper.make_node(
                    "QLinearMatMul",
                    ["x", *qparams("x", 0.05, 128), "wt", *qparams("w", 0.02, 128), *qparams("y", 0.5, 128)],
                    ["y"],
                )
            )
        else:
            init("w", w)
            init("b", bias)
            nodes.append(helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1))
        feeds["x"] = inputs[0]
    elif kind == "add":
        for n, v in zip("ab", inputs):
            ins.append(helper.make_tensor_value_info(n, elem, list(v.shape)))
            feeds[n] = v
        if quant:
            nodes.append(
                helper.make_node(
                    "QLinearAdd",
                    ["a", *qparams("a", 0.05, 128), "b", *qparams("b", 0.07, 120), *qparams("y", 0.1, 128)],
                    ["y"],
                    domain="com.microsoft",
                )
            )
        else:
            nodes.append(helper.make_node("Add", ["a", "b"], ["y"]))
    elif kind == "softmax":
        ins.append(helper.make_tensor_value_info("x", elem, [1, 1000]))
        feeds["x"] = inputs[0]
        if quant:
            nodes.append(
                helper.make_node(
                    "QLinearSoftmax",
                    ["x", *qparams("x", 0.1, 128), *qparams("y", 1 / 256, 0)],
                    ["y"],
                    axis=-1,
                    opset=13,
                    domain="com.microsoft",
                )
            )
        else:
            nodes.append(helper.make_node("Softmax", ["x"], ["y"], axis=-1))
    out = helper.make_tensor_value_info("y", elem, None)
    graph = helper.make_graph(nodes, kind, ins, [out], inits)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    sess.run(None, feeds)  # a missing kernel may only show at the first run
    return lambda: sess.run(None, feeds)


CASES = [
    ("CONV_2D 1x112x112x32 3x3x32->64", "conv", lambda q: conv_case(q, False)),
    ("DEPTHWISE_CONV_2D 1x112x112x32 3x3", "depthwise", lambda q: conv_case(q, True)),
    ("FULLY_CONNECTED 1x1024->1000", "fc", fc_case),
    ("ADD 1x112x112x64", "add", add_case),
    ("SOFTMAX 1x1000", "softmax", softmax_case),
]


def _ort_for(kind: str, t: str, inputs, params, threads: int):
    """(onnxruntime's call, the type it computes in, why not ``t``): the same type when
    onnxruntime runs it; for fp16 without CPU kernels, the same operation on the same values
    in fp32 (the nearest computation it has; the reference computes fp16 in float32 too)."""
    try:
        return ort_session(kind, t, inputs, params, threads), t, None
    except Exception as e:  # an ORT build without this kernel or contrib op: show why, keep going
        why = f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"
        if t != "fp16":
            return None, None, why
        widen = [np.asarray(v, dtype=np.float32) for v in inputs]
        return ort_session(kind, "fp32", widen, tuple(np.asarray(v, np.float32) for v in params), threads), "fp32", why


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads and BLAS threads (default 1)")
    p.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall: time.perf_counter; cpu: time.process_time (steadier on a loaded machine)",
    )
    p.add_argument("-k", dest="only", default="", help="only the cases whose name contains this text (e.g. DEPTHWISE)")
    p.add_argument(
        "--types",
        nargs="+",
        choices=TYPES,
        default=list(TYPES),
        metavar="TYPE",
        help=f"data types to run, of {', '.join(TYPES)} (default: all)",
    )
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
    from nnconform.reference.kernels import jit

    jit.turn_on_if_installed()  # compiled kernels when numba is there, unless NNCONFORM_JIT says
    print(f"reference: {jit.describe()}; load average {os.getloadavg()[0]:.1f}; data seed {SEED}")
    print(f"{'case':40s} {'type':7s} {'reference ms':>13s} {'onnxruntime ms':>15s} {'ratio':>7s}")
    notes = []
    for label, kind, make in CASES:
        if a.only not in label:
            continue
        for t in a.types:
            model, inputs, params = make(Typed(t, np.random.default_rng(SEED)))
            ex = Executor(model)
            ref = lambda: ex.run(inputs)
            ort_fn, ort_type = None, None
            if have_ort:
                ort_fn, ort_type, why = _ort_for(kind, t, inputs, params, a.threads)
                if why and ort_fn is None:
                    print(f"  (onnxruntime cannot run {kind} {t}: {why})")
                elif why:
                    notes.append(f"{kind} {t}: {why}")
            samples = interleaved([ref] if ort_fn is None else [ref, ort_fn], a.repeats, clock)
            ref_ms = statistics.median(samples[0])
            ort_ms = statistics.median(samples[1]) if ort_fn is not None else None
            ratio_x = round_ratio(samples[0], samples[1] if ort_fn is not None else None)
            ratio = f"{ratio_x:6.2f}x" if ratio_x else "-"
            ort_txt = f"{ort_ms:15.3f}" if ort_ms else f"{'-':>15s}"
            mark = "" if ort_type in (None, t) else f"  (onnxruntime in {ort_type})"
            print(f"{label:40s} {t:7s} {ref_ms:13.3f} {ort_txt} {ratio:>7s}{mark}", flush=True)
    if notes:
        print("onnxruntime has no CPU kernel for these; they compare with its fp32:")
        for n in notes:
            print(f"  {n}")


if __name__ == "__main__":
    main()
