"""HASHTABLE_LOOKUP: look keys up in a sorted key table and return their value rows.

inputs:  0 lookups, TENSOR_INT32 [k]: the keys to find;
         1 keys, TENSOR_INT32 [n], sorted ascending;
         2 values, tensor of TENSOR_FLOAT32, TENSOR_INT32 or TENSOR_QUANT8_ASYMM, shape [n, ...]
           (rank >= 1).
outputs: 0 values' type, shape [k, ...]: row i is the values row of the key equal to
           lookups[i], or all-zero bytes on a miss (stored 0, not the zero point).  Quantised
           outputs carry the values' scale and zero point;
         1 hits, TENSOR_QUANT8_ASYMM [k] with scale 1.0 and zero point 0: 1 for a hit, 0 for a
           miss.

The data type is that of input 2.  Lookup is a binary search, so unsorted keys give
unspecified (but deterministic) results; with duplicate keys any matching row is a valid
answer and we return the first.  Zero-sized inputs are rejected at run time.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM)


def validate(v: OpView) -> None:
    v.expect_counts(3, 2)
    v.expect_types([T.TENSOR_INT32, T.TENSOR_INT32, TYPES], [TYPES, T.TENSOR_QUANT8_ASYMM])
    v.expect_same_type(("input", 2), ("output", 0))
    v.expect_rank(0, (1,))
    v.expect_rank(1, (1,))
    v.expect_rank(2, range(1, 1 << 16))
    if v.inputs[2].info.is_quant:
        v.expect_same_quant(("input", 2), ("output", 0))
    hits = v.outputs[1]
    if hits.scale != 1.0 or hits.zero_point != 0:
        v.fail(f"hits must have scale 1.0 and zero point 0, got ({hits.scale:g}, {hits.zero_point})", output=1)


@register(Op.HASHTABLE_LOOKUP, data_types=TYPES, validate=validate, primary_input=2)
def execute(ctx: OpContext) -> list[np.ndarray]:
    lookups, keys, values = ctx.inputs
    if lookups.ndim != 1 or keys.ndim != 1:
        ctx.fail(f"lookups and keys must be 1-D, got ranks {lookups.ndim} and {keys.ndim}")
    if values.ndim < 1:
        ctx.fail("values must have rank >= 1")
    for i in range(3):
        if ctx.inputs[i].size == 0:
            ctx.fail(
                f"input {i} is zero-sized {list(ctx.inputs[i].shape)}; HASHTABLE_LOOKUP does not "
                "accept zero-sized tensors"
            )
    if keys.shape[0] != values.shape[0]:
        ctx.fail(f"keys has {keys.shape[0]} entries but values has {values.shape[0]} rows")
    pos = np.searchsorted(keys, lookups)
    found = pos < keys.shape[0]
    found[found] = keys[pos[found]] == lookups[found]
    out = np.zeros((lookups.shape[0], *values.shape[1:]), dtype=ctx.output_dtype(0))
    out[found] = values[pos[found]]
    return [out, found.astype(np.uint8)]
