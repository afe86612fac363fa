"""UNIDIRECTIONAL_SEQUENCE_LSTM: an LSTM run over a whole sequence (HAL 1.2; state outputs
since HAL 1.3).

Inputs (28), all tensors of one type T = TENSOR_FLOAT32 or TENSOR_FLOAT16:
  0  input  [max_time, batch, input_size] (time major) or [batch, max_time, input_size]
  1-19  as LSTM inputs 1-19 (weights, peepholes, biases, projection, output/cell state in)
  20 activation INT32 (0 none, 1 relu, 3 relu6, 4 tanh, 6 sigmoid)
  21 cell clip, 22 projection clip: FLOAT32 (T fp32) or FLOAT16 (T fp16), >= 0, 0 disables
  23 time_major BOOL
  24-27 {input, forget, cell, output} layer-norm weights [num_units] (optional)
Outputs (1 or 3), all T:
  0 output [max_time, batch, output_size] (or batch major, as the input)
  1 output state out [batch, output_size], 2 cell state out [batch, num_units] (HAL 1.3)

The states are carried in float32 from step to step (fp16 is narrowed only at the end).
Cell arithmetic and variants: ``lstm_cell.py``.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops import lstm_cell as cell
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
INPUT, OUTPUT_STATE_IN, CELL_STATE_IN, ACTIVATION, CELL_CLIP, TIME_MAJOR = 0, 18, 19, 20, 21, 23
LAYOUT = cell.CellLayout(first=1, layer_norm=24)


def validate(v: OpView) -> None:
    v.expect_counts(28, (1, 3))
    cell.validate_float_signature(v, [*range(0, 20), *range(24, 28)], ACTIVATION, CELL_CLIP, [TIME_MAJOR])
    for i in (INPUT, OUTPUT_STATE_IN, CELL_STATE_IN):
        if v.is_omitted(i):
            v.fail("is required but omitted", input=i)
    v.expect_rank(INPUT, (3,))
    x = v.inputs[INPUT]
    cell.static_cell_check(v, LAYOUT, x.dimensions[2] if x.fully_specified else None)


@register(Op.UNIDIRECTIONAL_SEQUENCE_LSTM, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[INPUT]
    if x.ndim != 3:
        ctx.fail(f"input 0 must be 3-D, got shape {list(x.shape)}")
    time_major = bool(ctx.scalar(TIME_MAJOR))
    xt = x.astype(np.float32) if time_major else np.swapaxes(x.astype(np.float32), 0, 1)
    batch, n_input = xt.shape[1], xt.shape[2]
    flags, n_cell, n_output, w = cell.runtime_cell(ctx, LAYOUT, n_input)
    h0 = cell.check_state(ctx, OUTPUT_STATE_IN, (batch, n_output), "output state in")
    c0 = cell.check_state(ctx, CELL_STATE_IN, (batch, n_cell), "cell state in")
    params = cell.runtime_params(ctx, ACTIVATION, CELL_CLIP, flags)
    out, h, c, _ = cell.run_sequence(params, w, xt, h0, c0)
    if not time_major:
        out = np.swapaxes(out, 0, 1)
    dtype = ctx.output_dtype(0)
    results = [np.ascontiguousarray(out).astype(dtype)]
    if len(ctx.out_operands) == 3:
        results += [h.astype(dtype), c.astype(dtype)]
    return results
