"""Hostile input: spec files, driver messages and result fields built to break the harness.

Every malformed spec must end ``nnconform validate`` / ``nnconform replay`` with exit status
1 and exactly one short line on stderr (``nnconform: error: FILE: FIELD: reason``), never a
traceback, a memory blow-up or a megabyte of output; driver text must reach the console and
the CSV report defused.
"""

from __future__ import annotations

import csv
import json
import os
import resource
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from nnconform.cli import main
from nnconform.errors import SpecError
from nnconform.ir import ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.ir import spec as spec_module
from nnconform.ir.spec import SpecExample, SpecFile, dumps_spec, loads_spec
from nnconform.reports import write_csv
from nnconform.verdict.results import ResultRecord, ResultsWriter, read_results

MAX_LINE = 300


def relu_doc(meta: dict | None = None) -> dict:
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [2])
    b.operation(Op.RELU, [x], [b.output(T.TENSOR_FLOAT32, [2])])
    ex = SpecExample("e", [np.array([-1, 2], np.float32)], [np.array([0, 2], np.float32)])
    return json.loads(dumps_spec(SpecFile(b.build(), [ex], meta or {"driver": "reference"})))


def relu_text(**replace: str) -> str:
    """A valid spec's JSON text with raw JSON fragments substituted at marked places."""
    text = json.dumps(relu_doc())
    for marker, raw in replace.items():
        text = text.replace(marker, raw, 1)
    return text


def nested(depth: int, leaf: str = "1.0") -> str:
    return "[" * depth + leaf + "]" * depth


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_line_error(rc: int, err: str, *fragments: str) -> None:
    assert rc == 2, err  # bad input is a usage error (nnconform.verdict.outcome.ExitStatus)
    assert err.startswith("nnconform: error: "), err[:500]
    assert err.endswith("\n") and err.count("\n") == 1, err[:500]
    assert len(err) < MAX_LINE, err[:500]
    assert "Traceback" not in err
    for f in fragments:
        assert f in err, err


# ---------------------------------------------------------------------------------------
# Malformed specs: one line on stderr, exit 1, for both validate and replay
# ---------------------------------------------------------------------------------------

BIG = "9" * 5000
HUGE_DIM = "7" * 3000

HOSTILE_TEXTS = {
    # meta.criteria_set must be a string (it is used as a dict key)
    "criteria_set_list": (
        relu_text(**{'"driver": "reference"': '"driver": "reference", "criteria_set": [1, 2]'}),
        ("meta.criteria_set",),
    ),
    "criteria_set_dict": (
        relu_text(**{'"driver": "reference"': '"driver": "reference", "criteria_set": {"a": 1}'}),
        ("meta.criteria_set",),
    ),
    # integers too long for int() (max-str-digits), wherever they are
    "big_int_meta": (relu_text(**{'"driver": "reference"': f'"driver": "reference", "seed": {BIG}'}), ("meta.seed",)),
    "big_int_value": (relu_text(**{"[-1.0, 2.0]": f"[-1.0, {BIG}]"}), ("examples[0].inputs[0][1]",)),
    "big_negative_int": (
        relu_text(**{'"zero_point": 0': f'"zero_point": -{BIG}'}),
        ("model.main.operands[0].zero_point",),
    ),
    "huge_dims": (
        relu_text(**{'"dimensions": [2]': f'"dimensions": [{HUGE_DIM}, {HUGE_DIM}]'}),
        ("model.main.operands[0].dimensions",),
    ),
    "dim_2_31": (
        relu_text(**{'"dimensions": [2]': f'"dimensions": [{2**31}]'}),
        ("model.main.operands[0].dimensions[0]",),
    ),
    "negative_dims": (
        relu_text(**{'"dimensions": [2]': '"dimensions": [-2]'}),
        ("model.main.operands[0].dimensions[0]",),
    ),
    "huge_index": (relu_text(**{'"inputs": [0]': f'"inputs": [{2**64}]'}), ("model.main.operations[0].inputs[0]",)),
    # a scale that does not fit a double
    "scale_int_2_1024": (relu_text(**{'"scale": 0.0': f'"scale": {2**1024}'}), ("model.main.operands[0].scale",)),
    "scale_float_1e400": (relu_text(**{'"scale": 0.0': '"scale": 1e400'}), ("model.main.operands[0].scale",)),
    # deep nesting: tensor values, meta, and deeper than json itself copes with
    "values_900_deep": (relu_text(**{"[-1.0, 2.0]": nested(900)}), ("examples[0].inputs[0]",)),
    "meta_900_deep": (relu_text(**{'"driver": "reference"': f'"driver": {nested(900, "0")}'}), ("meta.driver",)),
    "json_100000_deep": (relu_text(**{'"driver": "reference"': f'"driver": {nested(100000, "0")}'}), ("nest",)),
    # duplicate keys: named, with their path
    "duplicate_top_key": (relu_text(**{'"version": 1': '"version": 1, "version": 1'}), ("'version'",)),
    "duplicate_operand_key": (
        relu_text(**{'"scale": 0.0': '"scale": 0.0, "scale": 1.0'}),
        ("model.main.operands[0]", "'scale'"),
    ),
    "duplicate_meta_key": (
        relu_text(**{'"driver": "reference"': '"driver": "a", "driver": "b"'}),
        ("meta", "'driver'"),
    ),
    # values shown in a message are bounded, and so is the message
    "megabyte_type_name": (
        relu_text(**{'"type": "TENSOR_FLOAT32"': '"type": "' + "A" * 1_000_000 + '"'}),
        ("model.main.operands[0].type",),
    ),
    "megabyte_field_name": (
        relu_text(**{'"scale": 0.0': '"' + "k" * 1_000_000 + '": 0.0'}),
        ("model.main.operands[0]",),
    ),
    "megabyte_lifetime_list": (
        relu_text(**{'"lifetime": "SUBGRAPH_INPUT"': '"lifetime": [' + "1," * 500_000 + "1]"}),
        ("model.main.operands[0].lifetime",),
    ),
    "escape_in_type_name": (
        relu_text(**{'"type": "TENSOR_FLOAT32"': '"type": "\\u001b[2J\\u001b]0;pwned\\u0007X"'}),
        ("model.main.operands[0].type",),
    ),
    "megabyte_meta_key": (
        relu_text(**{'"driver": "reference"': '"driver": "r", "' + "m" * 1_000_000 + '": ' + BIG}),
        ("meta.",),
    ),
}


@pytest.mark.parametrize("command", ["validate", "replay"])
@pytest.mark.parametrize("case", sorted(HOSTILE_TEXTS))
def test_hostile_spec_is_one_line_error(tmp_path, monkeypatch, capsys, command, case):
    text, fragments = HOSTILE_TEXTS[case]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.json").write_text(text)
    rc, out, err = run_cli(capsys, command, "bad.json")
    assert_one_line_error(rc, err, "nnconform: error: bad.json: ", *fragments)
    assert "\x1b" not in err and "\x07" not in err
    assert out == ""


def test_loader_raises_spec_error_for_every_hostile_text():
    for case, (text, _) in HOSTILE_TEXTS.items():
        for validate in (True, False):
            with pytest.raises(SpecError):
                loads_spec(text, validate=validate)


def test_large_numbers_that_fit_still_load():
    text = relu_text(**{'"driver": "reference"': f'"driver": "reference", "seed": {2**64}, "big": 1e300'})
    spec = loads_spec(text)
    assert spec.meta["seed"] == 2**64 and spec.meta["big"] == 1e300


def test_spec_from_dict_bounds_numbers_not_parsed_from_json():
    doc = relu_doc()
    doc["model"]["main"]["operands"][0]["scale"] = 2**1024
    with pytest.raises(SpecError, match=r"model\.main\.operands\[0\]\.scale"):
        spec_module.spec_from_dict(doc)
    doc = relu_doc()
    doc["model"]["main"]["operands"][0]["dimensions"] = [-1]
    with pytest.raises(SpecError, match=r"model\.main\.operands\[0\]\.dimensions\[0\]"):
        spec_module.spec_from_dict(doc, validate=False)


# ---------------------------------------------------------------------------------------
# Files that are not spec files: refused before reading
# ---------------------------------------------------------------------------------------


def _limited_cli(*args: str, cwd, timeout: float = 120) -> subprocess.CompletedProcess:
    """The CLI in a child limited to 1 GiB of address space: a reader that slurps /dev/zero
    fails fast there instead of eating the machine."""

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    code = "import sys; from nnconform.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout, preexec_fn=limit, cwd=cwd
    )


@pytest.mark.parametrize("command", ["validate", "replay"])
def test_device_file_is_refused_before_reading(tmp_path, command):
    r = _limited_cli(command, "/dev/zero", cwd=tmp_path)
    assert_one_line_error(r.returncode, r.stderr, "/dev/zero", "not a regular file")


@pytest.mark.parametrize("command", ["validate", "replay"])
def test_fifo_and_directory_are_refused(tmp_path, command):
    os.mkfifo(tmp_path / "pipe")  # opening it for reading would block forever: run in a child
    (tmp_path / "folder").mkdir()
    for name in ("pipe", "folder"):
        r = _limited_cli(command, name, cwd=tmp_path, timeout=60)
        assert_one_line_error(r.returncode, r.stderr, f"nnconform: error: {name}: ", "not a regular file")


@pytest.mark.parametrize("command", ["validate", "replay"])
def test_oversized_file_is_refused(tmp_path, monkeypatch, capsys, command):
    monkeypatch.chdir(tmp_path)
    text = relu_text()
    monkeypatch.setattr(spec_module, "MAX_SPEC_BYTES", len(text.encode()) - 1)
    (tmp_path / "big.json").write_text(text)
    rc, _, err = run_cli(capsys, command, "big.json")
    assert_one_line_error(rc, err, "nnconform: error: big.json: ", "larger than")
    monkeypatch.setattr(spec_module, "MAX_SPEC_BYTES", len(text.encode()))
    assert run_cli(capsys, "validate", "big.json")[0] == 0


def test_at_most_cap_plus_one_bytes_are_read_whatever_stat_says(monkeypatch):
    """/proc files are regular files that stat as 0 bytes: the cap holds on what is read."""
    monkeypatch.setattr(spec_module, "MAX_SPEC_BYTES", 64)
    with pytest.raises(SpecError, match="larger than 64 bytes"):
        spec_module.load_spec("/proc/self/maps")


# ---------------------------------------------------------------------------------------
# Replay of a spec with nothing to replay
# ---------------------------------------------------------------------------------------


def test_replay_of_spec_without_examples_fails(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    doc = relu_doc()
    doc["examples"] = []
    (tmp_path / "empty.json").write_text(json.dumps(doc))
    rc, _, err = run_cli(capsys, "replay", "empty.json")
    assert_one_line_error(rc, err, "nnconform: error: empty.json: ", "no examples to replay")
    del doc["examples"]
    (tmp_path / "empty.json").write_text(json.dumps(doc))
    rc, _, err = run_cli(capsys, "replay", "empty.json")
    assert_one_line_error(rc, err, "no examples to replay")
    assert run_cli(capsys, "validate", "empty.json")[0] == 0  # a model-only spec is valid


# ---------------------------------------------------------------------------------------
# Driver text on the console
# ---------------------------------------------------------------------------------------


def test_clean_text_strips_escape_sequences_and_controls():
    from nnconform.textsafe import clean_text

    s = "a\x1b[31mred\x1b[0m b\x1b]0;title\x07c\x1b]8;;http://x\x1b\\d\x1bPq\x1b\\e\x00\x08\r\x7f\x9b2Jf\tg\nh\x1b"
    assert clean_text(s) == "ared bcde" + "f\tg\nh"
    assert clean_text("plain: ok, ünïcødé 1.5e-3") == "plain: ok, ünïcødé 1.5e-3"


ANSI_DRIVER = """
from nnconform.drivers.reference import ReferenceDevice

NASTY = "\\x1b[2J\\x1b]0;pwned\\x07\\x1b[31mboom\\x1b[0m\\rhidden\\x00" + "y" * 5000


class Dev(ReferenceDevice):
    name = "ansi"

    def prepare(self, model, **kw):
        raise RuntimeError(NASTY)
"""


def test_replay_cleans_driver_messages(tmp_path, monkeypatch, capsys):
    (tmp_path / "ansi_driver.py").write_text(ANSI_DRIVER)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    monkeypatch.chdir(tmp_path)
    doc = relu_doc({"driver": "\x1b[31mred", "message": "recorded \x1b]0;t\x07" + "z" * 100_000})
    (tmp_path / "s.json").write_text(json.dumps(doc))
    rc, out, err = run_cli(capsys, "replay", "s.json", "--driver", "ansi_driver:Dev")
    assert rc == 1, err
    assert "FAIL" in out and "boom" in out
    assert not any(c in out for c in "\x1b\x07\x00\r"), repr(out[:300])
    assert len(out) < 6000


def test_plugin_failure_message_is_cleaned_and_bounded(tmp_path):
    (tmp_path / "test_nasty.py").write_text(
        textwrap.dedent("""
        import numpy as np
        from nnconform.ir import ModelBuilder, OperandType as T, OperationType as Op
        from nnconform.verdict.runner import Case, CaseOutcome

        def test_nasty(nn_session, nn_record):
            b = ModelBuilder()
            x = b.input(T.TENSOR_FLOAT32, [1])
            b.operation(Op.RELU, [x], [b.output(T.TENSOR_FLOAT32, [1])])
            outcome = CaseOutcome("FAIL", "\\x1b[2J\\x1b]0;pwned\\x07\\x1b[31mboom\\x1b[0m\\x00" + "y" * 100000,
                                  "execute")
            case = Case("nasty", b.build(), [np.ones(1, np.float32)], [np.ones(1, np.float32)])
            nn_session.conclude(nn_record, outcome, case)
    """)
    )
    report = tmp_path / "report"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "test_nasty.py",
            "-q",
            "-p",
            "no:cacheprovider",
            "--nn-report-dir",
            str(report),
            "--nn-seed",
            "1",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    assert "boom" in r.stdout
    assert not any(c in r.stdout for c in "\x1b\x07\x00"), repr(r.stdout[:500])
    assert len(r.stdout) < 20_000
    (row,) = read_results(report / "results.jsonl")
    assert row.outcome == "FAIL" and "boom" in row.message and "\x1b" not in row.message
    assert len(row.message) <= 2100


# ---------------------------------------------------------------------------------------
# CSV formula injection
# ---------------------------------------------------------------------------------------

FORMULAS = ['=HYPERLINK("http://evil","x")', "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A9)", "\t=1+1", "\r=1+1"]


def test_csv_neutralises_formulas_but_keeps_numbers(tmp_path):
    recs = [
        ResultRecord(
            suite="s",
            test_id=f,
            driver=f,
            outcome="FAIL",
            operations=[f],
            message=f,
            replay=f,
            duration_s=-1.5,
            seed=-7,
        )
        for f in FORMULAS
    ]
    recs.append(
        ResultRecord(suite="s", test_id="plain", driver="ref", outcome="PASS", message="ok -1", duration_s=0.25, seed=3)
    )
    with ResultsWriter(tmp_path / "results.jsonl") as w:
        w.write_all(recs)
    p = write_csv(recs, tmp_path / "results.csv")
    with open(p, newline="") as fh:
        rows = list(csv.DictReader(fh))
    for f, row in zip(FORMULAS, rows):
        for col in ("test_id", "driver", "operations", "message", "replay"):
            assert row[col] == "'" + f, (col, row[col])
        assert row["duration_s"] == "-1.5" and row["seed"] == "-7"
    assert rows[-1]["test_id"] == "plain" and rows[-1]["message"] == "ok -1"
    assert rows[-1]["duration_s"] == "0.25" and rows[-1]["seed"] == "3"
    # the journal keeps the true values
    back = read_results(tmp_path / "results.jsonl")
    assert [r.test_id for r in back[: len(FORMULAS)]] == FORMULAS
    assert [r.message for r in back[: len(FORMULAS)]] == FORMULAS
