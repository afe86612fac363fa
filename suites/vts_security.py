"""VTS cases for a driver's security and robustness surface (issue 12); collected as part of
the vts suite (``suites/test_vts.py`` imports them), one result row each:

    vts/cache/<check>      compilation caching with files (nnconform.cache_checks): save and
                           retrieve, wrong file counts, read-/write-only files, TOCTOU, a
                           replaced cache, corrupted model/data cache, a wrong token; for a
                           driver that declares CompilationCaching with cache files.  TOCTOU
                           iterations: NNCONFORM_CACHE_TOCTOU_ITERATIONS (default 100)
    vts/device/basics      status AVAILABLE, name "<vendor>-<device>", a known type, a
                           non-empty version string, extension names unique and reverse-domain,
                           cache-file counts 0..32
    vts/device/cycle       a model whose operations form a cycle: supported_operations and
                           prepare both give INVALID_ARGUMENT
"""
from __future__ import annotations

import os
import re
import tempfile

import pytest

from nnconform import cache_checks
from nnconform.driver import CompilationCaching, DeviceStatus, DeviceType, DriverError, ErrorStatus
from nnconform.ir import Lifetime, Model, ModelBuilder, Operation, OperandType as T, OperationType as Op
from nnconform.watchdog import HangError, call_with_timeout

SUITE = "vts"
BOUND_S = 20.0
NAME_FORMAT = re.compile(r"^[A-Za-z0-9_.]+-[A-Za-z0-9_.-]+$")
EXTENSION_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")


def _toctou_iterations() -> int:
    raw = os.environ.get("NNCONFORM_CACHE_TOCTOU_ITERATIONS", "")
    try:
        return max(1, int(raw)) if raw else cache_checks.DEFAULT_TOCTOU_ITERATIONS
    except ValueError:
        raise pytest.UsageError(f"NNCONFORM_CACHE_TOCTOU_ITERATIONS={raw!r}: not an integer") from None


def _begin(nn_record, tid: str, ops=(), types=()) -> None:
    nn_record.update(suite=SUITE, test_id=tid, operations=list(ops), data_types=list(types))


def _finish(nn_record, bad: list[str], ok: str, **extra) -> None:
    nn_record["extra"].update(extra)
    if bad:
        more = f"; ... {len(bad) - 4} more" if len(bad) > 4 else ""
        nn_record["message"] = "; ".join(bad[:4]) + more
        nn_record["extra"]["failures"] = bad[:50]
        pytest.fail(nn_record["message"], pytrace=False)
    nn_record["message"] = ok


def _describe(e: BaseException) -> str:
    if isinstance(e, DriverError):
        return e.status.name
    return f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"


# ---- compilation caching -------------------------------------------------------------------

@pytest.mark.parametrize("check", list(cache_checks.CHECKS))
def test_cache(check, nn_device, nn_session, nn_record):
    tid = f"{SUITE}/cache/{check}"
    _begin(nn_record, tid, ["CONV_2D"], ["fp32", "quant8"])
    if not isinstance(nn_device, CompilationCaching):
        nn_record["message"] = "the driver has no compilation caching (CompilationCaching)"
        pytest.skip(nn_record["message"])
    try:
        counts = call_with_timeout(nn_device.cache_file_counts, BOUND_S, "cache_file_counts")
    except Exception as e:   # a crash or garbage here is the driver's: the case fails with it
        _finish(nn_record, [f"cache_file_counts gave {_describe(e)}"], "")
    if tuple(counts) == (0, 0):
        nn_record["message"] = ("the driver declares no cache files (token-only caching; "
                                "vts/optional/caching covers it)")
        pytest.skip(nn_record["message"])
    with tempfile.TemporaryDirectory(prefix="nnconform-cache-") as d:
        ctx = cache_checks.CacheContext(nn_device, d, seed=nn_session.seed, toctou_iterations=_toctou_iterations(),
                                        call=lambda fn, what: call_with_timeout(fn, BOUND_S, what))
        bad = cache_checks.check_counts(ctx) or cache_checks.CHECKS[check](ctx)
    _finish(nn_record, bad, f"{check}: passed on fp32 and quant8 conv models (cache files {list(counts)})",
            cache_files=list(counts), toctou_iterations=ctx.toctou_iterations)


# ---- device basics -------------------------------------------------------------------------

def test_device_basics(nn_device, nn_session, nn_record):
    _begin(nn_record, f"{SUITE}/device/basics")
    bad = []

    def ask(fn, what):
        try:
            return call_with_timeout(fn, BOUND_S, what)
        except Exception as e:
            bad.append(f"{what} gave {_describe(e)}")
            return None

    status = ask(nn_device.status, "status")
    if status is not None and status != DeviceStatus.AVAILABLE:
        bad.append(f"status {status!r}, expected AVAILABLE ({int(DeviceStatus.AVAILABLE)})")
    name = getattr(nn_device, "name", None)
    if not (isinstance(name, str) and NAME_FORMAT.match(name)):
        bad.append(f"name {name!r:.60} is not \"<vendor>-<device>\"")
    dtype = ask(nn_device.device_type, "device_type")
    if dtype is not None and (isinstance(dtype, bool) or dtype not in {int(t) for t in DeviceType}):
        bad.append(f"device type {dtype!r:.40} is not one of {', '.join(t.name for t in DeviceType)}")
    version = getattr(nn_device, "version", None)
    if not (isinstance(version, str) and version.strip()):
        bad.append(f"version string {version!r:.40} is empty")
    ext = ask(nn_device.supported_extensions, "supported_extensions")
    if ext is not None:
        if not isinstance(ext, (list, tuple)):
            bad.append(f"supported_extensions returned {ext!r:.60}, not a list of names")
        else:
            wrong = [x for x in ext if not (isinstance(x, str) and EXTENSION_NAME.match(x))]
            if wrong:
                bad.append(f"extension names not reverse-domain: {wrong[:3]!r:.120}")
            if len(set(map(str, ext))) != len(ext):
                bad.append("an extension is listed twice")
    if isinstance(nn_device, CompilationCaching):
        counts = ask(nn_device.cache_file_counts, "cache_file_counts")
        if counts is not None:
            c = tuple(counts) if isinstance(counts, (list, tuple)) else counts
            if not (isinstance(c, tuple) and len(c) == 2 and all(type(n) is int and 0 <= n <= 32 for n in c)):
                bad.append(f"cache file counts {counts!r:.60}: need two ints in 0..32")
    _finish(nn_record, bad, f"{name}: status, name, type, version {version!r:.40}, extensions and cache-file "
                            f"counts as NNAPI requires")


def cycle_model() -> Model:
    """Two ADDs feeding each other (t0 = x + t1, t1 = t0 + x): every operation reads an
    operand the other writes, so no execution order exists.  The graph output is t0."""
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [1, 4])
    t0 = b.output(T.TENSOR_FLOAT32, [1, 4])
    t1 = b.temp(T.TENSOR_FLOAT32, [1, 4])
    act = b.i32(0)
    b.operation(Op.ADD, [x, t1, act], [t0])
    b.operation(Op.ADD, [t0, x, act], [t1])
    m = b.build()
    assert m.main.operands[t1].lifetime == Lifetime.TEMPORARY_VARIABLE
    assert isinstance(m.main.operations[0], Operation)
    return m


def test_device_cycle(nn_device, nn_session, nn_record):
    _begin(nn_record, f"{SUITE}/device/cycle", ["ADD"], ["fp32"])
    model = cycle_model()
    bad = []
    for what, fn in (("supported_operations", lambda: nn_device.supported_operations(model)),
                     ("prepare", lambda: nn_device.prepare(model))):
        try:
            got = call_with_timeout(fn, BOUND_S, what)
        except DriverError as e:
            if e.status != ErrorStatus.INVALID_ARGUMENT:
                bad.append(f"{what} gave {e.status.name}, expected INVALID_ARGUMENT")
            continue
        except (HangError, Exception) as e:
            bad.append(f"{what} gave {_describe(e)}, expected INVALID_ARGUMENT")
            continue
        bad.append(f"{what} accepted it ({'returned ' + repr(got)[:40] if what != 'prepare' else 'a prepared model'})")
        if what == "prepare":
            try:
                call_with_timeout(got.release, 5.0, "release")
            except Exception as e:  # the verdict is already FAIL; say what release did
                bad.append(f"release gave {_describe(e)}")
    _finish(nn_record, bad, "a cycle of two operations: supported_operations and prepare gave INVALID_ARGUMENT")
