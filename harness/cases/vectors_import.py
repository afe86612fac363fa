"""Convert AOSP NNAPI test specs (``*.mod.py``) into nnconform's golden-vector JSON.

    nnconform vectors import AOSP_DIR OUT_DIR [--folder AIDL_V4] [--generator PATH]

AOSP writes its CTS/VTS generated tests as Python spec files in a small DSL (``Model``,
``Input``, ``Output``, ``Parameter``, ``Example``, variations...) that AOSP's test generator,
``test_generator.py``, expands into concrete models and examples.  This module does not
contain that generator: it loads the one of the user's AOSP checkout at run time (from
``tools/test_generator/`` of ``packages/modules/NeuralNetworks`` or ``nn/tools/test_generator/``
of ``frameworks/ml``), lets it expand every spec file of every spec folder (``V1_0`` ...
``AIDL_V3``, and whatever a newer release adds), and writes each expanded model the
generator hands to its dump callback as one test case, in the format of ``SCHEMA.md``.  So
the vectors of a newer Android release are one command away.

Running a spec file runs Python code from that checkout (that is what AOSP's own build does).

What this module relies on in the generator (the interface of ``test_generator.py`` from
Android 10 to 13):

- ``FileNames.InitializeFileLists(spec_dir, None)``, ``FileNames.NextFile()``,
  ``FileNames.specFile`` / ``specName``: the files of one spec folder, one at a time, with the
  generator's per-file state reset;
- ``GetExecScope()``: the DSL names a spec file is executed with;
- ``Example.DumpAllExamples(DumpExample=callback, example_fd=sink)``: expands the examples and
  variations of the file just executed and calls ``callback(example, sink)`` per test;
- ``NamedTest(spec, model, example, *variation_names)`` makes each test's name, and
  ``Model.Feed(feed)`` loads one input/output set: both are wrapped here (in this private
  copy of the module only) to learn the variation names and the example index;
- on the compiled example: ``model`` (``name``, ``operands``, ``operations``, ``isRelaxed``,
  ``version``, ``GetInputs()``, ``GetOutputs()``, ``GetReferencedModels()``), ``name``,
  ``feedDicts``, ``expectFailure``, ``expectedMultinomialDistributionTolerance``,
  ``testName`` and (Android 11) ``testDynamicOutputShape``; operands have ``name``, ``type``
  (``type``, ``dimensions``, ``scale``, ``zeroPoint``, ``extraParams`` with ``channelDim``,
  ``scales``, ``hide``), ``lifetime``, ``value``, ``outs`` and ``model_index``; operations
  ``optype``, ``ins``, ``outs``; ``IgnoredOutput`` marks outputs not compared.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import subprocess
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

GENERATOR_PLACES = (
    "tools/test_generator/test_generator.py",  # packages/modules/NeuralNetworks
    "nn/tools/test_generator/test_generator.py",  # frameworks/ml
    "packages/modules/NeuralNetworks/tools/test_generator/test_generator.py",  # AOSP root
    "frameworks/ml/nn/tools/test_generator/test_generator.py",
)
SPEC_PLACES = (
    "runtime/test/specs",
    "nn/runtime/test/specs",
    "packages/modules/NeuralNetworks/runtime/test/specs",
    "frameworks/ml/nn/runtime/test/specs",
)

FLOAT_TYPES = {"FLOAT32", "FLOAT16", "TENSOR_FLOAT32", "TENSOR_FLOAT16"}
BOOL_TYPES = {"BOOL", "TENSOR_BOOL8"}
CONSTANT_LIFETIMES = {"CONSTANT_COPY", "CONSTANT_REFERENCE"}


class ImportProblem(Exception):
    """The AOSP checkout or the output directory cannot be used (one line, for the user)."""


@dataclass
class ImportResult:
    out_dir: Path
    source: str
    files: dict[str, int] = field(default_factory=dict)  # "FOLDER/spec" -> cases
    failures: dict[str, str] = field(default_factory=dict)  # "FOLDER/spec" -> error
    int_truncations: dict[str, int] = field(default_factory=dict)

    @property
    def cases(self) -> int:
        return sum(self.files.values())


# ---------------------------------------------------------------------------------------
# Finding the checkout's pieces
# ---------------------------------------------------------------------------------------


def find_generator(aosp_dir: Path) -> Path:
    for rel in GENERATOR_PLACES:
        p = aosp_dir / rel
        if p.is_file():
            return p
    raise ImportProblem(
        f"{aosp_dir}: no test_generator.py under it (looked in "
        f"{', '.join(GENERATOR_PLACES[:2])}); give --generator PATH"
    )


def find_specs(aosp_dir: Path) -> Path:
    for rel in SPEC_PLACES:
        p = aosp_dir / rel
        if p.is_dir():
            return p
    if spec_folders(aosp_dir):
        return aosp_dir
    raise ImportProblem(f"{aosp_dir}: no spec folders (looked in {', '.join(SPEC_PLACES[:2])}); give --specs DIR")


def spec_folders(specs: Path) -> list[Path]:
    from nnconform.cases.vectors import folder_key

    return sorted(
        (d for d in specs.iterdir() if d.is_dir() and any(d.glob("*.mod.py"))), key=lambda d: folder_key(d.name)
    )


def _git_commit(path: Path) -> str | None:
    try:
        r = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None


_loaded = itertools.count()


def load_generator(path: Path):
    """A private copy of the checkout's test_generator module, with the two observation hooks."""
    spec = importlib.util.spec_from_file_location(f"_nnconform_aosp_test_generator_{next(_loaded)}", path)
    if spec is None or spec.loader is None:
        raise ImportProblem(f"{path}: cannot be loaded as a Python module")
    # Any: the user's generator module, whose classes (NamedTest, Model...) exist only at run time
    tg: Any = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(tg)
    except Exception as e:  # the user's file: report whatever it raises, in one line
        raise ImportProblem(f"{path}: loading the test generator failed: {type(e).__name__}: {e}") from e
    for name in ("FileNames", "GetExecScope", "Example", "NamedTest", "Model", "IgnoredOutput"):
        if not hasattr(tg, name):
            raise ImportProblem(f"{path}: not an AOSP NNAPI test generator (it has no {name})")

    observed: dict[str, Any] = {}

    class RecordingNamedTest(tg.NamedTest):
        """Keeps the parts a test name is made of: spec, model, example, variation names."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            observed["name_parts"] = args

    original_feed = tg.Model.Feed

    def feed(model, feed_dict):
        observed["feed"] = feed_dict
        return original_feed(model, feed_dict)

    tg.NamedTest = RecordingNamedTest
    tg.Model.Feed = feed
    tg._nnconform_observed = observed
    return tg


# ---------------------------------------------------------------------------------------
# Serialising one expanded example
# ---------------------------------------------------------------------------------------


class _Truncations:
    def __init__(self):
        self.count = 0


def _number(v, kind: str, trunc: _Truncations):
    """A value as JSON: floats as the shortest round-trip text (NaN/inf as strings), bools as
    booleans, everything else as the integer C++ would store (truncated toward zero)."""
    if kind == "float":
        f = float(v)
        if math.isnan(f):
            return "nan"
        if math.isinf(f):
            return "inf" if f > 0 else "-inf"
        return f
    if kind == "bool":
        return bool(v)
    i = int(v)
    if i != v:
        trunc.count += 1
    return i


def _values(values: Iterable | None, type_name: str, trunc: _Truncations) -> list:
    kind = "float" if type_name in FLOAT_TYPES else "bool" if type_name in BOOL_TYPES else "int"
    return [_number(v, kind, trunc) for v in (values or [])]


def _operand(op, trunc: _Truncations) -> dict:
    t = op.type
    extra = t.extraParams
    cq = None
    if extra is not None and hasattr(extra, "scales"):
        cq = {
            "scales": [float(s) for s in extra.scales],
            "channel_dim": int(extra.channelDim),
            "hidden": bool(getattr(extra, "hide", False)),
        }
    if op.lifetime == "SUBGRAPH":
        value = [int(op.value[0])]
    elif op.lifetime in CONSTANT_LIFETIMES:
        value = _values(op.value, t.type, trunc)
    else:
        value = None
    return {
        "name": op.name,
        "type": t.type,
        "dimensions": [int(d) for d in t.dimensions],
        "scale": float(t.scale),
        "zero_point": int(t.zeroPoint),
        "channel_quant": cq,
        "lifetime": op.lifetime,
        "num_consumers": len(op.outs),
        "value": value,
    }


def _subgraph(model, trunc: _Truncations) -> dict:
    return {
        "name": model.name,
        "operands": [_operand(op, trunc) for op in model.operands],
        "operations": [
            {"type": o.optype, "inputs": [i.model_index for i in o.ins], "outputs": [i.model_index for i in o.outs]}
            for o in model.operations
        ],
        "input_indexes": [i.model_index for i in model.GetInputs()],
        "output_indexes": [o.model_index for o in model.GetOutputs()],
    }


def serialise_example(tg, example, spec_name: str, folder: str, trunc: _Truncations) -> dict:
    observed = tg._nnconform_observed
    parts = observed.get("name_parts", ())
    feed = observed.get("feed")
    index = next((i for i, f in enumerate(example.feedDicts) if f is feed), 0)
    model = example.model
    main = _subgraph(model, trunc)
    inputs = [
        {"operand": i.model_index, "name": i.name, "values": _values(i.value, i.type.type, trunc)}
        for i in model.GetInputs()
    ]
    outputs = [
        {
            "operand": o.model_index,
            "name": o.name,
            "values": _values(o.value, o.type.type, trunc),
            "ignored": isinstance(o, tg.IgnoredOutput),
        }
        for o in model.GetOutputs()
    ]
    return {
        "name": str(example.testName),
        "spec": spec_name,
        "spec_dir": folder,
        "model_name": model.name,
        "example_name": example.name,
        "variations": [str(v) for v in parts[3:] if v],
        "example_index": index,
        "min_supported_version": model.version,
        "expect_failure": bool(example.expectFailure),
        "multinomial_tolerance": float(example.expectedMultinomialDistributionTolerance),
        "test_dynamic_output_shape": bool(getattr(example, "testDynamicOutputShape", True)),
        "model": {
            "main": main,
            "referenced": [_subgraph(m, trunc) for m in model.GetReferencedModels()],
            "relax_float32_to_float16": bool(model.isRelaxed),
        },
        "inputs": inputs,
        "outputs": outputs,
    }


def dumps_cases(cases: list[dict]) -> str:
    """The vectors file text: a JSON list with one compact test case per line."""
    return "[\n" + ",\n".join(json.dumps(c, separators=(",", ":"), allow_nan=False) for c in cases) + "\n]\n"


# ---------------------------------------------------------------------------------------
# The import
# ---------------------------------------------------------------------------------------


class _Sink:
    """The generator only checks that an example file object is given; nothing is written."""

    def write(self, text: str) -> int:
        return len(text)


def convert_folder(tg, folder: Path, out: Path, result: ImportResult, log=None) -> None:
    """Expand every spec file of one spec folder and write ``out/<folder>/<spec>.json``
    (``tg``: a generator module fresh from :func:`load_generator`)."""
    tg.FileNames.InitializeFileLists(str(folder), None)
    scope = tg.GetExecScope()  # one scope per folder, as AOSP's generator run has
    dest = out / folder.name
    dest.mkdir(parents=True, exist_ok=True)
    while tg.FileNames.NextFile():
        spec_file, spec_name = Path(tg.FileNames.specFile), tg.FileNames.specName
        key = f"{folder.name}/{spec_name}"
        cases: list[dict] = []
        trunc = _Truncations()

        def dump(example, _fd, cases=cases, trunc=trunc, spec_name=spec_name):
            cases.append(serialise_example(tg, example, spec_name, folder.name, trunc))

        try:
            exec(compile(spec_file.read_text(), str(spec_file), "exec"), scope)
            tg.Example.DumpAllExamples(DumpExample=dump, example_fd=_Sink())
        except Exception as e:  # a spec file is the user's code: record the failure, go on
            tb = traceback.extract_tb(e.__traceback__)
            where = next((f"line {f.lineno}" for f in reversed(tb) if f.filename == str(spec_file)), "")
            result.failures[key] = f"{type(e).__name__}: {e}" + (f" ({where})" if where else "")
            if log:
                log(f"  FAILED {key}: {result.failures[key]}")
            continue
        (dest / f"{spec_name}.json").write_text(dumps_cases(cases))
        result.files[key] = len(cases)
        if trunc.count:
            result.int_truncations[key] = trunc.count
        if log:
            log(f"  {key}: {len(cases)} cases")


def import_vectors(
    aosp_dir: Path | str,
    out_dir: Path | str,
    folders: Iterable[str] | None = None,
    generator: Path | str | None = None,
    specs: Path | str | None = None,
    log=None,
) -> ImportResult:
    """Convert the spec folders of an AOSP checkout into ``out_dir`` (merging ``index.json``)."""
    aosp_dir = Path(aosp_dir)
    if not aosp_dir.is_dir():
        raise ImportProblem(f"{aosp_dir}: no such directory")
    gen = Path(generator) if generator else find_generator(aosp_dir)
    spec_root = Path(specs) if specs else find_specs(aosp_dir)
    available = spec_folders(spec_root)
    wanted = list(folders or [])
    chosen = [d for d in available if not wanted or d.name in wanted]
    missing = sorted(set(wanted) - {d.name for d in available})
    if missing:
        raise ImportProblem(
            f"{spec_root}: no spec folder {', '.join(missing)} "
            f"(there are: {', '.join(d.name for d in available) or 'none'})"
        )
    if not chosen:
        raise ImportProblem(f"{spec_root}: no spec folders with *.mod.py files")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    commit = _git_commit(spec_root)
    result = ImportResult(out, f"{aosp_dir.resolve()}" + (f" {commit}" if commit else ""))
    for d in chosen:
        if log:
            log(f"{d.name}: {sum(1 for _ in d.glob('*.mod.py'))} spec files")
        # A fresh copy of the generator per folder, as AOSP runs it once per folder: its
        # class-level state (the file cursor, name registries) starts clean.
        convert_folder(load_generator(gen), d, out, result, log)
    _write_index(out, result, [d.name for d in chosen], gen)
    return result


def _write_index(out: Path, result: ImportResult, folders: list[str], generator: Path) -> None:
    """Record what was imported in ``out/index.json`` (kept and updated when present)."""
    path = out / "index.json"
    index: dict = {}
    if path.is_file():
        try:
            loaded = json.loads(path.read_text())
        except ValueError:
            loaded = None
        index = loaded if isinstance(loaded, dict) else {}
    files = index.setdefault("files", {})
    for key in [k for k in files if k.split("/", 1)[0] in folders]:
        del files[key]
    files.update(result.files)
    failures = index.setdefault("failures", {})
    for key in [k for k in failures if k.split("/", 1)[0] in folders]:
        del failures[key]
    failures.update(result.failures)
    truncs = index.setdefault("int_truncations", {})
    for key in [k for k in truncs if k.split("/", 1)[0] in folders]:
        del truncs[key]
    truncs.update(result.int_truncations)
    index.setdefault("imports", []).append(
        {"folders": folders, "source": result.source, "generator": str(generator.resolve())}
    )
    counts: dict[str, int] = {}
    specs: dict[str, int] = {}
    for key, n in files.items():
        folder = key.split("/", 1)[0]
        counts[folder] = counts.get(folder, 0) + n
        specs[folder] = specs.get(folder, 0) + 1
    index["summary"] = {"spec_files": specs, "test_cases": counts, "total_test_cases": sum(counts.values())}
    path.write_text(json.dumps(index, indent=1) + "\n")
