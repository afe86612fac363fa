"""VTS-style mutations: valid models and requests turned into ones a driver must reject.

Model mutations re-create the 22 classes of HAL 1.3 ``ValidateModel.cpp`` (nnapi_facts.md
section 4) on our IR.  Each class is a pure function ``Model -> iterator of ModelMutation``;
a ModelMutation unpacks like ``(name, model)`` and also carries the preference and priority
to prepare with (only the last two classes change those) and whether VTS asks
``supported_operations`` too (not when the preference or priority is the thing mutated).
Every mutation is made with ``dataclasses.replace``; the input model is never touched.
Only the main subgraph is mutated, as in VTS.

    class                         rule it breaks (HAL ValidateHal / validateOperation)
    execution_order               operations must be in execution order (reader after writer)
    operand_type                  operand type code must be a known fundamental or OEM code
    operand_rank                  a scalar has rank 0
    operand_scale                 scale 0 for non-quantised types, >= 0 for TENSOR_INT32, > 0 quantised
    operand_zero_point            zero point within the type's range (0 for non-quantised types)
    operand_lifetime              a lifetime says whether an operand has a writer; flip that
    operand_input_output          lifetime SUBGRAPH_INPUT/OUTPUT must match the I/O index lists
    operand_number_of_consumers   numberOfConsumers must equal the real number of reads
    add_writer                    an operand is written by at most one operation
    operation_operand_type        an operation's signature fixes the type of each slot
    operation_type                operation type code must be known
    operation_input_index         an operation input index must be < operand count
    operation_output_index        an operation output index must be < operand count
    remove_write                  every TEMPORARY_VARIABLE / SUBGRAPH_OUTPUT operand is written
    remove_operand                operations and I/O lists must refer to the operands they need
    remove_operation              ... and the operations that write them must exist
    remove_operation_input        an operation takes a fixed number of inputs
    remove_operation_output       an operation writes a fixed number of outputs
    add_operation_input           ... and takes no extra input
    add_operation_output          ... and writes no extra output
    execution_preference          preference in LOW_POWER..SUSTAINED_SPEED (0..2)
    priority                      priority in LOW..HIGH (0..2)

Where an operation is legitimately polymorphic (optional trailing parameters, slots that take
several types), a mutation that would still give a valid model is skipped, as VTS does with
its ``...Skip`` lists; the skips are listed beside each class.

Request mutations (``request_mutations``) re-create ``ValidateRequest.cpp`` and the HAL
request rules: wrong argument counts, wrong rank, a known dimension changed, a zero input
dimension, and buffers too small.  Each comes with the statuses a driver may answer with.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Iterator, NamedTuple, Sequence

import numpy as np

from nnconform.driver import ErrorStatus, ExecutionPreference, Priority
from nnconform.ir import (
    OPERAND_TYPE_FUNDAMENTAL_MAX,
    OPERAND_TYPE_OEM_MAX,
    OPERAND_TYPE_OEM_MIN,
    OPERATION_TYPE_FUNDAMENTAL_MAX,
    OPERATION_TYPE_OEM_MAX,
    OPERATION_TYPE_OEM_MIN,
    ChannelQuant,
    Lifetime,
    Model,
    Operand,
    OperandType,
    Operation,
    OperationType,
    Request,
    RequestArgument,
    Subgraph,
    element_count,
    type_info,
)

T = OperandType
Op = OperationType


class ModelMutation(NamedTuple):
    """One mutated model.  ``name, model = mutation`` works (the other fields have defaults)."""

    name: str
    model: Model
    preference: int = int(ExecutionPreference.FAST_SINGLE_ANSWER)
    priority: int = int(Priority.MEDIUM)
    query_support: bool = True  # VTS does not call getSupportedOperations for 21/22


# ---------------------------------------------------------------------------------------
# Small helpers (all return new objects)
# ---------------------------------------------------------------------------------------


def _main(model: Model, **changes) -> Model:
    return dataclasses.replace(model, main=dataclasses.replace(model.main, **changes))


def _set_operand(model: Model, k: int, operand: Operand) -> Model:
    ops = list(model.main.operands)
    ops[k] = operand
    return _main(model, operands=tuple(ops))


def _set_operation(model: Model, n: int, operation: Operation) -> Model:
    ops = list(model.main.operations)
    ops[n] = operation
    return _main(model, operations=tuple(ops))


def consumer_counts(sg: Subgraph) -> list[int]:
    """How many operation input slots read each operand (HAL numberOfConsumers)."""
    counts = [0] * len(sg.operands)
    for operation in sg.operations:
        for k in operation.inputs:
            counts[k] += 1
    return counts


def _writers(sg: Subgraph) -> dict[int, int]:
    return {k: n for n, operation in enumerate(sg.operations) for k in operation.outputs}


def _zeros_value(operand: Operand) -> np.ndarray | None:
    """A read-only zero value fitting ``operand`` (what VTS's becomeConstantCopy does), or None
    when the size is unknown."""
    info = operand.info
    if info.dtype is None or not operand.fully_specified:
        return None
    arr = np.zeros(() if info.is_scalar else operand.dimensions, dtype=info.dtype)
    arr.setflags(write=False)
    return arr


def _label(sg: Subgraph, n: int) -> str:
    return f"operations[{n}]({sg.operations[n].name})"


# ---------------------------------------------------------------------------------------
# 1. execution order
# ---------------------------------------------------------------------------------------


def execution_order(model: Model) -> Iterator[ModelMutation]:
    """Move a reader before its writer, or a writer after its last reader."""
    sg = model.main
    writer = _writers(sg)
    ops = list(sg.operations)
    for n, operation in enumerate(ops):
        # reader first: put operation n just before the earliest operation it depends on
        deps = [writer[k] for k in operation.inputs if k in writer and writer[k] < n]
        if deps:
            first = min(deps)
            order = ops[:first] + [operation] + [o for o in ops[first:] if o is not operation]
            yield ModelMutation(
                f"execution_order/{_label(sg, n)}_before_its_writer", _main(model, operations=tuple(order))
            )
        # writer last: put operation n just after the last operation reading its outputs
        readers = [m for m, o in enumerate(ops) if m > n and set(o.inputs) & set(operation.outputs)]
        if readers:
            last = max(readers)
            rest = [o for o in ops if o is not operation]
            order = rest[:last] + [operation] + rest[last:]
            yield ModelMutation(
                f"execution_order/{_label(sg, n)}_after_its_readers", _main(model, operations=tuple(order))
            )


# ---------------------------------------------------------------------------------------
# 2-5. operand fields
# ---------------------------------------------------------------------------------------

INVALID_OPERAND_TYPE_CODES = (-1, OPERAND_TYPE_FUNDAMENTAL_MAX + 1, OPERAND_TYPE_OEM_MIN - 1, OPERAND_TYPE_OEM_MAX + 1)


def operand_type(model: Model) -> Iterator[ModelMutation]:
    """Type code outside {0..FUNDAMENTAL_MAX, OEM_MIN..OEM_MAX}."""
    for k, operand in enumerate(model.main.operands):
        for code in INVALID_OPERAND_TYPE_CODES:
            yield ModelMutation(
                f"operand_type/operands[{k}]={code}",
                # a code no OperandType has, on purpose: drivers must reject it
                _set_operand(model, k, dataclasses.replace(operand, type=code)),  # type: ignore[arg-type]
            )


def operand_rank(model: Model) -> Iterator[ModelMutation]:
    """A scalar given rank 1 (tensors have no invalid rank, as in VTS)."""
    for k, operand in enumerate(model.main.operands):
        if operand.info.is_scalar and operand.type not in (T.SUBGRAPH, T.OEM):
            yield ModelMutation(
                f"operand_rank/operands[{k}]({operand.type.name})=1",
                _set_operand(model, k, dataclasses.replace(operand, dimensions=(1,))),
            )


_QUANT_SCALE_TYPES = (
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
    T.TENSOR_QUANT8_SYMM,
    T.TENSOR_QUANT16_ASYMM,
    T.TENSOR_QUANT16_SYMM,
)


def invalid_scale(t: OperandType) -> float | None:
    if t in (T.OEM, T.TENSOR_OEM_BYTE):
        return None
    if t == T.TENSOR_INT32:
        return -1.0
    if t in _QUANT_SCALE_TYPES:
        return 0.0
    return 1.0


def operand_scale(model: Model) -> Iterator[ModelMutation]:
    """Non-quantised (and per-channel) scale 1, TENSOR_INT32 scale -1, quantised scale 0."""
    for k, operand in enumerate(model.main.operands):
        s = invalid_scale(operand.type)
        if s is not None:
            yield ModelMutation(
                f"operand_scale/operands[{k}]({operand.type.name})={s:g}",
                _set_operand(model, k, dataclasses.replace(operand, scale=s)),
            )


_INVALID_ZERO_POINTS = {
    T.TENSOR_QUANT8_ASYMM: (-1, 256),
    T.TENSOR_QUANT8_ASYMM_SIGNED: (-129, 128),
    T.TENSOR_QUANT8_SYMM: (-129, -1, 1, 128),
    T.TENSOR_QUANT16_ASYMM: (-1, 65536),
    T.TENSOR_QUANT16_SYMM: (-32769, -1, 1, 32768),
}


def invalid_zero_points(t: OperandType) -> tuple[int, ...]:
    if t in (T.OEM, T.TENSOR_OEM_BYTE):
        return ()
    return _INVALID_ZERO_POINTS.get(t, (1,))


def operand_zero_point(model: Model) -> Iterator[ModelMutation]:
    """Zero point outside the type's range (any non-zero value for non-quantised types)."""
    for k, operand in enumerate(model.main.operands):
        for zp in invalid_zero_points(operand.type):
            yield ModelMutation(
                f"operand_zero_point/operands[{k}]({operand.type.name})={zp}",
                _set_operand(model, k, dataclasses.replace(operand, zero_point=zp)),
            )


# ---------------------------------------------------------------------------------------
# 6-8. lifetimes and consumers
# ---------------------------------------------------------------------------------------


def _relifetime(model: Model, k: int, lifetime: Lifetime, *, update_io: bool) -> Model | None:
    """Operand k with a new lifetime (value set or dropped to fit it).  ``update_io``: also
    move it between the I/O lists the way VTS's mutateOperandLifeTimeTest does."""
    sg = model.main
    operand = sg.operands[k]
    value = None
    if lifetime in (Lifetime.CONSTANT_COPY, Lifetime.CONSTANT_REFERENCE):
        value = _zeros_value(operand)
        if value is None:
            return None  # VTS skips constants of unknown size too
    new = dataclasses.replace(operand, lifetime=lifetime, value=value)
    ins, outs = list(sg.input_indexes), list(sg.output_indexes)
    if update_io:
        ins = [i for i in ins if i != k]
        outs = [i for i in outs if i != k]
        if lifetime == Lifetime.SUBGRAPH_INPUT:
            ins.append(k)
        elif lifetime == Lifetime.SUBGRAPH_OUTPUT:
            outs.append(k)
    ops = list(sg.operands)
    ops[k] = new
    return _main(model, operands=tuple(ops), input_indexes=tuple(ins), output_indexes=tuple(outs))


_WRITTEN = (Lifetime.TEMPORARY_VARIABLE, Lifetime.SUBGRAPH_OUTPUT)
_NOT_WRITTEN = (Lifetime.CONSTANT_COPY, Lifetime.CONSTANT_REFERENCE, Lifetime.SUBGRAPH_INPUT)


def operand_lifetime(model: Model) -> Iterator[ModelMutation]:
    """A written operand made SUBGRAPH_INPUT or CONSTANT_COPY; an unwritten one (input,
    constant) made TEMPORARY_VARIABLE or SUBGRAPH_OUTPUT.  I/O lists follow the new lifetime,
    so only the writer rule is broken.  NO_VALUE and SUBGRAPH operands are left alone."""
    for k, operand in enumerate(model.main.operands):
        if operand.lifetime in _WRITTEN:
            targets = (Lifetime.SUBGRAPH_INPUT, Lifetime.CONSTANT_COPY)
        elif operand.lifetime in _NOT_WRITTEN:
            targets = (Lifetime.TEMPORARY_VARIABLE, Lifetime.SUBGRAPH_OUTPUT)
        else:
            continue
        for lt in targets:
            m = _relifetime(model, k, lt, update_io=True)
            if m is not None:
                yield ModelMutation(f"operand_lifetime/operands[{k}]({operand.lifetime.name}->{lt.name})", m)


def operand_input_output(model: Model) -> Iterator[ModelMutation]:
    """Lifetime moved between model input / model output / neither, keeping whether it has a
    writer, without updating the I/O index lists."""
    table = {
        Lifetime.CONSTANT_COPY: (Lifetime.SUBGRAPH_INPUT,),
        Lifetime.CONSTANT_REFERENCE: (Lifetime.SUBGRAPH_INPUT,),
        Lifetime.SUBGRAPH_INPUT: (Lifetime.CONSTANT_REFERENCE, Lifetime.CONSTANT_COPY),
        Lifetime.SUBGRAPH_OUTPUT: (Lifetime.TEMPORARY_VARIABLE,),
        Lifetime.TEMPORARY_VARIABLE: (Lifetime.SUBGRAPH_OUTPUT,),
    }
    for k, operand in enumerate(model.main.operands):
        for lt in table.get(operand.lifetime, ()):
            m = _relifetime(model, k, lt, update_io=False)
            if m is not None:
                yield ModelMutation(f"operand_input_output/operands[{k}]({operand.lifetime.name}->{lt.name})", m)


def operand_number_of_consumers(model: Model) -> Iterator[ModelMutation]:
    """numberOfConsumers one off the real count (1 when it is 0)."""
    counts = consumer_counts(model.main)
    for k, operand in enumerate(model.main.operands):
        real = counts[k]
        for bad in (real - 1, real + 1) if real else (1,):
            yield ModelMutation(
                f"operand_number_of_consumers/operands[{k}]={bad}(real {real})",
                _set_operand(model, k, dataclasses.replace(operand, num_consumers=bad)),
            )


# ---------------------------------------------------------------------------------------
# 9. add writer
# ---------------------------------------------------------------------------------------


def add_writer(model: Model) -> Iterator[ModelMutation]:
    """A copy of operation n appended at the end that writes output j again (its other
    outputs go to fresh temporaries, so only the double write is wrong)."""
    sg = model.main
    for n, operation in enumerate(sg.operations):
        for j in range(len(operation.outputs)):
            operands = list(sg.operands)
            outs = list(operation.outputs)
            for jj, k in enumerate(operation.outputs):
                if jj == j:
                    continue
                fresh = dataclasses.replace(
                    sg.operands[k],
                    lifetime=Lifetime.TEMPORARY_VARIABLE,
                    value=None,
                    num_consumers=None,
                    name=f"{sg.operands[k].name}_copy",
                )
                operands.append(fresh)
                outs[jj] = len(operands) - 1
            copy = dataclasses.replace(operation, outputs=tuple(outs))
            yield ModelMutation(
                f"add_writer/{_label(sg, n)}_output{j}",
                _main(model, operands=tuple(operands), operations=(*sg.operations, copy)),
            )


# ---------------------------------------------------------------------------------------
# 10. operation operand type
# ---------------------------------------------------------------------------------------


def retyped_operand(operand: Operand, t: OperandType) -> Operand:
    """``operand`` changed to type ``t`` with fields that are valid for ``t`` on their own
    (VTS mutateOperand): scalars lose their dimensions, tensors keep theirs (or get [1]),
    quantised types get a positive scale, per-channel gets one scale per dimension-0 entry.
    The value is left as it was (a constant then no longer fits, as in VTS)."""
    info = type_info(t)
    dims = () if info.is_scalar else (operand.dimensions or (1,))
    scale, zp, cq = 0.0, 0, None
    if t in _QUANT_SCALE_TYPES:
        scale = operand.scale if operand.scale > 0 else 1.0
        lo_hi = {
            T.TENSOR_QUANT8_ASYMM: (0, 255),
            T.TENSOR_QUANT8_ASYMM_SIGNED: (-128, 127),
            T.TENSOR_QUANT16_ASYMM: (0, 65535),
        }.get(t, (0, 0))
        zp = min(max(operand.zero_point, lo_hi[0]), lo_hi[1])
    elif t == T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        n = dims[0] if dims else 0
        cq = ChannelQuant(tuple(1.0 for _ in range(n)), 0)
    elif t == T.TENSOR_INT32:
        scale = operand.scale if operand.scale > 0 else 0.0
    return dataclasses.replace(operand, type=t, dimensions=tuple(dims), scale=scale, zero_point=zp, channel_quant=cq)


# Slots whose type is legitimately free (the operation accepts several unrelated types there):
# (operation, "input"/"output", slot) -> the types it accepts.  Changing such a slot to one of
# those types may keep the model valid, so that change is skipped.  VTS keeps the same kind of
# list (mutateOperationOperandTypeSkip).
_TENSORS_ANY = (
    T.TENSOR_FLOAT32,
    T.TENSOR_FLOAT16,
    T.TENSOR_INT32,
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
    T.TENSOR_QUANT8_SYMM,
    T.TENSOR_QUANT16_ASYMM,
    T.TENSOR_QUANT16_SYMM,
    T.TENSOR_BOOL8,
    T.TENSOR_QUANT8_SYMM_PER_CHANNEL,
)
_FILTERS = (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_QUANT8_SYMM_PER_CHANNEL)
_FLOATS = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
_QUANT8_IN = (
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
    T.TENSOR_QUANT8_SYMM,
    T.TENSOR_QUANT8_SYMM_PER_CHANNEL,
)
_CAST_TYPES = (
    T.TENSOR_FLOAT16,
    T.TENSOR_FLOAT32,
    T.TENSOR_INT32,
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
    T.TENSOR_QUANT8_SYMM,
    T.TENSOR_QUANT16_ASYMM,
    T.TENSOR_QUANT16_SYMM,
    T.TENSOR_BOOL8,
)
POLYMORPHIC_SLOTS: dict[tuple[OperationType, str, int], tuple[OperandType, ...]] = {
    (Op.LSH_PROJECTION, "input", 1): _TENSORS_ANY,
    (Op.ARGMAX, "input", 0): _TENSORS_ANY,
    (Op.ARGMIN, "input", 0): _TENSORS_ANY,
    (Op.CAST, "input", 0): _CAST_TYPES,
    (Op.CAST, "output", 0): _CAST_TYPES,
    (Op.RANDOM_MULTINOMIAL, "input", 0): _FLOATS,
    (Op.DEQUANTIZE, "input", 0): _QUANT8_IN,
    (Op.DEQUANTIZE, "output", 0): _FLOATS,
    (Op.QUANTIZE, "input", 0): _FLOATS,
    (Op.QUANTIZE, "output", 0): (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED),
    (Op.CONV_2D, "input", 1): _FILTERS,
    (Op.DEPTHWISE_CONV_2D, "input", 1): _FILTERS,
    (Op.GROUPED_CONV_2D, "input", 1): _FILTERS,
    (Op.TRANSPOSE_CONV_2D, "input", 1): _FILTERS,
    (Op.AXIS_ALIGNED_BBOX_TRANSFORM, "input", 1): (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED),
    (Op.RANK, "input", 0): _TENSORS_ANY,
    # output size (INT32) or scale factor (FLOAT32/FLOAT16) for resizing
    (Op.RESIZE_BILINEAR, "input", 1): (T.INT32, T.FLOAT32, T.FLOAT16),
    (Op.RESIZE_BILINEAR, "input", 2): (T.INT32, T.FLOAT32, T.FLOAT16),
    (Op.RESIZE_NEAREST_NEIGHBOR, "input", 1): (T.INT32, T.FLOAT32, T.FLOAT16),
    (Op.RESIZE_NEAREST_NEIGHBOR, "input", 2): (T.INT32, T.FLOAT32, T.FLOAT16),
    # table values of HASHTABLE_LOOKUP / EMBEDDING_LOOKUP decide the output type
    (Op.HASHTABLE_LOOKUP, "input", 2): _TENSORS_ANY,
    (Op.EMBEDDING_LOOKUP, "input", 1): _TENSORS_ANY,
}


def _slot_is_free(sg: Subgraph, k: int, t: OperandType) -> bool:
    for operation in sg.operations:
        for kind, slots in (("input", operation.inputs), ("output", operation.outputs)):
            for slot, idx in enumerate(slots):
                if idx != k:
                    continue
                try:
                    key = (OperationType(operation.type), kind, slot)
                except ValueError:
                    continue
                if t in POLYMORPHIC_SLOTS.get(key, ()):
                    return True
    return False


MUTATION_TARGET_TYPES = tuple(t for t in OperandType if t not in (T.OEM, T.TENSOR_OEM_BYTE))


def operation_operand_type(model: Model) -> Iterator[ModelMutation]:
    """Each operand an operation reads or writes changed to every other (non-OEM) type."""
    sg = model.main
    used = {k for o in sg.operations for k in (*o.inputs, *o.outputs)}
    for k in sorted(used):
        operand = sg.operands[k]
        if operand.lifetime in (Lifetime.SUBGRAPH, Lifetime.NO_VALUE):
            continue  # control-flow references and omitted inputs carry no data type to get wrong
        for t in MUTATION_TARGET_TYPES:
            if t == operand.type or _slot_is_free(sg, k, t):
                continue
            yield ModelMutation(
                f"operation_operand_type/operands[{k}]({operand.type.name}->{t.name})",
                _set_operand(model, k, retyped_operand(operand, t)),
            )


# ---------------------------------------------------------------------------------------
# 11-13. operation type and indexes
# ---------------------------------------------------------------------------------------

INVALID_OPERATION_TYPE_CODES = (
    OPERATION_TYPE_FUNDAMENTAL_MAX + 1,
    OPERATION_TYPE_OEM_MIN - 1,
    OPERATION_TYPE_OEM_MAX + 1,
)


def operation_type(model: Model) -> Iterator[ModelMutation]:
    for n, operation in enumerate(model.main.operations):
        for code in INVALID_OPERATION_TYPE_CODES:
            yield ModelMutation(
                f"operation_type/{_label(model.main, n)}={code}",
                _set_operation(model, n, dataclasses.replace(operation, type=code)),
            )


def _index_out_of_range(model: Model, field: str) -> Iterator[ModelMutation]:
    sg = model.main
    bad = len(sg.operands)
    for n, operation in enumerate(sg.operations):
        slots = getattr(operation, field)
        for j in range(len(slots)):
            new = tuple(bad if jj == j else k for jj, k in enumerate(slots))
            changed: dict[str, Any] = {field: new}  # inputs or outputs
            yield ModelMutation(
                f"operation_{field[:-1]}_index/{_label(sg, n)}_{field[:-1]}{j}={bad}",
                _set_operation(model, n, dataclasses.replace(operation, **changed)),
            )


def operation_input_index(model: Model) -> Iterator[ModelMutation]:
    """An operation input index equal to the operand count."""
    return _index_out_of_range(model, "inputs")


def operation_output_index(model: Model) -> Iterator[ModelMutation]:
    """An operation output index equal to the operand count."""
    return _index_out_of_range(model, "outputs")


# ---------------------------------------------------------------------------------------
# 14-20. removals and additions
# ---------------------------------------------------------------------------------------


def remove_write(model: Model) -> Iterator[ModelMutation]:
    """Operation n writes a fresh temporary instead of output j, so output j is never written."""
    sg = model.main
    for n, operation in enumerate(sg.operations):
        for j, k in enumerate(operation.outputs):
            fresh = dataclasses.replace(
                sg.operands[k],
                lifetime=Lifetime.TEMPORARY_VARIABLE,
                value=None,
                num_consumers=None,
                name=f"{sg.operands[k].name}_unread",
            )
            operands = (*sg.operands, fresh)
            outs = tuple(len(sg.operands) if jj == j else x for jj, x in enumerate(operation.outputs))
            m = _main(model, operands=operands)
            yield ModelMutation(
                f"remove_write/{_label(sg, n)}_output{j}",
                _set_operation(m, n, dataclasses.replace(operation, outputs=outs)),
            )


def _drop_index(indexes: Sequence[int], k: int) -> tuple[int, ...]:
    return tuple(i - (i > k) for i in indexes if i != k)


# Operations with optional trailing inputs: (operation, inputs count) -> input positions whose
# removal leaves another valid signature (VTS removeOperationInputSkip, extended to our ops).
def _optional_input(operation: Operation, slot: int) -> bool:
    n = len(operation.inputs)
    t = operation.type
    if t == Op.CONCATENATION:
        return n > 2 and slot != n - 1  # one tensor fewer is still a concatenation
    if t == Op.PACK:
        return n > 2 and slot != 0
    if t in (Op.CONV_2D, Op.AVERAGE_POOL_2D, Op.MAX_POOL_2D, Op.L2_POOL_2D):
        return (n in (8, 11) and slot == n - 1) or (n in (10, 13) and slot >= n - 2 and t == Op.CONV_2D)
    if t == Op.DEPTHWISE_CONV_2D:
        return (n in (9, 12) and slot == n - 1) or (n in (11, 14) and slot >= n - 2)
    if t in (Op.RESIZE_BILINEAR, Op.RESIZE_NEAREST_NEIGHBOR):
        return n >= 4 and slot >= 3  # layout, align_corners, half_pixel_centers (all BOOL)
    if t in (Op.SPACE_TO_DEPTH, Op.DEPTH_TO_SPACE, Op.BATCH_TO_SPACE_ND):
        return n == 3 and slot == 2
    if t == Op.SPACE_TO_BATCH_ND:
        return n == 4 and slot == 3
    if t in (Op.L2_NORMALIZATION,):
        return n == 2 and slot == 1
    if t == Op.LOCAL_RESPONSE_NORMALIZATION:
        return n == 6 and slot == 5
    if t == Op.SOFTMAX:
        return n == 3 and slot == 2
    return False


def remove_operand(model: Model) -> Iterator[ModelMutation]:
    """Operand k deleted: every reference to it disappears and higher indexes shift down.
    Skipped when nothing reads it (no effect) or when a reader's shorter signature is valid."""
    sg = model.main
    counts = consumer_counts(sg)
    for k, operand in enumerate(sg.operands):
        if counts[k] == 0:
            continue
        if any(k in o.inputs and _optional_input(o, o.inputs.index(k)) for o in sg.operations):
            continue
        operands = sg.operands[:k] + sg.operands[k + 1 :]
        operations = tuple(
            dataclasses.replace(o, inputs=_drop_index(o.inputs, k), outputs=_drop_index(o.outputs, k))
            for o in sg.operations
        )
        yield ModelMutation(
            f"remove_operand/operands[{k}]({operand.type.name})",
            _main(
                model,
                operands=operands,
                operations=operations,
                input_indexes=_drop_index(sg.input_indexes, k),
                output_indexes=_drop_index(sg.output_indexes, k),
            ),
        )


def _with_consumers_adjusted(model: Model, k: int, delta: int) -> Model:
    operand = model.main.operands[k]
    if operand.num_consumers is None:
        return model
    return _set_operand(model, k, dataclasses.replace(operand, num_consumers=operand.num_consumers + delta))


def remove_operation(model: Model) -> Iterator[ModelMutation]:
    """Operation n deleted, so what it wrote is never written."""
    sg = model.main
    for n, operation in enumerate(sg.operations):
        m = _main(model, operations=sg.operations[:n] + sg.operations[n + 1 :])
        for k in operation.inputs:
            m = _with_consumers_adjusted(m, k, -1)
        yield ModelMutation(f"remove_operation/{_label(sg, n)}", m)


def remove_operation_input(model: Model) -> Iterator[ModelMutation]:
    """Input slot j of operation n deleted (optional trailing parameters are skipped)."""
    sg = model.main
    for n, operation in enumerate(sg.operations):
        for j, k in enumerate(operation.inputs):
            if _optional_input(operation, j):
                continue
            new = dataclasses.replace(operation, inputs=operation.inputs[:j] + operation.inputs[j + 1 :])
            m = _with_consumers_adjusted(_set_operation(model, n, new), k, -1)
            yield ModelMutation(f"remove_operation_input/{_label(sg, n)}_input{j}", m)


def remove_operation_output(model: Model) -> Iterator[ModelMutation]:
    """Output slot j of operation n deleted, so that operand is never written."""
    sg = model.main
    for n, operation in enumerate(sg.operations):
        for j in range(len(operation.outputs)):
            new = dataclasses.replace(operation, outputs=operation.outputs[:j] + operation.outputs[j + 1 :])
            yield ModelMutation(f"remove_operation_output/{_label(sg, n)}_output{j}", _set_operation(model, n, new))


def _extra_int32(lifetime: Lifetime) -> Operand:
    return Operand(T.INT32, (), lifetime=lifetime, name="vts_extra")


# (operation, input count) where one more INT32 scalar input is another valid signature.
def _takes_extra_int32(operation: Operation) -> bool:
    n = len(operation.inputs)
    return (
        (operation.type == Op.L2_NORMALIZATION and n == 1)
        or (operation.type == Op.LOCAL_RESPONSE_NORMALIZATION and n == 5)
        or (operation.type == Op.SOFTMAX and n == 2)
        or (operation.type in (Op.RESIZE_BILINEAR, Op.RESIZE_NEAREST_NEIGHBOR) and n < 6)
    )


def add_operation_input(model: Model) -> Iterator[ModelMutation]:
    """Operation n reads one more operand: a new INT32 scalar model input."""
    sg = model.main
    k = len(sg.operands)
    for n, operation in enumerate(sg.operations):
        if _takes_extra_int32(operation):
            continue
        m = _main(
            model, operands=(*sg.operands, _extra_int32(Lifetime.SUBGRAPH_INPUT)), input_indexes=(*sg.input_indexes, k)
        )
        yield ModelMutation(
            f"add_operation_input/{_label(sg, n)}",
            _set_operation(m, n, dataclasses.replace(operation, inputs=(*operation.inputs, k))),
        )


def add_operation_output(model: Model) -> Iterator[ModelMutation]:
    """Operation n writes one more operand: a new INT32 scalar model output."""
    sg = model.main
    k = len(sg.operands)
    for n, operation in enumerate(sg.operations):
        m = _main(
            model,
            operands=(*sg.operands, _extra_int32(Lifetime.SUBGRAPH_OUTPUT)),
            output_indexes=(*sg.output_indexes, k),
        )
        yield ModelMutation(
            f"add_operation_output/{_label(sg, n)}",
            _set_operation(m, n, dataclasses.replace(operation, outputs=(*operation.outputs, k))),
        )


# ---------------------------------------------------------------------------------------
# 21-22. preparation arguments
# ---------------------------------------------------------------------------------------

INVALID_PREFERENCES = (int(min(ExecutionPreference)) - 1, int(max(ExecutionPreference)) + 1)
INVALID_PRIORITIES = (int(min(Priority)) - 1, int(max(Priority)) + 1)


def execution_preference(model: Model) -> Iterator[ModelMutation]:
    """The model unchanged, prepared with a preference outside 0..2."""
    for p in INVALID_PREFERENCES:
        yield ModelMutation(f"execution_preference/{p}", model, preference=p, query_support=False)


def priority(model: Model) -> Iterator[ModelMutation]:
    """The model unchanged, prepared with a priority outside 0..2."""
    for p in INVALID_PRIORITIES:
        yield ModelMutation(f"priority/{p}", model, priority=p, query_support=False)


MODEL_MUTATIONS: dict[str, Callable[[Model], Iterator[ModelMutation]]] = {
    "execution_order": execution_order,
    "operand_type": operand_type,
    "operand_rank": operand_rank,
    "operand_scale": operand_scale,
    "operand_zero_point": operand_zero_point,
    "operand_lifetime": operand_lifetime,
    "operand_input_output": operand_input_output,
    "operand_number_of_consumers": operand_number_of_consumers,
    "add_writer": add_writer,
    "operation_operand_type": operation_operand_type,
    "operation_type": operation_type,
    "operation_input_index": operation_input_index,
    "operation_output_index": operation_output_index,
    "remove_write": remove_write,
    "remove_operand": remove_operand,
    "remove_operation": remove_operation,
    "remove_operation_input": remove_operation_input,
    "remove_operation_output": remove_operation_output,
    "add_operation_input": add_operation_input,
    "add_operation_output": add_operation_output,
    "execution_preference": execution_preference,
    "priority": priority,
}


def operand_extra_params(model: Model) -> Iterator[ModelMutation]:
    """CTS's TestOperandExtraParams, beyond VTS's 22 classes: on every per-channel quantised
    operand, channel_dim out of range, one scale too many or too few, a zero and a negative
    scale, and a nonzero zero point (the type is symmetric)."""
    for k, operand in enumerate(model.main.operands):
        cq = operand.channel_quant
        if operand.type != T.TENSOR_QUANT8_SYMM_PER_CHANNEL or cq is None:
            continue
        rank = len(operand.dimensions or ())
        scales = tuple(cq.scales)
        bad = [
            ("channel_dim_out_of_range", dataclasses.replace(cq, channel_dim=rank)),
            ("one_scale_too_many", dataclasses.replace(cq, scales=scales + (scales[-1] if scales else 1.0,))),
            ("zero_scale", dataclasses.replace(cq, scales=(0.0,) + scales[1:])),
            ("negative_scale", dataclasses.replace(cq, scales=(-abs(scales[0]) or -1.0,) + scales[1:])),
        ]
        if len(scales) > 1:
            bad.append(("one_scale_too_few", dataclasses.replace(cq, scales=scales[:-1])))
        for what, changed in bad:
            yield ModelMutation(
                f"operand_extra_params/operands[{k}]/{what}",
                _set_operand(model, k, dataclasses.replace(operand, channel_quant=changed)),
            )
        yield ModelMutation(
            f"operand_extra_params/operands[{k}]/zero_point_1",
            _set_operand(model, k, dataclasses.replace(operand, zero_point=1)),
        )


# CTS's per-operation rank rules (TestValidateOperations' rank mutators; the rules were read
# there, the table is ours): operation -> (input slots changed together, lowest valid rank or
# None, highest valid rank or None).  Slots changed together share one new rank (CONV_2D's
# input and filter are both 3-D, or both 5-D).  CONCATENATION's slots are all but the last.
_UP_TO_4 = (((0,), None, 4),)
RANK_CONSTRAINTS: dict[OperationType, tuple[tuple[tuple[int, ...] | None, int | None, int | None], ...]] = {
    **{op: (((0,), None, 4), ((1,), None, 4)) for op in (Op.ADD, Op.SUB, Op.MUL, Op.DIV)},
    **{
        op: _UP_TO_4
        for op in (
            Op.DEQUANTIZE,
            Op.FLOOR,
            Op.LOGISTIC,
            Op.RELU,
            Op.RELU1,
            Op.RELU6,
            Op.TANH,
            Op.RESHAPE,
            Op.MEAN,
            Op.PAD,
            Op.PAD_V2,
            Op.SOFTMAX,
            Op.TRANSPOSE,
            Op.SQUEEZE,
            Op.STRIDED_SLICE,
            Op.CHANNEL_SHUFFLE,
            Op.L2_NORMALIZATION,
            Op.LOCAL_RESPONSE_NORMALIZATION,
            Op.REDUCE_ALL,
            Op.REDUCE_ANY,
            Op.REDUCE_MAX,
            Op.REDUCE_MIN,
            Op.REDUCE_PROD,
            Op.REDUCE_SUM,
        )
    },
    Op.CONV_2D: (((0, 1), 4, 4),),
    Op.FULLY_CONNECTED: (((0,), 2, 4), ((1,), 2, 2), ((2,), 1, 1)),
    Op.CONCATENATION: ((None, None, 4),),
}


def invalid_ranks(low: int | None, high: int | None) -> tuple[int, ...]:
    """The ranks just outside [low, high] (CTS tries the neighbours of the valid range; rank
    0 is not tried below a lowest rank of 1, as a rank-0 tensor is a different question)."""
    return ((high + 1,) if high is not None else ()) + ((low - 1,) if low is not None and low > 1 else ())


def _with_rank(operand: Operand, rank: int) -> Operand:
    """The operand at ``rank``: the leading dimensions kept, new ones 1; a constant's value
    resized to fit, so that only the rank is wrong."""
    dims = tuple(operand.dimensions[:rank]) + (1,) * max(0, rank - len(operand.dimensions))
    value = operand.value
    if operand.is_constant and isinstance(value, np.ndarray):
        value = np.resize(value, dims).astype(value.dtype)
        value.setflags(write=False)
    return dataclasses.replace(operand, dimensions=dims, value=value)


def operation_input_rank(model: Model) -> Iterator[ModelMutation]:
    """CTS's TestValidateOperations rank rules, beyond VTS's 22 classes: an input of an
    operation in RANK_CONSTRAINTS given the rank just above or below the ranks the operation
    takes (e.g. CONV_2D's input and filter of rank 3 or 5, ADD's input of rank 5).  Inputs of
    unknown rank and scalars are left alone."""
    sg = model.main
    for n, operation in enumerate(sg.operations):
        try:
            rules = RANK_CONSTRAINTS.get(OperationType(int(operation.type)), ())
        except ValueError:
            continue
        for slots, low, high in rules:
            if slots is None:
                slots = tuple(range(len(operation.inputs) - 1))
            ks = sorted({operation.inputs[s] for s in slots if s < len(operation.inputs) and operation.inputs[s] >= 0})
            if not ks or any(sg.operands[k].info.is_scalar or not sg.operands[k].dimensions for k in ks):
                continue
            for rank in invalid_ranks(low, high):
                m = model
                for k in ks:
                    m = _set_operand(m, k, _with_rank(m.main.operands[k], rank))
                yield ModelMutation(
                    f"operation_input_rank/{_label(sg, n)}_input{','.join(map(str, slots))}_rank{rank}", m
                )


# Mutation classes CTS has beyond VTS's 22 (the matrix runs them too; the vts suite keeps VTS's).
CTS_MUTATIONS: dict[str, Callable[[Model], Iterator[ModelMutation]]] = {
    "operand_extra_params": operand_extra_params,
    "operation_input_rank": operation_input_rank,
}

# The classes that change the model itself (the other two change prepare's arguments).
MODEL_CHANGING = tuple(c for c in MODEL_MUTATIONS if c not in ("execution_preference", "priority"))


def mutate_model(model: Model, classes: Sequence[str] | None = None) -> Iterator[tuple[str, ModelMutation]]:
    """(class, mutation) for every mutation of ``model`` in the chosen classes."""
    for cls in classes or MODEL_MUTATIONS:
        for m in MODEL_MUTATIONS[cls](model):
            yield cls, m


# ---------------------------------------------------------------------------------------
# Request mutations
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class RequestMutation:
    name: str
    request: Request
    allowed: tuple[ErrorStatus, ...] = (ErrorStatus.INVALID_ARGUMENT,)
    rule: str = ""


def _with(request: Request, kind: str, i: int, arg: RequestArgument | None) -> Request:
    args = list(getattr(request, kind))
    if arg is None:
        del args[i]
    else:
        args[i] = arg
    return dataclasses.replace(request, **{kind: tuple(args)})


def _known_dim(dims: Sequence[int]) -> int | None:
    for i, d in enumerate(dims):
        if d:
            return i
    return None


def request_mutations(model: Model, request: Request) -> Iterator[RequestMutation]:
    """Requests that break one HAL request rule each, with the statuses a driver may answer."""
    sg = model.main
    for kind in ("inputs", "outputs"):
        args = getattr(request, kind)
        one = kind[:-1]
        for i in range(len(args)):
            yield RequestMutation(
                f"remove_{one}/{i}", _with(request, kind, i, None), rule="the argument count must equal the model's"
            )
        extra = args[-1] if args else RequestArgument()
        yield RequestMutation(
            f"add_{one}",
            dataclasses.replace(request, **{kind: (*args, extra)}),
            rule="the argument count must equal the model's",
        )
    for i, (k, arg) in enumerate(zip(sg.input_indexes, request.inputs)):
        operand = sg.operands[k]
        if operand.info.is_scalar or arg.has_no_value or arg.value is None:
            continue
        value = np.asarray(arg.value)
        shape = tuple(arg.dimensions or value.shape)
        yield RequestMutation(
            f"input_wrong_rank/{i}",
            _with(request, "inputs", i, RequestArgument(value.reshape(shape + (1,)), shape + (1,))),
            rule="the rank must equal the model's",
        )
        d = _known_dim(operand.dimensions)
        if d is not None:
            bigger = tuple(x + (j == d) for j, x in enumerate(shape))
            yield RequestMutation(
                f"input_wrong_dimension/{i}",
                _with(request, "inputs", i, RequestArgument(np.resize(value, bigger).astype(value.dtype), bigger)),
                rule="a dimension must equal the model's known dimension",
            )
        zero = (0,) + shape[1:]
        yield RequestMutation(
            f"input_zero_dimension/{i}",
            _with(request, "inputs", i, RequestArgument(np.zeros(zero, value.dtype), zero)),
            rule="an input dimension must not be 0",
        )
        if value.size > 0:
            yield RequestMutation(
                f"input_buffer_too_small/{i}",
                _with(request, "inputs", i, RequestArgument(value.reshape(-1)[:-1], shape)),
                rule="an input buffer must hold its dimensions' elements",
            )
    for i, (k, arg) in enumerate(zip(sg.output_indexes, request.outputs)):
        operand = sg.operands[k]
        if operand.info.is_scalar or not operand.dimensions:
            continue
        dims = operand.dimensions
        yield RequestMutation(
            f"output_wrong_rank/{i}",
            _with(request, "outputs", i, RequestArgument(dimensions=dims + (1,))),
            rule="the rank must equal the model's",
        )
        d = _known_dim(dims)
        if d is not None:
            yield RequestMutation(
                f"output_wrong_dimension/{i}",
                _with(
                    request, "outputs", i, RequestArgument(dimensions=tuple(x + (j == d) for j, x in enumerate(dims)))
                ),
                rule="a dimension must equal the model's known dimension",
            )
        if operand.fully_specified and element_count(dims) > 0:
            dtype = operand.info.dtype
            assert dtype is not None  # a model output is a tensor, never a subgraph reference
            size = element_count(dims) * dtype.itemsize
            yield RequestMutation(
                f"output_buffer_too_small/{i}",
                _with(request, "outputs", i, RequestArgument(capacity=size - dtype.itemsize)),
                allowed=(ErrorStatus.OUTPUT_INSUFFICIENT_SIZE, ErrorStatus.INVALID_ARGUMENT),
                rule="an output buffer must hold the output (OUTPUT_INSUFFICIENT_SIZE)",
            )


# The request-mutation classes, in the order request_mutations makes them.
REQUEST_CLASSES = (
    "remove_input",
    "add_input",
    "remove_output",
    "add_output",
    "input_wrong_rank",
    "input_wrong_dimension",
    "input_zero_dimension",
    "input_buffer_too_small",
    "output_wrong_rank",
    "output_wrong_dimension",
    "output_buffer_too_small",
)


def request_mutation_class(name: str) -> str:
    """``input_wrong_rank/0`` -> ``input_wrong_rank``."""
    return name.split("/", 1)[0]


__all__ = [
    "ModelMutation",
    "MODEL_MUTATIONS",
    "MODEL_CHANGING",
    "CTS_MUTATIONS",
    "RANK_CONSTRAINTS",
    "mutate_model",
    "RequestMutation",
    "REQUEST_CLASSES",
    "request_mutations",
    "request_mutation_class",
    "consumer_counts",
    "retyped_operand",
    "POLYMORPHIC_SLOTS",
]
