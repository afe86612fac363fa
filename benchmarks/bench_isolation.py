"""What driver isolation costs, and whether shared memory would pay for large tensors.

    python benchmarks/bench_isolation.py                     # vectors suite, full (several minutes)
    python benchmarks/bench_isolation.py -k "conv or add"    # a subset, for a quick look
    python benchmarks/bench_isolation.py --transfer-only
    python benchmarks/bench_isolation.py --bookkeeping      # pools' CPU cost per execution

1. The vectors suite on the reference driver, wall time of ``nnconform run`` (a subprocess, as a
   user runs it): in-process vs isolated (one driver host), and isolated with ``-n 2`` (two
   pytest-xdist workers, one host each).  Goals: isolated <= 1.3x in-process; -n 2 >= 1.7x
   faster than -n 1 (needs two free cores).
2. Moving one output of S bytes from a host to the harness: through the reply pipe (raw bytes
   after a JSON header, what nnconform did before pools) vs through a request pool
   (nnconform.isolation.pools: a reused sealed memfd segment the harness poisons and guards, the
   host maps and writes the output into, the harness checks the guard and copies the output
   out: it must own a fresh array either way).  Median of repeated round trips per size,
   4 KiB to 256 MiB.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from nnconform.isolation import hostproto as wire


def run_suite(extra: list[str], k: str | None) -> tuple[float, str]:
    with tempfile.TemporaryDirectory(prefix="bench-iso-") as d:
        cmd = [
            sys.executable,
            "-m",
            "nnconform",
            "run",
            "--driver",
            "reference",
            "--suite",
            "vectors",
            "--report-dir",
            d,
            "--seed",
            "1",
            *extra,
        ]
        if k:
            cmd += ["--", "-k", k]
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        last = [ln for ln in r.stdout.splitlines() if ln.startswith("nnconform: run ")]
        if r.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
        return wall, (last[-1] if last else "")


# ---- transfer: pipe vs shared memory ---------------------------------------------------------

_CHILD = r"""
import sys, numpy as np
from nnconform.isolation import hostproto as wire, pools
req, res, size = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
arr = np.random.default_rng(0).integers(0, 255, size, dtype=np.uint8)
maps = pools.HostMaps()
for _, op, args in wire.FrameReader(req).calls():
    if op == "quit":
        break
    if op == "pipe":
        bufs = []
        ref = wire.encode_array(arr, bufs)
        wire.write_frame(res, {"id": 1, "ok": ref}, bufs)
    else:
        p = args["pool"]
        ro, rw = maps._get(p["id"], p["path"], p["size"])
        np.frombuffer(rw, np.uint8, size, offset=p["offset"])[:] = arr  # the driver writes in place
        wire.write_frame(res, {"id": 1, "ok": {"pool": 0}})
"""


def transfer(size: int, repeats: int) -> tuple[float, float]:
    from nnconform.ir import Request, RequestArgument
    from nnconform.isolation import pools

    req_r, req_w = os.pipe()
    res_r, res_w = os.pipe()
    p = subprocess.Popen([sys.executable, "-c", _CHILD, str(req_r), str(res_w), str(size)], pass_fds=(req_r, res_w))
    os.close(req_r)
    os.close(res_w)
    wire.widen_pipe(req_w)
    wire.widen_pipe(res_r)
    reader = wire.FrameReader(res_r)
    pool_set = pools.PoolSet()
    request = Request((), (RequestArgument(),))
    spec = pools.OutSpec(np.dtype(np.uint8), (size,), size)
    out = {}
    for mode in ("pipe", "pool"):
        samples = []
        for _ in range(repeats + 2):
            t0 = time.perf_counter()
            if mode == "pipe":
                wire.send_call(req_w, wire.encode_call(1, mode, {}))
                header, bufs = reader.read()
                got = wire.decode_array(header["ok"], bufs)
            else:
                placement = pools.plan(request, [spec], odd=False)
                seg = pool_set.acquire(placement.total)
                pools.fill(seg.buf, placement, request)
                o = placement.outputs[0]
                pool = {"id": seg.id, "path": seg.path, "size": seg.size, "offset": o.offset}
                wire.send_call(req_w, wire.encode_call(1, mode, {"pool": pool}))
                header, bufs = reader.read()
                pools.check_guards(seg.buf, placement)
                got = pools.read_output(seg.buf, o, "|u1", [size])
                pool_set.release(seg)
            samples.append(time.perf_counter() - t0)
            assert got.size == size
        out[mode] = statistics.median(samples[2:]) * 1e3
    wire.send_call(req_w, wire.encode_call(0, "quit", {}))
    p.wait()
    pool_set.close()
    os.close(req_w)
    os.close(res_r)
    return out["pipe"], out["pool"]


def small_executions(n: int) -> list[tuple[str, float, float]]:
    """Per-execution wall time of requests through one reference host, pools on and off
    (alternating rounds in one process, so that load on the machine hits both alike)."""
    from nnconform.ir import ModelBuilder, Request
    from nnconform.ir import OperandType as T
    from nnconform.ir import OperationType as Op
    from nnconform.isolation import pools
    from nnconform.isolation.proxy import open_isolated

    rows = []
    device = open_isolated("reference")
    try:
        for dims in ((2, 3), (64, 64), (256, 256), (2048, 8192)):
            reps = n if dims[0] * dims[1] < (1 << 20) else 3  # the last: 64 MiB per tensor
            b = ModelBuilder()
            x, y = b.input(T.TENSOR_FLOAT32, list(dims)), b.input(T.TENSOR_FLOAT32, list(dims))
            z = b.output(T.TENSOR_FLOAT32, list(dims))
            b.operation(Op.ADD, [x, y, b.i32(0)], [z])
            model = b.build()
            pm = device.prepare(model)
            a = np.ones(dims, np.float32)
            times: dict[bool, list[float]] = {True: [], False: []}
            for _ in range(5):
                for enabled in (True, False):
                    pools.ENABLED = enabled
                    t0 = time.perf_counter()
                    for _ in range(reps):
                        pm.execute(Request.from_arrays(model, [a, a]))
                    times[enabled].append((time.perf_counter() - t0) / reps * 1e6)
            pools.ENABLED = True
            rows.append(
                (f"ADD {dims[0]}x{dims[1]} fp32", statistics.median(times[False]), statistics.median(times[True]))
            )
    finally:
        pools.ENABLED = True
        device.close()
    return rows


def bookkeeping(n: int) -> list[tuple[str, float]]:
    """CPU time (user + system, min of 7 rounds) of one execution's pool bookkeeping on both
    sides, no driver host and no pipe: plan, fill, the host's views (HostMaps.request, with its
    mprotect calls for guard pages), an in-place write, the checks and reading the output back.
    What pools add to every execution, measurable under load (wall times of whole round trips
    swing by 2x on the shared machine; CPU time of this loop by about 20 %)."""
    from nnconform.ir import ModelBuilder, Request
    from nnconform.ir import OperandType as T
    from nnconform.ir import OperationType as Op
    from nnconform.isolation import pools

    rows = []
    for dims in ((2, 3), (64, 64), (256, 256)):
        b = ModelBuilder()
        x, y = b.input(T.TENSOR_FLOAT32, list(dims)), b.input(T.TENSOR_FLOAT32, list(dims))
        z = b.output(T.TENSOR_FLOAT32, list(dims))
        b.operation(Op.ADD, [x, y, b.i32(0)], [z])
        model = b.build()
        a = np.ones(dims, np.float32)
        ps, maps = pools.PoolSet(), pools.HostMaps()
        reps = n if dims[0] < 256 else max(1, n // 7)
        rounds = []
        for _ in range(7):
            t0 = time.process_time()
            for _ in range(reps):
                req = Request.from_arrays(model, [a, a])
                pl = pools.plan(req, pools.output_specs(model, req), **ps.layout())
                seg = ps.acquire(pl.total)
                pools.fill(seg.buf, pl, req)
                _, regions = maps.request(req, pl.describe(seg))
                regions[0][0][...] = 1.0  # the driver writes its output in place
                del regions
                pools.check_inputs(seg.buf, pl)
                pools.check_guards(seg.buf, pl)
                o = pl.outputs[0]
                pools.unwritten(seg.buf, o, o.size)
                pools.read_output(seg.buf, o, "<f4", list(dims))
                ps.release(seg)
            rounds.append((time.process_time() - t0) / reps * 1e6)
        maps.forget([s.id for s in ps.free])
        ps.close()
        rows.append((f"ADD {dims[0]}x{dims[1]} fp32", min(rounds)))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-k", default=None, help="pytest -k expression to run a subset of the vectors")
    ap.add_argument("--transfer-only", action="store_true")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--bookkeeping", action="store_true", help="only the pools' per-execution CPU cost, no host")
    a = ap.parse_args()

    if a.bookkeeping:
        print("| pool bookkeeping of one execution, both sides, no host | CPU us |")
        print("|---|---:|")
        for what, us in bookkeeping(2000):
            print(f"| {what} | {us:.1f} |", flush=True)
        return 0

    print("| size | pipe ms | pool ms | pipe / pool |")
    print("|---:|---:|---:|---:|")
    for size in (4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20):
        pipe, pool = transfer(size, a.repeats if size < (16 << 20) else max(3, a.repeats // 4))
        print(f"| {size >> 10} KiB | {pipe:.3f} | {pool:.3f} | {pipe / pool:.2f}x |", flush=True)
    print()
    print("| one execution (two inputs, one output), reference host | pipe us | pools us | pools / pipe |")
    print("|---|---:|---:|---:|")
    for what, pipe, pool in small_executions(max(20, a.repeats * 5)):
        print(f"| {what} | {pipe:.0f} | {pool:.0f} | {pool / pipe:.2f} |", flush=True)
    if a.transfer_only:
        return 0

    print()
    print("| vectors suite, reference driver | wall s | vs in-process | rows |")
    print("|---|---:|---:|---|")
    base, line = run_suite(["--in-process"], a.k)
    print(f"| in-process | {base:.1f} | 1.00x | {line} |", flush=True)
    iso, line = run_suite([], a.k)
    print(f"| isolated (-n 1) | {iso:.1f} | {iso / base:.2f}x | {line} |", flush=True)
    two, line = run_suite(["-n", "2"], a.k)
    print(f"| isolated -n 2 | {two:.1f} | {two / base:.2f}x | {line} |", flush=True)
    print()
    print(
        f"isolated / in-process = {iso / base:.2f} (goal <= 1.3); -n 1 / -n 2 speed-up = {iso / two:.2f}x "
        f"(goal >= 1.7; {os.cpu_count()} cores)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
