"""A handler's cold start loads only what its common invocation needs (issue #9): each import runs in a
fresh interpreter, so what this test process has already imported cannot hide a module."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

_LOADED = """
import json, sys
sys.path.insert(0, {folder!r})
import app
print(json.dumps(sorted(sys.modules)))
"""
AEAD = "cryptography.hazmat.primitives.ciphers.aead"


def loaded_by_import(function: str) -> set[str]:
    code = _LOADED.format(folder=str(ROOT / "functions" / function))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={"POWERTOOLS_SERVICE_NAME": "tickwork"})
    return set(json.loads(done.stdout))


@pytest.mark.parametrize("function, absent", [
    ("poller", (AEAD, "urllib3", "http.client", "tickwork.http.delivery", "tickwork.secrets.vault")),  # it never sends or opens
    ("api", (AEAD, "urllib3", "tickwork.http.delivery")),  # a route seals only what it is given; it never sends
    # A run neither edits jobs nor parses schedules; only a retry bounded by its job's next slot does.
    ("executor", ("tickwork.tenant.jobs", "tickwork.schedule.engine", "tickwork.tenant.quotas", "tickwork.schedule.specs")),
    ("migrations", (AEAD, "urllib3", "tickwork.http.delivery", "tickwork.dispatch.poller", "tickwork.runs.executor")),  # it only migrates
    # It puts jobs: it never sends a run, dispatches or migrates.
    ("jobs_resource", ("tickwork.http.delivery", "tickwork.dispatch.poller", "tickwork.runs.executor",
                       "tickwork.store.migrate")),
    # and the poller no longer answers CloudFormation: its deploy-time code is not loaded on a tick's cold start
    ("poller", ("tickwork.ops.provisioning",)),
])
def test_importing_a_handler_leaves_out_what_its_invocations_do_not_use(function: str, absent: tuple[str, ...]) -> None:
    loaded = loaded_by_import(function)
    assert "app" in loaded and not loaded & set(absent)


_HANDLERS = """
import json, logging, sys
sys.path.insert(0, {folder!r})
import app
print(json.dumps([type(h).__name__ for h in logging.getLogger("tickwork").handlers]))
"""


@pytest.mark.parametrize("function", ["api", "poller", "executor", "migrations", "jobs_resource"])
def test_a_handler_logs_to_stdout_as_it_is_at_each_line(function: str) -> None:
    """The API once created a plain Logger before function_logger(): its lines went to the stdout of import
    time, which a test's capture (or the local runtime's console) has closed or replaced since."""
    code = _HANDLERS.format(folder=str(ROOT / "functions" / function))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={"POWERTOOLS_SERVICE_NAME": "tickwork"})
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["_CurrentStdout"]
