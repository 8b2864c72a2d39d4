"""The baseline release, runnable beside this tree: its files taken from this repository's own git objects
(`git archive`, no worktree and no network) into a cache directory outside the tree, with a venv of its
own built once per commit and Python version (pip's cache makes a rebuild quick).

The cache is ~/.cache/tickwork/baseline-<commit>-py<major.minor> (TICKWORK_BASELINE_CACHE names another
root); delete it to build afresh. Two test runs building at once take turns on a lock file.
TICKWORK_BASELINE_COMMIT runs the test against another release (e.g. to see it find a known break).
"""
from __future__ import annotations

import fcntl
import io
import os
import re
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The release every release of this round must keep running beside itself and after a rollback: 0.29.0
# (CHANGELOG.md), main when issue 32 was filed.
BASELINE_COMMIT = "26fd9f7"
BASELINE_VERSION = "0.29.0"
BUILD_TIMEOUT_SECONDS = 900


@dataclass(frozen=True)
class Baseline:
    commit: str  # the full hash
    source: Path  # its files
    python: Path  # its venv's interpreter, with the release installed (editable: local/ finds functions/)

    @property
    def label(self) -> str:
        release = BASELINE_VERSION if self.commit.startswith(BASELINE_COMMIT) else "baseline"
        return f"{release} ({self.commit[:7]})"


def cache_root() -> Path:
    return Path(os.environ.get("TICKWORK_BASELINE_CACHE") or Path.home() / ".cache" / "tickwork")


def resolve(commit: str = BASELINE_COMMIT) -> str:
    done = subprocess.run(["git", "rev-parse", "--verify", f"{commit}^{{commit}}"], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"commit {commit} is not in this repository's history (a shallow clone?): "
                           f"{done.stderr.strip()}")
    return done.stdout.strip()


def build(commit: str | None = None) -> Baseline:
    """The baseline's files and venv, built now unless the cache has them."""
    full = resolve(commit or os.environ.get("TICKWORK_BASELINE_COMMIT") or BASELINE_COMMIT)
    home = cache_root() / f"baseline-{full[:12]}-py{sys.version_info.major}.{sys.version_info.minor}"
    home.mkdir(parents=True, exist_ok=True)
    baseline = Baseline(full, home / "src", home / "venv" / "bin" / "python")
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (home / ".built").exists():
            _extract(full, baseline.source)
            _install(baseline)
            (home / ".built").write_text(full + "\n")
    return baseline


def _extract(commit: str, into: Path) -> None:
    archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=ROOT, capture_output=True, check=True)
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")


def _install(baseline: Baseline) -> None:
    """Its runtime dependencies at the versions its layer pins (as its Makefile installs them), itself editable."""
    venv = baseline.python.parent.parent
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=BUILD_TIMEOUT_SECONDS)
    pins = venv / "layer-pins.txt"
    pins.write_text(_pins((baseline.source / "layers" / "common" / "requirements.txt").read_text()))
    subprocess.run([str(baseline.python), "-m", "pip", "install", "--quiet", "-e", str(baseline.source),
                    "-c", str(pins)],
                   check=True, timeout=BUILD_TIMEOUT_SECONDS)


def _pins(lock: str) -> str:
    """A pip lock file's pins without hashes or comments."""
    lines = (re.sub(r"\s*\\$", "", line).strip() for line in lock.splitlines())
    return "\n".join(line for line in lines if line and not line.startswith(("#", "--hash="))) + "\n"
