"""Random valid fp32 models from a seed, for the random-graph stress tests.

    rm = random_model(seed=42, num_ops=10, max_dim=1000)
    rm.model, rm.inputs          # a Model that passes validation, one array per input

The graph is a random DAG of element-wise and shape-preserving operations (ADD, SUB, MUL
with a random fused activation, MAXIMUM, MINIMUM, RELU, RELU1, RELU6, LOGISTIC, TANH, ABS,
NEG, FLOOR, SIN, HARD_SWISH) plus CONCATENATION, on TENSOR_FLOAT32 of rank 1..4.  Each
operation reads the newest tensor most of the time (long chains, like MLTS's graphs) and a
random older one otherwise; a binary operation's second operand is another tensor of the same
shape, or a new model input or constant of that shape or of a shape that broadcasts to it.
Dimensions are in [1, max_dim] and, as in the NNAPI fuzzer, an operand holds at most
``max_elements`` elements.  Tensors nobody consumes are the model's outputs.

Values stay finite on purpose: the generator tracks a bound on every tensor's magnitude and
squashes (TANH) any result whose bound would pass BOUND_MAX, so 600-operation graphs compare
against the reference without inf/NaN noise.  Only operations the reference executor registers
for TENSOR_FLOAT32 are drawn.

This module is a stop-gap owned by the stress harness; once ``nnconform.generators`` has a
random-graph builder from a seed, ``random_model`` can delegate to it (see the stress runner's
docs).  Same seed, same arguments -> the same model and inputs, on every machine.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..ir import Model, ModelBuilder, OperandType as T, OperationType as Op

BOUND_MAX = 1e4
INPUT_RANGE = 2.0          # inputs and constants are U(-2, 2), as the NNAPI fuzzer's floats

_UNARY_BOUND = {
    Op.RELU: lambda b: b, Op.RELU1: lambda b: 1.0, Op.RELU6: lambda b: 6.0,
    Op.LOGISTIC: lambda b: 1.0, Op.TANH: lambda b: 1.0, Op.ABS: lambda b: b, Op.NEG: lambda b: b,
    Op.FLOOR: lambda b: b + 1.0, Op.SIN: lambda b: 1.0, Op.HARD_SWISH: lambda b: b,
}
_BINARY_BOUND = {
    Op.ADD: lambda a, b: a + b, Op.SUB: lambda a, b: a + b, Op.MUL: lambda a, b: a * b,
    Op.MAXIMUM: max, Op.MINIMUM: max,
}
_FUSED = (Op.ADD, Op.SUB, Op.MUL)
_ACT_BOUND = {0: None, 1: None, 2: 1.0, 3: 6.0}     # FuseCode NONE, RELU, RELU1, RELU6


@dataclass
class _Tensor:
    shape: tuple[int, ...]
    bound: float
    kind: str                       # input / const / op
    value: np.ndarray | None = None
    consumers: int = 0


@dataclass
class _Node:
    op: Op
    inputs: list[int]               # tensor ids
    output: int
    params: list = field(default_factory=list)   # ("i32", v) scalars appended after inputs


@dataclass(frozen=True, eq=False)
class RandomModel:
    model: Model
    inputs: list[np.ndarray]
    seed: int
    num_ops: int
    max_dim: int

    def describe(self) -> str:
        ops = self.model.operation_names()
        return (f"{len(self.model.main.operations)} ops (dims <= {self.max_dim}), "
                f"{len(self.inputs)} inputs, {len(self.model.main.output_indexes)} outputs: {', '.join(ops)}")


def available_operations() -> list[Op]:
    """The drawable operations the reference executor implements for TENSOR_FLOAT32."""
    from ..ops.registry import load_all
    reg = load_all()
    wanted = [*_BINARY_BOUND, *_UNARY_BOUND, Op.CONCATENATION]
    return [op for op in wanted if op in reg and T.TENSOR_FLOAT32 in reg[op].data_types]


def _random_shape(rng: np.random.Generator, rank: int, max_dim: int, max_elements: int) -> tuple[int, ...]:
    dims = []
    left = max_elements
    for i in range(rank):
        # Leave at least one element per remaining dimension.
        hi = max(1, min(max_dim, left))
        d = int(rng.integers(1, hi + 1))
        dims.append(d)
        left = max(1, left // d)
    rng.shuffle(dims)
    return tuple(dims)


def random_model(seed: int, num_ops: int = 10, max_dim: int = 1000, max_elements: int = 10000) -> RandomModel:
    if num_ops < 1:
        raise ValueError("num_ops must be >= 1")
    rng = np.random.default_rng(seed)
    ops = available_operations()
    unary = [o for o in ops if o in _UNARY_BOUND]
    binary = [o for o in ops if o in _BINARY_BOUND]
    has_concat = Op.CONCATENATION in ops
    tensors: list[_Tensor] = []
    nodes: list[_Node] = []

    def new_tensor(shape, bound, kind, value=None) -> int:
        tensors.append(_Tensor(tuple(shape), float(bound), kind, value))
        return len(tensors) - 1

    def leaf(shape) -> int:
        value = rng.uniform(-INPUT_RANGE, INPUT_RANGE, size=shape).astype(np.float32)
        kind = "const" if rng.random() < 0.5 else "input"
        return new_tensor(shape, INPUT_RANGE, kind, value)

    rank = int(rng.integers(1, 5))
    first = new_tensor(_random_shape(rng, rank, max_dim, max_elements), INPUT_RANGE, "input",
                       None)
    tensors[first].value = rng.uniform(-INPUT_RANGE, INPUT_RANGE, size=tensors[first].shape).astype(np.float32)
    produced = [first]

    def pick() -> int:
        if rng.random() < 0.7:
            return produced[-1]
        return produced[int(rng.integers(len(produced)))]

    def add_node(op: Op, inputs: list[int], shape, bound, params=()) -> None:
        out = new_tensor(shape, bound, "op")
        for t in inputs:
            tensors[t].consumers += 1
        nodes.append(_Node(op, list(inputs), out, list(params)))
        produced.append(out)

    def squash(x: int) -> None:
        add_node(Op.TANH, [x], tensors[x].shape, 1.0)

    while len(nodes) < num_ops:
        x = pick()
        shape, bx = tensors[x].shape, tensors[x].bound
        kind = rng.random()
        if kind < 0.45 and binary:
            op = binary[int(rng.integers(len(binary)))]
            same = [t for t in produced if t != x and tensors[t].shape == shape]
            if same and rng.random() < 0.5:
                y = same[int(rng.integers(len(same)))]
            else:
                other = list(shape)
                if rng.random() < 0.3:   # a broadcasting operand: some dimensions become 1
                    other = [1 if rng.random() < 0.5 else d for d in other]
                    other = other[int(rng.integers(len(other))):] or [1]
                y = leaf(tuple(other))
            a, b = (x, y) if rng.random() < 0.5 else (y, x)
            bound = _BINARY_BOUND[op](tensors[a].bound, tensors[b].bound)
            params = []
            if op in _FUSED:
                act = int(rng.integers(4))
                params = [act]
                if _ACT_BOUND[act] is not None:
                    bound = _ACT_BOUND[act]
            if bound > BOUND_MAX:
                squash(x)
                continue
            add_node(op, [a, b], shape, bound, params)
        elif kind < 0.55 and has_concat:
            axes = [i for i, d in enumerate(shape)
                    if 2 * d <= max_dim and 2 * int(np.prod(shape)) <= max_elements]
            if not axes:
                squash(x)
                continue
            axis = axes[int(rng.integers(len(axes)))]
            same = [t for t in produced if tensors[t].shape == shape]
            y = same[int(rng.integers(len(same)))]
            out_shape = list(shape)
            out_shape[axis] *= 2
            add_node(Op.CONCATENATION, [x, y], out_shape, max(bx, tensors[y].bound), [axis])
        else:
            op = unary[int(rng.integers(len(unary)))]
            add_node(op, [x], shape, _UNARY_BOUND[op](bx))

    # Materialise in creation order (a topological order: inputs exist before their users).
    b = ModelBuilder()
    index: dict[int, int] = {}
    inputs: list[np.ndarray] = []
    producer = {n.output: n for n in nodes}
    for tid, t in enumerate(tensors):
        if t.kind == "input":
            index[tid] = b.input(T.TENSOR_FLOAT32, t.shape)
            inputs.append(t.value)
        elif t.kind == "const":
            index[tid] = b.const(T.TENSOR_FLOAT32, t.shape, t.value)
        else:
            node = producer[tid]
            make = b.temp if t.consumers else b.output
            index[tid] = make(T.TENSOR_FLOAT32, t.shape)
            scalars = [b.i32(v) for v in node.params]
            b.operation(node.op, [index[i] for i in node.inputs] + scalars, [index[tid]])
    return RandomModel(b.build(), inputs, seed, len(nodes), max_dim)


# The two sizes of MLTS's random-graph crash tests.
GRAPH_SIZES = {"10ops-dims1000": (10, 1000), "600ops-dims10": (600, 10)}
