"""NNAPI's image layouts and the permutations between them.

NNAPI images are NHWC unless an operation's layout flag (a trailing BOOL input) says NCHW;
most runtimes' convolution and pooling kernels want NCHW.  The permutations and the reading
of an image operand's dimensions live here once.
"""

from __future__ import annotations

from typing import Sequence

__all__ = ["TO_NCHW", "TO_NHWC", "layout_flag", "nhwc_dims", "spatial", "swap_with_next", "axis_last"]

# NHWC -> NCHW and back (as permutation lists: transpose(x, TO_NCHW) of an NHWC x is NCHW).
TO_NCHW = (0, 3, 1, 2)
TO_NHWC = (0, 2, 3, 1)


def layout_flag(c, k: int) -> bool:
    """The optional NCHW flag at input ``k`` (absent or omitted: NHWC, NNAPI's default)."""
    return bool(c.scalar(k, False)) if len(c.ins) > k else False


def nhwc_dims(dims: Sequence[int], nchw: bool) -> tuple[int, int, int, int]:
    """(batch, height, width, channels) of a 4-D image in either layout."""
    return (dims[0], dims[2], dims[3], dims[1]) if nchw else (dims[0], dims[1], dims[2], dims[3])


def spatial(dims: Sequence[int], nchw: bool) -> tuple[int, int]:
    """(height, width) of a 4-D image in either layout."""
    return (dims[2], dims[3]) if nchw else (dims[1], dims[2])


def swap_with_next(rank: int, axis: int) -> list[int]:
    """The permutation that swaps ``axis`` with the one after it (CHANNEL_SHUFFLE transposes
    the [groups, size] view of its axis)."""
    perm = list(range(rank))
    perm[axis], perm[axis + 1] = axis + 1, axis
    return perm


def axis_last(rank: int, axis: int) -> tuple[list[int], list[int]]:
    """(permutation moving ``axis`` last, its inverse): for kernels that only work along the
    innermost (or a fixed) axis."""
    perm = [i for i in range(rank) if i != axis] + [axis]
    inverse = [0] * rank
    for i, p in enumerate(perm):
        inverse[p] = i
    return perm, inverse
