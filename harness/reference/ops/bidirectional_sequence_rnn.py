"""BIDIRECTIONAL_SEQUENCE_RNN: a forward and a backward RNN over one sequence (HAL 1.2;
parallel linking and the state outputs since HAL 1.3).

Inputs (15), tensors all of one type T = TENSOR_FLOAT32 or TENSOR_FLOAT16:
  0 input [max_time, batch, input_size] if time_major, else [batch, max_time, input_size]
  1-4 forward weights [fw_units, input_size], recurrent weights [fw_units, fw_units],
      bias [fw_units], hidden state [batch, fw_units]
  5-8 the same for the backward cell (bw_units); its weights have aux_input_size columns in
      parallel linking
  9 aux input (optional), laid out as input 0 with aux_input_size features
  10, 11 forward / backward aux weights (optional) [fw_units | bw_units, aux_input_size]
  12 fused activation INT32 (0 NONE, 1 RELU, 2 RELU1, 3 RELU6)
  13 time_major BOOL; 14 merge_outputs BOOL
Outputs, T:
  0 forward output [max_time, batch, fw_units] (batch major: [batch, max_time, ...]); with
    merge_outputs it is [..., fw_units + bw_units]: forward then backward units
  1 backward output (only without merge_outputs)
  then optionally (HAL 1.3) the forward and backward final states [batch, fw|bw_units]
  so 2 or 4 outputs without merge_outputs, 1 or 3 with it.

Linking modes, from which of inputs 9-11 are present:
  none present: no linking.
  aux input only (parallel linking): the backward cell reads the aux input instead of input 0.
  all three (cross linking): both cells add aux_input . aux_weights^T to their input term.
  anything else fails.
The backward cell walks time from the last step to the first; its output at step t is
written at t.  Step arithmetic is ``rnn.rnn_step`` (fp16 notes in rnn.py).

Where the reference departs from NeuralNetworks.h we follow the documentation: its cell
reads only the first input_size aux features in cross linking, and reads the parallel-linked
aux input with input 0's strides, so both are wrong (or read out of bounds) when
aux_input_size != input_size.  The vectors all have equal sizes, where the two agree.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import Lifetime
from nnconform.ir import OperationType as Op
from nnconform.reference.ops import rnn
from nnconform.reference.ops.registry import OpContext, OpView, register

INPUT, FW, BW, AUX, FW_AUX_W, BW_AUX_W, ACT, TIME_MAJOR, MERGE = 0, 1, 5, 9, 10, 11, 12, 13, 14
NO_LINKING, PARALLEL, CROSS = "none", "parallel", "cross"


def _linking(present: tuple[bool, bool, bool]) -> str | None:
    return {(False, False, False): NO_LINKING, (True, False, False): PARALLEL, (True, True, True): CROSS}.get(present)


def validate(v: OpView) -> None:
    v.expect_counts(15, (1, 2, 3, 4))
    rnn.check_float_signature(v, range(12), int_inputs=(ACT,), bool_inputs=(TIME_MAJOR, MERGE))
    rnn.check_required(v, [*range(9), ACT, TIME_MAJOR, MERGE])
    for i, rank in zip(range(9), (3, 2, 2, 1, 2, 2, 2, 1, 2)):
        v.expect_rank(i, (rank,))
    for i, rank in ((AUX, 3), (FW_AUX_W, 2), (BW_AUX_W, 2)):
        # a model input may be omitted at execution time, whatever dimensions it declares
        if not v.is_omitted(i) and v.inputs[i].lifetime != Lifetime.SUBGRAPH_INPUT:
            v.expect_rank(i, (rank,))
    rnn.check_activation(v, ACT)
    merge = v.constant_scalar(MERGE)
    if merge is not None:
        allowed = (1, 3) if merge else (2, 4)
        if len(v.outputs) not in allowed:
            v.fail(
                f"with merge_outputs={bool(merge)} gives {' or '.join(map(str, allowed))} outputs, got {len(v.outputs)}"
            )
    # model inputs may still be omitted at execution time; judge only what is fixed now
    fixed = [v.inputs[i].lifetime != Lifetime.SUBGRAPH_INPUT for i in (AUX, FW_AUX_W, BW_AUX_W)]
    if all(fixed) and _linking(tuple(not v.is_omitted(i) for i in (AUX, FW_AUX_W, BW_AUX_W))) is None:
        v.fail(
            "aux input, forward aux weights and backward aux weights must be all present, "
            "all omitted, or only the aux input present",
            input=AUX,
        )


@register(Op.BIDIRECTIONAL_SEQUENCE_RNN, data_types=rnn.TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[INPUT]
    if x.ndim != 3:
        ctx.fail(f"input must be 3-D, got shape {list(x.shape)}")
    act = rnn.runtime_activation(ctx, ACT)
    time_major, merge = bool(ctx.scalar(TIME_MAJOR)), bool(ctx.scalar(MERGE))
    n_out = len(ctx.out_operands)
    if n_out not in ((1, 3) if merge else (2, 4)):
        ctx.fail(f"{n_out} outputs do not match merge_outputs={merge}")
    mode = _linking(tuple(ctx.has(i) for i in (AUX, FW_AUX_W, BW_AUX_W)))
    if mode is None:
        ctx.fail("unsupported combination of aux input and aux weights (present/omitted)")

    tm = (lambda a: a) if time_major else (lambda a: np.swapaxes(a, 0, 1))
    xt = tm(x)  # [time, batch, input]
    steps, batch = xt.shape[0], xt.shape[1]
    aux = None
    if mode != NO_LINKING:
        if ctx.inputs[AUX].ndim != 3:
            ctx.fail(f"aux input must be 3-D, got shape {list(ctx.inputs[AUX].shape)}")
        aux = tm(ctx.inputs[AUX])
        if aux.shape[:2] != xt.shape[:2]:
            ctx.fail(
                f"aux input shape {list(ctx.inputs[AUX].shape)} must match input's first two "
                f"dimensions {list(x.shape[:2])}"
            )
    bw_in = aux if mode == PARALLEL else xt
    fw_w, fw_r, fw_b, fw_h, fw_units = rnn.check_cell(ctx, FW, xt.shape[2], batch, "forward ")
    bw_w, bw_r, bw_b, bw_h, bw_units = rnn.check_cell(ctx, BW, bw_in.shape[2], batch, "backward ")
    fw_aux_w = bw_aux_w = None
    if mode == CROSS:
        fw_aux_w, bw_aux_w = ctx.inputs[FW_AUX_W], ctx.inputs[BW_AUX_W]
        for name, wa, units in (("forward", fw_aux_w, fw_units), ("backward", bw_aux_w, bw_units)):
            if wa.shape != (units, aux.shape[2]):
                ctx.fail(f"{name} aux weights shape {list(wa.shape)} must be [{units}, {aux.shape[2]}]")

    dtype = ctx.output_dtype(0)
    fw_out = np.zeros((steps, batch, fw_units), dtype)
    bw_out = np.zeros((steps, batch, bw_units), dtype)
    for t in range(steps):
        fw_h = rnn.rnn_step(xt[t], fw_h, fw_w, fw_r, fw_b, act, aux[t] if mode == CROSS else None, fw_aux_w)
        fw_out[t] = fw_h
    for t in range(steps - 1, -1, -1):
        bw_h = rnn.rnn_step(bw_in[t], bw_h, bw_w, bw_r, bw_b, act, aux[t] if mode == CROSS else None, bw_aux_w)
        bw_out[t] = bw_h

    back = (lambda a: np.ascontiguousarray(a)) if time_major else (lambda a: np.ascontiguousarray(np.swapaxes(a, 0, 1)))
    results = [back(np.concatenate([fw_out, bw_out], axis=2))] if merge else [back(fw_out), back(bw_out)]
    if n_out in (3, 4):
        results += [np.array(fw_h, dtype), np.array(bw_h, dtype)]
    return results
