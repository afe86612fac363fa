"""SVDF: singular-value-decomposition filter, a stateful layer (one time step per call).

Inputs (7), tensors all of one type T = TENSOR_FLOAT32 or TENSOR_FLOAT16 (fp16 since HAL 1.2):
  0 input [batch, input_size]
  1 weights_feature [num_filters, input_size], num_filters = num_units * rank
  2 weights_time [num_filters, memory_size]
  3 bias [num_units] (optional)
  4 state in [batch, memory_size * num_filters]: per batch, num_filters rows of memory_size
    activations, oldest first
  5 rank INT32 > 0, dividing num_filters
  6 fused activation INT32 (0 NONE, 1 RELU, 2 RELU1, 3 RELU6)
Outputs (2), T: 0 state out [batch, memory_size * num_filters]; 1 output [batch, num_units].

Per batch:  memory = state with its newest column (memory_size - 1) replaced by
weights_feature . input;  per filter f: s_f = memory[f] . weights_time[f];
output[u] = act(bias[u] + sum of s_f over the rank filters u*rank .. u*rank+rank-1);
state out = memory shifted one column towards the oldest, newest column zeroed.

NeuralNetworks.h gives the state as [batch, (memory_size - 1) * num_units * rank]; the
reference (and the AOSP vectors) use memory_size * num_filters, which we follow, and we
refuse any other state size (the reference would read past the buffer).
fp16 is widened to float32, computed, and narrowed, as the reference does.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import activation
from nnconform.reference.ops import rnn
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
INPUT, W_FEATURE, W_TIME, BIAS, STATE, RANK, ACT = range(7)


def validate(v: OpView) -> None:
    v.expect_counts(7, 2)
    rnn.check_float_signature(v, range(5), int_inputs=(RANK, ACT))
    rnn.check_required(v, (INPUT, W_FEATURE, W_TIME, STATE, RANK, ACT))
    for i, rank in ((INPUT, 2), (W_FEATURE, 2), (W_TIME, 2), (STATE, 2)):
        v.expect_rank(i, (rank,))
    if not v.is_omitted(BIAS):
        v.expect_rank(BIAS, (1,))
    rank = v.constant_scalar(RANK)
    if rank is not None and rank <= 0:
        v.fail(f"rank must be positive, got {rank}", input=RANK)
    rnn.check_activation(v, ACT)
    wf = v.inputs[W_FEATURE]
    if rank and rank > 0 and wf.fully_specified and wf.dimensions[0] % rank:
        v.fail(f"num_filters {wf.dimensions[0]} is not a multiple of rank {rank}", input=W_FEATURE)


@register(Op.SVDF, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x, wf, wt, state = (ctx.inputs[i] for i in (INPUT, W_FEATURE, W_TIME, STATE))
    bias = ctx.inputs[BIAS] if ctx.has(BIAS) else None
    rank = ctx.scalar(RANK)
    act = rnn.runtime_activation(ctx, ACT)
    for name, arr in (("input", x), ("weights_feature", wf), ("weights_time", wt), ("state in", state)):
        if arr.ndim != 2:
            ctx.fail(f"{name} must be 2-D, got shape {list(arr.shape)}")
    batch, input_size = x.shape
    filters, memory = wt.shape
    if rank <= 0 or wf.shape[0] % rank:
        ctx.fail(f"rank {rank} must be positive and divide num_filters {wf.shape[0]}")
    units = wf.shape[0] // rank
    if wf.shape[1] != input_size or filters != wf.shape[0]:
        ctx.fail(
            f"weights_feature {list(wf.shape)} / weights_time {list(wt.shape)} must be "
            f"[num_filters, {input_size}] / [num_filters, memory_size]"
        )
    if bias is not None and bias.shape != (units,):
        ctx.fail(f"bias shape {list(bias.shape)} must be [{units}]")
    if state.shape != (batch, memory * filters):
        ctx.fail(
            f"state in shape {list(state.shape)} must be [{batch}, {memory * filters}] (memory_size * num_filters)"
        )

    f32 = np.float32
    mem = state.astype(f32).reshape(batch, filters, memory).copy()
    mem[:, :, -1] = x.astype(f32) @ wf.astype(f32).T
    per_filter = np.einsum("bfm,fm->bf", mem, wt.astype(f32))
    # the reference starts from the bias and adds the rank terms in order
    out = np.zeros((batch, units), f32) if bias is None else np.tile(bias.astype(f32), (batch, 1))
    for term in np.moveaxis(per_filter.reshape(batch, units, rank), 2, 0):
        out = out + term
    out = activation.apply_float(out, act)
    new_state = np.zeros_like(mem)
    new_state[:, :, :-1] = mem[:, :, 1:]
    dtype = ctx.output_dtype(0)
    return [new_state.reshape(batch, memory * filters).astype(dtype), out.astype(ctx.output_dtype(1))]
