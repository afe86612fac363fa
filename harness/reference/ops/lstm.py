"""LSTM: one time step of a long short-term memory cell (HAL 1.0; layer norm since HAL 1.2).

Inputs (23, or 27 with layer normalisation), all tensors of one type T = TENSOR_FLOAT32 or
TENSOR_FLOAT16 (fp16 since HAL 1.2):
  0  input               [batch, input_size]
  1-4   input-to-{input*, forget, cell, output} weights  [num_units, input_size]
  5-8   recurrent-to-{input*, forget, cell, output} weights [num_units, output_size]
  9-11  cell-to-{input, forget, output} (peephole) weights  [num_units]   (optional)
  12-15 {input*, forget, cell, output} gate bias          [num_units]
  16 projection weights  [output_size, num_units] (optional)
  17 projection bias     [output_size] (optional)
  18 output state in     [batch, output_size]
  19 cell state in       [batch, num_units]
  20 activation INT32: 0 none, 1 relu, 3 relu6, 4 tanh, 6 sigmoid
  21 cell clip, 22 projection clip: FLOAT32 (T fp32) or FLOAT16 (T fp16); 0 disables, >= 0
  23-26 {input*, forget, cell, output} layer-norm weights [num_units] (optional)
  (* omitted together for CIFG)
Outputs, all T:
  0 scratch buffer [batch, num_units * 4] ([batch, num_units * 3] with CIFG)
  1 output state out [batch, output_size]
  2 cell state out   [batch, num_units]
  3 output           [batch, output_size] (equal to the output state)

The cell arithmetic, its variants (CIFG, peephole, projection, layer norm, clipping) and the
reference's quirks are described in ``lstm_cell.py``.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops import lstm_cell as cell
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
INPUT, OUTPUT_STATE_IN, CELL_STATE_IN, ACTIVATION, CELL_CLIP = 0, 18, 19, 20, 21


def _layout(n_inputs: int) -> cell.CellLayout:
    return cell.CellLayout(first=1, layer_norm=23 if n_inputs == 27 else None)


def validate(v: OpView) -> None:
    v.expect_counts((23, 27), 4)
    tensors = [*range(0, 20), *(range(23, 27) if len(v.inputs) == 27 else ())]
    cell.validate_float_signature(v, tensors, ACTIVATION, CELL_CLIP)
    for i in (INPUT, OUTPUT_STATE_IN, CELL_STATE_IN):
        if v.is_omitted(i):
            v.fail("is required but omitted", input=i)
    v.expect_rank(INPUT, (2,))
    x = v.inputs[INPUT]
    n_input = x.dimensions[1] if x.fully_specified else None
    cell.static_cell_check(v, _layout(len(v.inputs)), n_input)


@register(Op.LSTM, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[INPUT]
    if x.ndim != 2:
        ctx.fail(f"input 0 must be 2-D [batch, input_size], got shape {list(x.shape)}")
    batch, n_input = x.shape
    flags, n_cell, n_output, w = cell.runtime_cell(ctx, _layout(len(ctx.inputs)), n_input)
    h0 = cell.check_state(ctx, OUTPUT_STATE_IN, (batch, n_output), "output state in")
    c0 = cell.check_state(ctx, CELL_STATE_IN, (batch, n_cell), "cell state in")
    params = cell.runtime_params(ctx, ACTIVATION, CELL_CLIP, flags)
    out, h, c, scratch = cell.run_sequence(params, w, x.astype(np.float32)[None], h0, c0)
    dtype = ctx.output_dtype(0)
    return [scratch.astype(dtype), h.astype(dtype), c.astype(dtype), out[0].astype(dtype)]
