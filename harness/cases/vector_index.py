"""A cache of what collecting the vectors suite needs to know about each vectors file.

Collecting the vectors suite used to decode all 117 MB of JSON (9,374 cases) to learn each
case's name, markers and applicable matrix variants, and it did so in every pytest process
(each xdist worker collects the whole suite) and once per test function.  Only the facts
are needed at collection; a case's arrays are read when its test runs.  This module keeps
those facts per file in one small JSON file per vectors tree, under the nnconform cache
directory, so a later collection reads that instead.

An entry is reused only while its file keeps the same size and modification time and the
code that derived it (``code_key``, a hash of the deriving modules' source) is unchanged; any
other file is read again.  The cache is an optimisation only: when it cannot be read or
written (a read-only home, a damaged file), collection derives everything from the JSON as
before, and says nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Callable, Iterable

INDEX_FORMAT = "nnconform-vector-index/1"


def code_key(*sources: str | os.PathLike) -> str:
    """A short hash of the source files whose functions derive the facts."""
    h = hashlib.sha256(INDEX_FORMAT.encode())
    for f in sources:
        h.update(Path(f).read_bytes())
    return h.hexdigest()[:16]


def index_path(root: Path, kind: str = "") -> Path:
    """Where the index of a tree is kept.  ``kind`` names a second index of other facts (the
    loader's per-case operations): each user has its own file, so two deriving codes never
    overwrite each other's entries."""
    from nnconform.vectors_data import cache_base

    name = hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:16]
    return cache_base() / "vector-index" / (f"{name}-{kind}.json" if kind else f"{name}.json")


def _stamp(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


class VectorIndex:
    """File facts for one vectors tree: ``facts(path)`` gives the cached facts of a file, or
    derives them with ``derive(path)`` (which must return JSON-able data) and remembers them;
    ``save()`` writes what changed."""

    def __init__(self, root: Path, key: str, derive: Callable[[Path], object], kind: str = ""):
        self.root, self.key, self.derive = Path(root), key, derive
        self.path = index_path(self.root, kind)
        self.entries: dict[str, dict] = {}
        self.derived = 0
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        if (
            isinstance(data, dict)
            and data.get("format") == INDEX_FORMAT
            and data.get("code") == key
            and isinstance(data.get("files"), dict)
        ):
            self.entries = data["files"]

    def known(self, path: Path):
        """The cached facts of a file, or None when they would have to be derived."""
        e = self.entries.get(os.path.relpath(path, self.root))
        if isinstance(e, dict) and "facts" in e:
            try:
                if e.get("stamp") == _stamp(path):
                    return e["facts"]
            except OSError:
                return None
        return None

    def remember(self, path: Path, facts) -> None:
        """Keep facts derived by the caller (who had the file open anyway)."""
        try:
            stamp = _stamp(path)
        except OSError:
            return  # the file went away: its facts are not worth keeping
        self.entries[os.path.relpath(path, self.root)] = {"stamp": stamp, "facts": facts}
        self.derived += 1

    def facts(self, path: Path):
        facts = self.known(path)
        if facts is None:
            facts = self.derive(path)
            self.remember(path, facts)
        return facts

    def save(self, files: Iterable[Path]) -> None:
        """Write the index (only the given files' entries) when anything was derived."""
        if not self.derived:
            return
        keep = {os.path.relpath(f, self.root) for f in files}
        data = {
            "format": INDEX_FORMAT,
            "code": self.key,
            "root": str(self.root),
            "files": {k: v for k, v in self.entries.items() if k in keep},
        }
        tmp = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=self.path.name, suffix=".tmp", dir=self.path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, separators=(",", ":"))
            os.replace(tmp, self.path)  # atomic: concurrent xdist workers each write a whole file
            # Written: a later collection in this process (a cluster worker collects once a
            # batch) has nothing new to save, and rewriting the whole index cost seconds a batch.
            self.derived = 0
        except OSError:
            # A cache that cannot be written costs only speed (the facts were derived anyway);
            # a temp file left behind by a failed write is removed if it can be.
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
