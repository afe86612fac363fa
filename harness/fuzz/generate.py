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


def _mutate_once(rng, sg: Subgraph) -> Subgraph:
    n = len(sg.operands)
    kind = rng.integers(0, 9)
    if kind <= 4 and n:
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
        return dataclasses.replace(sg, **changed)
    return dataclasses.replace(sg, operations=tuple(ops))


def mutate_example(rng) -> tuple[Model, list]:
    examples = golden()
    e = examples[int(rng.integers(0, len(examples)))]
    sg = e.model.main
    for _ in range(int(rng.integers(1, 4))):
        sg = _mutate_once(rng, sg)
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


def make_case(seed: int) -> tuple[Model, list]:
    """The case of this seed: (model, inputs, one per main input index)."""
    rng = np.random.default_rng(seed)
    if rng.random() < 0.5:
        model, inputs = mutate_example(rng)
        sg = model.main
        if len(inputs) != len(sg.input_indexes) or rng.random() < 0.2:
            inputs = [_input_for(rng, sg, k) for k in sg.input_indexes]
        return model, inputs
    model = random_model(rng)
    return model, [_input_for(rng, model.main, k) for k in model.main.input_indexes]


def operation_names(model: Model) -> list[str]:
    return sorted({o.name for o in model.main.operations})
