"""Padding rules shared by convolutions and pooling."""

from __future__ import annotations

PADDING_SAME, PADDING_VALID = 1, 2


def explicit_padding(in_size: int, stride: int, filter_size: int, scheme: int, dilation: int = 1) -> tuple[int, int]:
    """NNAPI's implicit padding: SAME keeps ceil(in/stride) outputs and puts the odd pixel of
    padding at the end (tail); VALID pads nothing."""
    if scheme == PADDING_VALID:
        return 0, 0
    if scheme != PADDING_SAME:
        raise ValueError(f"padding scheme must be 1 (SAME) or 2 (VALID), got {scheme}")
    out_size = (in_size + stride - 1) // stride
    effective = (filter_size - 1) * dilation + 1
    needed = max(0, (out_size - 1) * stride + effective - in_size)
    head = needed // 2
    return head, needed - head


def output_size(in_size: int, filter_size: int, stride: int, pad_head: int, pad_tail: int, dilation: int = 1) -> int:
    effective = (filter_size - 1) * dilation + 1
    return (in_size - effective + stride + pad_head + pad_tail) // stride


class WindowPairs:
    """(height, width) pairs of a window operation's parameters, in the order runtime APIs
    take them (``nnconform.ir.nnapi_params`` hands them to the adapters).  A mixin for the
    parameter dataclasses that have ``pad_top/pad_bottom/pad_left/pad_right`` and
    ``stride_h/stride_w`` fields."""

    @property
    def pads_begin(self) -> tuple[int, int]:
        return self.pad_top, self.pad_left

    @property
    def pads_end(self) -> tuple[int, int]:
        return self.pad_bottom, self.pad_right

    @property
    def strides(self) -> tuple[int, int]:
        return self.stride_h, self.stride_w
