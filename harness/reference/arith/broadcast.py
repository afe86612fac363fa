"""NNAPI broadcasting of two tensors (ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM, POW, PRELU,
the comparisons, LOGICAL_*, SELECT ...).

The rule (OperationsUtils calculateBroadcastedShape): align the dimensions from the right, as
numpy does; a missing leading dimension counts as 1; two sizes are compatible when equal or
when one is 1, and the output takes the other.  A 0 (zero-sized) dimension is compatible only
with 0 or 1 and gives 0.  This is exactly numpy's rule, so once the shapes have passed
:func:`broadcast_shape` an operation may compute with plain numpy broadcasting.

Use :func:`check_static` from ``validate`` (it only judges dimensions the model knows; a 0 in
a model is an unknown size) and :func:`output_shape` from ``execute`` (actual shapes; an
incompatible pair is an execution failure, as in the reference's ``prepare``).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from nnconform.reference.ops.registry import OpContext, OpView


def broadcast_shape(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...] | None:
    """The broadcast shape of actual shapes ``a`` and ``b``, or None if incompatible."""
    if a == b:  # the common case (ndarray shapes are tuples of ints)
        return tuple(map(int, a))
    n = max(len(a), len(b))
    pa = (1,) * (n - len(a)) + tuple(int(d) for d in a)
    pb = (1,) * (n - len(b)) + tuple(int(d) for d in b)
    out = []
    for x, y in zip(pa, pb):
        if x != y and x != 1 and y != 1:
            return None
        out.append(y if x == 1 else x)
    return tuple(out)


def check_static(v: OpView, i: int = 0, j: int = 1) -> None:
    """Reject inputs ``i`` and ``j`` whose known dimensions can never broadcast."""
    a, b = v.inputs[i].dimensions, v.inputs[j].dimensions
    if not a or not b:
        return  # unknown rank: judged at run time
    for k in range(1, min(len(a), len(b)) + 1):
        x, y = a[-k], b[-k]
        if x and y and x != y and x != 1 and y != 1:
            v.fail(
                f"dimensions {list(b)} do not broadcast with input {i}'s {list(a)} "
                f"(size {y} against {x}, counting from the right)",
                input=j,
            )


def output_shape(ctx: OpContext, i: int = 0, j: int = 1) -> tuple[int, ...]:
    """The broadcast shape of inputs ``i`` and ``j`` at run time (fails the operation if the
    actual shapes are incompatible)."""
    a, b = ctx.inputs[i].shape, ctx.inputs[j].shape
    out = broadcast_shape(a, b)
    if out is None:
        ctx.fail(f"input {j} shape {list(b)} does not broadcast with input {i} shape {list(a)}")
    return out


def widen_inner(small: np.ndarray, shape: Sequence[int], min_inner: int = 1024) -> np.ndarray:
    """``small`` materialised over the trailing dimensions of ``shape`` (the broadcast shape)
    until they hold at least ``min_inner`` elements, when ``small`` is constant along the
    leading ones.  numpy broadcasts the result to exactly the same values, but an [1, 1, C]
    operand against [N, H, W, C] otherwise makes every inner loop C elements long, which
    costs several times the arithmetic.  Returns ``small`` itself when nothing is gained."""
    nd = len(shape)
    if small.ndim > nd or small.size >= min_inner:
        return small
    padded = (1,) * (nd - small.ndim) + tuple(small.shape)
    k, inner = nd, 1
    while k > 0 and inner < min_inner:
        k -= 1
        inner *= int(shape[k])
    if any(d != 1 for d in padded[:k]) or inner <= small.size:
        return small
    return np.ascontiguousarray(np.broadcast_to(small.reshape(padded[k:]), tuple(shape[k:])))
