"""The artifact contract: what every command that runs cases leaves in ``--report-dir``.

    run.json        what ran (command, driver, seed, options), its status, and the exit
                    status it ended with (``exit_status``, by nnconform.verdict.outcome.ExitStatus)
    results.jsonl   one row per case (nnconform.verdict.results.ResultRecord), appended as it ends
    results.csv     the same rows as a table
    summary.json    counts, failure buckets and status, for CI (nnconform.reports.summary)
    report.html     the page a person reads

``run``, ``stress`` and ``fuzz`` write all five; a command may add its own files beside them
(the fuzzer's journal and bucket report, the probe's capability matrix), never instead of them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

from nnconform.verdict.outcome import ExitStatus

RUN_FILE = "run.json"
RESULTS_JSONL = "results.jsonl"
RESULTS_CSV = "results.csv"
SUMMARY_JSON = "summary.json"
REPORT_HTML = "report.html"
ARTIFACTS = (RUN_FILE, RESULTS_JSONL, RESULTS_CSV, SUMMARY_JSON, REPORT_HTML)


def missing(report_dir: os.PathLike[str] | str) -> list[str]:
    """The contract's files not (yet) in ``report_dir``."""
    d = Path(report_dir)
    return [name for name in ARTIFACTS if not (d / name).is_file()]


def read_run(report_dir: os.PathLike[str] | str) -> dict[str, Any]:
    """``run.json`` as a dict ({} when absent or unreadable)."""
    try:
        d = json.loads((Path(report_dir) / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return d if isinstance(d, dict) else {}


def write_run(report_dir: os.PathLike[str] | str, run: dict[str, Any]) -> Path:
    """Replace ``run.json`` atomically (a reader never sees half of it)."""
    from nnconform.artifacts.reportdir import atomic_write

    return atomic_write(Path(report_dir) / RUN_FILE, json.dumps(run, indent=1, default=str))


def record_exit(report_dir: os.PathLike[str] | str, exit_status: ExitStatus | int, status: str | None = None) -> None:
    """Record how the command ended in ``run.json`` (which must exist: it is written first)."""
    run = read_run(report_dir)
    run["exit_status"] = int(exit_status)
    if status is not None:
        run["status"] = status
    write_run(report_dir, run)


def write_common(
    report_dir: os.PathLike[str] | str, records: Iterable[Any], meta: dict[str, Any], title: str, html: bool = True
) -> tuple[Path, Path | None]:
    """results.csv, summary.json and (unless the command writes its own page) report.html
    from the rows of ``results.jsonl``.  Returns the paths of results.csv and report.html."""
    from nnconform.reports import build_reports, write_results_csv
    from nnconform.reports.summary import write_summary

    rows = list(records)
    d = Path(report_dir)
    write_summary(d, rows, meta)
    if html:
        return build_reports(d, meta=meta, title=title, records=rows)
    return write_results_csv(rows, d), None


__all__ = [
    "ARTIFACTS",
    "RUN_FILE",
    "RESULTS_JSONL",
    "RESULTS_CSV",
    "SUMMARY_JSON",
    "REPORT_HTML",
    "missing",
    "read_run",
    "write_run",
    "record_exit",
    "write_common",
]
