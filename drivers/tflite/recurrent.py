"""NNAPI recurrent operations -> TFLite's builtin RNN and LSTM kernels (float32).

NNAPI's recurrent operations were designed from TFLite's (the TFLite NNAPI delegate maps one
onto the other), so input lists and options line up; the one structural difference is the
state.  NNAPI passes the state in as an ordinary input operand and returns the new state as
an output operand; TFLite's kernels read and overwrite a *variable tensor* (``isVariable``) in
place and have no state output.  The mapping:

- state in: the NNAPI operand must be either a main-graph model input that nothing else reads
  (its TFLite input tensor is made variable: the device sets it from the request before every
  invoke, after ``reset_all_variables``), or a constant of zeros (a fresh variable tensor,
  which ``reset_all_variables`` zeroes before every invoke).  A state computed by another
  operation cannot be copied into a variable tensor by any TFLite operation: unsupported.
  Recurrent operations inside IF/WHILE subgraphs are unsupported for the same reason (the
  device can only reset and feed main-graph tensors).
- state out: the NNAPI output operand *is* the variable tensor (after the kernel ran it holds
  the new state), so later operations and model outputs read it.
- LSTM's scratch buffer: NeuralNetworks.h gives its shape only (the CPU reference leaves its
  gate buffers there and the CTS vectors ignore it).  TFLite keeps its scratch internal, so
  the driver fills the output with zeros when it is a model output, and reports the operation
  unsupported when another operation reads it.

Checked option by option against NNAPI (see harness/reference/ops/lstm_cell.py for the reference):
activation codes 0..4 are TFLite's ActivationFunctionType (NNAPI's LSTM sigmoid, 6, has no
flatbuffer code: unsupported); cell and projection clip 0 disable clipping in both; CIFG,
peephole, projection and layer norm follow from which optional tensors are present in both;
time_major and merge_outputs are options.  BIDIRECTIONAL_SEQUENCE_LSTM has no layer-norm
inputs in TFLite (unsupported with layer norm), and the reference uses the backward cell's
variant for both directions, so the two cells must be the same variant.

Only TENSOR_FLOAT32: TFLite's float kernels compute in float32 and take float32 variable
states, and NNAPI's fp16 RNN/SVDF reference rounds every partial sum to fp16, which float32
arithmetic does not reproduce.
"""

from __future__ import annotations

import numpy as np

from nnconform.drivers.common import converter as conversion
from nnconform.drivers.tflite.builder import OMITTED, S, TensorType, options
from nnconform.drivers.tflite.builder import BuiltinOperator as B
from nnconform.drivers.tflite.convert import OpCtx, Unsupported, activation, transpose
from nnconform.ir import Lifetime
from nnconform.ir import OperandType as T

F32 = T.TENSOR_FLOAT32
LSTM_ACTIVATIONS = (0, 1, 3, 4)  # NNAPI's 6 (sigmoid) has no flatbuffer code


def float32_only(c: OpCtx) -> None:
    for k, o in enumerate(c.ins):
        if not o.is_omitted and not o.info.is_scalar and o.type != F32:
            raise Unsupported(f"input {k} of type {o.type.name} (TFLite's recurrent kernels are float32)")
    for o in c.outs:
        if o.type != F32:
            raise Unsupported(f"output of type {o.type.name}")
    if c.g.sg is not c.g.model.main:
        raise Unsupported(
            "a recurrent operation inside an IF/WHILE subgraph (its state is a "
            "variable tensor the device can only feed in the main graph)"
        )


def _readers(c: OpCtx, operand: int) -> int:
    return sum(list(op.inputs).count(operand) for op in c.g.sg.operations)


def state_in(c: OpCtx, k: int) -> int:
    """The variable tensor that holds NNAPI state input ``k`` (see the module docstring)."""
    if c.omitted(k):
        raise Unsupported(f"state input {k} is omitted")
    index = c.op.inputs[k]
    o = c.ins[k]
    sg = c.g.sg
    if o.is_constant:
        if np.any(np.asarray(o.value) != 0):
            raise Unsupported(f"state input {k} is a non-zero constant (a TFLite variable tensor starts at zero)")
        t = c.g.temp(list(c.dims(o)), TensorType.FLOAT32)
    elif o.lifetime == Lifetime.SUBGRAPH_INPUT and index in sg.input_indexes:
        if _readers(c, index) != 1 or index in sg.output_indexes:
            raise Unsupported(f"state input {k} is read elsewhere too (TFLite overwrites it in place)")
        t = c.g.tensor(index)
    else:
        raise Unsupported(
            f"state input {k} is computed by another operation (TFLite cannot copy into a variable tensor)"
        )
    c.g.w.sg.tensors[t].isVariable = True
    return t


def state_out(c: OpCtx, k: int, var: int) -> None:
    """Output ``k`` (the new state) is the variable tensor ``var`` after the kernel."""
    index = c.op.outputs[k]
    known = c.g._tensors  # noqa: SLF001  (the operand -> tensor table of this subgraph)
    if index in known:
        raise Unsupported(f"state output {k} already has a tensor")
    known[index] = var


def zeros_output(c: OpCtx, k: int) -> None:
    """Output ``k`` has no defined contents (LSTM's scratch buffer): zeros if only the model
    reads it."""
    index = c.op.outputs[k]
    if _readers(c, index):
        raise Unsupported(
            f"output {k} (the scratch buffer) is read by another operation; TFLite does not expose its scratch"
        )
    o = c.outs[k]
    if o.fully_specified:
        shape = list(o.dimensions)
    else:  # a dynamic-shape output: [batch, (3 with CIFG, else 4) * num_units] from the inputs
        batch, n_cell = c.dims(c.ins[0])[0], c.dims(c.ins[4])[0]
        shape = [batch, (3 if c.omitted(1) else 4) * n_cell]
    c.emit(B.FILL, [c.i32(shape), c.g.const(np.float32(0.0).reshape(()), np.float32)], [c.y(k)])


def _swapped(o) -> list[int] | None:
    """The shape of operand ``o`` with its first two (batch/time) dimensions swapped."""
    if not o.dimensions or len(o.dimensions) != 3:
        return None
    d = list(o.dimensions)
    return [d[1], d[0], d[2]]


def _time_major(c: OpCtx, swap: bool, n_out: int, aux_k: int):
    """(input, aux input, outputs, finish) of a bidirectional operation.  With ``swap`` the
    batch-major input and aux input are TRANSPOSEd to time-major, the kernel writes time-major
    temporaries, and ``finish()`` TRANSPOSEs them into the outputs: data movement only, so
    exact."""
    x, aux_x = c.x(0), c.x(aux_k)
    outs = [c.y(k) for k in range(n_out)]
    if not swap:
        return x, aux_x, outs, lambda: None
    x, aux_x = (
        t
        if t == OMITTED
        else transpose(c, t, [1, 0, 2], c.ins[k], dst=c.g.temp(_swapped(c.ins[k]), TensorType.FLOAT32))
        for t, k in ((x, 0), (aux_x, aux_k))
    )
    temps = [c.g.temp(_swapped(c.outs[k]), TensorType.FLOAT32) for k in range(n_out)]

    def finish():
        for k, (t, dst) in enumerate(zip(temps, outs)):
            transpose(c, t, [1, 0, 2], c.outs[k], dst=dst)

    return x, aux_x, temps, finish


def _bool(c: OpCtx, k: int) -> bool:
    return bool(c.scalar(k))


# ---------------------------------------------------------------------------------------
# RNN family
# ---------------------------------------------------------------------------------------


def conv_rnn(c: OpCtx):
    float32_only(c)
    act = activation(c, 5)
    h = state_in(c, 4)
    c.emit(B.RNN, [c.x(0), c.x(1), c.x(2), c.x(3), h], [c.y(1)], options("RNNOptions", fusedActivationFunction=act))
    state_out(c, 0, h)


def conv_unidirectional_sequence_rnn(c: OpCtx):
    float32_only(c)
    act = activation(c, 5)
    time_major = c.scalar(6)
    if time_major not in (0, 1):
        raise Unsupported(f"time_major {time_major}")
    h = state_in(c, 4)
    c.emit(
        B.UNIDIRECTIONAL_SEQUENCE_RNN,
        [c.x(0), c.x(1), c.x(2), c.x(3), h],
        [c.y(0)],
        options("SequenceRNNOptions", timeMajor=bool(time_major), fusedActivationFunction=act),
    )
    if len(c.outs) == 2:
        state_out(c, 1, h)


def conv_bidirectional_sequence_rnn(c: OpCtx):
    float32_only(c)
    act = activation(c, 12)
    time_major, merge = _bool(c, 13), _bool(c, 14)
    aux = [not c.omitted(k) for k in (9, 10, 11)]
    if aux not in ([False] * 3, [True] * 3, [True, False, False]):
        raise Unsupported("aux weights without an aux input, or only one direction's aux weights")
    # All three present: cross linking; the aux input alone: parallel linking (TFLite's kernel
    # then feeds the backward cell from the aux input, as NeuralNetworks.h says).
    fw_h, bw_h = state_in(c, 4), state_in(c, 8)
    n_dir_out = 1 if merge else 2
    # LiteRT's batch-major kernel ignores the aux input in parallel linking (its backward cell
    # reads input 0; time-major is right: docs/findings_tflite.md), so batch-major parallel
    # linking runs time-major between TRANSPOSEs.
    swap = aux == [True, False, False] and not time_major
    x, aux_x, outs, finish = _time_major(c, swap, n_dir_out, 9)
    ins = (
        [x]
        + [c.x(k) for k in range(1, 4)]
        + [fw_h]
        + [c.x(k) for k in range(5, 8)]
        + [bw_h]
        + [aux_x, c.x(10), c.x(11)]
    )
    c.emit(
        B.BIDIRECTIONAL_SEQUENCE_RNN,
        ins,
        outs,
        options(
            "BidirectionalSequenceRNNOptions",
            timeMajor=time_major or swap,
            fusedActivationFunction=act,
            mergeOutputs=merge,
        ),
    )
    finish()
    if len(c.outs) == n_dir_out + 2:
        state_out(c, n_dir_out, fw_h)
        state_out(c, n_dir_out + 1, bw_h)
    elif len(c.outs) != n_dir_out:
        raise Unsupported(f"{len(c.outs)} outputs with merge_outputs={merge}")


# ---------------------------------------------------------------------------------------
# LSTM family
# ---------------------------------------------------------------------------------------


def _lstm_params(c: OpCtx, act_k: int, clip_k: int) -> dict:
    act = c.scalar(act_k)
    if act not in LSTM_ACTIVATIONS:
        raise Unsupported(f"LSTM activation {act} (TFLite's flatbuffer has no code for it)")
    cell_clip, proj_clip = float(c.scalar(clip_k)), float(c.scalar(clip_k + 1))
    if cell_clip < 0 or proj_clip < 0:
        raise Unsupported("negative clip (the reference fails the execution)")
    return dict(fusedActivationFunction=act, cellClip=cell_clip, projClip=proj_clip)


def _cell(c: OpCtx, first: int) -> list[int]:
    """The 17 cell tensors from position ``first`` (omitted ones as -1)."""
    return [c.x(k) for k in range(first, first + 17)]


def _layer_norm(c: OpCtx, first: int) -> list[int]:
    present = [not c.omitted(k) for k in range(first, first + 4)]
    return [c.x(k) for k in range(first, first + 4)] if any(present) else []


def conv_lstm(c: OpCtx):
    float32_only(c)
    opts = _lstm_params(c, 20, 21)
    h, cs = state_in(c, 18), state_in(c, 19)
    ln = _layer_norm(c, 23) if len(c.ins) == 27 else []
    ins = [c.x(0)] + _cell(c, 1) + [h, cs] + ln
    c.emit(B.LSTM, ins, [c.y(3)], options("LSTMOptions", kernelType=S.LSTMKernelType.FULL, **opts))
    zeros_output(c, 0)
    state_out(c, 1, h)
    state_out(c, 2, cs)


def conv_unidirectional_sequence_lstm(c: OpCtx):
    float32_only(c)
    opts = _lstm_params(c, 20, 21)
    time_major = _bool(c, 23)
    h, cs = state_in(c, 18), state_in(c, 19)
    ins = [c.x(0)] + _cell(c, 1) + [h, cs] + _layer_norm(c, 24)
    c.emit(
        B.UNIDIRECTIONAL_SEQUENCE_LSTM,
        ins,
        [c.y(0)],
        options("UnidirectionalSequenceLSTMOptions", timeMajor=time_major, **opts),
    )
    if len(c.outs) == 3:
        state_out(c, 1, h)
        state_out(c, 2, cs)


def conv_bidirectional_sequence_lstm(c: OpCtx):
    """Two UNIDIRECTIONAL_SEQUENCE_LSTMs, the backward one between REVERSE_V2s along time.

    Not LiteRT's BIDIRECTIONAL_SEQUENCE_LSTM: that one has no layer-norm inputs (every AOSP
    vector has them, as model inputs the request may leave empty) and gets batch-major merged
    outputs wrong (docs/findings_tflite.md).  Cross linking adds W_aux . aux to every gate:
    that is one product over [input, aux] with [W, W_aux] (CONCATENATIONs, data movement);
    parallel linking feeds the backward cell the aux input.  Merged outputs are a
    CONCATENATION of the two directions."""
    float32_only(c)
    opts = _lstm_params(c, 48, 49)
    merge, time_major = _bool(c, 51), _bool(c, 52)
    present = lambda ks: [not c.omitted(k) for k in ks]  # noqa: E731
    if present(range(1, 18)) != present(range(18, 35)) or present(range(53, 57)) != present(range(57, 61)):
        raise Unsupported(
            "forward and backward cells of different variants (the reference "
            "runs both with the backward cell's variant)"
        )
    aux_in, aux_w = not c.omitted(39), present(range(40, 48))
    cross = any(aux_w)
    if cross and not aux_in:
        raise Unsupported("aux weights without an aux input")
    n_dir_out = 1 if merge else 2
    t_axis = 0 if time_major else 1
    x = c.x(0)
    aux = c.x(39) if aux_in else OMITTED
    if cross:
        x = _concat(c, [x, aux], 2)

    def direction(
        first: int, ln_first: int, aux_first: int, states: tuple[int, int], backward: bool, dst: int | None
    ) -> int:
        cell = _cell(c, first)
        if cross:
            for g in range(4):  # input-to-{input, forget, cell, output} weights
                w, wa = cell[g], c.x(aux_first + g)
                if (w == OMITTED) != (wa == OMITTED):
                    raise Unsupported("an aux weight present where its gate's input weight is not")
                if w != OMITTED:
                    cell[g] = _concat(c, [w, wa], 1)
        src = aux if backward and aux_in and not cross else x
        if backward:
            src = _reverse(c, src, t_axis)
        h, cs = state_in(c, states[0]), state_in(c, states[1])
        out = dst if dst is not None and not backward else c.g.temp(None, TensorType.FLOAT32)
        c.emit(
            B.UNIDIRECTIONAL_SEQUENCE_LSTM,
            [src] + cell + [h, cs] + _layer_norm(c, ln_first),
            [out],
            options("UnidirectionalSequenceLSTMOptions", timeMajor=time_major, **opts),
        )
        state_vars.extend([h, cs])
        return _reverse(c, out, t_axis, dst) if backward else out

    state_vars: list[int] = []
    fw = direction(1, 53, 40, (35, 36), False, None if merge else c.y(0))
    bw = direction(18, 57, 44, (37, 38), True, None if merge else c.y(1))
    if merge:
        c.emit(B.CONCATENATION, [fw, bw], [c.y(0)], options("ConcatenationOptions", axis=2, fusedActivationFunction=0))
    if len(c.outs) == n_dir_out + 4:
        for k, var in enumerate(state_vars):
            state_out(c, n_dir_out + k, var)
    elif len(c.outs) != n_dir_out:
        raise Unsupported(f"{len(c.outs)} outputs with merge_outputs={merge}")


def _concat(c: OpCtx, tensors: list[int], axis: int) -> int:
    out = c.g.temp(None, TensorType.FLOAT32)
    c.emit(B.CONCATENATION, tensors, [out], options("ConcatenationOptions", axis=axis, fusedActivationFunction=0))
    return out


def _reverse(c: OpCtx, t: int, axis: int, dst: int | None = None) -> int:
    out = dst if dst is not None else c.g.temp(None, TensorType.FLOAT32)
    c.emit(B.REVERSE_V2, [t, c.i32([axis])], [out])
    return out


# ---------------------------------------------------------------------------------------
# SVDF
# ---------------------------------------------------------------------------------------

# SVDF stays unsupported: LiteRT's SVDF keeps a different state convention.  Per filter the
# NNAPI state in is [s0 .. s(M-1)] (oldest first, s(M-1) a zeroed slot): NNAPI computes with
# [s0 .. s(M-2), feature] and returns [s1 .. s(M-2), feature, 0]; LiteRT shifts first and
# computes with [s1 .. s(M-1), feature], returning that.  With the same state input the outputs
# differ (measured: 3.56 max |diff| on random data, docs/findings_tflite.md).  An exact mapping
# would feed LiteRT the NNAPI state shifted one slot right, and no TFLite operation can write a
# variable tensor.


def has_state(model) -> bool:
    return any(op.type in CONVERTERS for op in model.main.operations)


CONVERTERS = conversion.by_name(globals(), {})  # the conv_<operation> functions above
