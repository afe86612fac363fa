"""The spec file: one versioned JSON format for a model plus examples (design contract 2).

A spec file is what a failure leaves behind and what ``nnconform replay`` reads back; it is
plain JSON, so loading it never runs code.  Layout (version 1)::

    {"format": "nnconform-spec", "version": 1,
     "model": {"main": SUBGRAPH, "referenced": [SUBGRAPH...], "relax_fp32_to_fp16": false},
     "examples": [{"name": "...", "inputs": [TENSOR|null...], "outputs": [TENSOR...],
                   "ignored": [bool...], "expect_failure": false}],
     "meta": {...}}

    SUBGRAPH  = {"name", "operands": [OPERAND...], "operations": [OPERATION...],
                 "input_indexes": [int...], "output_indexes": [int...]}
    OPERAND   = {"type": "TENSOR_QUANT8_ASYMM", "dimensions": [1, 2], "lifetime": "CONSTANT_COPY",
                 "scale": 0.5, "zero_point": 128, "channel_quant": {"scales": [...], "channel_dim": 0}
                 or null, "num_consumers": int or null, "name": "...", "value": TENSOR or null
                 (a SUBGRAPH operand's value is its index into "referenced")}
    OPERATION = {"type": "CONV_2D", "inputs": [int...], "outputs": [int...]}

Types, lifetimes and operation types are written by NNAPI name, like the AOSP test vectors; a
code with no name (a deliberately invalid model) is written as its number, and numbers are
read back as raw codes.  A TENSOR takes its dtype from the operand it belongs to (constant
value, or the main-graph input/output an example value feeds) and is one of:

- inline (written for <= 64 elements): a bare value for rank 0, a nested list, or
  ``{"shape": [...], "values": [flat...]}`` (written for empty tensors); a flat list is also
  read against the operand's known dimensions.  Floats NaN/inf are the strings ``"nan"``,
  ``"inf"``, ``"-inf"``; fp16/fp32 values are written as the exact decimal of the stored
  value, so reading them back is bit-exact;
- ``{"dtype": "<f4", "shape": [...], "base64": "..."}``: the little-endian bytes (written for
  larger tensors, and for any tensor inline JSON would not reproduce bit for bit, such as a
  NaN with a payload).

``meta`` is free-form JSON for provenance.  A dumped failure fills it with
:func:`failure_meta` (seed, driver, failing example, ``actual_outputs``, the failed criterion,
harness version, replay command); ``meta["actual_outputs"]`` is the one meta entry read as
tensors (typed like the model's outputs).

Every malformed input raises :class:`nnconform.errors.SpecError` with one line that starts
with the offending field's path, e.g.
``model.main.operands[3].type: unknown operand type 'TENSOR_FLOAT33'``.  With
``validate=True`` the model must also pass :func:`nnconform.ir.validation.validate_model`, and
its error is reported at the matching spec path (``model.main.operands[3].scale: ...``).

Hostile files are refused the same way, before they can cost time or memory: a file that
is not a regular file or is larger than :data:`MAX_SPEC_BYTES`; JSON nested deeper than
:data:`MAX_NESTING`; a number literal longer than :data:`MAX_NUMBER_CHARS` characters or
beyond a double; a duplicate key; dimensions outside ``[0, 2**31)`` and integer fields
outside ``[-2**31, 2**32)``, whether or not the model is validated.  Values quoted in a
message are cut to 60 characters and the message to :data:`MAX_ERROR_CHARS`, with control
characters removed.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
import re
import shlex
import stat
import tempfile
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, NoReturn, Sequence

import numpy as np

from nnconform import __version__
from nnconform.errors import SpecError, ValidationError
from nnconform.ir import (
    ChannelQuant,
    Lifetime,
    Model,
    Operand,
    OperandType,
    Operation,
    OperationType,
    Subgraph,
    element_count,
    type_info,
)
from nnconform.textsafe import clean_text, shorten, show

FORMAT = "nnconform-spec"
VERSION = 1
INLINE_MAX = 64  # tensors with more elements are written as base64

MAX_SPEC_BYTES = 256 << 20  # a larger spec file is refused before it is read
MAX_NESTING = 100  # JSON arrays/objects nested deeper than this are refused
MAX_NUMBER_CHARS = 100  # a longer JSON number literal is refused (no 5,000-digit ints)
MAX_ERROR_CHARS = 200  # a SpecError message is cut to this length
DIM_LIMIT = 2**31  # every dimension and shape entry is in [0, DIM_LIMIT)
INT_FIELD_RANGE = (-(2**31), 2**32)  # int32 or uint32: indexes, codes, zero points...

_FLOAT_WORDS = {"nan": math.nan, "inf": math.inf, "+inf": math.inf, "-inf": -math.inf}
# Storage dtypes a base64 tensor may declare (little-endian spelling).
_BASE64_DTYPES = {
    np.dtype(t).newbyteorder("<").str: np.dtype(t)
    for t in (np.float16, np.float32, np.int32, np.uint32, np.uint8, np.int8, np.int16, np.uint16, np.bool_)
}


@dataclass
class SpecExample:
    name: str
    inputs: list[Any]  # one array (or None: omitted optional input) per main input
    outputs: list[Any]  # expected, one array per main output ([] if expect_failure)
    ignored: tuple[bool, ...] = ()  # per output: don't compare it (empty: compare all)
    expect_failure: bool = False  # the model is invalid or execution must fail


@dataclass
class SpecFile:
    model: Model
    examples: list[SpecExample]
    meta: dict[str, Any] = field(default_factory=dict)


_INDEX_RUN = re.compile(r"((?:\[\d+\]){3})(?:\[\d+\])+")


def _error(message: str) -> SpecError:
    """A SpecError with a bounded, one-line, control-free message."""
    return SpecError(shorten(clean_text(message).replace("\n", " ").replace("\t", " "), MAX_ERROR_CHARS))


def _short_path(path: str) -> str:
    """A field path fit for a one-line message: long index runs (a deep tensor) collapsed."""
    return shorten(_INDEX_RUN.sub(r"\1[...]", path), 100)


def _fail(path: str, message: str) -> NoReturn:
    raise _error(f"{_short_path(path)}: {message}")


def _show(x: Any) -> str:
    return show(x, 60)


# ---------------------------------------------------------------------------------------
# Tensors
# ---------------------------------------------------------------------------------------


def _float_json(x: float) -> float | str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _inline(arr: np.ndarray) -> Any:
    if arr.dtype.kind == "f":
        obj = arr.astype(object)  # Python floats: exact decimal of the stored value
        obj[np.isnan(arr)] = "nan"
        obj[np.isposinf(arr)] = "inf"
        obj[np.isneginf(arr)] = "-inf"
        data = obj.tolist()
    else:
        data = arr.tolist()
    if arr.ndim == 0 or arr.size > 0:
        return data
    return {"shape": list(arr.shape), "values": []}


def _base64(arr: np.ndarray) -> dict[str, Any]:
    le = arr.dtype.newbyteorder("<")
    raw = np.ascontiguousarray(arr, dtype=le).tobytes()
    return {"dtype": le.str, "shape": list(arr.shape), "base64": base64.b64encode(raw).decode("ascii")}


def encode_tensor(value: Any, path: str = "tensor") -> Any:
    """JSON form of one tensor: inline when small and exactly reproducible, else base64."""
    arr = np.asarray(value)
    if arr.dtype not in _BASE64_DTYPES.values():
        _fail(path, f"{arr.dtype} values cannot be stored (dtypes: {', '.join(sorted(_BASE64_DTYPES))})")
    if arr.size <= INLINE_MAX:
        data = _inline(arr)
        try:
            back = decode_tensor(data, arr.dtype, None, "tensor")
        except SpecError:
            back = None
        if back is not None and back.shape == arr.shape and back.tobytes() == arr.tobytes():
            return data
    return _base64(arr)


def _nested(data: Any, path: str) -> tuple[tuple[int, ...], list[Any]]:
    """Shape and row-major elements of a nested JSON list (rejects ragged lists)."""
    shape: list[int] = []
    level = [data]
    while level and all(isinstance(x, list) for x in level):
        lengths = {len(x) for x in level}
        if len(lengths) > 1:
            _fail(path, f"ragged nested list: rows of lengths {sorted(lengths)} at depth {len(shape)}")
        shape.append(lengths.pop())
        level = [y for x in level for y in x]
    if any(isinstance(x, (list, dict)) for x in level):
        _fail(path, f"mixes lists and values at depth {len(shape)}")
    return tuple(shape), level


def _shape_field(obj: Any, path: str) -> tuple[int, ...]:
    if not isinstance(obj, list) or not all(type(d) is int and 0 <= d < DIM_LIMIT for d in obj):
        _fail(path, f"must be a list of integers >= 0 and < 2**31, got {_show(obj)}")
    return tuple(obj)


def _convert(flat: list[Any], dtype: np.dtype | None, path: str) -> np.ndarray:
    """JSON scalars to an array of ``dtype`` (range-checked, never silently wrapped)."""
    if dtype is None:  # unknown operand type code: keep what JSON says
        bad = [x for x in flat if not isinstance(x, (bool, int, float))]
        if bad:
            _fail(path, f"expected numbers, got {_show(bad[0])}")
        try:
            arr = np.array(flat)
        except OverflowError:
            arr = np.array(flat, dtype=object)
        if arr.dtype == object:
            _fail(path, "an integer does not fit 64 bits")
        return arr
    kind = dtype.kind
    if kind == "f":
        vals = [_FLOAT_WORDS.get(x, x) if isinstance(x, str) else x for x in flat]
        for i, x in enumerate(vals):
            if isinstance(x, bool) or not isinstance(x, (int, float)):
                _fail(path, f"element {i} is {_show(flat[i])}, expected a number, 'nan', 'inf' or '-inf'")
        try:
            wide = np.array(vals, dtype=np.float64)
        except OverflowError:
            _fail(path, "an integer is too large for a float")
        with np.errstate(over="ignore"):
            arr = wide.astype(dtype)
        overflow = np.isinf(arr) & np.isfinite(wide)
        if overflow.any():
            i = int(np.argmax(overflow))
            _fail(path, f"element {i} ({_show(vals[i])}) does not fit {dtype.name}")
        return arr
    if kind == "b":
        for i, x in enumerate(flat):
            if not (isinstance(x, bool) or (type(x) is int and x in (0, 1))):
                _fail(path, f"element {i} is {_show(x)}, expected true or false")
        return np.array(flat, dtype=np.bool_).reshape(len(flat))
    # integers
    for i, x in enumerate(flat):
        if type(x) is not int:
            _fail(path, f"element {i} is {_show(x)}, expected an integer")
    if flat:
        lo, hi = min(flat), max(flat)
        info = np.iinfo(dtype)
        if lo < info.min or hi > info.max:
            x = lo if lo < info.min else hi
            _fail(path, f"value {_show(x)} is out of range for {dtype.name} [{info.min}, {info.max}]")
    return np.array(flat, dtype=dtype).reshape(len(flat))


def decode_tensor(
    obj: Any, dtype: np.dtype | None, dims: Sequence[int] | None, path: str, scalar: bool = False
) -> np.ndarray:
    """Read one TENSOR.  ``dtype``: the operand's storage dtype (None if unknown); ``dims``:
    the operand's dimensions (0 = unknown, () = unknown rank; None: don't check); ``scalar``:
    the operand is a scalar type (the result has shape ())."""
    dtype = None if dtype is None else np.dtype(dtype)
    flat_given = False
    if isinstance(obj, dict) and "base64" in obj:
        extra = set(obj) - {"dtype", "shape", "base64"}
        if extra:
            _fail(path, f"unknown field {sorted(extra)[0]!r} in a base64 tensor")
        for k in ("dtype", "shape"):
            if k not in obj:
                _fail(f"{path}.{k}", "required field is missing")
        ds = obj["dtype"]
        if not isinstance(ds, str) or ds not in _BASE64_DTYPES:
            _fail(f"{path}.dtype", f"unknown dtype {_show(ds)} (one of {sorted(_BASE64_DTYPES)})")
        got = _BASE64_DTYPES[ds]
        if dtype is not None and got != dtype:
            _fail(f"{path}.dtype", f"is {ds}, the operand is stored as {dtype.newbyteorder('<').str}")
        shape = _shape_field(obj["shape"], f"{path}.shape")
        text = obj["base64"]
        if not isinstance(text, str):
            _fail(f"{path}.base64", f"must be a string, got {type(text).__name__}")
        try:
            raw = base64.b64decode(text.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError, ValueError) as e:
            _fail(f"{path}.base64", f"not valid base64 ({e})")
        need = element_count(shape) * got.itemsize
        if len(raw) != need:
            _fail(f"{path}.base64", f"decodes to {len(raw)} bytes, shape {list(shape)} of {ds} needs {need}")
        arr = np.frombuffer(raw, dtype=got.newbyteorder("<")).astype(got).reshape(shape)
        if got.kind == "b" and np.frombuffer(raw, dtype=np.uint8).max(initial=0) > 1:
            _fail(f"{path}.base64", "bool bytes must be 0 or 1")
    else:
        if isinstance(obj, dict):
            extra = set(obj) - {"shape", "values"}
            if extra:
                _fail(path, f"unknown field {sorted(extra)[0]!r} in a tensor")
            for k in ("shape", "values"):
                if k not in obj:
                    _fail(f"{path}.{k}", "required field is missing")
            shape = _shape_field(obj["shape"], f"{path}.shape")
            flat = obj["values"]
            if not isinstance(flat, list) or any(isinstance(x, (list, dict)) for x in flat):
                _fail(f"{path}.values", "must be a flat list of values")
            if len(flat) != element_count(shape):
                _fail(
                    f"{path}.values", f"expected {element_count(shape)} values for shape {list(shape)}, got {len(flat)}"
                )
            arr = _convert(flat, dtype, f"{path}.values").reshape(shape)
        elif isinstance(obj, list):
            shape, flat = _nested(obj, path)
            flat_given = len(shape) == 1
            arr = _convert(flat, dtype, path).reshape(shape)
        elif isinstance(obj, (bool, int, float, str)):
            arr = _convert([obj], dtype, path).reshape(())
        else:
            _fail(path, f"expected a tensor (a list, {{shape, values}} or {{dtype, shape, base64}}), got {_show(obj)}")

    if scalar:
        if arr.size != 1:
            _fail(path, f"a scalar needs exactly 1 value, got {arr.size}")
        return arr.reshape(())
    if dims is None or not dims:
        return arr
    dims = tuple(dims)
    if arr.shape == dims:
        return arr
    if flat_given and all(dims):
        # a flat list read against fully known dimensions, as in the AOSP vector files
        if arr.size != element_count(dims):
            _fail(path, f"expected {element_count(dims)} values for dims {list(dims)}, got {arr.size}")
        return arr.reshape(dims)
    if arr.ndim != len(dims) or any(d and d != a for d, a in zip(dims, arr.shape)):
        _fail(path, f"shape {list(arr.shape)} does not fit dims {list(dims)}")
    return arr


# ---------------------------------------------------------------------------------------
# Model <-> dict
# ---------------------------------------------------------------------------------------


def _enum_out(code: Any, enum_cls: type[Enum]) -> str | int:
    try:
        return enum_cls(code).name
    except (ValueError, TypeError):
        return int(code)


def _enum_in(obj: Any, enum_cls: type[Enum], what: str, path: str) -> Any:
    if isinstance(obj, str):
        try:
            return enum_cls[obj]
        except KeyError:
            _fail(path, f"unknown {what} {_show(obj)}")
    if type(obj) is int:
        _int(obj, path)
        try:
            return enum_cls(obj)
        except ValueError:
            return obj  # a raw (invalid) code, kept for validation to report
    article = "an" if what[0] in "aeiou" else "a"
    _fail(path, f"must be {article} {what} name, got {_show(obj)}")


def _operand_to_dict(op: Operand, p: str) -> dict[str, Any]:
    d: dict[str, Any] = {
        "type": _enum_out(op.type, OperandType),
        "dimensions": [int(x) for x in op.dimensions],
        "lifetime": _enum_out(op.lifetime, Lifetime),
        "scale": _float_json(float(op.scale)),
        "zero_point": int(op.zero_point),
        "channel_quant": None
        if op.channel_quant is None
        else {
            "scales": [_float_json(float(s)) for s in op.channel_quant.scales],
            "channel_dim": int(op.channel_quant.channel_dim),
        },
        "num_consumers": None if op.num_consumers is None else int(op.num_consumers),
        "name": op.name,
    }
    if op.value is None:
        d["value"] = None
    elif op.lifetime == Lifetime.SUBGRAPH:
        d["value"] = int(op.value)
    elif isinstance(d["type"], int):
        d["value"] = _base64(np.asarray(op.value))  # no type to take the dtype from: carry it
    else:
        d["value"] = encode_tensor(op.value, f"{p}.value")
    return d


def _subgraph_to_dict(sg: Subgraph, p: str) -> dict[str, Any]:
    return {
        "name": sg.name,
        "operands": [_operand_to_dict(o, f"{p}.operands[{i}]") for i, o in enumerate(sg.operands)],
        "operations": [
            {
                "type": _enum_out(o.type, OperationType),
                "inputs": [int(i) for i in o.inputs],
                "outputs": [int(i) for i in o.outputs],
            }
            for o in sg.operations
        ],
        "input_indexes": [int(i) for i in sg.input_indexes],
        "output_indexes": [int(i) for i in sg.output_indexes],
    }


def model_to_dict(model: Model) -> dict[str, Any]:
    return {
        "main": _subgraph_to_dict(model.main, "model.main"),
        "referenced": [_subgraph_to_dict(s, f"model.referenced[{i}]") for i, s in enumerate(model.referenced)],
        "relax_fp32_to_fp16": bool(model.relax_fp32_to_fp16),
    }


def _fields(d: Any, path: str, required: Sequence[str], optional: dict[str, Any]) -> dict[str, Any]:
    """Check ``d`` is an object with exactly these keys; return them with defaults filled."""
    if not isinstance(d, dict):
        _fail(path or "spec", f"must be an object, got {_show(d)}")
    for k in d:
        if k not in required and k not in optional:
            _fail(path or "spec", f"unknown field {_show(k)}")
    out: dict[str, Any] = {}
    for k in required:
        if k not in d:
            _fail(f"{path}.{k}" if path else k, "required field is missing")
        out[k] = d[k]
    for k, default in optional.items():
        out[k] = d.get(k, default)
    return out


def _int(x: Any, path: str, minimum: int | None = None) -> int:
    """An integer field: int32 or uint32 (indexes, codes, zero points, counts)."""
    if type(x) is not int:
        _fail(path, f"must be an integer, got {_show(x)}")
    if minimum is not None and x < minimum:
        _fail(path, f"must be >= {minimum}, got {_show(x)}")
    lo, hi = INT_FIELD_RANGE
    if not lo <= x < hi:
        _fail(path, f"must be an integer in [-2**31, 2**32), got {_show(x)}")
    return x


def _int_list(x: Any, path: str) -> tuple[int, ...]:
    if not isinstance(x, list):
        _fail(path, f"must be a list of integers, got {_show(x)}")
    for i, v in enumerate(x):
        _int(v, f"{path}[{i}]")
    return tuple(x)


def _dims(x: Any, path: str) -> tuple[int, ...]:
    """Operand dimensions: checked here, not only by validation (replay skips validation)."""
    if not isinstance(x, list):
        _fail(path, f"must be a list of integers, got {_show(x)}")
    for i, v in enumerate(x):
        if type(v) is not int:
            _fail(f"{path}[{i}]", f"must be an integer, got {_show(v)}")
        if not 0 <= v < DIM_LIMIT:
            _fail(f"{path}[{i}]", f"a dimension must be in [0, 2**31), got {_show(v)}")
    return tuple(x)


def _float(x: Any, path: str) -> float:
    if isinstance(x, str) and x in _FLOAT_WORDS:
        return _FLOAT_WORDS[x]
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        _fail(path, f"must be a number, got {_show(x)}")
    try:
        return float(x)
    except OverflowError:
        _fail(path, f"{_show(x)} does not fit a double")


def _str(x: Any, path: str) -> str:
    if not isinstance(x, str):
        _fail(path, f"must be a string, got {_show(x)}")
    return x


def _bool(x: Any, path: str) -> bool:
    if not isinstance(x, bool):
        _fail(path, f"must be true or false, got {_show(x)}")
    return x


def _operand_from_dict(d: Any, p: str) -> Operand:
    f = _fields(
        d,
        p,
        ("type", "lifetime"),
        {
            "dimensions": [],
            "scale": 0.0,
            "zero_point": 0,
            "channel_quant": None,
            "num_consumers": None,
            "name": "",
            "value": None,
        },
    )
    t = _enum_in(f["type"], OperandType, "operand type", f"{p}.type")
    lifetime = _enum_in(f["lifetime"], Lifetime, "lifetime", f"{p}.lifetime")
    dims = _dims(f["dimensions"], f"{p}.dimensions")
    cq = f["channel_quant"]
    if cq is not None:
        c = _fields(cq, f"{p}.channel_quant", ("scales", "channel_dim"), {})
        if not isinstance(c["scales"], list):
            _fail(f"{p}.channel_quant.scales", f"must be a list of numbers, got {_show(c['scales'])}")
        cq = ChannelQuant(
            tuple(_float(s, f"{p}.channel_quant.scales[{i}]") for i, s in enumerate(c["scales"])),
            _int(c["channel_dim"], f"{p}.channel_quant.channel_dim"),
        )
    nc = f["num_consumers"]
    if nc is not None:
        nc = _int(nc, f"{p}.num_consumers")
    value = f["value"]
    if value is not None:
        if lifetime == Lifetime.SUBGRAPH or t == OperandType.SUBGRAPH:
            value = _int(value, f"{p}.value")
        else:
            try:
                info = type_info(t)
                dtype, scalar = info.dtype, info.is_scalar
            except KeyError:
                dtype, scalar = None, False
            value = decode_tensor(value, dtype, dims, f"{p}.value", scalar=scalar)
            value.setflags(write=False)
    return Operand(
        t,
        dims,
        _float(f["scale"], f"{p}.scale"),
        _int(f["zero_point"], f"{p}.zero_point"),
        lifetime,
        value,
        cq,
        _str(f["name"], f"{p}.name"),
        nc,
    )


def _operation_from_dict(d: Any, p: str) -> Operation:
    f = _fields(d, p, ("type", "inputs", "outputs"), {})
    return Operation(
        _enum_in(f["type"], OperationType, "operation type", f"{p}.type"),
        _int_list(f["inputs"], f"{p}.inputs"),
        _int_list(f["outputs"], f"{p}.outputs"),
    )


def _list(x: Any, path: str) -> list[Any]:
    if not isinstance(x, list):
        _fail(path, f"must be a list, got {_show(x)}")
    return x


def _subgraph_from_dict(d: Any, p: str) -> Subgraph:
    f = _fields(d, p, ("operands", "operations", "input_indexes", "output_indexes"), {"name": ""})
    operands = tuple(
        _operand_from_dict(o, f"{p}.operands[{i}]") for i, o in enumerate(_list(f["operands"], f"{p}.operands"))
    )
    operations = tuple(
        _operation_from_dict(o, f"{p}.operations[{i}]") for i, o in enumerate(_list(f["operations"], f"{p}.operations"))
    )
    return Subgraph(
        operands,
        operations,
        _int_list(f["input_indexes"], f"{p}.input_indexes"),
        _int_list(f["output_indexes"], f"{p}.output_indexes"),
        _str(f["name"], f"{p}.name"),
    )


def model_from_dict(d: Any, path: str = "model") -> Model:
    """Build a Model from its JSON form (no validation; see :func:`spec_path`)."""
    f = _fields(d, path, ("main",), {"referenced": [], "relax_fp32_to_fp16": False})
    main = _subgraph_from_dict(f["main"], f"{path}.main")
    referenced = tuple(
        _subgraph_from_dict(s, f"{path}.referenced[{i}]")
        for i, s in enumerate(_list(f["referenced"], f"{path}.referenced"))
    )
    return Model(main, referenced, _bool(f["relax_fp32_to_fp16"], f"{path}.relax_fp32_to_fp16"))


def spec_path(where: str, model_path: str = "model") -> str:
    """Map a ValidationError ``where`` (``operands[3].scale``) onto the spec (``model.main.operands[3].scale``)."""
    if not where:
        return model_path
    if where.startswith("referenced[") or where.startswith("request"):
        return f"{model_path}.{where}" if where.startswith("referenced[") else where
    return f"{model_path}.main.{where}"


# ---------------------------------------------------------------------------------------
# Examples and the whole file
# ---------------------------------------------------------------------------------------


def _io_operand(model: Model, index: int) -> tuple[np.dtype | None, tuple[int, ...] | None, bool]:
    ops = model.main.operands
    if not 0 <= index < len(ops):
        return None, None, False
    try:
        info = type_info(ops[index].type)
    except KeyError:
        return None, None, False
    return info.dtype, ops[index].dimensions, info.is_scalar


def _decode_io(
    values: Sequence[Any], model: Model, indexes: Sequence[int], path: str, allow_null: bool
) -> list[np.ndarray | None]:
    out: list[np.ndarray | None] = []
    for k, (v, idx) in enumerate(zip(values, indexes)):
        if v is None and allow_null:
            out.append(None)
            continue
        dtype, dims, scalar = _io_operand(model, idx)
        out.append(decode_tensor(v, dtype, dims, f"{path}[{k}]", scalar=scalar))
    return out


def _example_from_dict(d: Any, model: Model, p: str) -> SpecExample:
    f = _fields(d, p, ("name", "inputs", "outputs"), {"ignored": [], "expect_failure": False})
    name = _str(f["name"], f"{p}.name")
    expect_failure = _bool(f["expect_failure"], f"{p}.expect_failure")
    ins, outs = _list(f["inputs"], f"{p}.inputs"), _list(f["outputs"], f"{p}.outputs")
    n_in, n_out = len(model.main.input_indexes), len(model.main.output_indexes)
    if len(ins) != n_in:
        _fail(f"{p}.inputs", f"the model has {n_in} inputs, got {len(ins)} values")
    if len(outs) != n_out and not (expect_failure and not outs):
        _fail(f"{p}.outputs", f"the model has {n_out} outputs, got {len(outs)} values")
    flags = _list(f["ignored"], f"{p}.ignored")
    if flags and len(flags) != n_out:
        _fail(f"{p}.ignored", f"needs one flag per output ({n_out}), got {len(flags)}")
    ignored = tuple(_bool(x, f"{p}.ignored[{i}]") for i, x in enumerate(flags))
    return SpecExample(
        name,
        _decode_io(ins, model, model.main.input_indexes, f"{p}.inputs", True),
        _decode_io(outs, model, model.main.output_indexes, f"{p}.outputs", False),
        ignored,
        expect_failure,
    )


def _stored(value: Any, model: Model, index: int, path: str) -> Any:
    """Encode an example value in its operand's storage dtype (a list or an int64 array of
    uint8 data is fine; a value the dtype cannot hold is an error now, not at replay)."""
    if value is None:
        return None
    arr = np.asarray(value)
    dtype, _, _ = _io_operand(model, index)
    if arr.dtype.kind not in "fiub":
        _fail(
            path,
            f"a {arr.dtype} value cannot be stored; expected numbers" + (f" of {dtype}" if dtype is not None else ""),
        )
    if dtype is not None and arr.dtype != dtype:
        with np.errstate(over="ignore", invalid="ignore"):
            cast = arr.astype(dtype)
        lossless = (
            dtype.kind == "f"
            and arr.dtype.kind in "fiub"
            or (arr.dtype.kind in "iub" and np.array_equal(cast.astype(arr.dtype), arr))
        )
        if not lossless:
            _fail(path, f"a {arr.dtype} value does not fit the operand's {dtype} storage")
        arr = cast
    return encode_tensor(arr, path)


def _example_to_dict(ex: SpecExample, model: Model, p: str) -> dict[str, Any]:
    ins, outs = model.main.input_indexes, model.main.output_indexes
    return {
        "name": ex.name,
        "inputs": [_stored(v, model, i, f"{p}.inputs[{k}]") for k, (v, i) in enumerate(zip(ex.inputs, ins))]
        + [encode_tensor(v) for v in ex.inputs[len(ins) :]],
        "outputs": [_stored(v, model, i, f"{p}.outputs[{k}]") for k, (v, i) in enumerate(zip(ex.outputs, outs))]
        + [encode_tensor(v) for v in ex.outputs[len(outs) :]],
        "ignored": [bool(x) for x in ex.ignored],
        "expect_failure": bool(ex.expect_failure),
    }


def _jsonable(x: Any, path: str = "meta") -> Any:
    """meta values as strict JSON: numpy scalars/arrays to Python, non-finite floats to words."""
    if isinstance(x, dict):
        return {str(k): _jsonable(v, f"{path}.{k}") for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v, f"{path}[{i}]") for i, v in enumerate(x)]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist(), path)
    if isinstance(x, np.generic):
        return _jsonable(x.item(), path)
    if isinstance(x, float):
        return _float_json(x)
    if x is None or isinstance(x, (bool, int, str)):
        return x
    raise SpecError(f"{path}: {type(x).__name__} cannot be stored in a spec file")


def _meta_to_dict(meta: dict[str, Any], model: Model) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in meta.items():
        if k == "actual_outputs" and isinstance(v, (list, tuple)):
            idx = model.main.output_indexes
            # arrays are encoded here; an entry already in JSON tensor form ({...}) passes through
            out[k] = [
                _jsonable(a, f"meta.actual_outputs[{j}]")
                if isinstance(a, dict)
                else _stored(a, model, idx[j], f"meta.actual_outputs[{j}]")
                if j < len(idx)
                else encode_tensor(a, f"meta.actual_outputs[{j}]")
                for j, a in enumerate(v)
            ]
        else:
            out[k] = _jsonable(v, f"meta.{k}")
    return out


def _meta_from_dict(doc: Any, model: Model) -> dict[str, Any]:
    if not isinstance(doc, dict):
        _fail("meta", f"must be an object, got {_show(doc)}")
    meta: dict[str, Any] = dict(doc)
    # meta is free-form, except the entries replay acts on
    if meta.get("criteria_set") is not None and not isinstance(meta["criteria_set"], str):
        _fail("meta.criteria_set", f"must be the name of a criteria set, got {_show(meta['criteria_set'])}")
    if "actual_outputs" in meta:
        acts = _list(meta["actual_outputs"], "meta.actual_outputs")
        if len(acts) > len(model.main.output_indexes):
            _fail(
                "meta.actual_outputs", f"the model has {len(model.main.output_indexes)} outputs, got {len(acts)} values"
            )
        meta["actual_outputs"] = _decode_io(acts, model, model.main.output_indexes, "meta.actual_outputs", True)
    return meta


def spec_to_dict(spec: SpecFile) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "model": model_to_dict(spec.model),
        "examples": [_example_to_dict(e, spec.model, f"examples[{i}]") for i, e in enumerate(spec.examples)],
        "meta": _meta_to_dict(spec.meta, spec.model),
    }


def spec_from_dict(doc: Any, validate: bool = True) -> SpecFile:
    _check_tree(doc)
    # format and version first: a file of another version may lay out everything else differently
    if isinstance(doc, dict):
        if "format" in doc and doc["format"] != FORMAT:
            _fail("format", f"expected {FORMAT!r}, got {_show(doc['format'])}")
        version = doc.get("version", VERSION)
        if type(version) is not int:
            _fail("version", f"must be an integer, got {_show(version)}")
        if version != VERSION:
            _fail(
                "version", f"unsupported spec version {version} (this nnconform {__version__} reads version {VERSION})"
            )
    f = _fields(doc, "", ("format", "version", "model"), {"examples": [], "meta": {}})
    model = model_from_dict(f["model"], "model")
    if validate:
        from nnconform.ir.validation import validate_model

        try:
            validate_model(model)
        except ValidationError as e:
            raise _error(f"{_short_path(spec_path(e.where))}: {e.message}") from None
    examples = [_example_from_dict(e, model, f"examples[{i}]") for i, e in enumerate(_list(f["examples"], "examples"))]
    return SpecFile(model, examples, _meta_from_dict(f["meta"], model))


_SHORT_LIST = re.compile(r"\[[^\[\]{}]*\]")


def _one_line(m: re.Match[str]) -> str:
    # Only whitespace between tokens changes: JSON strings never hold a raw newline.
    return re.sub(r"\n\s*", "", re.sub(r",\n\s*", ", ", m.group()))


_LIST_OF_LISTS = re.compile(r"\[(?:\s*\[[^\[\]{}]*\],?)+\s*\]")
_FLAT_OBJECT = re.compile(r"\{(?:[^{}\[\]]|\[[^\[\]{}]*\])*\}")


def _one_line_object(m: re.Match[str]) -> str:
    s = re.sub(r"\n\s*", "", re.sub(r",\n\s*", ", ", m.group()))
    return s if len(s) <= 200 else m.group()


def dumps_spec(spec: SpecFile) -> str:
    """Indented JSON with flat lists, and small flat objects (operations, operands), on one line."""
    text = json.dumps(spec_to_dict(spec), indent=1, allow_nan=False, ensure_ascii=False)
    text = _SHORT_LIST.sub(_one_line, text)
    text = _LIST_OF_LISTS.sub(_one_line_object, text)
    return _FLAT_OBJECT.sub(_one_line_object, text) + "\n"


class _BadNumber:
    """A JSON number literal refused by the parser hooks; reported with its path by
    :func:`_check_tree` (the hooks do not know where they are)."""

    __slots__ = ("text", "reason")

    def __init__(self, text: str, reason: str):
        self.text, self.reason = text, reason


class _DuplicateKeys(dict[str, Any]):
    """A JSON object that repeated a key (last value kept); reported by :func:`_check_tree`."""

    __slots__ = ("duplicate",)
    duplicate: str


def _parse_int(text: str) -> int | _BadNumber:
    if len(text) > MAX_NUMBER_CHARS:
        return _BadNumber(
            text,
            f"integer literal of {len(text.lstrip('-'))} digits is too long (at most {MAX_NUMBER_CHARS} characters)",
        )
    return int(text)


def _parse_float(text: str) -> float | _BadNumber:
    if len(text) > MAX_NUMBER_CHARS:
        return _BadNumber(text, f"number literal of {len(text)} characters is too long (at most {MAX_NUMBER_CHARS})")
    x = float(text)
    if math.isinf(x):
        return _BadNumber(
            text, f'number {shorten(text, 40)} is out of range for a double (infinity is written "inf" or "-inf")'
        )
    return x


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d = dict(pairs)
    if len(d) == len(pairs):
        return d
    seen: set[str] = set()
    dup = ""
    for k, _ in pairs:  # the first key seen twice (dict() kept its last value)
        if k in seen:
            dup = k
            break
        seen.add(k)
    marked = _DuplicateKeys(d)
    marked.duplicate = dup
    return marked


def _key_path(path: str, key: Any) -> str:
    key = shorten(str(key), 40)
    return f"{path}.{key}" if path else key


def _check_tree(doc: Any) -> None:
    """Refuse what the per-field checks cannot see or would choke on: nesting deeper than
    MAX_NESTING (no RecursionError later), refused number literals, integers of more than
    MAX_NUMBER_CHARS digits, duplicate keys.  Iterative; reports the first culprit's path."""
    max_bits = int(MAX_NUMBER_CHARS * 3.33)  # ~ MAX_NUMBER_CHARS decimal digits
    stack: list[tuple[Any, str, int]] = [(doc, "", 1)]
    while stack:
        node, path, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > MAX_NESTING:
                _fail(path or "spec", f"nested deeper than {MAX_NESTING} levels")
            if isinstance(node, _DuplicateKeys):
                _fail(path or "spec", f"duplicate key {_show(node.duplicate)}")
            if isinstance(node, dict):
                children = [(v, _key_path(path, k), depth + 1) for k, v in node.items()]
            else:
                children = [(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(node)]
            stack.extend(reversed(children))
        elif isinstance(node, _BadNumber):
            _fail(path or "spec", node.reason)
        elif type(node) is int and node.bit_length() > max_bits:
            _fail(
                path or "spec",
                f"integer of about {int(node.bit_length() * 0.30103) + 1} digits "
                f"is too long (at most {MAX_NUMBER_CHARS})",
            )


def loads_spec(text: str, validate: bool = True) -> SpecFile:
    try:
        doc = json.loads(text, object_pairs_hook=_object, parse_int=_parse_int, parse_float=_parse_float)
    except json.JSONDecodeError as e:
        raise _error(f"spec: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except RecursionError:
        raise _error(f"spec: JSON nested deeper than {MAX_NESTING} levels") from None
    return spec_from_dict(doc, validate=validate)


def dump_spec(spec: SpecFile, path: str | os.PathLike[str]) -> None:
    """Write atomically: a reader sees the old file or the whole new one, never half."""
    text = dumps_spec(spec)
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _check_regular(st: os.stat_result) -> None:
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _FILE_KINDS if test(st.st_mode)), "not a plain file")
        raise _error(f"file: not a regular file ({kind})")
    if st.st_size > MAX_SPEC_BYTES:
        raise _error(f"file: larger than {_size(MAX_SPEC_BYTES)} ({st.st_size} bytes)")


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n} bytes"


def _read_capped(path: str | os.PathLike[str]) -> bytes:
    """The file's bytes, refusing before reading anything that is not a regular file of at
    most MAX_SPEC_BYTES (checked on the path, then on the opened file; at most cap + 1
    bytes are read, whatever stat said)."""
    try:
        _check_regular(os.stat(path))  # a device or FIFO is never even opened
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise _error(f"file: cannot read ({e.strerror or e})") from None
    try:
        with os.fdopen(fd, "rb") as fh:
            _check_regular(os.fstat(fh.fileno()))  # replaced between stat and open
            data = fh.read(MAX_SPEC_BYTES + 1)
    except OSError as e:
        raise _error(f"file: cannot read ({e.strerror or e})") from None
    if len(data) > MAX_SPEC_BYTES:
        raise _error(f"file: larger than {_size(MAX_SPEC_BYTES)}")
    return data


def load_spec(path: str | os.PathLike[str], validate: bool = True) -> SpecFile:
    """Read a spec file.  Errors name the field, not the file (the caller knows which file
    it opened and says so, as the CLI does): ``model.main.operands[3].type: ...``, or
    ``file: cannot read (...)`` when the file itself is unreadable, is not a regular file
    or is larger than :data:`MAX_SPEC_BYTES`."""
    data = _read_capped(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _error(f"file: not UTF-8 text ({e.reason} at byte {e.start})") from None
    del data
    return loads_spec(text, validate=validate)


# ---------------------------------------------------------------------------------------
# Provenance of a dumped failure
# ---------------------------------------------------------------------------------------


def replay_command(spec_file: str | os.PathLike[str], driver: str) -> str:
    """The one command that replays a dumped spec against a driver."""
    return f"nnconform replay {shlex.quote(os.fspath(spec_file))} --driver {shlex.quote(driver)}"


def failure_meta(
    *,
    seed: int | None,
    driver: str,
    actual_outputs: Sequence[np.ndarray | None],
    criterion: dict[str, Any],
    replay: str,
    example: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """``meta`` for a dumped failure; ``extra`` adds free-form JSON entries (suite, test id...)."""
    return {
        "seed": seed,
        "driver": driver,
        "example": example,
        "actual_outputs": list(actual_outputs),
        "criterion": dict(criterion),
        "harness_version": __version__,
        "replay": replay,
        **extra,
    }


__all__ = [
    "FORMAT",
    "VERSION",
    "INLINE_MAX",
    "MAX_SPEC_BYTES",
    "MAX_NESTING",
    "MAX_NUMBER_CHARS",
    "SpecExample",
    "SpecFile",
    "encode_tensor",
    "decode_tensor",
    "model_to_dict",
    "model_from_dict",
    "spec_to_dict",
    "spec_from_dict",
    "spec_path",
    "dumps_spec",
    "loads_spec",
    "dump_spec",
    "load_spec",
    "replay_command",
    "failure_meta",
]
