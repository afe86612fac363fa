"""performance-degradation measures the driver, not the machine (issue 47, point 1): the
compile loop is compared with a control loading the machine alike without the driver, in
interleaved windows, and only a slowdown with confidence above the limit fails.  A second
check fits the control windows' latency, relative to the same model on the reference executor
timed right after each execution, against the compilations made so far: it catches a driver
whose latency grows with every compilation, which the first check cancels out.  The broken
drivers' effects are huge (a compilation holds the lock inference needs for 50 ms; every
execution checksums 16 KiB per compilation ever made), and both checks compare the driver
with something the same load falls on, so no verdict here depends on how loaded the machine
is."""

import numpy as np
from helpers import double, double_module

from nnconform.drivers.reference import ReferenceDevice
from nnconform.isolation.sandbox import CaseContext
from nnconform.stress.runner import StressConfig, run_stress
from nnconform.stress.tests import StressOptions, growth_interval, performance_degradation, ratio_interval
from nnconform.verdict.results import read_results

BROKEN = double("broken_stress")


def _ctx(device):
    return CaseContext(device, "x", "performance-degradation#0", 1, 120.0)


def test_ratio_interval_is_seeded_and_brackets_the_mean():
    x = np.log(np.array([1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 1.02, 0.98]))
    a, b = ratio_interval(x, seed=5), ratio_interval(x, seed=5)
    assert a == b
    point, lo, hi = a
    assert lo <= point <= hi and lo < 0 < hi
    # a constant ratio has a zero-width interval at that ratio
    p, lo, hi = ratio_interval(np.full(8, np.log(3.0)), seed=1)
    assert np.isclose(lo, np.log(3.0)) and np.isclose(hi, np.log(3.0))


def test_growth_interval_is_seeded_and_recovers_a_known_growth():
    after = np.array([5, 12, 20, 26, 35, 41, 50, 57], dtype=float)
    noise = np.random.default_rng(0).normal(0.0, 0.02, after.size)
    # latency doubling from the first window to the last (log-linear in the compilations)
    grows = np.log(2.0) * (after - after[0]) / np.ptp(after) + noise
    a, b = growth_interval(after, grows, seed=7), growth_interval(after, grows, seed=7)
    assert a == b
    point, lo, hi = a
    assert lo <= point <= hi and 0.8 < lo and hi < 1.25
    # flat up to noise: an interval around zero
    point, lo, hi = growth_interval(after, noise, seed=7)
    assert lo < 0 < hi and abs(point) < 0.1
    # windows that all came after as many compilations: no slope, no verdict
    assert growth_interval(np.full(8, 9.0), noise, seed=7) is None


def test_reference_is_not_failed_and_reports_the_interval():
    v = performance_degradation(_ctx(ReferenceDevice()), warmup=0.2, duration=1.6, threshold=0.5, seed=3)
    assert v.verdict == "SUCCESS", v.reason
    assert "interval" in v.reason and "control" in v.reason and "compilations" in v.reason
    e = v.extra
    assert e["degradation_low"] <= e["degradation"] <= e["degradation_high"]
    assert e["pairs"] == 8 and e["compiles"] > 0 and e["latency_control_ms"] > 0
    assert e["growth_low"] <= e["growth"] <= e["growth_high"] < 0.5
    first, last = e["growth_compiles"]
    assert 0 < first < last <= e["compiles"]


def test_compilation_holding_the_inference_lock_fails():
    dev = double_module("broken_stress").CompileBlocksInference()
    v = performance_degradation(_ctx(dev), warmup=0.2, duration=1.6, threshold=0.5, seed=3)
    assert v.verdict == "FAILURE", v.reason
    # every compilation stalls inference for 50 ms of each ~70 ms cycle: far past +50%
    assert v.extra["degradation_low"] > 0.5, v.extra


def test_latency_growing_with_compilations_fails_on_growth_not_on_share():
    dev = double_module("broken_stress").LatencyGrowsWithCompilations()
    v = performance_degradation(_ctx(dev), warmup=0.2, duration=1.6, threshold=0.5, seed=3)
    assert v.verdict == "FAILURE", v.reason
    assert v.reason.startswith("latency grows with the number of compilations"), v.reason
    # every compilation adds a 16 KiB checksum to each execution: far past +50% over the case
    assert v.extra["growth_low"] > 0.5, v.extra
    # the growth slows the control windows as much as the compiling ones: the first check
    # alone would have let the driver through
    assert v.extra["degradation_low"] < 0.5, v.extra


def test_compile_lock_driver_fails_through_the_stress_runner(tmp_path):
    cfg = StressConfig(
        driver=BROKEN + "CompileBlocksInference",
        budget_s=600,
        tests=["performance-degradation"],
        workers=1,
        seed=4,
        report_dir=str(tmp_path / "run"),
        cases=["performance-degradation#0"],
        options=StressOptions(durations={"performance-degradation": 1.6}, hang_grace=120),
    )
    assert run_stress(cfg) == 1
    [row] = [r for r in read_results(tmp_path / "run" / "results.jsonl") if r.test_id == "performance-degradation#0"]
    assert row.outcome == "FAILURE", row.message
    assert "interval" in row.message and row.extra["degradation_low"] > 0.5


def test_latency_growth_driver_fails_through_the_stress_runner_and_the_reference_does_not(tmp_path):
    def run(driver: str, name: str):
        cfg = StressConfig(
            driver=driver,
            budget_s=600,
            tests=["performance-degradation"],
            workers=1,
            seed=4,
            report_dir=str(tmp_path / name),
            cases=["performance-degradation#0"],
            options=StressOptions(durations={"performance-degradation": 1.6}, hang_grace=120),
        )
        code = run_stress(cfg)
        [row] = [r for r in read_results(tmp_path / name / "results.jsonl") if r.test_id == "performance-degradation#0"]
        return code, row

    code, row = run(BROKEN + "LatencyGrowsWithCompilations", "broken")
    assert code == 1 and row.outcome == "FAILURE", row.message
    assert "grows with the number of compilations" in row.message and row.extra["growth_low"] > 0.5
    code, row = run("reference", "reference")
    assert code == 0 and row.outcome == "SUCCESS", row.message
    assert row.extra["growth_low"] < 0.5


# ---- budgets cover every test first (issue 47, point 6) ------------------------------------


def test_budget_fit_names_the_tests_a_short_budget_cannot_reach():
    from nnconform.stress.runner import TESTS, budget_fit, build_plan, plan_counts

    o = StressOptions()
    plan = build_plan(plan_counts(list(TESTS), 30, 1, o), 5, o)
    # every test's first case comes before any second case
    firsts = [k for k, c in enumerate(plan) if c.index == 0]
    assert firsts == list(range(len(TESTS)))
    late, needed = budget_fit(plan, 30, 1, o)
    # shortest first: the 121 s soak comes last, after ~64 s of the others' first cases
    assert "execution-soak" in late and "leak" in late and "random-model-load" not in late
    assert 30 < needed < 120
    late_big, needed_big = budget_fit(plan, needed + 1, 1, o)
    assert late_big == [] and needed_big == needed
    # two workers lay the first cases side by side: less wall time is needed
    assert budget_fit(plan, 30, 2, o)[1] < needed


def test_a_short_budget_names_the_unreachable_tests_before_the_first_case(tmp_path):
    import io
    import json

    out = io.StringIO()
    cfg = StressConfig(
        driver="reference",
        budget_s=0.25,  # random-model-load's first case is 0.3 s nominal
        tests=["random-model-load", "compile-leak"],
        workers=1,
        seed=1,
        report_dir=str(tmp_path / "run"),
        options=StressOptions(durations={"compile-leak": 0.5}, hang_grace=120),
        claims=False,
    )
    run_stress(cfg, out=out)
    text = out.getvalue()
    warn = text.index("not expected to reach the first case of: compile-leak")
    assert warn < text.index("\ntest ")  # before the verdict table
    manifest = json.loads((tmp_path / "run" / "run.json").read_text())
    assert manifest["first_cases"]["not_expected"] == ["compile-leak"]


# ---- a random-graph CRASH is blamed on one operation and shrunk (issue 46, point 5) --------


def test_shrink_bisects_to_the_operation_and_its_smallest_failing_graph():
    from nnconform.isolation.sandbox import SandboxResult
    from nnconform.stress.shrink import shrink
    from nnconform.stress.tests import TESTS, graph_of
    from nnconform.stress.tests import StressOptions as O

    params = TESTS["random-inference"].params(3, 11, O())
    rm = graph_of(params)
    ops = rm.model.main.operations
    target = next(n for n in range(len(ops) // 2, len(ops)) if ops[n].name == "SUB")
    crash = SandboxResult("CRASH", "worker killed by SIGABRT", signal=6)
    tried = []

    def try_keep(keep):  # a driver that aborts on any graph holding operation ``target``
        tried.append(list(keep))
        return crash if target in keep else SandboxResult("SUCCESS")

    s = shrink(rm.model, rm.inputs, crash, try_keep)
    assert s is not None and s.index == target and s.operation == "SUB" and s.keep == [target]
    assert s.complete and s.of == len(ops) and s.tries == len(tried) <= 14
    assert tried[:2] == [list(range(len(ops)))] * 2  # the whole graph first: is the failure repeatable?
    assert [op.name for op in s.model.main.operations] == ["SUB"]
    assert len(s.inputs) == len(s.model.main.input_indexes)
    # a crash by another signal is not the same failure: it did not repeat, nothing is blamed
    assert shrink(rm.model, rm.inputs, SandboxResult("CRASH", "x", signal=11), try_keep) is None
    # nor is a failure that comes back once in two (a flaky driver)
    flips = iter([crash, SandboxResult("SUCCESS")] * 3)
    assert shrink(rm.model, rm.inputs, crash, lambda keep: next(flips)) is None


def test_abort_in_sub_inside_a_large_random_graph_is_blamed_on_sub_and_shrunk(tmp_path):
    import json

    from nnconform.ir.spec import load_spec

    rdir = tmp_path / "run"
    cfg = StressConfig(
        driver=BROKEN + "AbortsInSub",
        budget_s=600,
        tests=["random-inference"],
        workers=1,
        seed=1,
        report_dir=str(rdir),
        cases=["random-inference#1"],  # a 514-operation fp32 graph with its first SUB at 214
        options=StressOptions(hang_grace=120),
        claims=False,
    )
    assert run_stress(cfg) == 1
    [row] = read_results(rdir / "results.jsonl")
    assert row.outcome == "CRASH" and row.extra["signal"] == 6
    assert (row.blamed_operation, row.blamed_data_type) == ("SUB", "fp32")
    assert row.operations == ["SUB"] and row.data_types == ["fp32"]  # the matrix paints one cell
    assert row.extra["shrunk"]["operations"] == 1 and row.extra["shrunk"]["from"] > 500
    spec = load_spec(row.spec_path)
    assert [op.name for op in spec.model.main.operations] == ["SUB"]
    assert row.extra["full_spec"] and row.extra["full_spec"] != row.spec_path
    summary = json.loads((rdir / "summary.json").read_text())
    [bucket] = summary["buckets"]
    assert bucket["operation"] == "SUB" and bucket["data_type"] == "fp32" and "SIGABRT" in bucket["message"]
    assert summary["per_data_type"] == {"fp32": {"CRASH": 1}}


def test_hang_in_sub_inside_a_random_graph_is_blamed_on_sub(tmp_path):
    rdir = tmp_path / "run"
    cfg = StressConfig(
        driver=BROKEN + "HangsInSub",
        budget_s=600,
        tests=["random-inference"],
        workers=1,
        seed=10,
        report_dir=str(rdir),
        cases=["random-inference#0"],  # 9 operations, the SUB at 7: each hanging try costs 2 + 6 s
        options=StressOptions(hang_grace=6),
        claims=False,
    )
    assert run_stress(cfg) == 1
    [row] = read_results(rdir / "results.jsonl")
    assert row.outcome == "HANG"
    assert (row.blamed_operation, row.blamed_data_type) == ("SUB", "fp32"), row.message
    assert row.operations == ["SUB"] and row.extra["shrunk"]["from"] == 9
    assert "HANG in SUB fp32" == row.extra["blamed_message"]
