"""CSV and HTML reports built from a results file (nnconform.reports)."""

from __future__ import annotations

import json
import os
import re

import pandas as pd
import pytest

from nnconform.reports import build_reports, write_csv, write_html
from nnconform.verdict.results import ResultRecord, ResultsWriter

NASTY = "expected 1 <b>&</b> \"got\" 2 'x' <script>alert(1)</script>"


def records():
    def r(suite, tid, outcome, ops, types, **kw):
        return ResultRecord(
            suite=suite, test_id=tid, driver="ref", outcome=outcome, operations=ops, data_types=types, **kw
        )

    return [
        r("generated", "add_fp32_1", "PASS", ["ADD"], ["fp32"], duration_s=0.1, seed=1),
        r("generated", "add_fp32_2", "PASS", ["ADD"], ["fp32"], seed=2),
        r(
            "generated",
            "add_fp32_3",
            "FAIL",
            ["ADD"],
            ["fp32"],
            seed=3,
            message=NASTY,
            replay="nnconform replay 'dump dir/add <3>.json' --driver a&b",
            spec_path="/tmp/dumps/add_3.json",
        ),
        r("generated", "add_q8", "SKIP", ["ADD"], ["quant8"], message="unsupported"),
        r("generated", "conv_q8", "PASS", ["CONV_2D"], ["quant8"], extra={"k": [1, 2]}),
        r("validation", "conv_bad", "ERROR", ["CONV_2D"], ["fp32"], message="boom"),
        r("stress", "graph_7", "CRASH", ["ADD", "CONV_2D"], ["fp32"], seed=7, message="signal 11"),
        r("stress", "graph_8", "SUCCESS", [], [], seed=8),
    ]


@pytest.fixture
def report_dir(tmp_path):
    with ResultsWriter(tmp_path / "results.jsonl") as w:
        w.write_all(records())
    with open(tmp_path / "results.jsonl", "a") as f:
        f.write('{"suite": "generated", "test_id": "killed')  # a killed run's last row
    return tmp_path


def test_build_reports_paths(report_dir):
    csv_path, html_path = build_reports(report_dir, meta={"seed": 42})
    assert csv_path == report_dir / "results.csv" and html_path == report_dir / "report.html"
    assert csv_path.exists() and html_path.exists()


def test_csv_rows(report_dir):
    csv_path, _ = build_reports(report_dir)
    df = pd.read_csv(csv_path, keep_default_na=False)
    assert len(df) == 8
    assert list(df.columns[:4]) == ["suite", "test_id", "driver", "outcome"]
    assert df["outcome"].tolist() == ["PASS", "PASS", "FAIL", "SKIP", "PASS", "ERROR", "CRASH", "SUCCESS"]
    fail = df[df.test_id == "add_fp32_3"].iloc[0]
    assert fail["message"] == NASTY  # CSV keeps the raw text
    assert fail["spec_path"] == "/tmp/dumps/add_3.json"
    assert df[df.test_id == "graph_7"].iloc[0]["operations"] == "ADD;CONV_2D"
    assert json.loads(df[df.test_id == "conv_q8"].iloc[0]["extra"]) == {"k": [1, 2]}
    assert df[df.test_id == "add_q8"].iloc[0]["seed"] == ""  # None stays empty
    assert df[df.test_id == "graph_8"].iloc[0]["seed"] == "8"  # not "8.0"


def test_write_csv_of_no_records(tmp_path):
    p = write_csv([], tmp_path / "empty.csv")
    assert pd.read_csv(p).empty


def test_csv_rows_with_numpy_values_read_as_the_journal_has_them(tmp_path):
    """Rows of plain values take the quick path, rows holding numpy values, NaN or paths go
    through the journal's JSON: both give what the journal holds, numbers and formulas alike."""
    import csv
    from pathlib import Path

    import numpy as np

    from nnconform.verdict.results import record_to_json

    rows = [
        ResultRecord(
            "vectors",
            "plain",
            "ref",
            "PASS",
            ["ADD"],
            ["fp32"],
            duration_s=0.25,
            seed=3,
            extra={"b": 1, "a": "x\u00e9"},
        ),
        ResultRecord(
            "vectors",
            "=numpy",
            "ref",
            "FAIL",
            ["ADD"],
            ["fp32"],
            duration_s=np.float32(0.5),
            seed=np.int64(4),
            message="-1 off",
            extra={"max": np.float64(2.5), "ids": np.arange(2)},
        ),
        ResultRecord(
            "vectors",
            "nan",
            "ref",
            "FAIL",
            ["ADD"],
            ["fp32"],
            duration_s=float("nan"),
            extra={"err": float("inf"), "where": Path("/tmp/x")},
        ),
        ResultRecord("vectors", "+plain", "ref", "PASS", [], [], duration_s=-1.0, message="@sum"),
    ]
    path = write_csv(rows, tmp_path / "r.csv")
    with open(path, newline="") as fh:
        got = list(csv.DictReader(fh))
    for r, row in zip(rows, got):
        want = json.loads(record_to_json(r))
        assert row["extra"] == (json.dumps(want["extra"], sort_keys=True) if want["extra"] else ""), row
        assert row["duration_s"] == ("" if want["duration_s"] is None else str(want["duration_s"]))
        assert row["seed"] == ("" if want["seed"] is None else str(want["seed"]))
    assert [row["test_id"] for row in got] == ["plain", "'=numpy", "nan", "'+plain"]
    assert got[1]["message"] == "'-1 off" and got[3]["message"] == "'@sum"
    assert got[3]["duration_s"] == "-1.0"  # a number keeps its sign


def cell(html_text, op, dtype):
    m = re.search(
        rf'<td class="([^"]*)" data-op="{re.escape(op)}" data-type="{re.escape(dtype)}"'
        rf'(?: title="([^"]*)")?(?: style="[^"]*")?>([^<]*)</td>',
        html_text,
    )
    assert m, (op, dtype)
    return m.group(1), m.group(2), m.group(3)


def test_html_content(report_dir):
    _, html_path = build_reports(report_dir, meta={"seed": 42, "date": "2024-05-01"})
    h = html_path.read_text(encoding="utf-8")
    assert h.startswith("<!DOCTYPE html>") and "<style>" in h
    # self-contained: one inline script, no external resources or links (the table of
    # contents links to the page's own sections only)
    assert h.count("<script") == 1 and "<script>" in h
    assert not re.search(r"<link|src=|href=(?!\"#)|https?://(?!www\.w3\.org/2000/svg)", h)
    # metadata
    for text in (
        "<td>seed</td><td>42</td>",
        "<td>date</td><td>2024-05-01</td>",
        "<td>harness version</td>",
        "<td>driver</td><td>ref</td>",
    ):
        assert text in h
    # counts per outcome and per suite
    assert "8 cases:" in h
    assert '<span class="outcome-PASS">3 PASS</span>' in h
    assert '<span class="outcome-CRASH">1 CRASH</span>' in h
    assert re.search(r'data-suite="generated" data-outcome="PASS">3<', h)
    assert re.search(r'data-suite="generated" data-outcome="FAIL">1<', h)
    assert re.search(r'data-suite="stress" data-outcome="SUCCESS">1<', h)
    assert re.search(r'data-suite="all suites" data-outcome="SKIP">1<', h)
    # matrix cells: pass / fail / skip; a failure counts against one operation only (the
    # CRASH of the two-operation graph nobody attributed is in its own row)
    assert cell(h, "ADD", "fp32") == ("num bad", "2 pass, 1 fail, 0 skip", "2 / 1 / 0")
    assert cell(h, "ADD", "quant8") == ("num skip", "0 pass, 0 fail, 1 skip", "0 / 0 / 1")
    assert cell(h, "CONV_2D", "quant8") == ("num good", "1 pass, 0 fail, 0 skip", "1 / 0 / 0")
    assert cell(h, "CONV_2D", "fp32")[2] == "0 / 1 / 0"
    assert cell(h, "(not attributed)", "fp32")[2] == "0 / 1 / 0"
    assert cell(h, "(device-level, no model)", "(no operand type)")[2] == "1 / 0 / 0"
    assert cell(h, "ADD", "(no operand type)")[0] == "empty"
    # columns in the preferred type order
    assert h.index("<th>fp32</th>") < h.index("<th>quant8</th>")
    # failures table: escaped message and replay command
    assert "Failures (3 in 3 buckets)" in h
    assert h.index('id="failures"') < h.index('id="matrix"')  # failures first
    assert NASTY not in h
    assert (
        "expected 1 &lt;b&gt;&amp;&lt;/b&gt; &#34;got&#34; 2 &#39;x&#39; &lt;script&gt;alert(1)&lt;/script&gt;"
    ) in h
    assert ("<code>nnconform replay &#39;dump dir/add &lt;3&gt;.json&#39; --driver a&amp;b</code>") in h
    assert "signal 11" in h and "boom" in h
    failures = h[h.index('<section id="failures">') : h.index('<section id="skips">')]
    assert "unsupported" not in failures  # skips are not failures (their reasons have their own section)
    assert "unsupported" in h[h.index('<section id="skips">') :]


def test_html_no_failures_and_title_escaped(tmp_path):
    recs = [r for r in records() if r.outcome in ("PASS", "SKIP")]
    p = write_html(recs, tmp_path / "r.html", title="night <1>")
    h = p.read_text()
    # the caller's title names the report's kind after the verdict, escaped like every text
    assert re.search(r"<title>ref: \d+ PASS, \d+ SKIP - night &lt;1&gt;</title>", h)
    assert '<span class="report-kind">night &lt;1&gt;</span>' in h
    assert re.search(r"<h2>Failures</h2>\s*<p>None.</p>", h)


def test_build_reports_missing_results(tmp_path):
    with pytest.raises(FileNotFoundError):
        build_reports(tmp_path)


def test_stress_verdicts_per_test(tmp_path):
    recs = [
        ResultRecord(
            suite="stress",
            test_id=f"{t}#{i}",
            driver="d",
            outcome=o,
            extra={"case_s": 1.0 + i, "rss_mb": 100.0 + 10 * i},
        )
        for i, (t, o) in enumerate(
            [("parallel-inference", "SUCCESS"), ("parallel-inference", "CRASH"), ("leak", "SUCCESS"), ("leak", "HANG")]
        )
    ]
    h = write_html(recs, tmp_path / "r.html").read_text()
    assert "Stress verdicts per test" in h
    assert re.search(r'data-test="parallel-inference" data-outcome="CRASH">1<', h)
    assert re.search(r'data-test="leak" data-outcome="HANG">1<', h)
    assert re.search(r'data-test="leak" data-outcome="SUCCESS">1<', h)
    assert re.search(r'data-test="leak" data-times="1">3.50 / 3.90 / 4.00<', h)  # case seconds 3 and 4
    assert 'aria-label="stress worker RSS after each case"' in h and "130 MB" in h
    assert "Stress verdicts" not in write_html(records()[:6], tmp_path / "c.html").read_text()


def test_models_passed_as_accumulated_rounding_are_listed():
    """A models-suite PASS on the second look (every step within its own criteria) is named in
    the page with how far its output is, so a lenient verdict is never silent; none: no list."""
    from nnconform.reports.html_report import render_html

    acc = ResultRecord(
        suite="models",
        test_id="models/mobilenet_v2_quant8",
        driver="d",
        outcome="PASS",
        operations=["ADD"],
        data_types=["quant8"],
        extra={"accumulated_rounding": True},
        message="output 0 ... |diff| 10 > atol 3 <b>; but every operation ...: accumulated rounding",
    )
    plain = ResultRecord(
        suite="models",
        test_id="models/mobilenet_v1_float",
        driver="d",
        outcome="PASS",
        operations=["CONV_2D"],
        data_types=["fp32"],
    )
    page = render_html([acc, plain])
    section = page[page.index('id="accumulated-rounding"') :]
    section = section[: section.index("</details>")]
    assert "Passed as accumulated rounding (1)" in section and "models/mobilenet_v2_quant8" in section
    assert "|diff| 10 &gt; atol 3 &lt;b&gt;" in section and "mobilenet_v1_float" not in section
    assert 'id="accumulated-rounding"' not in render_html([plain])


def test_a_large_run_writes_its_csv_in_a_forked_child_with_the_same_bytes(report_dir, monkeypatch):
    import nnconform.reports as reports

    csv_path, _ = build_reports(report_dir)
    inline = csv_path.read_bytes()
    csv_path.unlink()
    started = []
    real = reports._CsvJob.__init__

    def spy(self, *a, **kw):
        real(self, *a, **kw)
        started.append(self.proc.pid)

    monkeypatch.setattr(reports, "PARALLEL_CSV_ROWS", 1)
    monkeypatch.setattr(reports._CsvJob, "__init__", spy)
    csv_path, _ = build_reports(report_dir)
    assert started and started[0] != os.getpid()
    assert csv_path.read_bytes() == inline
    assert sorted(p.name for p in report_dir.iterdir()) == ["report.html", "results.csv", "results.jsonl"]


def test_a_csv_child_that_fails_leaves_the_csv_to_the_parent(report_dir, monkeypatch):
    import nnconform.reports as reports

    inline = build_reports(report_dir)[0].read_bytes()

    def broken(records, path):
        raise OSError("the child's disk is full")

    monkeypatch.setattr(reports, "PARALLEL_CSV_ROWS", 1)
    monkeypatch.setattr(reports, "_write_csv_child", broken)  # inherited by the forked child
    csv_path, _ = build_reports(report_dir)
    assert csv_path.read_bytes() == inline
    assert not [p for p in report_dir.iterdir() if p.name.endswith(".tmp")]


def test_a_report_stage_that_breaks_off_stops_the_csv_child(report_dir, monkeypatch):
    import nnconform.reports as reports

    def interrupted(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(reports, "PARALLEL_CSV_ROWS", 1)
    monkeypatch.setattr(reports, "write_html", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_reports(report_dir)
    assert not [p for p in report_dir.iterdir() if p.name.endswith(".tmp")]
