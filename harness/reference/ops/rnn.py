"""RNN: one step of a basic (Elman) recurrent layer, and the RNN cell shared with
UNIDIRECTIONAL_SEQUENCE_RNN and BIDIRECTIONAL_SEQUENCE_RNN.

RNN inputs (6, none may be omitted), all tensors of one type T = TENSOR_FLOAT32 or
TENSOR_FLOAT16 (fp16 since HAL 1.2):
  0 input [batch, input_size]
  1 weights [num_units, input_size]
  2 recurrent_weights [num_units, num_units]
  3 bias [num_units]
  4 hidden state in [batch, num_units]
  5 fused activation INT32: 0 NONE, 1 RELU, 2 RELU1, 3 RELU6
Outputs (2), T: 0 hidden state out [batch, num_units]; 1 output [batch, num_units] (equal).

  output = state = act(input . weights^T + state_in . recurrent_weights^T + bias)

Cell arithmetic (``rnn_step``): fp32 in float32.  fp16: the reference runs the cell in
half precision: it starts from the bias and adds one product at a time (input terms, then
auxiliary-input terms, then recurrent terms), storing the running sum as fp16 after each
addition.  We do the same with the product formed in float32 (exact for two fp16 values),
so each step rounds once more than a fused multiply-add would; the hidden state is fp16 from
step to step.
RELU1: the reference's activation functor has no RELU1 case (it aborts); we clamp to
[-1, 1] as NeuralNetworks.h documents.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import activation
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)


# ---------------------------------------------------------------------------------------
# The shared cell.
# ---------------------------------------------------------------------------------------


def rnn_step(
    x: np.ndarray,
    h: np.ndarray,
    weights: np.ndarray,
    recurrent: np.ndarray,
    bias: np.ndarray,
    act: int,
    aux: np.ndarray | None = None,
    aux_weights: np.ndarray | None = None,
) -> np.ndarray:
    """One RNN step for a batch: returns act(x.W^T [+ aux.Waux^T] + h.R^T + bias).

    All arrays share one dtype, float32 or float16 (the result's dtype)."""
    pairs = [(x, weights)]
    if aux is not None:
        pairs.append((aux, aux_weights))
    pairs.append((h, recurrent))
    if x.dtype == np.float32:
        acc = np.broadcast_to(bias, (x.shape[0], bias.shape[0])).astype(np.float32)
        for cols, w in pairs:
            acc = acc + cols @ w.T
        return activation.apply_float(acc, act)
    acc = np.broadcast_to(bias, (x.shape[0], bias.shape[0])).astype(np.float16)
    for cols, w in pairs:
        c32, w32 = cols.astype(np.float32), w.astype(np.float32)
        # one term at a time: a loop over the reduction dimension, vectorised over batch x units
        for k in range(c32.shape[1]):
            acc = (acc.astype(np.float32) + c32[:, k : k + 1] * w32[None, :, k]).astype(np.float16)
    return activation.apply_float(acc, act)


# ---------------------------------------------------------------------------------------
# Signature helpers shared by the three RNN operations.
# ---------------------------------------------------------------------------------------


def check_float_signature(
    v: OpView, tensor_inputs: Sequence[int], int_inputs: Sequence[int] = (), bool_inputs: Sequence[int] = ()
) -> T:
    """Input 0 picks T (fp32/fp16); the listed tensor inputs and every output must be T."""
    t = v.input_type(0)
    if t not in TYPES:
        v.fail(f"must be TENSOR_FLOAT32 or TENSOR_FLOAT16, got {t.name}", input=0)
    wanted: list = [None] * len(v.inputs)
    for i in tensor_inputs:
        wanted[i] = t
    for i in int_inputs:
        wanted[i] = T.INT32
    for i in bool_inputs:
        wanted[i] = T.BOOL
    v.expect_types(wanted, [t] * len(v.outputs))
    return t


def check_activation(v: OpView, i: int) -> None:
    v.expect_scalar_in(i, activation.FUSED_ACTIVATIONS, "fused activation")


def check_required(v: OpView, inputs: Sequence[int]) -> None:
    for i in inputs:
        if v.is_omitted(i):
            v.fail("is required but omitted", input=i)


def runtime_activation(ctx: OpContext, i: int) -> int:
    act = ctx.scalar(i)
    if act not in activation.FUSED_ACTIVATIONS:
        ctx.fail(f"fused activation must be 0..3, got {act}")
    return act


def check_cell(ctx: OpContext, first: int, input_size: int, batch: int, what: str = "") -> tuple:
    """Weights, recurrent weights, bias, hidden state at inputs first..first+3: checks their
    shapes against each other and returns them with num_units."""
    w, r, b, h = (ctx.inputs[first + k] for k in range(4))
    names = ("weights", "recurrent weights", "bias", "hidden state")
    for k, (arr, rank) in enumerate(zip((w, r, b, h), (2, 2, 1, 2))):
        if arr is None:
            ctx.fail(f"{what}{names[k]} (input {first + k}) is required")
        if arr.ndim != rank:
            ctx.fail(f"{what}{names[k]} (input {first + k}) must be {rank}-D, got shape {list(arr.shape)}")
    units = w.shape[0]
    if w.shape[1] != input_size:
        ctx.fail(f"{what}weights shape {list(w.shape)} must be [num_units, {input_size}]")
    if r.shape != (units, units) or b.shape != (units,):
        ctx.fail(
            f"{what}recurrent weights {list(r.shape)} / bias {list(b.shape)} must be [{units}, {units}] / [{units}]"
        )
    if h.shape != (batch, units):
        ctx.fail(f"{what}hidden state shape {list(h.shape)} must be [{batch}, {units}]")
    return w, r, b, h, units


# ---------------------------------------------------------------------------------------
# RNN.
# ---------------------------------------------------------------------------------------


def validate(v: OpView) -> None:
    v.expect_counts(6, 2)
    check_float_signature(v, range(5), int_inputs=(5,))
    check_required(v, range(6))
    for i, rank in zip(range(5), (2, 2, 2, 1, 2)):
        v.expect_rank(i, (rank,))
    check_activation(v, 5)
    dims = [op.dimensions if op.fully_specified else None for op in v.inputs[:5]]
    x, w, r, b, _ = dims
    if x and w and x[1] != w[1]:
        v.fail(f"weights {list(w)} must have input_size {x[1]} columns", input=1)
    if w and b and w[0] != b[0]:
        v.fail(f"bias {list(b)} must have num_units = {w[0]} entries", input=3)
    if b and r and r != (b[0], b[0]):
        v.fail(f"recurrent weights {list(r)} must be [{b[0]}, {b[0]}]", input=2)


@register(Op.RNN, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    if x.ndim != 2:
        ctx.fail(f"input must be 2-D, got shape {list(x.shape)}")
    act = runtime_activation(ctx, 5)
    w, r, b, h, _ = check_cell(ctx, 1, x.shape[1], x.shape[0])
    out = rnn_step(x, h, w, r, b, act).astype(ctx.output_dtype(1))
    return [out.copy(), out]
