"""The one option table: every option more than one command takes, declared once.

Each :class:`SharedOption` has one spelling, one syntax and one unit: sizes are written like
``4G`` / ``512M`` (a plain number is bytes, 0 means no limit), durations like ``90s`` / ``30m``
/ ``1h30m`` (a plain number is seconds).  The same entry feeds the ``nnconform`` command line
(:func:`add_options`) and the pytest plugin (:func:`add_pytest_options`), with the same parser,
so a value is checked once, by one function, whichever way it arrives; ``nnconform run``
hands its parsed values to pytest in their canonical text (:func:`pytest_args`).

Old spellings stay for one release as aliases that still work and print a warning.

Per-command differences are in the table too (``defaults``), each with its reason in the help:
the fuzzer's short call bound, and the report directory each command writes by default.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

# ---- value syntax --------------------------------------------------------------------------

_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0}


def parse_size(text: object) -> int:
    """'4G', '512M', '1.5g', '4294967296' -> bytes; '0' or 'none' -> 0 (no limit)."""
    t = str(text).strip().lower()
    if t in ("0", "none", "off", "unlimited"):
        return 0
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?", t)
    if not m:
        raise ValueError(f"not a size: {text!r} (examples: 4G, 512M, 0 for no limit)")
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2)])


def format_size(n: int) -> str:
    """The canonical text of a size (what parse_size reads back to the same number)."""
    if n == 0:
        return "0"
    for unit in ("T", "G", "M", "K"):
        step = _SIZE_UNITS[unit.lower()]
        if n % step == 0:
            return f"{n // step}{unit}"
    return str(n)


def parse_duration(text: object) -> float:
    """'90s', '30m', '2h', '1h30m', '0.5' -> seconds.  Positive and finite: a zero budget or
    bound would run nothing, or call everything a HANG."""
    t = str(text).strip().lower()
    bad = ValueError(f"not a duration: {text!r} (a positive duration such as 90s, 30m, 2h, 1h30m)")
    try:
        total = float(t)
    except ValueError:
        parts = re.fullmatch(r"((?:\d+(?:\.\d+)?[hms])+)", t)
        if not parts:
            raise bad from None
        total = sum(float(num) * _DURATION_UNITS[unit] for num, unit in re.findall(r"(\d+(?:\.\d+)?)([hms])", t))
    if not (math.isfinite(total) and total > 0):
        raise bad
    return total


def format_duration(seconds: float) -> str:
    return f"{seconds:g}s"


def parse_seed(text: object) -> int:
    try:
        seed = int(str(text))
    except ValueError:
        raise ValueError(f"not a seed: {text!r} (a whole number >= 0)") from None
    if seed < 0:
        raise ValueError(f"not a seed: {text!r} (a whole number >= 0)")
    return seed


def parse_positive_int(text: object) -> int:
    try:
        n = int(str(text))
    except ValueError:
        raise ValueError(f"not a whole number: {text!r}") from None
    if n < 1:
        raise ValueError(f"must be at least 1, not {n}")
    return n


def parse_shard(text: object) -> tuple[int, int]:
    from nnconform.cases.exhaustive import parse_shard as parse

    return parse(text)


def format_shard(spec: tuple[int, int]) -> str:
    return f"{spec[0]}/{spec[1]}"


def _text(text: object) -> str:
    return str(text)


def parse_percentile(text: object) -> float:
    """A percentile strictly between 0 and 100 (90, 99, 99.9)."""
    try:
        v = float(str(text).strip().rstrip("%").lstrip("pP"))
    except ValueError:
        raise ValueError(f"{text!r} is not a percentile (e.g. 90, 99, 99.9)") from None
    if not 0.0 < v < 100.0:
        raise ValueError(f"percentile {text!r} must be above 0 and below 100")
    return v


@dataclass(frozen=True)
class Kind:
    """A value syntax: how text becomes a value and back."""

    name: str
    parse: Callable[[object], Any]
    format: Callable[[Any], str] = str


SIZE = Kind("size", parse_size, format_size)
DURATION = Kind("duration", parse_duration, format_duration)
SEED = Kind("seed", parse_seed)
COUNT = Kind("count", parse_positive_int)
TEXT = Kind("text", _text)
PERCENTILE = Kind("percentile", parse_percentile, lambda v: f"{v:g}")
FLAG = Kind("flag", bool)
SHARD = Kind("shard", parse_shard, format_shard)


@dataclass(frozen=True)
class SharedOption:
    name: str  # the spelling, e.g. "--report-dir"
    kind: Kind
    help: str
    default: Any = None  # parsed value; None: the command decides (said in help)
    defaults: dict[str, Any] = field(default_factory=dict)  # per command, with the reason in help
    metavar: str | None = None
    short: str | None = None  # e.g. "-n"
    aliases: tuple[str, ...] = ()  # old spellings: accepted for one release, with a warning
    pytest_name: str | None = None  # the pytest plugin's spelling, if the plugin takes it
    repeat: bool = False  # may be given more than once (a list)

    @property
    def dest(self) -> str:
        return self.name.lstrip("-").replace("-", "_")

    def default_for(self, command: str) -> Any:
        return self.defaults.get(command, self.default)


OPTIONS: dict[str, SharedOption] = {
    o.name: o
    for o in [
        SharedOption(
            "--driver",
            TEXT,
            "driver under test: an installed name (`nnconform drivers`), "
            "module:attribute, or path/to/file.py:attribute (default: replay and --resume take the "
            "recorded driver, other commands the bundled reference, and say so)",
            default="reference",
            metavar="DRIVER",
            pytest_name="--driver",
        ),
        SharedOption(
            "--report-dir",
            TEXT,
            "directory the run's artifacts go to (run.json, results.jsonl, results.csv, summary.json, report.html)",
            default="nnconform-report",
            defaults={"stress": "nnconform-stress", "fuzz": "nnconform-fuzz", "bench": "nnconform-bench"},
            metavar="DIR",
            aliases=("--out-dir",),
            pytest_name="--nn-report-dir",
        ),
        SharedOption(
            "--seed",
            SEED,
            "seed of everything random (default: a new one, printed and recorded; "
            "bench, probe and import default to 0 so that their inputs repeat)",
            defaults={"bench": 0, "probe": 0, "import": 0},
            metavar="N",
            pytest_name="--nn-seed",
        ),
        SharedOption(
            "--call-timeout",
            DURATION,
            "how long one driver call may take before the case is a HANG "
            "(default 60s; fuzz 5s: its models are tiny, and a hang found costs the budget it waits)",
            default=60.0,
            defaults={"fuzz": 5.0},
            metavar="DURATION",
            pytest_name="--nn-call-timeout",
        ),
        SharedOption(
            "--probe-timeout",
            DURATION,
            "how long one driver call of the capability probe may take before its operation and data type "
            "are quarantined as a HANG (default 5s: the probe's models have one tiny operation)",
            default=5.0,
            metavar="DURATION",
            pytest_name="--nn-probe-timeout",
        ),
        SharedOption(
            "--reprobe",
            FLAG,
            "probe the driver again instead of reusing the capability matrix cached in --report-dir "
            "(a cached matrix is reused only for the same driver files, version, harness and probe settings)",
            pytest_name="--nn-reprobe",
        ),
        SharedOption(
            "--mem-limit",
            SIZE,
            "memory limit (RLIMIT_AS) of each driver host or stress worker: 4G, 512M, 0 for none (default 4G)",
            default=4 << 30,
            metavar="SIZE",
            pytest_name="--nn-mem-limit",
        ),
        SharedOption(
            "--budget",
            DURATION,
            "wall-clock budget of the run: 90s, 30m, 2h (default: stress 30m, fuzz 10m unless --cases)",
            defaults={"stress": 1800.0},
            metavar="DURATION",
        ),
        SharedOption(
            "--workers",
            COUNT,
            "cases run in parallel (processes for run, sandboxes for stress; default 1)",
            short="-n",
            metavar="N",
        ),
        SharedOption(
            "--resume",
            FLAG,
            "continue the interrupted run recorded in --report-dir, with its recorded driver, seed and selection",
            pytest_name="--nn-resume",
        ),
        SharedOption(
            "--in-process",
            FLAG,
            "load the driver into this process instead of a driver host "
            "(debugging under pdb; a crash or hang of the driver then ends or stalls the command)",
            pytest_name="--nn-in-process",
        ),
        SharedOption(
            "--shard",
            SHARD,
            "run the i-th of n interleaved shards of the exhaustive suite's sweeps, e.g. 3/8 "
            "(nightly machines split the full sweep; other suites are not sharded)",
            metavar="I/N",
            pytest_name="--nn-shard",
        ),
        SharedOption(
            "--cluster",
            TEXT,
            "run the cases on a Dask cluster: a scheduler address "
            "(tcp://host:8786) or local:N (N worker processes here); needs the [cluster] extra",
            metavar="ADDRESS",
        ),
        SharedOption(
            "--worker-resources",
            TEXT,
            "with --cluster: run cases only on workers started with these resources, e.g. device=1",
            metavar="NAME=N[,...]",
        ),
        SharedOption(
            "--scenario",
            TEXT,
            "which scenarios run: single-stream (latency percentiles), offline (throughput), "
            "comma-separated (default: both)",
            metavar="NAME[,NAME]",
        ),
        SharedOption(
            "--percentile",
            PERCENTILE,
            "the latency percentile the query count must support (MLPerf's early-stopping rule: 64 "
            "queries for 90, 662 for 99) and baselines compare (default 90)",
            default=90.0,
            metavar="P",
        ),
        SharedOption(
            "--min-duration",
            DURATION,
            "single-stream runs at least this long per model, beyond the query count (default 0s)",
            default=0.0,
            metavar="DURATION",
        ),
        SharedOption(
            "--baseline",
            TEXT,
            "an earlier bench report directory, or one of this run's --driver names: PASS / "
            "PASS_WITH_WARNING / FAIL per model and metric (latency, start-up, memory, accuracy; "
            "thresholds in docs/benchmark.md)",
            metavar="DIR|DRIVER",
        ),
        SharedOption(
            "--must-accelerate",
            TEXT,
            "file of 'DRIVER-PATTERN MODEL-PATTERN [FEATURE-LEVEL]' lines: models that must run wholly "
            "on the driver (one that falls back fails the gate)",
            metavar="FILE",
        ),
    ]
}

# Which shared options each command takes.  A new shared option goes into OPTIONS and here,
# never into one command's parser alone.
COMMAND_OPTIONS: dict[str, tuple[str, ...]] = {
    "run": (
        "--driver",
        "--report-dir",
        "--seed",
        "--call-timeout",
        "--probe-timeout",
        "--reprobe",
        "--mem-limit",
        "--workers",
        "--resume",
        "--in-process",
        "--shard",
        "--cluster",
        "--worker-resources",
    ),
    "replay": ("--driver", "--call-timeout", "--mem-limit", "--in-process"),
    "probe": (
        "--driver",
        "--report-dir",
        "--seed",
        "--call-timeout",
        "--probe-timeout",
        "--reprobe",
        "--mem-limit",
        "--in-process",
    ),
    "stress": (
        "--driver",
        "--report-dir",
        "--seed",
        "--mem-limit",
        "--budget",
        "--workers",
        "--resume",
        "--cluster",
        "--worker-resources",
    ),
    "fuzz": (
        "--driver",
        "--report-dir",
        "--seed",
        "--call-timeout",
        "--mem-limit",
        "--budget",
        "--resume",
        "--cluster",
        "--worker-resources",
    ),
    "bench": (
        "--driver",
        "--report-dir",
        "--seed",
        "--call-timeout",
        "--mem-limit",
        "--scenario",
        "--percentile",
        "--min-duration",
        "--baseline",
        "--must-accelerate",
    ),
    "import": ("--seed",),
}
# bench compares several drivers: its --driver may be repeated.
REPEATED: dict[str, frozenset[str]] = {"bench": frozenset({"--driver"})}


class _Typed:
    """argparse's ``type=``: the table's parser, its ValueError shown as the one-line usage error."""

    def __init__(self, opt: SharedOption):
        self.opt = opt
        self.__name__ = opt.kind.name  # argparse names the type in some messages

    def __call__(self, text: str) -> Any:
        try:
            return self.opt.kind.parse(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None


class _WarnAlias(argparse.Action):
    """An old spelling: stores like the new one, and says once that it is deprecated."""

    def __init__(self, *args: Any, new: str = "", **kwargs: Any):
        self.new = new
        super().__init__(*args, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        print(
            f"nnconform: warning: {option_string} is deprecated; use {self.new} (the old spelling "
            f"goes in the next release)",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, values)


def add_options(parser: argparse.ArgumentParser, command: str) -> None:
    """Add the command's shared options to its sub-parser."""
    for name in COMMAND_OPTIONS[command]:
        opt = OPTIONS[name]
        flags = [opt.short, opt.name] if opt.short else [opt.name]
        repeat = name in REPEATED.get(command, ())
        if opt.kind is FLAG:
            parser.add_argument(*flags, dest=opt.dest, action="store_true", help=opt.help)
            continue
        default = opt.default_for(command)
        help_text = opt.help + (" (repeatable)" if repeat else "")
        if name == "--driver":
            # None: not given.  The command then chooses, and says which (nnconform.cli.choose_driver):
            # the recorded driver for replay and --resume, else the bundled reference.
            default = None
        parser.add_argument(
            *flags,
            dest=opt.dest,
            type=_Typed(opt),
            metavar=opt.metavar,
            action="append" if repeat else "store",
            default=None if repeat else default,
            help=help_text,
        )
        for alias in opt.aliases:
            parser.add_argument(
                alias,
                dest=opt.dest,
                type=_Typed(opt),
                metavar=opt.metavar,
                action=_WarnAlias,
                new=opt.name,
                help=argparse.SUPPRESS,
            )


def add_pytest_options(group: Any) -> None:
    """Add the shared options the pytest plugin takes, with the same parsers and defaults as
    ``nnconform run`` (pytest's parser is argparse underneath)."""
    for opt in OPTIONS.values():
        if not opt.pytest_name:
            continue
        dest = opt.pytest_name.lstrip("-").replace("-", "_")
        if opt.kind is FLAG:
            group.addoption(opt.pytest_name, action="store_true", dest=dest, help=opt.help)
        else:
            group.addoption(
                opt.pytest_name,
                dest=dest,
                type=_Typed(opt),
                default=opt.default_for("run"),
                metavar=opt.metavar,
                help=opt.help,
            )


def pytest_args(values: dict[str, Any]) -> list[str]:
    """The pytest plugin's arguments for parsed shared-option values (name -> value): each in the
    canonical text its parser reads back to the same value.  None and False are left out."""
    args: list[str] = []
    for name, value in values.items():
        opt = OPTIONS[name]
        if not opt.pytest_name or value is None or value is False:
            continue
        if opt.kind is FLAG:
            args.append(opt.pytest_name)
        else:
            args += [opt.pytest_name, opt.kind.format(value)]
    return args


def options_table_markdown() -> str:
    """The README's table of shared options, generated from this table
    (tests/test_docs_layout.py keeps the README's copy equal to it)."""
    rows = ["| option | commands | meaning (default) | pytest plugin |", "|---|---|---|---|"]
    for opt in OPTIONS.values():
        used = [c for c in COMMAND_OPTIONS if opt.name in COMMAND_OPTIONS[c]]
        meaning = (f"`{opt.short}` for short; " if opt.short else "") + opt.help
        if opt.kind not in (FLAG, TEXT, SEED):
            meaning = f"{opt.kind.name}: " + meaning
        plugin = f"`{opt.pytest_name}`" if opt.pytest_name else ""
        rows.append(f"| `{opt.name}` | {', '.join(used)} | {meaning} | {plugin} |")
    return "\n".join(rows)


__all__ = [
    "OPTIONS",
    "COMMAND_OPTIONS",
    "SharedOption",
    "add_options",
    "add_pytest_options",
    "pytest_args",
    "parse_size",
    "format_size",
    "parse_duration",
    "format_duration",
    "parse_seed",
    "parse_percentile",
    "options_table_markdown",
]
