"""The three Lambda functions, loaded from `functions/*/app.py` exactly as Lambda loads `app.handler`."""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tickwork_local.lambda_context import LocalContext

FUNCTIONS_DIR = Path(__file__).resolve().parents[2] / "functions"
# Timeouts as in template.yaml; locally they only feed get_remaining_time_in_millis().
API_TIMEOUT_SECONDS = 29
POLLER_TIMEOUT_SECONDS = 10
EXECUTOR_TIMEOUT_SECONDS = 180

Handler = Callable[[dict[str, Any], Any], Any]


@dataclass(frozen=True)
class LambdaFunction:
    name: str
    handler: Handler
    timeout_seconds: float

    def invoke(self, event: dict[str, Any]) -> Any:
        return self.handler(event, LocalContext(self.name, self.timeout_seconds))


@dataclass(frozen=True)
class Functions:
    api: LambdaFunction
    poller: LambdaFunction
    executor: LambdaFunction

    @classmethod
    def load(cls, folder: Path = FUNCTIONS_DIR) -> Functions:
        return cls(
            api=LambdaFunction("tickwork-api", load_handler(folder, "api"), API_TIMEOUT_SECONDS),
            poller=LambdaFunction("tickwork-poller", load_handler(folder, "poller"), POLLER_TIMEOUT_SECONDS),
            executor=LambdaFunction("tickwork-executor", load_handler(folder, "executor"), EXECUTOR_TIMEOUT_SECONDS),
        )


def load_handler(folder: Path, name: str) -> Handler:
    """Import `<folder>/<name>/app.py` under a unique module name: all three files are called app.py."""
    path = folder / name / "app.py"
    spec = importlib.util.spec_from_file_location(f"tickwork_local_fn_{name}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.handler
