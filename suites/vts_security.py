"""VTS cases for a driver's security and robustness surface (issue 12); collected as part of
the vts suite (``suites/test_vts.py`` imports them), one result row each:

    vts/cache/<check>      compilation caching with files (nnconform.vts.cache_checks): save and
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

from nnconform.driver import CompilationCaching, DeviceStatus, DeviceType, DriverError, ErrorStatus
from nnconform.ir import Lifetime, Model, ModelBuilder, Operation
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.isolation.watchdog import HangError, call_with_timeout
from nnconform.vts import cache_checks

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
    except Exception as e:  # a crash or garbage here is the driver's: the case fails with it
        _finish(nn_record, [f"cache_file_counts gave {_describe(e)}"], "")
    if tuple(counts) == (0, 0):
        nn_record["message"] = "the driver declares no cache files (token-only caching; vts/optional/caching covers it)"
        pytest.skip(nn_record["message"])
    with tempfile.TemporaryDirectory(prefix="nnconform-cache-") as d:
        ctx = cache_checks.CacheContext(
            nn_device,
            d,
            seed=nn_session.seed,
            toctou_iterations=_toctou_iterations(),
            call=lambda fn, what: call_with_timeout(fn, BOUND_S, what),
        )
        bad = cache_checks.check_counts(ctx) or cache_checks.CHECKS[check](ctx)
    _finish(
        nn_record,
        bad,
        f"{check}: passed on fp32 and quant8 conv models (cache files {list(counts)})",
        cache_files=list(counts),
        toctou_iterations=ctx.toctou_iterations,
    )


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
        bad.append(f'name {name!r:.60} is not "<vendor>-<device>"')
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
    _finish(
        nn_record,
        bad,
        f"{name}: status, name, type, version {version!r:.40}, extensions and cache-file counts as NNAPI requires",
    )


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
    for what, fn in (
        ("supported_operations", lambda: nn_device.supported_operations(model)),
        ("prepare", lambda: nn_device.prepare(model)),
    ):
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


# ---- memory domains in depth ---------------------------------------------------------------

DOMAIN_TYPES = {
    "fp32": (T.TENSOR_FLOAT32, 0.0, 0),
    "fp16": (T.TENSOR_FLOAT16, 0.0, 0),
    "quant8": (T.TENSOR_QUANT8_ASYMM, 0.5, 128),
    "quant8_signed": (T.TENSOR_QUANT8_ASYMM_SIGNED, 0.5, 0),
}


def domain_conv(
    t, scale: float, zp: int, out_scale: float | None = None, out_zp: int | None = None, out_dims=(1, 3, 3, 2)
) -> Model:
    """A 1x1 CONV_2D [1, 3, 3, 2] -> out_dims in type ``t`` (identity-like weights)."""
    import numpy as np

    b = ModelBuilder()
    quant = scale > 0
    x = b.input(t, [1, 3, 3, 2], scale=scale, zero_point=zp)
    wt = T.TENSOR_QUANT8_ASYMM if t == T.TENSOR_QUANT8_ASYMM else T.TENSOR_QUANT8_ASYMM_SIGNED if quant else t
    w_zp = 128 if wt == T.TENSOR_QUANT8_ASYMM else 0
    w_vals = (np.array([[2, 0], [0, 2]]) + w_zp if quant else np.array([[1.0, 0.5], [0.25, 1.0]])).reshape(2, 1, 1, 2)
    w = b.const(wt, [2, 1, 1, 2], w_vals, scale=0.5 if quant else 0.0, zero_point=w_zp)
    bias = b.const(T.TENSOR_INT32 if quant else t, [2], [0, 0], scale=scale * 0.5 if quant else 0.0)
    y = b.output(
        t,
        list(out_dims),
        scale=out_scale if out_scale is not None else scale,
        zero_point=out_zp if out_zp is not None else zp,
    )
    b.operation(Op.CONV_2D, [x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(0)], [y])
    return b.build()


def _domain_input(t, zp: int, seed: int):
    import numpy as np

    rng = np.random.default_rng(seed)
    if t in (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16):
        return rng.standard_normal((1, 3, 3, 2)).astype(np.float32 if t == T.TENSOR_FLOAT32 else np.float16)
    lo, hi, dt = (0, 256, np.uint8) if t == T.TENSOR_QUANT8_ASYMM else (-128, 128, np.int8)
    return rng.integers(lo, hi, (1, 3, 3, 2)).astype(dt)


def _expect_error(bad: list, what: str, fn, allowed=(ErrorStatus.INVALID_ARGUMENT, ErrorStatus.GENERAL_FAILURE)):
    """``fn`` must fail with a DriverError of an allowed status; anything else is recorded."""
    try:
        call_with_timeout(fn, BOUND_S, what)
    except DriverError as e:
        if e.status not in allowed:
            bad.append(f"{what}: {e.status.name}, expected {' or '.join(s.name for s in allowed)}")
        return
    except Exception as e:
        bad.append(f"{what}: {_describe(e)}, expected an error status")
        return
    bad.append(f"{what}: accepted, expected {' or '.join(s.name for s in allowed)}")


@pytest.mark.parametrize("dtype", list(DOMAIN_TYPES))
def test_memory_domain_conv(dtype, nn_device, nn_session, nn_record):
    """Memory domains on a conv model of one data type: the happy path and the misuses of the
    issue (conflicting roles, foreign or missing prepared models, wrong copies, dynamic shapes,
    an output-only buffer read as an input, request dims that conflict with the buffer's)."""
    import dataclasses

    from nnconform.driver import BufferDesc, BufferRole, MemoryDomains
    from nnconform.ir import Request, RequestArgument
    from nnconform.reference.executor import Executor

    _begin(nn_record, f"{SUITE}/memory_domain/conv_{dtype}", ["CONV_2D"], [dtype])
    if not isinstance(nn_device, MemoryDomains):
        nn_record["message"] = "the driver has no memory domains (MemoryDomains)"
        pytest.skip(nn_record["message"])
    t, scale, zp = DOMAIN_TYPES[dtype]
    model = domain_conv(t, scale, zp)
    x = _domain_input(t, zp, nn_session.seed)
    expected = Executor(model).run([x])[0]
    call = lambda fn, what: call_with_timeout(fn, BOUND_S, what)
    try:
        if not all(call(lambda: nn_device.supported_operations(model), "supported_operations")):
            nn_record["message"] = f"the driver does not support {dtype} CONV_2D"
            pytest.skip(nn_record["message"])
        pm = call(lambda: nn_device.prepare(model), "prepare")
    except (DriverError, HangError) as e:
        _finish(nn_record, [f"could not prepare {dtype} CONV_2D: {_describe(e)}"], "")
    bad: list[str] = []
    others = []

    def alloc(models, ins=(), outs=(), dims=()):
        return call(
            lambda: nn_device.allocate(
                BufferDesc(tuple(dims)),
                list(models),
                [BufferRole(m, i) for m, i in ins],
                [BufferRole(m, i) for m, i in outs],
            ),
            "allocate",
        )

    try:
        try:
            buf, token = alloc([pm], outs=[(0, 0)])
        except DriverError as e:
            if e.status == ErrorStatus.GENERAL_FAILURE:
                nn_record["message"] = f"allocate declined a valid {dtype} [1, 3, 3, 2] role (VTS skips)"
                pytest.skip(nn_record["message"])
            raise
        req = Request.from_arrays(model, [x])
        into = dataclasses.replace(req, outputs=(RequestArgument(memory=int(token)),))
        try:
            call(lambda: pm.execute(into), "execute")
            got = call(buf.copy_to, "copy_to")
            if got.shape != expected.shape or got.tobytes() != expected.tobytes():
                bad.append("an execution writing the buffer: copy_to does not give the reference's output")
        except Exception as e:
            bad.append(f"executing into device memory: {_describe(e)}")
        # conflicting roles: another model whose output differs in scale / zero point / rank
        variants = [("rank", domain_conv(t, scale, zp, out_dims=(1, 3, 3, 2, 1)))]
        if scale > 0:
            variants += [
                ("scale", domain_conv(t, scale, zp, out_scale=scale * 2)),
                ("zero point", domain_conv(t, scale, zp, out_zp=zp + 1)),
            ]
        for what, m in variants:
            try:
                others.append(call(lambda: nn_device.prepare(m), "prepare"))
            except Exception:  # a model the driver cannot take leaves that conflict untested
                continue
            _expect_error(
                bad,
                f"allocate with output roles that differ in {what}",
                lambda: alloc([pm, others[-1]], outs=[(0, 0), (1, 0)]),
            )
        _expect_error(bad, "allocate with a role on a missing prepared model", lambda: alloc([pm], outs=[(1, 0)]))
        _expect_error(bad, "allocate with a foreign prepared model", lambda: alloc([object()], outs=[(0, 0)]))
        wrong_size = x.reshape(-1)[:-1]
        _expect_error(
            bad,
            "copy_from with one element too few",
            lambda: buf.copy_from(wrong_size),
            (ErrorStatus.INVALID_ARGUMENT,),
        )
        _expect_error(
            bad,
            "copy_from with the right size in other dims",
            lambda: buf.copy_from(expected.reshape(1, 9, 1, 2)),
            (ErrorStatus.INVALID_ARGUMENT,),
        )
        as_input = dataclasses.replace(req, inputs=(RequestArgument(memory=int(token)),))
        _expect_error(
            bad,
            "an output-role buffer read as the input",
            lambda: pm.execute(as_input),
            (ErrorStatus.INVALID_ARGUMENT,),
        )
        conflict = dataclasses.replace(req, outputs=(RequestArgument(memory=int(token), dimensions=(1, 3, 3, 3)),))
        _expect_error(
            bad,
            "request output dims [1, 3, 3, 3] against a [1, 3, 3, 2] buffer",
            lambda: pm.execute(conflict),
            (ErrorStatus.INVALID_ARGUMENT,),
        )
        dyn = domain_conv(t, scale, zp, out_dims=(1, 0, 0, 2))
        try:
            dpm = call(lambda: nn_device.prepare(dyn), "prepare")
            others.append(dpm)
            try:
                call(lambda: nn_device.allocate(BufferDesc(), [dpm], [], [BufferRole(0, 0)]), "allocate")
            except DriverError:
                pass  # declining an unknown-size buffer (GENERAL_FAILURE) or any clean error is allowed
            except Exception as e:
                bad.append(f"allocate for a dynamic-shape output: {_describe(e)}")
        except DriverError:
            pass  # a driver that rejects dynamic output shapes leaves this case out
    finally:
        for p in [pm, *others]:
            try:
                call(p.release, "release")
            except Exception:  # best effort: the verdict is about the misuses above
                continue
    _finish(
        nn_record,
        bad,
        f"{dtype} conv: device memory written and read back; conflicting roles, missing "
        f"and foreign models, wrong copies, output-only buffer as input and conflicting "
        f"request dims refused",
    )


def two_io_model() -> Model:
    """o0 = x + y, o1 = x * y on fp32 [1, 8]: two inputs and two outputs of one shape."""
    b = ModelBuilder()
    x, y = b.input(T.TENSOR_FLOAT32, [1, 8]), b.input(T.TENSOR_FLOAT32, [1, 8])
    o0, o1 = b.output(T.TENSOR_FLOAT32, [1, 8]), b.output(T.TENSOR_FLOAT32, [1, 8])
    b.operation(Op.ADD, [x, y, b.i32(0)], [o0])
    b.operation(Op.MUL, [x, y, b.i32(0)], [o1])
    return b.build()


def test_memory_domain_shared(nn_device, nn_session, nn_record):
    """One buffer as two outputs of an execution: INVALID_ARGUMENT; as two inputs: it works."""
    import dataclasses

    import numpy as np

    from nnconform.driver import BufferDesc, BufferRole, MemoryDomains
    from nnconform.ir import Request, RequestArgument

    _begin(nn_record, f"{SUITE}/memory_domain/shared_buffer", ["ADD", "MUL"], ["fp32"])
    if not isinstance(nn_device, MemoryDomains):
        nn_record["message"] = "the driver has no memory domains (MemoryDomains)"
        pytest.skip(nn_record["message"])
    model = two_io_model()
    call = lambda fn, what: call_with_timeout(fn, BOUND_S, what)
    x = np.random.default_rng(nn_session.seed).standard_normal((1, 8)).astype(np.float32)
    bad: list[str] = []
    pm = call(lambda: nn_device.prepare(model), "prepare")
    try:
        try:
            outs, otok = call(
                lambda: nn_device.allocate(BufferDesc(), [pm], [], [BufferRole(0, 0), BufferRole(0, 1)]), "allocate"
            )
            ins, itok = call(
                lambda: nn_device.allocate(BufferDesc(), [pm], [BufferRole(0, 0), BufferRole(0, 1)], []), "allocate"
            )
        except DriverError as e:
            if e.status == ErrorStatus.GENERAL_FAILURE:
                nn_record["message"] = "allocate declined fp32 [1, 8] roles (VTS skips)"
                pytest.skip(nn_record["message"])
            raise
        req = Request.from_arrays(model, [x, x])
        two_out = dataclasses.replace(req, outputs=(RequestArgument(memory=int(otok)),) * 2)
        _expect_error(bad, "one buffer as both outputs", lambda: pm.execute(two_out), (ErrorStatus.INVALID_ARGUMENT,))
        try:
            call(lambda: ins.copy_from(x), "copy_from")
            two_in = dataclasses.replace(req, inputs=(RequestArgument(memory=int(itok)),) * 2)
            got = call(lambda: pm.execute(two_in), "execute")
            if not (np.allclose(got.outputs[0], x + x) and np.allclose(got.outputs[1], x * x)):
                bad.append("one buffer as both inputs: outputs are not x + x and x * x")
        except Exception as e:
            bad.append(f"one buffer as both inputs: {_describe(e)} (must work)")
    finally:
        call(pm.release, "release")
    _finish(nn_record, bad, "one buffer as two outputs refused; as two inputs it works")


# ---- burst memory slots --------------------------------------------------------------------


def test_burst_memory_slots(nn_device, nn_session, nn_record):
    """Slots of a burst's memory cache: use, an invalid slot, a double free, use after release."""
    import dataclasses

    import numpy as np

    from nnconform.driver import BufferDesc, BufferRole, BurstExecution, BurstMemory, MemoryDomains
    from nnconform.ir import Request, RequestArgument

    _begin(nn_record, f"{SUITE}/burst/memory_slots", ["ADD", "MUL"], ["fp32"])
    if not isinstance(nn_device, MemoryDomains):
        nn_record["message"] = "the driver has no memory domains (MemoryDomains) to put in burst slots"
        pytest.skip(nn_record["message"])
    model = two_io_model()
    call = lambda fn, what: call_with_timeout(fn, BOUND_S, what)
    pm = call(lambda: nn_device.prepare(model), "prepare")
    bad: list[str] = []
    try:
        if not isinstance(pm, BurstExecution):
            nn_record["message"] = "the driver has no burst execution (BurstExecution)"
            pytest.skip(nn_record["message"])
        burst = call(pm.configure_burst, "configure_burst")
        if not isinstance(burst, BurstMemory):
            call(burst.release, "burst release")
            nn_record["message"] = "the driver's burst has no memory slots (BurstMemory)"
            pytest.skip(nn_record["message"])
        buf, token = call(lambda: nn_device.allocate(BufferDesc(), [pm], [BufferRole(0, 0)], []), "allocate")
        x = np.random.default_rng(nn_session.seed).standard_normal((1, 8)).astype(np.float32)
        call(lambda: buf.copy_from(x), "copy_from")
        req = Request.from_arrays(model, [x, x])
        via = dataclasses.replace(req, inputs=(RequestArgument(memory=int(token)), req.inputs[1]))
        try:
            slot = call(lambda: burst.cache_memory(int(token)), "cache_memory")
            got = call(lambda: burst.execute(via), "burst execute")
            if not np.allclose(got.outputs[0], x + x):
                bad.append("a burst execution with cached device memory gave wrong results")
            call(lambda: burst.free_memory(slot), "free_memory")
        except Exception as e:
            bad.append(f"caching, using and freeing a slot: {_describe(e)}")
            slot = 0
        _expect_error(bad, "free_memory of the same slot again (double free)", lambda: burst.free_memory(slot))
        _expect_error(bad, "free_memory of a slot never used", lambda: burst.free_memory(10_007))
        _expect_error(bad, "free_memory of slot -1", lambda: burst.free_memory(-1))
        _expect_error(bad, "cache_memory of an unknown token", lambda: burst.cache_memory(int(token) + 100_000))
        call(burst.release, "burst release")
        _expect_error(bad, "execute after the burst's release", lambda: burst.execute(req))
        _expect_error(bad, "cache_memory after the burst's release", lambda: burst.cache_memory(int(token)))
        _expect_error(bad, "free_memory after the burst's release", lambda: burst.free_memory(0))
    finally:
        try:
            call(pm.release, "release")
        except Exception:  # a crashed host: the CRASH is recorded by the plugin
            pass
    _finish(
        nn_record,
        bad,
        "burst memory slots: use, invalid slot, double free and use after release all answered with errors, no crash",
    )


# ---- state across calls ------------------------------------------------------------------


def test_state_across_calls(nn_device, nn_session, nn_record):
    """Device buffers and burst slots live across calls: a buffer written by one prepared
    model's execution is read by another's, refilled by copy_from and read again; three buffers
    cached in burst slots are used, one slot is freed out of order, the others are used again,
    the freed buffer is cached anew.  Every result must be that of the data now in the buffer."""
    import dataclasses

    import numpy as np

    from nnconform.driver import BufferDesc, BufferRole, BurstExecution, BurstMemory, MemoryDomains
    from nnconform.ir import Request, RequestArgument

    _begin(nn_record, f"{SUITE}/state/across_calls", ["ADD", "MUL"], ["fp32"])
    if not isinstance(nn_device, MemoryDomains):
        nn_record["message"] = "the driver has no memory domains (MemoryDomains)"
        pytest.skip(nn_record["message"])
    model = two_io_model()
    call = lambda fn, what: call_with_timeout(fn, BOUND_S, what)
    rng = np.random.default_rng([nn_session.seed, 48])
    xs = [rng.standard_normal((1, 8)).astype(np.float32) for _ in range(4)]
    y = rng.standard_normal((1, 8)).astype(np.float32)
    bad: list[str] = []
    pm1 = call(lambda: nn_device.prepare(model), "prepare")
    pm2 = call(lambda: nn_device.prepare(model), "prepare")

    def via(inp: int | None, out: int | None, x: np.ndarray) -> Request:
        req = Request.from_arrays(model, [x, y])
        ins = (RequestArgument(memory=inp), req.inputs[1]) if inp is not None else req.inputs
        outs = (RequestArgument(memory=out), req.outputs[1]) if out is not None else req.outputs
        return dataclasses.replace(req, inputs=ins, outputs=outs)

    try:
        try:
            # one buffer: output 0 of pm1, input 0 of pm1 and pm2 (device memory across models)
            roles_in, roles_out = [BufferRole(0, 0), BufferRole(1, 0)], [BufferRole(0, 0)]
            shared, stok = call(lambda: nn_device.allocate(BufferDesc(), [pm1, pm2], roles_in, roles_out), "allocate")
            burst_bufs = [
                call(lambda: nn_device.allocate(BufferDesc(), [pm1], [BufferRole(0, 0)], []), "allocate")
                for _ in range(3)
            ]
        except DriverError as e:
            if e.status == ErrorStatus.GENERAL_FAILURE:
                nn_record["message"] = "allocate declined fp32 [1, 8] roles (VTS skips)"
                pytest.skip(nn_record["message"])
            raise

        def expect(got, x, what: str) -> None:
            if not np.allclose(got.outputs[1], x * y, rtol=1e-5, atol=1e-6):
                bad.append(f"{what}: output 1 is not x * y for the data now in the buffer")

        try:
            # pm1 writes x0 + y into the shared buffer; pm2 reads it as its x
            call(lambda: pm1.execute(via(None, int(stok), xs[0])), "execute into device memory")
            got = call(lambda: pm2.execute(via(int(stok), None, xs[0])), "execute from device memory")
            expect(got, xs[0] + y, "a buffer written by one prepared model, read by another")
            if not np.allclose(call(shared.copy_to, "copy_to"), xs[0] + y, rtol=1e-5, atol=1e-6):
                bad.append("copy_to of a buffer an execution wrote does not give what it wrote")
            # refilled by the client: both models must see the new data, not a stale copy
            call(lambda: shared.copy_from(xs[1]), "copy_from")
            for k, pm in enumerate((pm1, pm2, pm1)):
                got = call(lambda: pm.execute(via(int(stok), None, xs[1])), "execute from device memory")
                expect(got, xs[1], f"execution {k + 1} after copy_from refilled the buffer")
        except Exception as e:
            bad.append(f"device memory across executions and prepared models: {_describe(e)}")

        if isinstance(pm1, BurstExecution):
            burst = call(pm1.configure_burst, "configure_burst")
            if isinstance(burst, BurstMemory):
                try:
                    for (buf, _), x in zip(burst_bufs, xs):
                        call(lambda: buf.copy_from(x), "copy_from")
                    slots = [call(lambda: burst.cache_memory(int(t)), "cache_memory") for _, t in burst_bufs]
                    order = [int(i) for i in rng.permutation(3)]
                    for i in order:
                        got = call(lambda: burst.execute(via(int(burst_bufs[i][1]), None, xs[i])), "burst execute")
                        expect(got, xs[i], f"burst with buffer {i} in slot {slots[i]}")
                    freed = order[1]  # not the first nor the last cached: out of order
                    call(lambda: burst.free_memory(slots[freed]), "free_memory")
                    for i in order[::-1]:
                        if i == freed:
                            continue
                        got = call(lambda: burst.execute(via(int(burst_bufs[i][1]), None, xs[i])), "burst execute")
                        expect(got, xs[i], f"burst with buffer {i} after slot {slots[freed]} was freed")
                    # a cached buffer refilled by the client: the burst must see the new data
                    kept = order[0]
                    call(lambda: burst_bufs[kept][0].copy_from(xs[3]), "copy_from")
                    got = call(lambda: burst.execute(via(int(burst_bufs[kept][1]), None, xs[3])), "burst execute")
                    expect(got, xs[3], f"burst with buffer {kept} refilled while cached in slot {slots[kept]}")
                    call(lambda: burst_bufs[freed][0].copy_from(xs[3]), "copy_from")
                    slots[freed] = call(lambda: burst.cache_memory(int(burst_bufs[freed][1])), "cache_memory")
                    got = call(lambda: burst.execute(via(int(burst_bufs[freed][1]), None, xs[3])), "burst execute")
                    expect(got, xs[3], f"burst with buffer {freed} cached again after its slot was freed and refilled")
                    for i in order:
                        call(lambda: burst.free_memory(slots[i]), "free_memory")
                except Exception as e:
                    bad.append(f"burst memory slots reused and freed out of order: {_describe(e)}")
            call(burst.release, "burst release")
    finally:
        for pm in (pm1, pm2):
            try:
                call(pm.release, "release")
            except Exception:  # a crashed host: the CRASH is recorded by the plugin
                pass
    _finish(
        nn_record,
        bad,
        "device memory shared by two prepared models and refilled, burst slots reused and freed out of order: "
        "every result matched the data in its buffer",
    )
