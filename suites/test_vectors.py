"""Vectors suite: every AOSP CTS golden vector (JSON, format in nnconform/vectors_data/SCHEMA.md),
run through the driver under test.  The vectors are those of --nn-vectors DIR, else of
$NNCONFORM_VECTORS, else the copy bundled with nnconform (9,374 cases).  Every folder of the
tree is a feature level (V1_0 ... V1_3_cts_only, AIDL_V2, AIDL_V3, ...): it leads each test id
(``AIDL_V3/reverse_...``) and is recorded in each row (``extra.feature_level``, ``extra.hal``,
and ``extra.nnapi_feature_level`` as a number).

Vectors of operations the driver does not support are skipped with the reason; validation
vectors (expect_failure) must be rejected.  A file that cannot be read as a list of test
cases gives one ERROR row, named after the file, and the other files still run; so does a
case that cannot be turned into a model."""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path

import pytest

from nnconform.cases.variants import (
    MUTATIONS_PER_CELL,
    PLAIN,
    Variant,
    applicable,
    mutation_eligible,
    run_variant,
    select,
    select_mutations,
)
from nnconform.cases.vector_index import VectorIndex, code_key
from nnconform.cases.vectors import VectorCase, case_from_dict, resolve_root, vector_files
from nnconform.ir import SHORT_TYPE_NAME, OperandType
from nnconform.plugin import case_marks, session_of
from nnconform.plugin.cells import cells_of, end_item, record_cell
from nnconform.reference.ops.feature_levels import NEWEST_FEATURE_LEVEL, driver_level, folder_level
from nnconform.verdict.runner import Case, run


@functools.lru_cache(maxsize=2)
def _file_cases(path: str) -> list:
    with open(path) as fh:
        return json.load(fh)


@functools.lru_cache(maxsize=4)
def _case(path: str, index: int):
    """The VectorCase of one vector, built once per worker for all the cells of that vector
    (collection keeps a vector's cells together; with --variants all a vector has ~50).  Its
    inputs and expected outputs are made read-only, as its model's constants already are, so
    no cell can change what the next one is given or held to."""
    case = case_from_dict(_file_cases(path)[index], path)
    for a in (*case.inputs, *case.outputs):
        if a is not None:
            a.setflags(write=False)
    return case


def _file_problem(path: Path) -> tuple[list | None, str]:
    """(the file's cases, "") or (None, why it cannot be used)."""
    try:
        cases = _file_cases(str(path))
    except (OSError, UnicodeDecodeError) as e:
        return None, f"cannot read the file: {e}"
    except json.JSONDecodeError as e:
        return None, f"not valid JSON: {e}"
    if not isinstance(cases, list):
        return None, f"not a JSON list of test cases (a {type(cases).__name__})"
    for i, d in enumerate(cases):
        if not isinstance(d, dict) or not isinstance(d.get("name"), str):
            return None, f"entry {i} is not a test case object with a name"
    return cases, ""


def _derive_facts(path: Path) -> dict:
    """What collection needs of one vectors file, JSON-able (nnconform.cases.vector_index caches
    it): {"problem": why the file cannot be used} or {"cases": [[name, operations, types,
    applicable variants, mutation facts], ...]}."""
    cases, problem = _file_problem(path)
    _file_cases.cache_clear()  # collection reads each file once; keep no decoded copy
    if cases is None:
        return {"problem": problem}
    out = []
    for d in cases:
        ops, types = _ops_and_types(d)
        variants = [[v.kind, v.path, v.arg, v.timing] for v in applicable(d)]
        out.append([d["name"], sorted(ops), sorted(types), variants, mutation_eligible(d)])
    return {"cases": out}


@functools.lru_cache(maxsize=4)
def _index(root: Path) -> VectorIndex:
    """The collection facts of a vectors tree, shared by this process's two test functions."""
    import nnconform.cases.variants as variants_module
    import nnconform.vts.mutations as mutations_module  # mutation_eligible reads its rank rules

    return VectorIndex(root, code_key(variants_module.__file__, mutations_module.__file__, __file__), _derive_facts)


def _ops_and_types(d: dict) -> tuple[set[str], set[str]]:
    """NNAPI operation names and short data type names of a raw vectors case (for markers),
    without building its model."""
    try:
        model = d["model"]
        subgraphs = (model["main"], *model.get("referenced", []))
        ops = {o["type"] for sg in subgraphs for o in sg["operations"]}
        main = model["main"]
        types = set()
        for i in (*main["input_indexes"], *main["output_indexes"]):
            t = main["operands"][i]["type"]
            types.add(SHORT_TYPE_NAME.get(OperandType[t], t) if t in OperandType.__members__ else t)
        if model.get("relax_float32_to_float16"):
            types.add("relaxed")
        return ops, types
    except (KeyError, TypeError, IndexError, AttributeError):
        return set(), set()  # a malformed case: its own test says what is wrong


def pytest_generate_tests(metafunc):
    if "vector" not in metafunc.fixturenames:
        return
    if "variants" in metafunc.fixturenames:
        _generate_variants(metafunc)
        return
    try:
        root = resolve_root(metafunc.config.getoption("nn_vectors"))
        files = vector_files(root)
    except (OSError, RuntimeError) as e:  # a missing directory, or a damaged bundled copy
        metafunc.parametrize("vector", [("no-vectors", "", str(e))], ids=["vectors-missing"], indirect=True)
        return
    index = _index(root)
    wanted = _wanted(metafunc)
    params, ids = [], []
    for f in files:
        facts = index.facts(f)
        if wanted is not None and "problem" not in facts:
            folder = f.parent.name  # once a file: Path.parent per case was most of a batch's collection
            for i, (name, ops, types, _, _) in enumerate(facts["cases"]):
                if f"{folder}/{name}" in wanted:
                    params.append(pytest.param(("case", str(f), i), marks=case_marks(set(ops), set(types))))
                    ids.append(f"{folder}/{name}")
            continue
        if "problem" in facts:
            params.append(("bad-file", str(f), facts["problem"]))
            ids.append(f"{f.parent.name}/{f.name}")
            continue
        for i, (name, ops, types, _, _) in enumerate(facts["cases"]):
            params.append(pytest.param(("case", str(f), i), marks=case_marks(set(ops), set(types))))
            ids.append(f"{f.parent.name}/{name}")
    index.save(files)
    if not params:
        params, ids = [("no-vectors", "", f"no *.json vector files under {root}")], ["vectors-missing"]
    metafunc.parametrize("vector", params, ids=ids, indirect=True)


def _wanted(metafunc) -> set[str] | None:
    """The parameter ids a cluster worker's batch runs of this test (nnconform.cluster): only
    those are built, not all ~19,000; None: every one."""
    only = getattr(session_of(metafunc.config), "only_ids", None)
    return None if only is None else only.get(metafunc.function.__name__, set())


_MUTATION_DRAWS: dict = {}


def _select_mutations(eligible: list, mode, seed: int) -> dict:
    """select_mutations, kept per process for the same eligible set, mode and seed: a cluster
    worker collects once per batch and the draw (a hash per class and vector) is the same
    every time."""
    key = (
        tuple(vid for vid, _ in eligible),
        json.dumps([m for _, m in eligible], sort_keys=True),
        mode if isinstance(mode, str) else tuple(sorted(mode)),
        seed,
    )
    if key not in _MUTATION_DRAWS:
        _MUTATION_DRAWS.clear()
        _MUTATION_DRAWS[key] = select_mutations(eligible, mode, seed)
    return _MUTATION_DRAWS[key]


def _generate_variants(metafunc):
    """test_vector_variant: the (vector, variant) pairs the run's --nn-variants mode selects.
    Files that cannot be read are left to test_vector, which reports them."""
    session = session_of(metafunc.config)
    try:
        root = resolve_root(metafunc.config.getoption("nn_vectors"))
        files = vector_files(root)
    except (OSError, RuntimeError):
        root, files = None, []
    index = _index(root) if files else None
    wanted = _wanted(metafunc)
    wanted_vectors = None if wanted is None else {w.split("[", 1)[0] for w in wanted}
    # (file, index, vector id, raw variants, operations, types); a cluster batch (wanted)
    # keeps only its own vectors, but the mutation draw needs every eligible vector's facts.
    light, eligible = [], []
    for f in files:
        facts = index.facts(f)
        folder = f.parent.name
        for i, (name, ops, types, variants, mutation) in enumerate(facts.get("cases", ())):
            vid = f"{folder}/{name}"
            if mutation:
                eligible.append((vid, mutation))
            if wanted_vectors is None or vid in wanted_vectors:
                light.append((f, i, vid, variants, ops, types))
    if index is not None:
        index.save(files)
    mutations = _select_mutations(eligible, session.variants, session.seed)
    # One item per vector, its cells run by the test one after the other, each its own row
    # (nnconform.plugin.cells): as one item each, the cells' items cost more than the cells.
    params, ids = [], []
    for f, i, vid, raw, ops, types in light:
        variants = [_variant(*v) for v in raw]
        chosen = select(variants, session.variants, session.seed, vid) + mutations.get(vid, [])
        if wanted is not None:
            chosen = [v for v in chosen if f"{vid}[{v.id}]" in wanted]
        if chosen:
            params.append(pytest.param(("case", str(f), i), tuple(chosen), marks=case_marks(set(ops), set(types))))
            ids.append(vid)
    if not params:  # --nn-variants none (or kinds no vector has): no cells, not an empty-set SKIP
        metafunc.parametrize(
            "vector,variants",
            [pytest.param(None, None, marks=pytest.mark.skip(reason="no vectors variant selected"))],
            ids=["no-variants"],
            indirect=["vector"],
        )
        return
    metafunc.parametrize("vector,variants", params, ids=ids, indirect=["vector"])


@functools.lru_cache(maxsize=None)
def _variant(*fields) -> Variant:
    """One Variant object per distinct cell kind, shared by every vector (538,000 cells)."""
    return Variant(*fields)


@functools.lru_cache(maxsize=None)
def _cell_extra(v: Variant) -> dict:
    return {"variant": v.id, "variant_kind": v.kind}


def nn_item_cells(item) -> list | None:
    """The cells of a test_vector_variant item (nnconform.plugin.cells): (cell id, row extras)."""
    callspec = getattr(item, "callspec", None)
    variants = callspec.params.get("variants") if callspec is not None else None
    if not variants:
        return None
    return [(v.id, _cell_extra(v)) for v in variants]


@pytest.fixture
def vector(request, nn_record):
    """The VectorCase of this parameter, or an ERROR (a failed set-up) saying what is wrong."""
    kind, path, what = request.param
    nn_record["suite"] = "vectors"
    if kind == "no-vectors":
        nn_record["test_id"] = "vectors-missing"
        pytest.fail(f"no golden vectors: {what}", pytrace=False)
    folder = Path(path).parent.name
    nn_record["extra"].update(hal=folder, feature_level=folder, nnapi_feature_level=folder_level(folder))
    if kind == "bad-file":
        nn_record["test_id"] = f"{folder}/{Path(path).name}"
        pytest.fail(f"{path}: {what}; none of its cases ran", pytrace=False)
    d = _file_cases(path)[what]
    nn_record["test_id"] = f"{folder}/{d['name']}"
    callspec = getattr(request.node, "callspec", None)
    if callspec is None or "variants" not in callspec.params:  # test_vector: the plain cell
        nn_record["extra"].update(variant=PLAIN.id, variant_kind=PLAIN.kind)
    try:
        case = _case(path, what)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
        pytest.fail(f"{path}: case {d['name']} is malformed: {type(e).__name__}: {e}", pytrace=False)
    _out_of_scope(case, request.getfixturevalue("nn_device"), nn_record)
    return case


def _out_of_scope(case, device, nn_record) -> None:
    """SKIP a vector of a feature level newer than the driver declares, as CTS gates on the
    device's level; the row says so (extra.out_of_scope), apart from unsupported operations."""
    level = case.feature_level
    if level is None:
        return
    try:
        mine = driver_level(getattr(device, "feature_level", NEWEST_FEATURE_LEVEL))
    except ValueError as e:
        pytest.fail(f"the driver's {e}", pytrace=False)
    # A driver at the newest level nnconform knows takes every folder, also from a later
    # release imported with `nnconform vectors import` (nothing says it lacks those levels).
    if level > mine and mine < NEWEST_FEATURE_LEVEL:
        nn_record["extra"]["out_of_scope"] = True
        nn_record["message"] = f"out of scope: feature level {level} > driver's {mine}"
        pytest.skip(nn_record["message"])


def test_vector(vector, nn_device, nn_session, nn_record):
    case = vector
    nn_record.update(test_id=case.test_id, operations=list(case.operations), data_types=case.model.data_types())
    multinomial = case.multinomial_tolerance > 0
    # RANDOM_MULTINOMIAL's samples are random: element-wise comparison is off and the class
    # frequencies are checked against softmax(logits) instead, as CTS does.
    ignored = [True] * len(case.outputs) if multinomial else case.ignored
    outcome = run(nn_device, as_case(case), ignored=ignored)
    if multinomial and outcome.outcome == "PASS":
        from nnconform.reference.ops.random_multinomial import check_multinomial

        ok, msg = check_multinomial(case.inputs[0], outcome.actual[0], case.multinomial_tolerance)
        if not ok:
            outcome.outcome, outcome.message = "FAIL", f"[RANDOM_MULTINOMIAL] {msg}"
    nn_session.conclude(nn_record, outcome, as_case(case))


def test_vector_variant(vector, variants, nn_device, nn_session, nn_record, request):
    """The cells of the VTS execution matrix (nnconform.cases.variants) on one golden vector,
    one after the other, each recorded as its own row (nnconform.plugin.cells)."""
    case = vector
    todo = cells_of(request.node) or {}
    operations, data_types = list(case.operations), case.model.data_types()
    cap = MUTATIONS_PER_CELL if nn_session.variants == "rotate" else None
    rows = []
    for variant in variants:
        if variant.id not in todo:  # left out by -k, or recorded before a --resume
            continue
        started = time.perf_counter()
        tid = f"{case.test_id}[{variant.id}]"
        rec = dict(nn_record, test_id=tid, operations=operations, data_types=data_types)
        rec["extra"] = dict(nn_record["extra"], **_cell_extra(variant))
        # A failure's dumped spec replays the plain sync case; this reruns the cell itself.
        rec["extra"]["rerun"] = (
            f"nnconform run --driver {nn_session.driver_spec} --suite vectors --variants "
            f"{variant.kind} --seed {nn_session.seed} -- -k '{tid}'"
        )
        outcome = run_variant(nn_device, case, variant, seed=nn_session.seed, mutation_cap=cap)
        rows.append(
            record_cell(
                nn_session, request.node, variant.id, rec, outcome, as_case(case, tid), time.perf_counter() - started
            )
        )
    end_item(rows)


def as_case(vector: VectorCase, test_id: str | None = None) -> Case:
    """A golden vector as the one case value the runner and the verdict take."""
    return Case(
        test_id or vector.test_id,
        vector.model,
        vector.inputs,
        vector.outputs,
        ignored=vector.ignored,
        expect_failure=vector.expect_failure,
    )
