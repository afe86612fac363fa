"""The reference driver's compilation cache: one model-cache file, one data-cache file.

A model for vendors of what NNAPI asks of a file cache:

- the model-cache file holds ``MAGIC | tag (32 bytes) | model JSON`` where the model JSON is
  the spec-file form of the model (loading it never runs code) with every constant value
  moved out; the data-cache file holds those constant values (JSON) — the bulky part, as
  weights are in a real driver;
- ``tag = HMAC-SHA256(key = the 32-byte token, length-prefixed model JSON and data bytes)``.
  The token is the key, so a cache saved under another token (another model's, or a token
  with one bit flipped) is refused; the contents are covered, so one flipped bit or an
  appended byte in either file is refused too;
- every file is read exactly once, into memory, and checked before anything is parsed: a
  file rewritten while we read it (TOCTOU) can only give a tag mismatch, never a half-checked
  model;
- saving is best effort: the wrong number of files, or files that cannot be written, leave
  the cache unsaved but the preparation succeeds; loading with the wrong number of files is
  INVALID_ARGUMENT, anything else wrong is GENERAL_FAILURE.

(The key is the token alone, which is what binds a cache to its compilation; a driver that
must resist an attacker who knows the token would mix a per-device secret into the key.)
"""

from __future__ import annotations

import hashlib
import hmac
import json
import struct
from typing import Sequence

from nnconform.driver import CACHE_TOKEN_BYTES, CacheFile, DriverError, ErrorStatus
from nnconform.ir import Model

MAGIC = b"NNCONFORM-REF-CACHE\x01"
NUM_MODEL_CACHE, NUM_DATA_CACHE = 1, 1
MAX_FILE_BYTES = 1 << 28  # a cache file larger than this is not one we wrote
_U64 = struct.Struct("<Q")


def _tag(token: bytes, body: bytes, data: bytes) -> bytes:
    mac = hmac.new(bytes(token), digestmod=hashlib.sha256)
    for part in (body, data):
        mac.update(_U64.pack(len(part)))
        mac.update(part)
    return mac.digest()


def _split_constants(model: Model) -> tuple[dict, list]:
    """The model's JSON form with constant values replaced by indexes into a list."""
    from nnconform.ir.spec import model_to_dict

    d = model_to_dict(model)
    values = []
    for sg in [d["main"], *d["referenced"]]:
        for op in sg["operands"]:
            if op["value"] is not None and op["lifetime"] in ("CONSTANT_COPY", "CONSTANT_REFERENCE"):
                values.append(op["value"])
                op["value"] = {"data_cache": len(values) - 1}
    return d, values


def _join_constants(d: dict, values: list) -> Model:
    from nnconform.ir.spec import model_from_dict

    if not isinstance(d, dict) or not isinstance(values, list):
        raise ValueError("cache contents have the wrong layout")
    for sg in [d.get("main"), *d.get("referenced", [])]:
        for op in sg["operands"]:
            v = op.get("value")
            if isinstance(v, dict) and set(v) == {"data_cache"}:
                op["value"] = values[v["data_cache"]]
    return model_from_dict(d)


def save(model: Model, token: bytes, model_cache: Sequence[CacheFile], data_cache: Sequence[CacheFile]) -> bool:
    """Write the cache; False (nothing written) when the file counts are wrong or a write
    fails.  Never raises for a cache problem: a preparation does not fail because its
    cache could not be saved."""
    if len(model_cache) != NUM_MODEL_CACHE or len(data_cache) != NUM_DATA_CACHE:
        return False
    d, values = _split_constants(model)
    body = json.dumps(d, separators=(",", ":")).encode()
    data = json.dumps(values, separators=(",", ":")).encode()
    try:
        with data_cache[0].open("wb") as f:
            f.write(data)
        with model_cache[0].open("wb") as f:
            f.write(MAGIC + _tag(token, body, data) + body)
    except OSError:  # read-only handle, vanished file, full disk: the cache stays unsaved
        return False
    return True


def _read(f: CacheFile) -> bytes:
    with f.open("rb") as fh:
        blob = fh.read(MAX_FILE_BYTES + 1)
    if len(blob) > MAX_FILE_BYTES:
        raise ValueError(f"cache file larger than {MAX_FILE_BYTES} bytes")
    return blob


def load(token: bytes, model_cache: Sequence[CacheFile], data_cache: Sequence[CacheFile]) -> Model:
    """The model saved under ``token``, or DriverError (INVALID_ARGUMENT for the wrong number
    of files or token length, GENERAL_FAILURE for anything the files hold that is not it)."""
    if len(model_cache) != NUM_MODEL_CACHE or len(data_cache) != NUM_DATA_CACHE:
        raise DriverError(
            ErrorStatus.INVALID_ARGUMENT,
            f"{len(model_cache)} model-cache and {len(data_cache)} data-cache files given, "
            f"this driver needs {NUM_MODEL_CACHE} and {NUM_DATA_CACHE}",
        )
    if len(token) != CACHE_TOKEN_BYTES:
        raise DriverError(ErrorStatus.INVALID_ARGUMENT, "cache token must be 32 bytes")
    try:
        head, data = _read(model_cache[0]), _read(data_cache[0])
    except (OSError, ValueError) as e:
        raise DriverError(ErrorStatus.GENERAL_FAILURE, f"cannot read the cache: {type(e).__name__}") from None
    n = len(MAGIC)
    if len(head) < n + 32 or head[:n] != MAGIC:
        raise DriverError(ErrorStatus.GENERAL_FAILURE, "the model cache holds no compilation of this driver")
    tag, body = head[n : n + 32], head[n + 32 :]
    if not hmac.compare_digest(tag, _tag(token, body, data)):
        raise DriverError(ErrorStatus.GENERAL_FAILURE, "the cache fails its integrity check for this token")
    try:
        model = _join_constants(json.loads(body), json.loads(data))
    except Exception as e:  # checked contents we wrote ourselves; still never a crash
        raise DriverError(ErrorStatus.GENERAL_FAILURE, f"cache contents unreadable: {type(e).__name__}") from None
    return model
