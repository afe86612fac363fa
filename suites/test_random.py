"""Random suite (CTS "TestRandomGraph", done with Hypothesis): random valid models run on the
driver and compared with the reference executor under the random-graph criteria.

- ``test_single_operation[OP-type]``: one operation with random operands, dims <= 1000
  (element count <= 10000), the operation's criteria set (Strict/Medium/Relaxed/Conv);
- ``test_graph[small|large-type-rankR]``: 5 operations with dims <= 1000 (SmallGraph
  criteria) or 40 operations with dims <= 10 (LargeGraph), for fp32, fp16, int32, bool8 and,
  unlike CTS, quant8 asymm and quant8 signed; ranks 1-4;
- ``test_control_flow_if[type]`` / ``test_control_flow_while[type]``: a 1-3 operation graph G
  wrapped in IF(c, G, G') or in a counted WHILE (1-4 iterations, G's outputs fed back where
  they match its inputs; now and then an IF inside the body), SmallGraph criteria, for fp32,
  fp16, int32, quant8 and quant8 signed (``generators/control_flow.py``; CTS random graphs
  have no control flow).  A driver that does not support IF/WHILE with G's operations skips.

Driver handling as in CTS: a case is skipped when the driver does not support every operation
or fails prepare with GENERAL_FAILURE (the runtime's OP_FAILED); any other error fails.  A
test whose every example was skipped is reported as skipped.  With the capability probe on
(the default) the draws stay inside the cells the driver claims, a graph it supports in part
runs partitioned, and an example it still refuses outright (a parameter value its cell did
not tell apart) is discarded and redrawn rather than skipped (``refused_redrawn`` in the row).

On a failure Hypothesis shrinks the model; the minimal one is dumped as a spec file (seed,
driver, expected and actual outputs, the failed criterion, and the first operation whose own
output diverges) and ``nnconform replay`` reruns it.  Options: ``--nn-hypothesis-profile``
(ci / default / nightly) and ``--nn-max-examples``.  Draws follow the session seed
(``--nn-seed``) except under the derandomised ci profile.
"""

from __future__ import annotations

import time
import zlib
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import Unsatisfiable, UnsatisfiedAssumption

from nnconform.driver import DriverError, ErrorStatus
from nnconform.generators import ledger, profiles
from nnconform.generators.control_flow import control_flow_cases
from nnconform.generators.diverge import first_divergent_operation
from nnconform.generators.graphs import GraphConfig
from nnconform.generators.signatures import SIGNATURES, Reject
from nnconform.generators.strategies import random_graph, sample, single_operation
from nnconform.ir import SHORT_TYPE_NAME
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.plugin import Concluded
from nnconform.reference.executor import Executor
from nnconform.verdict.aliasing import check_aliasing
from nnconform.verdict.criteria import LARGE_GRAPH, RELAXED, SMALL_GRAPH, STRICT, Criteria, criteria_for_operation
from nnconform.verdict.runner import CRASH, ERROR, FAIL, HANG, SKIP, run_case

GRAPH_TYPES = (
    T.TENSOR_FLOAT32,
    T.TENSOR_FLOAT16,
    T.TENSOR_INT32,
    T.TENSOR_BOOL8,
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
)
GRAPH_SIZES = {"small": (5, 1000, SMALL_GRAPH), "large": (40, 10, LARGE_GRAPH)}
# Operations newer than the CTS table (feature level 6/7): data movement is Strict, the
# matrix product is judged like FULLY_CONNECTED.
_NEWER_OPS = {Op.MIRROR_PAD: STRICT, Op.REVERSE: STRICT, Op.PACK: STRICT, Op.BATCH_MATMUL: RELAXED}

SINGLE = [(op, t) for op, s in sorted(SIGNATURES.items(), key=lambda kv: kv[0].name) for t in s.types]
GRAPHS = [(size, t, r) for size in GRAPH_SIZES for t in GRAPH_TYPES for r in (1, 2, 3, 4)]
CONTROL_FLOW_TYPES = (
    T.TENSOR_FLOAT32,
    T.TENSOR_FLOAT16,
    T.TENSOR_INT32,
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
)


def op_criteria(op: Op) -> Criteria:
    return _NEWER_OPS.get(op) or criteria_for_operation(op, "1.3")


# Shrinking stops after this long (measured from the first failure) and the best failing
# example found so far is reported and dumped; pytest's own timeout (300 s) would otherwise
# end a long shrink with "Timeout" and no minimal model.
SHRINK_BUDGET_S = 90.0


def shrink_budget_s() -> float:
    """SHRINK_BUDGET_S, or ``NNCONFORM_SHRINK_BUDGET_S`` from the environment."""
    import os

    text = os.environ.get("NNCONFORM_SHRINK_BUDGET_S", "").strip()
    try:
        return float(text) if text else SHRINK_BUDGET_S
    except ValueError:
        raise pytest.UsageError(f"NNCONFORM_SHRINK_BUDGET_S must be a number of seconds, not {text!r}") from None


class CaseFailed(Exception):
    """One Hypothesis example failed on the driver (carried out to the pytest test)."""

    def __init__(self, case, expected, outcome):
        super().__init__(outcome.message)
        self.case, self.expected, self.outcome = case, expected, outcome


class _ShrinkBudgetSpent(BaseException):
    """Raised through Hypothesis (which lets non-Exception errors pass) to end a shrink that
    ran out of its time budget; carries the best CaseFailed so far."""

    def __init__(self, best: CaseFailed):
        super().__init__("shrink budget spent")
        self.best = best


class _OpFailedAtPrepare:
    """Forwards to the driver and notes a GENERAL_FAILURE from prepare (CTS: OP_FAILED is a
    skip, not a failure)."""

    def __init__(self, device):
        self._device = device
        self.op_failed = False

    def __getattr__(self, name):
        return getattr(self._device, name)

    def supported_operations(self, model):
        return self._device.supported_operations(model)

    def prepare(self, model, **kw):
        try:
            return self._device.prepare(model, **kw)
        except DriverError as e:
            self.op_failed = e.status == ErrorStatus.GENERAL_FAILURE
            raise


def _run(
    request,
    nn_session,
    nn_device,
    nn_record,
    test_id: str,
    strategy,
    criteria: Criteria,
    graph: bool,
    redraw_refused: bool = False,
    top_up=None,
) -> None:
    """``redraw_refused``: the draws are meant to lie inside what the driver claims (the probe
    is on), so an example it still refuses outright (a parameter value the probe's cell did
    not tell apart, e.g. one MIRROR_PAD mode) is discarded and another drawn instead of being
    a skip; the count is in the row (``refused_redrawn``).  ``top_up(domain, meaningful)``:
    after the drawn examples, the extra cases (seeded) for the shape classes they missed."""
    cfg = request.config
    profile = cfg.getoption("nn_hypothesis_profile", "default") or "default"
    st_settings = profiles.settings_for(
        profile, graph=graph, max_examples=cfg.getoption("nn_max_examples", None), report_dir=nn_session.report_dir
    )
    device = _OpFailedAtPrepare(nn_device)
    tally: dict[str, Any] = {
        "passed": 0,
        "skipped": 0,
        "partitioned": 0,
        "skip_reasons": set(),
        "refused": 0,
        "refused_reasons": set(),
    }
    domain: dict[str, set[str]] = {}
    meaningful: dict[str, set[str]] = {}

    shrink: dict[str, Any] = {"first_failure": None, "best": None, "failures": 0}
    budget = shrink_budget_s()

    def one_example(case):
        if shrink["first_failure"] is not None and time.monotonic() - shrink["first_failure"] >= budget:
            raise _ShrinkBudgetSpent(shrink["best"])
        for k, v in getattr(case, "domain", {}).items():
            domain.setdefault(k, set()).update(v)
        for k, v in getattr(case, "meaningful", {}).items():
            meaningful.setdefault(k, set()).update(v)
        expected = Executor(case.model).run(case.inputs)
        device.op_failed = False
        outcome = run_case(device, case.model, case.inputs, expected, ignored=case.ignored, criteria=criteria)
        if outcome.outcome == SKIP and redraw_refused and not device.op_failed:
            tally["refused"] += 1
            tally["refused_reasons"].add(outcome.message)
            assume(False)
        if outcome.outcome == SKIP or (device.op_failed and outcome.stage == "prepare"):
            tally["skipped"] += 1
            tally["skip_reasons"].add(outcome.message)
            return
        if outcome.outcome in (FAIL, ERROR, CRASH, HANG):
            failed = CaseFailed(case, expected, outcome)
            if outcome.outcome == HANG:
                # each retry of a hang waits out the call bound again: report this example as
                # it is instead of shrinking it
                raise _ShrinkBudgetSpent(failed)
            # Hypothesis only tries smaller examples after the first failure: the latest
            # failing one is the best so far
            shrink["best"] = failed
            shrink["failures"] += 1
            if shrink["first_failure"] is None:
                shrink["first_failure"] = time.monotonic()
            raise failed
        tally["passed"] += 1
        tally["partitioned"] += bool(outcome.partition)

    # Hypothesis reads this attribute off the test function (its database key); a function
    # object takes any attribute at run time, which typeshed's Callable cannot say
    one_example._hypothesis_internal_add_digest = test_id.encode()  # type: ignore[attr-defined]
    test = given(strategy)(one_example)
    if not st_settings.derandomize:
        test = hypothesis_seed(nn_session.seed ^ zlib.crc32(test_id.encode()))(test)
    test = st_settings(test)
    nn_record["extra"].update(profile=profile, max_examples=st_settings.max_examples, criteria=criteria.name)
    failure = None
    try:
        test()
        if top_up is not None:
            extra_cases = top_up(domain, meaningful)
            for case in extra_cases:
                try:
                    one_example(case)
                except UnsatisfiedAssumption:
                    continue  # refused outright under the probe: counted in refused_redrawn
            nn_record["extra"]["shape_top_up"] = len(extra_cases)
    except CaseFailed as f:
        failure = f
    except _ShrinkBudgetSpent as spent:
        failure = spent.best
        nn_record["extra"]["shrink_stopped_after_s"] = budget
    except Unsatisfiable:
        # every draw was one the driver refuses: one skip that says so
        nn_record["extra"].update(refused_redrawn=tally["refused"])
        pytest.skip(
            f"the driver refused all {tally['refused']} drawn examples: "
            + "; ".join(sorted(tally["refused_reasons"]))[:300]
        )
    if shrink["first_failure"] is not None:
        nn_record["extra"].update(
            shrink_s=round(time.monotonic() - shrink["first_failure"], 2), failing_examples_seen=shrink["failures"]
        )
    nn_record["extra"].update(
        passed=tally["passed"],
        skipped=tally["skipped"],
        partitioned=tally["partitioned"],
        refused_redrawn=tally["refused"],
        domain=ledger.as_json(domain),
        domain_meaningful=ledger.as_json(meaningful),
    )
    if failure is not None:  # outside the except block: the report needs no exception chain
        _report_failure(nn_session, nn_device, nn_record, test_id, failure, criteria, profile)
    if tally["passed"] == 0 and tally["skipped"]:
        pytest.skip("every example skipped: " + "; ".join(sorted(tally["skip_reasons"]))[:300])


def _report_failure(nn_session, nn_device, nn_record, test_id, f: CaseFailed, criteria, profile) -> None:
    case, outcome = f.case, f.outcome
    m = case.model.main
    ignored_operands = [i for i, ig in zip(m.output_indexes, case.ignored) if ig]
    extra = {
        "suite": "random",
        "criteria_set": criteria.name,
        "hypothesis_profile": profile,
        "operations": case.operations,
        "edge_values": case.edge_values,
    }
    incident = outcome.outcome in (CRASH, HANG)
    div = None
    if incident:
        # The driver host died (or hung) on this model: the row is a CRASH/HANG, and the
        # (shrunk) model is dumped so that `nnconform replay` reproduces it.  No divergence
        # hunt: it would run the model's prefixes on the driver and kill the host again.
        nn_record["verdict"] = outcome.outcome
        nn_record["extra"]["incident"] = {
            k: v
            for k, v in (outcome.details or {}).items()
            if k in ("stderr_tail", "host_pid", "signal", "exit_code", "protocol")
        }
    else:
        try:
            div = first_divergent_operation(nn_device, case.model, case.inputs, criteria, ignored_operands)
        except Exception as e:  # the failure itself is the verdict; say why the hunt gave nothing
            div, extra["divergence_error"] = None, f"{type(e).__name__}: {e}"
    if div is not None:
        n, name, cmp = div
        extra["first_divergent_operation"] = {
            "index": n,
            "name": name,
            "message": cmp.message,
            "comparison": cmp.to_dict(),
        }
    inner = getattr(case, "inner", None)
    inside = None
    if inner is not None and not incident:  # control flow: hunt inside G (the branch / body) on its own inputs
        im = inner.model.main
        try:
            inside = first_divergent_operation(
                nn_device,
                inner.model,
                inner.inputs,
                criteria,
                [i for i, ig in zip(im.output_indexes, inner.ignored) if ig],
            )
        except Exception as e:
            extra["divergence_inside_error"] = f"{type(e).__name__}: {e}"
        if inside is not None:
            extra["first_divergent_operation_inside"] = {
                "index": inside[0],
                "name": inside[1],
                "message": inside[2].message,
                "where": "G (the IF's branches) alone on the case's inputs"
                if case.kind == "if"
                else "G (the WHILE body) alone on the first iteration's inputs",
            }
    nn_record["operations"] = sorted(set(case.operations))
    nn_record["extra"].update(first_divergent_operation=div[1] if div else None, shrunk_operations=len(m.operations))
    try:
        nn_record["spec_path"], nn_record["replay"] = nn_session.dump_failure(
            test_id, case.model, case.inputs, f.expected, outcome, ignored=case.ignored, extra_meta=extra
        )
    except Exception as e:
        outcome.message += f" (spec dump failed: {type(e).__name__}: {e})"
    where = f"; first divergent operation: #{div[0]} {div[1]}" if div else ""
    if inside is not None:
        where += f"; inside it: #{inside[0]} {inside[1]}"
    nn_record["message"] = f"{outcome.message}{where}"
    nn_record.setdefault("verdict", "FAIL")
    raise Concluded(
        f"{nn_record['message']} (minimal model: {case.describe()}, seed {nn_session.seed})"
        + (f"\n  replay: {nn_record['replay']}" if nn_record.get("replay") else "")
    )


def _supported_cells(nn_session, nn_record, dtype, ops=None, rank=None) -> frozenset | None:
    """The (operation, rank) cells of ``dtype`` the driver claims (nnconform.cases.probe), to draw
    from; None under --no-probe.  A test with none left is one skip that says so."""
    claims = nn_session.claims()
    if claims is None:
        return None
    allowed = claims.allowed(dtype, ops, None if rank is None else [rank])
    nn_record["extra"]["claimed_cells"] = len(allowed)
    if not allowed:
        what = ", ".join(o.name for o in ops) if ops else "any covered operation"
        pytest.skip(
            f"the driver claims {what} for {SHORT_TYPE_NAME[dtype]}"
            + (f" at rank {rank}" if rank else "")
            + " nowhere (capability probe)"
        )
    return allowed


def nn_case_claimed(item, nn_session) -> bool | None:
    """For ``--only-supported``: False when the capability probe finds the driver claims the
    test's (operation, type) cell, graph type and rank, or control-flow kind nowhere, so the
    test could only skip; None when that is not known (no probe, or not a drawing test)."""
    claims = nn_session.claims()
    params = getattr(getattr(item, "callspec", None), "params", {})
    if claims is None or "dtype" not in params:
        return None
    name = getattr(item, "originalname", item.name)
    if name == "test_single_operation":
        return bool(claims.allowed(params["dtype"], [params["op"]]))
    if name == "test_graph":
        return bool(claims.allowed(params["dtype"], ranks=[params["rank"]]))
    if name in ("test_control_flow_if", "test_control_flow_while"):
        return claims.control_flow_claimed(name.rsplit("_", 1)[1], params["dtype"])
    return None


@pytest.mark.parametrize("op,dtype", SINGLE, ids=[f"{op.name}-{SHORT_TYPE_NAME[t]}" for op, t in SINGLE])
def test_single_operation(op, dtype, request, nn_session, nn_device, nn_record):
    test_id = f"random/single/{op.name}/{SHORT_TYPE_NAME[dtype]}"
    nn_record.update(suite="random", test_id=test_id, operations=[op.name], data_types=[SHORT_TYPE_NAME[dtype]])
    allowed = _supported_cells(nn_session, nn_record, dtype, ops=[op])

    def top_up(domain, meaningful):
        return _shape_top_up(op, dtype, allowed, nn_session.seed, test_id, domain, meaningful)

    _run(
        request,
        nn_session,
        nn_device,
        nn_record,
        test_id,
        single_operation(op, dtype, value_mode="mixed", allowed=allowed),
        op_criteria(op),
        graph=False,
        redraw_refused=allowed is not None,
        top_up=top_up,
    )


def _shape_top_up(op, dtype, allowed, seed: int, test_id: str, domain, meaningful) -> list:
    """One seeded case for each shape class the operation declares that the drawn examples
    missed (25 examples draw most, not always all): so a run exercises every declared class
    of every operation x type, and the ledger has no hole by chance.  A top-up case is not
    shrunk (it is one operation already)."""
    key = ledger.key(op, dtype)
    missing = sorted(
        c.split(":", 1)[1] for c in meaningful.get(key, set()) - domain.get(key, set()) if c.startswith("shape:")
    )
    out = []
    for c in missing:
        base = (seed ^ zlib.crc32(f"{test_id}/{c}".encode())) & 0x7FFFFFFF
        for k in range(12):
            cfg = GraphConfig(
                dtype=dtype, n_ops=1, max_dim=1000, max_elems=10000, ops=(op,), allowed=allowed, force_shape_class=c
            )
            try:
                case = sample(cfg, base + k, edge=bool(k % 2))
            except Reject:
                continue
            if "shape:" + c in case.domain.get(key, ()):
                out.append(case)
                break
    return out


@pytest.mark.parametrize("size,dtype,rank", GRAPHS, ids=[f"{s}-{SHORT_TYPE_NAME[t]}-rank{r}" for s, t, r in GRAPHS])
def test_graph(size, dtype, rank, request, nn_session, nn_device, nn_record):
    n_ops, max_dim, criteria = GRAPH_SIZES[size]
    test_id = f"random/{size}/{SHORT_TYPE_NAME[dtype]}/rank{rank}"
    nn_record.update(suite="random", test_id=test_id, operations=[], data_types=[SHORT_TYPE_NAME[dtype]])
    allowed = _supported_cells(nn_session, nn_record, dtype, rank=rank)
    _run(
        request,
        nn_session,
        nn_device,
        nn_record,
        test_id,
        random_graph(dtype, rank, n_ops, max_dim, value_mode="mixed", allowed=allowed),
        criteria,
        graph=True,
        redraw_refused=allowed is not None,
    )


def _control_flow_claimed(nn_session, kind: str, dtype) -> None:
    """A driver that claims no IF / WHILE of ``dtype`` gets one skip, not a skip per draw."""
    claims = nn_session.claims()
    if claims is not None and not claims.control_flow_claimed(kind, dtype):
        pytest.skip(f"the driver claims no {kind.upper()} for {SHORT_TYPE_NAME[dtype]} (capability probe)")


@pytest.mark.parametrize("dtype", CONTROL_FLOW_TYPES, ids=[SHORT_TYPE_NAME[t] for t in CONTROL_FLOW_TYPES])
def test_control_flow_if(dtype, request, nn_session, nn_device, nn_record):
    test_id = f"random/control_flow/if/{SHORT_TYPE_NAME[dtype]}"
    nn_record.update(suite="random", test_id=test_id, operations=["IF"], data_types=[SHORT_TYPE_NAME[dtype]])
    _control_flow_claimed(nn_session, "if", dtype)
    _run(
        request,
        nn_session,
        nn_device,
        nn_record,
        test_id,
        control_flow_cases("if", dtype, value_mode="mixed"),
        SMALL_GRAPH,
        graph=True,
    )


@pytest.mark.parametrize("dtype", CONTROL_FLOW_TYPES, ids=[SHORT_TYPE_NAME[t] for t in CONTROL_FLOW_TYPES])
def test_control_flow_while(dtype, request, nn_session, nn_device, nn_record):
    test_id = f"random/control_flow/while/{SHORT_TYPE_NAME[dtype]}"
    nn_record.update(suite="random", test_id=test_id, operations=["WHILE"], data_types=[SHORT_TYPE_NAME[dtype]])
    _control_flow_claimed(nn_session, "while", dtype)
    _run(
        request,
        nn_session,
        nn_device,
        nn_record,
        test_id,
        control_flow_cases("while", dtype, value_mode="mixed"),
        SMALL_GRAPH,
        graph=True,
    )


# ---------------------------------------------------------------------------------------
# Aliasing: the results of one execution must not change after the next
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", GRAPH_TYPES, ids=[SHORT_TYPE_NAME[t] for t in GRAPH_TYPES])
def test_outputs_not_aliased(dtype, nn_session, nn_device, nn_record):
    """One small random graph of ``dtype`` executed twice on different inputs, with the
    first execution's outputs held: they must not change (``nnconform.verdict.aliasing``)."""
    test_id = f"random/aliasing/{SHORT_TYPE_NAME[dtype]}"
    nn_record.update(suite="random", test_id=test_id, data_types=[SHORT_TYPE_NAME[dtype]])
    seed = (nn_session.seed ^ zlib.crc32(test_id.encode())) % 2**31
    # drawn inside what the driver claims (issue 13), so a partial driver is still checked
    allowed = _supported_cells(nn_session, nn_record, dtype)
    try:
        case = sample(GraphConfig(dtype=T(dtype), n_ops=3, max_dim=8, max_elems=64, allowed=allowed), seed)
    except Reject as e:
        pytest.skip(f"no model of {SHORT_TYPE_NAME[dtype]} inside the driver's claims: {e}")
    model = case.model
    nn_record["operations"] = sorted(set(case.operations))
    # the second execution's inputs: each input's own values in reverse order (every value
    # stays one the generator chose for that input: in range, non-zero divisors, ...)
    inputs_b = [np.ascontiguousarray(a.reshape(-1)[::-1]).reshape(a.shape) for a in case.inputs]
    supported = nn_device.supported_operations(model)
    if not all(supported):
        pytest.skip(f"driver does not support {', '.join(case.operations)} for {SHORT_TYPE_NAME[dtype]}")
    try:
        message = check_aliasing(nn_device, model, case.inputs, inputs_b)
    except DriverError as e:
        if e.status == ErrorStatus.GENERAL_FAILURE:
            pytest.skip(f"prepare/execute failed with GENERAL_FAILURE (OP_FAILED): {e}")
        raise
    if message:
        nn_record["message"] = message
        pytest.fail(f"{message} (model: {case.describe()}, seed {seed})", pytrace=False)
