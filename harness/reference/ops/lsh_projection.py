"""LSH_PROJECTION: project an input to a bit signature by locality-sensitive hashing.

Inputs (4):
  0 hash: TENSOR_FLOAT32 or TENSOR_FLOAT16 [num_hash, num_bits], num_bits <= 32; each entry is
    the seed of one hash bit.
  1 input: TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_INT32 or TENSOR_QUANT8_ASYMM, rank >= 1,
    dim 0 >= 1.  Each slice input[i] (all of its bytes) is one item.
  2 weight: the hash's type, [input.dim0].  Required for DENSE; must be omitted for the two
    SPARSE types (the reference refuses a weight there, although NeuralNetworks.h calls it
    optional).  Omitted means every item weighs 1.0.
  3 type: INT32, 1 SPARSE_DEPRECATED, 2 DENSE, 3 SPARSE.
Output 0: TENSOR_INT32, [num_hash] for the sparse types, [num_hash * num_bits] for DENSE.

One bit for seed s: for each item i, key = the 4 bytes of float32(s) followed by the item's
stored bytes (little endian); h_i = Fingerprint64(key) read as a signed int64 then a double;
score = sum_i w_i * h_i in double, left to right; the bit is score > 0.  fp16 seeds are
widened to float32 before hashing and fp16 weights to double, so fp16 and fp32 models with
"the same" constants give different bits, as in the reference.
DENSE writes every bit; SPARSE packs each row's bits, first seed most significant, into one
int32 and adds row * 2**num_bits (SPARSE_DEPRECATED does not add the offset).

Fingerprint64 is FarmHash's 64-bit fingerprint (the farmhashna variant of Hash64), ported
below to numpy and vectorised over many keys of equal length.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.registry import OpContext, OpView, register

HASH_TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
INPUT_TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM)
SPARSE_DEPRECATED, DENSE, SPARSE = 1, 2, 3

# ---------------------------------------------------------------------------------------
# FarmHash Fingerprint64 (farmhashna::Hash64).  All arithmetic is on uint64 arrays, which
# wrap modulo 2**64 as the C++ does.
# ---------------------------------------------------------------------------------------

_U = np.uint64
_K0, _K1, _K2 = _U(0xC3A5C85C97CB3127), _U(0xB492B66FBE98F273), _U(0x9AE16A3B2F90404F)


def _rot(v: np.ndarray, s: int) -> np.ndarray:
    # rotate right; a rotation by 0 must not shift by 64
    return v if s == 0 else (v >> _U(s)) | (v << _U(64 - s))


def _shift_mix(v: np.ndarray) -> np.ndarray:
    return v ^ (v >> _U(47))


def _len16(u: np.ndarray, v: np.ndarray, mul) -> np.ndarray:
    a = _shift_mix((u ^ v) * mul)
    b = _shift_mix((v ^ a) * mul)
    return b * mul


def _fetch(keys: np.ndarray, at: int, nbytes: int) -> np.ndarray:
    dt = "<u8" if nbytes == 8 else "<u4"
    return np.ascontiguousarray(keys[:, at : at + nbytes]).view(dt)[:, 0].astype(np.uint64)


def _weak32(keys: np.ndarray, at: int, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    w, x, y, z = (_fetch(keys, at + 8 * k, 8) for k in range(4))
    a = a + w
    b = _rot(b + a + z, 21)
    c = a
    a = a + x + y
    b = b + _rot(a, 44)
    return a + z, b + c


def _len0to16(keys: np.ndarray, n: int) -> np.ndarray:
    if n >= 8:
        mul = _K2 + _U(2 * n)
        a = _fetch(keys, 0, 8) + _K2
        b = _fetch(keys, n - 8, 8)
        c = _rot(b, 37) * mul + a
        d = (_rot(a, 25) + b) * mul
        return _len16(c, d, mul)
    if n >= 4:
        mul = _K2 + _U(2 * n)
        a = _fetch(keys, 0, 4)
        return _len16(_U(n) + (a << _U(3)), _fetch(keys, n - 4, 4), mul)
    if n > 0:
        a, b, c = (keys[:, i].astype(np.uint64) for i in (0, n >> 1, n - 1))
        y = a + (b << _U(8))
        z = _U(n) + (c << _U(2))
        return _shift_mix(y * _K2 ^ z * _K0) * _K2
    return np.full(keys.shape[0], _K2, np.uint64)


def _len17to32(keys: np.ndarray, n: int) -> np.ndarray:
    mul = _K2 + _U(2 * n)
    a = _fetch(keys, 0, 8) * _K1
    b = _fetch(keys, 8, 8)
    c = _fetch(keys, n - 8, 8) * mul
    d = _fetch(keys, n - 16, 8) * _K2
    return _len16(_rot(a + b, 43) + _rot(c, 30) + d, a + _rot(b + _K2, 18) + c, mul)


def _len33to64(keys: np.ndarray, n: int) -> np.ndarray:
    mul = _K2 + _U(2 * n)
    a = _fetch(keys, 0, 8) * _K2
    b = _fetch(keys, 8, 8)
    c = _fetch(keys, n - 8, 8) * mul
    d = _fetch(keys, n - 16, 8) * _K2
    y = _rot(a + b, 43) + _rot(c, 30) + d
    z = _len16(y, a + _rot(b + _K2, 18) + c, mul)
    e = _fetch(keys, 16, 8) * mul
    f = _fetch(keys, 24, 8)
    g = (y + _fetch(keys, n - 32, 8)) * mul
    h = (z + _fetch(keys, n - 24, 8)) * mul
    return _len16(_rot(e + f, 43) + _rot(g, 30) + h, e + _rot(f + a, 18) + g, mul)


def _long(keys: np.ndarray, n: int) -> np.ndarray:
    count = keys.shape[0]
    seed = _U(81)
    full = lambda v: np.full(count, v, np.uint64)
    x = full(seed)
    y = full(seed * _K1 + _U(113))
    z = _shift_mix(y * _K2 + _U(113)) * _K2
    v0, v1, w0, w1 = full(0), full(0), full(0), full(0)
    x = x * _K2 + _fetch(keys, 0, 8)
    # 64-byte blocks up to the last (possibly partial) one, which is re-read as the final
    # 64 bytes of the key
    for at in range(0, ((n - 1) // 64) * 64, 64):
        x = _rot(x + y + v0 + _fetch(keys, at + 8, 8), 37) * _K1
        y = _rot(y + v1 + _fetch(keys, at + 48, 8), 42) * _K1
        x = x ^ w1
        y = y + v0 + _fetch(keys, at + 40, 8)
        z = _rot(z + w0, 33) * _K1
        v0, v1 = _weak32(keys, at, v1 * _K1, x + w0)
        w0, w1 = _weak32(keys, at + 32, z + w1, y + _fetch(keys, at + 16, 8))
        z, x = x, z
    mul = _K1 + ((z & _U(0xFF)) << _U(1))
    at = n - 64
    w0 = w0 + _U((n - 1) & 63)
    v0 = v0 + w0
    w0 = w0 + v0
    x = _rot(x + y + v0 + _fetch(keys, at + 8, 8), 37) * mul
    y = _rot(y + v1 + _fetch(keys, at + 48, 8), 42) * mul
    x = x ^ (w1 * _U(9))
    y = y + v0 * _U(9) + _fetch(keys, at + 40, 8)
    z = _rot(z + w0, 33) * mul
    v0, v1 = _weak32(keys, at, v1 * mul, x + w0)
    w0, w1 = _weak32(keys, at + 32, z + w1, y + _fetch(keys, at + 16, 8))
    z, x = x, z
    return _len16(_len16(v0, w0, mul) + _shift_mix(y) * _K0 + z, _len16(v1, w1, mul) + x, mul)


def fingerprint64(keys: np.ndarray) -> np.ndarray:
    """FarmHash Fingerprint64 of each row of ``keys`` (uint8 [count, length]) as uint64."""
    keys = np.ascontiguousarray(keys, dtype=np.uint8)
    if keys.ndim != 2:
        raise ValueError("keys must be a 2-D uint8 array: one key per row")
    n = keys.shape[1]
    with np.errstate(over="ignore"):
        if n <= 16:
            return _len0to16(keys, n)
        if n <= 32:
            return _len17to32(keys, n)
        if n <= 64:
            return _len33to64(keys, n)
        return _long(keys, n)


def fingerprint64_bytes(data: bytes) -> int:
    """Fingerprint64 of one byte string (convenience for tests)."""
    return int(fingerprint64(np.frombuffer(data, np.uint8)[None, :])[0])


# ---------------------------------------------------------------------------------------
# The operation.
# ---------------------------------------------------------------------------------------


def validate(v: OpView) -> None:
    v.expect_counts(4, 1)
    hash_t = v.input_type(0)
    if hash_t not in HASH_TYPES:
        v.fail(f"hash must be TENSOR_FLOAT32 or TENSOR_FLOAT16, got {hash_t.name}", input=0)
    v.expect_types([HASH_TYPES, INPUT_TYPES, hash_t, T.INT32], [T.TENSOR_INT32])
    v.expect_rank(0, (2,))
    v.expect_rank(1, range(1, 1 << 16))
    h = v.inputs[0]
    if len(h.dimensions) == 2 and h.dimensions[1] > 32:
        v.fail(f"hash has {h.dimensions[1]} bits per function; at most 32 are supported", input=0)
    v.expect_scalar_in(3, (SPARSE_DEPRECATED, DENSE, SPARSE), "projection type")
    kind = v.constant_scalar(3)
    if kind == DENSE:
        if v.is_omitted(2):
            v.fail("weight is required for the DENSE projection type", input=2)
        v.expect_rank(2, (1,))
    elif kind in (SPARSE, SPARSE_DEPRECATED) and not v.is_omitted(2) and v.inputs[2].is_constant:
        v.fail("weight must be omitted for the SPARSE projection types", input=2)


@register(Op.LSH_PROJECTION, data_types=HASH_TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    seeds, x = ctx.inputs[0], ctx.inputs[1]
    kind = ctx.scalar(3)
    if seeds.ndim != 2 or seeds.shape[1] > 32:
        ctx.fail(f"hash must be 2-D with at most 32 bits per function, got shape {list(seeds.shape)}")
    if x.ndim < 1 or x.shape[0] == 0:
        ctx.fail(f"input must have rank >= 1 and a non-empty first dimension, got shape {list(x.shape)}")
    items = x.shape[0]
    weight = ctx.inputs[2] if ctx.has(2) else None
    if kind == DENSE:
        if weight is None:
            ctx.fail("weight is required for the DENSE projection type")
        if weight.ndim != 1 or weight.shape[0] != items:
            ctx.fail(f"weight shape {list(weight.shape)} must be [{items}] (input dim 0)")
    elif kind in (SPARSE, SPARSE_DEPRECATED):
        if weight is not None:
            ctx.fail("weight must be omitted for the SPARSE projection types")
    else:
        ctx.fail(f"projection type must be 1, 2 or 3, got {kind}")

    num_hash, num_bits = seeds.shape
    seed_bytes = seeds.astype("<f4").reshape(-1, 1).view(np.uint8)  # [S, 4]
    item_bytes = np.ascontiguousarray(x.astype(x.dtype.newbyteorder("<"))).view(np.uint8).reshape(items, -1)
    s = seed_bytes.shape[0]
    keys = np.concatenate([np.repeat(seed_bytes, items, axis=0), np.tile(item_bytes, (s, 1))], axis=1)
    signed = fingerprint64(keys).view(np.int64).astype(np.float64).reshape(s, items)
    terms = signed if weight is None else signed * weight.astype(np.float64)[None, :]
    # cumsum adds left to right, as the reference's running sum does (np.sum would pair up)
    score = np.cumsum(terms, axis=1)[:, -1]
    bits = (score > 0).astype(np.int64).reshape(num_hash, num_bits)
    if kind == DENSE:
        return [bits.reshape(-1).astype(np.int32)]
    signature = (bits << np.arange(num_bits - 1, -1, -1, dtype=np.int64)).sum(axis=1)
    if kind == SPARSE:
        signature = signature + np.arange(num_hash, dtype=np.int64) * (1 << num_bits)
    # int32 wrap-around, as the reference's int32 arithmetic (32-bit signatures can reach 2**31)
    return [signature.astype(np.uint64).astype(np.uint32).view(np.int32)]
