import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from nnconform.driver.loader import (
    check_driver_name,
    file_module_name,
    import_driver_file,
    load_driver,
    resolve_driver_spec,
)
from nnconform.drivers.reference import ReferenceDevice
from nnconform.errors import DriverLoadError


def test_entry_point_name():
    assert isinstance(load_driver("reference"), ReferenceDevice)


def test_module_attribute():
    assert isinstance(load_driver("nnconform.drivers.reference:ReferenceDevice"), ReferenceDevice)


@pytest.mark.parametrize(
    "spec,fragment",
    [
        ("nosuchdriver", "unknown driver 'nosuchdriver'"),
        ("nosuchmodule_xyz:Dev", "cannot import module 'nosuchmodule_xyz'"),
        ("nnconform.drivers.reference:Nope", "has no attribute 'Nope'"),
        ("nnconform.drivers.reference:__doc__", "not a Device"),
    ],
)
def test_bad_driver_names_are_one_line_errors(spec, fragment):
    with pytest.raises(DriverLoadError) as e:
        load_driver(spec)
    assert fragment in str(e.value) and "\n" not in str(e.value)


# ---- the file form: path/to/file.py:attribute -----------------------------------------------

DRIVER_FILE = '''
from nnconform.drivers.reference import ReferenceDevice


class FileDevice(ReferenceDevice):
    """The reference under another name, from a file that is not an installed module."""
    name = "file-device"
'''


def _driver_file(folder: Path, text: str = DRIVER_FILE, name: str = "mydriver.py") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def test_file_form_loads_the_attribute_of_that_file(tmp_path):
    path = _driver_file(tmp_path)
    dev = load_driver(f"{path}:FileDevice")
    assert isinstance(dev, ReferenceDevice) and dev.name == "file-device"
    assert type(dev).__module__ == file_module_name(path)


def test_a_file_is_one_module_however_its_path_is_spelt(tmp_path):
    path = _driver_file(tmp_path / "a")
    odd_spelling = tmp_path / "a" / ".." / "a" / "mydriver.py"
    first, again = load_driver(f"{path}:FileDevice"), load_driver(f"{odd_spelling}:FileDevice")
    assert type(first) is type(again)
    assert import_driver_file(path) is import_driver_file(odd_spelling) is sys.modules[type(first).__module__]
    # ... so an instance pickles and comes back as the same class within the process
    assert type(pickle.loads(pickle.dumps(first))) is type(first)
    # Another file with the same name is another module.
    other = _driver_file(tmp_path / "b")
    assert import_driver_file(other) is not import_driver_file(path)


def test_check_accepts_an_existing_file_without_running_it(tmp_path):
    path = _driver_file(tmp_path, "raise RuntimeError('must not run on a name check')\n")
    check_driver_name(f"{path}:Anything")
    assert file_module_name(path) not in sys.modules


@pytest.mark.parametrize(
    "make_spec,fragment",
    [
        (lambda d: f"{d}/missing.py:Dev", "no such file"),
        (lambda d: "no/such/dir/driver.py:Dev", "no such file 'no/such/dir/driver.py'"),
        (lambda d: f"{_driver_file(d)}:Nope", "has no attribute 'Nope'"),
        (lambda d: f"{_driver_file(d, 'import nosuchmodule_xyz  # noqa: F401')}:Dev", "cannot import file"),
    ],
)
def test_bad_driver_files_are_one_line_errors(tmp_path, make_spec, fragment):
    spec = make_spec(tmp_path)
    with pytest.raises(DriverLoadError) as e:
        load_driver(spec)
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_a_file_that_fails_to_import_is_not_left_half_loaded(tmp_path):
    path = _driver_file(tmp_path, "import nosuchmodule_xyz  # noqa: F401\n")
    with pytest.raises(DriverLoadError):
        load_driver(f"{path}:Dev")
    assert file_module_name(path) not in sys.modules
    path.write_text(DRIVER_FILE)  # fixed: the next load runs the file again
    assert load_driver(f"{path}:FileDevice").name == "file-device"


def test_missing_file_is_refused_by_the_name_check(tmp_path):
    with pytest.raises(DriverLoadError) as e:
        check_driver_name(f"{tmp_path}/nope.py:Dev")
    assert "no such file" in str(e.value) and "\n" not in str(e.value)


def test_resolve_makes_only_file_paths_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_driver_spec("sub/d.py:Dev") == f"{tmp_path}/sub/d.py:Dev"
    assert resolve_driver_spec("d.py:Dev") == f"{tmp_path}/d.py:Dev"
    assert resolve_driver_spec(f"{tmp_path}/d.py:Dev") == f"{tmp_path}/d.py:Dev"  # unchanged
    assert resolve_driver_spec("reference") == "reference"
    assert (
        resolve_driver_spec("nnconform.drivers.reference:ReferenceDevice")
        == "nnconform.drivers.reference:ReferenceDevice"
    )


def test_relative_file_through_nnconform_run_from_another_directory(tmp_path):
    """A user in their project folder names their file relative to it; the run's driver host
    (and every other child) gets the absolute path, which run.json records."""
    project = tmp_path / "project"
    _driver_file(project / "drivers")
    report = tmp_path / "report"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "nnconform",
            "run",
            "--driver",
            "drivers/mydriver.py:FileDevice",
            "--suite",
            "generated",
            "--report-dir",
            str(report),
            "--seed",
            "3",
            "--",
            "-k",
            "floor",
        ],
        capture_output=True,
        text=True,
        cwd=project,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    status = json.loads((report / "run.json").read_text())
    assert status["driver"] == f"{project / 'drivers' / 'mydriver.py'}:FileDevice"
    rows = [json.loads(x) for x in (report / "results.jsonl").read_text().splitlines() if x.strip()]
    assert rows and {row["outcome"] for row in rows} == {"PASS"}


def test_nnconform_run_with_a_missing_file_is_a_usage_error(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "nnconform",
            "run",
            "--driver",
            "nope/driver.py:Dev",
            "--suite",
            "generated",
            "--report-dir",
            str(tmp_path / "report"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    assert "no such file" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_the_package_ships_no_test_drivers():
    """The deliberately broken drivers live in tests/drivers/ and load by path; none may creep
    back into the installed package (they would ship in the wheel)."""
    import pkgutil

    import nnconform.drivers

    shipped = {m.name for m in pkgutil.iter_modules(nnconform.drivers.__path__)}
    assert "reference" in shipped
    assert not {n for n in shipped if n.startswith(("broken", "fragile"))}, shipped
    doubles = Path(__file__).parent / "drivers"
    for path in sorted(doubles.glob("*.py")):  # and each one loads as a file
        assert import_driver_file(path).__file__ == str(path.resolve())


def test_a_driver_that_never_finishes_loading_says_where_it_is_stuck():
    # the host's stacks are taken before it is killed: the one-line error names the frame
    from helpers import double

    from nnconform.isolation.proxy import IsolatedDevice

    with pytest.raises(DriverLoadError) as e:
        IsolatedDevice(double("slow_load", "NeverLoads"), startup_timeout=3)
    msg = str(e.value)
    assert "did not start within 3 s" in msg
    assert "stuck in" in msg and "_wait_for_a_device_that_never_answers (slow_load.py)" in msg, msg
    assert "\n" not in msg
