"""Compiled inner loops for the reference's slowest operations, when numba is installed.

``pip install nnconform[fast]`` adds numba, and ``NNCONFORM_JIT=1`` turns the kernels on
(``nnconform bench`` and the benchmark scripts turn them on themselves when numba is
installed).  They are off otherwise, in conformance and stress runs too: the first call of a
kernel in a process compiles it, seconds of CPU (a stress worker's random graph took 11 s
more with a cold cache, 2 s more with a warm one, than with numpy), and a time budget per
case would count that against the driver.  On, the loops below replace a numpy path only
where that path is far from what a compiled kernel does, and only on tensors big enough to
pay the call, except where the numpy path is a loop of calls whatever the size (the taps of
a depthwise convolution or an average pool, a softmax row): there any size pays.

The contract is the bits.  Each kernel does, per output element, the same IEEE operations
in the same order as the numpy path it stands in for: float32 products added one tap after
another, then the bias.  numba compiles without fast-math, so LLVM neither reassociates the
sums nor fuses a multiply and an add into an FMA (a fused one rounds once, not twice, and
would change the last bit).  tests/ops/test_jit.py compares both paths bit for bit on
seeded shapes, strides, dilations and signed zeros.

Why compiled loops, kernel by kernel:
- DEPTHWISE_CONV_2D adds fh*fw products per output in a fixed order, which numpy can only
  do as fh*fw passes over the whole output (each a multiply and an add through memory); a
  compiled loop adds three taps per pass over an output row held in L1.
- CONV_2D's patch matrix (im2col) of a filter wider than one pixel: numpy's strided copy
  runs an inner loop C values long (three for an image's first convolution) after a padded
  copy of the input; compiled, one pass from the unpadded input copies whole filter rows.
- Requantisation (every quantised convolution and FULLY_CONNECTED) is a dozen int64 numpy
  passes; compiled, one pass with the intermediates in registers.
- Quantised FULLY_CONNECTED on a few rows: numpy's exact product goes through float32 BLAS
  on 4-byte offsets of the weights (in K-slices summed in float64 when a partial sum could
  pass 2**24); compiled, an int32 dot product reads the stored weight bytes.
- Quantised 8-bit ADD/SUB/MUL read a 65,536-entry exact table; numpy first builds a uint16
  index array, the compiled gather makes each index in a register.
- Quantised 8-bit ADD/SUB on a CPU with byte permutes (AVX-512 VBMI): the gather is one
  dependent load an element; split into byte tables of each input and a carry
  (add_split.py), 64 elements take nine 256-byte lookups, each two permute instructions.
- The integer product of a quantised CONV_2D, on a CPU with AVX-512 BW: numpy's goes through
  float32 BLAS (exact below 2**24); compiled, int16 offsets multiply in pairs into int32
  sums (vpmaddwd, fused with the add into VNNI's vpdpwssd where the CPU has it), six rows
  by up to 64 channels of sums in registers: ~5x faster than OpenBLAS's AVX2 sgemm here.
- RESIZE_BILINEAR: numpy gathers four shifted copies of the input and makes eleven passes
  over the output (each weight product a pass of its own, to keep the order of the
  roundings); compiled, each output is the same four products and three sums in registers.
- AVERAGE_POOL_2D: numpy adds one window tap per call, fh*fw calls (~80 us for a
  MobileNet's global 4x4 pool of a 4x4x48 image); compiled, each window is summed in
  registers.
- Quantised SOFTMAX of a row (a classifier's logits): the numpy path is ~30 calls on a few
  hundred values plus a Python-int Newton reciprocal, ~100 us of call overhead for 1,000
  logits; compiled, one call does the row's sum, reciprocal and codes in int64 registers.
- TENSOR_FLOAT16 to float32 and back (nnconform.reference.arith.half): numpy converts half floats in
  software, 2-3 ns an element and ~30 ns a subnormal one; compiled, the CPU's conversion
  instructions do eight lanes at a time, at memory speed.
"""

from __future__ import annotations

import contextlib
import os

import numpy as np

# Elements (of work: outputs, or products / 16 for a dot product) from which a compiled
# kernel is worth its call (and, once per process, the import of numba: ~0.3 s).  The numpy
# paths cost microseconds below this.  A kernel may ask for more or less (``worth(n, at)``):
# requantisation pays at any size, where numpy's passes cost ~20-40 us of calls even for a
# classifier's ten outputs (the compiled call ~6-12 us).
MIN_ELEMENTS = 1 << 14

_state: dict[str, object] = {}


def enabled() -> bool:
    """True when NNCONFORM_JIT is 1 and numba imports (decided once per process)."""
    if "on" not in _state:
        if os.environ.get("NNCONFORM_JIT", "").strip() not in ("1", "true", "yes", "on"):
            _state["on"], _state["why"] = False, "NNCONFORM_JIT=1 turns the compiled kernels on"
        else:
            try:
                import numba

                _state["on"], _state["why"] = True, f"numba {numba.__version__}"
            except ImportError:
                _state["on"], _state["why"] = False, "numba not installed (pip install nnconform[fast])"
    return bool(_state["on"])


def turn_on_if_installed() -> None:
    """For benchmark scripts, where a compile in the warm-up costs nothing: NNCONFORM_JIT=1
    unless the environment says otherwise (driver hosts started later inherit it)."""
    if "NNCONFORM_JIT" not in os.environ:
        import importlib.util

        if importlib.util.find_spec("numba") is not None:
            os.environ["NNCONFORM_JIT"] = "1"
            _state.pop("on", None)  # decided again at the next call
            _state.pop("why", None)


@contextlib.contextmanager
def on_if_installed():
    """``turn_on_if_installed`` for one command in a longer-lived process (``nnconform bench``
    called from Python): the environment and the decision are restored afterwards, so
    nothing run later in the process or its children compiles unasked."""
    saved = os.environ.get("NNCONFORM_JIT")
    decided = {k: _state[k] for k in ("on", "why") if k in _state}
    turn_on_if_installed()
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("NNCONFORM_JIT", None)
        else:
            os.environ["NNCONFORM_JIT"] = saved
        _state.pop("on", None)
        _state.pop("why", None)
        _state.update(decided)


def describe() -> str:
    """One line for run headers: which kernels the reference uses and why."""
    if not enabled():
        return f"numpy only ({_state['why']})"
    permutes = "; 8-bit ADD/SUB in AVX-512 VBMI byte permutes" if byte_permutes() else ""
    return f"compiled kernels ({_state['why']}{permutes})"


def worth(elements: int, at: int | None = None) -> bool:
    """Whether to run a compiled kernel on this much work (``at``: the kernel's own
    threshold, scaled with MIN_ELEMENTS so that tests can move every threshold at once)."""
    floor = MIN_ELEMENTS if at is None else at * MIN_ELEMENTS // (1 << 14)
    return elements >= floor and enabled()


def _compile(name: str):
    kernel = _state.get(name)
    if kernel is None:
        from numba import njit

        global \
            _add_taps, \
            _tap_run, \
            _phases, \
            _pool_window, \
            _srdhm, \
            _rdbp, \
            _reciprocal, \
            _half_to_f32, \
            _f32_to_half, \
            _split_add_blocks, \
            _tile1, \
            _tile2, \
            _tile3, \
            _tile4
        if _add_taps is None:  # the kernels' helpers, compiled into them (module globals)
            _add_taps = njit(inline="always", cache=True)(_add_taps_py)
            _phases = njit(cache=True)(_phases_py)
            _tap_run = njit(inline="always", cache=True)(_tap_run_py)
            _pool_window = njit(inline="always", cache=True)(_pool_window_py)
            fp = _compiled_fixedpoint(njit)
            _srdhm, _rdbp = fp["_srdhm_int"], fp["_rdbp_int"]
            _reciprocal = fp["one_over_one_plus_x_for_x_in_0_1_int"]
            _half_to_f32, _f32_to_half = _make_half_casts()
            _split_add_blocks = _make_split_add_blocks()  # (compiled only where it is called)
            _tile1, _tile2, _tile3, _tile4 = _make_int16_tiles()  # (the same)
        # cache=True keeps the machine code beside this file (__pycache__), so a new worker
        # or driver host loads it instead of compiling again (~1 s a kernel).
        kernel = njit(cache=True, nogil=True)(_PY[name])
        _state[name] = kernel
    return kernel


def _add_taps_py(o, s0, s1, s2, w0, w1, w2, taps, first):
    # o[k] (+)= s0[k]*w0[k] + s1[k]*w1[k] + s2[k]*w2[k] for the first ``taps`` (1..3) terms,
    # each added in turn to the running sum ((o + t0) + t1) + t2, which is the order and
    # the roundings of one pass a tap; ``first``: the sum starts at t0 (no o).
    n = o.shape[0]
    if taps == 3:
        if first:
            for k in range(n):
                o[k] = (s0[k] * w0[k] + s1[k] * w1[k]) + s2[k] * w2[k]
        else:
            for k in range(n):
                o[k] = ((o[k] + s0[k] * w0[k]) + s1[k] * w1[k]) + s2[k] * w2[k]
    elif taps == 2:
        if first:
            for k in range(n):
                o[k] = s0[k] * w0[k] + s1[k] * w1[k]
        else:
            for k in range(n):
                o[k] = (o[k] + s0[k] * w0[k]) + s1[k] * w1[k]
    elif first:
        for k in range(n):
            o[k] = s0[k] * w0[k]
    else:
        for k in range(n):
            o[k] = o[k] + s0[k] * w0[k]


_add_taps = None


def _phases_py(x, pt, pb, pl, pr, sw):
    # The input x [N, H, W, C] surrounded by pt/pb rows and pl/pr columns of zeros, its
    # columns split into their sw stride phases: [SW, N, H', WQ, C], phase q holding padded
    # columns q, q + sw, ... and zeros past its last one.  The unpadded stride-1 input is
    # itself the one phase (no copy).  Each element is written once: a zero or a copy.
    n, h, w, c = x.shape
    hp, wp = h + pt + pb, w + pl + pr
    if sw == 1 and pt == 0 and pb == 0 and pl == 0 and pr == 0:
        return x.reshape(1, n, h, w, c)
    wq = (wp + sw - 1) // sw
    ph = np.empty((sw, n, hp, wq, c), x.dtype)
    for q in range(sw):
        for b in range(n):
            for r in range(hp):
                dst = ph[q, b, r]
                yy = r - pt
                if yy < 0 or yy >= h:
                    dst[:, :] = 0
                elif sw == 1:
                    dst[:pl, :] = 0
                    dst[pl : pl + w, :] = x[b, yy]
                    dst[pl + w :, :] = 0
                else:
                    for k in range(wq):
                        col = k * sw + q - pl
                        if col >= 0 and col < w:
                            dst[k, :] = x[b, yy, col]
                        else:
                            dst[k, :] = 0
    return ph


_phases = None


def _depthwise_py(x, w, out, sh, sw, dh, dw, bias, has_bias, zero_start, pt, pb, pl, pr):
    # x [N, H, W, C], the input before its zero padding (pt, pb, pl, pr), made into ph
    # [SW, N, H', WQ, C] (_phases): the padded input's columns split into their stride phases
    # (column x*sw + j*dw is column x + (j*dw)//sw of phase (j*dw)%sw; one phase, the input
    # itself, for stride 1), so the inputs a tap multiplies along an output row are one
    # contiguous run.  w [fh, fw, C], out [N, OH, OW, C], bias [C].  The padding is made
    # here rather than by numpy beforehand: a small operation (a MobileNet's 4x4 tail) paid
    # more for numpy's pad and phase calls than for its taps.
    # One output row (OW*C values) at a time stays in L1 while its fh*fw taps are added in
    # order, up to three taps of a filter row per pass (a third of the loads and stores of
    # one pass a tap, the same sums), each pass one vector loop over the row with the taps
    # and the bias tiled across it.  Runs are taken as slices and indexed from 0 by the
    # loop counter: numba then knows no index is negative and vectorises the loop (an
    # offset index costs a wrap-around check per element that stops it: 6x slower).
    ph = _phases(x, pt, pb, pl, pr, sw)
    n, oh, ow, c = out.shape
    fh, fw = w.shape[0], w.shape[1]
    row = ow * c
    wt = np.empty((fh, fw, row), w.dtype)
    bt = np.empty(row, w.dtype)
    for x in range(ow):
        for i in range(fh):
            for j in range(fw):
                wt[i, j, x * c : (x + 1) * c] = w[i, j]
        if has_bias:
            bt[x * c : (x + 1) * c] = bias
    for b in range(n):
        for y in range(oh):
            o = out[b, y].reshape(row)
            if zero_start:
                o[:] = 0
            for i in range(fh):
                iy = y * sh + i * dh
                for j0 in range(0, fw, 3):
                    taps = min(3, fw - j0)
                    first = i == 0 and j0 == 0 and not zero_start
                    j1, j2 = j0 + min(1, taps - 1), j0 + min(2, taps - 1)  # repeats are not used
                    s0 = _tap_run(ph, b, iy, j0 * dw, sw, c, row)
                    s1 = _tap_run(ph, b, iy, j1 * dw, sw, c, row)
                    s2 = _tap_run(ph, b, iy, j2 * dw, sw, c, row)
                    _add_taps(o, s0, s1, s2, wt[i, j0], wt[i, j1], wt[i, j2], taps, first)
            if has_bias:
                for k in range(row):
                    o[k] = o[k] + bt[k]


def _tap_run_py(ph, b, iy, col, sw, c, row):
    # The ``row`` inputs a tap at input column ``col`` multiplies along input row ``iy``.
    left = (col // sw) * c
    return ph[col % sw, b, iy].reshape(ph.shape[3] * c)[left : left + row]


_tap_run = None


def _requantize_py(acc, bias, m, off, rs, sign, lo, hi, narrow, out):
    # conv_common._fused_requantizer's formula, one element at a time in int64: acc [R, C]
    # (exact integers in any int or float dtype), per-channel bias, multiplier (left shift
    # folded in), offset (rounding and zero point), right shift and sign mask [C] -> out.
    # Written for AVX2, which has no int64 <-> float conversion, arithmetic shift or min/max
    # in vector form (a loop using any of them runs one element at a time, 2-3x slower):
    #  - ``narrow`` accumulators (every |acc| < 2**31, by the caller's bound) convert
    #    through int32;
    #  - the floor division by 2**rs is a logical shift of u + 2**62 (non-negative: |u| <
    #    2**62 by the requantiser's bounds) less 2**(62 - rs), the same integer;
    #  - the result (|v| < 2**30, also by those bounds) is clamped in int32.
    rows, c = acc.shape
    big = np.int64(1) << 62
    lo32, hi32 = np.int32(lo), np.int32(hi)
    for r in range(rows):
        a = acc[r]
        o = out[r]
        for k in range(c):
            if narrow:
                x = np.int64(np.int32(a[k]))
            else:
                x = np.int64(a[k])
            u = (x + bias[k]) * m[k] + (1 << 30)
            if u < 0:
                u = u + sign[k]
            u = u + off[k]
            v = np.int32(np.int64(np.uint64(u + big) >> np.uint64(rs[k])) - (big >> rs[k]))
            o[k] = min(max(v, lo32), hi32)


def _gather_pairs_py(table, a, b, out):
    # out[i] = table[a[i] * 256 + b[i]] over flat byte arrays: the index is made in a
    # register, not as a uint16 array numpy must write, widen and read back.
    for i in range(a.shape[0]):
        out[i] = table[(np.uint32(a[i]) << 8) | np.uint32(b[i])]


def _split_add_py(tables, table, a, b, out, zo, lo, hi):
    # add_split's formula on whole blocks of 64 (_split_add_blocks), the rest from the
    # exact 65,536-entry table.
    n = a.shape[0]
    blocks = n // 64
    _split_add_blocks(tables, a, b, out, blocks, zo, lo, hi)
    for i in range(blocks * 64, n):
        out[i] = table[(np.uint32(a[i]) << 8) | np.uint32(b[i])]


def _int16_product_py(a, k, b, c, rows, lanes):
    # c[r, :] = sum over t < k of a[r*k + t] * B[t, :], exactly, for rows r < rows (a multiple
    # of 6): a, the int16 patch rows laid end to end (k each, two zeros past the last);
    # b, int32 [ceil(k/2), 16 * blocks], each word the int16 pair (B[2p, n], B[2p+1, n]),
    # zeros past k and past the last channel; c, int32 [rows, channels], with ``lanes``
    # channels (1..16) in the last block of 16.  Tiles of 6 rows by 4, 3, 2 or 1 blocks.
    blocks = b.shape[1] // 16
    last = blocks - 1
    for m0 in range(0, rows, 6):
        j = 0
        while j + 4 <= blocks:
            _tile4(a, b, c, m0, j, k, lanes if j + 3 == last else 16)
            j += 4
        rest = blocks - j
        if rest == 3:
            _tile3(a, b, c, m0, j, k, lanes)
        elif rest == 2:
            _tile2(a, b, c, m0, j, k, lanes)
        elif rest == 1:
            _tile1(a, b, c, m0, j, k, lanes)


_tile1 = _tile2 = _tile3 = _tile4 = None  # _int16_product's 6-row tiles of 1..4 blocks of 16 channels


def _dot_offsets_py(xo, w, wz, out):
    # out[m, n] = sum over k of xo[m, k] * (w[n, k] - wz), exactly, in int32 (the caller
    # bounds every partial sum): the sum of xo * w over the stored weight bytes, widened in
    # registers, less wz times the row sum of xo.  Integer sums do not depend on the order.
    # xo is int16 (|x - xz| <= 255), so LLVM multiplies 16-bit lanes into 32-bit sums (AVX2
    # vpmaddwd); the products are taken in a loop of their own, which LLVM vectorises where
    # the same loop beside the zero-point correction stayed scalar (2-3x slower).
    rows, k = xo.shape
    units = w.shape[0]
    for m in range(rows):
        a = xo[m]
        o = out[m]
        for n in range(units):
            wr = w[n]
            acc = np.int32(0)
            for q in range(k):
                acc += np.int32(a[q]) * np.int32(wr[q])
            o[n] = acc
        total = np.int32(0)
        for q in range(k):
            total += np.int32(a[q])
        correction = np.int32(wz) * total
        for n in range(units):
            o[n] -= correction


def _compiled_fixedpoint(njit) -> dict:
    """fixedpoint's Python-int functions (SRDHM, wrap32, RDBP, rescale, the Newton
    reciprocal) compiled as they are, by name.  Each is compiled from a copy whose globals
    name the compiled helpers instead of the Python ones.  Their operands are int32 values,
    so int64 holds every product and >> is the same arithmetic shift."""
    import types

    from nnconform.reference.arith import fixedpoint

    names = ("_srdhm_int", "_wrap32_int", "_rdbp_int", "_rescale_int", "one_over_one_plus_x_for_x_in_0_1_int")
    scope = dict(vars(fixedpoint))
    for name in names:  # numba reads a callee from ``scope`` when its caller compiles
        f = getattr(fixedpoint, name)
        scope[name] = njit(cache=True)(types.FunctionType(f.__code__, scope, name, f.__defaults__))
    return {name: scope[name] for name in names}


def _softmax_rows_py(codes, tables, accumulation_bits, minus, lo, hi, out):
    # softmax._softmax_quant, row by row: codes [R, N] (uint8, order-preserving: a signed
    # input has its sign bit flipped); tables [3, 256] (exponential, term of the sum, used),
    # indexed by max - code.  The sum of the row's terms wraps to uint32 as the reference's
    # does; its leading zeros normalise it into [1, 2) for the reciprocal; each output is
    # exp * reciprocal rounded down to units of 1/256, less ``minus`` (128 for a signed
    # output), clamped; unused differences give lo.
    rows, n = codes.shape
    exps, terms, used = tables[0], tables[1], tables[2]
    by_diff = np.empty(256, np.int64)
    for r in range(rows):
        row = codes[r]
        o = out[r]
        top = np.int64(0)
        for k in range(n):
            top = max(top, np.int64(row[k]))
        total = np.int64(0)
        for k in range(n):
            total += terms[top - row[k]]
        total &= 0xFFFFFFFF
        bits = np.int64(0)
        t = total
        while t:
            bits += 1
            t >>= 1
        headroom_plus_one = 32 - bits
        bits_over_unit = accumulation_bits - headroom_plus_one
        recip = _reciprocal(((total << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31))
        shift = bits_over_unit + 31 - 8
        # an output depends only on its difference to the row's max: one code per
        # difference that occurs (at most 256), then a gather for a long row
        for d in range(top + 1):
            if used[d]:
                by_diff[d] = min(max(_rdbp(_srdhm(exps[d], recip), shift) - minus, lo), hi)
            else:
                by_diff[d] = lo
        for k in range(n):
            o[k] = by_diff[top - row[k]]


_srdhm = _rdbp = _reciprocal = None


def _bilinear_py(x, y0, y1, fy, x0, x1, fx, out):
    # resize.execute_bilinear, element by element: x [N, H, W, C] float32, source rows y0/y1
    # with weight fy [OH], columns x0/x1 with fx [OW] -> out [N, OH, OW, C], each output
    # ((a * (1-fy)) * (1-fx) + (b * fy) * (1-fx)) + (c * (1-fy)) * fx + (d * fy) * fx
    # in float32, the association and the roundings of the numpy expression.
    n, oh, ow, c = out.shape
    one = np.float32(1)
    for b in range(n):
        for i in range(oh):
            r0 = x[b, y0[i]]
            r1 = x[b, y1[i]]
            wy1 = fy[i]
            wy0 = one - wy1
            for j in range(ow):
                wx1 = fx[j]
                wx0 = one - wx1
                a = r0[x0[j]]
                bb = r1[x0[j]]
                cc = r0[x1[j]]
                d = r1[x1[j]]
                o = out[b, i, j]
                for k in range(c):
                    o[k] = (((a[k] * wy0) * wx0 + (bb[k] * wy1) * wx0) + (cc[k] * wy0) * wx1) + (d[k] * wy1) * wx1


def _pool_window_py(x, b, i, j, fh, fw, sh, sw, pt, pl, acc):
    # acc[:] = the sum over output (i, j)'s window in image b, from zero, taps in row-major
    # order, skipping those on the padding; returns how many taps are on the input.  The
    # numpy path adds a zero for each tap on the padding: the same sum for integers, and for
    # floats too, because a float sum begun at +0.0 is never -0.0 and x + 0.0 is x for any
    # other x (a NaN stays that NaN).
    h, w, c = x.shape[1], x.shape[2], x.shape[3]
    top, left = i * sh - pt, j * sw - pl
    y0, y1 = max(top, 0), min(top + fh, h)
    x0, x1 = max(left, 0), min(left + fw, w)
    acc[:] = 0
    for yy in range(y0, y1):
        for xx in range(x0, x1):
            row = x[b, yy, xx]
            for k in range(c):
                acc[k] += row[k]
    return (y1 - y0) * (x1 - x0)


_pool_window = None


def _average_pool_float_py(x, fh, fw, sh, sw, pt, pl, out):
    # pooling.execute_average_pool's float path per output: the float64 window sum of the
    # float32 values divided by the number of taps on the input, rounded to float32.
    n, oh, ow, c = out.shape
    acc = np.empty(c, np.float64)
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                count = np.float64(_pool_window(x, b, i, j, fh, fw, sh, sw, pt, pl, acc))
                o = out[b, i, j]
                for k in range(c):
                    o[k] = np.float32(acc[k] / count)


def _average_pool_quant_py(x, fh, fw, sh, sw, pt, pl, lo, hi, out):
    # The quantised path: the exact int64 window sum of the codes, then the reference's
    # division rounding half away from zero, clamped to [lo, hi].
    n, oh, ow, c = out.shape
    acc = np.empty(c, np.int64)
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                count = np.int64(_pool_window(x, b, i, j, fh, fw, sh, sw, pt, pl, acc))
                half = count // 2
                o = out[b, i, j]
                for k in range(c):
                    a = acc[k]
                    v = (a + half) // count if a >= 0 else -((half - a) // count)
                    o[k] = min(max(v, lo), hi)


def _im2col_py(x, out, sh, sw, dh, dw, pt, pl):
    # out[b, y, xo, i, j] = x[b, y*sh + i*dh - pt, xo*sw + j*dw - pl], zeros where that pixel
    # is in the padding: the patch matrix [N, OH, OW, FH, FW, C] of a convolution, made from
    # the unpadded input.  Both arrays are walked through flat views at unsigned offsets: a
    # view per filter row cost more than the copy, and a signed index a wrap-around check
    # per element that keeps LLVM from vectorising the copy (either way slower than numpy).
    # A filter row's taps over one input row, undilated and inside it, are one run of fw*C.
    n, h, w, c = x.shape
    oh, ow, fh, fw = out.shape[1], out.shape[2], out.shape[3], out.shape[4]
    src = x.reshape(x.size)
    dst = out.reshape(out.size)
    run = np.uint64(fw * c)
    cu = np.uint64(c)
    o = np.uint64(0)
    for b in range(n):
        for y in range(oh):
            for xo in range(ow):
                left = xo * sw - pl
                inside = dw == 1 and left >= 0 and left + fw <= w
                for i in range(fh):
                    iy = y * sh + i * dh - pt
                    if iy < 0 or iy >= h:
                        for k in range(run):
                            dst[o + k] = 0
                    elif inside:
                        s0 = np.uint64(((b * h + iy) * w + left) * c)
                        for k in range(run):
                            dst[o + k] = src[s0 + k]
                    else:
                        for j in range(fw):
                            ix = left + j * dw
                            d0 = o + np.uint64(j * c)
                            if ix >= 0 and ix < w:
                                s0 = np.uint64(((b * h + iy) * w + ix) * c)
                                for k in range(cu):
                                    dst[d0 + k] = src[s0 + k]
                            else:
                                for k in range(cu):
                                    dst[d0 + k] = 0
                    o += run


# ---- TENSOR_FLOAT16 conversions ---------------------------------------------------------
# numba has no float16 type, and numpy converts half floats in software at 2-3 ns an
# element: an fp16 ADD of 800,000 elements spent 10 of its 11 ms widening and narrowing.
# LLVM has the half type, and on a CPU with F16C (x86-64 since 2012) or on AArch64 it
# converts eight lanes an instruction, at memory speed.  The conversions are exact (widening)
# and round to nearest even (narrowing), as numpy's are; they differ from numpy only on a
# signalling NaN, whose quiet bit the instruction sets where numpy keeps the payload as it
# is.  So each loop also notes whether it met a NaN, and the caller then gives the NaN
# elements numpy's own conversion (tests/ops/test_half.py compares every half and every
# float32 class and rounding boundary with numpy).

_half_to_f32 = _f32_to_half = None  # LLVM fpext / fptrunc through the half type (_compile)


def _make_half_casts():
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def half_to_f32(typingctx, bits):
        if bits != types.uint16:
            return None

        def codegen(context, builder, signature, args):
            return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

        return types.float32(types.uint16), codegen

    @intrinsic
    def f32_to_half(typingctx, x):
        if x != types.float32:
            return None

        def codegen(context, builder, signature, args):
            return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))

        return types.uint16(types.float32), codegen

    return half_to_f32, f32_to_half


_split_add_blocks = None  # add_split's 64-element blocks in AVX-512 VBMI permutes (_compile)


def _make_split_add_blocks():
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def split_add_blocks(typingctx, tables, a, b, out, blocks, zo, lo, hi):
        # tables: uint8 [9 * 256] (add_split's rows); a, b, out: uint8 byte patterns;
        # zo, lo, hi: int16.  The loop is written here, not in numba, so that the 36 table
        # registers are loaded once, before it (numba cannot tell they do not alias out).
        sig = types.void(tables, a, b, out, types.intp, types.int16, types.int16, types.int16)

        def codegen(context, builder, signature, args):
            data = [context.make_array(signature.args[k])(context, builder, args[k]).data for k in range(4)]
            tp, ap, bp, op = data
            count, zo_v, lo_v, hi_v = args[4:]
            i32, i64 = ir.IntType(32), ir.IntType(64)
            vb, vw = ir.VectorType(ir.IntType(8), 64), ir.VectorType(ir.IntType(16), 64)
            name = "llvm.x86.avx512.vpermi2var.qi.512"  # (table 0..63, index, table 64..127)
            permute = builder.module.globals.get(name) or ir.Function(
                builder.module, ir.FunctionType(vb, [vb, vb, vb]), name=name
            )

            def load(p, offset):
                return builder.load(builder.bitcast(builder.gep(p, [offset]), vb.as_pointer()), align=1)

            def splat(v):
                u = builder.insert_element(ir.Constant(vw, ir.Undefined), v, ir.Constant(i32, 0))
                return builder.shuffle_vector(
                    u, ir.Constant(vw, ir.Undefined), ir.Constant(ir.VectorType(i32, 64), [0] * 64)
                )

            quarters = [[load(tp, ir.Constant(i64, t * 256 + q * 64)) for q in range(4)] for t in range(9)]
            zo_w, lo_w, hi_w = splat(zo_v), splat(lo_v), splat(hi_v)
            zero, eight = ir.Constant(vb, [0] * 64), ir.Constant(vw, [8] * 64)
            with cgutils.for_range(builder, count) as loop:
                i = builder.mul(loop.index, ir.Constant(loop.index.type, 64))
                va, vbb = load(ap, i), load(bp, i)
                # a byte's top bit picks the upper 128 entries; the permute reads the low 7
                upper_a, upper_b = builder.icmp_signed("<", va, zero), builder.icmp_signed("<", vbb, zero)

                def lookup(t, idx, upper):
                    low = builder.call(permute, [quarters[t][0], idx, quarters[t][1]])
                    high = builder.call(permute, [quarters[t][2], idx, quarters[t][3]])
                    return builder.select(upper, high, low)

                def word(t, idx, upper):
                    low = builder.zext(lookup(t, idx, upper), vw)
                    return builder.or_(low, builder.shl(builder.zext(lookup(t + 1, idx, upper), vw), eight))

                p2, rank = word(6, vbb, upper_b), lookup(8, vbb, upper_b)
                plus = builder.add(
                    builder.add(word(0, va, upper_a), p2),
                    builder.zext(builder.icmp_unsigned(">", rank, lookup(4, va, upper_a)), vw),
                )
                minus = builder.add(
                    builder.add(word(2, va, upper_a), p2),
                    builder.zext(builder.icmp_unsigned(">", rank, lookup(5, va, upper_a)), vw),
                )
                v = builder.select(builder.icmp_signed(">", plus, zo_w), plus, minus)
                v = builder.select(builder.icmp_signed("<", v, lo_w), lo_w, v)
                v = builder.select(builder.icmp_signed(">", v, hi_w), hi_w, v)
                builder.store(builder.trunc(v, vb), builder.bitcast(builder.gep(op, [i]), vb.as_pointer()), align=1)
            return context.get_dummy_value()

        return sig, codegen

    return split_add_blocks


def _make_int16_tiles():
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    def make(blocks: int):
        @intrinsic
        def tile(typingctx, a, b, c, m0, j, k, lanes):
            # 6 rows from m0 by ``blocks`` blocks of 16 channels from block j; see
            # _int16_product_py.  The 6 x blocks sums live in registers through the loop
            # over the k/2 pairs (allocas that LLVM promotes); the last block stores only
            # its first ``lanes`` channels.
            sig = types.void(a, b, c, types.intp, types.intp, types.intp, types.intp)

            def codegen(context, builder, signature, args):
                ap, bp, cp = [context.make_array(signature.args[n])(context, builder, args[n]).data for n in range(3)]
                m0_, j_, k_, lanes_ = args[3:]
                i32, i64 = ir.IntType(32), ir.IntType(64)
                vd, vw = ir.VectorType(i32, 16), ir.VectorType(ir.IntType(16), 32)
                name = "llvm.x86.avx512.pmaddw.d.512"
                madd = builder.module.globals.get(name) or ir.Function(
                    builder.module, ir.FunctionType(vd, [vw, vw]), name=name
                )
                c64 = lambda v: ir.Constant(i64, v)
                # row lengths of b and c: their second dimensions
                ldb = builder.extract_value(context.make_array(signature.args[1])(context, builder, args[1]).shape, 1)
                ldc = builder.extract_value(context.make_array(signature.args[2])(context, builder, args[2]).shape, 1)
                sums = [
                    [cgutils.alloca_once_value(builder, ir.Constant(vd, [0] * 16)) for q in range(blocks)]
                    for r in range(6)
                ]
                splat = ir.Constant(vd, [0] * 16)
                pairs = builder.udiv(builder.add(k_, c64(1)), c64(2))
                a_rows = [builder.mul(builder.add(m0_, c64(r)), k_) for r in range(6)]
                col0 = builder.mul(j_, c64(16))
                with cgutils.for_range(builder, pairs) as loop:
                    p = loop.index
                    row = builder.add(builder.mul(p, ldb), col0)
                    bq = [
                        builder.bitcast(
                            builder.load(
                                builder.bitcast(builder.gep(bp, [builder.add(row, c64(16 * q))]), vd.as_pointer()),
                                align=4,
                            ),
                            vw,
                        )
                        for q in range(blocks)
                    ]
                    two_p = builder.mul(p, c64(2))
                    for r in range(6):
                        # the pair a[r*k + 2p], a[r*k + 2p + 1] as one word (k may be odd)
                        word = builder.load(
                            builder.bitcast(builder.gep(ap, [builder.add(a_rows[r], two_p)]), i32.as_pointer()), align=2
                        )
                        v = builder.insert_element(ir.Constant(vd, ir.Undefined), word, ir.Constant(i32, 0))
                        v = builder.bitcast(builder.shuffle_vector(v, ir.Constant(vd, ir.Undefined), splat), vw)
                        for q in range(blocks):
                            builder.store(
                                builder.add(builder.load(sums[r][q]), builder.call(madd, [v, bq[q]])), sums[r][q]
                            )
                mask_ty = ir.VectorType(ir.IntType(1), 16)
                store_name = "llvm.masked.store.v16i32.p0"
                masked_store = builder.module.globals.get(store_name) or ir.Function(
                    builder.module, ir.FunctionType(ir.VoidType(), [vd, vd.as_pointer(), i32, mask_ty]), name=store_name
                )
                limit = builder.insert_element(
                    ir.Constant(vd, ir.Undefined), builder.trunc(lanes_, i32), ir.Constant(i32, 0)
                )
                limit = builder.shuffle_vector(limit, ir.Constant(vd, ir.Undefined), splat)
                mask = builder.icmp_signed("<", ir.Constant(vd, list(range(16))), limit)
                for r in range(6):
                    crow = builder.add(builder.mul(builder.add(m0_, c64(r)), ldc), col0)
                    for q in range(blocks):
                        ptr = builder.bitcast(builder.gep(cp, [builder.add(crow, c64(16 * q))]), vd.as_pointer())
                        if q < blocks - 1:
                            builder.store(builder.load(sums[r][q]), ptr, align=4)
                        else:
                            builder.call(masked_store, [builder.load(sums[r][q]), ptr, ir.Constant(i32, 4), mask])
                return context.get_dummy_value()

            return sig, codegen

        return tile

    return tuple(make(blocks) for blocks in (1, 2, 3, 4))


def _host_has(*features: str) -> bool:
    """Whether numba compiles for this x86-64 CPU (no NUMBA_CPU_NAME / NUMBA_CPU_FEATURES)
    and it has every one of ``features`` (LLVM's names: "avx512bw", ...)."""
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    from llvmlite import binding
    from numba.core import config

    have = binding.get_host_cpu_features().flatten().split(",")
    return config.CPU_NAME is None and config.CPU_FEATURES is None and all(f"+{f}" in have for f in features)


def _works(what: str, trial) -> bool:
    """Whether ``trial()`` (a hand-written kernel's first call, compiling it, on data with a
    known answer) returns True.  Those kernels are LLVM IR written here: another numba or
    LLVM may reject an intrinsic's name or types, and then the numpy path runs instead of
    the run failing (logged once)."""
    try:
        if trial():
            return True
        reason = "gave a wrong answer on its trial data"
    except Exception as e:
        reason = f"failed to compile or run ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
    import logging

    logging.getLogger(__name__).warning("compiled %s kernel %s; using the numpy path", what, reason)
    return False


def _int16_trial() -> bool:
    from nnconform.reference.kernels.int16_conv import packed_filter

    rng = np.random.default_rng(0)
    m, k, o = 7, 5, 21  # a row tail, an odd k, a channel tail
    x = rng.integers(-255, 256, (m, k)).astype(np.int16)
    w = rng.integers(-255, 256, (o, k)).astype(np.int16)
    a = np.zeros(12 * k + 2, np.int16)
    a[: m * k] = x.reshape(-1)
    got = int16_product(a, k, packed_filter(w.reshape(o, 1, 1, k)), o, 12)[:m]
    return bool(np.array_equal(got, x.astype(np.int64) @ w.astype(np.int64).T))


def _split_add_trial() -> bool:
    from nnconform.reference.kernels.add_split import evaluate

    rng = np.random.default_rng(0)
    tables = rng.integers(0, 256, (9, 256)).astype(np.uint8)
    tables[[1, 3, 7]] = rng.integers(-2, 2, (3, 256)).astype(np.int8).view(np.uint8)  # small int16 parts
    a = rng.integers(0, 256, 130).astype(np.uint8)
    b = rng.integers(0, 256, 130).astype(np.uint8)
    table = evaluate(tables, np.repeat(np.arange(256), 256), np.tile(np.arange(256), 256), 3, 0, 255)
    table = table.astype(np.uint8).reshape(256, 256)
    want = table.reshape(-1)[(a.astype(np.intp) << 8) | b]
    return bool(np.array_equal(split_add(tables, table, a, b, 3, 0, 255, np.uint8), want))


def int16_products() -> bool:
    """Whether the int16 product kernel runs here: AVX-512 BW (vpmaddwd on 512 bits), and
    its trial gives the integer product (the first call compiles it: ~1 s once, then
    numba's cache)."""
    if "int16" not in _state:
        _state["int16"] = _host_has("avx512f", "avx512bw") and _works("int16 product", _int16_trial)
    return bool(_state["int16"])


def byte_permutes() -> bool:
    """Whether numba compiles for this CPU and it has AVX-512 VBMI and BW (byte permutes of
    two 64-byte tables, byte masks), and the split ADD kernel's trial gives add_split's
    formula; LLVM cannot select the permute anywhere else, so the kernel is never compiled
    there."""
    if "vbmi" not in _state:
        _state["vbmi"] = _host_has("avx512f", "avx512bw", "avx512vbmi") and _works("split ADD", _split_add_trial)
    return bool(_state["vbmi"])


def half_instructions() -> bool:
    """Whether this CPU converts half floats in hardware (otherwise LLVM would call a
    runtime helper that numba does not link, and numpy's conversion is used)."""
    if "half" not in _state:
        import platform

        machine = platform.machine().lower()
        if machine in ("aarch64", "arm64"):
            _state["half"] = True
        elif machine in ("x86_64", "amd64"):
            from llvmlite import binding

            _state["half"] = "+f16c" in binding.get_host_cpu_features().flatten()
        else:
            _state["half"] = False
    return bool(_state["half"])


def _widen_half_py(h, out):
    # h: the halves' uint16 bit patterns; out: float32.  Returns whether a NaN went by.
    seen = False
    for i in range(h.shape[0]):
        r = _half_to_f32(h[i])
        out[i] = r
        seen |= r != r
    return seen


def _narrow_half_py(f, out):
    # f: float32; out: uint16 bit patterns of the halves.  Returns whether a NaN went by.
    seen = False
    for i in range(f.shape[0]):
        x = f[i]
        out[i] = _f32_to_half(x)
        seen |= x != x
    return seen


def _softmax_half_start_py(h, b, e):
    # A float16 softmax row's first steps: e = (float32(h) - max) * b, as numpy's row takes
    # them (IEEE subtract, then multiply; x * 1 is x).  Returns the max; a NaN or infinite
    # one (NaN or inf inputs) means the caller leaves the row to numpy.
    m = np.float32(-np.inf)
    seen = False
    for i in range(h.shape[0]):
        v = _half_to_f32(h[i])
        e[i] = v
        seen |= v != v
        m = v if v > m else m
    if seen:
        return np.float32(np.nan)
    for i in range(h.shape[0]):
        e[i] = (e[i] - m) * b
    return m


def _softmax_start_py(x, b, e):
    # A float32 softmax row's first steps as numpy's row takes them: e = x - max, then
    # e *= b unless b is 1 (a pass numpy's row skips; x * 1 is x anyway).  Returns the max;
    # a NaN or infinite one means the caller leaves the row to numpy.
    # (x and e: C-contiguous, of any rank: flat views here cost nothing, in Python ~0.2 us)
    xs, es = x.reshape(x.size), e.reshape(e.size)
    m = np.float32(-np.inf)
    seen = False
    for i in range(xs.shape[0]):
        v = xs[i]
        seen |= v != v
        m = v if v > m else m
    if seen:
        return np.nan
    if b == 1:
        for i in range(xs.shape[0]):
            es[i] = xs[i] - m
    else:
        for i in range(xs.shape[0]):
            es[i] = (xs[i] - m) * b
    return float(m)


def _scale_half_py(e, r, out):
    # out = float16(e * r): numpy's in-place multiply by the reciprocal of the sum, then its
    # narrowing.  Returns whether a NaN went by (the caller then uses numpy's conversion).
    seen = False
    for i in range(e.shape[0]):
        x = e[i] * r
        out[i] = _f32_to_half(x)
        seen |= x != x
    return seen


_PY = {
    "depthwise": _depthwise_py,
    "im2col": _im2col_py,
    "requantize": _requantize_py,
    "gather_pairs": _gather_pairs_py,
    "dot_offsets": _dot_offsets_py,
    "split_add": _split_add_py,
    "int16_product": _int16_product_py,
    "softmax_rows": _softmax_rows_py,
    "bilinear": _bilinear_py,
    "average_pool_float": _average_pool_float_py,
    "average_pool_quant": _average_pool_quant_py,
    "widen_half": _widen_half_py,
    "narrow_half": _narrow_half_py,
    "softmax_half_start": _softmax_half_start_py,
    "softmax_start": _softmax_start_py,
    "scale_half": _scale_half_py,
}


def depthwise(
    x: np.ndarray,
    w: np.ndarray,
    oh: int,
    ow: int,
    sh: int,
    sw: int,
    dh: int,
    dw: int,
    bias: np.ndarray | None,
    zero_start: bool,
    pads: tuple[int, int, int, int] = (0, 0, 0, 0),
) -> np.ndarray:
    """The compiled twin of ``depthwise_conv_2d._depthwise``: NHWC ``x`` [N, H, W, C] with
    ``pads`` (top, bottom, left, right) rows and columns of zeros around it, taps ``w``
    [fh, fw, C], both of one float dtype -> [N, OH, OW, C]; each output element is
    (0 +) tap_0 * w_0 + tap_1 * w_1 + ... (+ bias), taps in row-major filter order."""
    dtype = w.dtype
    x = x if x.flags.c_contiguous else np.ascontiguousarray(x)
    w = w if w.flags.c_contiguous else np.ascontiguousarray(w)
    out = np.empty((x.shape[0], oh, ow, x.shape[3]), dtype=dtype)
    b = np.zeros(0, dtype) if bias is None else np.ascontiguousarray(bias, dtype=dtype)
    pt, pb, pl, pr = pads
    _compile("depthwise")(x, w, out, sh, sw, dh, dw, b, bias is not None, zero_start, pt, pb, pl, pr)
    return out


def im2col(
    x: np.ndarray,
    fh: int,
    fw: int,
    oh: int,
    ow: int,
    sh: int,
    sw: int,
    dh: int,
    dw: int,
    pt: int,
    pl: int,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """The compiled twin of ``conv_common.im2col_padded`` for NHWC ``x`` before its zero
    padding (``pt`` rows above, ``pl`` columns left; the bottom and right padding is implied
    by the output size): [N, OH, OW, fh, fw, C] in ``x``'s dtype, the same values (written
    into ``out``, a contiguous array of that shape and dtype, when given)."""
    x = x if x.flags.c_contiguous else np.ascontiguousarray(x)
    if out is None:
        out = np.empty((x.shape[0], oh, ow, fh, fw, x.shape[3]), x.dtype)
    _compile("im2col")(x, out, sh, sw, dh, dw, pt, pl)
    return out


def requantize(acc: np.ndarray, bias: np.ndarray, params: tuple, lo: int, hi: int, dtype, narrow: bool) -> np.ndarray:
    """The compiled twin of conv_common's fused requantiser: accumulators [..., C] holding
    exact integers (float ones within 2**53) -> ``dtype``.  ``params``: the per-channel int64
    arrays [C] (multiplier with the left shift folded in, offset, right shift, sign mask)
    from ``requant_params``.  The sums acc + bias are taken in int64, which is exact where
    the numpy path's float addition is (the caller checks the bound); ``narrow``: every
    |acc| < 2**31 (the caller's bound), so the accumulators convert through int32."""
    c = acc.shape[-1]
    a2 = acc.reshape(-1, c) if acc.flags.c_contiguous else np.ascontiguousarray(acc).reshape(-1, c)
    out = np.empty(acc.shape, dtype=dtype)
    m, off, rs, sign = params
    _compile("requantize")(
        a2, bias.astype(np.int64), m, off, rs, sign, int(lo), int(hi), bool(narrow), out.reshape(-1, c)
    )
    return out


def requant_params(channels: int, m_eff, offset, rshift, sign_mask) -> tuple:
    """Scalar or per-channel requantisation parameters as contiguous int64 arrays [channels]
    (built once per requantiser and channel count: ~10 us each)."""
    return tuple(
        np.ascontiguousarray(np.broadcast_to(np.asarray(v, dtype=np.int64), (channels,)))
        for v in (m_eff, offset, rshift, sign_mask)
    )


def gather_pairs(table: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``table.reshape(-1)[a * 256 + b]`` for uint8 ``a`` and ``b`` of one shape (the byte
    views of 8-bit tensors) -> an array of ``a``'s shape in ``table``'s dtype."""
    out = np.empty(a.shape, table.dtype)
    _compile("gather_pairs")(
        np.ascontiguousarray(table).reshape(-1),
        np.ascontiguousarray(a).reshape(-1),
        np.ascontiguousarray(b).reshape(-1),
        out.reshape(-1),
    )
    return out


def split_add(
    tables: np.ndarray, table: np.ndarray, a: np.ndarray, b: np.ndarray, zo: int, lo: int, hi: int, dtype
) -> np.ndarray:
    """add_split.evaluate's result narrowed to ``dtype`` (uint8 or int8), for byte
    patterns ``a`` and ``b`` of one shape; ``tables``: add_split's [9, 256]; ``table``: the
    exact 65,536-entry table, for the elements past the last block of 64.  Only where
    ``byte_permutes()``."""
    out = np.empty(a.shape, dtype)
    _compile("split_add")(
        tables.reshape(-1),
        table.reshape(-1).view(np.uint8),
        np.ascontiguousarray(a).reshape(-1),
        np.ascontiguousarray(b).reshape(-1),
        out.reshape(-1).view(np.uint8),
        np.int16(zo),
        np.int16(lo),
        np.int16(hi),
    )
    return out


def int16_product(a: np.ndarray, k: int, b: np.ndarray, channels: int, rows: int) -> np.ndarray:
    """The exact int32 product [rows, channels] of ``rows`` int16 rows of ``k`` laid end to
    end in ``a`` (``rows`` a multiple of 6, two more zeros at the end) and the int16 matrix
    [k, channels] that ``b`` holds in pairs (see _int16_product_py).  Only where
    ``int16_products()``; the caller bounds every sum below 2**31."""
    out = np.empty((rows, channels), np.int32)
    lanes = channels - 16 * (b.shape[1] // 16 - 1)
    _compile("int16_product")(a, k, b, out, rows, lanes)
    return out


def dot_offsets(x: np.ndarray, xz: int, w: np.ndarray, wz: int) -> np.ndarray:
    """(x - xz) @ (w - wz).T in int32 for 8-bit ``x`` [M, K] and ``w`` [N, K] (the stored
    values; the caller checks that K * max|x - xz| * max|w - wz| and K * max|x - xz| * |wz|
    stay below 2**31)."""
    xo = x.astype(np.int16)
    xo -= np.int16(xz)
    out = np.empty((x.shape[0], w.shape[0]), np.int32)
    _compile("dot_offsets")(xo, np.ascontiguousarray(w), int(wz), out)
    return out


def softmax_rows(
    codes: np.ndarray, tables: np.ndarray, accumulation_bits: int, minus: int, lo: int, hi: int, dtype
) -> np.ndarray:
    """The compiled twin of ``softmax._softmax_quant`` on rows of order-preserving uint8
    ``codes`` [R, N]; ``tables``: int64 [3, 256], the (exps, terms, used) of
    ``softmax._exp_tables`` stacked (one array: each argument costs the call ~0.3 us)."""
    out = np.empty(codes.shape, dtype)
    _compile("softmax_rows")(
        codes if codes.flags.c_contiguous else np.ascontiguousarray(codes),
        tables,
        accumulation_bits,
        minus,
        lo,
        hi,
        out,
    )
    return out


def bilinear(x: np.ndarray, rows: tuple, cols: tuple) -> np.ndarray:
    """The compiled twin of the float path of ``resize.execute_bilinear``: float32 NHWC
    ``x``; ``rows``/``cols``: (low index, high index, float32 weight of the high one) per
    output row / column, as ``resize.bilinear_axis`` gives them."""
    (y0, y1, fy), (x0, x1, fx) = rows, cols
    out = np.empty((x.shape[0], y0.shape[0], x0.shape[0], x.shape[3]), np.float32)
    _compile("bilinear")(np.ascontiguousarray(x), y0, y1, fy, x0, x1, fx, out)
    return out


def average_pool(
    x: np.ndarray,
    fh: int,
    fw: int,
    sh: int,
    sw: int,
    pt: int,
    pl: int,
    out_h: int,
    out_w: int,
    bounds: tuple[int, int] | None = None,
    dtype=None,
) -> np.ndarray:
    """The compiled twin of ``pooling.execute_average_pool``'s window sums: NHWC ``x``
    (float32, or 8-bit codes with ``bounds`` and the output ``dtype``) -> [N, out_h, out_w, C]
    float32 averages before the activation, or the clamped codes."""
    x = np.ascontiguousarray(x)
    shape = (x.shape[0], out_h, out_w, x.shape[3])
    if bounds is None:
        out = np.empty(shape, np.float32)
        _compile("average_pool_float")(x, fh, fw, sh, sw, pt, pl, out)
    else:
        out = np.empty(shape, dtype)
        _compile("average_pool_quant")(x, fh, fw, sh, sw, pt, pl, bounds[0], bounds[1], out)
    return out


def widen_half(x: np.ndarray) -> np.ndarray:
    """``x.astype(np.float32)`` for a float16 ``x``, bit for bit (``half_instructions()``
    must be True)."""
    x = x if x.flags.c_contiguous else np.ascontiguousarray(x)
    out = np.empty(x.shape, np.float32)
    if _compile("widen_half")(x.view(np.uint16).reshape(-1), out.reshape(-1)):
        nan = np.isnan(x)  # numpy keeps a signalling NaN's payload as it is
        out[nan] = x[nan].astype(np.float32)
    return out


def narrow_half(x: np.ndarray) -> np.ndarray:
    """``x.astype(np.float16)`` for a float32 ``x``, bit for bit (``half_instructions()``
    must be True)."""
    x = x if x.flags.c_contiguous else np.ascontiguousarray(x)
    out = np.empty(x.shape, np.float16)
    if _compile("narrow_half")(x.reshape(-1), out.view(np.uint16).reshape(-1)):
        nan = np.isnan(x)
        out[nan] = x[nan].astype(np.float16)
    return out


def softmax_float_row(x: np.ndarray, b32: np.float32) -> np.ndarray | None:
    """``softmax._softmax_float_row`` of a float32 row ``x`` (any shape whose dimensions but
    the last are 1): the maximum, the subtraction and beta in one compiled pass (numpy's row
    makes two or three calls of them), then numpy's exp, pairwise sum and scaling.  None for
    a row holding a NaN or an infinity (the caller takes numpy's row)."""
    v = x if x.flags.c_contiguous else np.ascontiguousarray(x)
    e = np.empty(v.shape, np.float32)
    m = _compile("softmax_start")(v, b32, e)
    if m - m != 0:  # NaN or an infinity (a Python float: np.isfinite costs ~0.6 us)
        return None
    np.exp(e, out=e)
    e *= np.float32(1) / np.add.reduce(e, None, np.float32)
    return e


def softmax_half_row(x: np.ndarray, b32: np.float32) -> np.ndarray | None:
    """``softmax._softmax_float_row`` of a float16 row ``x`` (any shape whose dimensions but
    the last are 1), narrowed to float16: the same float32 operations, with the widening,
    maximum, subtraction and beta in one compiled pass and the scaling with the narrowing in
    another; numpy's exp and its pairwise sum in between.  None for a row holding a NaN or an
    infinity (the caller takes numpy's row: which NaN comes out follows numpy's own order)."""
    h = x if x.flags.c_contiguous else np.ascontiguousarray(x)
    e = np.empty(h.shape, np.float32)
    m = _compile("softmax_half_start")(h.view(np.uint16).reshape(-1), b32, e.reshape(-1))
    if not np.isfinite(m):
        return None
    np.exp(e, out=e)
    r = np.float32(1) / np.add.reduce(e, None, np.float32)
    out = np.empty(h.shape, np.float16)
    if _compile("scale_half")(e.reshape(-1), r, out.view(np.uint16).reshape(-1)):
        return None
    return out
