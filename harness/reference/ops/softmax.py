"""SOFTMAX: ``exp((x - max) * beta) / sum(exp((x - max) * beta))`` along one axis.

  input 0: TENSOR_FLOAT32, TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM or TENSOR_QUANT8_ASYMM_SIGNED,
           rank 1..4 (zero-sized tensors allowed: the output is empty).
  input 1: beta, FLOAT16 for a TENSOR_FLOAT16 input, else FLOAT32; must be > 0.
  input 2 (optional, HAL 1.2+): axis, INT32 in [-rank, rank); default -1 (the last axis).
  output 0: same type and shape as input 0.
  Quantised outputs have a fixed encoding: scale 1/256 with zero point 0 (QUANT8_ASYMM) or
  -128 (QUANT8_ASYMM_SIGNED).

Floats: float32 arithmetic (fp16 widened first).  Along the last axis the reference uses the
TFLite kernel, which multiplies by the reciprocal of the sum; along other axes it divides.

Quantised: bit-faithful to the reference's fixed-point kernel.  Differences ``q - max(q)`` are
scaled by ``beta * input_scale * 2**26`` (capped at 2**31 - 1) into Q5.26; differences below
``-radius`` contribute nothing and give the lowest output code.  gemmlowp's
``exp_on_negative_values`` gives each term in Q0.31; the terms are summed in Q12.19; the sum
is normalised by its leading-zero count and inverted with ``one_over_one_plus_x``; each output
is ``exp * (1/sum)`` shifted right (rounding) down to units of 1/256, minus 128 when signed.
"""

from __future__ import annotations

import functools

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.arith import half, quant
from nnconform.reference.arith.fixedpoint import (
    calculate_input_radius,
    exp_on_negative_values,
    f32,
    one_over_one_plus_x_for_x_in_0_1,
    one_over_one_plus_x_for_x_in_0_1_int,
    quantize_multiplier_greater_than_one,
    rescale,
    wrap32,
)
from nnconform.reference.arith.quant import rounding_divide_by_pot, saturating_rounding_doubling_high_mul
from nnconform.reference.kernels import jit
from nnconform.reference.ops.logistic import check_fixed_output_quant
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
OUTPUT_ENCODING = {T.TENSOR_QUANT8_ASYMM: (1.0 / 256, 0), T.TENSOR_QUANT8_ASYMM_SIGNED: (1.0 / 256, -128)}

_SCALED_DIFF_INTEGER_BITS = 5  # Q5.26 for the scaled differences
_ACCUMULATION_INTEGER_BITS = 12  # Q12.19 for the sum of exponentials
# Up to this many rows the per-row reciprocal is computed on Python ints (same bits; a
# classifier's one row costs ~40 numpy calls on 1-element arrays otherwise).
SCALAR_RECIPROCAL_ROWS = 16


def beta_type(t: T) -> T:
    return T.FLOAT16 if t == T.TENSOR_FLOAT16 else T.FLOAT32


def validate_axis_constant(v: OpView, i: int) -> None:
    """A constant axis must be in [-rank, rank) when the input rank is known."""
    axis = v.constant_scalar(i) if not v.is_omitted(i) and i < len(v.inputs) else None
    rank = len(v.inputs[0].dimensions)
    if axis is not None and rank and not -rank <= axis < rank:
        v.fail(f"axis {axis} is out of range for rank {rank}", input=i)


def resolve_axis(ctx: OpContext, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        ctx.fail(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def validate(v: OpView) -> None:
    v.expect_counts((2, 3), 1)
    t = v.input_type(0)
    if t not in TYPES:
        v.fail(f"must be {' or '.join(x.name for x in TYPES)}, got {t.name}", input=0)
    v.expect_types([t, beta_type(t), T.INT32], [t])
    v.expect_rank(0, range(1, 5))
    beta = v.constant_scalar(1)
    if beta is not None and not beta > 0:
        v.fail(f"beta must be > 0, got {beta}", input=1)
    if len(v.inputs) == 3:
        validate_axis_constant(v, 2)
    out = v.outputs[0]
    if out.type in OUTPUT_ENCODING:
        check_fixed_output_quant(
            out.scale, out.zero_point, OUTPUT_ENCODING[out.type], lambda msg: v.fail(msg, output=0)
        )


def _softmax_float(x: np.ndarray, beta: float, axis: int) -> np.ndarray:
    x = half.widen(x)  # only read: a float32 input is not copied
    b32 = np.float32(beta)
    if axis == x.ndim - 1 and x.size == x.shape[-1]:
        return _softmax_float_row(x, b32)
    # in place on the one fresh array: the same float32 operations in the same order
    # the ufuncs' own reductions (what ndarray.max/sum call, less their Python wrappers)
    e = x - np.maximum.reduce(x, axis=axis, keepdims=True)
    if b32 != 1:  # x * 1.0f is x exactly: the common beta = 1 skips a pass
        e *= b32
    np.exp(e, out=e)
    total = np.add.reduce(e, axis=axis, keepdims=True, dtype=np.float32)
    if axis != x.ndim - 1:
        e /= total
    else:
        e *= np.float32(1) / total
    return e


def _softmax_float_row(v: np.ndarray, b32: np.float32, own: bool = False) -> np.ndarray:
    """One row (a classifier's logits): an array whose dimensions but the last are 1, in its
    own shape.  The same float32 operations as the general case, element for element and in
    the same order of summation (numpy reduces a one-row array over all its axes and along
    its last one with the same pairwise loop), but the reductions give float32 scalars and
    skip the axis/keepdims machinery: ~2 us of a ~10 us softmax of 1000 logits.  ``own``:
    ``v`` is the caller's fresh array (a widened fp16 row), computed in place."""
    e = np.subtract(v, np.maximum.reduce(v, None), out=v) if own else v - np.maximum.reduce(v, None)
    if b32 != 1:
        e *= b32
    np.exp(e, out=e)
    e *= np.float32(1) / np.add.reduce(e, None, np.float32)
    return e


_EXP_TABLES: dict[tuple[int, int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def _exp_tables(multiplier: int, left_shift: int, diff_min: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every 8-bit difference d = q - max(q) in [-255, 0], indexed by -d: the Q0.31
    exponential, its Q12.19 term of the sum (0 when d < diff_min) and whether d is used."""
    key = (multiplier, left_shift, diff_min)
    tables = _EXP_TABLES.get(key)
    if tables is None:
        diff = -np.arange(256, dtype=np.int64)
        used = diff >= diff_min
        scaled = saturating_rounding_doubling_high_mul(np.where(used, diff, 0) << left_shift, multiplier)
        exps = exp_on_negative_values(scaled, _SCALED_DIFF_INTEGER_BITS)
        terms = np.where(used, rescale(exps, 0, _ACCUMULATION_INTEGER_BITS), 0)
        tables = (exps, terms, used)
        for t in tables:
            t.setflags(write=False)
        if len(_EXP_TABLES) >= 64:
            _EXP_TABLES.pop(next(iter(_EXP_TABLES)))
        _EXP_TABLES[key] = tables
    return tables


@functools.lru_cache(maxsize=64)
def _stacked_tables(multiplier: int, left_shift: int, diff_min: int) -> np.ndarray:
    """``_exp_tables`` as one read-only int64 [3, 256] array (the compiled kernel's argument)."""
    exps, terms, used = _exp_tables(multiplier, left_shift, diff_min)
    stacked = np.stack([exps, terms, used.astype(np.int64)])
    stacked.setflags(write=False)
    return stacked


@functools.lru_cache(maxsize=256)
def _quant_params(beta: float, scale: float) -> tuple[int, int, int] | None:
    """(multiplier, left shift, diff_min) of the fixed-point kernel; None when the reference
    refuses (beta * scale too small).  Cached: a model asks with the same values each run."""
    real = min(1.0 * f32(beta) * f32(scale) * float(1 << (31 - _SCALED_DIFF_INTEGER_BITS)), float((1 << 31) - 1))
    params = quantize_multiplier_greater_than_one(real)
    if params is None:
        return None
    multiplier, left_shift = params
    return multiplier, left_shift, -calculate_input_radius(_SCALED_DIFF_INTEGER_BITS, left_shift)


def _finish(reciprocal, exps, bits_over_unit, used, out_op) -> np.ndarray:
    """Output codes from each element's exponential and its row's reciprocal of the sum."""
    # (exps, reciprocal): the same product, and with one row's reciprocal as a Python int both
    # helpers take their cheaper scalar paths
    y = rounding_divide_by_pot(saturating_rounding_doubling_high_mul(exps, reciprocal), bits_over_unit + 31 - 8)
    lo, hi = quant.quant_range(out_op)
    if out_op.type == T.TENSOR_QUANT8_ASYMM_SIGNED:
        y = y - 128
    return np.where(used, np.minimum(np.maximum(y, lo), hi), lo)  # np.clip's wrapper costs more here


def _softmax_quant_one_row(q: np.ndarray, params: tuple[int, int, int], out_op) -> np.ndarray:
    """One row of 8-bit codes (a classifier's logits), same bits as the general path with
    Python ints for the row's sum and 256-entry tables: the sum of exponential terms is
    counts-per-code times each code's term, and every output code is looked up by input code.
    Flipping the sign bit of a signed code keeps the order and the differences q - max(q)."""
    exps_table, terms_table, used_table = _exp_tables(*params)
    u = q.reshape(-1)
    if u.dtype == np.int8:
        u = u.view(np.uint8) ^ np.uint8(0x80)
    counts = np.bincount(u, minlength=256)
    top = int(u.max())
    # term index -d = top - code; counts[top::-1][k] is the count of code top - k
    total = int(np.dot(counts[top::-1], terms_table[: top + 1])) & 0xFFFFFFFF  # the wrapped uint32 sum
    headroom_plus_one = 32 - total.bit_length()
    bits_over_unit = _ACCUMULATION_INTEGER_BITS - headroom_plus_one
    reciprocal = one_over_one_plus_x_for_x_in_0_1_int(((total << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31))
    by_diff = _finish(reciprocal, exps_table, bits_over_unit, used_table, out_op).astype(out_op.info.dtype)
    by_code = np.zeros(256, out_op.info.dtype)  # codes above the max never occur
    by_code[: top + 1] = by_diff[top::-1]
    return by_code.take(u)


def _row_bounds(out_op) -> tuple[int, int, int]:
    """(minus, lo, hi) of the compiled rows: the signed output's 128 less, and the clamp."""
    lo, hi = quant.quant_range(out_op)
    return (128 if out_op.type == T.TENSOR_QUANT8_ASYMM_SIGNED else 0), lo, hi


def _compiled_rows(q: np.ndarray, tables: np.ndarray, bounds: tuple[int, int, int], dtype) -> np.ndarray:
    """The compiled kernel on 8-bit rows ``q`` [R, N] -> output codes [R, N]."""
    # flipping a signed code's sign bit keeps the order and the differences q - max(q)
    codes = q.view(np.uint8) ^ np.uint8(0x80) if q.dtype == np.int8 else q
    minus, lo, hi = bounds
    return jit.softmax_rows(codes, tables, _ACCUMULATION_INTEGER_BITS, minus, lo, hi, dtype)


def _softmax_quant(ctx: OpContext, x: np.ndarray, beta: float, axis: int) -> np.ndarray:
    in_op, out_op = ctx.in_operands[0], ctx.out_operands[0]
    params = _quant_params(float(beta), float(in_op.scale))
    if params is None:
        ctx.fail(f"beta * input scale ({beta:g} * {in_op.scale:g}) is too small for the fixed-point kernel")
    multiplier, left_shift, diff_min = params

    last = axis == x.ndim - 1
    q = x if last else np.moveaxis(x, axis, -1)
    moved_shape = q.shape
    n = moved_shape[-1]
    q = q.reshape(-1, n)
    # compiled for any row (at=1): the numpy path below is ~30 calls, ~70 us even for a
    # classifier's ten codes, the compiled row a few microseconds
    if jit.worth(q.size, at=1):
        y = _compiled_rows(q, _stacked_tables(*params), _row_bounds(out_op), out_op.info.dtype)
        return y.reshape(moved_shape) if last else np.ascontiguousarray(np.moveaxis(y.reshape(moved_shape), -1, axis))
    if q.shape[0] == 1 and n >= 256:
        y = _softmax_quant_one_row(q, params, out_op)
        return y.reshape(moved_shape) if last else np.ascontiguousarray(np.moveaxis(y.reshape(moved_shape), -1, axis))
    # Everything up to the sum depends only on q - max(q), one of 256 values for 8-bit
    # data: look the per-element terms up in a table computed once per parameter set.
    exps_table, terms_table, used_table = _exp_tables(multiplier, left_shift, diff_min)
    neg_diff = q.max(axis=-1, keepdims=True).astype(np.intp) - q
    total = wrap32(terms_table[neg_diff].sum(axis=-1, keepdims=True)) & 0xFFFFFFFF  # as uint32
    # count leading zeros of the 32-bit sum (it is never 0: the max term alone is 2**19)
    headroom_plus_one = 32 - np.frexp(total.astype(np.float64))[1].astype(np.int64)
    bits_over_unit = _ACCUMULATION_INTEGER_BITS - headroom_plus_one
    shifted_sum_minus_one = ((total << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31)
    if shifted_sum_minus_one.size <= SCALAR_RECIPROCAL_ROWS:
        reciprocal = np.array(
            [one_over_one_plus_x_for_x_in_0_1_int(int(v)) for v in shifted_sum_minus_one.flat], dtype=np.int64
        ).reshape(shifted_sum_minus_one.shape)
    else:
        reciprocal = one_over_one_plus_x_for_x_in_0_1(shifted_sum_minus_one)
    if n >= 256 and q.shape[0] == 1:
        # one row (a classifier): its 256 codes from scalars, then gather
        table = _finish(int(reciprocal.flat[0]), exps_table, int(bits_over_unit.flat[0]), used_table, out_op)
        y = table.take(neg_diff)
    elif n >= 256:
        # An output code depends only on its row and on q - max(q): finish the 256 possible
        # differences per row and gather (a classifier's 1000 logits: 256 values, not 1000).
        table = _finish(reciprocal, exps_table[None, :], bits_over_unit, used_table[None, :], out_op)
        rows = np.arange(q.shape[0], dtype=np.intp)[:, None] * 256
        y = table.reshape(-1).take(neg_diff + rows)
    else:
        y = _finish(reciprocal, exps_table[neg_diff], bits_over_unit, used_table[neg_diff], out_op)
    y = y.reshape(moved_shape).astype(out_op.info.dtype)
    return y if last else np.ascontiguousarray(np.moveaxis(y, -1, axis))


def prepare(v: OpView):
    """A plan-time kernel for a SOFTMAX along its last axis whose beta and axis are model
    constants and whose dimensions are known: a float one of one row (a classifier's
    logits), or an 8-bit one of any rows (``_prepare_quant``).  A float row's call does ~8 us
    of numpy work, and the run-time view and parameter reads around it cost another ~5 us;
    the kernel keeps only the arithmetic, with execute's operations.  Anything execute would
    reject, or compute otherwise, is left to execute."""
    x_op, out_op = v.inputs[0], v.outputs[0]
    if x_op.type not in TYPES or len(v.inputs) not in (2, 3) or len(v.outputs) != 1:
        return None
    dims = x_op.dimensions
    if not dims or len(dims) > 4 or 0 in dims or x_op.info.is_scalar:
        return None  # unknown, out of range or empty: execute decides
    beta = v.constant_scalar(1)
    if beta is None or not beta > 0:
        return None
    if len(v.inputs) == 3 and not v.is_omitted(2):
        axis = v.constant_scalar(2)
        if axis is None or axis not in (-1, len(dims) - 1):
            return None
    if not x_op.info.is_float:
        return _prepare_quant(x_op, out_op, beta, v.operation.inputs[0])
    if int(np.prod(dims)) != dims[-1]:
        return None  # more than one row: the general path, per call
    b32, slot, out_dtype, row = np.float32(beta), v.operation.inputs[0], out_op.info.dtype, _softmax_float_row
    if x_op.info.dtype == np.float32 and out_dtype == np.float32:
        # the compiled first pass, chosen once per plan (as fp16's below)
        start = jit.softmax_float_row if jit.worth(dims[-1], at=1) else None

        def kernel(values: list):
            x = values[slot]
            if x is None or x.shape != dims:
                return None
            if start is not None:
                y = start(x, b32)
                if y is not None:
                    return [y]
            return [row(x, b32)]

        return kernel

    if x_op.info.dtype != np.float16 or out_dtype != np.float16:
        return None
    # the compiled row, chosen once per plan (the choice costs ~1 us a call)
    fused = jit.softmax_half_row if half.compiled(int(np.prod(dims))) else None

    def kernel_widened(values: list):  # fp16: computed in float32, stored back
        x = values[slot]
        if x is None or x.shape != dims:
            return None
        if fused is not None:
            y = fused(x, b32)
            if y is not None:
                return [y]
        return [half.narrow(row(half.widen(x), b32, own=True), out_dtype)]

    return kernel_widened


def _prepare_quant(x_op, out_op, beta: float, slot: int):
    """The quantised kernel: rows along the last axis through the compiled kernel, with the
    tables, clamp and output checks of execute worked out here (~10 us of a classifier's
    ~30 us call); numpy-only runs, and anything execute would reject, go through execute."""
    failed: list[str] = []
    check_fixed_output_quant(out_op.scale, out_op.zero_point, OUTPUT_ENCODING[out_op.type], failed.append)
    params = _quant_params(float(beta), float(x_op.scale))
    if failed or params is None or out_op.type != x_op.type:
        return None
    dims, n = x_op.dimensions, x_op.dimensions[-1]
    tables, bounds, dtype = _stacked_tables(*params), _row_bounds(out_op), out_op.info.dtype

    def kernel_quant(values: list):
        x = values[slot]
        if x is None or x.shape != dims or not jit.worth(x.size, at=1):
            return None
        return [_compiled_rows(x.reshape(-1, n), tables, bounds, dtype).reshape(dims)]

    return kernel_quant


@register(Op.SOFTMAX, data_types=TYPES, validate=validate, prepare=prepare)
def execute(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    in_op, out_op = ctx.in_operands[0], ctx.out_operands[0]
    if x.ndim > 4:
        ctx.fail(f"input rank {x.ndim} exceeds 4")
    beta = ctx.scalar(1)
    if not beta > 0:
        ctx.fail(f"beta must be > 0, got {beta}")
    if x.size == 0:  # the reference skips the kernel, and with it the axis check
        return [np.empty(x.shape, out_op.info.dtype)]
    axis = resolve_axis(ctx, ctx.scalar(2, -1), x.ndim)
    if in_op.info.is_float:
        return [half.narrow(_softmax_float(x, beta, axis), out_op.info.dtype)]
    check_fixed_output_quant(out_op.scale, out_op.zero_point, OUTPUT_ENCODING[out_op.type], ctx.fail)
    return [_softmax_quant(ctx, x, beta, axis)]
