"""CI: build the wheel, install it (not editable) into a fresh virtualenv, and run every
subcommand once there, from an empty folder, so that a packaging mistake (a module left out
of the wheel, a data file not shipped) fails CI instead of a user's first run.

    python3 .ci/wheel_smoke.py [--keep DIR]

Each step names the command, its exit status and, for commands that run cases, checks the
artifact contract (run.json with its exit status, results.jsonl, results.csv, summary.json,
report.html).  Exit status 0 when every step did what it should, 1 otherwise.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = ("run.json", "results.jsonl", "results.csv", "summary.json", "report.html")
# A driver that gets RELU wrong by a whole unit: `run` must find it (exit 1) and dump a spec
# that `replay` reproduces against it and clears against the reference.
SMOKE_DRIVER = """
import dataclasses

import numpy as np
from nnconform.drivers.reference import ReferenceDevice, ReferencePreparedModel


class _WrongRelu(ReferencePreparedModel):
    def execute(self, request, **kw):
        result = super().execute(request, **kw)
        if self.model.operation_names() != ["RELU"]:
            return result
        outs = tuple(o + 1 if o.dtype == np.float32 else o for o in result.outputs)
        return dataclasses.replace(result, outputs=outs)


class ReluOffByOne(ReferenceDevice):
    def prepare(self, model, **kw):
        return _WrongRelu(super().prepare(model, **kw).model)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", help="work in this folder and keep it (default: a temporary one)")
    a = ap.parse_args()
    work = Path(a.keep or tempfile.mkdtemp(prefix="nnconform-wheel-"))
    work.mkdir(parents=True, exist_ok=True)
    failures: list[str] = []
    t0 = time.monotonic()

    def step(
        name: str,
        cmd: list[str],
        expect: tuple[int, ...] = (0,),
        cwd: Path | None = None,
        timeout: float = 600,
        artifacts: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        t = time.monotonic()
        p = subprocess.run(
            cmd,
            cwd=cwd or run_dir,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "PYTHONPATH": ""},
        )
        ok = p.returncode in expect
        problems = []
        if artifacts is not None:
            d = (cwd or run_dir) / artifacts
            missing = [f for f in ARTIFACTS if not (d / f).is_file()]
            if missing:
                problems.append(f"missing artifacts {missing}")
            else:
                recorded = json.loads((d / "run.json").read_text()).get("exit_status")
                if recorded != p.returncode:
                    problems.append(f"run.json says exit_status {recorded}, the command exited {p.returncode}")
        status = "ok" if ok and not problems else "FAILED"
        print(
            f"wheel-smoke: {status:6s} {name}: exit {p.returncode} in {time.monotonic() - t:.1f} s"
            + (f" ({'; '.join(problems)})" if problems else ""),
            flush=True,
        )
        if status != "ok":
            failures.append(name)
            print((p.stdout[-2000:] + "\n" + p.stderr[-2000:]).strip(), flush=True)
        return p

    dist = work / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    venv = work / "venv"
    shutil.rmtree(venv, ignore_errors=True)
    run_dir = work / "runs"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir()
    # setuptools builds in the checkout's build/ folder and copies what it finds there into the
    # wheel: a module deleted from the sources would still ship from a stale build/lib.
    shutil.rmtree(REPO / "build", ignore_errors=True)
    step(
        "build the wheel",
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(REPO)],
        cwd=work,
    )
    shutil.rmtree(REPO / "build", ignore_errors=True)
    wheels = glob.glob(str(dist / "nnconform-*.whl"))
    if not wheels:
        print("wheel-smoke: no wheel was built", flush=True)
        return 1
    step("a fresh virtualenv", [sys.executable, "-m", "venv", str(venv)], cwd=work)
    py = str(venv / "bin" / "python")
    step("install the wheel", [py, "-m", "pip", "install", "--quiet", wheels[0]], cwd=work, timeout=1200)
    nn = [str(venv / "bin" / "nnconform")]

    # --help of the command and of every subcommand (each prints the exit-status table)
    helped = step("nnconform --help", [*nn, "--help"])
    commands = [
        "run",
        "drivers",
        "validate",
        "coverage",
        "diff",
        "vectors",
        "replay",
        "import",
        "models",
        "bench",
        "probe",
        "stress",
        "fuzz",
    ]
    for c in commands:
        p = step(f"nnconform {c} --help", [*nn, c, "--help"])
        if "Exit status" not in p.stdout:
            failures.append(f"{c} --help prints no exit-status table")
    if helped.returncode == 0 and "Exit status" not in helped.stdout:
        failures.append("--help prints no exit-status table")

    (run_dir / "smokedriver.py").write_text(SMOKE_DRIVER)
    step("drivers", [*nn, "drivers"])
    step("vectors list", [*nn, "vectors", "list"])
    step("coverage", [*nn, "coverage"])
    step("models list", [*nn, "models", "list"])
    step(
        "run (reference)",
        [
            *nn,
            "run",
            "--driver",
            "reference",
            "--suite",
            "generated",
            "--seed",
            "1",
            "--report-dir",
            "clean",
            "--",
            "-k",
            "RELU and fp32",
        ],
        artifacts="clean",
    )
    step(
        "run (a wrong RELU)",
        [
            *nn,
            "run",
            "--driver",
            "smokedriver:ReluOffByOne",
            "--suite",
            "generated",
            "--seed",
            "1",
            "--report-dir",
            "wrong",
            "--",
            "-k",
            "RELU and fp32",
        ],
        expect=(1,),
        artifacts="wrong",
    )
    specs = sorted((run_dir / "wrong" / "failures").glob("*.spec.json"))
    if not specs:
        failures.append("the failing run dumped no spec")
    else:
        step("validate", [*nn, "validate", str(specs[0])])
        step("replay (reference)", [*nn, "replay", str(specs[0]), "--driver", "reference"])
        step(
            "replay (the wrong driver)",
            [*nn, "replay", str(specs[0]), "--driver", "smokedriver:ReluOffByOne"],
            expect=(1,),
        )
    step("diff", [*nn, "diff", "clean", "wrong"], expect=(0, 1))
    step("probe", [*nn, "probe", "--driver", "reference", "--ops", "RELU", "--report-dir", "probe"])
    step(
        "stress",
        [
            *nn,
            "stress",
            "--driver",
            "reference",
            "--budget",
            "20s",
            "--tests",
            "random-model-load",
            "--seed",
            "1",
            "--report-dir",
            "stress",
        ],
        artifacts="stress",
    )
    step(
        "fuzz",
        [*nn, "fuzz", "--driver", "reference", "--cases", "30", "--seed", "1", "--report-dir", "fuzz"],
        artifacts="fuzz",
    )
    step(
        "bench",
        [
            *nn,
            "bench",
            "--driver",
            "reference",
            "--models",
            "mobilenet_v1_float",
            "--warmup",
            "1",
            "--iterations",
            "2",
            "--inputs",
            "1",
            "--report-dir",
            "bench",
        ],
        artifacts="bench",
    )
    step("a bad option is a usage error", [*nn, "stress", "--mem-limit", "lots"], expect=(2,))

    print(
        f"wheel-smoke: {len(failures)} failed in {time.monotonic() - t0:.0f} s"
        + (f": {', '.join(failures)}" if failures else ""),
        flush=True,
    )
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
