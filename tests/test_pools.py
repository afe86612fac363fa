"""Request memory pools (nnconform.isolation.pools, issue 48): each defect of how a driver
treats request memory is caught by its named check, behind a driver host and in-process; the
reference and an exact in-place writer pass; no segment is left in /dev/shm."""

from __future__ import annotations

import os

import numpy as np
import pytest
from helpers import add_model, double, double_module

from nnconform.drivers.reference import ReferenceDevice
from nnconform.ir import ModelBuilder, Request
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.isolation import pools
from nnconform.isolation.proxy import PoolViolation, open_isolated
from nnconform.reference.executor import Executor
from nnconform.verdict.runner import run_case
from nnconform.vts.checks import dynamic_variant

_mod = double_module("broken_pools")
FP32 = add_model()
# quant8 outputs of 165 (0xA5, the one-byte poison) are real values, not unwritten elements
QUANT = add_model(T.TENSOR_QUANT8_ASYMM, (2, 3), scale=1.0, zp=0)
FP32_IN = [np.arange(4, dtype=np.float32).reshape(2, 2), np.ones((2, 2), np.float32)]
QUANT_IN = [np.full((2, 3), 100, np.uint8), np.array([[65, 65, 1, 2, 65, 3]], np.uint8).reshape(2, 3)]

EXPECTED = {
    "ScribblesInputs": "inputs_unchanged: the driver tried to write input 0",
    "OverrunsOutput": "guard_bytes: the driver wrote past the end of output 0",
    "UnwrittenTail": "output_written: the driver wrote output 0 in place but left 1 of",
    "WritesThenRejects": "outputs_untouched: the driver rejected the request as INVALID_ARGUMENT but wrote to output 0",
}


def _cases():
    for model, inputs in ((FP32, FP32_IN), (QUANT, QUANT_IN)):
        yield model, inputs, Executor(model).run(inputs)


@pytest.fixture(scope="module")
def hosts():
    opened = {}

    def get(name):
        if name not in opened:
            opened[name] = open_isolated(double("broken_pools", name) if name != "reference" else "reference")
        return opened[name]

    yield get
    for d in opened.values():
        d.close()


@pytest.mark.parametrize("name", ["reference", "InPlace"])
def test_honest_drivers_pass_behind_a_host_and_in_process(name, hosts):
    for device in (hosts(name), ReferenceDevice() if name == "reference" else _mod.InPlace()):
        for model, inputs, expected in _cases():
            for _ in range(5):  # the fourth execution of a host uses unaligned offsets
                got = run_case(device, model, inputs, expected)
                assert got.outcome == "PASS", got.message


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_defect_is_named_behind_a_host_and_in_process(name, hosts):
    for device in (hosts(name), getattr(_mod, name)()):
        for model, inputs, expected in _cases():
            got = run_case(device, model, inputs, expected)
            assert got.outcome == "FAIL"
            assert got.message.startswith(EXPECTED[name]), got.message


def test_unwritten_reports_the_first_index(hosts):
    pm = hosts("UnwrittenTail").prepare(FP32)
    with pytest.raises(PoolViolation, match=r"left 1 of 4 element\(s\) unwritten .*first at index 3"):
        pm.execute(Request.from_arrays(FP32, FP32_IN))


def test_overrun_says_how_far(hosts):
    pm = hosts("OverrunsOutput").prepare(QUANT)
    with pytest.raises(PoolViolation, match=r"1 byte\(s\) after its 6-byte region \(1 element of uint8\)"):
        pm.execute(Request.from_arrays(QUANT, QUANT_IN))


def test_a_native_write_to_an_input_faults_and_the_crash_says_why():
    device = open_isolated(double("broken_pools", "ScribblesNatively"))
    try:
        model, inputs, expected = next(_cases())
        got = run_case(device, model, inputs, expected)
        assert got.outcome == "CRASH"
        assert "SIGSEGV" in got.message and "inputs_unchanged" in got.message, got.message
        # the next case gets a fresh host, and the reference-computed part still works there
        assert device.liveness().startswith("liveness OK")
    finally:
        device.close()


def test_a_far_overrun_faults_on_the_guard_page_and_the_crash_names_the_output():
    device = open_isolated(double("broken_pools", "OverrunsFar"))
    try:
        for model, inputs, expected in _cases():
            got = run_case(device, model, inputs, expected)
            assert got.outcome == "CRASH", got.message
            assert "SIGSEGV" in got.message, got.message
            assert "guard_bytes: the driver wrote past the end of output 0: over all" in got.message, got.message
            assert "inaccessible page" in got.message, got.message
        # asynchronous executions fault the same way, and the future says so
        model, inputs, _ = next(_cases())
        pm = device.prepare(model)
        with pytest.raises(Exception, match="guard_bytes: the driver wrote past the end of output 0"):
            pm.execute_async(Request.from_arrays(model, inputs)).result(timeout=60)
        assert device.liveness().startswith("liveness OK")
    finally:
        device.close()


@pytest.mark.parametrize("odd,outputs_first", [(False, False), (True, False), (False, True), (True, True)])
def test_guard_pages_follow_each_output_on_a_page_boundary(odd, outputs_first):
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [3, 5])
    outs = [b.output(T.TENSOR_FLOAT32, [3, 5]) for _ in range(3)]
    for o in outs:
        b.operation(Op.RELU, [x], [o])
    model = b.build()
    request = Request.from_arrays(model, [np.ones((3, 5), np.float32)])
    placement = pools.plan(request, pools.output_specs(model, request), odd, outputs_first, guard_pages=True)
    pages = [o.page for o in placement.outputs]
    assert len(set(pages)) == 3 and all(p % pools.PAGE == 0 for p in pages)
    spans = [(r.offset, r.offset + r.nbytes) for r in placement.inputs]
    for o in placement.outputs:
        assert o.offset + o.size + o.guard == o.page  # the guard bytes run up to the page
        assert pools.GUARD <= o.guard < pools.GUARD + pools.PAGE
        spans += [(o.offset, o.page + pools.PAGE)]
    spans.sort()
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # nothing overlaps a guard page
    assert placement.total >= max(pages) + pools.PAGE
    buf = np.zeros(placement.total, np.uint8)
    pools.fill(buf, placement, request)
    pools.check_guards(buf, placement)
    o = placement.outputs[1]
    buf[o.offset + o.size + o.guard - 1] ^= 0xFF  # the last guard byte before the page
    with pytest.raises(PoolViolation, match=f"output 1: {o.guard} byte\\(s\\) or more after its 60-byte region"):
        pools.check_guards(buf, placement)
    assert pools.fault_message(buf, placement).startswith("guard_bytes: the driver wrote")


def test_a_model_prepared_from_a_cache_has_output_regions(hosts):
    device = hosts("OverrunsOutput")
    token = bytes(range(32))
    device.prepare(QUANT, cache_token=token).release()
    pm = device.prepare_from_cache(token)  # sized by the model last prepared under this token
    with pytest.raises(PoolViolation, match=r"guard_bytes: .* 1 byte\(s\) after its 6-byte region"):
        pm.execute(Request.from_arrays(QUANT, QUANT_IN))
    pm.release()
    device.prepare(FP32, cache_token=token).release()  # the token now names another model
    pm = device.prepare_from_cache(token)
    with pytest.raises(PoolViolation, match=r"guard_bytes: .* 4 byte\(s\) after its 16-byte region"):
        pm.execute(Request.from_arrays(FP32, FP32_IN))
    pm.release()
    ref = hosts("reference")
    ref.prepare(FP32, cache_token=token).release()
    pm = ref.prepare_from_cache(token)
    got = pm.execute(Request.from_arrays(FP32, FP32_IN))
    assert np.array_equal(got.outputs[0], Executor(FP32).run(FP32_IN)[0])
    pm.release()


@pytest.mark.parametrize("isolated", [True, False])
def test_outputs_of_unknown_dimensions_get_regions_sized_by_the_expected_output(isolated, hosts):
    dyn = dynamic_variant(FP32)  # the output's dimensions unknown to the driver
    assert dyn is not None and 0 in dyn.main.operands[dyn.main.output_indexes[0]].dimensions
    expected = Executor(FP32).run(FP32_IN)
    request = pools.capacities_from(dyn, Request.from_arrays(dyn, FP32_IN), expected)
    assert request.outputs[0].capacity == 16  # 2x2 float32, as VTS sizes such a buffer
    assert pools.output_specs(dyn, request)[0] == pools.OutSpec(np.dtype(np.float32), None, 16)
    for name, want in (("UnwrittenTail", "output_written: "), ("OverrunsOutput", "guard_bytes: ")):
        device = hosts(name) if isolated else getattr(_mod, name)()
        got = run_case(device, dyn, FP32_IN, expected)
        assert got.outcome == "FAIL" and got.message.startswith(want), got.message
    device = hosts("InPlace") if isolated else _mod.InPlace()
    assert run_case(device, dyn, FP32_IN, expected).outcome == "PASS"


def test_inputs_given_to_the_driver_are_read_only_views_and_outputs_have_buffers(hosts):
    seen = {}

    class Spy(ReferenceDevice):
        def prepare(self, model, **kw):
            pm = super().prepare(model, **kw)
            real = pm.execute

            def execute(request, **k):
                seen["inputs_writeable"] = [a.value.flags.writeable for a in request.inputs]
                seen["buffers"] = [None if a.buffer is None else a.buffer.shape for a in request.outputs]
                return real(request, **k)

            pm.execute = execute
            return pm

    model, inputs, expected = next(_cases())
    assert run_case(Spy(), model, inputs, expected).outcome == "PASS"
    assert seen == {"inputs_writeable": [False, False], "buffers": [(2, 2)]}


def test_a_pool_round_trip_checks_every_region():
    model, inputs, _ = next(_cases())
    request = Request.from_arrays(model, inputs)
    placement = pools.plan(request, pools.output_specs(model, request), odd=True)
    assert all(r.offset % pools.ALIGN for r in placement.inputs + placement.outputs)  # unaligned
    buf = np.zeros(placement.total, np.uint8)
    pools.fill(buf, placement, request)
    pools.check_inputs(buf, placement)
    pools.check_guards(buf, placement)
    o = placement.outputs[0]
    assert pools.unwritten(buf, o, o.size).tolist() == [0, 1, 2, 3]
    buf[placement.inputs[1].offset + 5] ^= 1
    with pytest.raises(PoolViolation, match="inputs_unchanged: the driver wrote to input 1, .*first at index 1"):
        pools.check_inputs(buf, placement)


def _our_segments() -> set[str]:
    """The pool memfds this process holds open (their descriptors' link names)."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the descriptor listdir itself used, closed meanwhile
        if link.startswith(f"/memfd:{pools.PREFIX}"):
            out.add(link)
    return out


def test_segments_are_closed_with_the_host_and_cannot_be_shrunk():
    before = _our_segments()
    device = open_isolated("reference")
    pm = device.prepare(FP32)
    for _ in range(3):
        pm.execute(Request.from_arrays(FP32, FP32_IN))
    assert _our_segments() - before  # the host's pool, reused
    seg = device._current.pools.free[0]
    fd = os.open(seg.path, os.O_RDWR)  # what the host (and its driver) can do with it
    try:
        with pytest.raises(OSError):
            os.ftruncate(fd, 0)  # sealed: a driver cannot pull the harness's mapping from under it
    finally:
        os.close(fd)
    device.close()
    assert _our_segments() == before


@pytest.mark.parametrize("name", ["reference", "InPlace", *sorted(EXPECTED)])
def test_async_and_burst_executions_are_checked_too(name, hosts):
    device = hosts(name)
    for model, inputs, expected in _cases():
        pm = device.prepare(model)
        burst = pm.configure_burst()
        for run in (
            lambda r: pm.execute_async(r).result(timeout=60),
            burst.execute,
        ):
            if name in EXPECTED:
                with pytest.raises(PoolViolation, match="^" + EXPECTED[name]):
                    run(Request.from_arrays(model, inputs))
            else:
                got = run(Request.from_arrays(model, inputs))
                assert all(np.array_equal(a, e) for a, e in zip(got.outputs, expected))
        if name not in EXPECTED:  # the doubles' defects live in execute, which fenced does not use
            for _ in range(3):
                got = pm.execute_fenced(Request.from_arrays(model, inputs), []).wait()
                assert all(np.array_equal(a, e) for a, e in zip(got.outputs, expected))


# ---- the default run catches each (subprocess runs of `nnconform run`, small selections) ---------


def _run(tmp_path, driver: str, suite: str, selection: str, *extra: str, status: int = 1) -> list[dict]:
    import json
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "nnconform", "run", "--driver", double("broken_pools", driver), "--suite", suite]
    cmd += ["--report-dir", str(tmp_path / "report"), "--seed", "1", *extra, "--", "-k", selection]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == status, r.stdout[-2000:] + r.stderr[-2000:]  # 1: failures found, nothing else
    return [json.loads(x) for x in (tmp_path / "report" / "results.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(
    "driver,suite,selection,test_id,message",
    [
        (
            "ScribblesInputs",
            "vectors",
            "V1_0/add_quant8 and not internal",
            "V1_0/add_quant8",
            EXPECTED["ScribblesInputs"],
        ),
        (
            "OverrunsOutput",
            "vectors",
            "V1_0/add_quant8 and not internal",
            "V1_0/add_quant8",
            EXPECTED["OverrunsOutput"],
        ),
        ("UnwrittenTail", "vectors", "V1_0/add_quant8 and not internal", "V1_0/add_quant8", EXPECTED["UnwrittenTail"]),
        ("MostRecentCache", "vts", "several_tokens", "vts/cache/several_tokens", "several_tokens: "),
        ("BurstSnapshots", "vts", "state", "vts/state/across_calls", "burst with buffer"),
    ],
)
def test_the_default_run_names_each_defect(tmp_path, driver, suite, selection, test_id, message):
    rows = {r["test_id"]: r for r in _run(tmp_path, driver, suite, selection)}
    assert rows[test_id]["outcome"] == "FAIL", rows[test_id]
    assert rows[test_id]["message"].startswith(message), rows[test_id]["message"]


def test_a_pool_set_keeps_few_bytes_for_reuse():
    ps = pools.PoolSet()  # segments are not touched here: no memory is used
    a, b = ps.acquire(300 << 20), ps.acquire(300 << 20)
    assert a.size == b.size == 304 << 20  # 16 MiB steps for large segments, not 512 MiB
    ps.release(a)
    ps.release(b)
    assert len(ps.free) == 1  # at most KEEP_BYTES kept
    kept = ps.free[0]
    assert ps.take_gone() == [(b if kept is a else a).id]  # the host is told to unmap the other
    assert ps.acquire(200 << 20) is kept  # reused
    small = [ps.acquire(1000) for _ in range(pools.KEEP_FREE + 2)]
    for s in small:
        ps.release(s)
    assert len(ps.free) == pools.KEEP_FREE
    ps.close()
    kept.close()


@pytest.mark.parametrize("driver", ["ScribblesInputs", "OverrunsOutput", "UnwrittenTail", "InPlace"])
def test_in_process_matrix_cells_are_checked_too(tmp_path, driver):
    """--in-process: the vectors matrix's cells (sync, async and burst here) run their
    executions through the harness's plain-buffer pools with the same named checks."""
    rows = _run(
        tmp_path,
        driver,
        "vectors",
        "V1_0/add_quant8 and not internal",
        "--in-process",
        "--no-probe",
        "--variants",
        "general",
        status=0 if driver == "InPlace" else 1,
    )
    cells = [r for r in rows if "[general-" in r["test_id"]]
    assert {r["test_id"].split("[")[1] for r in cells} >= {"general-async]", "general-burst]", "general-sync-timing]"}
    for r in cells:
        if driver == "InPlace":
            assert r["outcome"] == "PASS", r
        else:
            assert r["outcome"] == "FAIL", r
            assert r["message"].startswith(EXPECTED[driver].split(" input 0")[0]), r["message"]


def test_a_far_overrun_is_a_crash_naming_the_output_on_every_path_of_a_run(tmp_path):
    """Behind a host, sync, async and burst cells: the burst's release after the crash (its
    handle stale) must not replace the execution's verdict and explanation."""
    rows = _run(
        tmp_path,
        "OverrunsFar",
        "vectors",
        "V1_0/add_quant8 and not internal",
        "--no-probe",
        "--variants",
        "general",
    )
    assert {r["test_id"].split("[")[-1] for r in rows} >= {"general-async]", "general-burst]", "general-sync-timing]"}
    for r in rows:
        assert r["outcome"] == "CRASH", r
        assert "guard_bytes: the driver wrote past the end of output 0: over all" in r["message"], r["message"]


def test_a_host_keeps_guard_pages_until_an_output_region_needs_the_page():
    """HostMaps._guard: pages guarded for one layout stay guarded for the next unless an
    output region of the next covers them (then they are writable again, and written here)."""
    seg = pools.Segment(256 << 10)
    maps = pools.HostMaps()
    try:

        def run(dims, outputs_first):
            model = add_model(dims=dims)
            a = np.ones(dims, np.float32)
            request = Request.from_arrays(model, [a, a])
            placement = pools.plan(request, pools.output_specs(model, request), False, outputs_first, guard_pages=True)
            pools.fill(seg.buf, placement, request)
            _, regions = maps.request(request, placement.describe(seg))
            view, size = regions[0]
            view[...] = 2.0  # the host writes the whole region: no page in it may be guarded
            pools.check_guards(seg.buf, placement)
            o = placement.outputs[0]
            guarded = maps.guarded[seg.id]
            assert o.page in guarded
            assert not any(p < o.offset + o.size and p + pools.PAGE > o.offset for p in guarded)
            return o.page, guarded

        a, guarded = run((64, 64), False)  # inputs first: the output and its page further in
        assert guarded == {a}
        b, guarded = run((64, 64), True)  # outputs first: another page; the first stays guarded
        assert b != a and guarded == {a, b}
        for first in (False, True, False):  # the two layouts alternate with no mprotect call
            assert run((64, 64), first)[1] == {a, b}
        d, guarded = run((8, 1024), True)  # a 32 KiB output covers the 16 KiB one's page
        assert b not in guarded and guarded == {a, d}
    finally:
        maps.forget([seg.id])
        seg.close()
