"""The float LSTM cell shared by LSTM, UNIDIRECTIONAL_SEQUENCE_LSTM and
BIDIRECTIONAL_SEQUENCE_LSTM (AOSP ``LSTMCell::LSTMStep`` / ``LSTMEvalFloat32``).

One cell is described by 21 tensors, numbered here as in the LSTM operation (offsets differ
per operation, see ``CellLayout``):

  input-to-{input, forget, cell, output} weights    [num_units, input_size]   (input: optional)
  recurrent-to-{input, forget, cell, output} weights [num_units, output_size] (input: optional)
  cell-to-{input, forget, output} (peephole)         [num_units]               (all optional)
  {input, forget, cell, output} gate bias            [num_units]               (input: optional)
  projection weights [output_size, num_units], projection bias [output_size] (optional)
  {input, forget, cell, output} layer-norm weights   [num_units]               (optional)
plus, for the bidirectional op, auxiliary-input-to-{input, forget, cell, output} weights.

Which variant runs follows from which optional tensors are present (the reference's rules):
CIFG (coupled input/forget gate, input gate = 1 - forget gate) when input-to-input weights
are absent; peephole when cell-to-output weights are present; layer normalisation when the
output layer-norm weights are present; projection when projection weights are present.
The "all or none" rules (CIFG pair, peepholes, layer norms, projection bias only with
weights) are checked by :func:`configure`.

One step, vectorised over the batch, all in float32 (fp16 operands are widened first and
the results narrowed at the very end, as the reference does; the state stays float32
between time steps):

  gate_x = W_x . x (+ W_aux_x . aux) + R_x . h_prev (+ peephole_x * c)     x in i, f, c, o
  without layer norm the sum starts from the bias; with it, the sum is normalised per batch
  row (mean 0, variance 1, epsilon 1e-8), scaled by the layer-norm weights, then biased.
  i = sigmoid(gate_i) (CIFG: not computed), f = sigmoid(gate_f), g = act(gate_c)
  c_new = f * c_prev + g * (CIFG ? 1 - f : i), clipped to [-cell_clip, cell_clip] if > 0
  o = sigmoid(gate_o) (peephole uses c_new), h = o * act(c_new)
  out = projection ? clip(P . h + b_proj, proj_clip) : h;  the next step's h_prev is out.

Activation codes (input "activation"): 0 none, 1 relu, 3 relu6, 4 tanh, 6 sigmoid.
Reference quirk kept on purpose: TFLite's ApplyActivationToVector returns without writing
for activation 0, so with "none" the cell-output product uses the cell gate g, not c_new
(h = o * g).

The scratch-buffer output of LSTM holds the gate buffers after the step, gate by gate:
[i | act(c_new) | f | h] (CIFG: [act(c_new) | 1 - f | h]), each a [batch, num_units] block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

ACT_NONE, ACT_RELU, ACT_RELU1, ACT_RELU6, ACT_TANH, ACT_SIGNBIT, ACT_SIGMOID = range(7)
# The values NeuralNetworks.h documents for the "activation" input of the float LSTMs.
LSTM_ACTIVATIONS = (ACT_NONE, ACT_RELU, ACT_RELU6, ACT_TANH, ACT_SIGMOID)

GATES = ("input", "forget", "cell", "output")

# Names of the per-cell tensors, in the order the operations list them.
CELL_TENSORS = (
    *(f"input_to_{g}_weights" for g in GATES),
    *(f"recurrent_to_{g}_weights" for g in GATES),
    "cell_to_input_weights",
    "cell_to_forget_weights",
    "cell_to_output_weights",
    "input_gate_bias",
    "forget_gate_bias",
    "cell_gate_bias",
    "output_gate_bias",
    "projection_weights",
    "projection_bias",
)
LAYER_NORM_TENSORS = tuple(f"{g}_layer_norm_weights" for g in GATES)
AUX_TENSORS = tuple(f"aux_input_to_{g}_weights" for g in GATES)

# Tensors every cell must have.
REQUIRED = (
    "input_to_forget_weights",
    "input_to_cell_weights",
    "input_to_output_weights",
    "recurrent_to_forget_weights",
    "recurrent_to_cell_weights",
    "recurrent_to_output_weights",
    "forget_gate_bias",
    "cell_gate_bias",
    "output_gate_bias",
)


@dataclass(frozen=True)
class CellLayout:
    """Operand positions of one cell's tensors inside an operation's input list."""

    first: int  # position of input_to_input_weights (the 17 CELL_TENSORS follow)
    layer_norm: int | None  # position of input_layer_norm_weights (4 follow), None if absent
    aux: int | None = None  # position of aux_input_to_input_weights (4 follow)

    def index(self) -> dict[str, int]:
        out = {name: self.first + k for k, name in enumerate(CELL_TENSORS)}
        if self.layer_norm is not None:
            out.update({name: self.layer_norm + k for k, name in enumerate(LAYER_NORM_TENSORS)})
        if self.aux is not None:
            out.update({name: self.aux + k for k, name in enumerate(AUX_TENSORS)})
        return out


@dataclass
class CellFlags:
    use_cifg: bool
    use_peephole: bool
    use_layer_norm: bool
    use_projection_weight: bool
    use_projection_bias: bool


@dataclass
class CellParams:
    activation: int
    cell_clip: float
    proj_clip: float
    flags: CellFlags


def configure(
    shape: Callable[[str], tuple[int, ...] | None], n_input: int, fail: Callable[[str, str], None]
) -> tuple[CellFlags, int, int]:
    """Check one cell's tensor shapes against each other (AOSP CheckInputTensorDimensions)
    and work out its variant.  ``shape(name)`` gives a tensor's dims, or None when omitted;
    ``fail(name, message)`` reports a problem.  Returns (flags, num_units, output_size)."""
    has = lambda n: shape(n) is not None
    for name in REQUIRED:
        if not has(name):
            fail(name, "is required but omitted")
    i2o = shape("input_to_output_weights")
    r2o = shape("recurrent_to_output_weights")
    if len(i2o) != 2:
        fail("input_to_output_weights", f"must be 2-D, got rank {len(i2o)}")
    if len(r2o) != 2:
        fail("recurrent_to_output_weights", f"must be 2-D, got rank {len(r2o)}")
    n_cell, n_output = i2o[0], r2o[1]

    def expect(name: str, dims: tuple[int, ...]) -> None:
        s = shape(name)
        if s is not None and tuple(s) != dims:
            fail(name, f"must have shape {list(dims)}, got {list(s)}")

    for g in GATES:
        expect(f"input_to_{g}_weights", (n_cell, n_input))
        expect(f"recurrent_to_{g}_weights", (n_cell, n_output))
    for g in ("input", "forget", "output"):
        expect(f"cell_to_{g}_weights", (n_cell,))
    for g in GATES:
        expect(f"{g}_gate_bias", (n_cell,))
        expect(f"{g}_layer_norm_weights", (n_cell,))
    expect("projection_weights", (n_output, n_cell))
    expect("projection_bias", (n_output,))

    if has("input_to_input_weights") != has("recurrent_to_input_weights"):
        fail(
            "recurrent_to_input_weights",
            "input-to-input and recurrent-to-input weights must be both present (LSTM) or both omitted (CIFG)",
        )
    cifg = not has("input_to_input_weights")
    peep = [has(f"cell_to_{g}_weights") for g in ("input", "forget", "output")]
    if not (all(peep[1:]) and (peep[0] or cifg)) and any(peep):
        fail("cell_to_output_weights", "peephole weights must be all present or all omitted")
    if cifg and has("input_gate_bias"):
        fail("input_gate_bias", "must be omitted with CIFG (no input-to-input weights)")
    if not cifg and not has("input_gate_bias"):
        fail("input_gate_bias", "is required without CIFG")
    if has("projection_bias") and not has("projection_weights"):
        fail("projection_bias", "is given without projection weights")
    ln = [has(n) for n in LAYER_NORM_TENSORS]
    if cifg:
        if ln[0]:
            fail("input_layer_norm_weights", "must be omitted with CIFG")
        if any(ln[1:]) and not all(ln[1:]):
            fail("output_layer_norm_weights", "layer-norm weights must be all present or all omitted")
    elif any(ln) and not all(ln):
        fail("output_layer_norm_weights", "layer-norm weights must be all present or all omitted")
    flags = CellFlags(
        cifg,
        has("cell_to_output_weights"),
        has("output_layer_norm_weights"),
        has("projection_weights"),
        has("projection_bias"),
    )
    return flags, n_cell, n_output


# ---------------------------------------------------------------------------------------
# Arithmetic
# ---------------------------------------------------------------------------------------


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.float32(1) / (np.float32(1) + np.exp(-x))


def apply_activation(x: np.ndarray, activation: int) -> np.ndarray | None:
    """TFLite ApplyActivationToVector; None for activation 0, which writes nothing."""
    if activation == ACT_NONE:
        return None
    if activation == ACT_RELU:
        return np.maximum(x, np.float32(0))
    if activation == ACT_RELU1:
        return np.clip(x, np.float32(-1), np.float32(1))
    if activation == ACT_RELU6:
        return np.clip(x, np.float32(0), np.float32(6))
    if activation == ACT_TANH:
        return np.tanh(x)
    if activation == ACT_SIGNBIT:
        return np.signbit(x).astype(np.float32)
    if activation == ACT_SIGMOID:
        return _sigmoid(x)
    raise ValueError(f"activation {activation} is not supported")


def _mean_stddev_normalise(x: np.ndarray) -> np.ndarray:
    """Per batch row: (x - mean) / sqrt(variance + 1e-8) (TFLite MeanStddevNormalization)."""
    n = np.float32(x.shape[-1])
    mean = np.sum(x, axis=-1, keepdims=True, dtype=np.float32) / n
    diff = x - mean
    variance = np.sum(diff * diff, axis=-1, keepdims=True, dtype=np.float32) / n
    return diff * (np.float32(1) / np.sqrt(variance + np.float32(1e-8)))


def _clip(x: np.ndarray, limit: float) -> np.ndarray:
    lim = np.float32(limit)
    return np.clip(x, -lim, lim) if limit > 0 else x


def step(
    p: CellParams,
    w: dict[str, np.ndarray | None],
    x: np.ndarray,
    h: np.ndarray,
    c: np.ndarray,
    aux: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One time step for a [batch, input_size] input.  Returns (output, new cell state,
    scratch buffer as [batch, 3 or 4 * num_units])."""
    f = p.flags
    batch = x.shape[0]

    def zeros_like_cells(name: str) -> np.ndarray:
        # A tensor the flags ask for but the cell lacks (only possible through the
        # bidirectional op's shared flags): the reference's fp16 path reads zeros there.
        return w[name] if w.get(name) is not None else np.zeros(w["forget_gate_bias"].shape, np.float32)

    def gate(g: str, c_peep: np.ndarray) -> np.ndarray:
        bias = w.get(f"{g}_gate_bias")
        if bias is None:
            bias = np.zeros_like(w["forget_gate_bias"])
        acc = (
            np.zeros((batch, bias.shape[0]), np.float32)
            if f.use_layer_norm
            else np.broadcast_to(bias, (batch, bias.shape[0]))
        )
        acc = acc + x @ _weights(w, f"input_to_{g}_weights", w["input_to_forget_weights"]).T
        if aux is not None:
            acc = acc + aux @ _weights(w, f"aux_input_to_{g}_weights", w["input_to_forget_weights"]).T
        acc = acc + h @ _weights(w, f"recurrent_to_{g}_weights", w["recurrent_to_forget_weights"]).T
        if f.use_peephole and g != "cell":
            acc = acc + zeros_like_cells(f"cell_to_{g}_weights") * c_peep
        if f.use_layer_norm:
            acc = _mean_stddev_normalise(acc) * zeros_like_cells(f"{g}_layer_norm_weights") + bias
        return acc

    i_gate = None if f.use_cifg else _sigmoid(gate("input", c))
    f_gate = _sigmoid(gate("forget", c))
    g_raw = gate("cell", c)
    g_act = apply_activation(g_raw, p.activation)
    cell_candidate = g_raw if g_act is None else g_act
    c_new = f_gate * c + cell_candidate * (np.float32(1) - f_gate if f.use_cifg else i_gate)
    c_new = _clip(c_new, p.cell_clip)
    o_gate = _sigmoid(gate("output", c_new))
    c_act = apply_activation(c_new, p.activation)
    if c_act is None:
        c_act = cell_candidate  # the reference quirk described in the module docstring
    h_cell = o_gate * c_act
    if f.use_projection_weight:
        out = h_cell @ _weights(w, "projection_weights", None).T
        if f.use_projection_bias:
            out = w["projection_bias"] + out
        out = _clip(out, p.proj_clip)
    else:
        out = h_cell
    blocks = [c_act, np.float32(1) - f_gate, h_cell] if f.use_cifg else [i_gate, c_act, f_gate, h_cell]
    scratch = np.concatenate([b.reshape(-1) for b in blocks]).reshape(batch, -1)
    return out.astype(np.float32), c_new.astype(np.float32), scratch.astype(np.float32)


def _weights(w: dict, name: str, like: np.ndarray | None) -> np.ndarray:
    m = w.get(name)
    if m is None:
        if like is None:
            raise ValueError(f"{name} is missing")
        # see zeros_like_cells in step(): shared bidirectional flags can ask for a missing tensor
        return np.zeros_like(like)
    return m


def run_sequence(
    p: CellParams,
    w: dict[str, np.ndarray | None],
    x: np.ndarray,
    h0: np.ndarray,
    c0: np.ndarray,
    aux: np.ndarray | None = None,
    forward: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Run over a time-major [max_time, batch, input_size] input (forward or backward in
    time).  Returns (outputs [max_time, batch, output_size], final output state, final cell
    state, last scratch buffer)."""
    steps = range(x.shape[0]) if forward else range(x.shape[0] - 1, -1, -1)
    h, c = h0.astype(np.float32), c0.astype(np.float32)
    n_output = h.shape[1]
    outputs = np.zeros((x.shape[0], x.shape[1], n_output), np.float32)
    scratch = None
    for t in steps:
        h, c, scratch = step(p, w, x[t], h, c, None if aux is None else aux[t])
        outputs[t] = h
    if scratch is None:  # zero time steps
        scratch = np.zeros((x.shape[1], 0), np.float32)
    return outputs, h, c, scratch


def widen(values: Sequence[np.ndarray | None]) -> list[np.ndarray | None]:
    """fp16/fp32 operands -> float32 working copies (None stays None)."""
    return [None if v is None else np.asarray(v, dtype=np.float32) for v in values]


# ---------------------------------------------------------------------------------------
# Operation plumbing shared by the three float LSTM operations
# ---------------------------------------------------------------------------------------


def static_cell_check(v, layout: CellLayout, n_input: int | None, label: str = "") -> CellFlags | None:
    """Run :func:`configure` at validation time when every present tensor of the cell has
    known dimensions (otherwise the check happens at execution).  ``v`` is an OpView."""
    idx = layout.index()
    ops = {name: (v.inputs[i] if i < len(v.inputs) else None) for name, i in idx.items()}
    if n_input is None or any(op is not None and not op.is_omitted and not op.fully_specified for op in ops.values()):
        return None

    def shape(name):
        op = ops.get(name)
        return None if op is None or op.is_omitted else op.dimensions

    def fail(name, message):
        v.fail(f"{label}{name} {message}", input=idx[name])

    return configure(shape, n_input, fail)[0]


def runtime_cell(
    ctx, layout: CellLayout, n_input: int, label: str = ""
) -> tuple[CellFlags, int, int, dict[str, np.ndarray | None]]:
    """Check one cell at execution time and return (flags, num_units, output_size, float32
    weights by name)."""
    idx = layout.index()

    def shape(name):
        i = idx.get(name)
        return None if i is None or not ctx.has(i) else tuple(ctx.inputs[i].shape)

    def fail(name, message):
        ctx.fail(f"input {idx[name]} ({label}{name}) {message}")

    flags, n_cell, n_output = configure(shape, n_input, fail)
    weights = {
        name: (None if not ctx.has(i) else np.asarray(ctx.inputs[i], dtype=np.float32)) for name, i in idx.items()
    }
    return flags, n_cell, n_output, weights


def check_state(ctx, index: int, dims: tuple[int, int], what: str) -> np.ndarray:
    if not ctx.has(index):
        ctx.fail(f"input {index} ({what}) is required but omitted")
    s = ctx.inputs[index]
    if tuple(s.shape) != dims:
        ctx.fail(f"input {index} ({what}) must have shape {list(dims)}, got {list(s.shape)}")
    return s.astype(np.float32)


def runtime_params(ctx, act_index: int, clip_index: int, flags: CellFlags) -> CellParams:
    activation = ctx.scalar(act_index)
    if activation not in LSTM_ACTIVATIONS:
        ctx.fail(f"input {act_index} (activation) must be one of {list(LSTM_ACTIVATIONS)}, got {activation}")
    cell_clip, proj_clip = float(ctx.scalar(clip_index)), float(ctx.scalar(clip_index + 1))
    if cell_clip < 0 or proj_clip < 0:
        ctx.fail(
            f"inputs {clip_index}, {clip_index + 1} (cell/projection clip) must be >= 0, "
            f"got {cell_clip:g}, {proj_clip:g}"
        )
    return CellParams(activation, cell_clip, proj_clip, flags)


def validate_float_signature(
    v, tensor_inputs: Sequence[int], act_index: int, clip_index: int, bool_inputs: Sequence[int] = ()
) -> None:
    """Types of a float LSTM: tensors (present ones) and outputs share input 0's type
    (TENSOR_FLOAT32 or TENSOR_FLOAT16); activation INT32; clips FLOAT32 / FLOAT16 to match;
    flags BOOL.  Constant activation and clips are range-checked."""
    from nnconform.ir import OperandType as T

    t = v.input_type(0)
    if t not in (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16):
        v.fail(f"must be TENSOR_FLOAT32 or TENSOR_FLOAT16, got {t.name}", input=0)
    scalar = T.FLOAT32 if t == T.TENSOR_FLOAT32 else T.FLOAT16
    wanted = [None] * len(v.inputs)
    for i in tensor_inputs:
        wanted[i] = t
    wanted[act_index] = T.INT32
    wanted[clip_index] = wanted[clip_index + 1] = scalar
    for i in bool_inputs:
        wanted[i] = T.BOOL
    v.expect_types(wanted, [t] * len(v.outputs))
    scalars = [act_index, clip_index, clip_index + 1, *bool_inputs]
    for i in scalars:
        if v.is_omitted(i):
            v.fail("is required but omitted", input=i)
    v.expect_scalar_in(act_index, LSTM_ACTIVATIONS, "activation")
    for i in (clip_index, clip_index + 1):
        c = v.constant_scalar(i)
        if c is not None and not c >= 0:
            v.fail(f"clipping threshold must be >= 0, got {c}", input=i)
