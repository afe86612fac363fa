"""IF / WHILE examples (CTS TestControlFlow and the if_*/while_* specs, re-made): expected values
worked out by hand in the comments.  The model builders are public so the control_flow suite
can reuse them (timeouts, the support rule).

Branch/body operations used: ADD, SUB, MUL, CAST, FILL, FULLY_CONNECTED, CONCATENATION and the
comparison LESS.  The infinite loop's condition is a CAST of a BOOL8 input, so a driver without
comparison operations can still be checked for the loop timeout.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import Model, ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.suites.examples import Example

BOOL1 = (1,)
I32_1 = (T.TENSOR_INT32, (1,))


def _b(v: bool) -> np.ndarray:
    return np.array([v], np.bool_)


def _i(*v) -> np.ndarray:
    return np.array(v, np.int32)


# ---------------------------------------------------------------------------------------
# IF
# ---------------------------------------------------------------------------------------


def if_add_sub(t: T = T.TENSOR_FLOAT32, scale: float = 0.0, zp: int = 0) -> Model:
    """z = IF(c) then y + 10 else y - 10, y and z of type ``t`` and shape [2, 3]."""
    b = ModelBuilder("if_add_sub")
    dims = (2, 3)
    q = dict(scale=scale, zero_point=zp)
    ten = {T.TENSOR_FLOAT32: 10.0, T.TENSOR_FLOAT16: 10.0, T.TENSOR_INT32: 10}.get(t)
    if ten is None:  # quantised: the stored value whose real value is 10
        ten = int(round(10 / scale)) + zp
    branches = []
    for name, op in (("then_add", Op.ADD), ("else_sub", Op.SUB)):
        sb = b.subgraph(name)
        y = sb.input(t, dims, **q)
        sb.operation(op, [y, sb.const(t, (1,), [ten], **q), sb.i32(0)], [sb.output(t, dims, **q)])
        branches.append(sb)
    c = b.input(T.TENSOR_BOOL8, BOOL1)
    y = b.input(t, dims, **q)
    z = b.output(t, dims, **q)
    b.operation(Op.IF, [c, b.subgraph_ref(branches[0]), b.subgraph_ref(branches[1]), y], [z])
    return b.build()


def if_select_input(t: T, dims=(4,), scale: float = 0.0, zp: int = 0) -> Model:
    """z = IF(c) then CAST(x) else CAST(y): the branches only carry data of type ``t`` through
    (CAST to the same type is a copy for every type it takes)."""
    b = ModelBuilder(f"if_carry_{t.name.lower()}")
    q = dict(scale=scale, zero_point=zp)
    branches = []
    for name, pick in (("then_x", 0), ("else_y", 1)):
        sb = b.subgraph(name)
        ins = [sb.input(t, dims, **q), sb.input(t, dims, **q)]
        sb.operation(Op.CAST, [ins[pick]], [sb.output(t, dims, **q)])
        branches.append(sb)
    c = b.input(T.TENSOR_BOOL8, BOOL1)
    x, y = b.input(t, dims, **q), b.input(t, dims, **q)
    b.operation(Op.IF, [c, b.subgraph_ref(branches[0]), b.subgraph_ref(branches[1]), x, y], [b.output(t, dims, **q)])
    return b.build()


def if_fill_scalar(t: T) -> Model:
    """z = IF(c) then FILL([2, 2], a) else FILL([2, 2], b): scalar branch inputs of type ``t``."""
    tensor = {T.FLOAT32: T.TENSOR_FLOAT32, T.FLOAT16: T.TENSOR_FLOAT16, T.INT32: T.TENSOR_INT32}[t]
    b = ModelBuilder(f"if_fill_{t.name.lower()}")
    branches = []
    for name, pick in (("then_a", 0), ("else_b", 1)):
        sb = b.subgraph(name)
        shape = sb.input(T.TENSOR_INT32, (2,))
        vals = [sb.input(t), sb.input(t)]
        sb.operation(Op.FILL, [shape, vals[pick]], [sb.output(tensor, (2, 2))])
        branches.append(sb)
    c = b.input(T.TENSOR_BOOL8, BOOL1)
    a, v = b.input(t), b.input(t)
    shape = b.const(T.TENSOR_INT32, (2,), [2, 2])
    b.operation(
        Op.IF, [c, b.subgraph_ref(branches[0]), b.subgraph_ref(branches[1]), shape, a, v], [b.output(tensor, (2, 2))]
    )
    return b.build()


def if_two_outputs_unknown_shape() -> Model:
    """(s, d) = IF(c) then (x + y, x - y) else (x - y, x + y); the IF's outputs are declared
    with unknown dimensions and take the branch's [3]."""
    b = ModelBuilder("if_two_outputs")
    t, dims = T.TENSOR_FLOAT32, (3,)
    branches = []
    for name, ops in (("then", (Op.ADD, Op.SUB)), ("else", (Op.SUB, Op.ADD))):
        sb = b.subgraph(name)
        x, y = sb.input(t, dims), sb.input(t, dims)
        outs = [sb.output(t, dims), sb.output(t, dims)]
        for op, o in zip(ops, outs):
            sb.operation(op, [x, y, sb.i32(0)], [o])
        branches.append(sb)
    c = b.input(T.TENSOR_BOOL8, BOOL1)
    x, y = b.input(t, dims), b.input(t, dims)
    outs = [b.output(t, (0,)), b.output(t, (0,))]
    b.operation(Op.IF, [c, b.subgraph_ref(branches[0]), b.subgraph_ref(branches[1]), x, y], outs)
    return b.build()


# ---------------------------------------------------------------------------------------
# WHILE
# ---------------------------------------------------------------------------------------


def _less_cond(b: ModelBuilder, name: str, types: list, lhs: int, rhs: int) -> ModelBuilder:
    """A condition subgraph with inputs ``types`` whose output is LESS(input lhs, input rhs)."""
    sb = b.subgraph(name)
    ins = [sb.input(t, d) for t, d in types]
    sb.operation(Op.LESS, [ins[lhs], ins[rhs]], [sb.output(T.TENSOR_BOOL8, BOOL1)])
    return sb


def while_sum_of_squares(both_outputs: bool = False) -> Model:
    """acc = 0; i = 0; while i < n: acc += i * i; i += 1.  Outputs acc (and i).
    Loop variables: acc (input-output), i (state-only unless ``both_outputs``), n (input-only)."""
    b = ModelBuilder("while_sum_of_squares")
    vars_ = [I32_1, I32_1, I32_1]
    cond = _less_cond(b, "cond_i_lt_n", vars_, 1, 2)
    body = b.subgraph("body_acc_plus_i_squared")
    acc, i, _n = (body.input(t, d) for t, d in vars_)
    one = body.const(T.TENSOR_INT32, (1,), [1])
    sq = body.temp(T.TENSOR_INT32, (1,))
    acc_out, i_out = body.output(T.TENSOR_INT32, (1,)), body.output(T.TENSOR_INT32, (1,))
    body.operation(Op.MUL, [i, i, body.i32(0)], [sq])
    body.operation(Op.ADD, [acc, sq, body.i32(0)], [acc_out])
    body.operation(Op.ADD, [i, one, body.i32(0)], [i_out])
    n = b.input(T.TENSOR_INT32, (1,))
    zero_acc, zero_i = b.const(T.TENSOR_INT32, (1,), [0]), b.const(T.TENSOR_INT32, (1,), [0])
    outs = [b.output(T.TENSOR_INT32, (1,))] + ([b.output(T.TENSOR_INT32, (1,))] if both_outputs else [])
    b.operation(Op.WHILE, [b.subgraph_ref(cond), b.subgraph_ref(body), zero_acc, zero_i, n], outs)
    return b.build()


def while_rnn_accumulate() -> Model:
    """A dynamic RNN-like loop: h = RELU(FC(h, W, bias)) n times, and every state is appended to
    ``seq`` (CONCATENATION on axis 0), so ``seq`` grows from [1, 2] to [n + 1, 2].
    W = [[1, 1], [0, 1]], bias = [0, -1]: h = [a, b] becomes [relu(a + b), relu(b - 1)]."""
    b = ModelBuilder("while_rnn_accumulate")
    t = T.TENSOR_FLOAT32
    vars_ = [(t, (1, 2)), (t, (0, 2)), I32_1, I32_1]  # h, seq, step, n
    cond = _less_cond(b, "cond_step_lt_n", vars_, 2, 3)
    body = b.subgraph("body_rnn_step")
    h, seq, step, _n = (body.input(tt, d) for tt, d in vars_)
    w = body.const(t, (2, 2), [1, 1, 0, 1])
    bias = body.const(t, (2,), [0, -1])
    h_out, seq_out, step_out = body.output(t, (1, 2)), body.output(t, (0, 2)), body.output(T.TENSOR_INT32, (1,))
    body.operation(Op.FULLY_CONNECTED, [h, w, bias, body.i32(1)], [h_out])
    body.operation(Op.CONCATENATION, [seq, h_out, body.i32(0)], [seq_out])
    body.operation(Op.ADD, [step, body.const(T.TENSOR_INT32, (1,), [1]), body.i32(0)], [step_out])
    h0 = b.input(t, (1, 2))
    n = b.input(T.TENSOR_INT32, (1,))
    outs = [b.output(t, (1, 2)), b.output(t, (0, 2))]
    b.operation(
        Op.WHILE, [b.subgraph_ref(cond), b.subgraph_ref(body), h0, h0, b.const(T.TENSOR_INT32, (1,), [0]), n], outs
    )
    return b.build()


def while_with_if() -> Model:
    """Nested IF in WHILE: acc = 0; for i in range(n): acc = acc + x if i < 2 else acc - x."""
    b = ModelBuilder("while_with_if")
    t, d = T.TENSOR_FLOAT32, (2,)
    vars_ = [(t, d), I32_1, I32_1, (t, d)]  # acc, i, n, x
    cond = _less_cond(b, "cond_i_lt_n", vars_, 1, 2)
    branches = []
    for name, op in (("then_add_x", Op.ADD), ("else_sub_x", Op.SUB)):
        sb = b.subgraph(name)
        acc, x = sb.input(t, d), sb.input(t, d)
        sb.operation(op, [acc, x, sb.i32(0)], [sb.output(t, d)])
        branches.append(sb)
    body = b.subgraph("body_if_i_lt_2")
    acc, i, _n, x = (body.input(tt, dd) for tt, dd in vars_)
    small = body.temp(T.TENSOR_BOOL8, BOOL1)
    acc_out, i_out = body.output(t, d), body.output(T.TENSOR_INT32, (1,))
    body.operation(Op.LESS, [i, body.const(T.TENSOR_INT32, (1,), [2])], [small])
    body.operation(Op.IF, [small, body.subgraph_ref(branches[0]), body.subgraph_ref(branches[1]), acc, x], [acc_out])
    body.operation(Op.ADD, [i, body.const(T.TENSOR_INT32, (1,), [1]), body.i32(0)], [i_out])
    n, x = b.input(T.TENSOR_INT32, (1,)), b.input(t, d)
    b.operation(
        Op.WHILE,
        [b.subgraph_ref(cond), b.subgraph_ref(body), b.const(t, d, [0, 0]), b.const(T.TENSOR_INT32, (1,), [0]), n, x],
        [b.output(t, d)],
    )
    return b.build()


def while_in_while() -> Model:
    """Nested WHILE: acc = 0; for i in range(n): (for j in range(i): acc += 1).  acc = n(n-1)/2."""
    b = ModelBuilder("while_in_while")
    one_vars = [I32_1, I32_1, I32_1]  # inner: acc, j, i   outer: acc, i, n
    inner_cond = _less_cond(b, "inner_cond_j_lt_i", one_vars, 1, 2)
    inner = b.subgraph("inner_body_acc_plus_1")
    acc, j, _i = (inner.input(tt, dd) for tt, dd in one_vars)
    one = inner.const(T.TENSOR_INT32, (1,), [1])
    a_out, j_out = inner.output(T.TENSOR_INT32, (1,)), inner.output(T.TENSOR_INT32, (1,))
    inner.operation(Op.ADD, [acc, one, inner.i32(0)], [a_out])
    inner.operation(Op.ADD, [j, one, inner.i32(0)], [j_out])
    outer_cond = _less_cond(b, "outer_cond_i_lt_n", one_vars, 1, 2)
    outer = b.subgraph("outer_body_inner_loop")
    acc, i, _n = (outer.input(tt, dd) for tt, dd in one_vars)
    acc_out, i_out = outer.output(T.TENSOR_INT32, (1,)), outer.output(T.TENSOR_INT32, (1,))
    outer.operation(
        Op.WHILE,
        [outer.subgraph_ref(inner_cond), outer.subgraph_ref(inner), acc, outer.const(T.TENSOR_INT32, (1,), [0]), i],
        [acc_out],
    )
    outer.operation(Op.ADD, [i, outer.const(T.TENSOR_INT32, (1,), [1]), outer.i32(0)], [i_out])
    n = b.input(T.TENSOR_INT32, (1,))
    b.operation(
        Op.WHILE,
        [
            b.subgraph_ref(outer_cond),
            b.subgraph_ref(outer),
            b.const(T.TENSOR_INT32, (1,), [0]),
            b.const(T.TENSOR_INT32, (1,), [0]),
            n,
        ],
        [b.output(T.TENSOR_INT32, (1,))],
    )
    return b.build()


def while_flag_loop() -> Model:
    """i = 0.0; while go: i += 1.  ``go`` is an input-only BOOL8 [1] and the condition is
    CAST(go): with go = true the loop never ends (only the loop timeout stops it), with go = false
    it runs zero times.  Needs no comparison operation."""
    b = ModelBuilder("while_flag_loop")
    t = T.TENSOR_FLOAT32
    vars_ = [(t, (1,)), (T.TENSOR_BOOL8, BOOL1)]
    cond = b.subgraph("cond_cast_go")
    _i, go = (cond.input(tt, d) for tt, d in vars_)
    cond.operation(Op.CAST, [go], [cond.output(T.TENSOR_BOOL8, BOOL1)])
    body = b.subgraph("body_i_plus_1")
    i, _go = (body.input(tt, d) for tt, d in vars_)
    body.operation(Op.ADD, [i, body.const(t, (1,), [1.0]), body.i32(0)], [body.output(t, (1,))])
    go = b.input(T.TENSOR_BOOL8, BOOL1)
    b.operation(
        Op.WHILE, [b.subgraph_ref(cond), b.subgraph_ref(body), b.const(t, (1,), [0.0]), go], [b.output(t, (1,))]
    )
    return b.build()


# ---------------------------------------------------------------------------------------
# Models every driver must reject
# ---------------------------------------------------------------------------------------


def _if_with(
    cond_type=T.TENSOR_BOOL8,
    cond_dims=BOOL1,
    branch_in=None,
    branch_out=None,
    branch_dims=(3,),
    omit_cond=False,
    extra_branch_input=False,
) -> Model:
    """z = IF(c) then CAST(x) else CAST(x), with one thing broken (all fp32 [3] otherwise)."""
    t, d = T.TENSOR_FLOAT32, (3,)
    b = ModelBuilder("if_broken")
    branches = []
    for name in ("then", "else"):
        sb = b.subgraph(name)
        x = sb.input(branch_in or t, branch_dims)
        if extra_branch_input:
            sb.input(t, d)
        out_t = branch_out or branch_in or t
        sb.operation(Op.CAST, [x], [sb.output(out_t, branch_dims, **_q(out_t))])
        branches.append(sb)
    c = b.omitted(cond_type, cond_dims) if omit_cond else b.input(cond_type, cond_dims)
    x = b.input(t, d)
    b.operation(Op.IF, [c, b.subgraph_ref(branches[0]), b.subgraph_ref(branches[1]), x], [b.output(t, d)])
    return b.build()


def _q(t: T) -> dict:
    return dict(scale=0.5, zero_point=0) if t == T.TENSOR_QUANT8_ASYMM else {}


def if_branch_scale_mismatch() -> Model:
    b = ModelBuilder("if_scale_mismatch")
    t, d = T.TENSOR_QUANT8_ASYMM, (3,)
    branches = []
    for name in ("then", "else"):
        sb = b.subgraph(name)
        x = sb.input(t, d, scale=0.5, zero_point=0)
        sb.operation(Op.CAST, [x], [sb.output(t, d, scale=0.25, zero_point=0)])  # outer says 0.5
        branches.append(sb)
    c, x = b.input(T.TENSOR_BOOL8, BOOL1), b.input(t, d, scale=0.5, zero_point=0)
    b.operation(
        Op.IF,
        [c, b.subgraph_ref(branches[0]), b.subgraph_ref(branches[1]), x],
        [b.output(t, d, scale=0.5, zero_point=0)],
    )
    return b.build()


def while_two_inputs() -> Model:
    """WHILE(cond, body) with no loop variable: at least 3 inputs are required."""
    b = ModelBuilder("while_two_inputs")
    cond = b.subgraph("cond")
    cond.operation(Op.CAST, [cond.input(T.TENSOR_BOOL8, BOOL1)], [cond.output(T.TENSOR_BOOL8, BOOL1)])
    body = b.subgraph("body")
    body.operation(Op.CAST, [body.input(T.TENSOR_BOOL8, BOOL1)], [body.output(T.TENSOR_BOOL8, BOOL1)])
    b.input(T.TENSOR_BOOL8, BOOL1)
    b.operation(Op.WHILE, [b.subgraph_ref(cond), b.subgraph_ref(body)], [b.output(T.TENSOR_BOOL8, BOOL1)])
    return b.build()


def while_bad(cond_out=T.TENSOR_BOOL8, body_out=T.TENSOR_FLOAT32) -> Model:
    """while_flag_loop with the condition output or the body output retyped."""
    b = ModelBuilder("while_bad")
    t = T.TENSOR_FLOAT32
    vars_ = [(t, (1,)), (T.TENSOR_BOOL8, BOOL1)]
    cond = b.subgraph("cond")
    i, go = (cond.input(tt, d) for tt, d in vars_)
    if cond_out == T.TENSOR_BOOL8:
        cond.operation(Op.CAST, [go], [cond.output(T.TENSOR_BOOL8, BOOL1)])
    else:
        cond.operation(Op.CAST, [i], [cond.output(cond_out, (1,))])
    body = b.subgraph("body")
    i, _go = (body.input(tt, d) for tt, d in vars_)
    body.operation(Op.CAST, [i], [body.output(body_out, (1,))])
    go = b.input(T.TENSOR_BOOL8, BOOL1)
    b.operation(
        Op.WHILE, [b.subgraph_ref(cond), b.subgraph_ref(body), b.const(t, (1,), [0.0]), go], [b.output(t, (1,))]
    )
    return b.build()


def if_cyclic_reference() -> Model:
    """The then branch contains an IF whose then branch is that branch again (a cycle)."""
    b = ModelBuilder("if_cyclic")
    t, d = T.TENSOR_FLOAT32, (3,)
    loop, plain = b.subgraph("then_refers_to_itself"), b.subgraph("else")
    plain.input(T.TENSOR_BOOL8, BOOL1)  # the condition, passed along but unused here
    x = plain.input(t, d)
    plain.operation(Op.CAST, [x], [plain.output(t, d)])
    c, x = loop.input(T.TENSOR_BOOL8, BOOL1), loop.input(t, d)
    loop.operation(Op.IF, [c, loop.subgraph_ref(loop), loop.subgraph_ref(plain), c, x], [loop.output(t, d)])
    c, x = b.input(T.TENSOR_BOOL8, BOOL1), b.input(t, d)
    b.operation(Op.IF, [c, b.subgraph_ref(loop), b.subgraph_ref(plain), c, x], [b.output(t, d)])
    return b.build()


# ---------------------------------------------------------------------------------------
# The examples
# ---------------------------------------------------------------------------------------

_Y = np.array([[1, 2, 3], [4, 5, 6]], np.float32)

# Data for the type-carrying IF: x and y differ everywhere, quantisation parameters ride along.
CARRY_CASES: list[tuple[str, T, float, int, np.ndarray, np.ndarray]] = [
    # (short name, type, scale, zero point, x, y)
    ("fp32", T.TENSOR_FLOAT32, 0.0, 0, np.array([1.5, -2, 0, 3e38], np.float32), np.array([-1, 7, 8, 9], np.float32)),
    ("fp16", T.TENSOR_FLOAT16, 0.0, 0, np.array([1.5, -2, 0, 65504], np.float16), np.array([-1, 7, 8, 9], np.float16)),
    ("int32", T.TENSOR_INT32, 0.0, 0, _i(2**31 - 1, -(2**31), 0, 5), _i(-1, 7, 8, 9)),
    ("quant8", T.TENSOR_QUANT8_ASYMM, 0.5, 128, np.array([0, 128, 255, 3], np.uint8), np.array([1, 2, 3, 4], np.uint8)),
    (
        "quant8_signed",
        T.TENSOR_QUANT8_ASYMM_SIGNED,
        0.25,
        -3,
        np.array([-128, 0, 127, 3], np.int8),
        np.array([1, 2, 3, 4], np.int8),
    ),
    (
        "quant8_symm",
        T.TENSOR_QUANT8_SYMM,
        0.5,
        0,
        np.array([-127, 0, 127, 3], np.int8),
        np.array([1, 2, 3, 4], np.int8),
    ),
    (
        "quant16_asymm",
        T.TENSOR_QUANT16_ASYMM,
        0.125,
        1000,
        np.array([0, 1000, 65535, 7], np.uint16),
        np.array([1, 2, 3, 4], np.uint16),
    ),
    (
        "quant16_symm",
        T.TENSOR_QUANT16_SYMM,
        0.125,
        0,
        np.array([-32768, 0, 32767, 7], np.int16),
        np.array([1, 2, 3, 4], np.int16),
    ),
    ("bool8", T.TENSOR_BOOL8, 0.0, 0, np.array([True, False, True, True]), np.array([False, True, False, False])),
]


def _examples() -> list[Example]:
    ex: list[Example] = []
    # IF with arithmetic branches: y + 10 / y - 10.
    for name, t, scale, zp in (
        ("fp32", T.TENSOR_FLOAT32, 0.0, 0),
        ("fp16", T.TENSOR_FLOAT16, 0.0, 0),
        ("int32", T.TENSOR_INT32, 0.0, 0),
        ("quant8", T.TENSOR_QUANT8_ASYMM, 0.5, 100),
        ("quant8_signed", T.TENSOR_QUANT8_ASYMM_SIGNED, 0.5, -20),
    ):
        model = if_add_sub(t, scale, zp)
        dtype = model.main.operands[model.main.input_indexes[1]].info.dtype
        if scale:  # stored q holds real (q - zp) * scale; +-10 real is +-20 stored
            y = (np.arange(6).reshape(2, 3) * 3 + zp + 30).astype(dtype)
            add, sub = (y.astype(np.int64) + 20).astype(dtype), (y.astype(np.int64) - 20).astype(dtype)
        else:
            y = _Y.astype(dtype)
            add, sub = (_Y + 10).astype(dtype), (_Y - 10).astype(dtype)
        ex.append(Example(f"if_then_taken_add_{name}", model, [_b(True), y], [add], note="then: y + 10"))
        ex.append(Example(f"if_else_taken_sub_{name}", model, [_b(False), y], [sub], note="else: y - 10"))
    # IF carrying every tensor type through unchanged.
    for name, t, scale, zp, x, y in CARRY_CASES:
        model = if_select_input(t, (4,), scale, zp)
        ex.append(Example(f"if_carries_{name}_then", model, [_b(True), x, y], [x.copy()], note="then: x"))
        ex.append(Example(f"if_carries_{name}_else", model, [_b(False), x, y], [y.copy()], note="else: y"))
    # IF with scalar branch inputs.
    for t, a, v, dt in (
        (T.FLOAT32, 2.5, -1.0, np.float32),
        (T.FLOAT16, 0.5, 3.0, np.float16),
        (T.INT32, 7, -9, np.int32),
    ):
        model = if_fill_scalar(t)
        short = t.name.lower()
        ex.append(Example(f"if_scalar_{short}_then", model, [_b(True), dt(a), dt(v)], [np.full((2, 2), a, dt)]))
        ex.append(Example(f"if_scalar_{short}_else", model, [_b(False), dt(a), dt(v)], [np.full((2, 2), v, dt)]))
    # Two outputs, outer dims unknown.
    x, y = np.array([1, 2, 3], np.float32), np.array([0.5, 0.25, -1], np.float32)
    m = if_two_outputs_unknown_shape()
    ex.append(
        Example(
            "if_two_outputs_unknown_shape_then",
            m,
            [_b(True), x, y],
            [np.array([1.5, 2.25, 2], np.float32), np.array([0.5, 1.75, 4], np.float32)],
        )
    )
    ex.append(
        Example(
            "if_two_outputs_unknown_shape_else",
            m,
            [_b(False), x, y],
            [np.array([0.5, 1.75, 4], np.float32), np.array([1.5, 2.25, 2], np.float32)],
        )
    )

    # WHILE counter loops: sum of i*i for i < n.
    m1, m2 = while_sum_of_squares(), while_sum_of_squares(both_outputs=True)
    for n, acc in ((0, 0), (1, 0), (3, 5), (5, 30)):  # 0; 0; 0+1+4; 0+1+4+9+16
        ex.append(Example(f"while_counter_int32_sum_of_squares_n{n}", m1, [_i(n)], [_i(acc)]))
    ex.append(Example("while_counter_int32_two_outputs_n4", m2, [_i(4)], [_i(14), _i(4)], note="0+1+4+9, i=4"))
    # Dynamic RNN-like loop: [1, 3] -> [4, 2] -> [6, 1] -> [7, 0] -> [7, 0].
    rnn = while_rnn_accumulate()
    h0 = np.array([[1, 3]], np.float32)
    states = np.array([[1, 3], [4, 2], [6, 1], [7, 0], [7, 0]], np.float32)
    for n in (0, 1, 4):
        ex.append(
            Example(
                f"while_dynamic_rnn_accumulate_n{n}",
                rnn,
                [h0, _i(n)],
                [states[n : n + 1].copy(), states[: n + 1].copy()],
                note="seq grows to [n + 1, 2]",
            )
        )
    # Nested control flow.
    wif = while_with_if()
    x = np.array([1, 0.5], np.float32)
    for n, k in ((0, 0), (2, 2), (3, 1), (5, -1)):  # two additions, then subtractions
        ex.append(Example(f"nested_if_in_while_n{n}", wif, [_i(n), x], [x * k]))
    ww = while_in_while()
    for n in (0, 1, 4, 6):
        ex.append(Example(f"nested_while_in_while_n{n}", ww, [_i(n)], [_i(n * (n - 1) // 2)]))
    # A loop whose condition is false from the start returns its initial value.
    ex.append(Example("while_zero_iterations", while_flag_loop(), [_b(False)], [np.zeros(1, np.float32)]))

    # Invalid models: every driver must reject them.
    x3 = np.zeros(3, np.float32)
    bad = [
        ("invalid_if_condition_int32", _if_with(cond_type=T.TENSOR_INT32), [_i(1), x3]),
        ("invalid_if_condition_dims_2", _if_with(cond_dims=(2,)), [np.array([True, False]), x3]),
        ("invalid_if_condition_omitted", _if_with(omit_cond=True), [x3]),
        ("invalid_if_branch_input_type", _if_with(branch_in=T.TENSOR_FLOAT16), [_b(True), x3]),
        ("invalid_if_branch_output_type", _if_with(branch_out=T.TENSOR_INT32), [_b(True), x3]),
        ("invalid_if_branch_dims", _if_with(branch_dims=(4,)), [_b(True), x3]),
        ("invalid_if_branch_input_count", _if_with(extra_branch_input=True), [_b(True), x3]),
        ("invalid_if_branch_output_scale", if_branch_scale_mismatch(), [_b(True), np.zeros(3, np.uint8)]),
        ("invalid_if_cyclic_subgraph_reference", if_cyclic_reference(), [_b(True), x3]),
        ("invalid_while_two_inputs", while_two_inputs(), [_b(False)]),
        ("invalid_while_condition_not_bool8", while_bad(cond_out=T.TENSOR_FLOAT32), [_b(False)]),
        ("invalid_while_body_changes_type", while_bad(body_out=T.TENSOR_INT32), [_b(False)]),
    ]
    for name, model, inputs in bad:
        outs = [np.zeros(1, np.float32) if name.startswith("invalid_while") else x3]
        ex.append(Example(name, model, inputs, outs, expect_failure=True))
    return ex


EXAMPLES = _examples()


def while_carry(t: T, dims=(2,), scale: float = 0.0, zp: int = 0) -> Model:
    """x is carried unchanged (identity CAST) while a counter runs: i = 0; while i < n: i += 1.
    Checks that WHILE passes every tensor type through its loop variables bit for bit."""
    b = ModelBuilder(f"while_carry_{t.name.lower()}")
    q = dict(scale=scale, zero_point=zp)
    cond = b.subgraph("cond_i_lt_n")
    cond.input(t, dims, **q)
    ci, cn = cond.input(*I32_1), cond.input(*I32_1)
    cond.operation(Op.LESS, [ci, cn], [cond.output(T.TENSOR_BOOL8, BOOL1)])
    body = b.subgraph("body_carry_x_count_i")
    x, i = body.input(t, dims, **q), body.input(*I32_1)
    body.input(*I32_1)  # n: input-only loop variable, read by the condition
    x_out, i_out = body.output(t, dims, **q), body.output(T.TENSOR_INT32, (1,))
    body.operation(Op.CAST, [x], [x_out])
    body.operation(Op.ADD, [i, body.const(T.TENSOR_INT32, (1,), [1]), body.i32(0)], [i_out])
    x0 = b.input(t, dims, **q)
    n = b.input(T.TENSOR_INT32, (1,))
    b.operation(
        Op.WHILE,
        [b.subgraph_ref(cond), b.subgraph_ref(body), x0, b.const(T.TENSOR_INT32, (1,), [0]), n],
        [b.output(t, dims, **q)],
    )
    return b.build()


# One carry loop per remaining type WHILE claims (fp32 and int32 loops are above); after
# three iterations the output is the input, unchanged.
_CARRY: list[tuple[str, T, float, int, np.ndarray]] = [
    ("fp16", T.TENSOR_FLOAT16, 0.0, 0, np.array([1.5, -2.25], np.float16)),
    ("quant8", T.TENSOR_QUANT8_ASYMM, 0.5, 100, np.array([0, 255], np.uint8)),
    ("quant8_signed", T.TENSOR_QUANT8_ASYMM_SIGNED, 0.5, -3, np.array([-128, 127], np.int8)),
    ("quant8_symm", T.TENSOR_QUANT8_SYMM, 0.25, 0, np.array([-7, 9], np.int8)),
    ("quant16_asymm", T.TENSOR_QUANT16_ASYMM, 0.125, 5, np.array([0, 65535], np.uint16)),
    ("quant16_symm", T.TENSOR_QUANT16_SYMM, 0.125, 0, np.array([-32768, 1234], np.int16)),
    ("bool8", T.TENSOR_BOOL8, 0.0, 0, np.array([True, False])),
]
EXAMPLES += [
    Example(
        f"while_carry_{name}",
        while_carry(t, (2,), scale, zp),
        [x, _i(3)],
        [x],
        note="identity CAST in the body: the output equals the input",
    )
    for name, t, scale, zp, x in _CARRY
]
