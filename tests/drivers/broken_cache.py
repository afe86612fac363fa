"""DELIBERATELY BROKEN DRIVERS, for testing the harness itself.  Never use them as references.

Each is the reference driver with a compilation cache that has one defect the cache checks
(nnconform.vts.cache_checks, the vts/cache/* cases) must catch:

    NoIntegrityCache   the model cache holds the token and the whole model (weights inline);
                       loading checks the token but nothing covers the contents, so a flipped
                       bit in a model-cache file loads a different model (or fails to parse)
                       where GENERAL_FAILURE is required
    TokenKeyedCache    the compiled model is kept in memory under its token; the files are
                       written but never read, so a tampered, swapped or never-saved cache
                       still "loads" whatever the token names

Name them on the command line as ``tests/drivers/broken_cache.py:NoIntegrityCache``.
"""

from __future__ import annotations

import json

from nnconform.driver import DriverError, ErrorStatus
from nnconform.drivers import reference_cache as rc
from nnconform.drivers.reference import ReferenceDevice, ReferencePreparedModel
from nnconform.ir.spec import model_from_dict, model_to_dict

_HEADER = b"NOINTEGRITY\x01"


def _counts_ok(model_cache, data_cache) -> bool:
    return len(model_cache or ()) == rc.NUM_MODEL_CACHE and len(data_cache or ()) == rc.NUM_DATA_CACHE


class NoIntegrityCache(ReferenceDevice):
    name = "broken-cache-no-integrity"

    def prepare(self, model, *, cache_token=None, model_cache=None, data_cache=None, **kw):
        pm = super().prepare(model, cache_token=None, **kw)
        if cache_token is not None and _counts_ok(model_cache, data_cache):
            try:
                with data_cache[0].open("wb") as f:
                    f.write(b"unused")
                with model_cache[0].open("wb") as f:  # the defect: no tag over the contents
                    f.write(_HEADER + bytes(cache_token) + json.dumps(model_to_dict(model)).encode())
            except OSError:
                pass  # best effort, like the reference
        return pm

    def prepare_from_cache(self, cache_token, *, model_cache=None, data_cache=None):
        if not _counts_ok(model_cache, data_cache):
            raise DriverError(ErrorStatus.INVALID_ARGUMENT, "wrong number of cache files")
        try:
            head = rc._read(model_cache[0])
            rc._read(data_cache[0])  # read (and ignored): the handle must be readable
            n = len(_HEADER)
            if head[:n] != _HEADER or head[n : n + 32] != bytes(cache_token):
                raise ValueError("not saved under this token")
            model = model_from_dict(json.loads(head[n + 32 :]))
        except Exception as e:
            raise DriverError(ErrorStatus.GENERAL_FAILURE, f"cache unreadable: {type(e).__name__}") from None
        return ReferencePreparedModel(model)


class TokenKeyedCache(ReferenceDevice):
    name = "broken-cache-token-keyed"

    def prepare(self, model, *, cache_token=None, model_cache=None, data_cache=None, **kw):
        pm = super().prepare(model, cache_token=None, **kw)
        if cache_token is not None:
            self._cache[bytes(cache_token)] = model  # the defect: the files play no part
            for f in list(model_cache or ()) + list(data_cache or ()):
                try:
                    with f.open("wb") as fh:
                        fh.write(b"compiled elsewhere")
                except OSError:
                    pass
        return pm

    def prepare_from_cache(self, cache_token, *, model_cache=None, data_cache=None):
        if not _counts_ok(model_cache, data_cache):
            raise DriverError(ErrorStatus.INVALID_ARGUMENT, "wrong number of cache files")
        model = self._cache.get(bytes(cache_token))
        if model is None:
            raise DriverError(ErrorStatus.GENERAL_FAILURE, "nothing cached under this token")
        return ReferencePreparedModel(model)


__all__ = ["NoIntegrityCache", "TokenKeyedCache"]
