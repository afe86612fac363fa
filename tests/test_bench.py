"""nnconform bench: rows, accuracy numbers, CSV/HTML, a crashing driver isolated.  Speed is
never asserted: only that numbers exist and are consistent."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from helpers import double

from nnconform.bench import CSV_COLUMNS, BenchRow, accuracy, latency_stats, run_bench, write_csv, write_html
from nnconform.cli import main
from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.models import ModelEntry, builtin_entries


def _floor_entry() -> ModelEntry:
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [1, 4])
    b.operation(Op.FLOOR, [x], [b.output(T.TENSOR_FLOAT32, [1, 4])])
    m = b.build()
    return ModelEntry(
        "floor",
        "builtin",
        False,
        "test",
        lambda: m,
        lambda model, seed: [np.random.default_rng(seed).normal(size=(1, 4)).astype(np.float32)],
    )


def test_reference_bench_rows_csv_and_html(tmp_path):
    entry = builtin_entries()["mobilenet_v1_quant8"]
    rows = run_bench(
        ["reference"],
        [entry],
        warmup=1,
        iterations=4,
        inputs_count=2,
        seed=3,
        percentile=50.0,
        golden_root=tmp_path,
        log=lambda *a: None,
    )
    (r,) = rows
    assert r.status == "OK", r.message
    # 4 asked, but p50 needs 11 queries by the early-stopping rule
    assert r.iterations == 11 and len(r.latencies_ms) == 11 and r.testset_size == 2 and r.min_queries == 11
    assert r.min_ms <= r.p50_ms <= r.p90_ms <= r.p99_ms <= r.max_ms
    assert r.max_single_error == 0.0 and r.mse == 0.0 and r.top1_agreement == 1.0 and r.top5_agreement == 1.0
    assert r.compile_without_cache_ms is not None
    write_csv(rows, tmp_path / "bench.csv")
    write_html(rows, tmp_path / "bench.html", {"seed": 3})
    with open(tmp_path / "bench.csv") as f:
        got = list(csv.DictReader(f))
    assert list(got[0]) == CSV_COLUMNS and got[0]["model"] == "mobilenet_v1_quant8"
    page = (tmp_path / "bench.html").read_text()
    assert (
        page.count("<svg") >= 5
        and "<script" not in page
        and "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    )


def test_a_crashing_driver_is_a_row_and_the_bench_goes_on(tmp_path):
    rows = run_bench(
        [double("broken_isolation", "Segfault")],
        [_floor_entry(), builtin_entries()["mobilenet_v1_float"]],
        warmup=0,
        iterations=2,
        inputs_count=1,
        percentile=50.0,
        call_timeout=60,
        golden_root=tmp_path,
        log=lambda *a: None,
    )
    assert [r.status for r in rows] == ["CRASH", "OK"]
    assert "execute" in rows[0].message and "liveness OK" in rows[0].message


def test_a_driver_that_leaves_processes_running_fails_its_row(tmp_path):
    """The children a driver leaves behind are killed after each model and fail that row (as in
    the suites); the bench goes on, and a model that spawned nothing is OK."""
    rows = run_bench(
        [double("broken_isolation", "SetsidChild")],
        [_floor_entry(), builtin_entries()["mobilenet_v1_float"]],
        warmup=0,
        iterations=2,
        inputs_count=1,
        percentile=50.0,
        call_timeout=60,
        golden_root=tmp_path,
        log=lambda *a: None,
    )
    assert [r.status for r in rows] == ["FAIL", "OK"], [(r.status, r.message) for r in rows]
    assert "left" in rows[0].message and "sleep" in rows[0].message
    assert rows[0].iterations == 11  # its numbers are kept; the status says what went wrong


def test_accuracy_numbers():
    b = ModelBuilder()
    x = b.input(T.TENSOR_QUANT8_ASYMM, [1, 6], scale=0.5, zero_point=10)
    b.operation(Op.RELU, [x], [b.output(T.TENSOR_QUANT8_ASYMM, [1, 6], scale=0.5, zero_point=10)])
    m = b.build()
    exp = [[np.array([[10, 20, 30, 40, 50, 60]], np.uint8)]]
    same = accuracy(m, exp, exp, classifier=True)
    assert same == {"max_single_error": 0.0, "mse": 0.0, "top1_agreement": 1.0, "top5_agreement": 1.0}
    act = [[np.array([[60, 20, 30, 40, 50, 59]], np.uint8)]]  # reference's best (index 5) is second here
    got = accuracy(m, exp, act, classifier=True)
    assert got["max_single_error"] == pytest.approx(25.0) and got["top1_agreement"] == 0.0
    assert got["top5_agreement"] == 1.0
    assert got["mse"] == pytest.approx((25.0**2 + 0.5**2) / 6)
    assert accuracy(m, exp, act, classifier=False)["top1_agreement"] is None


def test_latency_stats():
    s = latency_stats([1.0, 2.0, 3.0, 4.0])
    assert s["mean_ms"] == 2.5 and s["p50_ms"] == 2.5 and s["min_ms"] == 1.0 and s["total_time_sec"] == 0.01
    assert latency_stats([]) == {}


def test_unsupported_and_failing_rows_render(tmp_path):
    rows = [BenchRow("m", "d1", "UNSUPPORTED", "unsupported: FLOOR"), BenchRow("m", "d2", "CRASH", "boom <b>")]
    write_html(rows, tmp_path / "b.html", {})
    page = (tmp_path / "b.html").read_text()
    assert "boom &lt;b&gt;" in page and "d1: UNSUPPORTED" in page and "d2: CRASH" in page


def test_cli_bench_usage_errors(tmp_path, capsys):
    assert main(["bench", "--models", "no_such_model", "--report-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown model" in err
    assert main(["bench", "--iterations", "0", "--models", "builtin", "--report-dir", str(tmp_path)]) == 2
    capsys.readouterr()
    # a misspelt driver, even after a good one, is one line before anything runs or is written
    out = tmp_path / "typo"
    assert (
        main(
            ["bench", "--driver", "reference", "--driver", "refrence", "--models", "builtin", "--report-dir", str(out)]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown driver 'refrence'" in err and "installed:" in err
    assert not out.exists()


def test_cli_bench_reference_writes_files(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # golden outputs go there
    import os

    out = tmp_path / "b"
    env_before = os.environ.get("NNCONFORM_JIT")
    code = main(
        [
            "bench",
            "--driver",
            "reference",
            "--models",
            "mobilenet_v2_float",
            "--warmup",
            "0",
            "--iterations",
            "2",
            "--percentile",
            "50",
            "--inputs",
            "1",
            "--report-dir",
            str(out),
        ]
    )
    assert code == 0
    assert (out / "bench.csv").exists() and (out / "bench.html").exists()
    assert "mobilenet_v2_float" in capsys.readouterr().out
    import importlib.util

    # the page says which kernels the reference (the accuracy baseline) ran: compiled ones
    # when numba is installed and NNCONFORM_JIT does not say otherwise
    compiled = importlib.util.find_spec("numba") is not None and env_before in (None, "1")
    page = (out / "bench.html").read_text()
    assert ("reference kernels: compiled kernels (numba " if compiled else "reference kernels: numpy only (") in page
    # the command turned them on for itself only: what runs after it in this process (and its
    # children) does not compile unasked
    assert os.environ.get("NNCONFORM_JIT") == env_before
