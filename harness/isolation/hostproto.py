"""The wire format between the harness and a driver host process.

The two directions trust each other differently, on purpose, and so use two frame formats:

- harness -> host, a call: ``u64 length | one pickle of (call id, op, arguments)`` (models,
  requests, arrays).  The host trusts the harness; pickle keeps every IR detail at full speed,
  and one pickle a call is the cheapest a round trip gets (``encode_call``, ``FrameReader.calls``).
- host -> harness, a reply: ``u32 header length | header (UTF-8 JSON object) | binary
  buffers``, the header listing the buffers' lengths under ``"bufs"``: JSON plus raw bytes only.  The harness never unpickles or executes anything a
  host sends; an array comes back as ``{"nd": k, "dtype": "<f4", "shape": [...]}`` pointing at
  raw buffer ``k`` and is rebuilt here as a fresh base-class ndarray.  A driver therefore
  cannot run code in the harness, hand it an array subclass, or share memory with it.

Everything read from a host is bounded (header size, payload size, JSON nesting, integer
length) and any violation raises ProtocolViolation, which the harness treats like a crash of
the host.
"""

from __future__ import annotations

import json
import os
import pickle
import select
import struct
import time
from typing import Any, Iterator, NoReturn, Sequence

import numpy as np

from nnconform.errors import NnError

MAX_HEADER = 16 << 20  # a reply's JSON: shapes, messages, lists of bools
DEFAULT_MAX_PAYLOAD = 4 << 30  # all raw buffers of one reply (outputs of one execution)
_LEN = struct.Struct("<I")
_CALL_LEN = struct.Struct("<Q")
_BIG = 1 << 20  # buffers from this size on are read in place
PIPE_SIZE = 1 << 20  # F_SETPIPE_SZ: fewer context switches for big tensors
_F_SETPIPE_SZ = 1031


def widen_pipe(fd: int) -> None:
    """Ask Linux for a 1 MiB pipe buffer (the default 64 KiB makes a 64 MB tensor cost a
    thousand context switches).  Where that is refused, the pipe keeps its size."""
    try:
        import fcntl

        fcntl.fcntl(fd, _F_SETPIPE_SZ, PIPE_SIZE)
    except (OSError, ImportError):
        return


# dtypes an output may have: the storage types of every NNAPI operand type.
ALLOWED_DTYPES = frozenset(
    np.dtype(t).str
    for t in (
        np.float32,
        np.float16,
        np.float64,
        np.int32,
        np.uint32,
        np.int16,
        np.uint16,
        np.int8,
        np.uint8,
        np.bool_,
        np.int64,
    )
)


class ProtocolViolation(NnError):
    """A driver host sent something that is not a well-formed reply."""


def send_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data).cast("B")
    while view:
        n = os.write(fd, view)
        view = view[n:]


def write_frame(fd: int, header: dict[str, Any], bufs: Sequence[Any] = ()) -> None:
    """Write one frame (the caller serialises writers).  Raises OSError when the peer is gone."""
    header = dict(header, bufs=[memoryview(b).nbytes for b in bufs])
    head = json.dumps(header, separators=(",", ":"), allow_nan=False).encode("utf-8")
    if len(bufs) == 0 or sum(memoryview(b).nbytes for b in bufs) < 65536:
        send_all(fd, b"".join([_LEN.pack(len(head)), head, *[bytes(memoryview(b).cast("B")) for b in bufs]]))
        return
    send_all(fd, _LEN.pack(len(head)) + head)
    for b in bufs:
        send_all(fd, b)


def encode_call(call_id: int, op: str, args: dict[str, Any]) -> list[bytes]:
    """A call frame, harness -> host, as the buffers to write in order (see send_call)."""
    blob = pickle.dumps((call_id, op, args), protocol=5)
    if len(blob) < 65536:
        return [_CALL_LEN.pack(len(blob)) + blob]
    return [_CALL_LEN.pack(len(blob)), blob]  # a big request is not copied to prefix it


def send_call(fd: int, frame: list[bytes]) -> None:
    """Write one call frame (the caller serialises writers).  Raises OSError when the host is gone."""
    for part in frame:
        send_all(fd, part)


class FrameReader:
    """Reads frames from a pipe.  ``read(deadline)`` returns (header, bufs), None at EOF, and
    raises TimeoutError past ``deadline`` (a ``time.monotonic()`` value or None)."""

    def __init__(self, fd: int, *, max_payload: int = DEFAULT_MAX_PAYLOAD):
        self.fd, self.max_payload = fd, max_payload
        self._buf = bytearray()

    def _fill(self, n: int, deadline: float | None) -> bool:
        while len(self._buf) < n:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                    raise TimeoutError
            chunk = os.read(self.fd, max(65536, min(n - len(self._buf), 16 << 20)))
            if not chunk:
                return False
            self._buf += chunk
        return True

    def _take(self, n: int) -> bytes:
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def _read_big(self, n: int, deadline: float | None) -> bytearray | None:
        """A large buffer: read straight into its final place instead of growing and slicing
        the line buffer (which costs several copies per byte)."""
        out = bytearray(n)
        have = min(n, len(self._buf))
        out[:have] = self._buf[:have]
        del self._buf[:have]
        view = memoryview(out)
        while have < n:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                    raise TimeoutError
            got = os.readv(self.fd, [view[have:]])
            if not got:
                return None
            have += got
        return out

    def calls(self) -> Iterator[tuple[int, str, dict[str, Any]]]:
        """Host side: every call frame, as (call id, op, arguments), until the pipe closes.
        Only for the harness's pipe: it unpickles."""
        while True:
            if not self._fill(_CALL_LEN.size, None):
                if self._buf:
                    raise ProtocolViolation("the pipe closed in the middle of a frame")
                return
            (n,) = _CALL_LEN.unpack(self._buf[: _CALL_LEN.size])
            del self._buf[: _CALL_LEN.size]
            blob = self._read_big(n, None) if n >= _BIG else (self._take(n) if self._fill(n, None) else None)
            if blob is None:
                raise ProtocolViolation("the pipe closed in the middle of a frame")
            yield pickle.loads(blob)

    def frames(self) -> Iterator[tuple[dict[str, Any], list[bytes | bytearray]]]:
        """Every frame, as (header, bufs), until the pipe closes (no deadline)."""
        while (frame := self.read()) is not None:
            yield frame

    def read(self, deadline: float | None = None) -> tuple[dict[str, Any], list[bytes | bytearray]] | None:
        if not self._fill(4, deadline):
            if self._buf:
                raise ProtocolViolation("the pipe closed in the middle of a frame")
            return None
        (hlen,) = _LEN.unpack(self._buf[:4])
        if hlen > MAX_HEADER:
            raise ProtocolViolation(f"frame header of {hlen} bytes (limit {MAX_HEADER})")
        if not self._fill(4 + hlen, deadline):
            raise ProtocolViolation("the pipe closed in the middle of a frame")
        del self._buf[:4]
        header = parse_json(self._take(hlen))
        if not isinstance(header, dict):
            raise ProtocolViolation("frame header is not a JSON object")
        sizes = header.get("bufs", [])
        if not isinstance(sizes, list) or not all(type(s) is int and s >= 0 for s in sizes):
            raise ProtocolViolation("frame header has a malformed buffer list")
        total = sum(sizes)
        if total > self.max_payload:
            raise ProtocolViolation(f"reply of {total} bytes exceeds the {self.max_payload}-byte payload limit")
        bufs: list[bytes | bytearray] = []
        for s in sizes:
            if s >= _BIG:
                big = self._read_big(s, deadline)
                if big is None:
                    raise ProtocolViolation("the pipe closed in the middle of a frame")
                bufs.append(big)
                continue
            if not self._fill(s, deadline):
                raise ProtocolViolation("the pipe closed in the middle of a frame")
            bufs.append(self._take(s))
        return header, bufs


_MAX_DEPTH = 32
_MAX_INT_DIGITS = 40


def _parse_int(s: str) -> int:
    if len(s) > _MAX_INT_DIGITS:
        raise ProtocolViolation(f"integer of {len(s)} digits in a reply")
    return int(s)


def _reject_constant(name: str) -> NoReturn:
    raise ProtocolViolation(f"{name} in a reply")


# one decoder for every reply (json.loads with hooks builds a new one, scanner and all, per call)
_DECODER = json.JSONDecoder(parse_int=_parse_int, parse_constant=_reject_constant)


def parse_json(data: bytes) -> Any:
    """Strict JSON for untrusted replies: bounded nesting and integer size, no NaN tokens."""
    # Nesting cannot go deeper than the number of brackets that open it: most replies have a
    # handful, and counting them (in C) spares the byte-by-byte walk (~20 us of a ~200-byte
    # execute reply, on every call).  Brackets inside strings only make the count larger.
    if data.count(b"[") + data.count(b"{") > _MAX_DEPTH:
        depth = cur = 0
        for ch in data:  # bytes iterate as ints; '[' = 91, '{' = 123
            if ch in (91, 123):
                cur += 1
                depth = max(depth, cur)
                if depth > _MAX_DEPTH:
                    raise ProtocolViolation(f"reply nested deeper than {_MAX_DEPTH}")
            elif ch in (93, 125):
                cur -= 1
    try:
        return _DECODER.decode(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise ProtocolViolation(f"reply is not valid JSON ({type(e).__name__}: {str(e)[:80]})") from None


# ---- arrays --------------------------------------------------------------------------------


def encode_array(arr: np.ndarray, bufs: list[bytes]) -> dict[str, Any]:
    """Host side: an array becomes a reference to a raw buffer (base class, C order)."""
    base = np.asarray(arr)  # base class; keeps 0-d scalars 0-d (ascontiguousarray would not)
    bufs.append(base.tobytes(order="C"))
    return {"nd": len(bufs) - 1, "dtype": base.dtype.str, "shape": [int(d) for d in base.shape]}


def decode_array(ref: Any, bufs: Sequence[bytes | bytearray]) -> np.ndarray:
    """Harness side: rebuild a fresh, writable, base-class ndarray from untrusted parts."""
    if not isinstance(ref, dict) or set(ref) != {"nd", "dtype", "shape"}:
        raise ProtocolViolation("malformed array reference")
    k, dtype, shape = ref["nd"], ref["dtype"], ref["shape"]
    if type(k) is not int or not 0 <= k < len(bufs):
        raise ProtocolViolation("array reference to a missing buffer")
    if not isinstance(dtype, str) or dtype not in ALLOWED_DTYPES:
        raise ProtocolViolation(f"array of dtype {str(dtype)[:20]!r}, not a tensor storage type")
    if not isinstance(shape, list) or len(shape) > 16 or not all(type(d) is int and 0 <= d < 2**31 for d in shape):
        raise ProtocolViolation("malformed array shape")
    dt = np.dtype(dtype)
    count = 1
    for d in shape:
        count *= d
    if count * dt.itemsize != len(bufs[k]):
        raise ProtocolViolation(
            f"array of shape {shape} {dtype} needs {count * dt.itemsize} bytes, the reply has {len(bufs[k])}"
        )
    if isinstance(bufs[k], bytearray):
        # Read in place by this harness into memory nobody else holds: adopt it, no copy.
        return np.frombuffer(bufs[k], dtype=dt).reshape(shape)
    out = np.empty(shape, dtype=dt)
    if count:
        out.reshape(-1).view(np.uint8)[:] = np.frombuffer(bufs[k], dtype=np.uint8)
    return out
