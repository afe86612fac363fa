"""The AOSP NNAPI golden vectors that ship with nnconform.

The vectors (JSON test cases, format in ``SCHEMA.md`` beside this file) are stored here as
one xz-compressed tar archive per feature-level folder (``V1_0.tar.xz`` ... ``AIDL_V3.tar.xz``)
and described by ``MANIFEST.json`` (archive checksums, file and case counts, source).  Where
they come from and under which licence is in ``NOTICE.md``.

``bundled_root()`` unpacks them once into a per-user cache directory,
``$XDG_CACHE_HOME/nnconform/vectors-<hash>/`` (``~/.cache`` by default; the system temp
directory if that is not writable), whose name changes whenever the data does, and returns
it; later calls and later processes reuse it.  The unpacked tree has the same layout as the
source tree, so every reader takes a directory.  Unpacking goes to a private temporary
directory that is renamed into place, so concurrent processes never see half a tree.

``pack(src)`` regenerates the archives and the manifest from a vectors tree
(``python -m nnconform.cases.vectors pack ../shared/aosp_vectors``).  The output depends only on
the input files (sorted members, fixed times and owners, fixed xz settings).
"""

from __future__ import annotations

import hashlib
import io
import json
import lzma
import os
import re
import shutil
import tarfile
import tempfile
from importlib import resources
from pathlib import Path

MANIFEST = "MANIFEST.json"
FORMAT = 1
# Documents copied from the top of the source tree, as they are, when present.
TOP_FILES = ("SCHEMA.md", "index.json")
_XZ_PRESET = 9 | lzma.PRESET_EXTREME
_FOLDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


class BundleError(RuntimeError):
    """The bundled vectors are missing or damaged (a broken installation)."""


# ---------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------


def _data(name: str) -> bytes:
    try:
        return resources.files(__name__).joinpath(name).read_bytes()
    except (FileNotFoundError, OSError) as e:
        raise BundleError(
            f"bundled vectors: cannot read {name} from the nnconform package ({e}); "
            f"reinstall nnconform or give a vectors directory"
        ) from e


def manifest() -> dict:
    """The manifest of the bundled data (folders, archives, counts, source)."""
    return json.loads(_data(MANIFEST))


def data_key() -> str:
    """A short hash that names this version of the bundled data."""
    return hashlib.sha256(_data(MANIFEST)).hexdigest()[:16]


def cache_base() -> Path:
    """Where unpacked copies live: $XDG_CACHE_HOME/nnconform, else ~/.cache/nnconform."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "nnconform"


def _fallback_base() -> Path:
    uid = os.getuid() if hasattr(os, "getuid") else os.getpid()
    return Path(tempfile.gettempdir()) / f"nnconform-cache-{uid}"


def _complete(root: Path, man: dict) -> bool:
    """A cheap check that an unpacked tree is whole: every folder has its number of files."""
    for folder, info in man["folders"].items():
        d = root / folder
        if not d.is_dir() or sum(1 for _ in d.glob("*.json")) != info["files"]:
            return False
    return True


def bundled_root() -> Path:
    """The directory of the unpacked bundled vectors (unpacked on first use)."""
    man = manifest()
    name = f"vectors-{data_key()}"
    errors = []
    for base in (cache_base(), _fallback_base()):
        final = base / name
        if final.is_dir() and _complete(final, man):
            return final
        try:
            base.mkdir(parents=True, exist_ok=True)
            return _unpack_into_place(final, man)
        except OSError as e:
            errors.append(f"{base}: {e}")
    raise BundleError(
        "bundled vectors: no writable cache directory ("
        + "; ".join(errors)
        + "); set XDG_CACHE_HOME or give a vectors directory"
    )


def _unpack_into_place(final: Path, man: dict) -> Path:
    tmp = Path(tempfile.mkdtemp(prefix=final.name + ".", suffix=".partial", dir=final.parent))
    try:
        extract(tmp, man)
        if final.exists() and not _complete(final, man):
            shutil.rmtree(final)  # a damaged copy (e.g. files deleted by hand)
        try:
            os.rename(tmp, final)
        except OSError:
            if not (final.is_dir() and _complete(final, man)):
                raise
            # Another process put a whole copy there first: use it.
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def extract(dest: Path, man: dict | None = None) -> Path:
    """Write the bundled tree (folders, SCHEMA.md, index.json) into ``dest``; checks every
    archive against the manifest's sha256."""
    man = man if man is not None else manifest()
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for folder, info in man["folders"].items():
        if not _FOLDER_NAME.fullmatch(folder):
            raise BundleError(f"bundled vectors: bad folder name {folder!r} in the manifest")
        blob = _data(info["archive"])
        if hashlib.sha256(blob).hexdigest() != info["sha256"]:
            raise BundleError(f"bundled vectors: {info['archive']} does not match its checksum; reinstall nnconform")
        _untar(lzma.decompress(blob), dest / folder)
    for name in man.get("top_files", []):
        (dest / name).write_bytes(_data(name))
    return dest


def _untar(raw: bytes, dest: Path) -> None:
    """Extract the plain files of a tar into ``dest``: names without directories only."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tf:
        for m in tf.getmembers():
            if not m.isfile() or "/" in m.name or "\\" in m.name or m.name.startswith("."):
                raise BundleError(f"bundled vectors: unexpected archive member {m.name!r}")
            member = tf.extractfile(m)
            assert member is not None  # a regular file (checked above) has contents
            (dest / m.name).write_bytes(member.read())


# ---------------------------------------------------------------------------------------
# Writing (developers: regenerate the bundle from a vectors tree)
# ---------------------------------------------------------------------------------------


def folder_order(name: str) -> tuple:
    """Folders in feature-level order (V1_0 .. V1_3_cts_only, AIDL_V2, AIDL_V3, ...), unknown
    names last."""
    from nnconform.reference.ops.feature_levels import folder_level

    level = folder_level(name)
    return (level if level is not None else 1 << 30, name)


def source_folders(src: Path) -> list[Path]:
    return sorted(
        (d for d in Path(src).iterdir() if d.is_dir() and _FOLDER_NAME.fullmatch(d.name) and any(d.glob("*.json"))),
        key=lambda d: folder_order(d.name),
    )


def _tar(files: list[Path]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for f in files:
            data = f.read_bytes()
            info = tarfile.TarInfo(f.name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def pack(src: Path, out: Path | None = None, source: dict | None = None) -> dict:
    """Compress the vectors tree ``src`` into ``out`` (default: this package's directory):
    one ``<folder>.tar.xz`` per folder, the top-level documents, and ``MANIFEST.json``.
    Archives of folders no longer in ``src`` are removed.  Returns the manifest."""
    src = Path(src)
    out = Path(out) if out is not None else Path(__file__).resolve().parent
    folders = source_folders(src)
    if not folders:
        raise FileNotFoundError(f"{src}: no folder with *.json vector files")
    out.mkdir(parents=True, exist_ok=True)
    man: dict = {"format": FORMAT, "folders": {}, "top_files": [], "total_files": 0, "total_cases": 0}
    for d in folders:
        files = sorted(d.glob("*.json"))
        cases = 0
        for f in files:
            data = json.loads(f.read_text())
            if not isinstance(data, list):
                raise ValueError(f"{f}: not a JSON list of test cases")
            cases += len(data)
        blob = lzma.compress(_tar(files), format=lzma.FORMAT_XZ, preset=_XZ_PRESET)
        archive = f"{d.name}.tar.xz"
        (out / archive).write_bytes(blob)
        man["folders"][d.name] = {
            "archive": archive,
            "sha256": hashlib.sha256(blob).hexdigest(),
            "files": len(files),
            "cases": cases,
            "bytes": sum(f.stat().st_size for f in files),
        }
        man["total_files"] += len(files)
        man["total_cases"] += cases
    for name in TOP_FILES:
        if (src / name).is_file():
            shutil.copyfile(src / name, out / name)
            man["top_files"].append(name)
    index = src / "index.json"
    if source is None and index.is_file():
        idx = json.loads(index.read_text())
        source = {k: v for k, v in idx.items() if k.startswith("source")}
    man["source"] = source or {}
    for stale in out.glob("*.tar.xz"):
        if stale.name not in {i["archive"] for i in man["folders"].values()}:
            stale.unlink()
    (out / MANIFEST).write_text(json.dumps(man, indent=1, sort_keys=True) + "\n")
    return man
