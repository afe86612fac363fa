"""UNIDIRECTIONAL_SEQUENCE_RNN: the RNN cell unrolled over a sequence (HAL 1.2; the state
output since HAL 1.3).

Inputs (7), tensors all of one type T = TENSOR_FLOAT32 or TENSOR_FLOAT16, none omitted:
  0 input [max_time, batch, input_size] if time_major, else [batch, max_time, input_size]
  1 weights [num_units, input_size]
  2 recurrent_weights [num_units, num_units]
  3 bias [num_units]
  4 hidden state [batch, num_units]: the state before the first step
  5 fused activation INT32 (0 NONE, 1 RELU, 2 RELU1, 3 RELU6)
  6 time_major INT32, 0 or 1
Outputs (1 or 2), T:
  0 output: every step's state, [max_time, batch, num_units] or [batch, max_time, num_units]
  1 (optional, HAL 1.3) the last step's state [batch, num_units]; with max_time 0 this is the
    input state.

Each step is ``rnn.rnn_step`` (see rnn.py for fp16 arithmetic); the state is carried in T.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperationType as Op
from nnconform.reference.ops import rnn
from nnconform.reference.ops.registry import OpContext, OpView, register


def validate(v: OpView) -> None:
    v.expect_counts(7, (1, 2))
    rnn.check_float_signature(v, range(5), int_inputs=(5, 6))
    rnn.check_required(v, range(7))
    for i, rank in zip(range(5), (3, 2, 2, 1, 2)):
        v.expect_rank(i, (rank,))
    rnn.check_activation(v, 5)
    v.expect_scalar_in(6, (0, 1), "time_major")


@register(Op.UNIDIRECTIONAL_SEQUENCE_RNN, data_types=rnn.TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    if x.ndim != 3:
        ctx.fail(f"input must be 3-D, got shape {list(x.shape)}")
    act = rnn.runtime_activation(ctx, 5)
    time_major = ctx.scalar(6)
    if time_major not in (0, 1):
        ctx.fail(f"time_major must be 0 or 1, got {time_major}")
    xt = x if time_major else np.swapaxes(x, 0, 1)  # [time, batch, input]
    w, r, b, h, units = rnn.check_cell(ctx, 1, xt.shape[2], xt.shape[1])
    steps = []
    for t in range(xt.shape[0]):
        h = rnn.rnn_step(xt[t], h, w, r, b, act)
        steps.append(h)
    dtype = ctx.output_dtype(0)
    out = np.stack(steps) if steps else np.zeros((0, xt.shape[1], units), dtype)
    if not time_major:
        out = np.swapaxes(out, 0, 1)
    results = [np.ascontiguousarray(out).astype(dtype)]
    if len(ctx.out_operands) == 2:
        results.append(np.array(h, dtype))
    return results
