"""AVERAGE_POOL_2D, MAX_POOL_2D, L2_POOL_2D: 2-D pooling over a 4-D image tensor.

Signature (all three), explicit padding (10 or 11 inputs):
  0: input, rank 4, [batches, height, width, depth] (NHWC) or [batches, depth, height, width]
     (NCHW); zero batches allowed.
  1..4: INT32 padding left, right, top, bottom (each >= 0 and < the filter size on its axis)
  5, 6: INT32 stride width, stride height (> 0)
  7, 8: INT32 filter width, filter height (> 0)
  9: INT32 fused activation (0 NONE, 1 RELU, 2 RELU1, 3 RELU6)
  10: optional BOOL, true for NCHW
Implicit padding (7 or 8 inputs):
  0: input as above; 1: INT32 padding scheme (1 SAME, 2 VALID); 2, 3: INT32 stride width,
  height; 4, 5: INT32 filter width, height; 6: INT32 activation; 7: optional BOOL NCHW.
Output 0: same type, [batches, out_height, out_width, depth] in the input's layout, with
  out = (in - filter + stride + pad_head + pad_tail) // stride.

Types: AVERAGE_POOL_2D and MAX_POOL_2D take TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM
and TENSOR_QUANT8_ASYMM_SIGNED; L2_POOL_2D only the two float types.  A quantised output must
keep the input's scale and zero point, because the reference pools the stored integers
directly.

Semantics (the CPU reference, i.e. TFLite's kernels):
- Padded positions never take part: the average and the L2 mean divide by the number of
  in-bounds elements of each window, not by the filter area; the max ignores them.
- Quantised AVERAGE_POOL_2D sums the raw stored values and divides by the count rounding half
  away from zero (for uint8 the sum is never negative, so that is "half up").
- The activation clamps the result; for quantised outputs its bounds are quantised with the
  output's scale and zero point.
- FLOAT16 is widened to float32, pooled, and narrowed back.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import activation
from nnconform.reference.arith.layout import from_nhwc, to_nhwc
from nnconform.reference.arith.padding import PADDING_SAME, PADDING_VALID, WindowPairs, explicit_padding, output_size
from nnconform.reference.kernels import jit
from nnconform.reference.ops.registry import OpContext, OpView, register

FLOAT_TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
QUANT_TYPES = (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
AVG_MAX_TYPES = FLOAT_TYPES + QUANT_TYPES
L2_TYPES = FLOAT_TYPES


@dataclass(frozen=True)
class PoolParams(WindowPairs):
    pad_left: int
    pad_right: int
    pad_top: int
    pad_bottom: int
    stride_w: int
    stride_h: int
    filter_w: int
    filter_h: int
    activation: int
    nchw: bool

    @property
    def window(self) -> tuple[int, int]:
        return self.filter_h, self.filter_w


def _is_explicit(n_inputs: int) -> bool:
    return n_inputs >= 10


def _scalar_types(n_inputs: int) -> list:
    n_int = 9 if _is_explicit(n_inputs) else 6
    types = [T.INT32] * n_int
    if n_inputs in (8, 11):
        types.append(T.BOOL)
    return types


def _input_index(n_inputs: int) -> dict[str, int]:
    """Which input holds each parameter (for error messages)."""
    if _is_explicit(n_inputs):
        return dict(
            pad_left=1,
            pad_right=2,
            pad_top=3,
            pad_bottom=4,
            stride_w=5,
            stride_h=6,
            filter_w=7,
            filter_h=8,
            activation=9,
        )
    # Implicit padding derives the pads from the scheme (input 1).
    return dict(
        pad_left=1, pad_right=1, pad_top=1, pad_bottom=1, stride_w=2, stride_h=3, filter_w=4, filter_h=5, activation=6
    )


def _check_params(p: PoolParams, n_inputs: int, fail) -> None:
    """The reference's parameter rules; ``fail(message, input_index)`` reports a violation."""
    at = _input_index(n_inputs)
    for name in ("pad_left", "pad_right", "pad_top", "pad_bottom"):
        if getattr(p, name) < 0:
            fail(f"{name.replace('_', ' ')} must be >= 0, got {getattr(p, name)}", at[name])
    for name, label in (
        ("stride_w", "stride width"),
        ("stride_h", "stride height"),
        ("filter_w", "filter width"),
        ("filter_h", "filter height"),
    ):
        if getattr(p, name) <= 0:
            fail(f"{label} must be > 0, got {getattr(p, name)}", at[name])
    if p.activation not in activation.FUSED_ACTIVATIONS:
        fail(f"activation must be one of {list(activation.FUSED_ACTIVATIONS)}, got {p.activation}", at["activation"])
    # A window made only of padding would have nothing to pool.
    if not (p.filter_w > p.pad_left and p.filter_w > p.pad_right):
        fail(
            f"filter width {p.filter_w} must exceed the left/right padding ({p.pad_left}, {p.pad_right})",
            at["filter_w"],
        )
    if not (p.filter_h > p.pad_top and p.filter_h > p.pad_bottom):
        fail(
            f"filter height {p.filter_h} must exceed the top/bottom padding ({p.pad_top}, {p.pad_bottom})",
            at["filter_h"],
        )


def resolve_params(values: list, n_inputs: int, in_h: int, in_w: int) -> PoolParams:
    """``values[i]`` is input i's scalar value.  Implicit padding is resolved against the
    input's spatial size (NNAPI puts the odd padding pixel at the end)."""
    if _is_explicit(n_inputs):
        pl, pr, pt, pb, sw, sh, fw, fh, act = (int(values[i]) for i in range(1, 10))
        nchw = bool(values[10]) if n_inputs == 11 else False
        return PoolParams(pl, pr, pt, pb, sw, sh, fw, fh, act, nchw)
    scheme, sw, sh, fw, fh, act = (int(values[i]) for i in range(1, 7))
    nchw = bool(values[7]) if n_inputs == 8 else False
    if sw <= 0 or sh <= 0:
        return PoolParams(0, 0, 0, 0, sw, sh, fw, fh, act, nchw)  # _check_params reports it
    pl, pr = explicit_padding(in_w, sw, fw, scheme)
    pt, pb = explicit_padding(in_h, sh, fh, scheme)
    return PoolParams(pl, pr, pt, pb, sw, sh, fw, fh, act, nchw)


def _validate(v: OpView, types: tuple) -> None:
    v.expect_counts((7, 8, 10, 11), 1)
    n = len(v.inputs)
    v.expect_types([types, *_scalar_types(n)], [types])
    v.expect_same_type(("input", 0), ("output", 0))
    v.expect_rank(0, [4])
    v.expect_rank(0, [4], output=True)
    if v.inputs[0].info.is_quant:
        v.expect_same_quant(("input", 0), ("output", 0))
    if not _is_explicit(n):
        v.expect_scalar_in(1, (PADDING_SAME, PADDING_VALID), "padding scheme")
    # Parameter ranges can be checked statically when every scalar is a constant and (for
    # implicit padding) the spatial size is known.
    consts = [None] + [v.constant_scalar(i) for i in range(1, n)]
    if any(c is None for c in consts[1:]):
        return
    nchw = bool(consts[-1]) if n in (8, 11) else False
    dims = v.inputs[0].dimensions
    in_h = in_w = 1  # unused with explicit padding
    if not _is_explicit(n):
        if len(dims) != 4:
            return
        in_h, in_w = (dims[2], dims[3]) if nchw else (dims[1], dims[2])
        if in_h <= 0 or in_w <= 0:
            return
    _check_params(resolve_params(consts, n, in_h, in_w), n, lambda msg, idx: v.fail(msg, input=idx))


def validate_avg_max(v: OpView) -> None:
    _validate(v, AVG_MAX_TYPES)


def validate_l2(v: OpView) -> None:
    _validate(v, L2_TYPES)


def _prepare(ctx: OpContext) -> tuple[np.ndarray, PoolParams, int, int]:
    """Checks the run-time parameters; returns the NHWC input, the params and the out size."""
    n = len(ctx.inputs)
    x = ctx.inputs[0]
    if x.ndim != 4:
        ctx.fail(f"input must have rank 4, got {x.ndim}")
    values = [None] + [ctx.scalar(i) for i in range(1, n)]
    nchw = bool(values[-1]) if n in (8, 11) else False
    x = to_nhwc(x, nchw)
    _, in_h, in_w, depth = x.shape
    if in_h <= 0 or in_w <= 0 or depth <= 0:
        ctx.fail(f"height, width and depth must be > 0 (only batches may be 0), got {list(x.shape)} NHWC")
    if not _is_explicit(n) and values[1] not in (PADDING_SAME, PADDING_VALID):
        ctx.fail(f"padding scheme must be 1 (SAME) or 2 (VALID), got {values[1]}")
    p = resolve_params(values, n, in_h, in_w)
    _check_params(p, n, lambda msg, idx: ctx.fail(f"input {idx}: {msg}"))
    out_h = output_size(in_h, p.filter_h, p.stride_h, p.pad_top, p.pad_bottom)
    out_w = output_size(in_w, p.filter_w, p.stride_w, p.pad_left, p.pad_right)
    if out_h <= 0 or out_w <= 0:
        ctx.fail(f"output would be {out_h}x{out_w}: the filter is larger than the padded input")
    return x, p, out_h, out_w


def _windows(x: np.ndarray, p: PoolParams, out_h: int, out_w: int, fill):
    """Yields, for each (ky, kx) of the filter, the [N, out_h, out_w, C] view of the inputs
    that offset sees (``fill`` where the window hangs over the padding).  The loop is over
    the filter window only; every pixel is handled at once."""
    n, in_h, in_w, c = x.shape
    need_h = (out_h - 1) * p.stride_h + p.filter_h
    need_w = (out_w - 1) * p.stride_w + p.filter_w
    if p.pad_top == p.pad_left == 0 and need_h <= in_h and need_w <= in_w:
        padded = x  # no window reaches the padding: no padded copy
    else:
        padded = np.full((n, max(need_h, p.pad_top + in_h), max(need_w, p.pad_left + in_w), c), fill, dtype=x.dtype)
        padded[:, p.pad_top : p.pad_top + in_h, p.pad_left : p.pad_left + in_w, :] = x
    for ky in range(p.filter_h):
        rows = slice(ky, ky + (out_h - 1) * p.stride_h + 1, p.stride_h)
        for kx in range(p.filter_w):
            cols = slice(kx, kx + (out_w - 1) * p.stride_w + 1, p.stride_w)
            yield padded[:, rows, cols, :]


def _in_bounds_count(p: PoolParams, in_h: int, in_w: int, out_h: int, out_w: int) -> np.ndarray:
    """Number of real (non-padding) elements under each window: [out_h, out_w, 1]."""

    def per_axis(out, stride, pad, k, size):
        start = np.arange(out) * stride - pad
        return np.minimum(start + k, size) - np.maximum(start, 0)

    cy = per_axis(out_h, p.stride_h, p.pad_top, p.filter_h, in_h)
    cx = per_axis(out_w, p.stride_w, p.pad_left, p.filter_w, in_w)
    return (cy[:, None] * cx[None, :])[:, :, None].astype(np.int64)


def _finish_float(y: np.ndarray, p: PoolParams, dtype) -> np.ndarray:
    # ``y`` is the operation's own fresh accumulator: no copies where the type is already right
    y = activation.apply_float(y.astype(np.float32, copy=False), p.activation)
    return from_nhwc(y.astype(dtype, copy=False), p.nchw)


@register(Op.AVERAGE_POOL_2D, data_types=AVG_MAX_TYPES, validate=validate_avg_max)
def execute_average_pool(ctx: OpContext) -> list[np.ndarray]:
    x, p, out_h, out_w = _prepare(ctx)
    in_h, in_w = x.shape[1:3]
    # Compiled at any size (at=1): the tap loop below is fh*fw numpy calls however small the
    # image (a MobileNet's global 4x4 pool: 16 of them, ~80 us), the compiled sums ~5 us.
    if jit.worth(x.size, at=1):
        args = (p.filter_h, p.filter_w, p.stride_h, p.stride_w, p.pad_top, p.pad_left, out_h, out_w)
        if ctx.in_operands[0].info.is_float:
            y = jit.average_pool(x.astype(np.float32, copy=False), *args)
            return [_finish_float(y, p, ctx.output_dtype(0))]
        out = ctx.out_operands[0]
        y = jit.average_pool(x, *args, bounds=activation.quant_bounds(p.activation, out), dtype=out.info.dtype)
        return [from_nhwc(y, p.nchw)]
    count = _in_bounds_count(p, in_h, in_w, out_h, out_w)
    if ctx.in_operands[0].info.is_float:
        acc = np.zeros((x.shape[0], out_h, out_w, x.shape[3]), np.float64)
        for w in _windows(x.astype(np.float32), p, out_h, out_w, 0.0):
            acc += w
        return [_finish_float(acc / count, p, ctx.output_dtype(0))]
    acc = np.zeros((x.shape[0], out_h, out_w, x.shape[3]), np.int64)
    for w in _windows(x.astype(np.int64), p, out_h, out_w, 0):
        acc += w
    # Integer division of the raw sum, rounding half away from zero (the (acc +/- n/2) / n
    # of the reference, with C's truncating division).
    avg = np.sign(acc) * ((np.abs(acc) + count // 2) // count)
    out = activation.apply_quant(avg, p.activation, ctx.out_operands[0])
    return [from_nhwc(out, p.nchw)]


@register(Op.MAX_POOL_2D, data_types=AVG_MAX_TYPES, validate=validate_avg_max)
def execute_max_pool(ctx: OpContext) -> list[np.ndarray]:
    x, p, out_h, out_w = _prepare(ctx)
    if ctx.in_operands[0].info.is_float:
        xf = x.astype(np.float32, copy=False)  # read only: no copy of a float32 input
        acc = np.full((x.shape[0], out_h, out_w, x.shape[3]), -np.inf, np.float32)
        for w in _windows(xf, p, out_h, out_w, -np.inf):
            np.maximum(acc, w, out=acc)
        return [_finish_float(acc, p, ctx.output_dtype(0))]
    low = np.iinfo(np.int64).min
    acc = np.full((x.shape[0], out_h, out_w, x.shape[3]), low, np.int64)
    for w in _windows(x.astype(np.int64), p, out_h, out_w, low):
        np.maximum(acc, w, out=acc)
    out = activation.apply_quant(acc, p.activation, ctx.out_operands[0])
    return [from_nhwc(out, p.nchw)]


@register(Op.L2_POOL_2D, data_types=L2_TYPES, validate=validate_l2)
def execute_l2_pool(ctx: OpContext) -> list[np.ndarray]:
    x, p, out_h, out_w = _prepare(ctx)
    in_h, in_w = x.shape[1:3]
    count = _in_bounds_count(p, in_h, in_w, out_h, out_w)
    acc = np.zeros((x.shape[0], out_h, out_w, x.shape[3]), np.float64)
    xf = x.astype(np.float32).astype(np.float64)
    for w in _windows(xf, p, out_h, out_w, 0.0):
        acc += w * w
    return [_finish_float(np.sqrt(acc / count), p, ctx.output_dtype(0))]
