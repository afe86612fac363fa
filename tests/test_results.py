"""Result records and the JSON-lines results file (nnconform.verdict.results)."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from nnconform.verdict import results as R
from nnconform.verdict.results import ResultRecord, ResultsWriter, read_results


def rec(i=0, outcome=R.PASS, **kw):
    kw.setdefault("operations", ["ADD"])
    kw.setdefault("data_types", ["fp32"])
    return ResultRecord(suite="generated", test_id=f"add_{i}", driver="reference", outcome=outcome, **kw)


def test_outcome_constants():
    assert R.OUTCOMES == ("PASS", "FAIL", "SKIP", "ERROR", "XFAIL", "XPASS", "SUCCESS", "FAILURE", "HANG", "CRASH")
    assert R.GOOD_OUTCOMES | R.BAD_OUTCOMES | R.SKIPPED_OUTCOMES == set(R.OUTCOMES)
    with pytest.raises(ValueError, match="outcome 'OK'"):
        rec(outcome="OK")
    assert rec(outcome=R.CRASH).bad and rec(outcome=R.SUCCESS).good
    assert not rec(outcome=R.SKIP).bad and not rec(outcome=R.SKIP).good
    # a strict expected failure that passes fails the run; one that fails does not
    assert rec(outcome=R.XPASS).bad and not rec(outcome=R.XFAIL).bad


def test_blamed_operation_round_trips(tmp_path):
    with R.ResultsWriter(tmp_path / "r.jsonl") as w:
        w.write(rec(outcome=R.FAIL, operations=["ADD", "CONV_2D"], blamed_operation="ADD", blamed_data_type="quant8"))
    [back] = R.read_results(tmp_path / "r.jsonl")
    assert (back.blamed_operation, back.blamed_data_type) == ("ADD", "quant8")


def test_round_trip(tmp_path):
    p = tmp_path / "sub" / "results.jsonl"
    records = [
        rec(0, duration_s=0.25, seed=7, message="ok", replay="nnconform replay x.json"),
        rec(
            1,
            R.FAIL,
            spec_path="/tmp/x.json",
            message='bad <b>"x"</b> é',
            extra={"max_ulp": np.int64(5), "err": float("nan"), "arr": np.arange(3)},
        ),
        ResultRecord(
            suite="stress",
            test_id="graph_3",
            driver="d",
            outcome=R.HANG,
            operations=["CONV_2D", "RELU"],
            data_types=["quant8"],
            seed=3,
        ),
    ]
    with ResultsWriter(p) as w:
        w.write_all(records)
    lines = p.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3
    for ln in lines:
        json.loads(ln)  # standard JSON: no NaN tokens
    assert "NaN" not in lines[1]
    back = read_results(p)
    assert [r.test_id for r in back] == ["add_0", "add_1", "graph_3"]
    assert back[0] == records[0]
    assert back[1].message == 'bad <b>"x"</b> é'
    assert back[1].extra == {"max_ulp": 5, "err": "nan", "arr": [0, 1, 2]}
    assert back[2].operations == ["CONV_2D", "RELU"] and back[2].seed == 3
    assert back[2].timestamp == records[2].timestamp


def test_each_write_is_on_disk_immediately(tmp_path):
    p = tmp_path / "results.jsonl"
    w = ResultsWriter(p)
    w.write(rec(0))
    assert len(read_results(p)) == 1  # readable before close
    w.write(rec(1))
    assert len(read_results(p)) == 2
    w.close()
    with pytest.raises(ValueError, match="closed"):
        w.write(rec(2))


@pytest.mark.parametrize("cut", [2, 11, 60])
def test_truncated_last_line_is_dropped(tmp_path, cut):
    p = tmp_path / "results.jsonl"
    with ResultsWriter(p) as w:
        w.write_all([rec(0), rec(1), rec(2)])
    data = p.read_bytes()
    p.write_bytes(data[:-cut])  # the last row loses its tail (and newline)
    back = read_results(p)
    assert [r.test_id for r in back] == ["add_0", "add_1"]


def test_writer_reopens_after_a_kill_without_gluing_lines(tmp_path):
    p = tmp_path / "results.jsonl"
    with ResultsWriter(p) as w:
        w.write_all([rec(0), rec(1)])
    data = p.read_bytes()
    p.write_bytes(data[:-15])  # killed in the middle of row 1
    with ResultsWriter(p) as w:
        w.write(rec(5))
    back = read_results(p)
    assert [r.test_id for r in back] == ["add_0", "add_5"]
    p.write_bytes(b'{"suite": "s", "test_')  # only a partial first line
    with ResultsWriter(p) as w:
        w.write(rec(6))
    assert [r.test_id for r in read_results(p)] == ["add_6"]


def test_bad_line_in_the_middle_raises(tmp_path):
    p = tmp_path / "results.jsonl"
    good = R.record_to_json(rec(0))
    p.write_text(good + "\n" + "{not json\n" + good + "\n")
    with pytest.raises(ValueError, match=r"results.jsonl:2"):
        read_results(p)
    p.write_text(good + "\n" + "[1, 2]\n")  # complete but not a record: not a kill
    with pytest.raises(ValueError, match=r":2: .*list"):
        read_results(p)


def test_unknown_keys_kept_in_extra(tmp_path):
    p = tmp_path / "results.jsonl"
    d = rec(0).to_dict()
    d["future_field"] = {"x": 1}
    d["extra"] = {"a": 2}
    p.write_text(json.dumps(d) + "\n\n")  # blank lines are fine
    (r,) = read_results(p)
    assert r.extra == {"a": 2, "future_field": {"x": 1}}


def test_missing_required_key(tmp_path):
    p = tmp_path / "results.jsonl"
    p.write_text(json.dumps({"suite": "s", "test_id": "t", "driver": "d"}) + "\n")
    with pytest.raises(ValueError, match="lacks outcome"):
        read_results(p)


def test_empty_and_missing_files(tmp_path):
    p = tmp_path / "results.jsonl"
    with pytest.raises(FileNotFoundError):
        read_results(p)
    p.write_text("")
    assert read_results(p) == []


def test_threads_write_whole_lines(tmp_path):
    p = tmp_path / "results.jsonl"
    w = ResultsWriter(p)

    def work(k):
        for j in range(25):
            w.write(rec(k * 100 + j, message="x" * 500))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w.close()
    back = read_results(p)
    assert sorted(r.test_id for r in back) == sorted(f"add_{k * 100 + j}" for k in range(4) for j in range(25))


def _careful_json(r: ResultRecord) -> str:
    # the two-pass path every row took before the fast path existed
    d = json.loads(json.dumps(r.to_dict(), default=R._json_default))
    return json.dumps(R._clean_floats(d), allow_nan=False, ensure_ascii=False)


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"nodeid": "a::b[c]", "n": 3, "f": 0.1, "nested": {"x": [1, 2.5, None, True], 1: "int key", None: "b"}},
        {"t": (1, 2)},
        {"err": float("nan")},
        {"big": float("inf")},
        {"np": np.float32(1.5), "arr": np.arange(3)},
        {"s": {1, 2}},
        {"é": 'ü <b>"x"</b>'},
    ],
)
def test_fast_json_gives_the_careful_paths_text(extra):
    """record_to_json's one-pass fast path writes exactly what the careful path would."""
    r = rec(3, R.FAIL, seed=9, duration_s=1.25, message="m\nx", extra=extra)
    assert R.record_to_json(r) == _careful_json(r)


def test_write_many_is_one_chunk_of_whole_lines(tmp_path):
    p = tmp_path / "r.jsonl"
    with ResultsWriter(p) as w:
        w.write(rec(0))
        assert w.write_many([rec(i) for i in range(1, 50)], sync=True) == 49
        assert w.write_many([]) == 0
        # on disk at once, before close: another reader sees all 50 rows
        assert [r.test_id for r in read_results(p)] == [f"add_{i}" for i in range(50)]


def test_write_many_failing_midway_records_no_row_of_the_chunk(tmp_path, monkeypatch):
    p = tmp_path / "r.jsonl"
    with ResultsWriter(p) as w:
        w.write(rec(0))
        real_write = R.os.write

        def short_then_full(fd, data):  # half the chunk goes out, then the disk is full
            if len(data) > 200:
                return real_write(fd, bytes(data[: len(data) // 2]))
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(R.os, "write", short_then_full)
        with pytest.raises(OSError):
            w.write_many([rec(i) for i in range(1, 10)])
        monkeypatch.setattr(R.os, "write", real_write)
        assert [r.test_id for r in read_results(p)] == ["add_0"]
        w.write(rec(10))
    assert [r.test_id for r in read_results(p)] == ["add_0", "add_10"]
