"""RNN and LSTM families composed from primitive ONNX ops, unrolled over the time steps.

ONNX's own ``RNN``/``LSTM`` are not used: ONNX LSTM has no layer normalisation and no
projection, its ``clip`` bounds the gate pre-activations where NNAPI clips the cell state and
the projected output, and it knows neither NNAPI's activation codes (RELU6 for the cell) nor
the reference's activation-NONE rule (the cell gate, not the new cell state, multiplies the
output gate; lstm_cell.py).  ONNX RNN has no aux input and no RELU1/RELU6.  So
each step is written out with MatMul / Add / Mul / Sigmoid / Tanh / Clip exactly as
``nnconform.reference.ops.lstm_cell.step`` and ``nnconform.reference.ops.rnn.rnn_step`` compute it, for a static
number of steps: the input's time dimension must be known (a sequence of unknown length is
unsupported; so is a zero-length one).

Variants follow from which optional tensors are present, as in the reference (CIFG, peephole,
layer norm, projection, projection bias; aux input linking for the bidirectional ops).  An
optional tensor that is a model input is present unless the request omits it: the device then
converts the model with that operand omitted (device.with_omitted_inputs), so the variant is
still decided at conversion time.  Activation, clips, time_major and merge_outputs must be
constants.

Arithmetic: float32, fp16 tensors widened first.  LSTM: the states stay float32 between steps
and are narrowed once at the end, as the reference does.  RNN: the reference accumulates fp16
cells in half precision one product at a time; here each step is computed in float32 and the
state rounded to fp16 after every step (carried in T as NNAPI says), which is at least as
accurate; the fp16 tolerance covers the difference.

Unsupported, with the reason in the message:
- QUANTIZED_16BIT_LSTM and QUANTIZED_LSTM: their fixed-point gate arithmetic (int16 Q3.12
  gates, integer sigmoid/tanh lookups, rescaling with rounding doubling high multiplies) has
  no exact float composition and ONNX has no integer LSTM.
- BIDIRECTIONAL_SEQUENCE_LSTM whose forward and backward cells are different variants: the
  reference applies the backward cell's variant to both directions and reads missing tensors
  as zeros; we do not reproduce that quirk.
- LSTM activation SIGNBIT (5) (not a documented LSTM activation).
"""

from __future__ import annotations

import numpy as np

from nnconform.drivers.common import converter as conversion
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import activation as nn_activation
from nnconform.reference.ops import lstm_cell as cell

FLOATS = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)


# ---------------------------------------------------------------------------------------
# Shared pieces
# ---------------------------------------------------------------------------------------


def _require_float(c) -> None:
    t = c.ins[0].type
    if t not in FLOATS:
        raise cv.Unsupported(f"{t.name} (only TENSOR_FLOAT32 / TENSOR_FLOAT16)")


def _f32(c, k: int) -> str:
    return c.to_f32(c.x(k), c.ins[k])


def _transposed(c, k: int) -> str:
    """Weights input k as float32 W^T (constant weights are transposed at conversion)."""
    o = c.ins[k]
    if o.is_constant:
        return c.const_value(np.ascontiguousarray(np.asarray(o.value, np.float32).T))
    return c.node("Transpose", [_f32(c, k)], perm=[1, 0])


def _steps(c, k: int, time_major: bool) -> int:
    dims = c.ins[k].dimensions
    if len(dims) != 3:
        raise cv.Unsupported(f"input {k} needs a known rank 3, got {list(dims)}")
    n = dims[0 if time_major else 1]
    if n <= 0:
        raise cv.Unsupported("a sequence of unknown or zero length (the steps are unrolled)")
    return n


def _time_slices(c, seq: str, n: int, time_major: bool) -> list[str]:
    """[T, B, X] (or [B, T, X]) -> T tensors [B, X]."""
    axis = 0 if time_major else 1
    return [c.node("Gather", [seq, c.const_value(np.int64(t))], axis=axis) for t in range(n)]


def _stack(c, steps: list[str], time_major: bool) -> str:
    axis = 0 if time_major else 1
    parts = [c.node("Unsqueeze", [s, c.int64s([axis])]) for s in steps]
    return parts[0] if len(parts) == 1 else c.node("Concat", parts, axis=axis)


def _write(c, name: str, k: int) -> None:
    """float32 ``name`` -> output k in the output's type."""
    c.from_f32(name, c.outs[k], c.y(k))


# ---------------------------------------------------------------------------------------
# RNN family
# ---------------------------------------------------------------------------------------


def _rnn_cell(c, first: int, act: int, fp16: bool):
    """(W^T, R^T, bias) of the cell whose weights are input ``first``; and a step function."""
    w_t, r_t, bias = _transposed(c, first), _transposed(c, first + 1), _f32(c, first + 2)

    def step(x_t: str, h: str, aux_term: str | None = None) -> str:
        # the reference's order: bias + x.W^T (+ aux.Waux^T) + h.R^T
        acc = c.node("Add", [bias, c.node("MatMul", [x_t, w_t])])
        if aux_term is not None:
            acc = c.node("Add", [acc, aux_term])
        acc = c.node("Add", [acc, c.node("MatMul", [h, r_t])])
        out = cv.float_activation(c, acc, act)
        if fp16:  # the state is carried in fp16 from step to step
            out = c.node("Cast", [c.node("Cast", [out], to=cv.F16)], to=cv.F32)
        return out

    return step


def _rnn_activation(c, k: int) -> int:
    act = int(c.scalar(k))
    if act not in nn_activation.FUSED_ACTIVATIONS:
        raise cv.Unsupported(f"fused activation {act}")
    return act


def conv_rnn(c) -> None:
    _require_float(c)
    act = _rnn_activation(c, 5)
    step = _rnn_cell(c, 1, act, c.ins[0].type == T.TENSOR_FLOAT16)
    h = step(_f32(c, 0), _f32(c, 4))
    _write(c, h, 0)
    _write(c, h, 1)


def conv_unidirectional_sequence_rnn(c) -> None:
    _require_float(c)
    act = _rnn_activation(c, 5)
    time_major = bool(c.scalar(6))
    n = _steps(c, 0, time_major)
    step = _rnn_cell(c, 1, act, c.ins[0].type == T.TENSOR_FLOAT16)
    h, outs = _f32(c, 4), []
    for x_t in _time_slices(c, _f32(c, 0), n, time_major):
        h = step(x_t, h)
        outs.append(h)
    _write(c, _stack(c, outs, time_major), 0)
    if len(c.outs) == 2:
        _write(c, h, 1)


def conv_bidirectional_sequence_rnn(c) -> None:
    _require_float(c)
    AUX, FW_AUX_W, BW_AUX_W = 9, 10, 11
    act = _rnn_activation(c, 12)
    time_major, merge = bool(c.scalar(13)), bool(c.scalar(14))
    present = tuple(not c.omitted(i) for i in (AUX, FW_AUX_W, BW_AUX_W))
    mode = {(False, False, False): "none", (True, False, False): "parallel", (True, True, True): "cross"}.get(present)
    if mode is None:
        raise cv.Rejected("aux input and aux weights must be all present, all omitted, or only the aux input")
    if len(c.outs) not in ((1, 3) if merge else (2, 4)):
        raise cv.Rejected(f"{len(c.outs)} outputs do not match merge_outputs={merge}")
    n = _steps(c, 0, time_major)
    fp16 = c.ins[0].type == T.TENSOR_FLOAT16
    xs = _time_slices(c, _f32(c, 0), n, time_major)
    aux = _time_slices(c, _f32(c, AUX), n, time_major) if mode != "none" else None
    bw_xs = aux if mode == "parallel" else xs
    results = {}
    for name, first, xin, aux_w, order in (
        ("fw", 1, xs, FW_AUX_W, range(n)),
        ("bw", 5, bw_xs, BW_AUX_W, range(n - 1, -1, -1)),
    ):
        step = _rnn_cell(c, first, act, fp16)
        aux_wt = _transposed(c, aux_w) if mode == "cross" else None
        h, outs = _f32(c, first + 3), [None] * n
        for t in order:
            aux_term = c.node("MatMul", [aux[t], aux_wt]) if aux_wt is not None else None
            h = step(xin[t], h, aux_term)
            outs[t] = h  # the backward cell's output at step t is written at t
        results[name] = (_stack(c, outs, time_major), h)
    fw_seq, fw_h = results["fw"]
    bw_seq, bw_h = results["bw"]
    _write_bidirectional(c, fw_seq, bw_seq, merge, (fw_h, bw_h))


# ---------------------------------------------------------------------------------------
# LSTM family
# ---------------------------------------------------------------------------------------


def _lstm_flags(c, layout: cell.CellLayout, n_input_k: int, label: str = "") -> cell.CellFlags:
    """The cell variant from which optional tensors are present; the reference's consistency
    checks (lstm_cell.configure) run when every present tensor has known dimensions."""
    idx = layout.index()
    ops = {name: (c.ins[i] if i < len(c.ins) else None) for name, i in idx.items()}

    def shape(name):
        o = ops.get(name)
        return None if o is None or o.is_omitted else o.dimensions

    def fail(name, message):
        raise cv.Rejected(f"{label}{name} {message}")

    x = c.ins[n_input_k]
    known = x.fully_specified and all(o is None or o.is_omitted or o.fully_specified for o in ops.values())
    if known:
        return cell.configure(shape, x.dimensions[-1], fail)[0]
    has = lambda n: shape(n) is not None
    for name in cell.REQUIRED:
        if not has(name):
            raise cv.Rejected(f"{label}{name} is required but omitted")
    return cell.CellFlags(
        not has("input_to_input_weights"),
        has("cell_to_output_weights"),
        has("output_layer_norm_weights"),
        has("projection_weights"),
        has("projection_bias"),
    )


def _lstm_activation(c, name: str, act: int) -> str | None:
    """lstm_cell.apply_activation; None for activation 0 (which writes nothing)."""
    if act == cell.ACT_NONE:
        return None
    if act == cell.ACT_RELU:
        return c.node("Relu", [name])
    if act in (cell.ACT_RELU1, cell.ACT_RELU6):
        lo, hi = (-1.0, 1.0) if act == cell.ACT_RELU1 else (0.0, 6.0)
        return c.node("Clip", [name, c.const_value(np.float32(lo)), c.const_value(np.float32(hi))])
    if act == cell.ACT_TANH:
        return c.node("Tanh", [name])
    if act == cell.ACT_SIGMOID:
        return c.node("Sigmoid", [name])
    raise cv.Unsupported(f"LSTM activation {act}")


def _clip(c, name: str, limit: float) -> str:
    if limit <= 0:
        return name
    lim = np.float32(limit)
    return c.node("Clip", [name, c.const_value(-lim), c.const_value(lim)])


def _normalise(c, x: str) -> str:
    """Per batch row: (x - mean) / sqrt(variance + 1e-8), as lstm_cell._mean_stddev_normalise."""
    axes = c.int64s([-1])
    diff = c.node("Sub", [x, c.node("ReduceMean", [x, axes], keepdims=1)])
    var = c.node("ReduceMean", [c.node("Mul", [diff, diff]), axes], keepdims=1)
    inv = c.node(
        "Div", [c.const_value(np.float32(1)), c.node("Sqrt", [c.node("Add", [var, c.const_value(np.float32(1e-8))])])]
    )
    return c.node("Mul", [diff, inv])


class _LstmCell:
    """One cell's tensors as ONNX names and its step (lstm_cell.step, composed)."""

    def __init__(
        self,
        c,
        layout: cell.CellLayout,
        flags: cell.CellFlags,
        act: int,
        cell_clip: float,
        proj_clip: float,
        cross_aux: bool,
    ):
        self.c, self.f, self.act = c, flags, act
        self.cell_clip, self.proj_clip = cell_clip, proj_clip
        idx = layout.index()
        present = lambda n: n in idx and not c.omitted(idx[n])
        gates = [g for g in cell.GATES if not (g == "input" and flags.use_cifg)]
        for g in gates:
            for kind in ("input", "recurrent") + (("aux_input",) if cross_aux else ()):
                if not present(f"{kind}_to_{g}_weights"):
                    raise cv.Unsupported(f"{kind}-to-{g} weights missing for this cell variant")
        self.w = {g: _transposed(c, idx[f"input_to_{g}_weights"]) for g in gates}
        self.r = {g: _transposed(c, idx[f"recurrent_to_{g}_weights"]) for g in gates}
        self.aux = {g: _transposed(c, idx[f"aux_input_to_{g}_weights"]) for g in gates} if cross_aux else None
        self.bias = {g: _f32(c, idx[f"{g}_gate_bias"]) for g in gates}
        self.peep, self.ln = {}, {}
        if flags.use_peephole:
            for g in ("input", "forget", "output"):
                if g in gates:
                    if not present(f"cell_to_{g}_weights"):
                        raise cv.Unsupported(f"cell-to-{g} (peephole) weights missing for this cell variant")
                    self.peep[g] = _f32(c, idx[f"cell_to_{g}_weights"])
        if flags.use_layer_norm:
            for g in gates:
                if not present(f"{g}_layer_norm_weights"):
                    raise cv.Unsupported(f"{g} layer-norm weights missing for this cell variant")
                self.ln[g] = _f32(c, idx[f"{g}_layer_norm_weights"])
        self.proj = self.proj_bias = None
        if flags.use_projection_weight:
            self.proj = _transposed(c, idx["projection_weights"])
            if flags.use_projection_bias:
                self.proj_bias = _f32(c, idx["projection_bias"])

    def _gate(self, g: str, x: str, h: str, c_peep: str, aux: str | None) -> str:
        n = self.c.node
        acc = n("MatMul", [x, self.w[g]])
        if not self.f.use_layer_norm:
            acc = n("Add", [self.bias[g], acc])  # the sum starts from the bias
        if aux is not None:
            acc = n("Add", [acc, n("MatMul", [aux, self.aux[g]])])
        acc = n("Add", [acc, n("MatMul", [h, self.r[g]])])
        if g in self.peep:
            acc = n("Add", [acc, n("Mul", [self.peep[g], c_peep])])
        if self.f.use_layer_norm:
            acc = n("Add", [n("Mul", [_normalise(self.c, acc), self.ln[g]]), self.bias[g]])
        return acc

    def step(self, x: str, h: str, c_prev: str, aux: str | None = None) -> tuple[str, str, list[str]]:
        """(output, new cell state, scratch blocks) for one [batch, input] step."""
        n, one = self.c.node, self.c.const_value(np.float32(1))
        i_gate = None if self.f.use_cifg else n("Sigmoid", [self._gate("input", x, h, c_prev, aux)])
        f_gate = n("Sigmoid", [self._gate("forget", x, h, c_prev, aux)])
        g_raw = self._gate("cell", x, h, c_prev, aux)
        g_act = _lstm_activation(self.c, g_raw, self.act)
        candidate = g_raw if g_act is None else g_act
        one_minus_f = n("Sub", [one, f_gate]) if self.f.use_cifg else None
        c_new = n("Add", [n("Mul", [f_gate, c_prev]), n("Mul", [candidate, one_minus_f or i_gate])])
        c_new = _clip(self.c, c_new, self.cell_clip)
        o_gate = n("Sigmoid", [self._gate("output", x, h, c_new, aux)])
        c_act = _lstm_activation(self.c, c_new, self.act)
        if c_act is None:
            c_act = candidate  # activation NONE: the reference multiplies by the cell gate
        h_cell = n("Mul", [o_gate, c_act])
        out = h_cell
        if self.proj is not None:
            out = n("MatMul", [h_cell, self.proj])
            if self.proj_bias is not None:
                out = n("Add", [self.proj_bias, out])
            out = _clip(self.c, out, self.proj_clip)
        blocks = [c_act, one_minus_f, h_cell] if self.f.use_cifg else [i_gate, c_act, f_gate, h_cell]
        return out, c_new, blocks


def _lstm_params(c, act_k: int, clip_k: int) -> tuple[int, float, float]:
    act = int(c.scalar(act_k))
    if act not in cell.LSTM_ACTIVATIONS:
        raise cv.Rejected(f"activation {act} is not one of {list(cell.LSTM_ACTIVATIONS)}")
    cell_clip, proj_clip = float(c.scalar(clip_k)), float(c.scalar(clip_k + 1))
    if cell_clip < 0 or proj_clip < 0:
        raise cv.Rejected(f"clipping thresholds must be >= 0, got {cell_clip:g}, {proj_clip:g}")
    return act, cell_clip, proj_clip


def conv_lstm(c) -> None:
    _require_float(c)
    layout = cell.CellLayout(first=1, layer_norm=23 if len(c.ins) == 27 else None)
    flags = _lstm_flags(c, layout, 0)
    act, cell_clip, proj_clip = _lstm_params(c, 20, 21)
    lc = _LstmCell(c, layout, flags, act, cell_clip, proj_clip, cross_aux=False)
    x = _f32(c, 0)
    out, c_new, blocks = lc.step(x, _f32(c, 18), _f32(c, 19))
    # the scratch buffer is the gate blocks one after the other, viewed as [batch, -1]
    flat = c.node("Concat", [c.node("Reshape", [b, c.int64s([-1])]) for b in blocks], axis=0)
    batch = c.node("Slice", [c.node("Shape", [x]), c.int64s([0]), c.int64s([1])])
    _write(c, c.node("Reshape", [flat, c.node("Concat", [batch, c.int64s([-1])], axis=0)]), 0)
    _write(c, out, 1)
    _write(c, c_new, 2)
    _write(c, out, 3)


def _run_lstm(c, lc: _LstmCell, xs: list[str], h: str, cst: str, order, aux: list[str] | None):
    outs = [None] * len(xs)
    for t in order:
        h, cst, _ = lc.step(xs[t], h, cst, None if aux is None else aux[t])
        outs[t] = h
    return outs, h, cst


def conv_unidirectional_sequence_lstm(c) -> None:
    _require_float(c)
    layout = cell.CellLayout(first=1, layer_norm=24)
    flags = _lstm_flags(c, layout, 0)
    act, cell_clip, proj_clip = _lstm_params(c, 20, 21)
    time_major = bool(c.scalar(23))
    n = _steps(c, 0, time_major)
    lc = _LstmCell(c, layout, flags, act, cell_clip, proj_clip, cross_aux=False)
    xs = _time_slices(c, _f32(c, 0), n, time_major)
    outs, h, cst = _run_lstm(c, lc, xs, _f32(c, 18), _f32(c, 19), range(n), None)
    _write(c, _stack(c, outs, time_major), 0)
    if len(c.outs) == 3:
        _write(c, h, 1)
        _write(c, cst, 2)


def conv_bidirectional_sequence_lstm(c) -> None:
    _require_float(c)
    AUX = 39
    FW = cell.CellLayout(first=1, layer_norm=53, aux=40)
    BW = cell.CellLayout(first=18, layer_norm=57, aux=44)
    act, cell_clip, proj_clip = _lstm_params(c, 48, 49)
    merge, time_major = bool(c.scalar(51)), bool(c.scalar(52))
    if (len(c.outs) in (1, 5)) != merge:
        raise cv.Rejected(f"merge_outputs={merge} does not match the operation's {len(c.outs)} outputs")
    has_aux, fw_w, bw_w = (not c.omitted(i) for i in (AUX, 41, 45))
    if fw_w != bw_w or (fw_w and not has_aux):
        raise cv.Rejected("aux weights must be given for both directions, and only with an aux input")
    linking = "none" if not has_aux else ("cross" if fw_w else "parallel")
    fw_flags = _lstm_flags(c, FW, 0, "forward ")
    bw_flags = _lstm_flags(c, BW, AUX if linking == "parallel" else 0, "backward ")
    if fw_flags != bw_flags:
        raise cv.Unsupported(
            f"forward and backward cells of different variants ({fw_flags} vs {bw_flags}): the "
            "reference runs both with the backward variant, which this mapping does not copy"
        )
    n = _steps(c, 0, time_major)
    cross = linking == "cross"
    xs = _time_slices(c, _f32(c, 0), n, time_major)
    aux = _time_slices(c, _f32(c, AUX), n, time_major) if linking != "none" else None
    fw = _LstmCell(c, FW, fw_flags, act, cell_clip, proj_clip, cross)
    bw = _LstmCell(c, BW, bw_flags, act, cell_clip, proj_clip, cross)
    fw_outs, fw_h, fw_c = _run_lstm(c, fw, xs, _f32(c, 35), _f32(c, 36), range(n), aux if cross else None)
    bw_xs = aux if linking == "parallel" else xs
    bw_outs, bw_h, bw_c = _run_lstm(
        c, bw, bw_xs, _f32(c, 37), _f32(c, 38), range(n - 1, -1, -1), aux if cross else None
    )
    fw_seq, bw_seq = _stack(c, fw_outs, time_major), _stack(c, bw_outs, time_major)
    _write_bidirectional(c, fw_seq, bw_seq, merge, (fw_h, fw_c, bw_h, bw_c))


def _write_bidirectional(c, fw_seq, bw_seq, merge: bool, states) -> None:
    """The outputs every bidirectional sequence operation shares: the forward and backward
    sequences (one output concatenated on the last axis when merge_outputs), then, when the
    model asks for them, the final states in NNAPI's order."""
    if merge:
        _write(c, c.node("Concat", [fw_seq, bw_seq], axis=2), 0)
        k = 1
    else:
        _write(c, fw_seq, 0)
        _write(c, bw_seq, 1)
        k = 2
    if len(c.outs) > k:
        for j, s in enumerate(states):
            _write(c, s, k + j)


def _quantized_lstm(c) -> None:
    raise cv.Unsupported(
        f"{c.op.name}: fixed-point gate arithmetic (int16 gates, integer sigmoid/tanh, "
        "rounding doubling high multiplies) has no exact ONNX composition"
    )


# The conv_<operation> functions above, and the quantised LSTMs this adapter refuses.
CONVERTERS = conversion.by_name(
    globals(), {Op.QUANTIZED_16BIT_LSTM: _quantized_lstm, Op.QUANTIZED_LSTM: _quantized_lstm}
)


# Last: convert.py imports this module to register CONVERTERS, and the converters here use
# convert's builders only when they run (so importing either module first works).
from nnconform.drivers.onnxruntime import convert as cv  # noqa: E402
