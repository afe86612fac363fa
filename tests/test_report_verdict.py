"""The report's headline states the verdict and the driver (issue #46 point 1)."""

from __future__ import annotations

import html
import re

from nnconform.reports import build_reports, write_html
from nnconform.reports.headline import AMBER, GREEN, RED, headline
from nnconform.verdict.results import ResultRecord, ResultsWriter


def row(i, outcome, driver="acme-npu", version="2.1", **extra):
    return ResultRecord(
        suite="generated",
        test_id=f"case_{i}",
        driver=driver,
        outcome=outcome,
        operations=["ADD"],
        data_types=["fp32"],
        extra={"nodeid": f"suites/test_generated.py::case_{i}", "driver_version": version, **extra},
    )


def page(tmp_path, rows, status="complete: 10 of 10 cases", title="nnconform report"):
    text = write_html(rows, tmp_path / "report.html", title=title, meta={"status": status}).read_text()
    t = re.search(r"<title>(.*?)</title>", text, re.S)
    h1 = re.search(r'<h1 id="verdict" data-verdict="(\w+)"><span class="verdict verdict-(\w+)">(.*?)</span>', text)
    assert t and h1, "the page has a <title> and a verdict <h1>"
    assert h1.group(1) == h1.group(2), "the badge's colour is the heading's verdict"
    return text, html.unescape(t.group(1)), h1.group(1), html.unescape(h1.group(3))


def test_failing_run_is_red_with_bad_counts_in_a_fixed_order(tmp_path):
    rows = [row(0, "CRASH")] + [row(i, "FAIL") for i in range(1, 7)] + [row(i, "PASS") for i in range(7, 10)]
    text, title, kind, h1 = page(tmp_path, rows)
    assert kind == RED
    # FAIL before CRASH whatever the rows' order; good outcomes are not in a red headline
    assert h1 == "acme-npu 2.1: 6 FAIL, 1 CRASH"
    assert title == "acme-npu 2.1: 6 FAIL, 1 CRASH - nnconform report"
    # the status line is still there, and a finished failing run's is not green
    assert '<p class="status status-complete" id="run-status">Run status: complete: 10 of 10 cases</p>' in text


def test_clean_run_is_green_and_names_the_driver(tmp_path):
    rows = [row(i, "PASS") for i in range(9)] + [row(9, "SKIP")]
    _, title, kind, h1 = page(tmp_path, rows)
    assert kind == GREEN
    assert h1 == "acme-npu 2.1: 9 PASS, 1 SKIP"
    assert title.startswith("acme-npu 2.1: ")


def test_mostly_skipped_clean_run_is_amber(tmp_path):
    rows = [row(i, "PASS") for i in range(4)] + [row(i, "SKIP") for i in range(4, 10)]
    _, title, kind, h1 = page(tmp_path, rows)
    assert kind == AMBER
    assert h1 == "acme-npu 2.1: 4 PASS, 6 SKIP (60% skipped)"
    assert "(60% skipped)" in title


def test_skips_out_of_the_feature_level_do_not_make_a_run_amber(tmp_path):
    # summary.skip_ratio leaves out-of-scope vectors out: a driver is not amber for them
    rows = [row(i, "PASS") for i in range(4)] + [row(i, "SKIP", out_of_scope=True) for i in range(4, 10)]
    assert headline(rows, {"status": "complete: 10 of 10 cases"}).kind == GREEN
    # exactly half skipped is not "more than half"
    half = [row(i, "PASS") for i in range(5)] + [row(i, "SKIP") for i in range(5, 10)]
    assert headline(half, {"status": "complete: 10 of 10 cases"}).kind == GREEN


def test_interrupted_clean_run_is_amber_and_says_how_far_it_got(tmp_path):
    rows = [row(i, "PASS") for i in range(4)]
    _, title, kind, h1 = page(tmp_path, rows, status="interrupted after 4 of 10 cases")
    assert kind == AMBER
    assert h1 == "acme-npu 2.1: interrupted after 4 of 10 cases, 4 PASS"
    assert "interrupted after 4 of 10" in title


def test_interrupted_failing_run_is_red_and_still_says_interrupted():
    h = headline([row(0, "FAIL"), row(1, "PASS")], {"status": "interrupted after 2 of 10 cases"})
    assert h.kind == RED and h.text == "acme-npu 2.1: 1 FAIL (interrupted after 2 of 10 cases)"


def test_empty_run_is_not_green():
    h = headline([], {"status": "complete: 0 cases", "driver": "tests/drivers/x.py:X"})
    assert h.kind == AMBER and h.text == "tests/drivers/x.py:X: no cases ran"


def test_a_resumed_case_counts_once_by_its_last_row():
    # the same node id failed, then passed on --resume: the run is clean
    rows = [row(0, "FAIL"), row(0, "PASS"), row(1, "PASS")]
    h = headline(rows, {"status": "complete: 2 of 2 cases"})
    assert h.kind == GREEN and h.text == "acme-npu 2.1: 2 PASS"


def test_several_drivers_and_versions_are_all_named():
    h = headline([row(0, "PASS", driver="b", version="1"), row(1, "PASS", driver="a", version="2")])
    assert h.text == "a, b 1, 2: 2 PASS"
    assert headline([row(0, "PASS", version="")]).text == "acme-npu: 1 PASS"


def test_stress_report_through_build_reports_gets_the_same_rule(tmp_path):
    rows = [
        ResultRecord(suite="stress", test_id=f"random-inference#{i}", driver="acme-npu", outcome=o)
        for i, o in enumerate(["SUCCESS", "SUCCESS", "FAILURE", "HANG"])
    ]
    with ResultsWriter(tmp_path / "results.jsonl") as w:
        w.write_all(rows)
    _, path = build_reports(tmp_path, meta={"status": "complete"}, title="nnconform stress report")
    text = path.read_text()
    assert "<title>acme-npu: 1 HANG, 1 FAILURE - nnconform stress report</title>" in text
    assert 'data-verdict="red"' in text
    clean = [r for r in rows if r.outcome == "SUCCESS"]
    assert headline(clean, {"status": "complete"}).text == "acme-npu: 2 SUCCESS"


def test_driver_name_is_escaped_in_title_and_heading(tmp_path):
    text, title, _, h1 = page(tmp_path, [row(0, "PASS", driver="<b>npu</b>")])
    assert "<b>npu</b>" not in text and "&lt;b&gt;npu&lt;/b&gt; 2.1: 1 PASS" in text
    assert title.startswith("<b>npu</b> 2.1: 1 PASS") and h1 == "<b>npu</b> 2.1: 1 PASS"
