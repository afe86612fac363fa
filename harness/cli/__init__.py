"""The ``nnconform`` command.

    nnconform run --driver X [--suite S ...] [--report-dir D] [-- pytest args]
    nnconform drivers
    nnconform validate FILE
    nnconform replay SPEC --driver X
    nnconform stress --driver X --budget 30m [--tests ...] [--workers N] [--seed S] [--resume]
    nnconform fuzz --driver X --budget 10m [--seed S] [--resume]
    nnconform vectors import AOSP_DIR OUT_DIR | unpack DIR | list [--vectors DIR]

Bad input (unknown driver, malformed spec, invalid model) is one line on stderr and a
non-zero exit status, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import NoReturn, Sequence, cast

from nnconform.verdict.outcome import ExitStatus

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INCOMPLETE = (
    int(ExitStatus.CLEAN),
    int(ExitStatus.FAILURES),
    int(ExitStatus.USAGE),
    int(ExitStatus.INCOMPLETE),
)


def _err(msg: str, code: int = EXIT_USAGE) -> int:
    print(f"nnconform: error: {msg}", file=sys.stderr)
    return code


def suites_dir() -> Path:
    from nnconform import suites

    return Path(suites.__file__).parent


def available_suites() -> dict[str, Path]:
    return {p.stem.removeprefix("test_"): p for p in sorted(suites_dir().glob("test_*.py"))}


# ---- run ---------------------------------------------------------------------------------


def cmd_run(a: argparse.Namespace, extra: list[str]) -> int:
    import pytest

    from nnconform.artifacts.reportdir import ReportDirError, acquire, release
    from nnconform.errors import DriverLoadError

    suites = available_suites()
    # The exhaustive suite runs its full tier only when named: the default run holds its
    # quick tier (seconds).  A resumed run keeps the tier it recorded.
    tier = "full" if a.suite and "exhaustive" in a.suite else "quick"
    if a.resume:
        tier = recorded_selection(Path(a.report_dir)).get("exhaustive", tier)
        # The run being resumed decides what "the rest" is: its suites, variants, vectors
        # directory and pytest arguments, unless given again here.
        a, extra = _with_recorded_selection(a, extra)
    chosen = a.suite or list(suites)
    unknown = [s for s in chosen if s not in suites]
    if unknown:
        return _err(f"unknown suite(s) {', '.join(unknown)} (available: {', '.join(suites)})")
    if a.variants is not None:
        from nnconform.cases.variants import parse_mode

        try:
            parse_mode(a.variants)
        except ValueError as e:
            return _err(f"--variants: {e}")
    problem = _check_cluster(a) or _check_history(a) or _check_last_failed(a)
    if problem:
        return _err(problem)
    if a.cluster and a.workers is not None and a.workers > 1:
        return _err("give --cluster or -n/--workers, not both (a cluster's workers run the cases)")
    try:
        # one line now, before pytest starts; a run in this process keeps the host it started
        _check_driver(a.driver, a.in_process, keep=_run_options(a) if _one_session(a) else None)
    except DriverLoadError as e:
        return _err(str(e))
    # Take the report directory first: a second run into it fails here, with one line.
    try:
        rd = acquire(a.report_dir)
    except ReportDirError as e:
        return _err(str(e))
    args = [str(suites[s]) for s in chosen]
    # The driver host's call bound is the one time limit, the same for a checkout (whose
    # pyproject.toml sets a pytest-timeout for the harness's own tests) and a wheel install.
    if a.max_skip_ratio is not None and not 0 <= a.max_skip_ratio <= 1:
        return _err(f"--max-skip-ratio must be between 0 and 1, not {a.max_skip_ratio:g}")
    if a.expected_failures:
        from nnconform.verdict.expectations import ExpectationsError, load_expectations

        try:
            load_expectations(a.expected_failures)
        except ExpectationsError as e:
            return _err(f"--expected-failures: {e}")
    from nnconform.cli.options import format_size, pytest_args

    args += pytest_args(
        {
            "--driver": a.driver,
            "--report-dir": a.report_dir,
            "--call-timeout": a.call_timeout,
            "--probe-timeout": a.probe_timeout,
            "--reprobe": a.reprobe,
            "--mem-limit": a.mem_limit,
            "--in-process": a.in_process,
            "--resume": a.resume,
            "--shard": a.shard,
        }
    )
    args += ["--nn-exhaustive", tier]
    args += ["-p", "no:cacheprovider", "--import-mode=importlib", "-q", "-rfE", "--timeout", "0"]
    args += quiet_plugins(chosen, extra)
    # --lf / --ff: "last run" is the one recorded in --report-dir (nnconform's own journal, not
    # pytest's cache, which depends on where pytest finds its rootdir).
    if a.last_failed:
        args += ["--nn-last-failed"]
    if a.failed_first:
        args += ["--nn-failed-first"]
    if a.expected_failures:
        args += ["--nn-expected-failures", str(Path(a.expected_failures).resolve())]
    if a.max_skip_ratio is not None:
        args += ["--nn-max-skip-ratio", str(a.max_skip_ratio)]
    if a.only_supported:
        args += ["--nn-only-supported"]
    if a.progress is not None:
        if a.progress < 0:
            return _err(f"--progress must be >= 0 seconds, not {a.progress:g}")
        args += ["--nn-progress", str(a.progress)]
    if a.history:
        args += ["--nn-history", str(Path(a.history).resolve())]
    seed = a.seed
    if seed is None and not a.resume:
        seed = int.from_bytes(os.urandom(4), "little") >> 1
    args += pytest_args({"--seed": seed})
    if a.vectors:
        args += ["--nn-vectors", a.vectors]
    if a.variants is not None:
        args += ["--nn-variants", a.variants]
    if a.no_partition:
        args += ["--nn-no-partition"]
    if a.no_probe:
        args += ["--nn-no-probe"]
    if a.workers is not None and a.workers > 1:
        args += ["-n", str(a.workers)]
    if a.cluster:
        args += ["-p", "nnconform.cluster.conformance", "--nn-cluster", a.cluster]
        if a.worker_resources:
            args += ["--nn-worker-resources", a.worker_resources]
        if a.cluster_grace is not None:
            args += ["--nn-cluster-grace", repr(a.cluster_grace)]
    args += [
        "--nn-selection",
        json.dumps({"suites": chosen, "vectors": a.vectors, "pytest_args": extra, "exhaustive": tier}),
    ]
    args += extra
    if a.in_process:
        isolation = "in-process (no driver host: a crash or hang of the driver ends or stalls the run)"
    else:
        isolation = (
            f"driver host, call bound {a.call_timeout:g} s, memory limit "
            f"{format_size(a.mem_limit) if a.mem_limit else 'none'}"
        )
    _say_driver(a)
    print(
        f"nnconform: running suites {', '.join(chosen)} against driver '{a.driver}'; "
        + (f"seed {seed}; " if seed is not None else "seed from the run being resumed; ")
        + isolation,
        flush=True,
    )
    try:
        with _interrupt_on_termination():
            code = int(pytest.main(args))
    finally:
        release(rd)
        from nnconform.isolation.proxy import close_unclaimed

        close_unclaimed()  # e.g. "-- -n 2" or a session that stopped before it needed a driver
    report = Path(a.report_dir) / "report.html"
    if report.exists():
        print(f"nnconform: report written to {report}")
    global _LEAVE_WITHOUT_TEARDOWN
    # Everything is written and closed: the driver hosts and xdist workers are gone, the journal,
    # run.json and reports are on disk.  (A cluster run leaves Dask's own exit handlers to run.)
    _LEAVE_WITHOUT_TEARDOWN = not a.cluster
    return _run_exit_code(Path(a.report_dir), code)


def _check_history(a: argparse.Namespace) -> str:
    """--history names a directory (its history.jsonl is kept there): a file there would
    make the run end without its reports."""
    if a.history and Path(a.history).exists() and not Path(a.history).is_dir():
        return f"--history: {a.history} is a file; give a directory (the run history is kept in its history.jsonl)"
    return ""


def _check_last_failed(a: argparse.Namespace) -> str:
    """--lf re-runs the failures of the run recorded in --report-dir: with no run there it
    would run everything and replace nothing it could name."""
    if not a.last_failed or a.resume:
        return ""
    journal = Path(a.report_dir) / "results.jsonl"
    if not journal.is_file():
        return f"--lf: no earlier run in {a.report_dir} (no results.jsonl): nothing to re-run; run without --lf first"
    return ""


@contextlib.contextmanager
def _interrupt_on_termination():
    """While inside: SIGTERM (a nightly job's ``timeout``, a CI runner cancelling) and SIGHUP
    (the terminal closed) end a run the way Ctrl-C does: the case in progress is not judged,
    and run.json, the journal and report.html say "interrupted after N of M" (exit status 3),
    ready for --resume.  The same for `stress` and `fuzz`, which write their interrupted
    reports.  Left to their default action, they ended the process at once with its report
    still saying "running".  A signal already ignored (SIGHUP under nohup) stays ignored, and
    a second one of the same kind ends the process at once."""
    import signal

    previous = {}
    # pytest captures file descriptor 2 while a case runs: the notice goes to the real stderr
    stderr = os.dup(2)

    def interrupt(signum, frame):
        signal.signal(signum, signal.SIG_DFL)
        name = signal.Signals(signum).name
        with contextlib.suppress(OSError):  # (stderr closed: the interruption is what matters)
            os.write(
                stderr,
                f"nnconform: {name}: stopping the run as Ctrl-C would (send it again to end "
                f"the process at once)\n".encode(),
            )
        raise KeyboardInterrupt(name)

    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) is signal.SIG_DFL:
            previous[sig] = signal.signal(sig, interrupt)

    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        os.close(stderr)


def quiet_plugins(chosen: list[str], extra: list[str]) -> list[str]:
    """pytest plugins a conformance run has no use for, whose fixed cost every run (every xdist
    worker, every cluster batch) paid.  unraisableexception runs a full gc.collect at the start and the end of
    a session: ~0.5 s each once the vectors suite's 9,374 items are in memory, to turn
    exceptions raised in __del__ into warnings that nobody reads here (Python's own hook still
    prints them).  Hypothesis's plugin imports the whole hypothesis package in its terminal
    summary (~1 s, more where bytecode is not cached), though only the random suite uses
    hypothesis; it stays when that suite runs or a --hypothesis-* option is given."""
    quiet = ["-p", "no:unraisableexception"]
    if "random" not in chosen and not any(x.startswith("--hypothesis") for x in extra):
        quiet += ["-p", "no:hypothesispytest"]
    return quiet


# Set by a finished `run`: console_main may end the process without freeing its objects one by
# one.  A --variants all run collects ~540,000 test items; the interpreter's teardown of the
# controller that held them took a minute and a half after the report was already written.
_LEAVE_WITHOUT_TEARDOWN = False


def console_main() -> None:
    """The `nnconform` command (and `python -m nnconform`)."""
    code = main()
    if _LEAVE_WITHOUT_TEARDOWN:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def recorded_selection(report_dir: Path) -> dict:
    """The suites, variants mode, vectors directory and pytest arguments recorded in
    ``report_dir``'s run.json (the keys NnSession.meta writes); {} when there is none to read
    (the plugin then says what is wrong with the directory)."""
    import shlex

    from nnconform.artifacts.reportdir import STATUS_FILE

    try:
        status = json.loads((report_dir / STATUS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(status, dict):
        return {}
    out: dict = {}
    if isinstance(status.get("suites"), str) and status["suites"].strip():
        out["suites"] = [s.strip() for s in status["suites"].split(",") if s.strip()]
    if status.get("exhaustive tier") in ("quick", "full"):
        out["exhaustive"] = status["exhaustive tier"]
    if isinstance(status.get("vectors variants"), str) and status["vectors variants"].strip():
        out["variants"] = status["vectors variants"].strip()
    if isinstance(status.get("vectors directory"), str) and status["vectors directory"]:
        out["vectors"] = status["vectors directory"]
    if isinstance(status.get("pytest arguments"), str) and status["pytest arguments"].strip():
        try:
            out["pytest_args"] = shlex.split(status["pytest arguments"])
        except ValueError as e:  # edited by hand: said, and the user gives them again after --
            out["pytest_args_problem"] = f"{e}"
    return out


def _with_recorded_selection(a: argparse.Namespace, extra: list[str]) -> tuple[argparse.Namespace, list[str]]:
    rec = recorded_selection(Path(a.report_dir))
    used = []
    if a.suite is None and rec.get("suites"):
        a.suite = rec["suites"]
        used.append("suites " + ", ".join(a.suite))
    if a.variants is None and rec.get("variants"):
        a.variants = rec["variants"]
        used.append(f"variants {a.variants}")
    if a.vectors is None and rec.get("vectors"):
        a.vectors = rec["vectors"]
        used.append(f"vectors {a.vectors}")
    if not extra and rec.get("pytest_args"):
        extra = list(rec["pytest_args"])
        used.append("pytest arguments " + " ".join(extra))
    if not extra and rec.get("pytest_args_problem"):
        print(
            f"nnconform: the run's recorded pytest arguments cannot be read ({rec['pytest_args_problem']}); "
            f"resuming without them (give them again after --)",
            flush=True,
        )
    if used:
        print(f"nnconform: resuming with the run's recorded {'; '.join(used)}", flush=True)
    return a, extra


def _check_cluster(a: argparse.Namespace) -> str | None:
    """The one-line problem with --cluster / --worker-resources (the [cluster] extra missing,
    a malformed address or resource), or None."""
    if getattr(a, "worker_resources", None) and not getattr(a, "cluster", None):
        return "--worker-resources needs --cluster"
    grace = getattr(a, "cluster_grace", None)
    if grace is not None:
        if not getattr(a, "cluster", None):
            return "--cluster-grace needs --cluster"
        if not grace > 0:  # (NaN too)
            return f"--cluster-grace must be a positive number of seconds, got {grace}"
    if not getattr(a, "cluster", None):
        return None
    from nnconform.cluster import ClusterError, require_dask
    from nnconform.cluster.connect import check_address, parse_resources

    try:
        require_dask()
        check_address(a.cluster)
        parse_resources(a.worker_resources)
    except ClusterError as e:
        return str(e)
    return None


def _duration(text: str) -> float:
    """argparse type of a command's own durations: the shared option table's syntax (90s, 2m)."""
    from nnconform.cli.options import parse_duration

    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _check_driver(spec: str, in_process: bool, keep: tuple[float, int] | None = None) -> None:
    """Fail early, with the loader's one-line message, if the driver cannot be loaded.  An
    isolated run loads it in a driver host: the driver's import-time code never runs in the
    harness.  With ``keep`` (the run's call bound and memory limit) that host is handed to the
    run's session (nnconform.isolation.proxy.claim); otherwise it is closed."""
    if in_process:
        from nnconform.driver.loader import load_driver

        load_driver(spec)
        return
    from nnconform.isolation.proxy import hand_over, open_isolated

    if keep is None:
        open_isolated(spec, startup_timeout=120.0).close()
        return
    hand_over(open_isolated(spec, startup_timeout=120.0, call_timeout=keep[0], mem_limit=keep[1]))


def _one_session(a: argparse.Namespace) -> bool:
    """Does the run's pytest session use a driver in this process (no xdist workers, no cluster)?"""
    return not a.cluster and not (a.workers is not None and a.workers > 1)


def _run_options(a: argparse.Namespace) -> tuple[float, int]:
    """The call bound and memory limit the run's session will give its host."""
    return float(a.call_timeout), int(a.mem_limit)


def _run_exit_code(report_dir: Path, pytest_code: int) -> int:
    """The exit status the plugin decided and recorded in run.json (nnconform.verdict.outcome.ExitStatus);
    a usage error pytest reported is 2, and so is a selection of no case at all (a ``-k`` that
    matches nothing); a run.json without one (the session ended before it could decide: killed
    during collection, a full disk) is 3."""
    if pytest_code in (pytest_codes().USAGE_ERROR,):
        return EXIT_USAGE
    try:
        status = json.loads((report_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        if pytest_code == pytest_codes().NO_TESTS_COLLECTED:
            # Nothing ran and no report was opened: say so, rather than a silent "incomplete".
            return _err("run: the selection holds no case (check -k / -m and --suite); nothing ran", EXIT_USAGE)
        return EXIT_INCOMPLETE if pytest_code != 0 else EXIT_OK
    code = status.get("exit_status") if isinstance(status, dict) else None
    if isinstance(code, int) and code in (EXIT_OK, EXIT_FAIL, EXIT_INCOMPLETE):
        return code
    return EXIT_INCOMPLETE


def pytest_codes():
    import pytest

    return pytest.ExitCode


# ---- drivers -----------------------------------------------------------------------------


def cmd_drivers(a: argparse.Namespace) -> int:
    from nnconform.driver.loader import installed_drivers, load_driver
    from nnconform.errors import NnError

    eps = installed_drivers()
    if not eps:
        print("no drivers installed")
        return EXIT_OK
    for name, ep in sorted(eps.items()):
        try:
            dev = load_driver(name)
        except NnError as e:
            print(f"{name:14s} unavailable: {e}")
            continue
        extras = [i.__name__ for i in _optional_interfaces(dev)]
        caps = dev.capabilities()
        print(
            f"{name:14s} {ep.value}  version {dev.version}, feature level {dev.feature_level}, "
            f"{len(caps.operand_performance)} operand types, optional: {', '.join(extras) or 'none'}"
        )
    return EXIT_OK


def _optional_interfaces(dev) -> list[type]:
    from nnconform.driver import AsyncExecution, BurstExecution, CompilationCaching, FencedExecution, MemoryDomains

    found = [c for c in (CompilationCaching, MemoryDomains) if isinstance(dev, c)]
    return found + [c for c in (AsyncExecution, FencedExecution, BurstExecution) if _prepared_class_is(dev, c)]


def _prepared_class_is(dev, iface) -> bool:
    # Only a prepared model can say whether it executes asynchronously; prepare a trivial model.
    from nnconform.errors import NnError
    from nnconform.ir import ModelBuilder
    from nnconform.ir import OperandType as T
    from nnconform.ir import OperationType as Op

    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [1])
    b.operation(Op.RELU, [x], [b.output(T.TENSOR_FLOAT32, [1])])
    try:
        pm = dev.prepare(b.build())
    except (NnError, Exception):  # a driver that cannot prepare RELU simply shows no async interface
        return False
    try:
        return isinstance(pm, iface)
    finally:
        pm.release()


# ---- validate ----------------------------------------------------------------------------


def _shown(text, limit: int = 100) -> str:
    """Text from a spec file or a driver, fit for the console: no escapes or controls, bounded."""
    from nnconform.textsafe import clean_text, shorten

    return shorten(clean_text(str(text)), limit)


def cmd_validate(a: argparse.Namespace) -> int:
    from nnconform.errors import SpecError
    from nnconform.ir.spec import load_spec

    try:
        spec = load_spec(a.file, validate=True)
    except SpecError as e:
        return _err(f"{_shown(a.file)}: {e}", EXIT_USAGE)
    except OSError as e:
        return _err(f"{_shown(a.file)}: {e.strerror}", EXIT_USAGE)
    m = spec.model
    print(
        f"{_shown(a.file)}: valid: {len(m.main.operations)} operation(s) [{', '.join(m.operation_names())}], "
        f"{len(m.referenced)} referenced subgraph(s), {len(spec.examples)} example(s)"
    )
    return EXIT_OK


# ---- replay ------------------------------------------------------------------------------


def cmd_replay(a: argparse.Namespace) -> int:
    from nnconform.errors import DriverLoadError, SpecError
    from nnconform.ir.spec import load_spec

    try:
        spec = load_spec(a.spec, validate=False)
    except SpecError as e:
        return _err(f"{_shown(a.spec)}: {e}", EXIT_USAGE)
    except OSError as e:
        return _err(f"{_shown(a.spec)}: {e.strerror}", EXIT_USAGE)
    if not spec.examples:
        return _err(f"{_shown(a.spec)}: examples: no examples to replay", EXIT_USAGE)
    recorded = (spec.meta or {}).get("driver")
    a.driver = choose_driver(
        a, recorded if isinstance(recorded, str) and recorded else None, f"the spec file {_shown(a.spec, 200)}"
    )
    try:
        device = _replay_device(a)
    except DriverLoadError as e:
        return _err(str(e))
    try:
        _say_driver(a)
        return _replay_examples(a, spec, device)
    finally:
        if getattr(device, "isolated", False):
            device.close()


def _replay_device(a: argparse.Namespace):
    """The driver for replay: in a driver host (a crash, hang or runaway allocation of the
    replayed case is a verdict, not the end of nnconform), or in-process with --in-process."""
    if a.in_process:
        from nnconform.driver.loader import load_driver

        return load_driver(a.driver)
    from nnconform.isolation.proxy import open_isolated

    return open_isolated(a.driver, call_timeout=float(a.call_timeout), mem_limit=int(a.mem_limit))


def _replay_examples(a: argparse.Namespace, spec, device) -> int:
    from nnconform.verdict.runner import run_case

    meta = spec.meta or {}
    if meta:
        print(
            f"spec: {_shown(a.spec)} (recorded: driver {_shown(meta.get('driver', '?'), 80)}, "
            f"seed {_shown(meta.get('seed', '?'), 40)}, harness {_shown(meta.get('harness_version', '?'), 40)})"
        )
        if meta.get("message"):
            print(f"recorded failure: {_shown(meta['message'], 2000)}")
    criteria = None
    from nnconform.models.criteria import REAL_MODEL
    from nnconform.models.verdict import reconsider

    if meta.get("suite") == "models" and not meta.get("criteria_set"):
        meta = {**meta, "criteria_set": REAL_MODEL.name}  # dumped before models specs named it
    if meta.get("criteria_set"):
        # A random-graph or models-suite failure is judged by the criteria set it failed
        # under (the spec loader has checked it is a string).
        from nnconform.verdict.criteria import RANDOM_GRAPH_SETS

        criteria = {**RANDOM_GRAPH_SETS, REAL_MODEL.name: REAL_MODEL}.get(meta["criteria_set"])
        if criteria is None:
            return _err(
                f"{_shown(a.spec)}: meta.criteria_set: unknown criteria set {_shown(repr(meta['criteria_set']), 60)}",
                EXIT_FAIL,
            )
        print(f"criteria: {criteria.name} (recorded with the failure)")
    worst = EXIT_OK
    for i, ex in enumerate(spec.examples):
        out = run_case(
            device,
            spec.model,
            ex.inputs,
            ex.outputs,
            ignored=ex.ignored or None,
            expect_failure=ex.expect_failure,
            criteria=criteria,
        )
        if criteria is REAL_MODEL and out.outcome == "FAIL":
            # the models suite's second chances (models.verdict): each float output's rows
            # scaled by its magnitude, then every operation of the driver's run within its
            # own criteria on the inputs the driver fed it
            try:
                second = reconsider(device, spec.model, ex.inputs, ex.outputs, out)
            except Exception as e:  # the FAIL stands; say why the step check gave nothing
                second = None
                out.message += f" (step check failed: {type(e).__name__}: {e})"
            if second is not None and second.accepted is not None:
                out.outcome, out.message = "PASS", f"{second.message} (as the models suite judges)"
        if str(meta.get("test_id", "")).startswith("exhaustive/"):
            from nnconform.cases.exhaustive import replay_verdict

            out = replay_verdict(spec.model, ex.inputs, ex.outputs, out)  # the sweep's no-flush rule too
        print(
            f"example {i} ({_shown(ex.name, 80)}) on {a.driver}: {out.outcome}"
            + (f": {_shown(out.message, 2000)}" if out.message else "")
        )
        if out.comparison is not None and a.verbose:
            for m in out.comparison.mismatches:
                print(f"  {m}")
        if out.outcome in ("CRASH", "HANG") and out.details:
            from nnconform.isolation.childproc import crash_stack

            # the host's whole faulthandler dump (the rows' extra.stack comes from the same)
            stack = crash_stack(str(out.details.get("fault_dump") or out.details.get("stderr_tail") or ""))
            if stack:
                # the thread that crashed or hung, innermost (the driver's) frame first
                print("  crashing thread's stack (most recent call first):")
                for line in stack:
                    print(f"    {_shown(line, 400)}")
            elif out.details.get("stderr_tail"):
                print("  driver host stderr (tail):")
                for line in str(out.details["stderr_tail"]).splitlines()[-12:]:
                    print(f"    {_shown(line, 400)}")
        if out.outcome in ("CRASH", "HANG"):
            print(f"  {device.liveness()}")
        if out.outcome in ("FAIL", "ERROR", "CRASH", "HANG"):
            worst = EXIT_FAIL
        if getattr(device, "isolated", False):
            left = device.end_case()["processes"]
            if left:
                print(
                    f"example {i}: the driver left {len(left)} process(es) running (killed): "
                    + "; ".join(_shown(p, 200) for p in left[:3])
                )
                worst = EXIT_FAIL
    return worst


# ---- coverage ----------------------------------------------------------------------------


def cmd_coverage(a: argparse.Namespace) -> int:
    import csv

    from nnconform.cases.coverage import coverage, summary, to_csv_rows, to_markdown

    results = Path(a.results) if a.results else None
    if results is not None and not results.exists():
        return _err(f"{results}: no such results file (run the vectors suite first)", EXIT_FAIL)
    try:
        rows = coverage(results)
    except (OSError, ValueError) as e:
        # a text file, a damaged journal: one line, not a traceback
        return _err(f"--results: {e}", EXIT_USAGE)
    if a.write_readme:
        from nnconform.cases.coverage import update_readme

        try:
            update_readme(Path(a.write_readme), rows)
        except (OSError, ValueError) as e:
            return _err(str(e), EXIT_FAIL)
        print(f"{a.write_readme}: coverage table updated ({summary(rows)})")
        return EXIT_OK
    if a.format == "csv":
        table = to_csv_rows(rows)
        w = csv.DictWriter(sys.stdout, fieldnames=list(table[0]))
        w.writeheader()
        w.writerows(table)
    else:
        print(summary(rows) + "\n")
        print(to_markdown(rows))
    return EXIT_OK


# ---- diff --------------------------------------------------------------------------------


def cmd_diff(a: argparse.Namespace) -> int:
    from nnconform.reports.diff import diff_runs, load_run, render_html, render_text

    try:
        rows_a, rows_b = load_run(a.run_a), load_run(a.run_b)
    except (OSError, ValueError) as e:
        return _err(str(e))
    d = diff_runs(rows_a, rows_b, a.run_a, a.run_b)
    print(render_text(d, limit=a.limit))
    if a.html:
        from nnconform.artifacts.reportdir import atomic_write

        try:
            atomic_write(Path(a.html), render_html(d))
        except OSError as e:
            return _err(f"{a.html}: {e.strerror or e}", EXIT_FAIL)
        print(f"nnconform: diff written to {a.html}")
    return EXIT_FAIL if d.count("new") else EXIT_OK


# ---- vectors -----------------------------------------------------------------------------


def cmd_vectors(a: argparse.Namespace) -> int:
    if a.vectors_command == "import":
        from nnconform.cases.vectors_import import ImportProblem, import_vectors

        try:
            res = import_vectors(
                a.aosp_dir, a.out_dir, folders=a.folder, generator=a.generator, specs=a.specs, log=print
            )
        except ImportProblem as e:
            return _err(str(e))
        except OSError as e:
            return _err(f"vectors import: {e}", EXIT_FAIL)
        print(f"nnconform: {res.cases} cases in {len(res.files)} files written to {res.out_dir}")
        if res.failures:
            print(
                f"nnconform: {len(res.failures)} spec files failed: {', '.join(sorted(res.failures))}", file=sys.stderr
            )
        if res.files:
            print(f"nnconform: run them with `nnconform run --suite vectors --vectors {res.out_dir}`")
        return EXIT_FAIL if res.failures else EXIT_OK
    if a.vectors_command == "unpack":
        from nnconform.vectors_data import BundleError, extract, manifest

        try:
            dest = extract(Path(a.dir))
            total = manifest()["total_cases"]
        except (BundleError, OSError) as e:
            return _err(str(e), EXIT_FAIL)
        print(f"nnconform: the bundled vectors ({total} cases) written to {dest}")
        return EXIT_OK
    from nnconform.cases.vectors import resolve_root, vector_folders
    from nnconform.reference.ops.feature_levels import folder_level

    try:
        root = resolve_root(a.vectors)
        folders = vector_folders(root)
    except (OSError, RuntimeError) as e:
        return _err(str(e), EXIT_FAIL)
    print(f"{root}:")
    total = 0
    for d in folders:
        files = [f for f in sorted(d.glob("*.json")) if f.name != "index.json"]
        try:
            n = sum(len(json.loads(f.read_text())) for f in files)
        except (OSError, ValueError, TypeError) as e:
            return _err(f"{d}: {e}", EXIT_FAIL)
        total += n
        level = folder_level(d.name)
        print(
            f"  {d.name:16s} feature level {level if level is not None else '?':>2}  {len(files):4d} files {n:6d} cases"
        )
    print(f"  {total} cases")
    return EXIT_OK


# ---- import (TFLite -> spec) ---------------------------------------------------------------


def cmd_import(a: argparse.Namespace) -> int:
    from nnconform.cases.tflite_import import TfliteImportError, UnmappedOperations, import_tflite, write_spec

    try:
        res = import_tflite(a.model)
    except UnmappedOperations as e:
        return _err(_shown(e, 2000), EXIT_FAIL)
    except TfliteImportError as e:
        return _err(_shown(e, 400), EXIT_FAIL)
    out = a.output or str(Path(a.model).with_suffix("")) + ".spec.json"
    try:
        n = write_spec(res, out, examples=a.examples, seed=a.seed)
    except OSError as e:
        return _err(f"{_shown(out)}: {e.strerror or e}", EXIT_FAIL)
    m = res.model
    print(
        f"{_shown(a.model)}: {len(m.main.operations)} NNAPI operation(s) [{', '.join(m.operation_names())}] "
        f"from {sum(res.op_counts.values())} TFLite operation(s); sha256 {res.meta['sha256'][:16]}...; "
        f"{n} example(s) -> {_shown(out)}"
    )
    return EXIT_OK


# ---- models (built-in and the mediapipe zoo) -------------------------------------------------


def cmd_models(a: argparse.Namespace) -> int:
    from nnconform.models import builtin_entries, zoo

    if a.models_command == "fetch":
        try:
            entries = zoo.fetch(wheel=Path(a.wheel) if a.wheel else None)
        except zoo.ZooError as e:
            return _err(_shown(e, 400), EXIT_FAIL)
        print(f"nnconform: {len(entries)} models extracted to {zoo.zoo_dir()}")
        return EXIT_OK
    for name, entry in builtin_entries().items():
        m = entry.load()
        print(f"{name:34s} builtin  {len(m.main.operations):4d} ops  {entry.source}")
    try:
        fetched = zoo.cached_models()
    except zoo.ZooError as e:
        return _err(_shown(e, 400), EXIT_FAIL)
    if not fetched:
        print(f"(zoo {zoo.ZOO_NAME} not fetched: `nnconform models fetch` puts it in {zoo.zoo_dir()})")
        return EXIT_OK
    from nnconform.cases.tflite_import import TfliteImportError, UnmappedOperations, import_tflite

    for name, path in sorted(fetched.items()):
        try:
            res = import_tflite(path)
            status = f"{len(res.model.main.operations):4d} ops  imports: {', '.join(res.model.operation_names())}"
        except UnmappedOperations as e:
            status = "   -      no NNAPI equivalent: " + ", ".join(f"{k} x{v}" for k, v in sorted(e.unmapped.items()))
        except TfliteImportError as e:
            status = f"   -      {_shown(e, 200)}"
        print(f"{name:34s} zoo      {status}")
    return EXIT_OK


# ---- bench (MLTS benchmark on real models) ---------------------------------------------------


def select_models(names: Sequence[str] | None):
    """Model entries by name; ``builtin`` and ``zoo`` name groups; none given: all of them."""
    from nnconform.models import available_models

    entries = available_models()
    if not names:
        return list(entries.values())
    chosen = []
    for arg in names:
        for n in (x for x in arg.split(",") if x):
            group = [e for e in entries.values() if e.kind == n]
            if n in ("builtin", "zoo"):
                if not group:
                    raise ValueError(f"no {n} models (the zoo needs `nnconform models fetch`)")
                chosen += group
            elif n in entries:
                chosen.append(entries[n])
            else:
                raise ValueError(f"unknown model {n!r} (see `nnconform models list`)")
    return list({e.name: e for e in chosen}.values())


def cmd_bench(a: argparse.Namespace) -> int:
    import datetime

    from nnconform import __version__
    from nnconform.bench import Settings, gate, run_bench, scenarios, table, write_artifacts, write_csv, write_html
    from nnconform.bench import baseline as bench_baseline
    from nnconform.models.zoo import ZooError

    try:
        entries = select_models(a.models)
    except (ValueError, ZooError) as e:
        return _err(_shown(e, 300))
    if a.iterations < 1 or a.warmup < 0 or a.inputs < 1:
        return _err("--iterations and --inputs must be at least 1, --warmup at least 0")
    try:
        chosen = scenarios.parse_scenarios(a.scenario)
        rules = gate.load_rules(a.must_accelerate) if a.must_accelerate else []
        drivers = a.driver or ["reference"]
        # --baseline names a directory, or one of this run's drivers (the others are judged against it)
        base_driver = a.baseline if a.baseline and a.baseline in drivers and not Path(a.baseline).is_dir() else None
        base = bench_baseline.load(a.baseline) if a.baseline and base_driver is None else None
        if base_driver is not None and len(drivers) < 2:
            raise ValueError(f"--baseline {base_driver}: a driver as baseline needs a second --driver to judge")
    except ValueError as e:
        return _err(_shown(e, 300))
    if not a.driver:
        print("nnconform bench: no --driver given: benchmarking the bundled reference driver", flush=True)
    from nnconform.driver.loader import check_driver_name
    from nnconform.errors import DriverLoadError

    try:
        for d in drivers:  # a misspelt name: one line now, not a FAIL row after the others ran
            check_driver_name(d)
    except DriverLoadError as e:
        return _err(str(e))
    out = Path(a.report_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return _err(f"{_shown(out)}: {e.strerror or e}")
    settings = Settings(
        warmup=a.warmup,
        iterations=a.iterations,
        inputs_count=a.inputs,
        seed=a.seed,
        percentile=a.percentile,
        min_duration=a.min_duration,
        scenarios=chosen,
        rules=rules,
        call_timeout=a.call_timeout,
        mem_limit=a.mem_limit,
    )
    from nnconform.reference.kernels import jit

    # A benchmark warms up before it times: the reference's compiled kernels ([fast] extra)
    # are on for it unless NNCONFORM_JIT says otherwise (driver hosts inherit the variable).
    with jit.on_if_installed():
        print(
            f"nnconform bench: {len(entries)} model(s) x {len(drivers)} driver(s); {', '.join(chosen)}; warm-up "
            f"{a.warmup}, at least {settings.queries()} timed queries (p{a.percentile:g} needs "
            f"{settings.queries()} by early stopping) over at least {a.min_duration:g}s; {a.inputs} golden inputs "
            f"(seed {a.seed}); every model in a fresh driver host; reference: {jit.describe()}",
            flush=True,
        )
        rows = run_bench(drivers, entries, settings, baseline_rows=base, baseline_driver=base_driver)
        kernels = jit.describe()
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "harness": __version__,
        "drivers": ", ".join(drivers),
        "scenarios": ", ".join(chosen),
        "warm-up": a.warmup,
        "iterations": a.iterations,
        "percentile": a.percentile,
        "min-duration": a.min_duration,
        "inputs": a.inputs,
        "seed": a.seed,
        "cpus": os.cpu_count(),
    }
    if a.baseline:
        meta["baseline"] = a.baseline
    if a.must_accelerate:
        meta["must-accelerate"] = a.must_accelerate
    # The reference is the accuracy baseline (and maybe a benchmarked driver): whether it ran
    # its compiled kernels ([fast] extra) or numpy only explains its latency column.
    meta["reference kernels"] = kernels
    from nnconform.reference.kernels.heap import (
        retain_freed_memory,  # (the driver hosts decide the same from the same environment)
    )

    meta["reference heap"] = retain_freed_memory()
    try:
        write_csv(rows, out / "bench.csv")
        write_html(rows, out / "bench.html", meta)
        code = write_artifacts(rows, out, meta)
    except OSError as e:
        return _err(f"{_shown(out)}: {e.strerror or e}", EXIT_FAIL)
    print(table(rows))
    print(
        f"nnconform: {out / 'bench.csv'}  {out / 'bench.html'}  (and the report directory's "
        f"report.html, summary.json, results.csv, results.jsonl, run.json)"
    )
    return code


# ---- probe -------------------------------------------------------------------------------


def cmd_probe(a: argparse.Namespace) -> int:
    """Capability probe (nnconform.cases.probe): claimed vs working per operation x type x rank."""
    from nnconform.cases.probe import CRASH, HANG, OVER, UNDER, CapabilityCache, describe_cell, summary_text
    from nnconform.errors import DriverLoadError

    if a.samples < 1:
        return _err(f"--samples must be at least 1, not {a.samples}")
    from nnconform.generators.signatures import SIGNATURES
    from nnconform.ir import OperationType

    ops = None
    if a.ops:
        names = [n.strip().upper() for n in a.ops.split(",") if n.strip()]
        unknown = [n for n in names if n not in OperationType.__members__ or OperationType[n] not in SIGNATURES]
        if unknown:
            return _err(f"--ops: {', '.join(unknown)} is not an operation the generators cover")
        ops = [OperationType[n] for n in names]
    try:
        device = _replay_device(a)
    except DriverLoadError as e:
        return _err(str(e))
    try:
        _say_driver(a)
        cache = CapabilityCache(
            device,
            a.report_dir,
            samples=a.samples,
            seed=a.seed,
            driver_spec=a.driver,
            call_timeout=a.probe_timeout,
            fresh=a.force or a.reprobe,
        )
        print(
            f"nnconform: probing {cache.name} {cache.version} ({a.samples} model(s) per cell, seed {a.seed}, "
            f"each call bounded by {a.probe_timeout:g} s); matrix: {cache.path}"
            + (f" ({cache.stale}: probing again)" if cache.stale else ""),
            flush=True,
        )
        with _interrupt_on_termination():
            probed = cache.ensure(ops, progress=ProbeProgress(print))
        if not probed:
            cache.write()  # rewrite the Markdown from the cached cells
        data = cache.data()
    except KeyboardInterrupt:
        print(
            f"nnconform: probe interrupted; the cells probed so far are in {cache.path}",
            file=sys.stderr,
        )
        return EXIT_INCOMPLETE
    except OSError as e:
        from nnconform.artifacts.reportdir import describe_os_error

        return _err(describe_os_error(e, Path(a.report_dir)))
    finally:
        if getattr(device, "isolated", False):
            device.close()
    s = data["summary"]
    print(f"{len(data['cells'])} cells ({probed} probed now, {data['seconds']} s of probing): " + summary_text(s))
    for c in data["cells"]:
        if c["status"] in (OVER, UNDER, CRASH, HANG):
            msg = describe_cell(c) if c["status"] in (CRASH, HANG) else c["message"]
            print(
                f"  {c['status']}: {c['operation']} {c['data_type']} rank {c['rank']}"
                + (f" ({msg[:160]})" if msg else "")
            )
    print(f"nnconform: capability matrix written to {cache.path} and {cache.path.parent / 'capabilities.md'}")
    return EXIT_FAIL if s[OVER] or s[CRASH] or s[HANG] else 0


class ProbeProgress:
    """The probe's progress, as lines: at most one every ``every`` seconds, and at once for a
    cell that crashed or hung (the one the user is waiting on)."""

    def __init__(self, write, every: float = 2.0):
        self.write, self.every = write, every
        self.last = time.monotonic()
        self.cells = self.incidents = 0

    def __call__(self, cell, done_ops: int, total_ops: int) -> None:
        from nnconform.cases.probe import CRASH, HANG, _status

        self.cells += 1
        status = cell.status if cell.status else _status(cell)
        now = time.monotonic()
        if status in (CRASH, HANG):
            self.incidents += 1
            self.write(
                f"nnconform: probe: {cell.incident} in {cell.operation} {cell.data_type} rank {cell.rank} "
                f"({cell.message[:120]}); {cell.operation} {cell.data_type} quarantined"
            )
        elif now - self.last >= self.every:
            self.write(
                f"nnconform: probe: operation {done_ops + 1} of {total_ops} ({cell.operation}), "
                f"{self.cells} cells, {self.incidents} quarantined"
            )
        else:
            return
        self.last = now


# ---- stress ------------------------------------------------------------------------------


def cmd_stress(a: argparse.Namespace) -> int:
    from nnconform.stress.runner import (
        MANIFEST,
        TESTS,
        StressConfig,
        StressUsageError,
        check_config,
        rebuild_reports,
        run_stress,
    )
    from nnconform.stress.tests import StressOptions

    try:
        if a.list:
            for name in TESTS:
                print(name)
            return EXIT_OK
        if a.report_only:
            if not (Path(a.report_dir) / "results.jsonl").exists():
                return _err(f"{a.report_dir}: no results.jsonl to build reports from", EXIT_FAIL)
            csv_path, html_path = rebuild_reports(a.report_dir)
            print(f"reports: {csv_path}  {html_path}")
            return EXIT_OK
        tests = [t for arg in (a.tests or []) for t in arg.split(",") if t] or list(TESTS)
        unknown = [t for t in tests if t not in TESTS]
        if unknown:
            return _err(f"unknown stress test(s) {', '.join(unknown)} (available: {', '.join(TESTS)})")
        durations = {}
        for item in a.duration or []:
            name, _, sec = item.partition("=")
            if name not in TESTS or not sec:
                return _err(f"bad --duration {item!r} (expected TEST=SECONDS, TEST one of {', '.join(TESTS)})")
            try:
                durations[name] = float(sec)
            except ValueError:
                return _err(f"bad --duration {item!r}: {sec!r} is not a number of seconds")
        opts = StressOptions(
            durations=durations,
            threads=a.threads,
            processes=a.processes,
            client_threads=a.client_threads,
            hang_grace=a.hang_grace,
            perf_threshold=a.perf_threshold,
            leak_threshold_mb=a.leak_threshold_mb,
            random_pause=a.random_pause,
            soak_executions=a.soak_executions,
            worker_leak_mb=a.worker_leak_mb,
            exhaustive_shards=a.exhaustive_shards,
            exhaustive_tier=a.exhaustive_tier,
        )
        if a.soak_executions < 1 or a.worker_leak_mb <= 0:
            return _err("--soak-executions must be >= 1 and --worker-leak-mb > 0")
        if a.exhaustive_shards < 1:
            return _err("--exhaustive-shards must be >= 1")
        seed = a.seed if a.seed is not None else int.from_bytes(os.urandom(4), "little")
        cfg = StressConfig(
            driver=a.driver,
            budget_s=a.budget,
            tests=tests,
            workers=a.workers if (a.workers is not None or a.resume) else 1,
            seed=seed,
            report_dir=a.report_dir,
            options=opts,
            mem_limit=a.mem_limit,
            cases=a.case,
            claims=not a.no_probe,
        )
        check_config(cfg)  # --budget 0, --workers 0 ... would run nothing and exit 0: usage errors
        problem = _ready_to_start(a)
        if problem is not None:
            return problem
        if a.cluster:
            return _stress_on_cluster(a, cfg)
        return run_stress(cfg, resume=a.resume)
    except StressUsageError as e:
        return _err(str(e))
    except (OSError, ValueError) as e:
        return _err(f"{a.report_dir}: {e}", EXIT_FAIL) if Path(a.report_dir, MANIFEST).exists() else _err(str(e))


def _stress_on_cluster(a: argparse.Namespace, cfg) -> int:
    """--cluster: the plan as a local run makes it with --workers (default: the cluster's
    worker threads), each slot's cases on the cluster (nnconform.cluster.stress)."""
    from nnconform.cluster import ClusterError
    from nnconform.cluster.connect import open_cluster, parse_resources
    from nnconform.cluster.stress import ClusterBox
    from nnconform.stress.runner import run_stress

    try:
        handle = open_cluster(a.cluster, parse_resources(a.worker_resources))
    except ClusterError as e:
        return _err(str(e))
    try:
        if a.workers is None and not a.resume:
            cfg.workers = handle.slots()
        print(f"nnconform stress: on cluster {a.cluster} ({len(handle.workers())} worker(s))", flush=True)
        return run_stress(cfg, resume=a.resume, box_factory=lambda: ClusterBox(handle, cfg.driver, cfg.mem_limit))
    finally:
        handle.close()


# ---- fuzz --------------------------------------------------------------------------------


def cmd_fuzz(a: argparse.Namespace) -> int:
    from nnconform.fuzz.runner import FuzzConfig, FuzzUsageError, run_fuzz
    from nnconform.stress.runner import StressUsageError

    try:
        if a.budget is not None and a.cases is not None:
            return _err("give --budget or --cases, not both")
        if a.cases is not None and a.cases < 1:
            return _err(f"--cases must be at least 1, not {a.cases}")
        budget = a.budget if a.budget is not None else (None if a.cases else 600.0)
        seed = a.seed if a.seed is not None else int.from_bytes(os.urandom(4), "little") >> 1
        cfg = FuzzConfig(
            driver=a.driver,
            report_dir=Path(a.report_dir),
            seed=seed,
            budget_s=budget,
            max_cases=a.cases,
            call_timeout=a.call_timeout,
            mem_limit=a.mem_limit,
            slow_s=a.slow,
        )
        problem = _ready_to_start(a)
        if problem is not None:
            return problem
        if a.cluster:
            from nnconform.cluster import ClusterError
            from nnconform.cluster.connect import open_cluster, parse_resources
            from nnconform.cluster.fuzz import cluster_cases

            try:
                handle = open_cluster(a.cluster, parse_resources(a.worker_resources))
            except ClusterError as e:
                return _err(str(e))
            try:
                print(f"nnconform fuzz: on cluster {a.cluster} ({len(handle.workers())} worker(s))", flush=True)
                return run_fuzz(cfg, resume=a.resume, cases=cluster_cases(handle))
            finally:
                handle.close()
        return run_fuzz(cfg, resume=a.resume)
    except (FuzzUsageError, StressUsageError) as e:
        return _err(str(e))
    except OSError as e:
        return _err(f"{a.report_dir}: {e}", EXIT_FAIL)


RUN_EPILOG = """\
Anything after -- goes to pytest, e.g.
  nnconform run --driver X -- -k conv -x                 select by test id, stop at the first failure
  nnconform run --driver X -- -m "conv_2d and quant8"    select by marker (suite, operation, data type)
  nnconform run --driver X -- --junitxml=junit.xml       JUnit XML with nnconform properties

Every run writes results.jsonl, results.csv, report.html and summary.json into --report-dir.

The driver runs in a driver host process (its own process group, memory limit, faulthandler):
a driver that crashes, exits or hangs gives that case a CRASH or HANG row and the run goes on.
"""


class UsageError(Exception):
    """A command line argparse refused; main() prints it as the one-line error (exit status 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad option is one line on stderr (`nnconform: error: ...`) and exit
    status 2 like every other usage error, not a usage dump.  Sub-parsers inherit the class."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.partition(" ")[2]
        raise UsageError(f"{command}: {message}" if command else message)


def build_parser() -> argparse.ArgumentParser:
    from nnconform.cli.options import add_options
    from nnconform.verdict.outcome import exit_status_help

    p = _Parser(
        prog="nnconform",
        description="Conformance and stress tests for NN drivers.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=exit_status_help(),
    )
    from nnconform import __version__

    p.add_argument("--version", action="version", version=f"nnconform {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser(
        "run",
        help="run conformance suites against a driver and write a report",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=RUN_EPILOG,
    )
    add_options(r, "run")
    r.add_argument(
        "--suite",
        action="append",
        help="suite to run (repeatable; default: all). Available: " + ", ".join(available_suites()),
    )
    r.add_argument("--vectors", default=None, help="AOSP vectors directory for the vectors suite")
    r.add_argument(
        "--variants",
        default=None,
        metavar="MODE",
        help="vectors suite execution matrix: rotate (default: plain sync plus one variant per "
        "vector, chosen from the seed), all (the full VTS matrix), none (plain sync only), "
        "or a comma list of kinds: "
        "general, dynamic_shape, fenced, memory_domain, quant_coupling, deadline, priority, "
        "caching, infinite_loop, mutation, request_mutation",
    )
    r.add_argument(
        "--cluster-grace",
        type=_duration,
        default=None,
        metavar="DURATION",
        help="with --cluster: how long the run waits for a lost scheduler to come back "
        "before it ends as interrupted, for --resume to finish (default 60)",
    )
    r.add_argument(
        "--no-partition",
        action="store_true",
        help="skip every case the driver supports only in part (default: run it partitioned, "
        "the driver's operations on the driver and the rest on the reference)",
    )
    r.add_argument(
        "--no-probe",
        action="store_true",
        help="no capability probe at the start of the run, and the random suite draws from "
        "every operation, not only those the driver claims",
    )
    r.add_argument(
        "--expected-failures",
        metavar="FILE",
        default=None,
        help="JSON list of test-id patterns expected to fail, with reasons: they are XFAIL; "
        'one that passes is XPASS and fails the run unless marked "strict": false',
    )
    r.add_argument(
        "--max-skip-ratio",
        type=float,
        default=None,
        metavar="R",
        help="exit 1 when more than this share (0..1) of the cases SKIP (a run that tests nothing)",
    )
    r.add_argument(
        "--only-supported",
        action="store_true",
        help="run only the cases whose every operation the driver claims (and the invalid "
        "models it must reject); the rest are not run instead of SKIP rows",
    )
    r.add_argument(
        "--progress",
        type=float,
        default=None,
        metavar="SECONDS",
        help="print cases done and an estimate of the time left every SECONDS (default 30; 0: never)",
    )
    r.add_argument(
        "--history",
        metavar="DIR",
        default=None,
        help="append this run's summary to DIR/history.jsonl; report.html shows the trend across runs",
    )
    r.add_argument(
        "--lf",
        "--last-failed",
        dest="last_failed",
        action="store_true",
        help="rerun only the cases that failed in the last run into --report-dir",
    )
    r.add_argument(
        "--ff",
        "--failed-first",
        dest="failed_first",
        action="store_true",
        help="run the cases that failed in the last run into --report-dir first",
    )
    sub.add_parser("drivers", help="list installed drivers and their capabilities")
    v = sub.add_parser("validate", help="check a spec file (format and model validity)")
    v.add_argument("file")
    c = sub.add_parser("coverage", help="operation x data type coverage of the reference executor")
    c.add_argument("--results", help="a results.jsonl of a vectors run, to count vectors passed")
    c.add_argument("--format", choices=("md", "csv"), default="md")
    c.add_argument("--write-readme", metavar="README", help="replace the table between the coverage markers")
    df = sub.add_parser(
        "diff",
        help="compare two runs: new failures, fixed, flaky, still failing",
        description="Compare run B with the earlier run A (report directories or results.jsonl "
        "files). Exit status 1 when B has new failures, else 0.",
    )
    df.add_argument("run_a")
    df.add_argument("run_b")
    df.add_argument("--html", metavar="FILE", help="also write the comparison as a self-contained HTML page")
    df.add_argument("--limit", type=int, default=50, help="cases listed per class in the text (default 50)")
    vs = sub.add_parser("vectors", help="the golden vectors: import AOSP specs, unpack or list the bundled copy")
    vsub = vs.add_subparsers(dest="vectors_command", required=True)
    vi = vsub.add_parser(
        "import",
        help="convert the *.mod.py test specs of an AOSP checkout into vectors JSON, "
        "with that checkout's own test generator",
    )
    vi.add_argument("aosp_dir", help="packages/modules/NeuralNetworks, frameworks/ml, or an AOSP tree root")
    vi.add_argument("out_dir", help="vectors directory to write (one folder per spec folder)")
    vi.add_argument("--folder", action="append", help="only this spec folder, e.g. AIDL_V3 (repeatable)")
    vi.add_argument("--generator", help="path of test_generator.py (default: found in the checkout)")
    vi.add_argument("--specs", help="directory of the spec folders (default: found in the checkout)")
    vu = vsub.add_parser("unpack", help="write the bundled vectors into a directory (e.g. to add imported folders)")
    vu.add_argument("dir")
    vl = vsub.add_parser("list", help="folders, feature levels and case counts of a vectors tree")
    vl.add_argument(
        "--vectors", default=None, help="vectors directory (default: $NNCONFORM_VECTORS or the bundled copy)"
    )
    rp = sub.add_parser("replay", help="re-run a spec file (e.g. a dumped failure) on a driver")
    rp.add_argument("spec")
    add_options(rp, "replay")
    rp.add_argument("-v", "--verbose", action="store_true", help="list every mismatch")
    im = sub.add_parser("import", help="convert a .tflite model into a spec file (needs the [tflite] extra)")
    im.add_argument("model", help="a .tflite flatbuffer")
    im.add_argument("-o", "--output", help="spec file to write (default: MODEL.spec.json)")
    im.add_argument(
        "--examples",
        type=int,
        default=1,
        help="seeded examples with the reference's outputs to include (default 1; 0 for none)",
    )
    add_options(im, "import")
    md = sub.add_parser("models", help="real models: the built-in MobileNets and the mediapipe zoo")
    msub = md.add_subparsers(dest="models_command", required=True)
    mf = msub.add_parser(
        "fetch", help="pip download mediapipe==0.10.14 --no-deps and extract its .tflite models into the cache"
    )
    mf.add_argument("--wheel", help="extract from this mediapipe wheel instead of downloading it")
    msub.add_parser("list", help="built-in models and fetched zoo models (with what imports)")
    bn = sub.add_parser(
        "bench",
        help="benchmark real models per driver: latency with confidence intervals, start-up, memory, "
        "audits, accuracy on golden data, fall-back gate, verdicts against a baseline",
    )
    add_options(bn, "bench")
    bn.add_argument(
        "--models",
        action="append",
        help="model names, or the groups builtin / zoo (comma-separated, "
        "repeatable; default: all, see `nnconform models list`)",
    )
    bn.add_argument("--warmup", type=int, default=5, help="untimed executions first (default 5)")
    bn.add_argument(
        "--iterations",
        type=int,
        default=50,
        help="timed single-stream queries per model at least (default 50; raised to what --percentile needs)",
    )
    bn.add_argument("--inputs", type=int, default=4, help="golden inputs per model for accuracy (default 4)")
    pb = sub.add_parser(
        "probe",
        help="capability probe: what the driver claims vs what works, per operation "
        "x data type x rank (exit 1 on an over-claim, a crash or a hang)",
    )
    add_options(pb, "probe")
    pb.add_argument("--samples", type=int, default=2, help="one-operation models per cell (default 2)")
    pb.add_argument("--ops", help="only these operations, comma-separated (default: every covered one)")
    pb.add_argument("--force", action="store_true", help="the same as --reprobe")
    st = sub.add_parser("stress", help="MLTS-style crash tests and random graphs in subprocess sandboxes")
    add_options(st, "stress")
    st.add_argument("--tests", action="append", help="comma-separated stress tests (default: all; see --list)")
    st.add_argument("--case", action="append", help="run only this case, TEST#INDEX (repeatable; replay)")
    st.add_argument("--duration", action="append", help="seconds per case of a test, TEST=SECONDS (repeatable)")
    st.add_argument("--threads", type=int, default=4, help="parallel-inference threads")
    st.add_argument("--processes", type=int, default=3, help="multi-process clients")
    st.add_argument("--client-threads", type=int, default=2, help="threads per multi-process client")
    st.add_argument(
        "--hang-grace",
        type=_duration,
        metavar="DURATION",
        default=10.0,
        help="seconds past a case's duration before HANG",
    )
    st.add_argument(
        "--perf-threshold",
        type=float,
        default=0.5,
        help="performance-degradation limit, on the driver's share of the slowdown and on latency "
        "growth over the case's compilations (0.5 = +50%%)",
    )
    st.add_argument("--leak-threshold-mb", type=float, default=32.0, help="RSS growth that counts as a leak")
    st.add_argument("--random-pause", type=float, default=0.0, help="pause after each random-graph case (s)")
    from nnconform.stress import SOAK_EXECUTIONS

    st.add_argument(
        "--soak-executions",
        type=int,
        default=SOAK_EXECUTIONS,
        help=f"execution-soak: executions of one prepared model (default {SOAK_EXECUTIONS:,}, past "
        "counters that wrap at 2^16); the case also ends at its --duration",
    )
    st.add_argument(
        "--worker-leak-mb",
        type=float,
        default=512.0,
        help="a worker's RSS growth over its whole life that fails the run (MiB, default 512)",
    )
    st.add_argument(
        "--exhaustive-shards",
        type=int,
        default=256,
        help="the exhaustive test cuts the suite's tier in this many shards and runs one per case, "
        "case k of seed S the shard (S + k) mod N + 1 (default 256)",
    )
    st.add_argument(
        "--exhaustive-tier",
        choices=("full", "quick"),
        default="full",
        help="the exhaustive suite's tier the shards cut (default full)",
    )
    st.add_argument(
        "--no-probe",
        action="store_true",
        help="random graphs draw fp32 over every operation instead of the cells the driver claims "
        "(asked once per run, for every data type)",
    )
    st.add_argument("--report-only", action="store_true", help="rebuild CSV/HTML from the journal and exit")
    st.add_argument("--list", action="store_true", help="list the stress tests and exit")
    fz = sub.add_parser(
        "fuzz",
        help="feed a driver arbitrary, mostly invalid models; bucket crashes, hangs, "
        "out-of-memory and slow cases with a minimal replayable spec each",
    )
    add_options(fz, "fuzz")
    fz.add_argument("--cases", type=int, default=None, help="run exactly this many cases instead of a budget")
    fz.add_argument(
        "--slow",
        type=_duration,
        default=3.0,
        metavar="DURATION",
        help="a case slower than this is a SLOW finding (default 3s)",
    )
    # Every command exits by the one table; each command's --help prints it.
    for parser in _subparsers(p):
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        parser.epilog = ((parser.epilog.rstrip() + "\n\n") if parser.epilog else "") + exit_status_help()
    return p


def _subparsers(p: argparse.ArgumentParser):
    for action in p._subparsers._group_actions if p._subparsers else ():
        # a sub-parsers action's choices: command name -> its parser
        for sp in dict.fromkeys(cast("dict[str, argparse.ArgumentParser]", action.choices).values()):
            yield sp
            yield from _subparsers(sp)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # `nnconform coverage | head`: the reader went away.  Point stdout at /dev/null so the
        # interpreter's final flush does not raise again, and end quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_FAIL


def choose_driver(a: argparse.Namespace, recorded: str | None = None, source: str = "") -> str:
    """The driver a command runs, said on stderr when it was not given: ``replay`` takes the one
    its spec file records (``recorded``, read from ``source``), ``--resume`` the one the report
    directory's run.json records (a different --driver is refused: a resumed run never mixes
    drivers), and everything else the bundled reference.  ValueError (a usage error) for a
    refused combination."""
    given = a.driver
    if getattr(a, "resume", False):
        from nnconform.artifacts import read_run

        run = read_run(a.report_dir)
        recorded = run.get("driver") if isinstance(run.get("driver"), str) else None
        if recorded is None and isinstance(run.get("options"), dict):  # the fuzzer's record
            recorded = run["options"].get("driver") if isinstance(run["options"].get("driver"), str) else None
        source = f"{_shown(a.report_dir, 200)}/run.json"
        if given is not None and recorded is not None and given != recorded:
            from nnconform.driver.loader import resolve_driver_spec

            if resolve_driver_spec(given) != recorded:
                raise ValueError(
                    f"--resume: {source} records driver '{_shown(recorded, 200)}', not '{_shown(given, 200)}'; "
                    f"a resumed run keeps its driver (leave out --driver, or start a new run in another --report-dir)"
                )
    if given is not None:
        return str(given)
    if recorded:
        a.driver_note = f"driver '{_shown(recorded, 200)}', as recorded in {source} (give --driver to choose another)"
        return recorded
    if not getattr(a, "resume", False):  # (a resume with no record fails on its own, in one line)
        a.driver_note = "no --driver given: using the bundled reference driver"
    return "reference"


def _ready_to_start(a: argparse.Namespace) -> int | None:
    """The last checks of stress and fuzz before their first case: --cluster's options and a
    driver that loads (one line now rather than a dead worker or host later; a resumed run's
    recorded driver is loaded by the run).  The exit status of a problem, else None, and the
    driver choice is said."""
    problem = _check_cluster(a)
    if problem:
        return _err(problem)
    if not a.resume:
        from nnconform.errors import DriverLoadError

        try:
            _check_driver(a.driver, in_process=False)
        except DriverLoadError as e:
            return _err(str(e))
    _say_driver(a)
    return None


def _say_driver(a: argparse.Namespace) -> None:
    """The driver choice made for the user, said once the command has checked its input and
    starts (a usage error stays one line)."""
    note = getattr(a, "driver_note", None)
    if note:
        print(f"nnconform: {note}", file=sys.stderr, flush=True)
        a.driver_note = None


def _main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        k = argv.index("--")
        argv, extra = argv[:k], argv[k + 1 :]
    try:
        a = build_parser().parse_args(argv)
    except UsageError as e:
        return _err(str(e))
    from nnconform.driver.loader import resolve_driver_spec

    if getattr(a, "command", None) in ("run", "probe", "stress", "fuzz"):  # (replay: once its spec is read)
        try:
            a.driver = choose_driver(a)
        except ValueError as e:
            return _err(str(e))

    # A driver file given by a relative path is made absolute here, once: driver hosts, sandbox
    # workers and cluster workers may run in another directory, and reports name it so too.
    if isinstance(getattr(a, "driver", None), str):
        a.driver = resolve_driver_spec(a.driver)
    elif isinstance(getattr(a, "driver", None), list):  # bench: --driver is repeatable
        a.driver = [resolve_driver_spec(d) for d in a.driver]
    from nnconform.reference.kernels.heap import check_environment

    try:
        check_environment()  # before any command builds an executor that would apply it
    except ValueError as e:
        return _err(str(e))
    if a.command == "run":
        return cmd_run(a, extra)
    if a.command == "drivers":
        return cmd_drivers(a)
    if a.command == "validate":
        return cmd_validate(a)
    if a.command == "replay":
        return cmd_replay(a)
    if a.command == "coverage":
        return cmd_coverage(a)
    if a.command == "stress":
        with _interrupt_on_termination():  # (ends as interrupted, like run's)
            return cmd_stress(a)
    if a.command == "probe":
        return cmd_probe(a)
    if a.command == "fuzz":
        with _interrupt_on_termination():
            return cmd_fuzz(a)
    if a.command == "vectors":
        return cmd_vectors(a)
    if a.command == "diff":
        return cmd_diff(a)
    if a.command == "import":
        return cmd_import(a)
    if a.command == "models":
        return cmd_models(a)
    if a.command == "bench":
        return cmd_bench(a)
    return _err(f"unknown command {a.command}")


if __name__ == "__main__":
    sys.exit(main())
