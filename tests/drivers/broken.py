"""DELIBERATELY BROKEN DRIVERS, for testing the harness itself.  Never use them as references.

Each is the reference driver with one defect, so a test can prove the suites catch exactly
that defect and report it readably:

    QuantAddOffByTwo    quantised ADD results are 2 too high (saturating)
    QuantAddOffByOne    quantised ADD results are 1 too high: NOT a defect by CTS's criteria
                        for ADD (atol 2, bias 1.2), which the harness must accept per operation
    ConvIgnoresBias     CONV_2D drops its bias
    ConvFp32InFp16      fp32 CONV_2D computed in half precision
    Relu6Ignored        RELU6 passes its input through unchanged
    RaisesPlainError    execute raises a plain Python exception
    WrongShape          execute returns every output flattened to 1-D
    WrongDtype          execute returns every output as float64
    WrongOutputShapes   right values, but every reported output shape has its dimensions doubled
    GarbageResult       execute returns a string instead of a result
    AbortsOnLargeSub    float32 SUB aborts the process (SIGABRT) when a result exceeds 100,
                        as a native kernel's assertion would: a CRASH that depends on the values

Name them on the command line as ``tests/drivers/broken.py:QuantAddOffByTwo``.
"""

from __future__ import annotations

import numpy as np

from nnconform.driver import ExecutionResult, OutputShape
from nnconform.drivers.reference import ReferenceDevice, ReferencePreparedModel
from nnconform.ir import OperationType as Op
from nnconform.reference.executor import Executor
from nnconform.reference.ops.registry import get_op


class _OverridingPrepared(ReferencePreparedModel):
    overrides: dict = {}

    def new_executor(self) -> Executor:
        return Executor(self.model, overrides=self.overrides)


class _OverridingDevice(ReferenceDevice):
    overrides: dict = {}

    def prepare(self, model, **kw):
        pm = super().prepare(model, **kw)
        broken = _OverridingPrepared(pm.model)
        broken.overrides = self.overrides
        return broken


def _add_off_by(k: int):
    def add(ctx):
        (out,) = get_op(Op.ADD).execute(ctx)
        if ctx.out_operands[0].info.is_quant:
            info = np.iinfo(out.dtype)
            out = np.clip(out.astype(np.int64) + k, info.min, info.max).astype(out.dtype)
        return [out]

    return add


def _conv_without_bias(ctx):
    ctx.inputs = list(ctx.inputs)
    ctx.inputs[2] = np.zeros_like(ctx.inputs[2])
    return get_op(Op.CONV_2D).execute(ctx)


def _conv_in_fp16(ctx):
    if ctx.inputs[0].dtype != np.float32:
        return get_op(Op.CONV_2D).execute(ctx)
    ctx.inputs = [
        x.astype(np.float16).astype(np.float32)
        if isinstance(x, np.ndarray) and x.dtype == np.float32 and x.ndim > 0
        else x
        for x in ctx.inputs
    ]
    return [o.astype(np.float16).astype(np.float32) for o in get_op(Op.CONV_2D).execute(ctx)]


def _sub_aborts_on_large(ctx):
    out = get_op(Op.SUB).execute(ctx)
    if out[0].dtype == np.float32 and out[0].size and np.nanmax(out[0]) > 100:
        import os

        os.abort()
    return out


class QuantAddOffByTwo(_OverridingDevice):
    name = "broken-quant-add"
    overrides = {Op.ADD: _add_off_by(2)}


class QuantAddOffByOne(_OverridingDevice):
    name = "quant-add-plus-one"
    overrides = {Op.ADD: _add_off_by(1)}


class ConvIgnoresBias(_OverridingDevice):
    name = "broken-conv-bias"
    overrides = {Op.CONV_2D: _conv_without_bias}


class ConvFp32InFp16(_OverridingDevice):
    name = "broken-conv-fp16"
    overrides = {Op.CONV_2D: _conv_in_fp16}


class Relu6Ignored(_OverridingDevice):
    name = "broken-relu6"
    overrides = {Op.RELU6: lambda ctx: [ctx.inputs[0].copy()]}


class _ResultTampering(ReferenceDevice):
    def tamper(self, result):
        raise NotImplementedError

    def prepare(self, model, **kw):
        pm = super().prepare(model, **kw)
        device = self

        class Tampered(ReferencePreparedModel):
            def execute(self, request, **kw2):
                return device.tamper(super().execute(request, **kw2))

        return Tampered(pm.model)


class RaisesPlainError(_ResultTampering):
    name = "broken-raises"

    def tamper(self, result):
        raise ValueError("simulated driver bug: index out of range in kernel dispatch")


class WrongShape(_ResultTampering):
    name = "broken-shape"

    def tamper(self, result):
        return ExecutionResult(tuple(o.reshape(-1) for o in result.outputs), result.output_shapes, result.timing)


class WrongDtype(_ResultTampering):
    name = "broken-dtype"

    def tamper(self, result):
        return ExecutionResult(tuple(o.astype(np.float64) for o in result.outputs), result.output_shapes, result.timing)


class WrongOutputShapes(_ResultTampering):
    name = "broken-output-shapes"

    def tamper(self, result):
        shapes = tuple(OutputShape(tuple(2 * d for d in o.shape)) for o in result.outputs)
        return ExecutionResult(result.outputs, shapes, result.timing)


class GarbageResult(_ResultTampering):
    name = "broken-garbage"

    def tamper(self, result):
        return "not a result"


class AbortsOnLargeSub(_OverridingDevice):
    name = "broken-sub-abort"
    overrides = {Op.SUB: _sub_aborts_on_large}
