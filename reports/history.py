"""Run history: ``--history DIR`` appends each run's summary to ``DIR/history.jsonl`` (one
JSON line, fsynced, like the results journal) and the report shows the trend across runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

HISTORY_FILE = "history.jsonl"
KEEP = ("started", "status", "complete", "driver", "seed", "cases", "counts", "skip_ratio")


def append_history(history_dir: str | os.PathLike, summary: dict) -> Path:
    d = Path(history_dir)
    d.mkdir(parents=True, exist_ok=True)
    path = d / HISTORY_FILE
    line = json.dumps({k: summary.get(k) for k in KEEP}, sort_keys=True) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def read_history(history_dir: str | os.PathLike) -> list[dict]:
    """The runs recorded, oldest first; lines that do not parse (a run killed mid-write) are
    left out."""
    path = Path(history_dir) / HISTORY_FILE
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d, dict) and isinstance(d.get("counts"), dict):
            out.append(d)
    return out
