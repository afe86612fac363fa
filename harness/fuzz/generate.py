"""Fuzz cases: arbitrary, mostly invalid models and requests, built from one seed.

A case is ``(model, inputs)``; :func:`make_case` draws it from ``numpy.random.default_rng``
seeded with the case seed, so a case index always gives the same case.  Half of the cases are
generated from nothing (:func:`random_model`), half by mutating a valid golden example
(:func:`mutate_example`), which keeps them close enough to valid to get past a driver's first
checks.  What is drawn, on purpose:

- operand type codes 0..15 and codes no type has (16, 99, 10000/10001 OEM, -1, 2**31);
- lifetime codes 0..6 and invalid ones;
- dimensions of rank 0..6 with 0, 1..8, big (2**16, 2**20, 2**31 - 1) and negative entries;
- scales and zero points out of range (negative, NaN, inf, 300);
- constant buffers of 0..65,536 bytes, unrelated to the operand's size;
- operation codes 0..105 (and beyond), wired to random operand indexes, some out of range;
- requests with inputs of the wrong size, rank or dtype, and omitted inputs.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import Any

import numpy as np

from nnconform.ir import Lifetime, Model, Operand, OperandType, Operation, Subgraph, type_info

MAX_OP_CODE = 105
BIG_DIMS = (1 << 16, 1 << 20, (1 << 31) - 1)
BAD_TYPES = (16, 99, 10000, 10001, -1, 1 << 31)
BAD_LIFETIMES = (7, 99, -1)
SCALES = (0.0, 1.0, 0.5, 1e-30, 1e30, -1.0, float("nan"), float("inf"))
ZERO_POINTS = (0, 0, 128, -128, -1, 255, 300, 1 << 31)
MAX_CONST_BYTES = 65536
MAX_INPUT_ELEMENTS = 4096
# What a case is made by: from nothing, or a golden example whose first mutation is this one.
# The order of MUTATIONS is the mutator's own numbering (a seed's draws depend on it).
MUTATIONS = ("dims", "type", "lifetime", "quant", "const", "op-type", "op-inputs", "op-outputs", "io")
RANDOM = "random"
KINDS = (RANDOM, *(f"mutate:{m}" for m in MUTATIONS))


@lru_cache(maxsize=1)
def golden() -> tuple:
    """The valid examples the mutator starts from (the suites' examples)."""
    from nnconform.suites.examples import all_examples

    return tuple(e for e in all_examples() if not e.expect_failure)


def _dim(rng) -> int:
    r = rng.random()
    if r < 0.70:
        return int(rng.integers(1, 9))
    if r < 0.80:
        return 0
    if r < 0.84:
        return int(rng.choice(BIG_DIMS))
    if r < 0.87:
        return -int(rng.integers(1, 3))
    return int(rng.integers(9, 1000))


def _dims(rng) -> tuple[int, ...]:
    rank = int(rng.choice([0, 0, 1, 2, 3, 4, 4, 5, 6]))
    return tuple(_dim(rng) for _ in range(rank))


def _type(rng) -> int:
    if rng.random() < 0.88:
        return int(rng.integers(0, 16))
    return int(rng.choice(BAD_TYPES))


def _dtype(code: int):
    try:
        return type_info(code).dtype
    except (KeyError, ValueError):
        return None


def _const_value(rng, code: int):
    """A buffer of 0..65,536 bytes (log-uniform), in the type's dtype when it has one."""
    n = int(np.exp(rng.uniform(0, np.log(MAX_CONST_BYTES + 1)))) - 1 if rng.random() < 0.9 else 0
    raw = rng.integers(0, 256, n, dtype=np.uint8)
    dt = _dtype(code)
    if dt is None:
        return raw
    dt = np.dtype(dt)
    return np.frombuffer(raw[: n - n % dt.itemsize].tobytes(), dtype=dt).copy()


def _operand(rng, lifetime: int | None = None) -> Operand:
    code = _type(rng)
    if lifetime is None:
        lifetime = int(rng.integers(0, 7)) if rng.random() < 0.95 else int(rng.choice(BAD_LIFETIMES))
    value = None
    if lifetime in (Lifetime.CONSTANT_COPY, Lifetime.CONSTANT_REFERENCE):
        value = _const_value(rng, code)
    elif lifetime == Lifetime.SUBGRAPH:
        value = int(rng.integers(-1, 3))
    return Operand(
        _enum(OperandType, code),
        _dims(rng),
        float(rng.choice(SCALES)),
        int(rng.choice(ZERO_POINTS)),
        _enum(Lifetime, lifetime),
        value,
    )


def _enum(cls, code: int):
    try:
        return cls(code)
    except ValueError:
        return code  # a raw code no member has: the IR carries it as an int


def _index(rng, n: int) -> int:
    r = rng.random()
    if r < 0.93 or n == 0:
        return int(rng.integers(0, max(n, 1)))
    return int(rng.choice([n, n + 5, -1, 1 << 20]))


def random_model(rng) -> Model:
    n_operands = int(rng.integers(1, 13))
    operands = [_operand(rng) for _ in range(n_operands)]
    n_ops = int(rng.integers(0, 5)) if rng.random() < 0.1 else int(rng.integers(1, 5))
    ops = []
    for _ in range(n_ops):
        code = int(rng.integers(0, MAX_OP_CODE + 1)) if rng.random() < 0.97 else int(rng.choice([106, 999, -1]))
        ins = tuple(_index(rng, n_operands) for _ in range(int(rng.integers(0, 9))))
        outs = tuple(_index(rng, n_operands) for _ in range(int(rng.integers(0, 4))))
        ops.append(Operation(code, ins, outs))
    ins = tuple(_index(rng, n_operands) for _ in range(int(rng.integers(0, 4))))
    outs = tuple(_index(rng, n_operands) for _ in range(int(rng.integers(0, 3))))
    return Model(Subgraph(tuple(operands), tuple(ops), ins, outs, "main"))


# ---- mutations of a valid model ----------------------------------------------------------


def _replace_operand(sg: Subgraph, k: int, op: Operand) -> Subgraph:
    ops = list(sg.operands)
    ops[k] = op
    return dataclasses.replace(sg, operands=tuple(ops))


def _mutate_once(rng, sg: Subgraph, forced: int | None = None) -> tuple[Subgraph, str]:
    """One mutation of ``sg`` and its name (MUTATIONS); ``forced`` picks the mutation (the
    draw still happens, so an unforced case of a seed stays what it always was)."""
    n = len(sg.operands)
    kind = rng.integers(0, 9)
    if forced is not None:
        kind = forced
    if kind <= 4 and n:
        return _mutate_operand(rng, sg, int(kind), n), MUTATIONS[int(kind)]
    ops = list(sg.operations)
    if kind == 5 and ops:
        j = int(rng.integers(0, len(ops)))
        ops[j] = dataclasses.replace(ops[j], type=int(rng.integers(0, MAX_OP_CODE + 1)))
    elif kind == 6 and ops:
        j = int(rng.integers(0, len(ops)))
        ins = list(ops[j].inputs)
        if ins and rng.random() < 0.6:
            ins[int(rng.integers(0, len(ins)))] = _index(rng, n)
        elif ins and rng.random() < 0.5:
            ins.pop(int(rng.integers(0, len(ins))))
        else:
            ins.append(_index(rng, n))
        ops[j] = dataclasses.replace(ops[j], inputs=tuple(ins))
    elif kind == 7 and ops:
        j = int(rng.integers(0, len(ops)))
        outs = list(ops[j].outputs) or [0]
        outs[int(rng.integers(0, len(outs)))] = _index(rng, n)
        ops[j] = dataclasses.replace(ops[j], outputs=tuple(outs))
    else:
        which = "input_indexes" if rng.random() < 0.5 else "output_indexes"
        idx = list(getattr(sg, which))
        if idx and rng.random() < 0.5:
            idx.pop(int(rng.integers(0, len(idx))))
        else:
            idx.append(_index(rng, n))
        changed: dict[str, Any] = {which: tuple(idx)}  # input_indexes or output_indexes
        return dataclasses.replace(sg, **changed), "io"
    return dataclasses.replace(sg, operations=tuple(ops)), MUTATIONS[int(kind)]


def _mutate_operand(rng, sg: Subgraph, kind: int, n: int) -> Subgraph:
    k = int(rng.integers(0, n))
    o = sg.operands[k]
    if kind == 0:
        dims = list(o.dimensions)
        if dims and rng.random() < 0.7:
            dims[int(rng.integers(0, len(dims)))] = (
                _dim(rng) if rng.random() < 0.5 else int(rng.choice([0, *BIG_DIMS, -1]))
            )
        elif rng.random() < 0.5:
            dims = []  # rank 0
        else:
            dims.append(_dim(rng))
        return _replace_operand(sg, k, dataclasses.replace(o, dimensions=tuple(dims)))
    if kind == 1:
        return _replace_operand(sg, k, dataclasses.replace(o, type=_enum(OperandType, _type(rng))))
    if kind == 2:
        life = int(rng.integers(0, 7)) if rng.random() < 0.8 else int(rng.choice(BAD_LIFETIMES))
        value = o.value
        if life in (3, 4) and value is None:
            value = _const_value(rng, int(o.type))
        return _replace_operand(sg, k, dataclasses.replace(o, lifetime=_enum(Lifetime, life), value=value))
    if kind == 3:
        return _replace_operand(
            sg, k, dataclasses.replace(o, scale=float(rng.choice(SCALES)), zero_point=int(rng.choice(ZERO_POINTS)))
        )
    if o.value is not None and not isinstance(o.value, int):
        v = np.asarray(o.value).reshape(-1)
        cut = int(rng.integers(0, v.size + 1)) if rng.random() < 0.5 else v.size + int(rng.integers(1, 64))
        v = np.resize(v, cut) if v.size else np.zeros(cut, v.dtype)
        return _replace_operand(sg, k, dataclasses.replace(o, value=v))
    return _replace_operand(
        sg, k, dataclasses.replace(o, value=_const_value(rng, int(o.type)), lifetime=Lifetime.CONSTANT_COPY)
    )


def mutate_example(rng, first: str | None = None, applied: list | None = None) -> tuple[Model, list]:
    """A golden example mutated one to three times; ``first`` names the first mutation (one of
    MUTATIONS), ``applied`` collects the names of the mutations made."""
    examples = golden()
    e = examples[int(rng.integers(0, len(examples)))]
    sg = e.model.main
    forced = MUTATIONS.index(first) if first is not None else None
    for _ in range(int(rng.integers(1, 4))):
        sg, name = _mutate_once(rng, sg, forced)
        forced = None
        if applied is not None:
            applied.append(name)
    return dataclasses.replace(e.model, main=sg), list(e.inputs)


# ---- requests ----------------------------------------------------------------------------


def _input_for(rng, sg: Subgraph, k: int):
    """A value for main input ``k``: usually right-sized, sometimes wrong or omitted."""
    if not 0 <= k < len(sg.operands):
        return np.zeros(1, np.float32)
    o = sg.operands[k]
    dt = _dtype(int(o.type)) if not isinstance(o.type, OperandType) else o.info.dtype
    if dt is None:
        return np.zeros(1, np.float32)
    if rng.random() < 0.05:
        return None  # omitted
    dims = o.dimensions
    if rng.random() < 0.85 and all(0 < d <= 64 for d in dims) and int(np.prod(dims or (1,))) <= MAX_INPUT_ELEMENTS:
        shape = tuple(dims)
    else:
        shape = tuple(int(rng.integers(0, 5)) for _ in range(int(rng.integers(0, 4))))
    return _values(rng, np.dtype(dt), shape)


def _values(rng, dt: np.dtype, shape) -> np.ndarray:
    if dt.kind == "f":
        return (rng.standard_normal(shape) * 4).astype(dt)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    info = np.iinfo(dt)
    return rng.integers(max(info.min, -1000), min(info.max, 1000) + 1, shape).astype(dt)


def make_case(seed: int, kind: str | None = None) -> tuple[Model, list]:
    """The case of this seed: (model, inputs, one per main input index)."""
    c = make_traced_case(seed, kind)
    return c.model, c.inputs


@dataclasses.dataclass
class TracedCase:
    """A case with what made it: its kind (one of KINDS), the mutations applied, and the
    malformation features it has (see :func:`case_features`)."""

    seed: int
    kind: str
    model: Model
    inputs: list
    mutations: tuple
    features: frozenset


def make_traced_case(seed: int, kind: str | None = None) -> TracedCase:
    """The case of this seed; ``kind`` (one of KINDS) forces what the case is made by, else the
    seed draws it (half from nothing, half mutated, the mutations uniform).  An unforced seed
    gives the case it gave before kinds existed (the draws are the same)."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown fuzz case kind {kind!r} (one of {', '.join(KINDS)})")
    rng = np.random.default_rng(seed)
    mutate = rng.random() < 0.5
    if kind is not None:
        mutate = kind != RANDOM
    applied: list[str] = []
    if mutate:
        first = kind[len("mutate:") :] if kind is not None else None
        model, inputs = mutate_example(rng, first, applied)
        sg = model.main
        if len(inputs) != len(sg.input_indexes) or rng.random() < 0.2:
            inputs = [_input_for(rng, sg, k) for k in sg.input_indexes]
        got = f"mutate:{applied[0]}"
    else:
        model = random_model(rng)
        inputs = [_input_for(rng, model.main, k) for k in model.main.input_indexes]
        got = RANDOM
    feats = case_features(model, inputs) | {f"origin:{'mutate' if mutate else 'random'}"}
    feats |= {f"mutation:{m}" for m in applied}
    return TracedCase(int(seed), got, model, inputs, tuple(applied), frozenset(feats))


# ---- features: what is malformed about a case -----------------------------------------------
# The steering of nnconform.fuzz.steer avoids cases that have all the features the cases of a
# known bucket had in common.  Only departures from a valid model are features (a feature
# every valid model has would tell the buckets nothing).


def _index_features(where: str, idx, n: int) -> set[str]:
    out = set()
    for i in idx:
        if not isinstance(i, int) or i < 0:
            out.add(f"{where}:negative-index")
        elif i >= 1 << 16:
            out.add(f"{where}:far-index")
        elif i >= n:
            out.add(f"{where}:index-past-end")
    return out


def _operand_features(o) -> set[str]:
    out = set()
    code = o.type if isinstance(o.type, int) else -1
    try:
        info = type_info(code)
    except KeyError:
        info = None
        out.add("operand:unknown-type")
    life = o.lifetime if isinstance(o.lifetime, int) else -1
    if not 0 <= life <= 6:
        out.add("operand:unknown-lifetime")
    dims = o.dimensions
    if any(d == 0 for d in dims):
        out.add("dims:zero")
    if any(d < 0 for d in dims):
        out.add("dims:negative")
    if any(d >= BIG_DIMS[0] for d in dims):
        out.add("dims:huge")
    if len(dims) > 4:
        out.add("dims:rank-above-4")
    if info is not None and not info.is_scalar and not dims:
        out.add("dims:rank-0-tensor")
    if info is not None and info.is_scalar and dims:
        out.add("dims:scalar-with-dims")
    s = o.scale
    if info is not None and info.is_quant:
        if s != s:
            out.add("quant:nan-scale")
        elif s in (float("inf"), float("-inf")):
            out.add("quant:inf-scale")
        elif s <= 0:
            out.add("quant:non-positive-scale")
        elif s < 1e-20 or s > 1e20:
            out.add("quant:extreme-scale")
        if not -128 <= o.zero_point <= 65535:
            out.add("quant:zero-point-out-of-range")
    elif s != 0 or o.zero_point != 0:
        out.add("quant:parameters-on-unquantized")
    v = o.value
    if life == int(Lifetime.SUBGRAPH) and (not isinstance(v, int) or v != 0):
        out.add("operand:bad-subgraph-reference")
    if isinstance(v, np.ndarray) and life in (int(Lifetime.CONSTANT_COPY), int(Lifetime.CONSTANT_REFERENCE)):
        want = _expected_nbytes(code, dims)
        if want is None or want != v.nbytes:
            out.add("const:size-mismatch")
        if v.nbytes >= 4096:
            out.add("const:large")
    return out


def _expected_nbytes(code: int, dims) -> int | None:
    dt = _dtype(code)
    if dt is None or any(d < 0 for d in dims):
        return None
    n = 1
    for d in dims:
        n *= int(d)
    return n * np.dtype(dt).itemsize


def case_features(model: Model, inputs: list) -> frozenset:
    """The malformation features of a case (names like ``dims:zero``, ``operation:unknown-code``,
    ``operation-inputs:far-index``, ``request:omitted-input``)."""
    sg = model.main
    n = len(sg.operands)
    out: set[str] = set()
    for o in sg.operands:
        out |= _operand_features(o)
    if not sg.operations:
        out.add("graph:no-operations")
    for op in sg.operations:
        code = op.type if isinstance(op.type, int) else -1
        if not 0 <= code <= MAX_OP_CODE:
            out.add("operation:unknown-code")
        if not op.inputs:
            out.add("operation:no-inputs")
        if not op.outputs:
            out.add("operation:no-outputs")
        out |= _index_features("operation-inputs", op.inputs, n)
        out |= _index_features("operation-outputs", op.outputs, n)
    out |= _index_features("model-inputs", sg.input_indexes, n)
    out |= _index_features("model-outputs", sg.output_indexes, n)
    if not sg.input_indexes:
        out.add("graph:no-inputs")
    if not sg.output_indexes:
        out.add("graph:no-outputs")
    for k, x in zip(sg.input_indexes, inputs):
        if x is None:
            out.add("request:omitted-input")
        elif 0 <= k < n and isinstance(x, np.ndarray) and tuple(x.shape) != tuple(sg.operands[k].dimensions):
            out.add("request:input-shape-differs")
    if len(inputs) != len(sg.input_indexes):
        out.add("request:input-count-differs")
    return frozenset(out)


def operation_names(model: Model) -> list[str]:
    return sorted({o.name for o in model.main.operations})
