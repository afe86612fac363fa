"""Finding a driver by name: an entry point in the ``nnconform.drivers`` group,
``module:attribute``, or ``path/to/file.py:attribute`` (a Device subclass, a factory, or an
instance).

The file form is for a driver engineer who has a file rather than an installed module (and for
the harness's own test drivers, which live under tests/ and are not part of the package).  A
relative path is made absolute once, where the name enters the harness (resolve_driver_spec, at
the CLI and the pytest plugin), so that the driver host, the stress sandbox, fuzz workers and
cluster workers, which may run elsewhere, all load the same file."""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata as md
import importlib.util
import os
import re
import sys
import threading
from types import ModuleType
from typing import Any

from nnconform.driver import Device
from nnconform.errors import DriverLoadError

ENTRY_POINT_GROUP = "nnconform.drivers"

# Module names of loaded driver files start with this; the rest is the file's stem and a hash of
# its real path, so one file is one module however its path is spelt, and two files with the
# same name in different folders are two modules.
FILE_MODULE_PREFIX = "nnconform_driver_file_"

# Re-entrant: a driver file may load a sibling file while it is itself being executed.
_FILE_LOCK = threading.RLock()


def installed_drivers() -> dict[str, md.EntryPoint]:
    return {ep.name: ep for ep in md.entry_points(group=ENTRY_POINT_GROUP)}


def _file_form(spec: str) -> tuple[str, str] | None:
    """(path, attribute) when ``spec`` names a file: the part before the last ':' ends in .py
    or has a path separator.  A dotted module name has neither."""
    path, sep, attr = spec.rpartition(":")
    if not sep or not path:
        return None
    if path.endswith(".py") or os.sep in path or (os.altsep and os.altsep in path):
        return path, attr
    return None


def resolve_driver_spec(spec: str) -> str:
    """The driver name as every process should see it: a file form with a relative (or ~) path
    gets the absolute path against this process's working directory; other names are
    returned unchanged."""
    form = _file_form(spec)
    if form is None:
        return spec
    path, attr = form
    return f"{os.path.abspath(os.path.expanduser(path))}:{attr}"


def file_module_name(path: str | os.PathLike[str]) -> str:
    """The stable module name a driver file is loaded under (see FILE_MODULE_PREFIX)."""
    real = os.path.realpath(path)
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(real))[0])
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:12]
    return f"{FILE_MODULE_PREFIX}{stem}_{digest}"


def import_driver_file(path: str | os.PathLike[str]) -> ModuleType:
    """Import a Python file as a module, once per process: loading the same file again (under
    any spelling of its path) gives the same module object, so classes keep one identity.  The
    module sits in sys.modules under file_module_name(path), which is what lets pickle and
    dataclasses find it.  Raises DriverLoadError if there is no such file; an exception raised
    by the file's own code propagates, as it would from an import."""
    real = os.path.realpath(path)
    if not os.path.isfile(real):
        raise DriverLoadError(f"no driver file {os.fspath(path)!r}")
    name = file_module_name(real)
    with _FILE_LOCK:
        module = sys.modules.get(name)
        if module is not None:
            return module
        spec = importlib.util.spec_from_file_location(name, real)
        if spec is None or spec.loader is None:
            raise DriverLoadError(f"driver file {os.fspath(path)!r} cannot be loaded as Python source")
        module = importlib.util.module_from_spec(spec)
        # Registered before its code runs, as the import system does for a module: code in the
        # file that looks itself up (dataclasses, pickle, typing) then finds it.
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            # A half-executed module must not be handed out by the next load.
            sys.modules.pop(name, None)
            raise
    return module


def _instantiate(obj: object, spec: str) -> Device:
    if isinstance(obj, Device):
        return obj
    if callable(obj):
        dev = obj()
        if isinstance(dev, Device):
            return dev
        raise DriverLoadError(f"driver '{spec}': calling it gave {type(dev).__name__}, not an nnconform Device")
    raise DriverLoadError(f"driver '{spec}' is a {type(obj).__name__}, not a Device, Device class or factory")


def check_driver_name(spec: str) -> None:
    """DriverLoadError unless ``spec`` names an installed driver, has the module:attribute form,
    or names an existing file as path.py:attribute.  Nothing is imported: a typo is a usage
    error at once, while a driver that fails as it loads is left to a driver host, where that
    becomes the driver's recorded verdict."""
    eps = installed_drivers()
    if spec in eps:
        return
    form = _file_form(spec)
    if form is not None:
        if not os.path.isfile(form[0]):
            raise DriverLoadError(f"driver '{spec}': no such file '{form[0]}'")
        return
    if ":" not in spec:
        known = ", ".join(sorted(eps)) or "none"
        raise DriverLoadError(
            f"unknown driver '{spec}' (installed: {known}; or give module:attribute or path/to/file.py:attribute)"
        )


def _attribute(module: ModuleType, attr: str, spec: str, where: str) -> Any:
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise DriverLoadError(f"driver '{spec}': {where} has no attribute '{attr}'")
        obj = getattr(obj, part)
    return obj


def load_driver(spec: str) -> Device:
    check_driver_name(spec)
    eps = installed_drivers()
    if spec in eps:
        try:
            obj = eps[spec].load()
        except ImportError as e:
            raise DriverLoadError(
                f"driver '{spec}' is registered but cannot be imported ({e}); is its optional extra installed?"
            ) from e
        return _instantiate(obj, spec)
    form = _file_form(spec)
    if form is not None:
        path, attr = form
        try:
            module = import_driver_file(path)
        except ImportError as e:
            raise DriverLoadError(f"driver '{spec}': cannot import file '{path}' ({e})") from e
        return _instantiate(_attribute(module, attr, spec, f"file '{path}'"), spec)
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise DriverLoadError(f"driver '{spec}': cannot import module '{module_name}' ({e})") from e
    return _instantiate(_attribute(module, attr, spec, f"module '{module_name}'"), spec)
