"""Turning result rows into CSV and HTML reports."""

from __future__ import annotations

import os
import signal
import tempfile
import warnings
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
    tmp = _temporary_csv(report_dir)
    try:
        write_csv(records, tmp)
        os.replace(tmp, report_dir / CSV_FILE)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return report_dir / CSV_FILE


def _temporary_csv(report_dir: Path) -> str:
    fd, tmp = tempfile.mkstemp(prefix=".results.csv.", suffix=".tmp", dir=report_dir)
    os.close(fd)
    return tmp


# From this many rows on, results.csv is written by a forked copy of this process while this
# one writes report.html: on two cores the report stage of a whole execution matrix (538,000
# rows: the CSV ~10 s, the HTML ~9 s) then takes the longer of the two, not their sum.
PARALLEL_CSV_ROWS = 50_000


class _CsvJob:
    """results.csv being written by a forked child into a temporary file; ``finish`` renames
    it into place, or writes the CSV here when the child did not (failed, killed)."""

    def __init__(self, records: list, report_dir: Path):
        import multiprocessing

        self.records, self.report_dir = records, report_dir
        self.tmp = _temporary_csv(report_dir)
        try:
            with warnings.catch_warnings():
                # Python 3.12+ (and JAX, once imported) warn that forking a process with
                # threads may deadlock the child: this child only writes a file from objects
                # it already has (no lock, no import, no JAX)
                warnings.simplefilter("ignore", DeprecationWarning)
                warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
                self.proc = multiprocessing.get_context("fork").Process(
                    target=_write_csv_child, args=(records, self.tmp), name="nnconform-csv", daemon=True
                )
                self.proc.start()
        except BaseException:
            os.unlink(self.tmp)
            raise

    def abandon(self) -> None:
        """The report stage broke off (an interrupt, an error): stop the child, drop its file."""
        try:
            self.proc.kill()
            self.proc.join()
        finally:
            if os.path.exists(self.tmp):
                os.unlink(self.tmp)

    def finish(self) -> Path:
        out = self.report_dir / CSV_FILE
        try:
            self.proc.join()
            if self.proc.exitcode != 0:
                write_csv(self.records, self.tmp)
            os.replace(self.tmp, out)
        finally:
            if os.path.exists(self.tmp):
                os.unlink(self.tmp)
        return out


def _write_csv_child(records: list, path: str) -> None:
    # Ctrl-C reaches the whole process group: the parent decides (it abandons this child)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    write_csv(records, path)


def _start_csv(records: list, report_dir: Path) -> _CsvJob | None:
    """A _CsvJob for a large run where this platform can fork, else None (written in line)."""
    import multiprocessing

    if len(records) < PARALLEL_CSV_ROWS or "fork" not in multiprocessing.get_all_start_methods():
        return None
    try:
        return _CsvJob(records, report_dir)
    except OSError:  # no process to spare (a process limit, no memory): the CSV is written here
        return None


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
    job = _start_csv(records, report_dir)
    try:
        if job is None:
            csv_path = write_results_csv(records, report_dir)
        coverage_rows = None
        if with_coverage:
            from nnconform.cases.coverage import coverage

            coverage_rows = coverage(records)
        html_path = write_html(
            records, report_dir / HTML_FILE, title=title, meta=meta, coverage_rows=coverage_rows, history=history
        )
    except BaseException:
        if job is not None:
            job.abandon()
        raise
    if job is not None:
        csv_path = job.finish()
    return csv_path, html_path
