"""Make tests/helpers.py importable (tests run with --import-mode=importlib)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

# A run's automatic capability probe (nnconform.probe) costs 20-30 s per fresh report
# directory; the harness's own tests start dozens of runs, so they do without it (the probe
# has its own tests in test_probe.py).
import os  # noqa: E402
os.environ.setdefault("NNCONFORM_AUTO_PROBE", "0")
