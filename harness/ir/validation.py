"""Static validation of models and requests (NNAPI HAL 1.3 ``ValidateHal`` rules on our IR).

``validate_model(model)`` and ``validate_request(model, request)`` return ``None`` or raise
:class:`nnconform.errors.ValidationError` whose ``where`` is a path a driver engineer can follow:

    operands[3].scale                      an operand field of the main subgraph
    referenced[0].operands[2].dimensions   the same inside a referenced subgraph
    operations[2] (CONV_2D) input 1        one operation (and one of its slots)
    input_indexes[1]                       a main-subgraph I/O list entry
    request.inputs[0].dimensions           a request argument

Our IR keeps constant values inline (no memory pools), so the HAL "location fits the
lifetime" rules read: a CONSTANT_* operand has a value array in the type's storage dtype and
exactly the operand's shape (the exact byte size); TEMPORARY_VARIABLE, SUBGRAPH_INPUT,
SUBGRAPH_OUTPUT and NO_VALUE operands carry no value; a SUBGRAPH operand's value is an index
into ``model.referenced``.

Model rules, checked in this order for the main subgraph and then each referenced one:
- the main subgraph has at least one operand and one operation;
- operands: type code in 0..15 or 10000..10001; lifetime code known; dimensions >= 0;
  scalars (and SUBGRAPH/OEM) have rank 0; a constant tensor has rank > 0 (other rank-0
  tensors are allowed, HAL 1.2+); scale is 0 for non-quantised types and per-channel,
  >= 0 for TENSOR_INT32, > 0 for quantised types; zero point 0 except
  ``ir.ZERO_POINT_RANGE``; channel_quant exactly on TENSOR_QUANT8_SYMM_PER_CHANNEL with
  channel_dim < rank, a known channel dimension, one scale per channel and every scale > 0;
  SUBGRAPH type pairs with SUBGRAPH lifetime; the value rules above.  OEM types skip the
  scale, zero point and value-size rules, as in the HAL;
- operations: type code in 0..105 or 10000; every input/output index in range; every output
  is TEMPORARY_VARIABLE or SUBGRAPH_OUTPUT;
- input_indexes/output_indexes: in range, right lifetime, no duplicates, and every
  SUBGRAPH_INPUT/SUBGRAPH_OUTPUT operand listed;
- graph: operations in execution order (each input is a constant, subgraph input, NO_VALUE,
  SUBGRAPH or written by an earlier operation; this also catches cycles); no operand
  written twice; ``num_consumers`` (when set) equals the real number of reads; no
  TEMPORARY_VARIABLE or SUBGRAPH_OUTPUT left unwritten (an unused input is fine);
then: no cyclic subgraph reference; then per-operation signatures.

Signatures are the operation modules' business: for every operation whose type is in
``nnconform.reference.ops.registry`` we call its ``validate(OpView)`` with the subgraph's path in
``where``.  A valid type that is not registered is not an error here: the driver reports it
unsupported.  Control flow (IF/WHILE) plugs in the same way: its ``validate`` receives an
``OpView`` whose ``model`` gives the referenced subgraphs, so the IF/WHILE structural rules
live with those operations, not here.  Structural rules run first, so a signature check
may assume in-range indexes and known type codes.

Request rules (main subgraph): the argument counts match; ``has_no_value`` comes with no
value and no dimensions; an input has a value whose dtype can hold the operand type; the
request's dimensions (given, or else the value's shape) have the model's rank and agree
with every known model dimension; an input has no dimension 0 and no dimension left unknown;
an output may leave dimensions unknown (HAL 1.2+); an output capacity is >= 0.  A
device-memory argument (``memory`` token) has a token > 0, no value and no capacity, and may
leave an input's dimensions to its buffer; the driver owning the token checks the rest.
"""

from __future__ import annotations

import functools
from typing import Any, Iterator, NoReturn, cast

import numpy as np

from nnconform.errors import ValidationError
from nnconform.ir import (
    OPERAND_TYPE_FUNDAMENTAL_MAX,
    OPERAND_TYPE_OEM_MAX,
    OPERAND_TYPE_OEM_MIN,
    OPERATION_TYPE_FUNDAMENTAL_MAX,
    OPERATION_TYPE_OEM_MAX,
    OPERATION_TYPE_OEM_MIN,
    TYPE_INFO,
    ZERO_POINT_RANGE,
    Lifetime,
    Model,
    Operand,
    OperandType,
    OperationType,
    Request,
    RequestArgument,
    Subgraph,
    element_count,
)

T = OperandType

# Types whose scale must be exactly 0 (TENSOR_INT32 may carry a bias scale; OEM is unchecked).
_ZERO_SCALE = {
    T.FLOAT16,
    T.FLOAT32,
    T.INT32,
    T.UINT32,
    T.BOOL,
    T.SUBGRAPH,
    T.TENSOR_FLOAT16,
    T.TENSOR_FLOAT32,
    T.TENSOR_BOOL8,
    T.TENSOR_QUANT8_SYMM_PER_CHANNEL,
}
_POSITIVE_SCALE = {
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
    T.TENSOR_QUANT8_SYMM,
    T.TENSOR_QUANT16_ASYMM,
    T.TENSOR_QUANT16_SYMM,
}
_OEM = {T.OEM, T.TENSOR_OEM_BYTE}
_KNOWN_BEFORE_RUN = {
    Lifetime.SUBGRAPH_INPUT,
    Lifetime.CONSTANT_COPY,
    Lifetime.CONSTANT_REFERENCE,
    Lifetime.NO_VALUE,
    Lifetime.SUBGRAPH,
}
_WRITABLE = {Lifetime.TEMPORARY_VARIABLE, Lifetime.SUBGRAPH_OUTPUT}


@functools.lru_cache(maxsize=256)
def _text(dtype: np.dtype) -> str:
    """A dtype's name as str() gives it, remembered: numpy works it out anew each time (~5 us),
    and the model-mutation checks put a dtype in tens of thousands of messages."""
    return str(dtype)


def _fail(where: str, message: str) -> NoReturn:
    raise ValidationError(where, message)


def _subgraphs(model: Model) -> Iterator[tuple[str, Subgraph]]:
    """(path prefix, subgraph): "" for main, "referenced[i]." for the others."""
    yield "", model.main
    for i, sg in enumerate(model.referenced):
        yield f"referenced[{i}].", sg


def operand_type_valid(code: Any) -> bool:
    return isinstance(code, (int, np.integer)) and bool(
        0 <= code <= OPERAND_TYPE_FUNDAMENTAL_MAX or OPERAND_TYPE_OEM_MIN <= code <= OPERAND_TYPE_OEM_MAX
    )


def operation_type_valid(code: Any) -> bool:
    return isinstance(code, (int, np.integer)) and bool(
        0 <= code <= OPERATION_TYPE_FUNDAMENTAL_MAX or OPERATION_TYPE_OEM_MIN <= code <= OPERATION_TYPE_OEM_MAX
    )


def _operation_label(code: Any) -> str:
    try:
        return OperationType(code).name
    except (ValueError, TypeError):
        return f"type {code}"


def _is_index(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


# ---------------------------------------------------------------------------------------
# Operands
# ---------------------------------------------------------------------------------------


# Operand descriptions already found valid, by what decides the verdict (_operand_key).  The
# model-mutation cells hand a driver thousands of models that differ from their vector's in one
# place, and the reference validates each in supported_operations and again in prepare: most of
# their operands are ones it has already judged.  Only valid ones are kept (a broken operand is
# checked in full every time, so its message is always the full check's); bounded.
_VALID_OPERANDS: set[tuple[Any, ...]] = set()
_VALID_OPERANDS_MAX = 1 << 16


def _operand_key(op: Operand) -> tuple[Any, ...] | None:
    """Everything _check_operand's verdict depends on, or None where that is not the operand
    alone (a SUBGRAPH operand's index is checked against its model) or not cheaply hashable.
    The type of every scalar field is part of the key: 3.0 == 3 and True == 1 in Python, but
    a float type code or a bool dimension is invalid where the int is not."""
    value, cq, dims = op.value, op.channel_quant, op.dimensions
    if value is None:
        vkey: tuple[Any, ...] | None = None
    elif type(value) is np.ndarray:
        vkey = (value.dtype, value.shape)
    else:
        return None
    if type(dims) is not tuple:
        return None
    if cq is not None:
        if type(cq.scales) is not tuple:
            return None
        ckey: tuple[Any, ...] | None = (type(cq.channel_dim), cq.channel_dim, repr(cq.scales))
    else:
        ckey = None
    t, lt, scale, zp, nc = op.type, op.lifetime, op.scale, op.zero_point, op.num_consumers
    if lt == Lifetime.SUBGRAPH:
        return None
    # repr: a tuple's text tells 1 from True and from np.int64(1), as the check does
    return (type(t), t, type(lt), lt, repr(dims), type(scale), scale, type(zp), zp, type(nc), nc, vkey, ckey)


def _check_operand(model: Model, op: Operand, p: str) -> None:
    try:
        key = _operand_key(op)
        known = key in _VALID_OPERANDS
    except (TypeError, ValueError):  # a mutated field that neither hashes nor compares: judged in full
        key, known = None, False
    if known:
        return
    _check_operand_in_full(model, op, p)
    if key is not None:
        if len(_VALID_OPERANDS) >= _VALID_OPERANDS_MAX:
            _VALID_OPERANDS.clear()
        _VALID_OPERANDS.add(key)


def _check_operand_in_full(model: Model, op: Operand, p: str) -> None:
    if not operand_type_valid(op.type):
        _fail(
            f"{p}.type",
            f"unknown operand type code {op.type!r} (valid: 0..{OPERAND_TYPE_FUNDAMENTAL_MAX}, "
            f"{OPERAND_TYPE_OEM_MIN}..{OPERAND_TYPE_OEM_MAX})",
        )
    t = OperandType(int(op.type))
    info = TYPE_INFO[t]
    try:
        lifetime = Lifetime(op.lifetime)
    except (ValueError, TypeError):
        _fail(f"{p}.lifetime", f"unknown lifetime code {op.lifetime!r}")

    dims = op.dimensions
    if not isinstance(dims, tuple) or not all(_is_index(d) for d in dims):
        _fail(f"{p}.dimensions", f"must be a tuple of integers, got {dims!r}")
    if any(d < 0 for d in dims):
        _fail(f"{p}.dimensions", f"{list(dims)} has a negative dimension")
    if info.is_scalar and dims:
        _fail(f"{p}.dimensions", f"{t.name} is a scalar, so its rank must be 0, got rank {len(dims)}")
    is_const = lifetime in (Lifetime.CONSTANT_COPY, Lifetime.CONSTANT_REFERENCE)
    if not info.is_scalar and not dims and is_const:
        _fail(f"{p}.dimensions", f"a constant {t.name} must have a known rank (dimensions are empty)")

    # scale ---------------------------------------------------------------------------
    scale = op.scale
    if t in _ZERO_SCALE and scale != 0:
        _fail(f"{p}.scale", f"must be 0 for {t.name}, got {scale:g}")
    if t == T.TENSOR_INT32 and not scale >= 0:
        _fail(f"{p}.scale", f"must be >= 0 for TENSOR_INT32, got {scale:g}")
    if t in _POSITIVE_SCALE and not scale > 0:
        _fail(f"{p}.scale", f"must be > 0 for {t.name}, got {scale:g}")

    # zero point ----------------------------------------------------------------------
    zp = op.zero_point
    if not _is_index(zp):
        _fail(f"{p}.zero_point", f"must be an integer, got {zp!r}")
    if t not in _OEM:
        lo, hi = ZERO_POINT_RANGE.get(t, (0, 0))
        if not lo <= zp <= hi:
            need = "0" if lo == hi == 0 else f"in [{lo}, {hi}]"
            _fail(f"{p}.zero_point", f"must be {need} for {t.name}, got {zp}")

    # per-channel quantisation ----------------------------------------------------------
    cq = op.channel_quant
    if t == T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        if cq is None:
            _fail(f"{p}.channel_quant", "TENSOR_QUANT8_SYMM_PER_CHANNEL needs channel_quant (scales, channel_dim)")
        cd = cq.channel_dim
        if not _is_index(cd) or not 0 <= cd < len(dims):
            _fail(f"{p}.channel_quant.channel_dim", f"{cd!r} is not a dimension index of rank {len(dims)}")
        if dims[cd] == 0:
            _fail(f"{p}.dimensions", f"channel dimension {cd} is unknown (0); per-channel quantisation needs it")
        if len(cq.scales) != dims[cd]:
            _fail(f"{p}.channel_quant.scales", f"has {len(cq.scales)} scales, dimension {cd} has {dims[cd]} channels")
        for k, s in enumerate(cq.scales):
            if not s > 0:
                _fail(f"{p}.channel_quant.scales[{k}]", f"must be > 0, got {s:g}")
    elif cq is not None:
        _fail(f"{p}.channel_quant", f"only TENSOR_QUANT8_SYMM_PER_CHANNEL takes channel_quant, not {t.name}")

    # lifetime and value (the HAL's "location") ---------------------------------------
    if (t == T.SUBGRAPH) != (lifetime == Lifetime.SUBGRAPH):
        if t == T.SUBGRAPH:
            _fail(f"{p}.lifetime", f"a SUBGRAPH operand must have lifetime SUBGRAPH, got {lifetime.name}")
        _fail(f"{p}.type", f"lifetime SUBGRAPH needs type SUBGRAPH, got {t.name}")
    value = op.value
    if lifetime == Lifetime.SUBGRAPH:
        n = len(model.referenced)
        if not _is_index(value) and not (
            isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "iu"
        ):
            _fail(f"{p}.value", f"a SUBGRAPH operand's value must be an index into referenced, got {value!r}")
        assert value is not None  # the check above refused None (not an index)
        if not 0 <= int(value) < n:
            _fail(f"{p}.value", f"refers to referenced[{int(value)}], but the model has {n} referenced subgraphs")
    elif is_const:
        if value is None:
            _fail(f"{p}.value", f"a {lifetime.name} operand needs a value")
        if not isinstance(value, np.ndarray):
            _fail(f"{p}.value", f"must be a numpy array, got {type(value).__name__}")
        if t not in _OEM:
            if value.dtype != info.dtype:
                _fail(
                    f"{p}.value", f"dtype {_text(value.dtype)} does not match {t.name}, stored as {_text(info.dtype)}"
                )
            want = element_count(dims)
            if value.size != want:
                _fail(f"{p}.value", f"has {value.size} values, dimensions {list(dims)} need {want}")
            if not info.is_scalar and tuple(value.shape) != dims:
                _fail(f"{p}.value", f"shape {list(value.shape)} differs from dimensions {list(dims)}")
    elif value is not None:
        _fail(f"{p}.value", f"a {lifetime.name} operand must not carry a value")

    nc = op.num_consumers
    if nc is not None and (not _is_index(nc) or nc < 0):
        _fail(f"{p}.num_consumers", f"must be None or an integer >= 0, got {nc!r}")


# ---------------------------------------------------------------------------------------
# Operations, I/O lists and the graph
# ---------------------------------------------------------------------------------------


def _check_operations(sg: Subgraph, prefix: str) -> None:
    n_operands = len(sg.operands)
    for n, operation in enumerate(sg.operations):
        if not operation_type_valid(operation.type):
            _fail(
                f"{prefix}operations[{n}].type",
                f"unknown operation type code {operation.type!r} (valid: 0..{OPERATION_TYPE_FUNDAMENTAL_MAX}, "
                f"{OPERATION_TYPE_OEM_MIN})",
            )
        w = f"{prefix}operations[{n}] ({_operation_label(operation.type)})"
        for kind, indexes in (("input", operation.inputs), ("output", operation.outputs)):
            for j, k in enumerate(indexes):
                if not _is_index(k) or not 0 <= k < n_operands:
                    _fail(
                        f"{w} {kind} {j}",
                        f"operand index {k!r} is out of range (the subgraph has {n_operands} operands)",
                    )
        for j, k in enumerate(operation.outputs):
            lt = sg.operands[k].lifetime
            if lt not in _WRITABLE:
                _fail(
                    f"{w} output {j}",
                    f"writes operand {k}, whose lifetime is {Lifetime(lt).name} "
                    f"(must be TEMPORARY_VARIABLE or SUBGRAPH_OUTPUT)",
                )


def _check_io_lists(sg: Subgraph, prefix: str) -> None:
    n_operands = len(sg.operands)
    for field, lifetime in (("input_indexes", Lifetime.SUBGRAPH_INPUT), ("output_indexes", Lifetime.SUBGRAPH_OUTPUT)):
        seen: dict[int, int] = {}
        for pos, k in enumerate(getattr(sg, field)):
            w = f"{prefix}{field}[{pos}]"
            if not _is_index(k) or not 0 <= k < n_operands:
                _fail(w, f"operand index {k!r} is out of range (the subgraph has {n_operands} operands)")
            lt = sg.operands[k].lifetime
            if lt != lifetime:
                _fail(w, f"operand {k} has lifetime {Lifetime(lt).name}, expected {lifetime.name}")
            if k in seen:
                _fail(w, f"operand {k} is listed twice (also {field}[{seen[k]}])")
            seen[k] = pos
        for i, op in enumerate(sg.operands):
            if op.lifetime == lifetime and i not in seen:
                _fail(f"{prefix}operands[{i}].lifetime", f"is {lifetime.name}, but operand {i} is not in {field}")


def _check_graph(sg: Subgraph, prefix: str) -> None:
    known = [op.lifetime in _KNOWN_BEFORE_RUN for op in sg.operands]
    writer: dict[int, int] = {}
    consumers = [0] * len(sg.operands)
    for n, operation in enumerate(sg.operations):
        w = f"{prefix}operations[{n}] ({_operation_label(operation.type)})"
        for j, k in enumerate(operation.inputs):
            if not known[k]:
                _fail(
                    f"{w} input {j}",
                    f"reads operand {k} before any operation writes it (operations must "
                    f"be in execution order; a cycle also ends here)",
                )
            consumers[k] += 1
        for j, k in enumerate(operation.outputs):
            if known[k]:
                first = writer[k]  # outputs are TEMP/OUTPUT (checked), so known means written
                by = (
                    f"operations[{first}] ({_operation_label(sg.operations[first].type)})"
                    if first != n
                    else "an earlier output of this operation"
                )
                _fail(f"{w} output {j}", f"operand {k} is already written by {by}")
            known[k] = True
            writer[k] = n
    for i, op in enumerate(sg.operands):
        if op.num_consumers is not None and op.num_consumers != consumers[i]:
            _fail(
                f"{prefix}operands[{i}].num_consumers",
                f"is {op.num_consumers}, but {consumers[i]} operation inputs read operand {i}",
            )
    for i, op in enumerate(sg.operands):
        if not known[i]:
            _fail(f"{prefix}operands[{i}]", f"{Lifetime(op.lifetime).name} operand is never written by any operation")


def _check_reference_cycles(model: Model) -> None:
    """Depth-first walk over SUBGRAPH operands; a subgraph met again on the current path is a cycle."""
    names = ["main"] + [f"referenced[{i}]" for i in range(len(model.referenced))]
    graphs = [model.main, *model.referenced]
    done: set[int] = set()

    def visit(g: int, path: list[int]) -> None:
        path.append(g)
        for i, op in enumerate(graphs[g].operands):
            if op.lifetime != Lifetime.SUBGRAPH:
                continue
            r = 1 + int(cast(int, op.value))  # _check_operand made a SUBGRAPH value an index
            if r in path:
                loop = " -> ".join(names[x] for x in path[path.index(r) :] + [r])
                prefix = "" if g == 0 else f"{names[g]}."
                _fail(f"{prefix}operands[{i}].value", f"cyclic subgraph reference: {loop}")
            if r not in done:
                visit(r, path)
        path.pop()
        done.add(g)

    for g in range(len(graphs)):
        if g not in done:
            visit(g, [])


# Operations whose signature check passed, by what that check reads (_signature_key); the
# same reasoning and the same bounds as _VALID_OPERANDS.
_VALID_SIGNATURES: set[tuple[Any, ...]] = set()
_SIGNATURE_CONSTANT_BYTES = 4096  # constants up to this size are part of the key; larger: no key
_MODEL_DEPENDENT = {OperationType.IF, OperationType.WHILE}  # they read the referenced subgraphs


def _signature_key(sg: Subgraph, operation: Any) -> tuple[Any, ...] | None:
    """Everything an operation's signature check can read: its type and, for each of its
    operands, the operand's description and a small constant's bytes (a check reads constant
    parameters: activation codes, paddings, axes).  None for IF and WHILE, which check the
    subgraphs they refer to, and where an operand has no key or a large constant."""
    t = operation.type
    if t in _MODEL_DEPENDENT:
        return None
    parts: list[Any] = [type(t), t, len(operation.inputs)]
    operands = sg.operands
    for k in (*operation.inputs, *operation.outputs):
        op = operands[k]
        key = _operand_key(op)
        if key is None:
            return None
        parts.append(key)
        value = op.value
        if value is not None:
            if value.nbytes > _SIGNATURE_CONSTANT_BYTES:
                return None
            parts.append(value.tobytes())
    return tuple(parts)


def _check_signatures(model: Model, sg: Subgraph, prefix: str) -> None:
    from nnconform.reference.ops.registry import OpView, load_all

    registry = load_all()
    for n, operation in enumerate(sg.operations):
        opdef = registry.get(OperationType(int(operation.type)))
        if opdef is None:
            continue  # valid but not implemented: the driver reports it unsupported
        try:
            # the check itself is part of the key: the registry is the reference's to change
            key = _signature_key(sg, operation)
            key = None if key is None else (opdef.validate, key)
            if key in _VALID_SIGNATURES:
                continue
        except (TypeError, ValueError):  # as in _check_operand: judged in full
            key = None
        where = f"{prefix}operations[{n}] ({opdef.type.name})"
        try:
            opdef.validate(OpView(model, sg, n, where=where))
        except ValidationError:
            raise
        except Exception as e:  # a bug in a signature check, not a verdict on the model
            e.add_note(f"while checking the signature of {where} ({opdef.module})")
            raise
        if key is not None:
            if len(_VALID_SIGNATURES) >= _VALID_OPERANDS_MAX:
                _VALID_SIGNATURES.clear()
            _VALID_SIGNATURES.add(key)


# The last model judged and its verdict (None: valid; else the error's where and message).  A
# driver is asked supported_operations and then prepare about the same model object (the
# mutation checks do so for every mutated model), and the reference validates in both; a Model
# is frozen, so the same object has the same verdict.  The reference is kept (not its id), so
# the object cannot be a new one that reuses the address.  Only the error's text is kept, not
# the exception: its traceback holds the frames that judged it, and a frame holding the
# verdict before it chained every invalid model judged since the last valid one (with their
# frames), which the garbage collector then walked again and again.
_LAST: tuple[Model | None, tuple[str, str] | None] = (None, None)


def validate_model(model: Model) -> None:
    """Raise ValidationError at the first broken rule (see the module docstring)."""
    global _LAST
    if _LAST[0] is model:
        verdict = _LAST[1]
        if verdict is not None:
            raise ValidationError(*verdict)
        return
    try:
        _validate_model(model)
    except ValidationError as e:
        _LAST = (model, (e.where, e.message))
        raise
    _LAST = (model, None)


def _validate_model(model: Model) -> None:
    if not model.main.operands:
        _fail("operands", "the main subgraph has no operands (empty model)")
    if not model.main.operations:
        _fail("operations", "the main subgraph has no operations (empty model)")
    for prefix, sg in _subgraphs(model):
        for i, op in enumerate(sg.operands):
            _check_operand(model, op, f"{prefix}operands[{i}]")
        _check_operations(sg, prefix)
        _check_io_lists(sg, prefix)
        _check_graph(sg, prefix)
    _check_reference_cycles(model)
    for prefix, sg in _subgraphs(model):
        _check_signatures(model, sg, prefix)


# ---------------------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------------------


def _check_argument(op: Operand, arg: RequestArgument, p: str, is_input: bool) -> None:
    if not isinstance(arg, RequestArgument):
        _fail(p, f"must be a RequestArgument, got {type(arg).__name__}")
    if arg.has_no_value:
        if arg.value is not None:
            _fail(f"{p}.value", "has_no_value is set, so there must be no value")
        if arg.dimensions:
            _fail(f"{p}.dimensions", "has_no_value is set, so there must be no dimensions")
        if arg.memory is not None:
            _fail(f"{p}.memory", "has_no_value is set, so there must be no device memory")
        return
    if arg.memory is not None:
        # device memory: the token is checked by the driver that issued it
        if not _is_index(arg.memory) or arg.memory <= 0:
            _fail(f"{p}.memory", f"must be a buffer token > 0, got {arg.memory!r}")
        if arg.value is not None or arg.capacity is not None:
            _fail(f"{p}.memory", "a device-memory argument has no value and no capacity")
    if arg.capacity is not None and (not _is_index(arg.capacity) or arg.capacity < 0):
        _fail(f"{p}.capacity", f"must be None or a byte count >= 0, got {arg.capacity!r}")
    info = op.info
    value = None
    if arg.value is not None:
        value = np.asarray(arg.value)
        if (
            info.dtype is not None
            and value.dtype != info.dtype
            and not np.can_cast(value.dtype, info.dtype, casting="same_kind")
        ):
            _fail(
                f"{p}.value", f"dtype {_text(value.dtype)} cannot hold {op.type.name} (stored as {_text(info.dtype)})"
            )
    elif is_input and arg.memory is None:
        _fail(f"{p}.value", "is missing (set has_no_value to omit an optional input)")
    if info.is_scalar:
        if value is not None and value.size != 1:
            _fail(f"{p}.value", f"{op.type.name} is a scalar, got {value.size} values")
        return

    dims = arg.dimensions
    if dims is not None:
        dims = tuple(dims)
        if not all(_is_index(d) and d >= 0 for d in dims):
            _fail(f"{p}.dimensions", f"must be integers >= 0, got {list(dims)}")
        if value is not None and value.size != element_count(dims) and all(dims):
            _fail(f"{p}.value", f"has {value.size} values, dimensions {list(dims)} need {element_count(dims)}")
    elif value is not None:
        dims = tuple(value.shape)
    else:
        dims = ()
    model_dims = op.dimensions
    if dims and model_dims:
        if len(dims) != len(model_dims):
            _fail(
                f"{p}.dimensions",
                f"rank {len(dims)} ({list(dims)}) differs from the model's rank {len(model_dims)} ({list(model_dims)})",
            )
        for i, (r, m) in enumerate(zip(dims, model_dims)):
            if m != 0 and r != m:
                _fail(f"{p}.dimensions", f"dimension {i} is {r}, the model says {m} ({list(model_dims)})")
    if is_input:
        if not dims and arg.memory is not None:
            return  # the buffer knows its dimensions
        if 0 in dims:
            _fail(
                f"{p}.dimensions",
                f"dimension {dims.index(0)} is 0 in {list(dims)}; input dimensions must be fully specified",
            )
        if not dims and 0 in model_dims:
            _fail(
                f"{p}.dimensions",
                f"the model leaves dimension {model_dims.index(0)} of "
                f"{list(model_dims)} unknown, so the request must give it",
            )


def validate_request(model: Model, request: Request) -> None:
    """Raise ValidationError if ``request`` does not fit the main subgraph of ``model``."""
    sg = model.main
    for kind, args, indexes in (
        ("inputs", request.inputs, sg.input_indexes),
        ("outputs", request.outputs, sg.output_indexes),
    ):
        if len(args) != len(indexes):
            _fail(f"request.{kind}", f"the model has {len(indexes)} {kind}, the request gives {len(args)}")
        for pos, (arg, k) in enumerate(zip(args, indexes)):
            _check_argument(sg.operands[k], arg, f"request.{kind}[{pos}]", kind == "inputs")


__all__ = ["validate_model", "validate_request", "operand_type_valid", "operation_type_valid"]
