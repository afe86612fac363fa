"""validate_model / validate_request: one test per rule, each a valid model broken one way.

The base model (main subgraph):
    operands: 0 x input  TENSOR_FLOAT32 [1,2,2,1]
              1 c const  TENSOR_FLOAT32 [1,2,2,1]
              2 act      INT32 constant 0
              3 t temp   TENSOR_FLOAT32 [1,2,2,1]
              4 y output TENSOR_FLOAT32 [1,2,2,1]
    operations: 0 ADD(x, c, act) -> t;  1 RELU(t) -> y
``carrier(operand)`` is a RELU model with one extra, unused operand at index 2, for the
per-operand rules.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from nnconform.errors import ValidationError
from nnconform.ir import ChannelQuant, Lifetime, Model, ModelBuilder, Operand, Operation, Request, RequestArgument
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.ir.validation import validate_model, validate_request
from nnconform.reference.ops import registry

F32 = T.TENSOR_FLOAT32
DIMS = (1, 2, 2, 1)


def base_model(dims=DIMS) -> Model:
    b = ModelBuilder()
    x = b.input(F32, dims)
    c = b.const(F32, DIMS, np.arange(4, dtype=np.float32))
    act = b.i32(0)
    t = b.temp(F32, dims)
    y = b.output(F32, dims)
    b.operation(Op.ADD, [x, c, act], [t])
    b.operation(Op.RELU, [t], [y])
    return b.build()


def carrier(extra: Operand) -> Model:
    b = ModelBuilder()
    x = b.input(F32, [2])
    y = b.output(F32, [2])
    b.operation(Op.RELU, [x], [y])
    m = b.build()
    return replace_sg(m, operands=m.main.operands + (extra,))


def const(type, dims, value, **kw) -> Operand:
    b = ModelBuilder()
    i = b.const(type, dims, value, **kw)
    return b.build_subgraph().operands[i]


def replace_sg(model: Model, **kw) -> Model:
    return dataclasses.replace(model, main=dataclasses.replace(model.main, **kw))


def replace_operand(model: Model, i: int, **kw) -> Model:
    ops = list(model.main.operands)
    ops[i] = dataclasses.replace(ops[i], **kw)
    return replace_sg(model, operands=tuple(ops))


def replace_operation(model: Model, n: int, **kw) -> Model:
    ops = list(model.main.operations)
    ops[n] = dataclasses.replace(ops[n], **kw)
    return replace_sg(model, operations=tuple(ops))


def rejects(model: Model, where: str, *fragments: str) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        validate_model(model)
    e = info.value
    assert e.where == where, str(e)
    for f in fragments:
        assert f in e.message, str(e)
    assert "\n" not in str(e)
    return e


def control_flow_model() -> Model:
    """IF(cond, then, else, x) -> y with RELU / RELU6 branches (a valid NNAPI IF)."""
    b = ModelBuilder()
    then_b, else_b = b.subgraph("then"), b.subgraph("else")
    for sb, op in ((then_b, Op.RELU), (else_b, Op.RELU6)):
        i = sb.input(F32, [2])
        o = sb.output(F32, [2])
        sb.operation(op, [i], [o])
    cond = b.input(T.TENSOR_BOOL8, [1])
    x = b.input(F32, [2])
    y = b.output(F32, [2])
    b.operation(Op.IF, [cond, b.subgraph_ref(then_b), b.subgraph_ref(else_b), x], [y])
    return b.build()


# ---------------------------------------------------------------------------------------
# Valid models
# ---------------------------------------------------------------------------------------


def test_valid_models_pass():
    validate_model(base_model())
    validate_model(base_model(dims=(1, 0, 2, 1)))  # unknown dims on non-constants
    validate_model(base_model(dims=()))  # unknown rank on non-constants (HAL 1.2+)
    validate_model(control_flow_model())
    validate_model(
        carrier(
            const(T.TENSOR_QUANT8_SYMM_PER_CHANNEL, [2, 3], np.arange(6), channel_quant=ChannelQuant((0.5, 0.25), 0))
        )
    )


def test_unused_model_input_is_fine():
    m = base_model()
    extra = Operand(F32, (2,), lifetime=Lifetime.SUBGRAPH_INPUT)
    m = replace_sg(m, operands=m.main.operands + (extra,), input_indexes=(0, 5))
    validate_model(m)


# ---------------------------------------------------------------------------------------
# Empty model
# ---------------------------------------------------------------------------------------


def test_no_operations():
    rejects(replace_sg(base_model(), operations=()), "operations", "no operations")


def test_no_operands():
    rejects(
        replace_sg(base_model(), operands=(), operations=(), input_indexes=(), output_indexes=()),
        "operands",
        "no operands",
    )


# ---------------------------------------------------------------------------------------
# Operands
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [-1, 16, 9999, 10002])
def test_operand_type_out_of_range(code):
    rejects(replace_operand(base_model(), 3, type=code), "operands[3].type", f"unknown operand type code {code}")


def test_oem_operand_types_are_valid():
    validate_model(
        carrier(Operand(T.TENSOR_OEM_BYTE, (3,), lifetime=Lifetime.CONSTANT_COPY, value=np.zeros(5, np.uint8)))
    )  # OEM sizes are not checked


def test_unknown_lifetime():
    rejects(replace_operand(base_model(), 3, lifetime=7), "operands[3].lifetime", "unknown lifetime code 7")


def test_scalar_with_rank():
    rejects(replace_operand(base_model(), 2, dimensions=(1,)), "operands[2].dimensions", "scalar", "rank 1")


def test_rank0_constant_tensor():
    rejects(replace_operand(base_model(), 1, dimensions=()), "operands[1].dimensions", "constant", "known rank")


def test_negative_dimension():
    rejects(replace_operand(base_model(), 3, dimensions=(1, -2, 2, 1)), "operands[3].dimensions", "negative")


@pytest.mark.parametrize(
    "type,scale,msg",
    [
        (F32, 1.0, "must be 0 for TENSOR_FLOAT32"),
        (T.TENSOR_BOOL8, 0.5, "must be 0 for TENSOR_BOOL8"),
        (T.TENSOR_INT32, -1.0, "must be >= 0 for TENSOR_INT32"),
        (T.TENSOR_QUANT8_ASYMM, 0.0, "must be > 0 for TENSOR_QUANT8_ASYMM"),
        (T.TENSOR_QUANT8_ASYMM_SIGNED, -0.5, "must be > 0 for TENSOR_QUANT8_ASYMM_SIGNED"),
        (T.TENSOR_QUANT8_SYMM, 0.0, "must be > 0 for TENSOR_QUANT8_SYMM"),
        (T.TENSOR_QUANT16_ASYMM, 0.0, "must be > 0 for TENSOR_QUANT16_ASYMM"),
        (T.TENSOR_QUANT16_SYMM, float("nan"), "must be > 0 for TENSOR_QUANT16_SYMM"),
    ],
)
def test_scale_rules(type, scale, msg):
    rejects(carrier(const(type, [2], [1, 1], scale=scale)), "operands[2].scale", msg)


def test_tensor_int32_may_carry_a_bias_scale():
    validate_model(carrier(const(T.TENSOR_INT32, [2], [1, 1], scale=0.25)))


def test_per_channel_scale_must_be_zero():
    op = const(T.TENSOR_QUANT8_SYMM_PER_CHANNEL, [2], [1, 1], scale=0.5, channel_quant=ChannelQuant((1.0, 1.0), 0))
    rejects(carrier(op), "operands[2].scale", "must be 0 for TENSOR_QUANT8_SYMM_PER_CHANNEL")


# VTS mutateOperandZeroPointTest values, plus the signed 8-bit range.
@pytest.mark.parametrize(
    "type,zp",
    [
        (F32, 1),
        (T.TENSOR_INT32, 1),
        (T.TENSOR_BOOL8, 1),
        (T.TENSOR_QUANT8_ASYMM, -1),
        (T.TENSOR_QUANT8_ASYMM, 256),
        (T.TENSOR_QUANT8_SYMM, -129),
        (T.TENSOR_QUANT8_SYMM, -1),
        (T.TENSOR_QUANT8_SYMM, 1),
        (T.TENSOR_QUANT8_SYMM, 128),
        (T.TENSOR_QUANT16_ASYMM, -1),
        (T.TENSOR_QUANT16_ASYMM, 65536),
        (T.TENSOR_QUANT16_SYMM, 1),
        (T.TENSOR_QUANT16_SYMM, -1),
        (T.TENSOR_QUANT16_SYMM, -32769),
        (T.TENSOR_QUANT16_SYMM, 32768),
        (T.TENSOR_QUANT8_ASYMM_SIGNED, -129),
        (T.TENSOR_QUANT8_ASYMM_SIGNED, 128),
    ],
)
def test_zero_point_out_of_range(type, zp):
    scale = 0.5 if type not in (F32, T.TENSOR_INT32, T.TENSOR_BOOL8) else 0.0
    rejects(carrier(const(type, [2], [0, 0], scale=scale, zero_point=zp)), "operands[2].zero_point", type.name, str(zp))


@pytest.mark.parametrize(
    "type,zp",
    [
        (T.TENSOR_QUANT8_ASYMM, 0),
        (T.TENSOR_QUANT8_ASYMM, 255),
        (T.TENSOR_QUANT8_ASYMM_SIGNED, -128),
        (T.TENSOR_QUANT8_ASYMM_SIGNED, 127),
        (T.TENSOR_QUANT16_ASYMM, 65535),
    ],
)
def test_zero_point_range_edges_pass(type, zp):
    validate_model(carrier(const(type, [2], [0, 0], scale=0.5, zero_point=zp)))


PC = T.TENSOR_QUANT8_SYMM_PER_CHANNEL


@pytest.mark.parametrize(
    "dims,cq,where,msg",
    [
        ([2, 3], None, "operands[2].channel_quant", "needs channel_quant"),
        ([2, 3], ChannelQuant((1.0, 1.0), 2), "operands[2].channel_quant.channel_dim", "rank 2"),
        ([2, 3], ChannelQuant((1.0, 1.0), -1), "operands[2].channel_quant.channel_dim", "not a dimension index"),
        ([2, 3], ChannelQuant((1.0, 1.0), 1), "operands[2].channel_quant.scales", "has 2 scales, dimension 1 has 3"),
        ([2, 3], ChannelQuant((1.0, 0.0), 0), "operands[2].channel_quant.scales[1]", "must be > 0"),
        ([2, 3], ChannelQuant((-1.0, 1.0), 0), "operands[2].channel_quant.scales[0]", "must be > 0"),
        ([0, 3], ChannelQuant((), 0), "operands[2].dimensions", "channel dimension 0 is unknown"),
    ],
)
def test_per_channel_rules(dims, cq, where, msg):
    op = Operand(PC, tuple(dims), lifetime=Lifetime.CONSTANT_COPY, value=np.zeros(dims, np.int8), channel_quant=cq)
    rejects(carrier(op), where, msg)


def test_channel_quant_on_other_type():
    op = const(T.TENSOR_QUANT8_SYMM, [2], [0, 0], scale=0.5, channel_quant=ChannelQuant((1.0, 1.0), 0))
    rejects(carrier(op), "operands[2].channel_quant", "only TENSOR_QUANT8_SYMM_PER_CHANNEL")


def test_subgraph_type_needs_subgraph_lifetime():
    op = Operand(T.SUBGRAPH, (), lifetime=Lifetime.CONSTANT_COPY, value=0)
    rejects(carrier(op), "operands[2].lifetime", "must have lifetime SUBGRAPH")


def test_subgraph_lifetime_needs_subgraph_type():
    op = Operand(T.INT32, (), lifetime=Lifetime.SUBGRAPH, value=0)
    rejects(carrier(op), "operands[2].type", "needs type SUBGRAPH")


def test_subgraph_value_out_of_range():
    m = control_flow_model()
    rejects(replace_operand(m, 3, value=2), "operands[3].value", "referenced[2]", "2 referenced")
    rejects(replace_operand(m, 3, value=None), "operands[3].value", "index into referenced")


def test_constant_without_value():
    rejects(replace_operand(base_model(), 1, value=None), "operands[1].value", "needs a value")


def test_constant_value_not_an_array():
    rejects(replace_operand(base_model(), 1, value=[1, 2, 3, 4]), "operands[1].value", "numpy array")


def test_constant_value_wrong_size():
    rejects(
        replace_operand(base_model(), 1, value=np.zeros(3, np.float32)),
        "operands[1].value",
        "has 3 values, dimensions [1, 2, 2, 1] need 4",
    )


def test_constant_value_wrong_shape():
    rejects(
        replace_operand(base_model(), 1, value=np.zeros((2, 2), np.float32)),
        "operands[1].value",
        "shape [2, 2] differs",
    )


def test_constant_value_wrong_dtype():
    rejects(
        replace_operand(base_model(), 1, value=np.zeros(DIMS, np.float64)),
        "operands[1].value",
        "dtype float64",
        "float32",
    )


@pytest.mark.parametrize("lifetime", [Lifetime.TEMPORARY_VARIABLE, Lifetime.SUBGRAPH_OUTPUT])
def test_non_constant_with_value(lifetime):
    i = 3 if lifetime == Lifetime.TEMPORARY_VARIABLE else 4
    rejects(
        replace_operand(base_model(), i, value=np.zeros(DIMS, np.float32)),
        f"operands[{i}].value",
        f"{lifetime.name} operand must not carry a value",
    )


def test_num_consumers_must_match():
    m = base_model()
    validate_model(replace_operand(m, 3, num_consumers=1))
    for wrong in (0, 2):  # VTS mutateOperandNumberOfConsumers: +-1
        rejects(
            replace_operand(m, 3, num_consumers=wrong),
            "operands[3].num_consumers",
            f"is {wrong}, but 1 operation inputs read operand 3",
        )


# ---------------------------------------------------------------------------------------
# Operations
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [-1, 106, 9999, 10001])
def test_operation_type_out_of_range(code):
    rejects(replace_operation(base_model(), 1, type=code), "operations[1].type", f"unknown operation type code {code}")


def test_operation_input_index_out_of_range():
    rejects(
        replace_operation(base_model(), 1, inputs=(5,)),
        "operations[1] (RELU) input 0",
        "operand index 5 is out of range",
        "5 operands",
    )


def test_operation_output_index_out_of_range():
    rejects(replace_operation(base_model(), 0, outputs=(5,)), "operations[0] (ADD) output 0", "out of range")


@pytest.mark.parametrize("target", [0, 1])  # a subgraph input, a constant
def test_operation_output_must_be_temp_or_output(target):
    rejects(
        replace_operation(base_model(), 1, outputs=(target,)),
        "operations[1] (RELU) output 0",
        "must be TEMPORARY_VARIABLE or SUBGRAPH_OUTPUT",
    )


def test_execution_order():
    m = base_model()
    m = replace_sg(m, operations=m.main.operations[::-1])
    rejects(m, "operations[0] (RELU) input 0", "reads operand 3 before", "execution order")


def test_cycle_between_operations():
    # RELU(t) -> u, RELU(u) -> t: every order reads something unwritten.
    b = ModelBuilder()
    x = b.input(F32, [2])
    t, u = b.temp(F32, [2]), b.temp(F32, [2])
    y = b.output(F32, [2])
    b.operation(Op.RELU, [u], [t])
    b.operation(Op.RELU, [t], [u])
    b.operation(Op.RELU, [x], [y])
    rejects(b.build(), "operations[0] (RELU) input 0", "before")


def test_operand_written_twice():
    m = base_model()
    m = replace_sg(m, operations=m.main.operations + (Operation(Op.RELU, (0,), (3,)),))
    rejects(m, "operations[2] (RELU) output 0", "operand 3 is already written by operations[0] (ADD)")


def test_operand_written_twice_by_one_operation():
    b = ModelBuilder()
    x = b.input(F32, [2])
    y = b.output(F32, [2])
    b.operation(Op.SPLIT, [x, b.i32(0), b.i32(2)], [y, y])
    rejects(b.build(), "operations[0] (SPLIT) output 1", "already written by an earlier output")


def test_output_never_written():
    m = base_model()
    rejects(replace_sg(m, operations=m.main.operations[:1]), "operands[4]", "SUBGRAPH_OUTPUT operand is never written")


def test_temporary_never_written():
    m = base_model()
    m = replace_sg(m, operands=m.main.operands + (Operand(F32, (2,)),))
    rejects(m, "operands[5]", "TEMPORARY_VARIABLE operand is never written")


def test_lifetime_flip_writer_to_no_writer():
    # VTS mutateOperandLifeTime: a written temporary becomes a (listed) input
    m = replace_operand(base_model(), 3, lifetime=Lifetime.SUBGRAPH_INPUT)
    m = replace_sg(m, input_indexes=(0, 3))
    rejects(m, "operations[0] (ADD) output 0", "lifetime is SUBGRAPH_INPUT")


# ---------------------------------------------------------------------------------------
# Input/output lists
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["input_indexes", "output_indexes"])
def test_io_index_out_of_range(field):
    rejects(replace_sg(base_model(), **{field: (9,)}), f"{field}[0]", "operand index 9 is out of range")


def test_input_index_wrong_lifetime():
    rejects(
        replace_sg(base_model(), input_indexes=(0, 3)),
        "input_indexes[1]",
        "operand 3 has lifetime TEMPORARY_VARIABLE, expected SUBGRAPH_INPUT",
    )


def test_output_index_wrong_lifetime():
    rejects(replace_sg(base_model(), output_indexes=(0,)), "output_indexes[0]", "expected SUBGRAPH_OUTPUT")


def test_io_index_duplicated():
    rejects(
        replace_sg(base_model(), input_indexes=(0, 0)),
        "input_indexes[1]",
        "operand 0 is listed twice (also input_indexes[0])",
    )


@pytest.mark.parametrize(
    "field,i,lifetime", [("input_indexes", 0, "SUBGRAPH_INPUT"), ("output_indexes", 4, "SUBGRAPH_OUTPUT")]
)
def test_io_operand_missing_from_list(field, i, lifetime):
    rejects(
        replace_sg(base_model(), **{field: ()}),
        f"operands[{i}].lifetime",
        f"is {lifetime}, but operand {i} is not in {field}",
    )


def test_lifetime_swap_without_list_update():
    # VTS mutateOperandInputOutputTest: the input becomes a temporary, the list still names it
    rejects(
        replace_operand(base_model(), 0, lifetime=Lifetime.TEMPORARY_VARIABLE),
        "input_indexes[0]",
        "has lifetime TEMPORARY_VARIABLE",
    )


# ---------------------------------------------------------------------------------------
# Referenced subgraphs
# ---------------------------------------------------------------------------------------


def replace_referenced(model: Model, r: int, **kw) -> Model:
    refs = list(model.referenced)
    refs[r] = dataclasses.replace(refs[r], **kw)
    return dataclasses.replace(model, referenced=tuple(refs))


def test_referenced_subgraph_paths():
    m = control_flow_model()
    sg = m.referenced[1]
    bad = replace_referenced(m, 1, operands=(dataclasses.replace(sg.operands[0], dimensions=(-1,)), *sg.operands[1:]))
    rejects(bad, "referenced[1].operands[0].dimensions", "negative")
    rejects(replace_referenced(m, 0, operations=()), "referenced[0].operands[1]", "never written")
    rejects(replace_referenced(m, 0, input_indexes=(1,)), "referenced[0].input_indexes[0]", "SUBGRAPH_INPUT")


def test_cyclic_subgraph_reference():
    m = control_flow_model()
    sg = m.referenced[0]
    self_ref = Operand(T.SUBGRAPH, (), lifetime=Lifetime.SUBGRAPH, value=0)
    rejects(
        replace_referenced(m, 0, operands=sg.operands + (self_ref,)),
        "referenced[0].operands[2].value",
        "cyclic subgraph reference: referenced[0] -> referenced[0]",
    )
    # referenced[0] -> referenced[1] -> referenced[0]
    to1 = Operand(T.SUBGRAPH, (), lifetime=Lifetime.SUBGRAPH, value=1)
    to0 = Operand(T.SUBGRAPH, (), lifetime=Lifetime.SUBGRAPH, value=0)
    m2 = replace_referenced(m, 0, operands=sg.operands + (to1,))
    m2 = replace_referenced(m2, 1, operands=m.referenced[1].operands + (to0,))
    rejects(m2, "referenced[1].operands[2].value", "referenced[0] -> referenced[1] -> referenced[0]")


# ---------------------------------------------------------------------------------------
# Per-operation signatures (through the registry)
# ---------------------------------------------------------------------------------------


def test_signature_check_runs_through_registry():
    m = replace_operand(base_model(), 4, type=T.TENSOR_INT32)
    rejects(m, "operations[1] (RELU) output 0", "must be")


def test_signature_check_in_referenced_subgraph():
    m = control_flow_model()
    sg = m.referenced[0]
    bad = replace_referenced(m, 0, operands=(sg.operands[0], dataclasses.replace(sg.operands[1], type=T.TENSOR_INT32)))
    with pytest.raises(ValidationError) as info:
        validate_model(bad)
    # IF, when registered, may see the branch mismatch first; either way the path names the spot.
    where = info.value.where
    assert where == "referenced[0].operations[0] (RELU) output 0" or where.startswith("operations[0] (IF)"), str(
        info.value
    )


def test_signature_check_missing_input():
    # VTS removeOperationInput
    rejects(replace_operation(base_model(), 1, inputs=()), "operations[1] (RELU)", "takes 1 inputs, got 0")


def test_valid_but_unregistered_operation_is_not_an_error(monkeypatch):
    registry.load_all()
    monkeypatch.delitem(registry.REGISTRY, Op.RELU)
    validate_model(replace_operand(base_model(), 4, type=T.TENSOR_INT32))  # RELU's check is skipped
    # OEM_OPERATION is a valid code nobody implements
    m = replace_operation(base_model(), 1, type=Op.OEM_OPERATION)
    validate_model(m)


def test_control_flow_without_registered_if(monkeypatch):
    registry.load_all()
    monkeypatch.delitem(registry.REGISTRY, Op.IF, raising=False)
    validate_model(control_flow_model())


def test_crash_in_a_signature_check_is_not_a_verdict(monkeypatch):
    def broken(v):
        raise KeyError("bug")

    registry.load_all()
    monkeypatch.setitem(registry.REGISTRY, Op.RELU, dataclasses.replace(registry.REGISTRY[Op.RELU], validate=broken))
    with pytest.raises(KeyError) as info:
        validate_model(base_model())
    assert any("operations[1] (RELU)" in n for n in info.value.__notes__)


# ---------------------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------------------

X = np.ones(DIMS, np.float32)


def rejects_request(model: Model, request: Request, where: str, *fragments: str) -> None:
    with pytest.raises(ValidationError) as info:
        validate_request(model, request)
    e = info.value
    assert e.where == where, str(e)
    for f in fragments:
        assert f in e.message, str(e)
    assert "\n" not in str(e)


def out(**kw) -> RequestArgument:
    return RequestArgument(**kw)


def test_valid_request():
    m = base_model()
    validate_request(m, Request.from_arrays(m, [X]))
    validate_request(m, Request((RequestArgument(value=X, dimensions=DIMS),), (out(capacity=16),)))
    validate_request(m, Request((RequestArgument(value=X.astype(np.float16)),), (out(capacity=0),)))


@pytest.mark.parametrize(
    "n_in,n_out,where",
    [(0, 1, "request.inputs"), (2, 1, "request.inputs"), (1, 0, "request.outputs"), (1, 2, "request.outputs")],
)
def test_request_argument_count(n_in, n_out, where):
    req = Request(tuple(RequestArgument(value=X) for _ in range(n_in)), tuple(out() for _ in range(n_out)))
    rejects_request(base_model(), req, where, "the model has 1")


def test_request_no_value_with_value():
    req = Request((RequestArgument(value=X, has_no_value=True),), (out(),))
    rejects_request(base_model(), req, "request.inputs[0].value", "has_no_value")


def test_request_no_value_with_dims():
    req = Request((RequestArgument(dimensions=DIMS, has_no_value=True),), (out(),))
    rejects_request(base_model(), req, "request.inputs[0].dimensions", "has_no_value")
    req = Request((RequestArgument(value=X),), (out(dimensions=DIMS, has_no_value=True),))
    rejects_request(base_model(), req, "request.outputs[0].dimensions", "has_no_value")


def test_request_omitted_input_is_fine():
    validate_request(base_model(), Request((RequestArgument(has_no_value=True),), (out(),)))


def test_request_input_without_value():
    rejects_request(base_model(), Request((RequestArgument(),), (out(),)), "request.inputs[0].value", "missing")


def test_request_input_dtype():
    req = Request((RequestArgument(value=X.astype(np.complex64)),), (out(),))
    rejects_request(base_model(), req, "request.inputs[0].value", "complex64", "TENSOR_FLOAT32")


def test_request_rank_differs():
    req = Request((RequestArgument(value=np.ones((2, 2), np.float32)),), (out(),))
    rejects_request(base_model(), req, "request.inputs[0].dimensions", "rank 2", "rank 4")
    req = Request((RequestArgument(value=X),), (out(dimensions=(1, 4)),))
    rejects_request(base_model(), req, "request.outputs[0].dimensions", "rank 2")


def test_request_dim_differs_from_known_model_dim():
    req = Request((RequestArgument(value=np.ones((1, 3, 2, 1), np.float32)),), (out(),))
    rejects_request(base_model(), req, "request.inputs[0].dimensions", "dimension 1 is 3, the model says 2")
    req = Request((RequestArgument(value=X),), (out(dimensions=(1, 2, 5, 1)),))
    rejects_request(base_model(), req, "request.outputs[0].dimensions", "dimension 2 is 5")


def test_request_fills_unknown_dims():
    m = base_model(dims=(1, 0, 2, 1))
    validate_request(m, Request((RequestArgument(value=np.ones((1, 3, 2, 1), np.float32)),), (out(),)))


def test_request_input_dim_zero():
    m = base_model(dims=(1, 0, 2, 1))
    req = Request((RequestArgument(value=np.ones((1, 0, 2, 1), np.float32)),), (out(),))
    rejects_request(m, req, "request.inputs[0].dimensions", "dimension 1 is 0", "fully specified")


def test_request_input_leaves_model_dim_unknown():
    m = base_model(dims=(1, 0, 2, 1))
    req = Request((RequestArgument(value=np.ones((), np.float32), dimensions=()),), (out(),))
    rejects_request(m, req, "request.inputs[0].dimensions", "unknown, so the request must give it")


def test_request_output_unknown_dims_allowed():
    m = base_model(dims=(1, 0, 2, 1))
    x = np.ones((1, 3, 2, 1), np.float32)
    validate_request(m, Request((RequestArgument(value=x),), (out(),)))
    validate_request(m, Request((RequestArgument(value=x),), (out(dimensions=(1, 0, 2, 1)),)))


def test_request_value_size_differs_from_dims():
    req = Request((RequestArgument(value=np.ones(3, np.float32), dimensions=DIMS),), (out(),))
    rejects_request(base_model(), req, "request.inputs[0].value", "has 3 values", "need 4")


def test_request_negative_capacity():
    req = Request((RequestArgument(value=X),), (out(capacity=-1),))
    rejects_request(base_model(), req, "request.outputs[0].capacity", ">= 0")


def test_request_scalar_input():
    b = ModelBuilder()
    x = b.input(F32, [2])
    b.input(T.INT32)  # unused scalar input
    y = b.output(F32, [2])
    b.operation(Op.RELU, [x], [y])
    m = b.build()
    x2 = np.ones(2, np.float32)
    validate_request(m, Request.from_arrays(m, [x2, 3]))
    req = Request((RequestArgument(value=x2), RequestArgument(value=np.array([1, 2], np.int32))), (out(),))
    rejects_request(m, req, "request.inputs[1].value", "scalar, got 2 values")


# ---------------------------------------------------------------------------------------
# The memo of valid operands and signatures
# ---------------------------------------------------------------------------------------


def _verdict(model: Model) -> str:
    try:
        validate_model(model)
    except ValidationError as e:
        return str(e)
    return "valid"


@pytest.mark.parametrize(
    "lookalike",
    [
        # equal to the valid operand under Python's ==, but not the same operand to NNAPI
        lambda m: replace_operand(m, 3, dimensions=(True, 2, 2, 1)),
        lambda m: replace_operand(m, 0, type=float(F32)),
        lambda m: replace_operand(m, 4, zero_point=0.0),
        lambda m: replace_operand(m, 1, value=np.arange(4, dtype=np.float32).reshape(4)),
        # a constant parameter the signature check reads: activation code 7 is not one
        lambda m: replace_operand(m, 2, value=np.array(7, dtype=np.int32)),
        # a signature rule across operands: RELU's output type must be its input's
        lambda m: replace_operand(m, 4, type=T.TENSOR_FLOAT16),
    ],
)
def test_a_lookalike_of_a_valid_model_gets_the_verdict_of_a_cold_check(lookalike, monkeypatch):
    import nnconform.ir.validation as validation

    model = lookalike(base_model())
    monkeypatch.setattr(validation, "_VALID_OPERANDS", set())
    monkeypatch.setattr(validation, "_VALID_SIGNATURES", set())
    cold = _verdict(model)
    assert cold != "valid"
    validate_model(base_model())  # the valid twin fills the memo
    assert validation._VALID_OPERANDS and validation._VALID_SIGNATURES
    assert _verdict(model) == cold


def test_the_same_model_asked_twice_gets_the_same_verdict():
    # supported_operations then prepare on one model object: the second answer is the first's
    broken = replace_operand(base_model(), 2, value=np.array(7, dtype=np.int32))
    first, second = _verdict(broken), _verdict(broken)
    assert first == second != "valid"
    valid = base_model()
    assert _verdict(valid) == _verdict(valid) == "valid"
    assert _verdict(broken) == first  # and after another model was judged in between


def test_an_invalid_model_judged_is_not_kept_alive_by_the_next_verdicts():
    # The memo of the last verdict once kept the exception, whose traceback's frames held the
    # verdict before it: every invalid model judged since the last valid one stayed alive, a
    # chain the garbage collector walked again and again (a mutation cell judges ~130 of them).
    import weakref

    broken = [replace_operand(base_model(), 2, value=np.array(7 + k, dtype=np.int32)) for k in range(3)]
    refs = [weakref.ref(m) for m in broken]
    for m in broken:
        assert _verdict(m) != "valid"
    del m, broken  # refcounting alone frees them: no cycle may hold them
    assert [r() is None for r in refs] == [True, True, False]  # the last one is the memo's
    validate_model(base_model())
    assert refs[2]() is None
