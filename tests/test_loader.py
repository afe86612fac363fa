import pytest

from nnconform.drivers.reference import ReferenceDevice
from nnconform.errors import DriverLoadError
from nnconform.loader import load_driver


def test_entry_point_name():
    assert isinstance(load_driver("reference"), ReferenceDevice)


def test_module_attribute():
    assert isinstance(load_driver("nnconform.drivers.reference:ReferenceDevice"), ReferenceDevice)


@pytest.mark.parametrize("spec,fragment", [
    ("nosuchdriver", "unknown driver 'nosuchdriver'"),
    ("nosuchmodule_xyz:Dev", "cannot import module 'nosuchmodule_xyz'"),
    ("nnconform.drivers.reference:Nope", "has no attribute 'Nope'"),
    ("nnconform.drivers.reference:__doc__", "not a Device"),
])
def test_bad_driver_names_are_one_line_errors(spec, fragment):
    with pytest.raises(DriverLoadError) as e:
        load_driver(spec)
    assert fragment in str(e.value) and "\n" not in str(e.value)
