"""NNAPI operation parameters decoded once, for every runtime adapter.

A runtime adapter (onnxruntime, OpenVINO, JAX, torch, TFLite) builds its graph at conversion
time, so it needs the operation's scalar parameters as Python values: which padding form a
convolution uses, the padding that SAME/VALID resolves to, strides, dilations, the fused
activation, the NCHW flag, the elements STRIDED_SLICE keeps, SLICE's "-1 = to the end", a
reduction's axes.  The rules are NNAPI's and they are the same for every runtime, so they live
here, in runtime-neutral dataclasses, and every adapter maps the result onto its own API.

The semantics come from the reference executor (``nnconform.reference.ops``): the argument layouts of
the convolution family (``conv_common.parse_layout``), NNAPI's implicit padding
(``padding.explicit_padding``), TRANSPOSE_CONV_2D's padding from the requested output size
(``transpose_conv_2d.transpose_padding``), pooling's parameters (``pooling.resolve_params``) and
STRIDED_SLICE's index clamping (``strided_slice.slice_plan``).  Reusing them keeps one copy of
each rule: an adapter cannot drift from what the reference computes.

Every function takes the converter's per-operation context ``c``: a
:class:`nnconform.driver.support.ParameterAccess` (``c.ins`` the input operands, ``c.scalar``
and ``c.const`` read constants).  A parameter that is not a constant, or a dimension the rule
needs that the model leaves unknown, raises :class:`Unsupported` (the operation is reported
unsupported, never approximated).  Where NNAPI says the execution must fail for these constant
parameters, :class:`Rejected` is raised.  Adapters that trace with concrete shapes (JAX) pass
``shape=`` to read the traced shapes instead of the model's dimensions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence, cast

import numpy as np

from nnconform.driver.support import ParameterAccess, Rejected, Unsupported, known_dims, known_rank
from nnconform.ir import Operand
from nnconform.ir import OperandType as T
from nnconform.reference.arith import activation as nn_activation
from nnconform.reference.arith.padding import PADDING_SAME, PADDING_VALID, explicit_padding
from nnconform.reference.ops.conv_common import ConvParams, LayoutError, parse_layout
from nnconform.reference.ops.pooling import PoolParams
from nnconform.reference.ops.pooling import resolve_params as _resolve_pool_params
from nnconform.reference.ops.strided_slice import slice_plan
from nnconform.reference.ops.transpose_conv_2d import transpose_padding as _transpose_padding

__all__ = [
    "ConvParams",
    "PoolParams",
    "StridedSlice",
    "conv_params",
    "transpose_conv_params",
    "pool_params",
    "implicit_padding",
    "fused_activation",
    "known_dims",
    "known_rank",
    "same_quant",
    "slice_bounds",
    "strided_slice",
    "axes",
    "reduce_axes",
]

QUANT8 = (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)

Shape = Callable[[int], Sequence[int]]

# The reference's operation modules are not annotated yet (pyproject.toml's mypy settings):
# what slice_plan gives, per dimension (start, stride, count, shrink).
_slice_plan = cast("Callable[..., list[tuple[int, int, int, bool]]]", slice_plan)


# ---------------------------------------------------------------------------------------
# Operands
# ---------------------------------------------------------------------------------------


def same_quant(a: Operand, b: Operand) -> bool:
    """Same type and, for 8-bit quantised tensors, the same scale (as float32, the precision
    NNAPI stores) and zero point: data can move between them without requantisation."""
    return a.type == b.type and (
        a.type not in QUANT8 or (np.float32(a.scale) == np.float32(b.scale) and a.zero_point == b.zero_point)
    )


def fused_activation(c: ParameterAccess, k: int) -> int:
    """Input ``k``: a FuseCode, NONE / RELU / RELU1 / RELU6 (0..3).  Any other value is
    invalid in NNAPI (validation rejects a constant one first)."""
    act = int(c.scalar(k))
    if act not in nn_activation.FUSED_ACTIVATIONS:
        raise Unsupported(f"fused activation {act}")
    return act


def _input_shape(c: ParameterAccess, shape: Shape | None) -> Shape:
    return shape if shape is not None else (lambda k: known_dims(c.ins[k]))


# ---------------------------------------------------------------------------------------
# Padding
# ---------------------------------------------------------------------------------------


def implicit_padding(in_size: int, stride: int, filter_size: int, scheme: int, dilation: int = 1) -> tuple[int, int]:
    """(head, tail) padding of NNAPI's implicit padding scheme on one axis: SAME keeps
    ceil(in / stride) outputs and puts the odd pixel at the tail, VALID pads nothing.  The
    reference's rule; a scheme other than 1 (SAME) or 2 (VALID) is unsupported here."""
    if scheme not in (PADDING_SAME, PADDING_VALID):
        raise Unsupported(f"padding scheme {scheme}")
    return explicit_padding(in_size, stride, filter_size, scheme, dilation)


def _spatial(dims: Sequence[int], nchw: bool) -> tuple[int, int]:
    return (dims[2], dims[3]) if nchw else (dims[1], dims[2])


# ---------------------------------------------------------------------------------------
# CONV_2D, DEPTHWISE_CONV_2D, GROUPED_CONV_2D
# ---------------------------------------------------------------------------------------


def conv_params(
    c: ParameterAccess, n_extra: int = 0, *, dilation: bool = True, shape: Shape | None = None
) -> ConvParams:
    """Parameters of CONV_2D (``n_extra`` 0), DEPTHWISE_CONV_2D (1: the depth multiplier) and
    GROUPED_CONV_2D (1: the number of groups; ``dilation=False``, it has no dilation inputs).

    NNAPI tells the implicit-padding signature (scheme, strides, ...) from the explicit one
    (left, right, top, bottom, strides, ...) by the input count and by the type of the input
    just after the implicit form's activation; the optional tail is the NCHW flag, then the
    width and height dilation factors.  Implicit padding is resolved against the input's
    spatial size and the filter's ([*, height, width, *]) with the dilated filter extent, so
    it needs those dimensions (``shape(k)`` gives input k's shape; by default the model's
    dimensions, which must be known)."""
    try:
        lay = parse_layout(len(c.ins), lambda i: c.ins[i].type, n_extra, dilation=dilation)
    except LayoutError as e:
        raise Unsupported(f"input signature: {e}") from None
    sw, sh = int(c.scalar(lay.stride_w)), int(c.scalar(lay.stride_h))
    extra = tuple(int(c.scalar(i)) for i in lay.extra)
    act = fused_activation(c, lay.activation)
    nchw = bool(c.scalar(lay.layout)) if lay.layout is not None else False
    dw, dh = (int(c.scalar(lay.dilation[0])), int(c.scalar(lay.dilation[1]))) if lay.dilation else (1, 1)
    if lay.explicit:
        pl, pr, pt, pb = (int(c.scalar(i)) for i in lay.padding)
    else:
        scheme = int(c.scalar(lay.padding[0]))
        if scheme not in (PADDING_SAME, PADDING_VALID):
            raise Unsupported(f"padding scheme {scheme}")
        get = _input_shape(c, shape)
        xd, fd = get(0), get(1)
        h, w = _spatial(xd, nchw)
        pl, pr = implicit_padding(w, sw, fd[2], scheme, dw)
        pt, pb = implicit_padding(h, sh, fd[1], scheme, dh)
    return ConvParams(pt, pb, pl, pr, sh, sw, dh, dw, act, nchw, extra)


def transpose_conv_params(c: ParameterAccess, *, shape: Shape | None = None) -> ConvParams:
    """Parameters of TRANSPOSE_CONV_2D (no dilation, no extra integers).

    11 inputs: explicit padding left, right, top, bottom, strides, activation, NCHW flag.
    9 inputs: input 3 is the requested output shape (in the input's layout), then the
    scheme, strides, activation, NCHW flag; the padding comes from the output size and the
    filter ([depth_out, height, width, depth_in]): SAME pads (ceil(out / stride) - 1) * stride
    + filter - out in total, the head half of it (0 when the total is negative) and the tail
    the rest, which may be negative (the output grows past the last stride)."""
    n = len(c.ins)
    if n == 11:
        pl, pr, pt, pb = (int(c.scalar(i)) for i in (3, 4, 5, 6))
        sw, sh = int(c.scalar(7)), int(c.scalar(8))
        act = fused_activation(c, 9)
        nchw = bool(c.scalar(10))
    elif n == 9:
        scheme, sw, sh = (int(c.scalar(i)) for i in (4, 5, 6))
        act = fused_activation(c, 7)
        nchw = bool(c.scalar(8))
        if scheme not in (PADDING_SAME, PADDING_VALID):
            raise Unsupported(f"padding scheme {scheme}")
        oshape = [int(v) for v in c.const(3).reshape(-1)]
        if len(oshape) != 4:
            raise Unsupported(f"output shape {oshape} does not have 4 values")
        oh, ow = _spatial(oshape, nchw)
        fd = _input_shape(c, shape)(1)
        pl, pr = _transpose_padding(ow, sw, fd[2], scheme)
        pt, pb = _transpose_padding(oh, sh, fd[1], scheme)
    else:
        raise Unsupported(f"TRANSPOSE_CONV_2D takes 9 or 11 inputs, got {n}")
    return ConvParams(pt, pb, pl, pr, sh, sw, 1, 1, act, nchw, ())


# ---------------------------------------------------------------------------------------
# AVERAGE_POOL_2D, MAX_POOL_2D, L2_POOL_2D
# ---------------------------------------------------------------------------------------


def pool_params(c: ParameterAccess, *, shape: Shape | None = None) -> PoolParams:
    """Parameters of the 2-D pooling operations: explicit padding with 10 (11: + NCHW flag)
    inputs, the implicit scheme with 7 (8) inputs; then strides, filter size, activation.
    Implicit padding is resolved against the input's spatial size exactly as the reference
    does (``shape(0)``, by default the model's dimensions)."""
    n = len(c.ins)
    if n not in (7, 8, 10, 11):
        raise Unsupported(f"pooling takes 7, 8, 10 or 11 inputs, got {n}")
    values: list[int | None] = [None] + [int(c.scalar(i)) for i in range(1, n)]
    fused_activation(c, 9 if n >= 10 else 6)
    in_h = in_w = 1  # explicit padding reads no input size
    if n < 10:
        if values[1] not in (PADDING_SAME, PADDING_VALID):
            raise Unsupported(f"padding scheme {values[1]}")
        in_h, in_w = _spatial(_input_shape(c, shape)(0), n == 8 and bool(values[7]))
    return _resolve_pool_params(values, n, in_h, in_w)


# ---------------------------------------------------------------------------------------
# SLICE, STRIDED_SLICE
# ---------------------------------------------------------------------------------------


def slice_bounds(c: ParameterAccess, dims: Sequence[int]) -> tuple[list[int], list[int]]:
    """SLICE's (begin, end) per dimension of an input of shape ``dims``: input 1 is begin,
    input 2 the size with -1 meaning "to the end".  NNAPI fails the execution when a block
    leaves the tensor (begin < 0, begin > dim, size < 0, begin + size > dim)."""
    begin = [int(b) for b in c.const(1).reshape(-1)]
    size = [int(s) for s in c.const(2).reshape(-1)]
    end = [d if s == -1 else b + s for b, s, d in zip(begin, size, dims)]
    if any(b < 0 or b > d or e > d or e < b for b, e, d in zip(begin, end, dims)):
        raise Rejected(f"SLICE begin {begin} size {size} is out of range for {list(dims)}")
    return begin, end


@dataclass(frozen=True)
class StridedSlice:
    """What STRIDED_SLICE keeps, per input dimension: ``count`` elements start, start + stride,
    ...; ``stops`` are exclusive ends usable by slice APIs that clamp (Python, ONNX Slice,
    OpenVINO Slice), with "before index 0" of a negative stride written -dim - 1 because a
    plain negative stop would count from the back."""

    starts: tuple[int, ...]
    stops: tuple[int, ...]
    strides: tuple[int, ...]
    counts: tuple[int, ...]
    shrink: tuple[bool, ...]

    @property
    def shrunk_axes(self) -> tuple[int, ...]:
        return tuple(i for i, s in enumerate(self.shrink) if s)

    @property
    def out_shape(self) -> list[int]:
        """NNAPI's output shape: the kept counts without the shrunk axes, [1] when all shrink."""
        return [n for n, s in zip(self.counts, self.shrink) if not s] or [1]

    def positions(self, axis: int) -> np.ndarray:
        """The kept indexes of ``axis`` (an explicit index list: negative strides too)."""
        return self.starts[axis] + self.strides[axis] * np.arange(self.counts[axis], dtype=np.int64)


def strided_slice(c: ParameterAccess, dims: Sequence[int]) -> StridedSlice:
    """STRIDED_SLICE of an input of shape ``dims``: inputs 1..3 begin, end, strides; 4..6
    begin_mask, end_mask, shrink_axis_mask.  The reference's clamping (``slice_plan``); a zero
    stride, or a shrunk axis without stride > 0 and exactly one element, makes NNAPI fail the
    execution (Rejected)."""
    begin, end, strides = (c.const(k).reshape(-1).astype(np.int64) for k in (1, 2, 3))
    bmask, emask, smask = (int(c.scalar(k)) for k in (4, 5, 6))
    try:
        plan = _slice_plan(dims, begin, end, strides, bmask, emask, smask)
    except ValueError as err:
        raise Rejected(str(err)) from None
    starts, stops = [], []
    for (b, s, n, _), d in zip(plan, dims):
        if n == 0:
            # An empty range may start "before index 0" (-1), which slice APIs would read as
            # the last element: write it as the empty range [0, 0).
            b = e = 0
        else:
            e = b + s * n
            e = min(e, d) if s > 0 else (e if e >= 0 else -d - 1)
        starts.append(b)
        stops.append(e)
    return StridedSlice(
        tuple(starts), tuple(stops), tuple(p[1] for p in plan), tuple(p[2] for p in plan), tuple(p[3] for p in plan)
    )


# ---------------------------------------------------------------------------------------
# Axes
# ---------------------------------------------------------------------------------------


def axes(c: ParameterAccess, k: int, rank: int) -> list[int]:
    """Input ``k``, a TENSOR_INT32 of axes in [-rank, rank), as sorted non-negative axes
    without repeats (NNAPI reduces an axis named twice once)."""
    return sorted({int(a) % rank for a in c.const(k).reshape(-1)})


def reduce_axes(c: ParameterAccess, rank: int) -> tuple[list[int], bool]:
    """REDUCE_* and MEAN: (axes from input 1, keep_dims from input 2).  keep_dims is a BOOL
    for REDUCE_* and an INT32 for MEAN, where only a positive value keeps the reduced
    dimensions (as size 1).  An empty axes list is unsupported: runtime reduce APIs read
    "no axes" as "all axes"."""
    found = axes(c, 1, rank)
    if not found:
        raise Unsupported("empty axes")
    return found, int(c.scalar(2)) > 0
