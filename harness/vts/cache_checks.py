"""Compilation-cache checks (VTS CompilationCachingTest / CompilationCachingSecurityTest,
re-made): what a driver with file caching must do with its cache files.

    problems = CHECKS["corrupt_model_cache"](CacheContext(device, workdir, seed=11))

Each check takes a :class:`CacheContext` and returns a list of problems (empty: passed).  It
runs on two small conv models, fp32 and quant8-asymm, each with a twin of the same shapes and
other weights (the "other model" whose cache an attacker swaps in: outputs of the wrong model
would be wrong numbers, not an error).  Files are created by the check in ``workdir`` and
handed over as :class:`nnconform.driver.CacheFile`.  Every driver call goes through
``ctx.call`` (the vts suite bounds it with its watchdog); whatever a call raises that is not
a DriverError — a host CRASH or HANG included — is a problem, so "never a crash" is checked
by every step.

    save_retrieve        save, prepare from cache: correct results, bitwise those of the original
    file_count_save      save with one file too many / too few: prepare works, a later load fails
    file_count_load      load with one file too many / too few: INVALID_ARGUMENT
    access_mode          save through a read-only file: prepare works, a later load fails;
                         load through a write-only file: GENERAL_FAILURE
    toctou_save          another model's cache copied over the files while saving, then load:
    toctou_load          ... or while loading: never a crash; a prepared model computes right
    replaced             another model's model cache swapped in: GENERAL_FAILURE
    corrupt_model_cache  one flipped bit / 1-256 appended bytes in a model-cache file:
                         GENERAL_FAILURE (per seed)
    corrupt_data_cache   the same in a data-cache file: no crash; a prepared model computes right
    wrong_token          one flipped bit in the token: GENERAL_FAILURE
    several_tokens       four models (two pairs of twins) saved under four tokens and file sets,
                         then loaded back in a shuffled (seeded) order: each computes its own
                         model, in the same driver process and again in a fresh one
"""

from __future__ import annotations

import itertools
import os
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from nnconform.driver import MAX_CACHE_FILES, CacheFile, DriverError, ErrorStatus
from nnconform.ir import Model, ModelBuilder, Request
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.isolation import interrupts
from nnconform.verdict.criteria import compare

DEFAULT_TOCTOU_ITERATIONS = 100
DEFAULT_CORRUPTION_SEEDS = 10


@dataclass
class CacheModel:
    name: str
    model: Model
    inputs: list
    expected: list


def _conv(quant: bool, weights_seed: int) -> Model:
    """A 1x5x5x2 -> 1x5x5x3 CONV_2D (SAME padding) with seeded weights."""
    rng = np.random.default_rng(weights_seed)
    b = ModelBuilder()
    if quant:
        x = b.input(T.TENSOR_QUANT8_ASYMM, [1, 5, 5, 2], scale=0.5, zero_point=128)
        w = b.const(
            T.TENSOR_QUANT8_ASYMM, [3, 3, 3, 2], rng.integers(100, 156, 54).astype(np.uint8), scale=0.25, zero_point=128
        )
        bias = b.const(T.TENSOR_INT32, [3], rng.integers(-50, 50, 3).astype(np.int32), scale=0.125)
        y = b.output(T.TENSOR_QUANT8_ASYMM, [1, 5, 5, 3], scale=2.0, zero_point=128)
    else:
        x = b.input(T.TENSOR_FLOAT32, [1, 5, 5, 2])
        w = b.const(T.TENSOR_FLOAT32, [3, 3, 3, 2], rng.standard_normal(54).astype(np.float32))
        bias = b.const(T.TENSOR_FLOAT32, [3], rng.standard_normal(3).astype(np.float32))
        y = b.output(T.TENSOR_FLOAT32, [1, 5, 5, 3])
    b.operation(Op.CONV_2D, [x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(0)], [y])
    return b.build()


def cache_models(seed: int) -> list[tuple[CacheModel, CacheModel]]:
    """(model, its twin with other weights) for fp32 and quant8, with reference outputs."""
    from nnconform.reference.executor import Executor

    rng = np.random.default_rng(seed)
    out = []
    for quant in (False, True):
        x = (
            rng.integers(0, 256, (1, 5, 5, 2)).astype(np.uint8)
            if quant
            else rng.standard_normal((1, 5, 5, 2)).astype(np.float32)
        )
        pair = []
        for k in range(2):
            m = _conv(quant, seed * 2 + k + 1)
            pair.append(
                CacheModel(
                    f"{'quant8' if quant else 'fp32'} conv{' (twin)' if k else ''}", m, [x], Executor(m).run([x])
                )
            )
        out.append((pair[0], pair[1]))
    return out


@dataclass
class CacheContext:
    device: Any
    workdir: Path
    seed: int = 0
    toctou_iterations: int = DEFAULT_TOCTOU_ITERATIONS
    corruption_seeds: int = DEFAULT_CORRUPTION_SEEDS
    call: Callable[[Callable[[], Any], str], Any] = staticmethod(lambda fn, what: fn())
    _n: Any = field(default_factory=itertools.count)
    _last_outputs: list | None = None  # the outputs of the last execute of _wrong

    def __post_init__(self):
        self.workdir = Path(self.workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.counts = tuple(self.device.cache_file_counts())

    def files(
        self, n_model: int | None = None, n_data: int | None = None, access: dict[tuple[str, int], str] | None = None
    ) -> tuple[list[CacheFile], list[CacheFile]]:
        """Fresh empty cache files (the driver's counts unless told otherwise)."""
        k = next(self._n)
        nm = self.counts[0] if n_model is None else n_model
        nd = self.counts[1] if n_data is None else n_data
        access = access or {}
        made = []
        for kind, n in (("model", nm), ("data", nd)):
            group = []
            for i in range(n):
                p = self.workdir / f"set{k}-{kind}{i}.cache"
                p.write_bytes(b"")
                group.append(CacheFile(str(p), access.get((kind, i), "rw")))
            made.append(group)
        return made[0], made[1]

    def token(self, k: int) -> bytes:
        return bytes(np.random.default_rng([self.seed, k]).integers(0, 256, 32, dtype=np.uint8))


def _describe(e: BaseException) -> str:
    if isinstance(e, DriverError):
        return e.status.name
    text = str(e).splitlines()[0][:160] if str(e) else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _try(ctx: CacheContext, fn, what: str):
    try:
        return ctx.call(fn, what)
    except Exception as e:  # the driver's answer (or its crash), judged by the caller
        return e


def _save(ctx, cm: CacheModel, token: bytes, mc, dc):
    return _try(
        ctx,
        lambda: ctx.device.prepare(cm.model, cache_token=token, model_cache=mc, data_cache=dc),
        "prepare with cache files",
    )


def _load(ctx, token: bytes, mc, dc):
    return _try(ctx, lambda: ctx.device.prepare_from_cache(token, model_cache=mc, data_cache=dc), "prepare_from_cache")


def _release(ctx, pm) -> None:
    if not isinstance(pm, BaseException) and pm is not None:
        _try(ctx, pm.release, "release")


def _wrong(ctx, cm: CacheModel, pm) -> str | None:
    """None when ``pm`` computes ``cm`` right; else what went wrong."""
    got = _try(ctx, lambda: pm.execute(Request.from_arrays(cm.model, cm.inputs)), "execute")
    if isinstance(got, BaseException):
        return f"execute gave {_describe(got)}"
    ctx._last_outputs = list(got.outputs)
    cmp = compare(cm.model, cm.expected, list(got.outputs))
    return None if cmp.passed else f"wrong results ({cmp.message[:160]})"


def _expect_status(got, statuses: tuple[ErrorStatus, ...], what: str) -> str | None:
    if isinstance(got, DriverError) and got.status in statuses:
        return None
    did = _describe(got) if isinstance(got, BaseException) else "a prepared model"
    return f"{what}: {did}, expected {' or '.join(s.name for s in statuses)}"


def _none_or_right(ctx, cm, got, what: str) -> str | None:
    """A DriverError is acceptable; anything else raised is a crash; a model must compute right."""
    if isinstance(got, DriverError):
        return None
    if isinstance(got, BaseException):
        return f"{what}: {_describe(got)}"
    why = _wrong(ctx, cm, got)
    _release(ctx, got)
    return f"{what}: prepared a model that gives {why}" if why else None


def _copy_over(src: list[CacheFile], dst: list[CacheFile]) -> None:
    for s, d in zip(src, dst):
        shutil.copyfile(s.path, d.path)


# ---- the checks --------------------------------------------------------------------------


def check_counts(ctx: CacheContext) -> list[str]:
    c = ctx.counts
    if not (isinstance(c, tuple) and len(c) == 2 and all(isinstance(n, int) for n in c)):
        return [f"cache_file_counts returned {c!r:.80}, expected two ints"]
    bad = [
        f"{name} cache files: {n}, must be 0..{MAX_CACHE_FILES}"
        for name, n in zip(("model", "data"), c)
        if not 0 <= n <= MAX_CACHE_FILES
    ]
    return bad


def save_retrieve(ctx: CacheContext) -> list[str]:
    bad = []
    for k, (cm, _) in enumerate(cache_models(ctx.seed)):
        mc, dc = ctx.files()
        token = ctx.token(k)
        first = _save(ctx, cm, token, mc, dc)
        if isinstance(first, BaseException):
            bad.append(f"{cm.name}: prepare with cache files gave {_describe(first)}")
            continue
        why = _wrong(ctx, cm, first)
        if why:
            bad.append(f"{cm.name}: the model prepared while saving: {why}")
        again = _load(ctx, token, mc, dc)
        if isinstance(again, BaseException):
            bad.append(f"{cm.name}: prepare_from_cache gave {_describe(again)}")
        else:
            why = _wrong(ctx, cm, again)
            if why:
                bad.append(f"{cm.name} from cache: {why}")
            else:
                req = Request.from_arrays(cm.model, cm.inputs)
                a = _try(ctx, lambda: first.execute(req), "execute")
                b = _try(ctx, lambda: again.execute(req), "execute")
                if (
                    not isinstance(a, BaseException)
                    and not isinstance(b, BaseException)
                    and not all(x.tobytes() == y.tobytes() for x, y in zip(a.outputs, b.outputs))
                ):
                    bad.append(f"{cm.name}: outputs from cache differ bitwise from the original compilation")
            _release(ctx, again)
        _release(ctx, first)
    return bad


def _deltas(n: int) -> list[int]:
    return [d for d in (1, -1) if 0 <= n + d <= MAX_CACHE_FILES]


def file_count_save(ctx: CacheContext) -> list[str]:
    bad = []
    nm, nd = ctx.counts
    for k, (cm, _) in enumerate(cache_models(ctx.seed)):
        token = ctx.token(10 + k)
        for kind, n in (("model", nm), ("data", nd)):
            for d in _deltas(n):
                wrong = ctx.files(nm + d if kind == "model" else nm, nd + d if kind == "data" else nd)
                what = f"{cm.name}: saving with {n + d} {kind}-cache files (needs {n})"
                pm = _save(ctx, cm, token, *wrong)
                if isinstance(pm, BaseException):
                    bad.append(f"{what}: prepare gave {_describe(pm)}, expected a prepared model")
                    continue
                why = _wrong(ctx, cm, pm)
                _release(ctx, pm)
                if why:
                    bad.append(f"{what}: {why}")
                # the load gets the right number: the files given at save, cut or padded
                right = ctx.files()
                for group, fresh in zip(wrong, right):
                    for f, g in zip(group, fresh):
                        shutil.copyfile(f.path, g.path)
                why = _expect_status(_load(ctx, token, *right), (ErrorStatus.GENERAL_FAILURE,), f"{what}, then loading")
                if why:
                    bad.append(why)
    return bad


def file_count_load(ctx: CacheContext) -> list[str]:
    bad = []
    nm, nd = ctx.counts
    for k, (cm, _) in enumerate(cache_models(ctx.seed)):
        token = ctx.token(20 + k)
        mc, dc = ctx.files()
        pm = _save(ctx, cm, token, mc, dc)
        if isinstance(pm, BaseException):
            bad.append(f"{cm.name}: prepare with cache files gave {_describe(pm)}")
            continue
        _release(ctx, pm)
        for kind, n in (("model", nm), ("data", nd)):
            for d in _deltas(n):
                extra_m, extra_d = ctx.files(1, 1)
                m2 = mc + extra_m if kind == "model" and d > 0 else mc[:-1] if kind == "model" else mc
                d2 = dc + extra_d if kind == "data" and d > 0 else dc[:-1] if kind == "data" else dc
                why = _expect_status(
                    _load(ctx, token, m2, d2),
                    (ErrorStatus.INVALID_ARGUMENT,),
                    f"{cm.name}: loading with {n + d} {kind}-cache files (needs {n})",
                )
                if why:
                    bad.append(why)
    return bad


def access_mode(ctx: CacheContext) -> list[str]:
    bad = []
    nm, nd = ctx.counts
    slots = [("model", i) for i in range(nm)] + [("data", i) for i in range(nd)]
    for k, (cm, _) in enumerate(cache_models(ctx.seed)):
        token = ctx.token(30 + k)
        for slot in slots:
            mc, dc = ctx.files(access={slot: "r"})
            pm = _save(ctx, cm, token, mc, dc)
            what = f"{cm.name}: saving with {slot[0]}-cache file {slot[1]} read-only"
            if isinstance(pm, BaseException):
                bad.append(f"{what}: prepare gave {_describe(pm)}, expected a prepared model")
                continue
            _release(ctx, pm)
            rw = [CacheFile(f.path) for f in mc], [CacheFile(f.path) for f in dc]
            why = _expect_status(_load(ctx, token, *rw), (ErrorStatus.GENERAL_FAILURE,), f"{what}, then loading")
            if why:
                bad.append(why)
        mc, dc = ctx.files()
        pm = _save(ctx, cm, token, mc, dc)
        if isinstance(pm, BaseException):
            bad.append(f"{cm.name}: prepare with cache files gave {_describe(pm)}")
            continue
        _release(ctx, pm)
        for kind, i in slots:
            m2 = [CacheFile(f.path, "w" if (kind, j) == ("model", i) else "rw") for j, f in enumerate(mc)]
            d2 = [CacheFile(f.path, "w" if (kind, j) == ("data", i) else "rw") for j, f in enumerate(dc)]
            why = _expect_status(
                _load(ctx, token, m2, d2),
                (ErrorStatus.GENERAL_FAILURE,),
                f"{cm.name}: loading with {kind}-cache file {i} write-only",
            )
            if why:
                bad.append(why)
    return bad


class _Copier:
    """Copies ``src`` over ``dst`` again and again in a thread while a driver call runs."""

    def __init__(self, src, dst):
        self.src, self.dst = src, dst
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def _loop(self):
        while not self.stop.is_set():
            try:
                _copy_over(self.src, self.dst)
            except OSError:  # the driver may hold the file; the next round tries again
                continue

    def __enter__(self):
        self.thread = interrupts.thread(self._loop, name="nnconform-cache-toctou")
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(10)


def _toctou(ctx: CacheContext, while_saving: bool) -> list[str]:
    bad = []
    for k, (cm, twin) in enumerate(cache_models(ctx.seed)):
        token, other_token = ctx.token(40 + k), ctx.token(50 + k)
        omc, odc = ctx.files()
        opm = _save(ctx, twin, other_token, omc, odc)
        if isinstance(opm, BaseException):
            bad.append(f"{twin.name}: prepare with cache files gave {_describe(opm)}")
            continue
        _release(ctx, opm)
        mc, dc = ctx.files()
        loaded = 0
        for it in range(ctx.toctou_iterations):
            if while_saving:
                with _Copier(omc, mc):
                    pm = _save(ctx, cm, token, mc, dc)
            else:
                pm = _save(ctx, cm, token, mc, dc)
            if isinstance(pm, BaseException) and not isinstance(pm, DriverError):
                bad.append(f"{cm.name} iteration {it}: prepare while the cache was overwritten: {_describe(pm)}")
                break
            _release(ctx, pm)
            if while_saving:
                got = _load(ctx, token, mc, dc)
            else:
                with _Copier(omc, mc):
                    got = _load(ctx, token, mc, dc)
            loaded += not isinstance(got, BaseException)
            why = _none_or_right(ctx, cm, got, f"{cm.name} iteration {it}: loading")
            if why:
                bad.append(why)
                break
    return bad


def toctou_save(ctx: CacheContext) -> list[str]:
    return _toctou(ctx, True)


def toctou_load(ctx: CacheContext) -> list[str]:
    return _toctou(ctx, False)


def replaced(ctx: CacheContext) -> list[str]:
    bad = []
    for k, (cm, twin) in enumerate(cache_models(ctx.seed)):
        token, other_token = ctx.token(60 + k), ctx.token(70 + k)
        omc, odc = ctx.files()
        mc, dc = ctx.files()
        for m, t, files in ((twin, other_token, (omc, odc)), (cm, token, (mc, dc))):
            pm = _save(ctx, m, t, *files)
            if isinstance(pm, BaseException):
                bad.append(f"{m.name}: prepare with cache files gave {_describe(pm)}")
            _release(ctx, pm)
        _copy_over(omc, mc)
        got = _load(ctx, token, mc, dc)
        why = _expect_status(
            got, (ErrorStatus.GENERAL_FAILURE,), f"{cm.name}: the model cache replaced by that of {twin.name}"
        )
        if why:
            bad.append(why)
        _release(ctx, got)
    return bad


def _corrupt(ctx: CacheContext, kind: str) -> list[str]:
    bad = []
    n = ctx.counts[0 if kind == "model" else 1]
    if n == 0:
        return []
    for k, (cm, _) in enumerate(cache_models(ctx.seed)):
        token = ctx.token(80 + k)
        for s in range(ctx.corruption_seeds):
            rng = np.random.default_rng([ctx.seed, s, k])
            for how in ("flip", "append"):
                mc, dc = ctx.files()
                pm = _save(ctx, cm, token, mc, dc)
                if isinstance(pm, BaseException):
                    bad.append(f"{cm.name}: prepare with cache files gave {_describe(pm)}")
                    return bad
                _release(ctx, pm)
                target = (mc if kind == "model" else dc)[int(rng.integers(0, n))]
                blob = bytearray(Path(target.path).read_bytes())
                if how == "flip" and blob:
                    bit = int(rng.integers(0, len(blob) * 8))
                    blob[bit // 8] ^= 1 << (bit % 8)
                    what = f"bit {bit} flipped"
                else:
                    extra = int(rng.integers(1, 257))
                    blob += rng.integers(0, 256, extra, dtype=np.uint8).tobytes()
                    what = f"{extra} bytes appended"
                Path(target.path).write_bytes(bytes(blob))
                got = _load(ctx, token, mc, dc)
                label = f"{cm.name} seed {s}: {kind}-cache file {os.path.basename(target.path)} {what}"
                if kind == "model":
                    why = _expect_status(got, (ErrorStatus.GENERAL_FAILURE,), label)
                    _release(ctx, got)
                else:
                    why = _none_or_right(ctx, cm, got, label)
                if why:
                    bad.append(why)
    return bad


def corrupt_model_cache(ctx: CacheContext) -> list[str]:
    return _corrupt(ctx, "model")


def corrupt_data_cache(ctx: CacheContext) -> list[str]:
    return _corrupt(ctx, "data")


def wrong_token(ctx: CacheContext) -> list[str]:
    bad = []
    for k, (cm, _) in enumerate(cache_models(ctx.seed)):
        token = ctx.token(90 + k)
        mc, dc = ctx.files()
        pm = _save(ctx, cm, token, mc, dc)
        if isinstance(pm, BaseException):
            bad.append(f"{cm.name}: prepare with cache files gave {_describe(pm)}")
            continue
        _release(ctx, pm)
        rng = np.random.default_rng([ctx.seed, 90 + k])
        for _ in range(3):
            bit = int(rng.integers(0, 256))
            t = bytearray(token)
            t[bit // 8] ^= 1 << (bit % 8)
            got = _load(ctx, bytes(t), mc, dc)
            why = _expect_status(got, (ErrorStatus.GENERAL_FAILURE,), f"{cm.name}: token bit {bit} flipped")
            _release(ctx, got)
            if why:
                bad.append(why)
    return bad


def several_tokens(ctx: CacheContext) -> list[str]:
    """A cache is state across calls: a driver that keys it wrongly (one slot for "the" cached
    compilation, a token truncated, files shared between tokens) still passes a single save and
    load.  Save every model first, then load each back in a shuffled order."""
    bad: list[str] = []
    models = [m for pair in cache_models(ctx.seed) for m in pair]
    saved: list[tuple[CacheModel, bytes, list[CacheFile], list[CacheFile]]] = []
    for k, cm in enumerate(models):
        mc, dc = ctx.files()
        token = ctx.token(110 + k)
        pm = _save(ctx, cm, token, mc, dc)
        if isinstance(pm, BaseException):
            bad.append(f"several_tokens: {cm.name}: prepare with cache files gave {_describe(pm)}")
            continue
        _release(ctx, pm)
        saved.append((cm, token, mc, dc))
    rng = np.random.default_rng([ctx.seed, 110])
    restart = getattr(ctx.device, "restart", None)  # a fresh driver process (isolated drivers only)
    rounds = ["the same driver process"] + (["a fresh driver process"] if callable(restart) else [])
    for where in rounds:
        if where != rounds[0] and callable(restart):
            restart()
        order = [saved[i] for i in rng.permutation(len(saved))]
        for cm, token, mc, dc in order:
            got = _load(ctx, token, mc, dc)
            if isinstance(got, BaseException):
                bad.append(f"several_tokens: {cm.name}: prepare_from_cache in {where} gave {_describe(got)}")
                continue
            why = _wrong(ctx, cm, got)
            _release(ctx, got)
            if why:
                others = [o.name for o, *_ in saved if o is not cm and _wrong_quiet(ctx, o, cm) is None]
                hint = f"; it computes {others[0]} instead" if others else ""
                bad.append(
                    f"several_tokens: {cm.name} loaded by its token in {where} (after {len(saved)} models were "
                    f"saved under {len(saved)} tokens) gives {why}{hint}"
                )
    return bad


def _wrong_quiet(ctx: CacheContext, other: CacheModel, cm: CacheModel) -> str | None:
    """Does ``other``'s model, run on ``cm``'s inputs, give what the driver gave?  Only a hint
    for the message; None when ``other`` explains the wrong result (same shapes needed)."""
    from nnconform.reference.executor import Executor

    if (
        other.model.main.operands[other.model.main.input_indexes[0]].info
        != cm.model.main.operands[cm.model.main.input_indexes[0]].info
    ):
        return "other types"
    try:
        want = Executor(other.model).run(cm.inputs)
    except Exception as e:  # a hint only: no hint when the other model cannot run these inputs
        return str(e)
    got = ctx._last_outputs
    if got is None or not all(np.array_equal(a, b) for a, b in zip(want, got)):
        return "differs"
    return None


CHECKS: dict[str, Callable[[CacheContext], list[str]]] = {
    "save_retrieve": save_retrieve,
    "file_count_save": file_count_save,
    "file_count_load": file_count_load,
    "access_mode": access_mode,
    "toctou_save": toctou_save,
    "toctou_load": toctou_load,
    "replaced": replaced,
    "corrupt_model_cache": corrupt_model_cache,
    "corrupt_data_cache": corrupt_data_cache,
    "wrong_token": wrong_token,
    "several_tokens": several_tokens,
}
