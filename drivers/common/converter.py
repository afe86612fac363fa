"""What a converter module does the same way whatever its runtime.

Every adapter's convert.py keeps a table from NNAPI operation to converter function, checks
the operand types an operation touches against the types its runtime stores, answers
``operation_supported(model, index)`` by converting the operation alone, and names the
failing operation when a whole model does not convert.  Those steps are here once; the
converters themselves, and how a runtime graph is built, stay in the adapter.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Collection, Iterable, Mapping, TypeVar, cast

from nnconform.driver.support import ParameterAccess, Rejected, Unsupported
from nnconform.ir import Operand, Subgraph
from nnconform.ir import OperationType as Op

__all__ = [
    "OperationContext",
    "by_name",
    "lookup",
    "check_types",
    "tensor_operands",
    "check_operation_types",
    "supported",
    "operation_context",
    "convert_all",
]

F = TypeVar("F")


class OperationContext(ParameterAccess):
    """One operation of a subgraph as its converter sees it: ``op``, its input operands
    ``ins`` and output operands ``outs``, and NNAPI parameters read as Python values
    (ParameterAccess).  Each adapter's OpCtx adds how its runtime's values are reached."""

    def __init__(self, sg: Subgraph, index: int):
        self.op = sg.operations[index]
        self.ins: list[Operand] = [sg.operands[i] for i in self.op.inputs]
        self.outs: list[Operand] = [sg.operands[i] for i in self.op.outputs]


def by_name(namespace: Mapping[str, object], explicit: Mapping[Op, F]) -> dict[Op, F]:
    """An adapter's operation table: every function of ``namespace`` (a converter module's
    globals) named ``conv_`` + an operation's name in lower case converts that operation
    (``conv_squeeze`` SQUEEZE, ``conv_pad_v2`` PAD_V2), and ``explicit`` adds or overrides
    the rest: converters built by factories and converters shared by several operations.
    The convention keeps each adapter's table to what is particular to it."""
    table: dict[Op, F] = {}
    for op in Op:
        fn = namespace.get(f"conv_{op.name.lower()}")
        if callable(fn):
            table[op] = cast(F, fn)
    table.update(explicit)
    return table


def lookup(table: Mapping[Op, F], op, runtime: str) -> F:
    """The converter of operation ``op`` (an ir.Operation); Unsupported when ``runtime`` has
    no mapping for it (or the code is no operation NNAPI defines)."""
    try:
        return table[Op(op.type)]
    except (KeyError, ValueError):
        raise Unsupported(f"no {runtime} mapping for {op.name}") from None


def check_types(sg: Subgraph, indexes: Iterable[int], known: Collection) -> None:
    """Every operand of ``indexes`` has a type the runtime stores (``known``)."""
    for i in indexes:
        if sg.operands[i].type not in known:
            raise Unsupported(f"operand of type {sg.operands[i].type.name}")


def tensor_operands(sg: Subgraph, indexes: Iterable[int]) -> list[int]:
    """The tensor operands of ``indexes`` that are present (scalar parameters are read at
    conversion time and omitted optional inputs carry nothing, so neither needs a runtime
    type)."""
    return [i for i in indexes if not sg.operands[i].info.is_scalar and not sg.operands[i].is_omitted]


def check_operation_types(sg: Subgraph, op, known: Collection) -> None:
    """Every output, and every tensor input present, of operation ``op`` has a type the
    runtime stores."""
    check_types(sg, op.outputs, known)
    check_types(sg, tensor_operands(sg, op.inputs), known)


def supported(convert: Callable[[], object]) -> tuple[bool, str]:
    """(supported, reason) from converting one operation alone: Unsupported is "no" with its
    reason; Rejected is "yes" (the operation is mapped, and NNAPI says these parameters fail
    the execution, which preparing the model reproduces)."""
    try:
        convert()
    except Unsupported as e:
        return False, str(e)
    except Rejected:
        return True, ""
    return True, ""


@contextlib.contextmanager
def operation_context(sg: Subgraph, k: int):
    """Converting operation ``k`` of a whole model: a failure names the operation (index and
    type), so that a user sees which one their model trips over."""
    try:
        yield
    except (Unsupported, Rejected) as e:
        raise type(e)(f"operations[{k}] ({sg.operations[k].name}): {e}") from None


def convert_all(sg: Subgraph, convert: Callable[[int], object]) -> list:
    """``convert(k)`` for every operation of ``sg`` in model order, under operation_context."""
    results = []
    for k in range(len(sg.operations)):
        with operation_context(sg, k):
            results.append(convert(k))
    return results
