"""QUANTIZED_16BIT_LSTM: one step of a quantised LSTM cell with 16-bit cell state (HAL 1.2),
plus the gemmlowp int16 fixed-point functions it and QUANTIZED_LSTM share.

Inputs (15):
  0  input [num_batches, input_size] TENSOR_QUANT8_ASYMM, scale 1/128, zero point 128
  1-4  input-to-{input, forget, cell, output} weights [output_size, input_size] QUANT8_ASYMM
  5-8  recurrent-to-{input, forget, cell, output} weights [output_size, output_size]
       (all eight weights share one scale and zero point)
  9-12 {input, forget, cell, output} gate bias [output_size] TENSOR_INT32,
       scale = weights scale / 128, zero point 0
  13 previous cell state [num_batches, output_size] TENSOR_QUANT16_SYMM, scale 2**-11, zp 0
  14 previous output [num_batches, output_size] QUANT8_ASYMM, scale 1/128, zero point 128
Outputs (2): 0 cell state out (as input 13), 1 output (as input 14).

Arithmetic (TFLite's legacy quantised LstmCell with StateIntegerBits = 4, bit for bit):
the four gates' pre-activations come from one fully connected layer over the concatenated
[input | previous output] (values - 128) with weights (values - weights zero point), int32
accumulators starting from the bias, requantised by 4096 * bias_scale to Q3.12 int16 and
saturated.  Reference quirk kept: the concatenated weight matrix holds the recurrent weights
in its first output_size columns and the input weights after them, while the concatenated
activations hold the input first; when input_size != output_size the columns of activations
and weights are therefore not paired by name.  (The CTS vectors encode this behaviour.)
Then, per unit, in gemmlowp 16-bit fixed point: i = logistic(Q3), g = tanh(Q3),
f = logistic(Q3), o = logistic(Q3); c = saturating_add(rescale_Q4(i * g), f * c_prev);
h = o * tanh(rescale_Q3(c)); output = 128 + clamp(rounding_shift(h, 8), -128, 127).
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith.fixedpoint16 import (
    INT16_MAX,
    INT16_MIN,
    logistic16,
    rescale16,
    saturating_add16,
    srdhm16,
    tanh16,
)
from nnconform.reference.arith.quant import (
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    rounding_divide_by_pot,
)
from nnconform.reference.ops.registry import OpContext, OpView, register

# ---------------------------------------------------------------------------------------
# QUANTIZED_16BIT_LSTM
# ---------------------------------------------------------------------------------------

Q8, Q16, I32 = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT16_SYMM, T.TENSOR_INT32
INPUT, PREV_CELL, PREV_OUTPUT = 0, 13, 14
WEIGHTS = range(1, 9)
BIASES = range(9, 13)
STATE_SCALE = 2.0**-11  # StateIntegerBits = 4


def _f32(x: float) -> np.float32:
    return np.float32(x)


def _check_quant(fail, scale, zp, want_scale, want_zp, what) -> None:
    if _f32(scale) != _f32(want_scale) or zp != want_zp:
        fail(f"{what} must have scale {want_scale:g} and zero point {want_zp}, got {scale:g} and {zp}")


def _state_integer_bits(scale: float) -> int | None:
    """15 + log2(scale) when the scale is (nearly) a power of two (AOSP CheckedLog2)."""
    if not scale > 0:
        return None
    lg = float(np.log(np.float32(scale)) * (np.float32(1.0) / np.log(np.float32(2.0))))
    r = float(np.sign(lg) * np.floor(abs(lg) + 0.5))
    return 15 + int(r) if abs(lg - r) < 1e-3 else None


def _check_signature(ops, fail, outputs=None) -> None:
    """Quantisation rules shared by validation (operands) and execution."""
    x, prev_out, prev_cell = ops[INPUT], ops[PREV_OUTPUT], ops[PREV_CELL]
    _check_quant(lambda m: fail(INPUT, m), x.scale, x.zero_point, 1 / 128, 128, "input")
    _check_quant(lambda m: fail(PREV_OUTPUT, m), prev_out.scale, prev_out.zero_point, 1 / 128, 128, "previous output")
    w0 = ops[1]
    if w0.scale == 0:
        fail(1, "weights scale must not be 0")
    for i in WEIGHTS:
        if ops[i].scale != w0.scale or ops[i].zero_point != w0.zero_point:
            fail(
                i,
                f"weights must share input 1's scale and zero point ({w0.scale:g}, {w0.zero_point}), "
                f"got ({ops[i].scale:g}, {ops[i].zero_point})",
            )
    b0 = ops[9]
    if _f32(b0.scale) != _f32(float(_f32(w0.scale)) / 128.0) or b0.zero_point != 0:
        fail(
            9,
            f"bias must have scale weights_scale / 128 = {w0.scale / 128:g} and zero point 0, "
            f"got {b0.scale:g} and {b0.zero_point}",
        )
    for i in BIASES:
        if ops[i].scale != b0.scale or ops[i].zero_point != 0:
            fail(i, f"bias must share input 9's scale {b0.scale:g} and zero point 0")
    if prev_cell.zero_point != 0 or _state_integer_bits(prev_cell.scale) != 4:
        fail(
            PREV_CELL,
            f"cell state must have scale 2^-11 (16 / 32768) and zero point 0, got "
            f"{prev_cell.scale:g} and {prev_cell.zero_point}",
        )
    if outputs is not None:
        cell_out, out = outputs
        if cell_out.scale != prev_cell.scale or cell_out.zero_point != prev_cell.zero_point:
            fail(None, "output 0 (cell state out) must have the previous cell state's scale and zero point")
        _check_quant(lambda m: fail(None, m), out.scale, out.zero_point, 1 / 128, 128, "output 1")


def validate(v: OpView) -> None:
    v.expect_counts(15, 2)
    v.expect_types([Q8] * 9 + [I32] * 4 + [Q16, Q8], [Q16, Q8])
    for i in range(15):
        if v.is_omitted(i):
            v.fail("is required but omitted", input=i)
    for i in (INPUT, PREV_CELL, PREV_OUTPUT, *WEIGHTS):
        v.expect_rank(i, (2,))
    for i in BIASES:
        v.expect_rank(i, (1,))

    def fail(i, m):
        if i is None:
            v.fail(m)
        v.fail(m, input=i)

    _check_signature(v.inputs, fail, v.outputs)
    dims = [op.dimensions for op in v.inputs]
    if all(v.inputs[i].fully_specified for i in range(15)):
        _check_shapes(dims, fail)


def _check_shapes(dims, fail) -> tuple[int, int, int]:
    batches, input_size = dims[INPUT]
    if dims[PREV_OUTPUT][0] != batches:
        fail(PREV_OUTPUT, f"must have {batches} batches, got {list(dims[PREV_OUTPUT])}")
    output_size = dims[PREV_OUTPUT][1]
    for i in WEIGHTS:
        want = (output_size, input_size if i < 5 else output_size)
        if tuple(dims[i]) != want:
            fail(i, f"must have shape {list(want)}, got {list(dims[i])}")
    for i in BIASES:
        if tuple(dims[i]) != (output_size,):
            fail(i, f"must have shape {[output_size]}, got {list(dims[i])}")
    if tuple(dims[PREV_CELL]) != (batches, output_size):
        fail(PREV_CELL, f"must have shape {[batches, output_size]}, got {list(dims[PREV_CELL])}")
    return batches, input_size, output_size


@register(Op.QUANTIZED_16BIT_LSTM, data_types=(Q8,), validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    def fail(i, m):
        ctx.fail(m if i is None else f"input {i}: {m}")

    for i in range(15):
        if not ctx.has(i):
            fail(i, "is required but omitted")
        if ctx.inputs[i].ndim != (1 if i in BIASES else 2):
            fail(i, f"has rank {ctx.inputs[i].ndim}")
    _check_signature(ctx.in_operands, fail, ctx.out_operands)
    batches, input_size, output_size = _check_shapes([v.shape for v in ctx.inputs], fail)
    ins = [v.astype(np.int64) for v in ctx.inputs]
    w_zp = ctx.in_operands[1].zero_point
    # [input | previous output] against [recurrent | input] weight columns: see the docstring.
    acts = np.concatenate([ins[INPUT], ins[PREV_OUTPUT]], axis=1) - 128
    gate_order = ((1, 5), (3, 7), (2, 6), (4, 8))  # input, cell (modulation), forget, output
    weights = np.concatenate([np.concatenate([ins[r], ins[i]], axis=1) for i, r in gate_order]) - w_zp
    bias = np.concatenate([ins[9], ins[11], ins[10], ins[12]])
    acc = bias + acts @ weights.T  # [batches, 4 * output_size]
    multiplier, shift = quantize_multiplier(4096.0 * float(_f32(ctx.in_operands[9].scale)))
    acc = np.clip(multiply_by_quantized_multiplier(acc, multiplier, shift), INT16_MIN, INT16_MAX)
    pre_i, pre_g, pre_f, pre_o = np.split(acc, 4, axis=1)
    i_gate, g_gate = logistic16(pre_i, 3), tanh16(pre_g, 3)
    f_gate, o_gate = logistic16(pre_f, 3), logistic16(pre_o, 3)
    input_times_mod = srdhm16(i_gate, g_gate)  # Q0
    prev_times_forget = srdhm16(f_gate, ins[PREV_CELL])  # Q0 * Q4 -> Q4
    new_cell = saturating_add16(rescale16(input_times_mod, 0, 4), prev_times_forget)
    h = srdhm16(o_gate, tanh16(rescale16(new_cell, 4, 3), 3))  # Q0
    out = 128 + np.clip(rounding_divide_by_pot(h, 8), -128, 127)
    return [new_cell.astype(np.int16), out.astype(np.uint8)]
