"""Run one Lambda function's handler in a process of its own, as Lambda does, so a test reads exactly what
it prints: `python -m tests.integration.run_handler <function> <spec.json>`.

The spec is {"invocations": [{"event": ..., "request_id": ...}], "results": <path>, "dispatches": <path>|null}.
Settings come from the environment (Settings.from_env, as in Lambda). With "dispatches", the poller's
executor invokes are written to that file instead of calling Lambda: nothing here reaches AWS.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tickwork.models import Dispatch
from tickwork.settings import Settings
from tickwork.wiring import build_services, configure
from tickwork_local.functions import EXECUTOR_TIMEOUT_SECONDS, FUNCTIONS_DIR, load_handler
from tickwork_local.lambda_context import LocalContext


class FileInvoker:
    def __init__(self, path: Path) -> None:
        self.path = path

    def invoke(self, dispatches: list[Dispatch]) -> None:
        known = json.loads(self.path.read_text()) if self.path.exists() else []
        known += [{"execution_id": d.execution_id, "attempt": d.attempt, "fire_at_ms": d.fire_at_ms}
                  for d in dispatches]
        self.path.write_text(json.dumps(known))


def main(function: str, spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    if spec.get("dispatches"):
        configure(build_services(Settings.from_env(), invoker=FileInvoker(Path(spec["dispatches"]))))
    handler = load_handler(FUNCTIONS_DIR, function)
    results: list[Any] = []
    for invocation in spec["invocations"]:
        context = LocalContext(f"tickwork-{function}", EXECUTOR_TIMEOUT_SECONDS,
                               aws_request_id=invocation["request_id"])
        results.append(handler(invocation["event"], context))
    Path(spec["results"]).write_text(json.dumps(results, default=str))


if __name__ == "__main__":
    main(*sys.argv[1:])
