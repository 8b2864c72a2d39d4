"""Cold start: how long importing each function's handler module takes on Python 3.13, as Lambda imports
it (`app.handler`, before any `services()`), today's code beside the baseline commit's in the same run;
and, in the same interpreter, that import plus the modules its first invocation loads (FIRST_CALL), so a
module moved from import to first call shows up as not saved.

Each sample is a fresh interpreter started with -S -E (no site, no environment), whose path is laid out
as Lambda's: the function's folder (/var/task), the layer's `tickwork` tree (/opt/python), then the
installed dependencies (a 3.13 virtualenv's site-packages, standing in for the layer's). Only the
import is timed, not the interpreter's own start. Samples of the two sides alternate, so a busy moment
of the machine falls on both. One discarded sample per side and function first writes the bytecode
caches (Lambda has them only if the build ships them: both sides alike here).
"""
from __future__ import annotations

import glob
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from bench.phases import Unavailable
from bench.report import ROOT

BASELINE_COMMIT = "203af8c"
FUNCTIONS = ("api", "poller", "executor")
TARGET_MS = 250.0
# What a Lambda environment's first invocation imports beyond the handler module, without connecting to
# anything: services() as the template configures it (a Postgres pool whose login comes from Secrets
# Manager, Redis, boto3 for the executor invoke / SNS / KMS), plus the first tick, run or route's own.
_SERVICES = ("psycopg_pool", "tickwork.store.credentials", "aws_lambda_powertools.utilities.parameters", "redis", "boto3")
FIRST_CALL = {
    "api": _SERVICES + ("tickwork.api.app",),  # an HTTP route (the authorizer's event needs less)
    "poller": _SERVICES,  # a tick
    "executor": _SERVICES + ("cryptography.hazmat.primitives.ciphers.aead",),  # a run: its signing secret is opened
}
_SAMPLE = """
import importlib, sys, time
sys.path[:0] = {path!r}
started, cpu = time.perf_counter(), time.process_time()
import app
print((time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000)
for name in {first_call!r}:
    importlib.import_module(name)
print((time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000)
"""
# Wall time is what Lambda's init costs on an idle CPU; on a shared, busy machine it mostly measures the
# queue for a core, so the process's own CPU time is reported beside it.


def python313() -> tuple[str, str]:
    """The 3.13 interpreter and the site-packages holding the dependencies: .venv-3.13 once fully installed
    (`make bench` builds it, as `make .venv-3.13/.installed VENV=.venv-3.13 PYTHON=...`), else this
    interpreter if it is 3.13."""
    venv = ROOT / ".venv-3.13"
    candidates = [str(venv / "bin" / "python")] if (venv / ".installed").exists() else []
    if sys.version_info[:2] == (3, 13):
        candidates.append(sys.executable)
    for candidate in candidates:
        purelib = subprocess.run([candidate, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        return candidate, purelib
    found = _pyenv_313()
    hint = (f"make .venv-3.13/.installed VENV=.venv-3.13 PYTHON={found[0]}" if found
            else "no Python 3.13 under `pyenv root`/versions either")
    raise Unavailable(f"needs Python 3.13 with Tickwork's dependencies: no .venv-3.13 ({hint})")


def _pyenv_313() -> list[str]:
    """pyenv's 3.13 interpreters, where .ci/run looks for them."""
    root = ""
    if shutil.which("pyenv"):
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=False).stdout.strip()
    return sorted(glob.glob(os.path.join(root or os.path.expanduser("~/.pyenv"), "versions/3.13*/bin/python3.13")))


def checkout(commit: str, into: Path) -> Path:
    """`git archive <commit>` of the function and layer folders, unpacked under `into`."""
    archive = into / "baseline.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "archive", commit, "functions", "layers/common"], cwd=ROOT, stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / commit, filter="data")
    return into / commit


def sample(python: str, tree: Path, function: str, site_packages: str) -> tuple[float, float, float, float]:
    """One fresh interpreter importing `app` of `tree`/functions/`function`, then FIRST_CALL; returns the
    (wall, CPU) ms of the import and of import plus first call."""
    path = [str(tree / "functions" / function), str(tree / "layers" / "common"), site_packages]
    env = {"PATH": os.environ.get("PATH", ""), "POWERTOOLS_SERVICE_NAME": "tickwork", "LOG_LEVEL": "INFO"}
    code = _SAMPLE.format(path=path, first_call=FIRST_CALL[function])
    done = subprocess.run([python, "-S", "-E", "-c", code], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"importing {tree}/functions/{function}/app.py failed:\n{done.stderr}")
    imported, first_call = (line.split() for line in done.stdout.strip().splitlines()[-2:])
    wall, cpu, total_wall, total_cpu = map(float, imported + first_call)
    return wall, cpu, total_wall, total_cpu


_KINDS = ("wall_ms", "cpu_ms", "first_call_wall_ms", "first_call_cpu_ms")


def summary(samples: list[float]) -> dict[str, Any]:
    ordered = sorted(samples)
    return {"n": len(ordered), "p50": statistics.median(ordered),
            "p90": ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))], "samples": ordered}


def run(samples: int = 9, baseline: str = BASELINE_COMMIT) -> dict[str, Any]:
    python, site_packages = python313()
    with tempfile.TemporaryDirectory(prefix="tickwork-coldstart-") as tmp:
        old = checkout(baseline, Path(tmp))
        trees = {"tickwork": ROOT, "baseline": old}
        results: dict[str, Any] = {"python": python, "baseline_commit": baseline, "functions": {}}
        for function in FUNCTIONS:
            for tree in trees.values():
                sample(python, tree, function, site_packages)  # writes the bytecode caches; not counted
            taken: dict[str, list[tuple[float, float, float, float]]] = {side: [] for side in trees}
            for _ in range(samples):
                for side, tree in trees.items():
                    taken[side].append(sample(python, tree, function, site_packages))
            results["functions"][function] = {
                side: {kind: summary([v[i] for v in values]) for i, kind in enumerate(_KINDS)}
                for side, values in taken.items()}
    results["python_version"] = subprocess.run([python, "-c", "import sys; print(sys.version.split()[0])"],
                                               capture_output=True, text=True, check=True).stdout.strip()
    return results


def rows(r: dict[str, Any]) -> list[tuple[str, ...]]:
    from bench.report import ms, ratio, verdict

    out: list[tuple[str, ...]] = [(
        f"Cold start: import of each handler module on Python {r['python_version']}, fresh interpreter per sample "
        f"({r['functions']['api']['tickwork']['wall_ms']['n']} each, alternating); baseline column: commit "
        f"{r['baseline_commit']}, same run",)]
    for function, sides in r["functions"].items():
        new, old = sides["tickwork"], sides["baseline"]
        for kind, label in (("wall_ms", "import, wall"), ("cpu_ms", "import, CPU"),
                            ("first_call_wall_ms", "import + first call's, wall"),
                            ("first_call_cpu_ms", "import + first call's, CPU")):
            a, b = new[kind], old[kind]
            target = verdict(a["p50"], TARGET_MS, ms) + " (p50)" if kind in ("wall_ms", "cpu_ms") else "-"
            out.append((f"functions/{function}/app.py {label} p50 / p90", f"{ms(a['p50'])} / {ms(a['p90'])}",
                        f"{ms(b['p50'])} / {ms(b['p90'])}", ratio(a["p50"], b["p50"]) + " (p50)", target))
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=1))
