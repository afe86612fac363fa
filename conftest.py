"""Repository-root pytest set-up.

When nnconform is installed (``pip install -e .``) its plugin is already registered through the
``pytest11`` entry point; for a plain checkout on ``sys.path`` we register it here instead.
"""

import importlib.metadata as _md

if not any(ep.value == "nnconform.plugin" for ep in _md.entry_points(group="pytest11")):
    pytest_plugins = ["nnconform.plugin"]
