"""Package discovery for the design card's layout.

The repository keeps the folders of the design card (harness/, drivers/, generators/,
suites/, reports/) while everything installs under one import name: harness/ *is* the
``nnconform`` package and the other folders are its sub-packages.  Every folder below those
roots that holds an ``__init__.py`` is a package: a new sub-package is found here, never
added to a hand-kept list (a list once lost ``nnconform.fuzz`` and broke the wheel).
Everything else about the project lives in pyproject.toml.
"""

from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
ROOTS = {
    "nnconform": "harness",
    "nnconform.drivers": "drivers",
    "nnconform.generators": "generators",
    "nnconform.suites": "suites",
    "nnconform.reports": "reports",
}


def discover() -> tuple[list[str], dict[str, str]]:
    packages: list[str] = []
    package_dir: dict[str, str] = {}
    for name, folder in ROOTS.items():
        root = HERE / folder
        for init in sorted(root.rglob("__init__.py")):
            rel = init.parent.relative_to(root)
            if any(part.startswith((".", "__")) for part in rel.parts):
                continue
            pkg = ".".join([name, *rel.parts])
            packages.append(pkg)
            package_dir[pkg] = init.parent.relative_to(HERE).as_posix()
    return packages, package_dir


if __name__ == "__main__":
    PACKAGES, PACKAGE_DIR = discover()
    setup(packages=PACKAGES, package_dir=PACKAGE_DIR)
