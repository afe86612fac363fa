"""Turning result rows into CSV and HTML reports."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Mapping

from nnconform.reports.csv_report import write_csv
from nnconform.reports.html_report import write_html
from nnconform.verdict.results import read_results

RESULTS_FILE = "results.jsonl"
CSV_FILE = "results.csv"
HTML_FILE = "report.html"

__all__ = ["build_reports", "write_results_csv", "write_csv", "write_html", "RESULTS_FILE", "CSV_FILE", "HTML_FILE"]


def write_results_csv(records: list, report_dir: str | os.PathLike) -> Path:
    """``report_dir/results.csv`` from these rows, written under a fresh temporary name and
    renamed into place: a symlink planted at results.csv is replaced, never written through."""
    report_dir = Path(report_dir)
    fd, tmp = tempfile.mkstemp(prefix=".results.csv.", suffix=".tmp", dir=report_dir)
    os.close(fd)
    try:
        write_csv(records, tmp)
        os.replace(tmp, report_dir / CSV_FILE)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return report_dir / CSV_FILE


def build_reports(
    report_dir: str | os.PathLike,
    meta: Mapping[str, object] | None = None,
    title: str = "nnconform report",
    with_coverage: bool = False,
    history: list[dict] | None = None,
    records: list | None = None,
) -> tuple[Path, Path]:
    """Read ``report_dir/results.jsonl`` (unless its ``records`` are given, already read) and
    write ``results.csv`` and ``report.html`` beside it.  Returns (csv_path, html_path).
    ``with_coverage`` adds the reference executor's operation coverage table (vectors passed
    counted from these results).  A truncated last row (killed run) is ignored."""
    report_dir = Path(report_dir)
    if records is None:
        records = read_results(report_dir / RESULTS_FILE)
    csv_path = write_results_csv(records, report_dir)
    coverage_rows = None
    if with_coverage:
        from nnconform.cases.coverage import coverage

        coverage_rows = coverage(records)
    html_path = write_html(
        records, report_dir / HTML_FILE, title=title, meta=meta, coverage_rows=coverage_rows, history=history
    )
    return csv_path, html_path
