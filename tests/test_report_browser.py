"""report.html in a real browser (headless Chromium, Debian's ``chromium`` package; .ci/run
installs it): the script runs, the buckets filter and sort, the charts and the matrix render.

Views are chosen through the page's own link syntax (``report.html#q=relu6&sort=-1``), and
the DOM after the script ran is read with ``--dump-dom``."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from nnconform.reports import write_html
from nnconform.verdict.results import ResultRecord

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip(
        "no Chromium on this machine: install Debian's chromium package "
        "(apt-get install chromium; .ci/run does) to test report.html in a browser"
    )


def _flags(tmp_path: Path) -> list[str]:
    return [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--virtual-time-budget=5000",
    ]


def _rows() -> list[ResultRecord]:
    rows = []
    for i in range(40):  # one bug seen through 40 ADD+CONV vectors: one bucket
        rows.append(
            ResultRecord(
                suite="vectors",
                test_id=f"V1_2/conv_{i}",
                driver="d",
                outcome="FAIL",
                operations=["ADD", "CONV_2D"],
                data_types=["quant8"],
                blamed_operation="ADD",
                blamed_data_type="quant8",
                message=f"[ADD, CONV_2D] output 0 index [{i}]: expected {i}, actual {i + 2}",
                replay=f"nnconform replay f/conv_{i}.spec.json --driver d",
                extra={"criterion": "default/element"},
            )
        )
    for i in range(5):
        rows.append(
            ResultRecord(
                suite="generated",
                test_id=f"generated/relu6_{i}",
                driver="d",
                outcome="FAIL",
                operations=["RELU6"],
                data_types=["fp32"],
                blamed_operation="RELU6",
                blamed_data_type="fp32",
                message=f"[RELU6] output 0 index [{i}]: expected 6, actual {7 + i}",
                replay=f"nnconform replay f/relu6_{i}.spec.json --driver d",
                extra={"criterion": "default/element"},
            )
        )
    rows.append(
        ResultRecord(
            suite="vts",
            test_id="vts/crash",
            driver="d",
            outcome="CRASH",
            operations=["SOFTMAX"],
            data_types=["fp16"],
            message="driver host died: signal 11 (SIGSEGV)",
            extra={"criterion": "crash"},
        )
    )
    for i in range(300):
        rows.append(
            ResultRecord(
                suite=("vectors", "generated", "vts")[i % 3],
                test_id=f"ok/{i}",
                driver="d",
                outcome="PASS" if i % 7 else "SKIP",
                operations=[("ADD", "CONV_2D", "RELU6", "SOFTMAX", "MUL")[i % 5]],
                data_types=[("fp32", "quant8", "fp16")[i % 3]],
            )
        )
    return rows


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("browser") / "report.html"
    write_html(_rows(), path, meta={"status": "complete: 346 of 346 cases", "seed": 1})
    return path


def _dom(browser: str, tmp_path: Path, report: Path, view: str = "") -> str:
    url = report.as_uri() + (f"#{view}" if view else "")
    r = subprocess.run([browser, *_flags(tmp_path), "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert 'data-script="ready"' in r.stdout, "the page's script did not run to its end"
    return r.stdout


def _buckets(dom: str) -> list[tuple[int, bool]]:
    """(count, shown) of each bucket row, in DOM order."""
    out = []
    for m in re.finditer(r'<tr class="bucket"([^>]*)>\s*<td class="num">(\d+)</td>', dom):
        out.append((int(m.group(2)), "display: none" not in m.group(1)))
    return out


def test_buckets_charts_and_matrix_render(tmp_path, report):
    dom = _dom(_browser(), tmp_path, report)
    assert _buckets(dom) == [(40, True), (5, True), (1, True)]
    assert "3 of 3 buckets shown" in dom
    assert len(re.findall(r'<rect class="bar bar-', dom)) >= 6  # per-suite bars, SVG
    assert re.search(r'<rect class="bar bar-bad" data-suite="vectors" data-count="40"', dom)
    # the matrix counts the 40 failures against ADD quant8 only
    assert re.search(r'data-op="ADD" data-type="quant8" title="\d+ pass, 40 fail', dom)
    assert not re.search(r'data-op="CONV_2D" data-type="quant8" title="\d+ pass, [1-9]', dom)
    assert dom.index('id="failures"') < dom.index('id="matrix"')
    # the headline: verdict and driver, red, before everything else (issue #46)
    assert "<title>d: 45 FAIL, 1 CRASH - nnconform report</title>" in dom
    assert re.search(r'<h1 id="verdict" data-verdict="red"><span class="verdict verdict-red">d: 45 FAIL, 1 CRASH<', dom)


def test_text_outcome_and_suite_filters(tmp_path, report):
    browser = _browser()
    dom = _dom(browser, tmp_path, report, "q=relu6")
    assert _buckets(dom) == [(40, False), (5, True), (1, False)] and "1 of 3 buckets shown" in dom
    dom = _dom(browser, tmp_path, report, "q=v1_2/conv_17")  # a test id inside a bucket
    assert [c for c, shown in _buckets(dom) if shown] == [40]
    dom = _dom(browser, tmp_path, report, "outcome=CRASH")
    assert [c for c, shown in _buckets(dom) if shown] == [1]
    dom = _dom(browser, tmp_path, report, "suite=generated")
    assert [c for c, shown in _buckets(dom) if shown] == [5]


def test_sorting_by_a_column(tmp_path, report):
    browser = _browser()
    assert [c for c, _ in _buckets(_dom(browser, tmp_path, report, "sort=1"))] == [1, 5, 40]
    assert [c for c, _ in _buckets(_dom(browser, tmp_path, report, "sort=-1"))] == [40, 5, 1]
    dom = _dom(browser, tmp_path, report, "sort=2")  # by operation name
    assert [c for c, _ in _buckets(dom)] == [40, 5, 1]  # ADD, RELU6, SOFTMAX


def test_screenshot_is_drawn(tmp_path, report):
    shot = tmp_path / "shot.png"
    r = subprocess.run(
        [_browser(), *_flags(tmp_path), f"--screenshot={shot}", "--window-size=1400,2000", report.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 20_000
