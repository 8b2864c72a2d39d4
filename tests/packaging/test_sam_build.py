"""`sam build` of the real template with Python 3.13 for arm64, offline from AWS (PyPI only): the build
holds aarch64 binaries only, exactly the locked versions, and every module the handlers need imports
from the built layer and function folders alone.

Needs aws-sam-cli (`make .venv-sam/.installed`, or `sam` on PATH, or SAM_CLI=<path>) and Python 3.13:
skipped without them, unless TICKWORK_REQUIRE_SAM_BUILD=1 (.ci/run sets it), which makes that a failure.

What cannot be proven here: the layer's C extensions are aarch64 and cannot run on this x86_64 machine.
The import test therefore loads, for exactly those modules, the x86_64 build of the same locked version
(installed from the same lock file) and checks the aarch64 file it stands for is in the layer;
everything else (all pure-Python code, tickwork's own) is imported from the build itself.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.unit.test_layer_lock import LOCK, parse_lock

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = ("ApiFunction", "PollerFunction", "ExecutorFunction", "MigrationsFunction", "JobsResourceFunction")
ELF_MAGIC = b"\x7fELF"
EM_AARCH64 = 0xB7
BUILD_TIMEOUT_SECONDS = 600

pytestmark = pytest.mark.sam


def _tool(found: str | None, what: str) -> str:
    if found:
        return found
    if os.environ.get("TICKWORK_REQUIRE_SAM_BUILD") == "1":
        pytest.fail(f"{what} not found, and TICKWORK_REQUIRE_SAM_BUILD=1")
    pytest.skip(f"{what} not found (make .venv-sam/.installed; Python 3.13 via pyenv)")


@pytest.fixture(scope="session")
def sam() -> str:
    local = ROOT / ".venv-sam" / "bin" / "sam"
    return _tool(os.environ.get("SAM_CLI") or (str(local) if local.exists() else shutil.which("sam")), "aws-sam-cli")


@pytest.fixture(scope="session")
def python313() -> str:
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.13*/bin/python3.13")))
    return _tool(found[-1] if found else shutil.which("python3.13"), "Python 3.13")


@pytest.fixture(scope="session")
def build(sam: str, python313: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sam-build")
    # SAM's python3.13 workflow runs the `python3.13` it finds on PATH.
    env = {**os.environ, "PATH": f"{Path(python313).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "SAM_CLI_TELEMETRY": "0"}
    done = subprocess.run([sam, "build", "--template-file", "template.yaml", "--build-dir", str(out)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_SECONDS)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return out


@pytest.fixture(scope="session")
def twin(python313: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same lock installed for this machine (x86_64), hashes checked: stand-ins for the C extensions."""
    out = tmp_path_factory.mktemp("twin")
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    assert uv, "uv (the dev extra) installs the twin"
    done = subprocess.run([uv, "pip", "install", "--quiet", "--python", python313, "--target", str(out), "--no-deps",
                           "--require-hashes", "-r", str(LOCK)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return out


def _elf_machine(path: Path) -> int | None:
    with path.open("rb") as f:
        head = f.read(20)
    if not head.startswith(ELF_MAGIC):
        return None
    return int.from_bytes(head[18:20], "little" if head[5] == 1 else "big")


def test_the_build_holds_aarch64_binaries_only(build: Path) -> None:
    binaries = {p: _elf_machine(p) for p in build.rglob("*") if p.is_file() and not p.is_symlink()}
    binaries = {p: m for p, m in binaries.items() if m is not None}
    names = {p.name for p in binaries}
    # The native parts of the locked packages are all there...
    for prefix in ("_psycopg.", "_pydantic_core.", "hiredis.", "_rust.", "_cffi_backend."):
        assert any(n.startswith(prefix) for n in names), prefix
    # ...and every ELF file in the build, the bundled shared libraries too, is for aarch64.
    wrong = sorted(str(p.relative_to(build)) for p, machine in binaries.items() if machine != EM_AARCH64)
    assert not wrong, wrong
    assert not [p for p in build.rglob("*x86_64*")]
    tags = [line for wheel in build.glob("CommonLayer/python/*.dist-info/WHEEL")
            for line in wheel.read_text().splitlines() if line.startswith("Tag:")]
    assert tags and all(t.endswith(("-any", "aarch64")) for t in tags), tags


def test_the_layer_holds_exactly_the_locked_versions(build: Path) -> None:
    layer = build / "CommonLayer" / "python"
    installed = {}
    for meta in layer.glob("*.dist-info/METADATA"):
        fields = dict(line.split(": ", 1) for line in meta.read_text().splitlines()[:3] if ": " in line)
        installed[fields["Name"].lower().replace("_", "-").replace(".", "-")] = fields["Version"]
    assert installed == {name: pin.version for name, pin in parse_lock(LOCK.read_text()).items()}
    assert sorted(p.name for p in (layer / "tickwork" / "migrations").glob("*.sql")) == sorted(
        p.name for p in (ROOT / "layers/common/tickwork/migrations").glob("*.sql"))


def test_the_built_layer_imports_every_module_the_handlers_need(build: Path, twin: Path, python313: str) -> None:
    layer = (build / "CommonLayer" / "python").resolve()
    functions = [(build / name).resolve() for name in FUNCTIONS]
    done = subprocess.run([python313, "-S", "-E", str(ROOT / "tests/packaging/import_layer.py"), str(layer), str(twin),
                           *map(str, functions)], capture_output=True, text=True, timeout=300,
                          env={"PATH": os.environ.get("PATH", ""), "POWERTOOLS_SERVICE_NAME": "tickwork"})
    assert done.returncode == 0, done.stderr[-4000:]
    report: dict[str, Any] = json.loads(done.stdout)
    stdlib = Path(report["base_stdlib"]).resolve()
    allowed = (layer, stdlib, *functions)
    substituted = {name: Path(path) for name, path in report["substituted"].items()}
    outside = {}
    for name, file in report["modules"].items():
        if file is None or name in substituted or name in ("__main__", "__mp_main__"):
            continue
        path = Path(file).resolve()
        if not any(path.is_relative_to(root) for root in allowed):
            outside[name] = file
    assert not outside, outside  # nothing from the working tree, the dev venv or the twin's pure Python
    assert report["modules"]["tickwork"].startswith(str(layer))
    assert {"tickwork.api.app", "tickwork.dispatch.poller", "tickwork.runs.executor", "tickwork.ops.maintenance",
            "tickwork.ops.provisioning", "boto3", "psycopg_pool", "redis"} <= set(report["modules"])
    # Each stand-in replaced an aarch64 extension of the same module in the layer, nothing else.
    assert set(substituted) >= {"pydantic_core._pydantic_core", "psycopg_binary._psycopg"}
    for name, path in substituted.items():
        relative = path.relative_to(twin.resolve()).parent
        leaf = name.rpartition(".")[2]
        assert list((layer / relative).glob(f"{leaf}.*aarch64*.so")) or (layer / relative / f"{leaf}.abi3.so").exists()
