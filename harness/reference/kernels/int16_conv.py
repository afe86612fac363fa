"""A quantised CONV_2D's exact integer product, in int16 pairs (the compiled kernels only).

The numpy path multiplies the patch matrix of input offsets (x - input zero point) by the
filter offsets in float32 BLAS, exact while every sum stays below 2**24.  Here the same
offsets, each within +-255, are int16, and jit.int16_product multiplies them two at a time
into int32 sums (AVX-512 BW's vpmaddwd, which VNNI fuses with the add): the same integers,
so the requantised output has the same bits, about five times faster than OpenBLAS's AVX2
sgemm on a 12544x288 by 288x64 product.  Used for ungrouped convolutions whose sums the
caller bounds below 2**31, where the CPU has AVX-512 BW; otherwise the float path runs.

Layouts (what jit.int16_product reads): the patch rows, K = fh*fw*C offsets each, end to end
in one int16 buffer, rounded up to a multiple of 6 rows (zeros) with two zeros past the end
(an odd K's last pair reads one past its row); the filter [O, K] as int32 words of
consecutive pairs, [ceil(K/2), 16 * ceil(O/16)], zeros past K and past O.  Packed once per
filter: a model's constant filter offsets are read-only arrays that live with the model.
"""

from __future__ import annotations

import weakref

import numpy as np

from nnconform.reference.kernels import jit

ROWS = 6  # the kernel's tile height
_PACKED: dict[int, tuple] = {}
_PACKED_SIZE = 64


def usable(groups: int, acc_bound: int) -> bool:
    """Whether a convolution takes this product: ungrouped, every sum within int32, kernels
    on and the CPU able."""
    # (jit.worth at any size, as the other kernels ask: one switch turns every kernel off)
    return groups == 1 and acc_bound < (1 << 31) and jit.worth(1, at=1) and jit.int16_products()


def packed_filter(offsets: np.ndarray) -> np.ndarray:
    """The filter offsets [O, fh, fw, C] (exact integers within +-255, any dtype) in the
    kernel's pair layout; cached while a read-only ``offsets`` array lives."""
    key = id(offsets)
    hit = _PACKED.get(key)
    if hit is not None and hit[0]() is offsets:
        return hit[1]
    o = offsets.shape[0]
    k = offsets.size // o if o else 0
    kp, width = k + (k & 1), -(-o // 16) * 16
    w = np.zeros((width, kp), np.int16)
    w[:o, :k] = offsets.reshape(o, k)
    packed = np.ascontiguousarray(w.reshape(width, kp // 2, 2).transpose(1, 0, 2)).view(np.int32)
    packed = packed.reshape(kp // 2, width)
    if not offsets.flags.writeable:
        if len(_PACKED) >= _PACKED_SIZE:
            _PACKED.pop(next(iter(_PACKED)))
        _PACKED[key] = (weakref.ref(offsets, lambda _, key=key: _PACKED.pop(key, None)), packed)
    return packed


def product(xo: np.ndarray, offsets: np.ndarray, p, oh: int, ow: int) -> np.ndarray:
    """(patches of the NHWC int16 input offsets ``xo``, zero-padded as ``p`` (ConvParams)
    says) times the filter ``offsets`` [O, fh, fw, C]: the int32 sums [N, OH, OW, O]."""
    n, _, _, c = xo.shape
    o, fh, fw, _ = offsets.shape
    m, k = n * oh * ow, fh * fw * c
    rows = -(-m // ROWS) * ROWS
    a = np.empty(rows * k + 2, np.int16)
    a[m * k :] = 0
    patches = a[: m * k]
    if p.pointwise(fh, fw):  # the input is its own patch matrix
        patches[:] = xo.reshape(-1)
    else:
        jit.im2col(
            xo,
            fh,
            fw,
            oh,
            ow,
            p.stride_h,
            p.stride_w,
            p.dil_h,
            p.dil_w,
            p.pad_top,
            p.pad_left,
            out=patches.reshape(n, oh, ow, fh, fw, c),
        )
    return jit.int16_product(a, k, packed_filter(offsets), o, rows)[:m].reshape(n, oh, ow, o)
