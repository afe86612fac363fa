"""Operand-type families and the "same quantisation" gates, as every adapter uses them.

The families are NNAPI's: an adapter refuses (Unsupported) what its runtime cannot compute
faithfully, and these gates say which operand types an operation's mapping takes.  The
"same quantisation" rule is NNAPI's too: an operation that only moves data (reshape,
transpose, slicing, padding, ...) keeps stored 8-bit values unchanged, which is only correct
when the output's scale and zero point equal the input's; otherwise NNAPI requantises and a
plain data-movement mapping would be wrong.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from nnconform.driver.support import Unsupported
from nnconform.ir import Operand
from nnconform.ir import OperandType as T
from nnconform.ir.nnapi_params import same_quant

__all__ = [
    "FLOATS",
    "QUANT8",
    "DATA",
    "NUMERIC",
    "MOVABLE",
    "CASTABLE",
    "FILLABLE",
    "STORED_TYPES",
    "storage_table",
    "same_quant",
    "movable",
    "require_same_quant",
    "require_unchanged_quant",
    "fill_value",
    "pad_fill",
]

FLOATS = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
QUANT8 = (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
# Floats and 8-bit asymmetric data: what most image and data-movement operations accept.
DATA = FLOATS + QUANT8
NUMERIC = DATA + (T.TENSOR_INT32,)
# Any storage type pure data movement can carry.
MOVABLE = NUMERIC + (T.TENSOR_BOOL8,)
# The tensor types CAST converts between (NNAPI's CAST table without the 16-bit quantised ones).
CASTABLE = (T.TENSOR_FLOAT16, T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM)
# The output types FILL writes.
FILLABLE = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32)


def storage_table(float32, float16, int32, bool8, uint8, int8) -> dict:
    """NNAPI's operand types (tensors and scalars) -> a runtime's storage types.  An adapter
    stores NNAPI data unchanged: QUANT8_ASYMM is uint8; QUANT8_ASYMM_SIGNED, QUANT8_SYMM and
    QUANT8_SYMM_PER_CHANNEL are int8 (scale and zero point stay in the converter, or on the
    tensor for runtimes that keep them there).  The 16-bit quantised types are left out: no
    adapter stores them."""
    return {
        T.TENSOR_FLOAT32: float32,
        T.FLOAT32: float32,
        T.TENSOR_FLOAT16: float16,
        T.FLOAT16: float16,
        T.TENSOR_INT32: int32,
        T.INT32: int32,
        T.TENSOR_BOOL8: bool8,
        T.BOOL: bool8,
        T.TENSOR_QUANT8_ASYMM: uint8,
        T.TENSOR_QUANT8_ASYMM_SIGNED: int8,
        T.TENSOR_QUANT8_SYMM: int8,
        T.TENSOR_QUANT8_SYMM_PER_CHANNEL: int8,
    }


# The operand types every adapter stores (the keys of any storage_table).
STORED_TYPES = tuple(storage_table(*range(6)))


def movable(c, k: int = 0, types=MOVABLE) -> Operand:
    """Input ``k`` of a data-movement operation: one of ``types``, and every output carries
    its scale and zero point (otherwise NNAPI requantises)."""
    x = c.require(k, types)
    for out in c.outs:
        if not same_quant(x, out):
            raise Unsupported("quantised output with other parameters than the input")
    return x


def require_same_quant(c, inputs: Iterable[int], what: str, out: Operand | None = None) -> None:
    """Every input of ``inputs`` has the output's quantisation (``what`` names the operation
    for the message): the mapping moves or compares stored values without requantising."""
    out = c.outs[0] if out is None else out
    for k in inputs:
        if not same_quant(c.ins[k], out):
            raise Unsupported(f"quantised {what} with requantisation")


def require_unchanged_quant(x: Operand, out: Operand, what: str) -> None:
    """A quantised ``x`` whose values the mapping passes to ``out`` unchanged (a clamp, a max,
    a pooling window) must have the output's scale and zero point: NNAPI would requantise."""
    if x.type in QUANT8 and not same_quant(x, out):
        raise Unsupported(f"quantised {what} with other output parameters")


def fill_value(x: Operand) -> np.ndarray:
    """The stored value of real 0 in ``x``'s type: the zero point for 8-bit quantised data
    (what NNAPI pads with), else 0."""
    return np.asarray(x.zero_point if x.type in QUANT8 else 0, x.info.dtype)


def pad_fill(c, x: Operand, value_k: int | None) -> np.ndarray:
    """The pad value of PAD (``value_k`` None: real 0) or PAD_V2 (input ``value_k``).  For
    quantised data PAD_V2's INT32 value is stored as is, and only its low byte counts (the
    NNAPI CPU implementation casts it to the 8-bit type)."""
    if value_k is None:
        return fill_value(x)
    v = c.scalar(value_k)
    if x.type in QUANT8:
        v = np.asarray(v).astype(np.int64).astype(x.info.dtype)
    return np.asarray(v, x.info.dtype)
