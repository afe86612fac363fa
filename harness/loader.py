"""Finding a driver by name: an entry point in the ``nnconform.drivers`` group, or
``module:attribute`` (a Device subclass, a factory, or an instance)."""
from __future__ import annotations

import importlib
import importlib.metadata as md

from .driver import Device
from .errors import DriverLoadError

ENTRY_POINT_GROUP = "nnconform.drivers"


def installed_drivers() -> dict[str, md.EntryPoint]:
    return {ep.name: ep for ep in md.entry_points(group=ENTRY_POINT_GROUP)}


def _instantiate(obj, spec: str) -> Device:
    if isinstance(obj, Device):
        return obj
    if callable(obj):
        dev = obj()
        if isinstance(dev, Device):
            return dev
        raise DriverLoadError(f"driver '{spec}': calling it gave {type(dev).__name__}, not an nnconform Device")
    raise DriverLoadError(f"driver '{spec}' is a {type(obj).__name__}, not a Device, Device class or factory")


def check_driver_name(spec: str) -> None:
    """DriverLoadError unless ``spec`` names an installed driver or has the module:attribute
    form.  Nothing is imported: a typo is a usage error at once, while a driver that fails as it
    loads is left to a driver host, where that becomes the driver's recorded verdict."""
    eps = installed_drivers()
    if spec not in eps and ":" not in spec:
        known = ", ".join(sorted(eps)) or "none"
        raise DriverLoadError(f"unknown driver '{spec}' (installed: {known}; or give module:attribute)")


def load_driver(spec: str) -> Device:
    check_driver_name(spec)
    eps = installed_drivers()
    if spec in eps:
        try:
            obj = eps[spec].load()
        except ImportError as e:
            raise DriverLoadError(f"driver '{spec}' is registered but cannot be imported ({e}); "
                                  f"is its optional extra installed?") from e
        return _instantiate(obj, spec)
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise DriverLoadError(f"driver '{spec}': cannot import module '{module_name}' ({e})") from e
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise DriverLoadError(f"driver '{spec}': module '{module_name}' has no attribute '{attr}'")
        obj = getattr(obj, part)
    return _instantiate(obj, spec)
