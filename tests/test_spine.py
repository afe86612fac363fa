"""The spine every command stands on: one option table, one outcome type and exit-status
table, one artifact contract (nnconform.cli.options, nnconform.verdict.outcome,
nnconform.artifacts)."""

from __future__ import annotations

import json

import pytest

from nnconform.artifacts import ARTIFACTS, missing
from nnconform.cli import build_parser, main
from nnconform.cli.options import (
    COMMAND_OPTIONS,
    OPTIONS,
    format_duration,
    format_size,
    parse_duration,
    parse_size,
    pytest_args,
)
from nnconform.verdict.outcome import EXIT_STATUS_MEANING, ExitStatus, Outcome
from nnconform.verdict.results import ResultRecord

# ---- values --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, size",
    [
        ("4G", 4 << 30),
        ("512M", 512 << 20),
        ("1.5g", 3 << 29),
        ("0", 0),
        ("none", 0),
        ("4294967296", 4 << 30),
        ("64KiB", 64 << 10),
    ],
)
def test_sizes(text, size):
    assert parse_size(text) == size
    assert parse_size(format_size(size)) == size


@pytest.mark.parametrize(
    "text, seconds", [("90s", 90), ("30m", 1800), ("2h", 7200), ("1h30m", 5400), ("0.5", 0.5), ("45", 45)]
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds
    assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize("bad", ["", "soon", "0", "0s", "0m", "-5", "nan", "inf", "-inf", "1e999", "5x", "1m-"])
def test_bad_durations_are_refused(bad):
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(bad)


@pytest.mark.parametrize("bad", ["", "lots", "4X", "-1G"])
def test_bad_sizes_are_refused(bad):
    with pytest.raises(ValueError, match="not a size"):
        parse_size(bad)


# ---- one table, every command --------------------------------------------------------------


def _subparser(name: str):
    p = build_parser()
    return p._subparsers._group_actions[0].choices[name]


@pytest.mark.parametrize("command", sorted(COMMAND_OPTIONS))
def test_every_command_takes_its_shared_options_with_one_syntax(command):
    sp = _subparser(command)
    by_flag = {s: a for a in sp._actions for s in a.option_strings}
    for name in COMMAND_OPTIONS[command]:
        assert name in by_flag, f"{command} lacks {name}"
        opt = OPTIONS[name]
        action = by_flag[name]
        if opt.kind.name != "flag":
            assert action.metavar == opt.metavar, (command, name)
            assert action.type.opt is opt, f"{command} {name} is not parsed by the table's parser"


def test_sizes_and_durations_parse_the_same_in_every_command(tmp_path):
    for command in COMMAND_OPTIONS:
        for name, text, value in (
            ("--mem-limit", "2G", 2 << 30),
            ("--call-timeout", "2m", 120.0),
            ("--budget", "90s", 90.0),
        ):
            if name not in COMMAND_OPTIONS[command]:
                continue
            args = [command, name, text] + (["spec.json"] if command in ("replay", "import") else [])
            a = build_parser().parse_args(args)
            assert getattr(a, OPTIONS[name].dest) == value, (command, name)


def test_defaults_differ_only_where_the_table_says_why():
    p = {c: build_parser().parse_args([c] + (["x"] if c in ("replay", "import") else [])) for c in COMMAND_OPTIONS}
    assert {c: p[c].mem_limit for c in p if "--mem-limit" in COMMAND_OPTIONS[c]} == dict.fromkeys(
        [c for c in p if "--mem-limit" in COMMAND_OPTIONS[c]], 4 << 30
    )
    timeouts = {c: p[c].call_timeout for c in p if "--call-timeout" in COMMAND_OPTIONS[c]}
    assert timeouts.pop("fuzz") == 5.0 and set(timeouts.values()) == {60.0}


def test_the_old_out_dir_spelling_still_works_and_warns(capsys):
    a = build_parser().parse_args(["bench", "--out-dir", "somewhere"])
    assert a.report_dir == "somewhere"
    assert "--out-dir is deprecated; use --report-dir" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["stress", "--mem-limit", "lots"],
        ["run", "--call-timeout", "0"],
        ["fuzz", "--budget", "soon"],
        ["bench", "--seed", "-1"],
        ["run", "-n", "0"],
        ["no-such-command"],
    ],
)
def test_a_bad_option_is_one_line_and_exit_status_2(argv, capsys):
    assert main(argv) == ExitStatus.USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("nnconform: error: "), err


def test_every_help_prints_the_exit_status_table(capsys):
    commands = [None, *build_parser()._subparsers._group_actions[0].choices]
    for c in commands:
        with pytest.raises(SystemExit):
            main(([c] if c else []) + ["--help"])
        out = capsys.readouterr().out
        for code, text in EXIT_STATUS_MEANING.items():
            assert f"  {int(code)}  {text}" in out, (c, code)


def test_pytest_gets_the_canonical_text_of_each_value():
    assert pytest_args(
        {"--mem-limit": 2 << 30, "--call-timeout": 90.0, "--resume": True, "--in-process": False, "--seed": None}
    ) == ["--nn-mem-limit", "2G", "--nn-call-timeout", "90s", "--nn-resume"]


# ---- outcomes ------------------------------------------------------------------------------


def test_outcome_is_one_type_that_reads_and_writes_as_its_name():
    r = ResultRecord(suite="s", test_id="t", driver="d", outcome="HANG")
    assert r.outcome is Outcome.HANG and f"{r.outcome}" == "HANG" and json.dumps(r.outcome) == '"HANG"'
    assert ResultRecord.from_dict(json.loads(json.dumps(r.to_dict()))).outcome is Outcome.HANG
    with pytest.raises(ValueError, match="not one of"):
        ResultRecord(suite="s", test_id="t", driver="d", outcome="MAYBE")


def test_stress_words_map_in_one_place():
    assert Outcome.SUCCESS.conformance() is Outcome.PASS and Outcome.FAILURE.conformance() is Outcome.FAIL
    assert Outcome.CRASH.conformance() is Outcome.CRASH
    assert [o.pytest_outcome() for o in (Outcome.PASS, Outcome.XFAIL, Outcome.XPASS, Outcome.HANG)] == [
        "passed",
        "skipped",
        "failed",
        "failed",
    ]


def test_exit_status_of_outcomes():
    assert ExitStatus.of(["PASS", "SKIP", "XFAIL"]) is ExitStatus.CLEAN
    assert ExitStatus.of(["PASS", "XPASS"]) is ExitStatus.FAILURES
    assert ExitStatus.of(["FAIL"], complete=False) is ExitStatus.INCOMPLETE


# ---- one artifact set ----------------------------------------------------------------------


def _check_artifacts(d, code):
    assert not missing(d), f"{d} lacks {missing(d)}"
    run = json.loads((d / "run.json").read_text())
    assert run["exit_status"] == code and run.get("status")
    summary = json.loads((d / "summary.json").read_text())
    assert summary["status"]
    assert (d / "report.html").read_text().lstrip().lower().startswith("<!doctype html")


@pytest.mark.parametrize(
    "argv, code",
    [
        (["fuzz", "--cases", "8", "--seed", "3"], 0),
        (["stress", "--budget", "15s", "--tests", "random-model-load", "--seed", "3"], 0),
        (["bench", "--models", "mobilenet_v1_float", "--warmup", "0", "--iterations", "1", "--inputs", "1"], 0),
        (["run", "--suite", "generated", "--seed", "3", "--", "-k", "RELU and fp32 and rank1"], 0),
    ],
    ids=["fuzz", "stress", "bench", "run"],
)
def test_every_command_that_runs_cases_writes_the_same_artifacts(tmp_path, argv, code, capsys):
    d = tmp_path / "out"
    split = argv.index("--") if "--" in argv else len(argv)
    assert main([*argv[:split], "--report-dir", str(d), *argv[split:]]) == code, capsys.readouterr()
    _check_artifacts(d, code)
    assert set(ARTIFACTS) <= {p.name for p in d.iterdir()}


def test_the_old_driver_support_module_still_imports_with_a_warning():
    import importlib
    import sys

    from nnconform.driver import support

    sys.modules.pop("nnconform.driver_support", None)
    with pytest.warns(DeprecationWarning, match="nnconform.driver.support"):
        old = importlib.import_module("nnconform.driver_support")
    assert old is support
