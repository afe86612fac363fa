"""Milliseconds per call of the reference executor's convolution family on the shapes the
speed goal names (CONV_2D 1x112x112x32 3x3x32->64 SAME, DEPTHWISE_CONV_2D 1x112x112x32 3x3,
FULLY_CONNECTED 1x1024->1000), fp32 and quant8.

    python benchmarks/bench_conv.py [--repeat N]

Each model is one operation with constant weights, run through nnconform.reference.executor.execute.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.executor import Executor


def _model(kind: str, quant: bool, rng: np.random.Generator):
    b = ModelBuilder()
    if quant:
        t, wt_t, bias_t = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM, T.TENSOR_INT32
        q_in, q_w, q_out = (
            dict(scale=0.02, zero_point=128),
            dict(scale=0.01, zero_point=120),
            dict(scale=0.1, zero_point=128),
        )
        q_b = dict(scale=0.02 * 0.01)

        def data(shape, _t=t):
            return rng.integers(0, 256, size=shape).astype(np.uint8)

        def bias(n):
            return rng.integers(-1000, 1000, size=n).astype(np.int32)
    else:
        t = wt_t = bias_t = T.TENSOR_FLOAT32
        q_in = q_w = q_out = q_b = {}

        def data(shape):
            return rng.standard_normal(shape).astype(np.float32)

        def bias(n):
            return rng.standard_normal(n).astype(np.float32)

    if kind == "CONV_2D 1x112x112x32 3x3x32->64":
        x = b.input(t, [1, 112, 112, 32], **q_in)
        w = b.const(wt_t, [64, 3, 3, 32], data((64, 3, 3, 32)), **q_w)
        bb = b.const(bias_t, [64], bias(64), **q_b)
        y = b.output(t, [1, 112, 112, 64], **q_out)
        b.operation(Op.CONV_2D, [x, w, bb, b.i32(1), b.i32(1), b.i32(1), b.i32(0)], [y])
        shape = (1, 112, 112, 32)
    elif kind == "DEPTHWISE 1x112x112x32 3x3":
        x = b.input(t, [1, 112, 112, 32], **q_in)
        w = b.const(wt_t, [1, 3, 3, 32], data((1, 3, 3, 32)), **q_w)
        bb = b.const(bias_t, [32], bias(32), **q_b)
        y = b.output(t, [1, 112, 112, 32], **q_out)
        b.operation(Op.DEPTHWISE_CONV_2D, [x, w, bb, b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(0)], [y])
        shape = (1, 112, 112, 32)
    else:
        x = b.input(t, [1, 1024], **q_in)
        w = b.const(wt_t, [1000, 1024], data((1000, 1024)), **q_w)
        bb = b.const(bias_t, [1000], bias(1000), **q_b)
        y = b.output(t, [1, 1000], **q_out)
        b.operation(Op.FULLY_CONNECTED, [x, w, bb, b.i32(0)], [y])
        shape = (1, 1024)
    return b.build(), data(shape)


KINDS = ("CONV_2D 1x112x112x32 3x3x32->64", "DEPTHWISE 1x112x112x32 3x3", "FC 1x1024->1000")


def bench(repeat: int = 20) -> list[tuple[str, str, float]]:
    rng = np.random.default_rng(0)
    rows = []
    for kind in KINDS:
        for quant in (False, True):
            model, x = _model(kind, quant, rng)
            ex = Executor(model)
            ex.run([x])  # warm-up (imports, BLAS threads)
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                ex.run([x])
                times.append(time.perf_counter() - t0)
            rows.append((kind, "quant8" if quant else "fp32", 1e3 * float(np.median(times))))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    a = ap.parse_args()
    rows = bench(a.repeat)
    print(f"{'operation':34s} {'type':7s} {'ms/call (median)':>16s}")
    for kind, t, ms in rows:
        print(f"{kind:34s} {t:7s} {ms:16.2f}")


if __name__ == "__main__":
    main()
