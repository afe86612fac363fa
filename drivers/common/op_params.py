"""Per-operation NNAPI parameters that ``nnconform.ir.nnapi_params`` does not decode.

``nnapi_params`` holds the rules the reference's own modules expose (convolution signatures,
implicit padding, pooling, slicing, axes).  This module adds the remaining operations whose
decoding every adapter repeated: the block operations (BATCH_TO_SPACE_ND / SPACE_TO_BATCH_ND,
DEPTH_TO_SPACE / SPACE_TO_DEPTH), RESIZE_*, CHANNEL_SHUFFLE, SPLIT, the PAD family,
TRANSPOSE, SQUEEZE, the normalisations and the reductions' result shape.

Conventions as in ``nnapi_params``: ``c`` is a converter's per-operation context
(``ParameterAccess``); a parameter that is not constant, or a dimension the rule needs that
the model leaves unknown, raises :class:`Unsupported`; where the NNAPI reference fails the
execution for these constant parameters, :class:`Rejected` is raised (the operation is
supported and preparing it fails, as the reference fails).  Adapters that trace with concrete
shapes (JAX) pass ``dims=`` instead of reading the model's dimensions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from nnconform.driver.support import Rejected, Unsupported, known_rank
from nnconform.drivers.common.layout import layout_flag, nhwc_dims, spatial, swap_with_next
from nnconform.drivers.common.types import FLOATS, QUANT8, require_unchanged_quant
from nnconform.ir import Operand, nnapi_params
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.resize import bilinear_axis, bilinear_axis_fixed, nearest_axis

__all__ = [
    "BatchSpace",
    "batch_space",
    "depth_space",
    "Resize",
    "resize",
    "bilinear_axis",
    "bilinear_axis_fixed",
    "nearest_axis",
    "ChannelShuffle",
    "channel_shuffle",
    "split",
    "paddings",
    "mirror_pad",
    "transpose_perm",
    "squeeze_axes",
    "reduced_shape",
    "Reduction",
    "reduction",
    "MAX_UNROLLED",
    "SequentialFold",
    "sequential_fold",
    "Lrn",
    "lrn",
    "instance_norm",
    "Dequantization",
    "dequantize",
    "depthwise_channels",
    "BackpropPadding",
    "backprop_padding",
]


def _dims(c, dims: Sequence[int] | None, k: int = 0) -> tuple[int, ...]:
    return tuple(int(d) for d in dims) if dims is not None else tuple(c.dims(c.ins[k]))


# ---------------------------------------------------------------------------------------
# Convolutions (the signatures themselves are nnapi_params')
# ---------------------------------------------------------------------------------------


def depthwise_channels(
    c, multiplier: int, nchw: bool, dims: Sequence[int] | None = None, filter_depth: int | None = None
) -> int:
    """DEPTHWISE_CONV_2D's input channels: the runtimes' grouped convolutions take one group
    per input channel, which needs the filter depth to be channels x multiplier."""
    channels = nhwc_dims(_dims(c, dims), nchw)[3]
    depth = filter_depth if filter_depth is not None else c.dims(c.ins[1])[3]
    if depth != channels * multiplier:
        raise Unsupported(f"filter depth {depth} != channels {channels} x multiplier {multiplier}")
    return channels


@dataclass(frozen=True)
class BackpropPadding:
    """TRANSPOSE_CONV_2D's padding as ConvTranspose-style APIs (ONNX, OpenVINO) take it: pads
    that crop the full output, (top, left) and (bottom, right), never negative, and an output
    padding (height, width) that grows it."""

    begin: tuple[int, int]
    end: tuple[int, int]
    output_padding: tuple[int, int]


def backprop_padding(p) -> BackpropPadding:
    """NNAPI's negative tail padding (the output grows past the last stride) becomes output
    padding, which those APIs accept only below the stride; a negative head has no form."""
    extra_h, extra_w = max(0, -p.pad_bottom), max(0, -p.pad_right)
    if p.pad_left < 0 or p.pad_top < 0 or extra_h >= p.stride_h or extra_w >= p.stride_w:
        raise Unsupported(
            f"padding {[p.pad_left, p.pad_right, p.pad_top, p.pad_bottom]} with strides {[p.stride_w, p.stride_h]}"
        )
    return BackpropPadding((p.pad_top, p.pad_left), (max(p.pad_bottom, 0), max(p.pad_right, 0)), (extra_h, extra_w))


# ---------------------------------------------------------------------------------------
# Block operations
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchSpace:
    """BATCH_TO_SPACE_ND (``to_batch`` False) or SPACE_TO_BATCH_ND: the input's NHWC view
    (``batch``, ``height``, ``width``, ``channels``), the block and, for SPACE_TO_BATCH_ND,
    the spatial padding (top, bottom, left, right), which pads with real 0 (see
    ``types.fill_value``)."""

    to_batch: bool
    block_h: int
    block_w: int
    pads: tuple[int, int, int, int]
    nchw: bool
    batch: int
    height: int
    width: int
    channels: int

    @property
    def padded(self) -> tuple[int, int]:
        """(height, width) after SPACE_TO_BATCH_ND's padding."""
        pt, pb, pl, pr = self.pads
        return self.height + pt + pb, self.width + pl + pr

    @property
    def out_batch(self) -> int:
        """BATCH_TO_SPACE_ND's output batch."""
        return self.batch // (self.block_h * self.block_w)

    def space_to_batch_shapes(self) -> tuple[list[int], tuple[int, ...], list[int]]:
        """SPACE_TO_BATCH_ND on the padded NHWC image as reshape -> transpose -> reshape:
        (the 6-D view, its permutation, the output shape)."""
        b, ch, bh, bw = self.batch, self.channels, self.block_h, self.block_w
        hp, wp = self.padded
        return ([b, hp // bh, bh, wp // bw, bw, ch], (2, 4, 0, 1, 3, 5), [b * bh * bw, hp // bh, wp // bw, ch])

    def batch_to_space_shapes(self) -> tuple[list[int], tuple[int, ...], list[int]]:
        """BATCH_TO_SPACE_ND on the NHWC image as reshape -> transpose -> reshape."""
        bh, bw, bo, h, w, ch = self.block_h, self.block_w, self.out_batch, self.height, self.width, self.channels
        return [bh, bw, bo, h, w, ch], (2, 3, 0, 4, 1, 5), [bo, h * bh, w * bw, ch]


def batch_space(c, dims: Sequence[int] | None = None) -> BatchSpace:
    """Input 1 the block [bh, bw]; SPACE_TO_BATCH_ND's input 2 the paddings [[top, bottom],
    [left, right]]; then the optional NCHW flag.  NNAPI fails the execution when the block
    does not divide the padded size (SPACE_TO_BATCH_ND) or the batch (BATCH_TO_SPACE_ND)."""
    to_batch = c.op.type == Op.SPACE_TO_BATCH_ND
    bh, bw = (int(v) for v in c.const(1).reshape(-1))
    nchw = layout_flag(c, 3 if to_batch else 2)
    b, h, w, ch = nhwc_dims(_dims(c, dims), nchw)
    pads = (0, 0, 0, 0)
    if to_batch:
        (pt, pb), (pl, pr) = c.const(2).reshape(2, 2).tolist()
        pads = (int(pt), int(pb), int(pl), int(pr))
    p = BatchSpace(to_batch, bh, bw, pads, nchw, b, h, w, ch)
    if to_batch:
        hp, wp = p.padded
        if hp % bh or wp % bw:
            raise Rejected(f"padded size {hp}x{wp} is not a multiple of the block {bh}x{bw}")
    elif b % (bh * bw):
        raise Rejected(f"batch {b} is not a multiple of the block {bh}x{bw}")
    return p


def depth_space(c) -> tuple[int, bool]:
    """DEPTH_TO_SPACE / SPACE_TO_DEPTH: (block size, NCHW flag)."""
    return int(c.scalar(1)), layout_flag(c, 2)


# ---------------------------------------------------------------------------------------
# RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Resize:
    """A resize's flags and sizes; the source tables come from the reference's functions
    (``bilinear_axis``, ``bilinear_axis_fixed``, ``nearest_axis``, re-exported here)."""

    nchw: bool
    align: bool
    half: bool
    in_h: int
    in_w: int
    out_h: int
    out_w: int

    def bilinear(self) -> tuple[tuple, tuple]:
        """((rows lo, hi, weight), (columns lo, hi, weight)) of the float blend."""
        return (
            bilinear_axis(self.in_h, self.out_h, self.align, self.half),
            bilinear_axis(self.in_w, self.out_w, self.align, self.half),
        )

    def bilinear_fixed(self) -> tuple[tuple, tuple]:
        """The same in TFLite's 1/1024-pixel integer units (the int8 kernel)."""
        return (
            bilinear_axis_fixed(self.in_h, self.out_h, self.align, self.half),
            bilinear_axis_fixed(self.in_w, self.out_w, self.align, self.half),
        )

    def nearest(self) -> tuple[np.ndarray, np.ndarray]:
        """(source rows, source columns) of RESIZE_NEAREST_NEIGHBOR."""
        return (
            nearest_axis(self.in_h, self.out_h, self.align, self.half),
            nearest_axis(self.in_w, self.out_w, self.align, self.half),
        )


def resize(c, dims: Sequence[int] | None = None, *, known_input: bool = True) -> Resize:
    """Inputs 1, 2: the output width and height (INT32) or the scales (floats: the size is
    floor(in * scale) computed in float32, as the reference computes it); 3 the NCHW flag; 4
    align_corners; 5 half_pixel_centers.  NNAPI fails the execution for align_corners with
    half_pixel_centers and for an empty output.  ``known_input`` False: a runtime that
    resizes by itself only needs the output size, so with INT32 sizes the input's spatial
    dimensions may be unknown (0 in ``in_h`` / ``in_w``); scales still need them."""
    nchw, align, half = layout_flag(c, 3), layout_flag(c, 4), layout_flag(c, 5)
    if align and half:
        raise Rejected("align_corners together with half_pixel_centers")
    sizes = c.ins[1].type == T.INT32
    if dims is None and not known_input and sizes:
        raw = c.ins[0].dimensions
        h, w = spatial(raw, nchw) if len(raw) == 4 else (0, 0)
    else:
        h, w = spatial(_dims(c, dims), nchw)
    if sizes:
        out_w, out_h = int(c.scalar(1)), int(c.scalar(2))
    else:
        out_w = int(np.floor(np.float32(w) * np.float32(c.scalar(1))))
        out_h = int(np.floor(np.float32(h) * np.float32(c.scalar(2))))
    if out_w <= 0 or out_h <= 0:
        raise Rejected(f"output size {out_w}x{out_h}")
    return Resize(nchw, align, half, h, w, out_h, out_w)


# ---------------------------------------------------------------------------------------
# CHANNEL_SHUFFLE, SPLIT
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChannelShuffle:
    """CHANNEL_SHUFFLE as reshape -> transpose -> reshape: the axis of size ``groups *
    size`` viewed as [groups, size] (``grouped``) and transposed (``perm``)."""

    groups: int
    axis: int
    dims: tuple[int, ...]
    grouped: tuple[int, ...]
    perm: tuple[int, ...]


def channel_shuffle(c, dims: Sequence[int] | None = None) -> ChannelShuffle:
    """Input 1 the number of groups, input 2 the axis (negative counts from the back).  NNAPI
    fails the execution unless the groups are positive and divide the axis."""
    xd = _dims(c, dims)
    groups, axis = int(c.scalar(1)), int(c.scalar(2)) % len(xd)
    ch = xd[axis]
    if groups <= 0 or ch % groups:
        raise Rejected(f"{groups} groups do not divide the {ch} channels")
    grouped = xd[:axis] + (groups, ch // groups) + xd[axis + 1 :]
    return ChannelShuffle(groups, axis, xd, grouped, tuple(swap_with_next(len(grouped), axis)))


def split(c, dims: Sequence[int] | None = None) -> tuple[int, int]:
    """SPLIT: (non-negative axis, number of parts).  NNAPI fails the execution unless the
    count matches the outputs and divides the axis."""
    xd = _dims(c, dims)
    axis, n = int(c.scalar(1)) % len(xd), int(c.scalar(2))
    if n != len(c.outs) or n <= 0 or xd[axis] % n:
        raise Rejected(f"axis of size {xd[axis]} cannot be split into {n} equal parts")
    return axis, n


# ---------------------------------------------------------------------------------------
# PAD, PAD_V2, MIRROR_PAD
# ---------------------------------------------------------------------------------------


def paddings(c) -> np.ndarray:
    """Input 1 of the PAD family: [rank, 2] int64 (before, after) per dimension.  Negative
    padding fails the execution in NNAPI."""
    pads = c.const(1).reshape(-1, 2).astype(np.int64)
    if (pads < 0).any():
        raise Rejected(f"negative padding {pads.tolist()}")
    return pads


MIRROR_MODES = {0: "reflect", 1: "symmetric"}


def mirror_pad(c) -> tuple[np.ndarray, str]:
    """MIRROR_PAD: (paddings, "reflect" (mode 0: the edge is not repeated) or "symmetric"
    (mode 1: it is)).  Another mode fails the execution."""
    mode = int(c.scalar(2))
    if mode not in MIRROR_MODES:
        raise Rejected(f"mirror pad mode {mode}")
    return paddings(c), MIRROR_MODES[mode]


# ---------------------------------------------------------------------------------------
# TRANSPOSE, SQUEEZE, reductions
# ---------------------------------------------------------------------------------------


def transpose_perm(c) -> list[int]:
    """TRANSPOSE's permutation: input 1, or when it is omitted the reversal, which NNAPI
    defines for 2-D inputs only (it fails the execution on other ranks)."""
    if c.omitted(1):
        if c.rank(c.ins[0]) != 2:
            raise Rejected("TRANSPOSE without perm on a non-2-D input")
        return [1, 0]
    perm = [int(p) for p in c.const(1).reshape(-1)]
    if sorted(perm) != list(range(len(perm))):
        raise Rejected(f"{perm} is not a permutation")
    return perm


def squeeze_axes(c, dims: Sequence[int] | None = None) -> list[int]:
    """SQUEEZE's axes: input 1 (sorted, non-negative), or when omitted every axis of size 1
    (which needs the dimensions)."""
    if c.omitted(1):
        return [i for i, d in enumerate(_dims(c, dims)) if d == 1]
    return nnapi_params.axes(c, 1, len(dims) if dims is not None else c.rank(c.ins[0]))


def reduced_shape(dims: Sequence[int], axes: Sequence[int], keep: bool) -> list[int]:
    """The result shape of a reduction over ``axes``: size 1 there with keep_dims, else
    without them, and [1] when nothing is left (NNAPI has no 0-d tensors)."""
    if keep:
        return [1 if i in axes else d for i, d in enumerate(dims)]
    return [d for i, d in enumerate(dims) if i not in axes] or [1]


@dataclass(frozen=True)
class Reduction:
    """REDUCE_* or MEAN over ``axes`` of a rank-``rank`` input, keeping the reduced dimensions
    (as 1) or not."""

    axes: list[int]
    keep: bool
    rank: int

    @property
    def to_one(self) -> bool:
        """Every dimension reduced away: NNAPI has no 0-d tensors, the result is [1]."""
        return not self.keep and len(self.axes) == self.rank


def reduction(c, types, what: str = "reduction") -> tuple:
    """(input 0, its Reduction) of REDUCE_* / MEAN: input 0 of one of ``types``; axes and
    keep_dims as ``nnapi_params.reduce_axes`` reads them; a quantised input must carry the
    output's scale and zero point (the mappings reduce stored values)."""
    x = c.require(0, types)
    r = c.rank(x)
    axes, keep = nnapi_params.reduce_axes(c, r)
    require_unchanged_quant(x, c.outs[0], what)
    return x, Reduction(axes, keep, r)


# The longest group a sequential fold is unrolled for (one graph node per element).
MAX_UNROLLED = 256


@dataclass(frozen=True)
class SequentialFold:
    """REDUCE_PROD folded as the reference folds it, in row-major order, for runtimes whose
    own product promises no order: the input transposed by ``perm`` (kept axes first) and
    viewed as [-1, ``count``], folded along the second axis, then reshaped to ``shape``."""

    count: int
    perm: list[int]
    shape: list[int]


def sequential_fold(dims: Sequence[int], axes: Sequence[int], keep: bool) -> SequentialFold:
    """The fold of ``dims`` over ``axes``; Unsupported beyond MAX_UNROLLED elements a group."""
    k = int(np.prod([dims[a] for a in axes]))
    if k > MAX_UNROLLED:
        raise Unsupported(f"REDUCE_PROD over {k} elements (the exact fold is unrolled up to {MAX_UNROLLED})")
    kept = [i for i in range(len(dims)) if i not in axes]
    return SequentialFold(k, kept + list(axes), reduced_shape(dims, axes, keep))


# ---------------------------------------------------------------------------------------
# LOCAL_RESPONSE_NORMALIZATION, INSTANCE_NORMALIZATION
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lrn:
    """x / (bias + alpha * sum of x^2 over [i - radius, i + radius] along ``axis``) ^ beta."""

    radius: int
    bias: float
    alpha: float
    beta: float
    axis: int


def lrn(c, rank: int) -> Lrn:
    """Inputs 1..4: radius, bias, alpha, beta (float32 values); 5 the optional axis, by
    default the last."""
    bias, alpha, beta = (float(np.float32(c.scalar(k))) for k in (2, 3, 4))
    return Lrn(int(c.scalar(1)), bias, alpha, beta, int(c.scalar(5, -1)) % rank)


def instance_norm(c) -> tuple[float, float, float, bool]:
    """INSTANCE_NORMALIZATION: (gamma, beta, epsilon, NCHW flag)."""
    gamma, beta, eps = (float(np.float32(c.scalar(k))) for k in (1, 2, 3))
    return gamma, beta, eps, layout_flag(c, 4)


# ---------------------------------------------------------------------------------------
# DEQUANTIZE
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dequantization:
    """real = scale * (stored - zero_point): one float32 scale, or for
    TENSOR_QUANT8_SYMM_PER_CHANNEL one scale per index of ``axis`` (zero point 0)."""

    scale: np.ndarray | np.floating[Any]  # one float32 scale, or one per channel
    zero_point: int
    axis: int | None

    def scale_for(self, x: Operand) -> np.ndarray | np.floating[Any]:
        """The scale shaped to broadcast against ``x``'s values (per-channel scales need its
        rank known)."""
        if self.axis is None:
            return self.scale
        shape = [1] * known_rank(x)
        shape[self.axis] = -1
        return self.scale.reshape(shape)


def dequantization(x: Operand) -> Dequantization:
    """How ``x``'s stored values map to real ones; Unsupported for a type that is not 8-bit
    quantised (or a per-channel operand without its channel parameters)."""
    if x.type in QUANT8 or x.type == T.TENSOR_QUANT8_SYMM:
        return Dequantization(np.float32(x.scale), int(x.zero_point), None)
    if x.type == T.TENSOR_QUANT8_SYMM_PER_CHANNEL and x.channel_quant is not None:
        cq = x.channel_quant
        return Dequantization(np.asarray(cq.scales, np.float32), 0, cq.channel_dim)
    raise Unsupported(x.type.name)


def dequantize(c) -> Dequantization:
    """DEQUANTIZE: input 0's dequantization; the output is a float tensor."""
    if c.outs[0].type not in FLOATS:
        raise Unsupported(c.outs[0].type.name)
    return dequantization(c.ins[0])
