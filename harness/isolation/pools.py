"""Request memory as NNAPI has it: operands in shared pools, at offsets, with guards and poison.

NNAPI hands a driver its inputs and outputs as regions of memory pools (``DataLocation``: pool,
offset, length).  The harness does the same for every execution it sends to a driver host:

- one shared-memory segment (a sealed memfd, reused across executions) holds all the
  operands of a request, each at its own offset; every fourth execution of a host places them
  at odd, unaligned offsets (NNAPI lets an application choose any offset), and every other one
  lays the outputs first, so that the region one execution wrote is an input of the next;
- the host maps the segment twice: read-only for the inputs (a write to an input faults, or
  numpy refuses it) and writable for the outputs, and gives the driver views of both
  (``RequestArgument.value`` for inputs, ``RequestArgument.buffer`` for outputs);
- each output region is pre-filled with a poison pattern and followed by guard bytes; behind
  a driver host, the guard bytes run up to the next page boundary and the page after them is
  made inaccessible (PROT_NONE) in the host's writable mapping, so that an overrun too long
  for the guard bytes faults in the host: a CRASH whose message names the output (an overrun
  within the guard bytes stays a ``guard_bytes`` FAIL).

After every execution the harness, which keeps its own mapping, checks three things (each a
named check; a violation raises :class:`PoolViolation`, a FAIL with that message):

    inputs_unchanged  every input region still holds what the harness put there
    guard_bytes       the bytes after each output region are untouched (an overrun)
    output_written    a driver that wrote an output in place wrote every element of it (the
                      poison is gone); a driver that returned its own arrays had them copied in
    outputs_untouched a request the driver rejected (INVALID_ARGUMENT: nothing ran) left
                      every output region as the harness filled it

Poison is a signalling-NaN bit pattern per element width, which no float computation produces;
for integer outputs the same bits can be a real value, so an apparent unwritten element is
confirmed by executing once more with the complementary pattern (a written element holds its
value both times, an unwritten one holds each run's poison).

In-process (``--in-process``) the pools are plain buffers of the harness and the same checks
run on the executions of the conformance runner (:func:`execute_in_process`).
"""

from __future__ import annotations

import ctypes
import fcntl
import itertools
import math
import mmap
import os
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TypeVar

import numpy as np

PREFIX = "nnconform-pool-"
# False sends every operand through the pipe as before pools existed (for measurements only:
# the checks need the pools)
ENABLED = True
GUARD = 64  # bytes of guard pattern after every output region (at least)
PAGE = mmap.PAGESIZE
MAX_GUARDED = 64  # pages a driver host keeps inaccessible per segment (HostMaps._guard)
ALIGN = 64  # offsets of aligned layouts
MIN_SEGMENT = 64 << 10
KEEP_FREE = 6  # free segments kept per host for reuse
KEEP_BYTES = 512 << 20  # ... holding at most this much (a 256 MiB tensor's segment is reused)
_BIG_STEP = 16 << 20  # segments from this size on grow in these steps
_GUARD_PATTERN = np.random.default_rng(0x4E4E).integers(0, 256, GUARD, dtype=np.uint8)  # fixed, not secret
# the pattern repeated over the longest guard band (GUARD bytes, then up to a page boundary)
_GUARD_BAND = np.resize(_GUARD_PATTERN, GUARD + PAGE)
_GUARD_BYTES = _GUARD_BAND.tobytes()
# Poison per element width: signalling NaNs for float16/32/64 (no arithmetic produces them).
_POISON = {1: 0xA5, 2: 0x7DA5, 4: 0x7FA5A5A5, 8: 0x7FF5A5A5A5A5A5A5}
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_FLOAT_KINDS = "f"


_T = TypeVar("_T")


def replace(obj: _T, **changes: Any) -> _T:
    """``dataclasses.replace`` for the frozen Request and RequestArgument, without re-running
    their __init__ (several times cheaper; this runs on every execution)."""
    new = object.__new__(type(obj))
    new.__dict__.update(obj.__dict__)
    new.__dict__.update(changes)
    return new


def _address(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


def _violation(message: str) -> Exception:
    # proxy imports this module; the exception class lives there, beside DriverProtocolError
    from nnconform.isolation.proxy import PoolViolation

    return PoolViolation(message)


def poison_value(itemsize: int, alternate: bool = False) -> int:
    """The poison of an element of ``itemsize`` bytes (its complement for the confirming run)."""
    v = _POISON[itemsize]
    return v ^ ((1 << (8 * itemsize)) - 1) if alternate else v


# ---- layout ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class InRegion:
    index: int  # which request input
    offset: int
    dtype: str
    shape: tuple[int, ...]
    nbytes: int


@dataclass(frozen=True)
class OutRegion:
    index: int  # which request output
    offset: int
    size: int  # bytes the driver may write (the output's capacity)
    dtype: str
    shape: tuple[int, ...] | None  # None: dimensions unknown, the view is flat
    guard: int = GUARD  # bytes of guard pattern right after the region
    page: int | None = None  # offset of the inaccessible page after the guard bytes (None: none)


@dataclass
class Placement:
    """Where one request's operands sit in a buffer, and what the harness put there."""

    inputs: list[InRegion]
    outputs: list[OutRegion]
    total: int
    originals: list[np.ndarray] = field(default_factory=list)  # input bytes as placed (uint8)

    def describe(self, seg: "Segment") -> dict[str, Any]:
        """What the host needs to map and view the regions (pickled with the call)."""
        return {
            "id": seg.id,
            "path": seg.path,
            "size": seg.size,
            "inputs": [(r.index, r.offset, r.dtype, r.shape) for r in self.inputs],
            "outputs": [(r.index, r.offset, r.size, r.dtype, r.shape) for r in self.outputs],
            "guard_pages": [r.page for r in self.outputs if r.page is not None],
        }


@dataclass(frozen=True)
class OutSpec:
    """An output the harness can give a region: its storage dtype, dimensions (None when
    unknown) and capacity in bytes."""

    dtype: np.dtype
    shape: tuple[int, ...] | None
    size: int


def output_specs(model: Any, request: Any) -> list[OutSpec | None]:
    """Per request output, its region (None: it travels as today: a device buffer, an output
    of unknown size without a capacity (the runners give one, ``capacities_from``), an output
    of a prepared model whose model the harness does not know)."""
    out: list[OutSpec | None] = []
    if model is None:
        return [None] * len(request.outputs)
    for idx, arg in zip(model.main.output_indexes, request.outputs):
        op = model.main.operands[idx]
        if arg.memory is not None or arg.has_no_value:
            out.append(None)
            continue
        dt = np.dtype(op.info.dtype)
        dims = tuple(arg.dimensions) if arg.dimensions else tuple(op.dimensions)
        known = len(dims) > 0 and all(d > 0 for d in dims) or (len(dims) == 0 and op.info.is_scalar)
        needed = math.prod(dims) * dt.itemsize if known else None
        size = arg.capacity if arg.capacity is not None else needed
        if size is None or size <= 0 or dt.itemsize not in _POISON:
            out.append(None)
            continue
        out.append(OutSpec(dt, dims if known and needed == size else None, int(size)))
    return out


def capacities_from(model: Any, request: Any, expected: Sequence[Any]) -> Any:
    """``request`` with a capacity on each output whose dimensions the model leaves unknown
    and nothing else sizes: the byte size of the expected output.  NNAPI has no output without
    a buffer (every DataLocation has a length), and VTS sizes the buffers of outputs of
    unspecified dimensions by the golden output the same way; a correct driver fills it
    exactly, one whose output is larger must answer OUTPUT_INSUFFICIENT_SIZE.  The output
    then gets a pool region (``output_specs``) and its checks."""
    outs = list(request.outputs)
    changed = False
    for i, (idx, want) in enumerate(zip(model.main.output_indexes, expected)):
        arg, op = outs[i], model.main.operands[idx]
        if arg.capacity is not None or arg.memory is not None or arg.has_no_value or want is None:
            continue
        dims = tuple(arg.dimensions) if arg.dimensions else tuple(op.dimensions)
        if (len(dims) > 0 and all(d > 0 for d in dims)) or (len(dims) == 0 and op.info.is_scalar):
            continue  # known: the region is sized by the dimensions already
        outs[i] = replace(arg, capacity=math.prod(np.shape(want)) * np.dtype(op.info.dtype).itemsize)
        changed = True
    return replace(request, outputs=tuple(outs)) if changed else request


def plan(
    request: Any,
    specs: Sequence[OutSpec | None],
    odd: bool,
    outputs_first: bool = False,
    guard_pages: bool = False,
) -> Placement:
    """Offsets for the pooled operands of ``request``; ``odd`` shifts each region off alignment;
    ``outputs_first`` lays the outputs before the inputs (so that, the segment being reused,
    the region one execution wrote is what the next one reads); ``guard_pages`` stretches each
    output's guard bytes to the next page boundary and reserves the page after them (the host
    makes it inaccessible: only behind a host, where a fault ends the host, not the harness)."""
    pos = 0
    ins: list[InRegion] = []
    outs: list[OutRegion] = []
    k = itertools.count(1)

    def at(nbytes: int, guard: int) -> int:
        nonlocal pos
        start = -(-pos // ALIGN) * ALIGN + ((next(k) % 7) + 1 if odd else 0)
        pos = start + nbytes + guard
        return start

    def place_inputs() -> None:
        for i, arg in enumerate(request.inputs):
            if arg.value is None or arg.has_no_value or arg.memory is not None:
                continue
            v = np.asarray(arg.value)
            if v.dtype.str not in _ALLOWED:
                continue
            ins.append(InRegion(i, at(v.nbytes, 0), v.dtype.str, tuple(int(d) for d in v.shape), v.nbytes))

    def place_outputs() -> None:
        nonlocal pos
        for i, spec in enumerate(specs):
            if spec is None:
                continue
            start = at(spec.size, GUARD)
            if not guard_pages:
                outs.append(OutRegion(i, start, spec.size, spec.dtype.str, spec.shape))
                continue
            # the guard bytes end where the page after them begins; the region keeps its
            # (aligned or odd) start, so the band is GUARD to GUARD + PAGE - 1 bytes long
            page = -(-pos // PAGE) * PAGE
            end = start + spec.size
            outs.append(OutRegion(i, start, spec.size, spec.dtype.str, spec.shape, page - end, page))
            pos = page + PAGE

    for step in (place_outputs, place_inputs) if outputs_first else (place_inputs, place_outputs):
        step()
    return Placement(ins, outs, max(pos, 1))


_ALLOWED = frozenset(
    np.dtype(t).str
    for t in (np.float32, np.float16, np.float64, np.int32, np.uint32, np.int16, np.uint16, np.int8, np.uint8)
) | {np.dtype(np.bool_).str, np.dtype(np.int64).str}


def fill(buf: np.ndarray, placement: Placement, request: Any, alternate: bool = False) -> None:
    """Write the inputs, poison the outputs, lay the guards (``buf``: the whole pool, uint8)."""
    placement.originals = []
    for r in placement.inputs:
        src = np.ascontiguousarray(request.inputs[r.index].value).reshape(-1).view(np.uint8)
        dst = buf[r.offset : r.offset + r.nbytes]
        dst[:] = src
        placement.originals.append(src)
    for o in placement.outputs:
        poison(buf[o.offset : o.offset + o.size], np.dtype(o.dtype).itemsize, alternate)
        buf[o.offset + o.size : o.offset + o.size + o.guard] = _GUARD_BAND[: o.guard]


def poison(region: np.ndarray, itemsize: int, alternate: bool = False) -> None:
    n = region.size // itemsize
    if n:
        region[: n * itemsize].view(_UINT[itemsize])[:] = poison_value(itemsize, alternate)
    region[n * itemsize :] = 0xA5


# ---- the checks --------------------------------------------------------------------------------


def check_inputs(buf: np.ndarray, placement: Placement) -> None:
    for r, orig in zip(placement.inputs, placement.originals):
        now = buf[r.offset : r.offset + r.nbytes]
        if not np.array_equal(now, orig):
            first = int(np.flatnonzero(now != orig)[0])
            item = np.dtype(r.dtype).itemsize
            changed = int(np.count_nonzero((now != orig).reshape(-1, item).any(axis=1))) if item else 0
            raise _violation(
                f"inputs_unchanged: the driver wrote to input {r.index}, a read-only region "
                f"({changed} of {r.nbytes // item} elements changed, the first at index {first // item})"
            )


def check_guards(buf: np.ndarray, placement: Placement) -> None:
    for o in placement.outputs:
        over = overrun(buf, o)
        if over:
            item = np.dtype(o.dtype).itemsize
            elems = f"{-(-over // item)} element{'s' if -(-over // item) > 1 else ''} of {np.dtype(o.dtype).name}"
            more = " or more" if over == o.guard else ""
            raise _violation(
                f"guard_bytes: the driver wrote past the end of output {o.index}: {over} byte(s){more} "
                f"after its {o.size}-byte region ({elems})"
            )


def overrun(buf: np.ndarray, o: OutRegion) -> int:
    """How many bytes past output region ``o`` its guard bytes show changed (0: none)."""
    g = buf[o.offset + o.size : o.offset + o.size + o.guard]
    if g.tobytes() == _GUARD_BYTES[: o.guard]:  # the usual case: a memcmp, 4x cheaper than numpy's
        return 0
    bad = np.flatnonzero(g != _GUARD_BAND[: o.guard])
    return int(bad[-1]) + 1 if bad.size else 0


def fault_message(buf: np.ndarray, placement: Placement) -> str:
    """Why a driver host may have died of SIGSEGV/SIGBUS during an execution, from what the
    harness can see in its own mapping afterwards ("" when nothing points anywhere).

    An output whose guard bytes are overwritten all the way to its inaccessible page was
    overrun, and the overrun went on into the page: that is the fault, said as a fact.  Without
    such a trace it can only be a possibility: the fault address is not known here, and a
    driver that faults elsewhere (a null pointer) dies the same way."""
    for o in placement.outputs:
        over = overrun(buf, o)
        if o.page is not None and over == o.guard:
            return (
                f"guard_bytes: the driver wrote past the end of output {o.index}: over all {o.guard} guard "
                f"bytes after its {o.size}-byte region and on into the inaccessible page after them, "
                f"where the write faulted"
            )
        if over:
            return (
                f"guard_bytes: the driver wrote {over} byte(s) past the end of output {o.index} before it "
                f"faulted (its {o.size}-byte region is followed by {o.guard} guard bytes)"
            )
    maybe = []
    if placement.inputs:
        which = ", ".join(str(r.index) for r in placement.inputs)
        maybe.append(
            f"inputs_unchanged: the driver's inputs [{which}] are mapped read-only in its host, "
            f"so a write to one faults like this"
        )
    paged = [o for o in placement.outputs if o.page is not None]
    if paged:
        which = ", ".join(f"{o.index} (after {o.guard} guard bytes)" for o in paged)
        maybe.append(
            f"guard_bytes: an inaccessible page follows outputs [{which}], so a write that skips "
            f"past the guard bytes faults like this"
        )
    return "possibly " + "; or ".join(maybe) if maybe else ""


def check_untouched(buf: np.ndarray, placement: Placement, error: BaseException, alternate: bool = False) -> None:
    """After a request the driver rejected as INVALID_ARGUMENT: nothing ran, so every output
    region must still hold exactly the poison the harness put there."""
    from nnconform.driver import DriverError, ErrorStatus

    if not isinstance(error, DriverError) or error.status != ErrorStatus.INVALID_ARGUMENT:
        return
    for o in placement.outputs:
        want = np.empty(o.size, dtype=np.uint8)
        poison(want, np.dtype(o.dtype).itemsize, alternate)
        now = buf[o.offset : o.offset + o.size]
        if not np.array_equal(now, want):
            first = int(np.flatnonzero(now != want)[0])
            raise _violation(
                f"outputs_untouched: the driver rejected the request as INVALID_ARGUMENT but wrote to "
                f"output {o.index} (first changed element {first // np.dtype(o.dtype).itemsize})"
            )


def unwritten(buf: np.ndarray, o: OutRegion, nbytes: int, alternate: bool = False) -> np.ndarray:
    """Indices of the elements of output region ``o`` (its first ``nbytes``) still poisoned."""
    item = np.dtype(o.dtype).itemsize
    n = min(nbytes, o.size) // item
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    elems = buf[o.offset : o.offset + n * item].view(_UINT[item])
    return np.flatnonzero(elems == poison_value(item, alternate))


def needs_confirmation(dtype: str) -> bool:
    """Integer poison can be a real value; float poison (a signalling NaN) cannot."""
    return np.dtype(dtype).kind not in _FLOAT_KINDS


def unwritten_message(o: OutRegion, idx: np.ndarray, total: int) -> str:
    return (
        f"output_written: the driver wrote output {o.index} in place but left {idx.size} of {total} "
        f"element(s) unwritten (the poison pattern is still there, first at index {int(idx[0])})"
    )


def read_only_message(e: BaseException, request: Any) -> str:
    """The inputs_unchanged message for a driver whose write to a read-only input view numpy
    refused (``e``: that ValueError), naming the input when the failing frames hold it."""
    views = {i: a.value for i, a in enumerate(request.inputs) if isinstance(a.value, np.ndarray)}
    found: set[int] = set()
    tb = e.__traceback__
    tb = tb.tb_next if tb is not None else None  # the first frame is the harness's own call
    while tb is not None:
        for v in list(tb.tb_frame.f_locals.values()):
            v = getattr(v, "value", v)  # a RequestArgument the driver holds, or an array
            if isinstance(v, np.ndarray):
                found.update(i for i, view in views.items() if np.may_share_memory(v, view))
        tb = tb.tb_next
    named = f"input {', '.join(map(str, sorted(found)))}" if found else "an input"
    return (
        f"inputs_unchanged: the driver tried to write {named}, which is read-only ({type(e).__name__}: {str(e)[:120]})"
    )


# ---- segments (harness side) -----------------------------------------------------------------


class Segment:
    """One shared-memory segment: a memfd sealed against resizing (a driver holding a writable
    descriptor cannot shrink it under the harness's mapping, which would make the harness's
    next read a SIGBUS), mapped read-write by the harness.  The host opens it through
    ``/proc/<harness pid>/fd/<n>``.  It lives as long as a descriptor or a mapping of it does:
    nothing is left in /dev/shm, whatever way the processes end."""

    _ids = itertools.count(1)

    def __init__(self, size: int) -> None:
        self.size = size
        self.id = next(self._ids)
        fd = os.memfd_create(f"{PREFIX}{self.id}", os.MFD_ALLOW_SEALING | os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, size)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            self.mm = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        self.path = f"/proc/{os.getpid()}/fd/{fd}"
        self.buf = np.frombuffer(self.mm, dtype=np.uint8)
        self._finalizer = weakref.finalize(self, os.close, fd)

    def close(self) -> None:
        """Close the descriptor and unmap (a view still exported keeps the mapping until freed)."""
        self._finalizer()
        del self.buf
        try:
            self.mm.close()
        except BufferError:
            return  # a caller still holds a view: the mapping goes with it


class PoolSet:
    """The segments of one driver host: reused across executions, one per execution in flight."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.free: list[Segment] = []
        self.gone: list[int] = []  # ids of closed segments the host may still have mapped
        self.count = itertools.count()
        self.closed = False

    def acquire(self, nbytes: int) -> Segment:
        with self.lock:
            fits = [s for s in self.free if s.size >= nbytes]
            if fits:
                seg = min(fits, key=lambda s: s.size)
                self.free.remove(seg)
                return seg
        size = MIN_SEGMENT
        while size < nbytes and size < _BIG_STEP:
            size *= 2
        if size < nbytes:  # large: whole steps, not the next power of two (up to 2x wasted)
            size = -(-nbytes // _BIG_STEP) * _BIG_STEP
        return Segment(size)

    def release(self, seg: Segment) -> None:
        with self.lock:
            if self.closed:
                seg.close()
                return
            self.free.append(seg)
            # the host maps every segment twice, under its RLIMIT_AS: keep few bytes, then few
            while sum(s.size for s in self.free) > KEEP_BYTES and len(self.free) > 0:
                self._drop(max(self.free, key=lambda s: s.size))
            while len(self.free) > KEEP_FREE:
                self._drop(min(self.free, key=lambda s: s.size))

    def _drop(self, seg: Segment) -> None:
        self.free.remove(seg)
        self.gone.append(seg.id)
        seg.close()

    def take_gone(self) -> list[int]:
        with self.lock:
            out, self.gone = self.gone, []
        return out

    def layout(self) -> dict[str, bool]:
        """How the next execution lays out its operands (``plan``'s keywords): every fourth at
        unaligned offsets; every other one outputs first, so that a region written as an
        output is read as an input by the next execution; always with guard pages (these
        segments are mapped by a driver host)."""
        n = next(self.count)
        return {"odd": n % 4 == 3, "outputs_first": n % 2 == 1, "guard_pages": True}

    def close(self) -> None:
        with self.lock:
            self.closed = True
            free, self.free = self.free, []
        for s in free:
            s.close()


# ---- the host side ---------------------------------------------------------------------------


_libc: Any = None
_PROT_NONE = 0  # <sys/mman.h>; Python's mmap module has PROT_READ and PROT_WRITE only


def _mprotect(addr: int, length: int, prot: int) -> bool:
    """mprotect(2) on part of a mapping (Python's mmap cannot); False when refused."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        _libc.mprotect.restype = ctypes.c_int
    return int(_libc.mprotect(addr, length, prot)) == 0


class HostMaps:
    """The driver host's mappings of the harness's segments: read-only and read-write.  In
    the writable mapping, the page after each output's guard bytes is made inaccessible for
    the execution that placed it there (``guard_pages`` of the pool description)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        # by segment id, not path: a closed segment's descriptor number is reused by the next
        self.maps: dict[int, tuple[mmap.mmap, mmap.mmap]] = {}
        self.base: dict[int, int] = {}  # address of each writable mapping
        self.guarded: dict[int, frozenset[int]] = {}  # offsets of its pages now PROT_NONE

    def _get(self, seg_id: int, path: str, size: int) -> tuple[mmap.mmap, mmap.mmap]:
        with self.lock:
            got = self.maps.get(seg_id)
            if got is not None:
                return got
        ro_fd = os.open(path, os.O_RDONLY)
        try:
            ro = mmap.mmap(ro_fd, size, prot=mmap.PROT_READ)
        finally:
            os.close(ro_fd)
        rw_fd = os.open(path, os.O_RDWR)
        try:
            rw = mmap.mmap(rw_fd, size)
        finally:
            os.close(rw_fd)
        probe = np.frombuffer(rw, dtype=np.uint8, count=1)
        base = _address(probe)
        del probe  # no exported view may outlive this: forget() must be able to close rw
        with self.lock:
            self.maps[seg_id] = (ro, rw)
            self.base[seg_id] = base
            self.guarded[seg_id] = frozenset()
        return ro, rw

    def _guard(self, seg_id: int, size: int, pages: Sequence[int], outputs: Sequence[tuple[int, int]]) -> None:
        """Make ``pages`` of segment ``seg_id``'s writable mapping inaccessible, and writable
        again any page an earlier execution guarded that one of this execution's output
        regions (``outputs``: offset, size) now covers.  Other pages guarded before stay
        inaccessible: this mapping is written only through output regions, so a page outside
        them is one more guard, and a segment whose layouts alternate (inputs or outputs
        first) stops needing mprotect calls after its first two executions.  At most
        MAX_GUARDED pages stay guarded per segment (each splits the mapping, and the kernel
        limits a process's mappings).  One segment serves one execution at a time, so
        nothing else writes it meanwhile."""
        want = frozenset(p for p in pages if type(p) is int and 0 <= p and p % PAGE == 0 and p + PAGE <= size)
        with self.lock:
            have, base = self.guarded.get(seg_id, frozenset()), self.base.get(seg_id)
        if base is None:
            return
        spans = [(off, off + n) for off, n in outputs]
        free = {p for p in have - want if any(p < e and p + PAGE > o for o, e in spans)}
        if len(have | want) > MAX_GUARDED:
            free = set(have - want)
        if not free and want <= have:
            return
        done = set(have)
        for p in free:
            if _mprotect(base + p, PAGE, mmap.PROT_READ | mmap.PROT_WRITE):
                done.discard(p)
        for p in want - have:
            if _mprotect(base + p, PAGE, _PROT_NONE):  # refused: the guard bytes still check
                done.add(p)
        with self.lock:
            self.guarded[seg_id] = frozenset(done)

    def forget(self, ids: Sequence[int]) -> None:
        for k in ids:
            with self.lock:
                got = self.maps.pop(k, None)
                self.base.pop(k, None)
                self.guarded.pop(k, None)
            for m in got or ():
                try:
                    m.close()
                except BufferError:
                    continue  # the driver still holds a view: the mapping ends with it

    def request(self, request: Any, desc: dict[str, Any]) -> tuple[Any, dict[int, tuple[np.ndarray, int]]]:
        """The request the driver sees: inputs as read-only views into the pool, outputs with
        a writable ``buffer`` view.  Also returns, per output, (its view, its region size)."""
        ro, rw = self._get(desc["id"], desc["path"], desc["size"])
        self._guard(desc["id"], desc["size"], desc.get("guard_pages") or (), [(o[1], o[2]) for o in desc["outputs"]])
        ins = list(request.inputs)
        for i, off, dtype, shape in desc["inputs"]:
            dt = np.dtype(dtype)
            n = math.prod(shape)
            view = np.frombuffer(ro, dtype=dt, count=n, offset=off).reshape(shape)
            ins[i] = replace(ins[i], value=view)
        outs = list(request.outputs)
        regions: dict[int, tuple[np.ndarray, int]] = {}
        for i, off, size, dtype, shape in desc["outputs"]:
            dt = np.dtype(dtype)
            view = np.frombuffer(rw, dtype=dt, count=size // dt.itemsize, offset=off)
            if shape is not None:
                view = view.reshape(shape)
            outs[i] = replace(outs[i], buffer=view)
            regions[i] = (view, size)
        return replace(request, inputs=tuple(ins), outputs=tuple(outs)), regions


def place_output(a: np.ndarray, view: np.ndarray, size: int) -> str:
    """Host side, one returned output: "inplace" when it is the given view (or its leading
    part), "copied" when the host copied it into the region, "" when it does not fit (it then
    travels through the pipe as before)."""
    base = np.asarray(a)
    if base.nbytes > size:
        return ""
    if base.nbytes and base.flags.c_contiguous and _address(base) == _address(view):
        return "inplace"
    if np.may_share_memory(base, view):
        base = base.copy()  # a shifted part of the region itself: copy before overwriting
    dst = view.reshape(-1).view(np.uint8)[: base.nbytes]
    dst[:] = np.ascontiguousarray(base).reshape(-1).view(np.uint8)
    return "copied"


# ---- one execution, either side --------------------------------------------------------------


def read_output(buf: np.ndarray, o: OutRegion, dtype: str, shape: list[int]) -> np.ndarray:
    """A fresh array of the output the driver left in region ``o``."""
    dt = np.dtype(dtype)
    count = math.prod(shape)
    if count * dt.itemsize > o.size:
        raise _violation(
            f"guard_bytes: output {o.index} is reported as {shape} {dt.name}, "
            f"{count * dt.itemsize} bytes, more than its {o.size}-byte region"
        )
    out = np.empty(shape, dtype=dt)
    if count:
        out.reshape(-1).view(np.uint8)[:] = buf[o.offset : o.offset + count * dt.itemsize]
    return out


def execute_in_process(execute: Callable[[Any], Any], request: Any, model: Any) -> Any:
    """Run ``execute(request)`` on an in-process driver with its operands in a plain buffer of
    the harness (inputs read-only views, outputs with poisoned ``buffer`` views and guards),
    then the same checks as behind a host.  Returns the ExecutionResult with fresh arrays."""
    from nnconform.driver import ExecutionResult

    specs = output_specs(model, request)
    placement = plan(request, specs, odd=False)
    buf = np.zeros(placement.total, dtype=np.uint8)

    def once(alternate: bool) -> tuple[Any, dict[int, bool]]:
        fill(buf, placement, request, alternate)
        ins = list(request.inputs)
        for r in placement.inputs:
            view = buf[r.offset : r.offset + r.nbytes].view(np.dtype(r.dtype)).reshape(r.shape)
            view.flags.writeable = False  # a driver may set it back: inputs_unchanged then sees it
            ins[r.index] = replace(ins[r.index], value=view)
        outs = list(request.outputs)
        views: dict[int, np.ndarray] = {}
        for o in placement.outputs:
            dt = np.dtype(o.dtype)
            view = buf[o.offset : o.offset + (o.size // dt.itemsize) * dt.itemsize].view(dt)
            if o.shape is not None:
                view = view.reshape(o.shape)
            views[o.index] = view
            outs[o.index] = replace(outs[o.index], buffer=view)
        given = replace(request, inputs=tuple(ins), outputs=tuple(outs))
        try:
            result = execute(given)
        except ValueError as e:
            check_inputs(buf, placement)
            check_guards(buf, placement)
            if "read-only" in str(e):
                raise _violation(read_only_message(e, given)) from None
            raise
        except BaseException as e:
            check_inputs(buf, placement)
            check_guards(buf, placement)
            check_untouched(buf, placement, e, alternate)
            raise
        check_inputs(buf, placement)
        check_guards(buf, placement)
        inplace: dict[int, bool] = {}
        if isinstance(result, ExecutionResult) and isinstance(result.outputs, (list, tuple)):
            for o in placement.outputs:
                if o.index < len(result.outputs) and isinstance(result.outputs[o.index], np.ndarray):
                    a = result.outputs[o.index]
                    inplace[o.index] = bool(
                        a.nbytes and a.flags.c_contiguous and _address(a) == _address(views[o.index])
                    )
        return result, inplace

    result, inplace = once(False)
    by_index = {o.index: o for o in placement.outputs}
    for i, was in inplace.items():
        if not was:
            continue
        o, a = by_index[i], result.outputs[i]
        idx = unwritten(buf, o, a.nbytes)
        if idx.size and needs_confirmation(o.dtype):
            again, _ = once(True)
            idx = np.intersect1d(idx, unwritten(buf, o, a.nbytes, alternate=True))
            result = again
        if idx.size:
            raise _violation(unwritten_message(o, idx, a.size))
    if not isinstance(result, ExecutionResult) or not inplace:
        return result
    # outputs written in place live in this buffer: hand back fresh arrays
    outs = tuple(np.array(a, copy=True) if inplace.get(i) else a for i, a in enumerate(result.outputs))
    return ExecutionResult(outs, result.output_shapes, result.timing)
