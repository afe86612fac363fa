"""DELIBERATELY BROKEN DRIVERS for the exhaustive suite (issue 51).  Never use them as references.

Each is the reference driver with one defect on a value domain that the random, generated and
vector suites do not reach; ``tests/test_exhaustive.py`` proves the exhaustive suite catches
each one with a failing spec of a few elements:

    LogFlushesSubnormals  fp32 LOG treats subnormal inputs as zero (log gives -inf instead of
                          about -88 .. -103.3); every other operation keeps them
    TanhFp16Band          fp16 TANH returns its input unchanged for the eight fp16 values
                          0.5 .. 0.50342 (a band a "fast path" table got wrong)
    QuantAddOnePair       quantised (asymmetric uint8) ADD is 5 codes too high for the one
                          byte pair (200, 37), whatever the scales
    MulFlushesInputs      fp32 MUL reads subnormal inputs as zero (MUL(1e-40, 1) = 0): inside
                          the fp32 atol (1e-5), so only the sweep's no-flush rule sees it

Name them on the command line as ``tests/drivers/broken_sweep.py:LogFlushesSubnormals``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nnconform.driver.loader import import_driver_file
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.registry import get_op

_OverridingDevice = import_driver_file(Path(__file__).with_name("broken.py"))._OverridingDevice


def _log_flushing(ctx):
    x = ctx.inputs[0]
    if x.dtype == np.float32:
        tiny = np.finfo(np.float32).tiny
        ctx.inputs = [np.where(np.abs(x) < tiny, np.float32(0), x).astype(np.float32)] + list(ctx.inputs[1:])
    with np.errstate(divide="ignore"):
        return get_op(Op.LOG).execute(ctx)


class LogFlushesSubnormals(_OverridingDevice):
    name = "broken-log-flushes-subnormals"
    overrides = {Op.LOG: _log_flushing}


# fp16 0x3800 (0.5) .. 0x3807: eight neighbouring values
_BAND = (np.float16(0.5), np.array(0x3807, np.uint16).view(np.float16))


def _tanh_band(ctx):
    (out,) = get_op(Op.TANH).execute(ctx)
    x = ctx.inputs[0]
    if x.dtype != np.float16:
        return [out]
    band = (x >= _BAND[0]) & (x <= _BAND[1])
    return [np.where(band, x, out).astype(np.float16)]


class TanhFp16Band(_OverridingDevice):
    name = "broken-tanh-fp16-band"
    overrides = {Op.TANH: _tanh_band}


def _add_one_pair(ctx):
    (out,) = get_op(Op.ADD).execute(ctx)
    if ctx.in_operands[0].type != T.TENSOR_QUANT8_ASYMM:
        return [out]
    a, b = np.broadcast_arrays(ctx.inputs[0], ctx.inputs[1])
    hit = (a == 200) & (b == 37)
    bumped = np.minimum(out.astype(np.int64) + 5, 255).astype(out.dtype)
    return [np.where(hit, bumped, out).astype(out.dtype)]


class QuantAddOnePair(_OverridingDevice):
    name = "broken-quant-add-one-pair"
    overrides = {Op.ADD: _add_one_pair}


def _mul_flushing_inputs(ctx):
    if ctx.inputs[0].dtype == np.float32:
        tiny = np.finfo(np.float32).tiny
        ctx.inputs = [np.where(np.abs(x) < tiny, np.float32(0), x).astype(np.float32) for x in ctx.inputs[:2]] + list(
            ctx.inputs[2:]
        )
    return get_op(Op.MUL).execute(ctx)


class MulFlushesInputs(_OverridingDevice):
    name = "broken-mul-flushes-inputs"
    overrides = {Op.MUL: _mul_flushing_inputs}
