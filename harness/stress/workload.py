"""The known-good models the crash tests run, and one execution checked end to end.

MLTS runs "all models" it ships; here the workload is a fixed list of hand-checked examples
from ``nnconform.suites.examples`` spread over the operation families (element-wise, conv,
pooling, data movement, reduction, softmax, LSTM, control flow), fp32 and quantised.  Names
that no longer exist are skipped; examples the driver does not fully support are left out, so
a driver is stressed on what it claims to run.  The liveness probe is ``relu_fp32``.
"""

from __future__ import annotations

import functools

from nnconform.driver import Device, DriverError
from nnconform.verdict.runner import FAIL, run_case

WORKLOAD_NAMES = (
    "add_fp32_relu1",
    "add_quant8_same_scale_relu",
    "sub_fp16",
    "mul_fp16_relu6",
    "conv_2d_valid_2x2_fp32",
    "conv_2d_quant8_per_channel",
    "depthwise_conv_2d_same_3x3_fp32",
    "concat_fp32_axis0",
    "reshape_quant8",
    "pad_fp32_2d",
    "average_pool_2d_fp32_valid_stride2",
    "max_pool_2d_quant8_relu6",
    "mean_fp32_axis1",
    "relu_fp32",
    "relu6_quant8",
    "logistic_fp32",
    "tanh_quant8",
    "softmax_fp32",
    "lstm_plain_fp32",
    "if_then_taken_add_fp32",
)
PROBE_NAME = "relu_fp32"


@functools.lru_cache(maxsize=1)
def _examples_by_name() -> dict:
    from nnconform.suites.examples import all_examples

    return {e.name: e for e in all_examples()}


def example(name: str):
    return _examples_by_name()[name]


def _supported(device: Device, ex) -> bool:
    try:
        return all(device.supported_operations(ex.model))
    except DriverError:
        return False


_workloads: dict[int, list] = {}


def workload(device: Device) -> list:
    """The workload examples ``device`` supports (computed once per device object)."""
    key = id(device)
    if key not in _workloads:
        by_name = _examples_by_name()
        chosen = [by_name[n] for n in WORKLOAD_NAMES if n in by_name]
        _workloads[key] = [e for e in chosen if _supported(device, e)]
        if not _workloads[key]:
            raise RuntimeError(
                f"the driver supports none of the stress workload models ({', '.join(WORKLOAD_NAMES[:4])}, ...)"
            )
    return _workloads[key]


def check(device: Device, ex, ctx=None) -> str | None:
    """Prepare, execute and compare one example; None when it passed (or is unsupported),
    else the reason.  ``ctx`` (a sandbox CaseContext) gets a breadcrumb naming the model."""
    if ctx is not None:
        ctx.breadcrumb(f"example {ex.name}")
    out = run_case(device, ex.model, ex.inputs, ex.outputs)
    if out.outcome == FAIL:
        return f"{ex.name}: {out.message}"
    return None


def probe(device: Device, ctx=None) -> str | None:
    """The liveness probe: the small known-good model; None when the driver answers right."""
    return check(device, example(PROBE_NAME), ctx)
