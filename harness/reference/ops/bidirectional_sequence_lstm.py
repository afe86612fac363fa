"""BIDIRECTIONAL_SEQUENCE_LSTM: a forward and a backward LSTM over one sequence (HAL 1.2;
state outputs since HAL 1.3).

Inputs (61), tensors of one type T = TENSOR_FLOAT32 or TENSOR_FLOAT16:
  0  input [max_time, batch, input_size] (time major) or [batch, max_time, input_size]
  1-17  forward cell: weights, peepholes, biases, projection (as LSTM inputs 1-17)
  18-34 backward cell: the same
  35 fw output state in [batch, fw_output_size], 36 fw cell state in [batch, fw_num_units]
  37 bw output state in, 38 bw cell state in
  39 aux input (optional) [max_time, batch, aux_input_size] in the input's layout
  40-43 fw aux-input-to-{input, forget, cell, output} weights (optional)
  44-47 bw aux-input-to-{input, forget, cell, output} weights (optional)
  48 activation INT32 (0 none, 1 relu, 3 relu6, 4 tanh, 6 sigmoid)
  49 cell clip, 50 projection clip: FLOAT32 (T fp32) or FLOAT16 (T fp16), >= 0
  51 merge_outputs BOOL, 52 time_major BOOL
  53-56 fw layer-norm weights, 57-60 bw layer-norm weights (optional)
Outputs (1, 2, 5 or 6), all T:
  0 fw output [.., fw_output_size] (merge_outputs: [.., fw_output_size + bw_output_size])
  1 bw output (absent with merge_outputs)
  then (HAL 1.3) fw output state, fw cell state, bw output state, bw cell state.

Auxiliary input ("linking"): no aux input and no aux weights: independent directions;
aux input without weights (parallel linking): the backward cell reads the aux input instead
of the input; aux input with weights (cross linking): both cells add W_aux . aux to their
gates, and the aux input must then be as wide as the input.  Aux weights without an aux
input are an error.

Reference behaviour kept: the variant flags (CIFG, peephole, layer norm, projection) of the
*backward* cell are used for both directions, because the reference stores both cells' checks
into one parameter set and the backward check runs last.  A tensor those flags ask for that
the forward cell lacks reads as zeros (what the reference's fp16 path does).
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops import lstm_cell as cell
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
INPUT = 0
FW_H, FW_C, BW_H, BW_C = 35, 36, 37, 38
AUX_INPUT = 39
ACTIVATION, CELL_CLIP, MERGE_OUTPUTS, TIME_MAJOR = 48, 49, 51, 52
FW = cell.CellLayout(first=1, layer_norm=53, aux=40)
BW = cell.CellLayout(first=18, layer_norm=57, aux=44)


def _aux_state(present) -> tuple[bool, bool, bool]:
    """(has aux input, has fw aux weights, has bw aux weights) from a presence test."""
    return present(AUX_INPUT), present(41), present(45)


def _linking(has_aux: bool, fw_w: bool, bw_w: bool, fail) -> str:
    if fw_w != bw_w:
        fail(45, "forward and backward aux weights must be both present or both omitted")
    if not has_aux and fw_w:
        fail(AUX_INPUT, "aux weights are given without an aux input")
    return "none" if not has_aux else ("cross" if fw_w else "parallel")


def _check_aux_weights(present, cifg: bool, fail) -> None:
    for first in (40, 44):
        have = [present(first + k) for k in range(4)]
        if cifg and have[0]:
            fail(first, "aux-input-to-input weights must be omitted with CIFG")
        if any(have[1:]) and not (all(have[1:]) and (have[0] or cifg)):
            fail(first + 1, "aux weights must be all present or all omitted")


def validate(v: OpView) -> None:
    v.expect_counts(61, (1, 2, 5, 6))
    cell.validate_float_signature(
        v, [*range(0, 48), *range(53, 61)], ACTIVATION, CELL_CLIP, [MERGE_OUTPUTS, TIME_MAJOR]
    )
    for i in (INPUT, FW_H, FW_C, BW_H, BW_C):
        if v.is_omitted(i):
            v.fail("is required but omitted", input=i)
    v.expect_rank(INPUT, (3,))
    merge = v.constant_scalar(MERGE_OUTPUTS)
    if merge is not None and len(v.outputs) in (2, 6) and merge:
        v.fail(f"merge_outputs is true, so the op gives 1 or 5 outputs, got {len(v.outputs)}", input=MERGE_OUTPUTS)
    if merge is not None and len(v.outputs) in (1, 5) and not merge:
        v.fail(f"merge_outputs is false, so the op gives 2 or 6 outputs, got {len(v.outputs)}", input=MERGE_OUTPUTS)
    present = lambda i: not v.is_omitted(i)
    _linking(*_aux_state(present), lambda i, m: v.fail(m, input=i))
    x = v.inputs[INPUT]
    n_input = x.dimensions[2] if x.fully_specified else None
    fw_flags = cell.static_cell_check(v, FW, n_input, "forward ")
    if fw_flags is not None:
        _check_aux_weights(present, fw_flags.use_cifg, lambda i, m: v.fail(m, input=i))
    aux = v.inputs[AUX_INPUT]
    parallel = present(AUX_INPUT) and not present(41)
    bw_n_input = n_input if not parallel else (aux.dimensions[2] if aux.fully_specified else None)
    cell.static_cell_check(v, BW, bw_n_input, "backward ")


def _to_time_major(a: np.ndarray, time_major: bool) -> np.ndarray:
    a = a.astype(np.float32)
    return a if time_major else np.swapaxes(a, 0, 1)


@register(Op.BIDIRECTIONAL_SEQUENCE_LSTM, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[INPUT]
    if x.ndim != 3:
        ctx.fail(f"input 0 must be 3-D, got shape {list(x.shape)}")
    time_major = bool(ctx.scalar(TIME_MAJOR))
    merge = bool(ctx.scalar(MERGE_OUTPUTS))
    n_outputs = len(ctx.out_operands)
    if (n_outputs in (1, 5)) != merge:
        ctx.fail(f"merge_outputs={merge} does not match the operation's {n_outputs} outputs")
    fail = lambda i, m: ctx.fail(f"input {i}: {m}")
    linking = _linking(*_aux_state(ctx.has), fail)
    xt = _to_time_major(x, time_major)
    batch, n_input = xt.shape[1], xt.shape[2]
    aux = None
    if linking != "none":
        a = ctx.inputs[AUX_INPUT]
        if a.ndim != 3 or a.shape[:2] != x.shape[:2]:
            ctx.fail(
                f"input {AUX_INPUT} (aux input) must be 3-D with the input's first two dimensions "
                f"{list(x.shape[:2])}, got {list(a.shape)}"
            )
        if linking == "cross" and a.shape[2] != n_input:
            ctx.fail(
                f"input {AUX_INPUT} (aux input) must be as wide as the input ({n_input}) with aux "
                f"weights, got {a.shape[2]}"
            )
        aux = _to_time_major(a, time_major)

    fw_flags, fw_cells, fw_out, fw_w = cell.runtime_cell(ctx, FW, n_input, "forward ")
    _check_aux_weights(ctx.has, fw_flags.use_cifg, fail)
    bw_x = aux if linking == "parallel" else xt
    bw_flags, bw_cells, bw_out, bw_w = cell.runtime_cell(ctx, BW, bw_x.shape[2], "backward ")
    if linking == "cross":
        for name, w in (("forward", fw_w), ("backward", bw_w)):
            n_cells = fw_cells if name == "forward" else bw_cells
            for k, g in enumerate(cell.GATES):
                m = w[f"aux_input_to_{g}_weights"]
                if m is not None and m.shape != (n_cells, n_input):
                    ctx.fail(
                        f"{name} aux-input-to-{g} weights must have shape {[n_cells, n_input]}, got {list(m.shape)}"
                    )
    # the backward cell's flags win for both directions (see the module docstring)
    params = cell.runtime_params(ctx, ACTIVATION, CELL_CLIP, bw_flags)
    cross_aux = aux if linking == "cross" else None

    fw_h0 = cell.check_state(ctx, FW_H, (batch, fw_out), "forward output state in")
    fw_c0 = cell.check_state(ctx, FW_C, (batch, fw_cells), "forward cell state in")
    bw_h0 = cell.check_state(ctx, BW_H, (batch, bw_out), "backward output state in")
    bw_c0 = cell.check_state(ctx, BW_C, (batch, bw_cells), "backward cell state in")
    fw_seq, fw_h, fw_c, _ = cell.run_sequence(params, fw_w, xt, fw_h0, fw_c0, cross_aux, forward=True)
    bw_seq, bw_h, bw_c, _ = cell.run_sequence(params, bw_w, bw_x, bw_h0, bw_c0, cross_aux, forward=False)
    if not time_major:
        fw_seq, bw_seq = np.swapaxes(fw_seq, 0, 1), np.swapaxes(bw_seq, 0, 1)
    dtype = ctx.output_dtype(0)
    if merge:
        results = [np.concatenate([fw_seq, bw_seq], axis=2).astype(dtype)]
    else:
        results = [np.ascontiguousarray(fw_seq).astype(dtype), np.ascontiguousarray(bw_seq).astype(dtype)]
    if n_outputs in (5, 6):
        results += [s.astype(dtype) for s in (fw_h, fw_c, bw_h, bw_c)]
    return results
