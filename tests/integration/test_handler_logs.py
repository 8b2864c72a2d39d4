"""Every function logs JSON lines on stdout carrying the service, the Lambda request id and the run's ids.

Each handler runs in a process of its own (tests/integration/run_handler.py), as in Lambda, driven by the
sample events in events/ against this test's real Postgres schema and Redis namespace; every line it
prints must parse as JSON. The run goes poller -> executor -> target for real, so the executor's line
carries the ids and lag of an actual attempt.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import tickwork
from tests.conftest import ROOT, Target, load_event
from tests.integration.api_client import EVENT_TOKEN
from tests.integration.helpers import insert_job
from tickwork.store.tenants import create_api_key, create_tenant
from tickwork.wiring import Services

SERVICE = "tickwork-logs-test"  # not the package default: the environment's name must win
RUN_TIMEOUT_SECONDS = 120


def _run(function: str, events: list[dict[str, Any]], services: Services, tmp_path: Path,
         dispatches: Path | None = None) -> tuple[list[str], list[dict[str, Any]], list[Any]]:
    """Invoke `function` once per event in a fresh process; returns the request ids, every stdout line
    parsed as JSON (a line that is not fails the test), and the handler's results."""
    request_ids = [str(uuid.uuid4()) for _ in events]
    spec = tmp_path / f"{function}-spec.json"
    results = tmp_path / f"{function}-results.json"
    spec.write_text(json.dumps({
        "invocations": [{"event": e, "request_id": r} for e, r in zip(events, request_ids)],
        "results": str(results), "dispatches": str(dispatches) if dispatches else None,
    }))
    settings = services.settings
    env = {key: value for key, value in os.environ.items() if not key.startswith(("POWERTOOLS_", "TICKWORK_"))}
    env.update(DATABASE_URL=settings.database_url, REDIS_URL=settings.redis_url, TICKWORK_NAMESPACE=settings.namespace,
               TICKWORK_ALLOW_PRIVATE_TARGETS="true", POWERTOOLS_SERVICE_NAME=SERVICE, LOG_LEVEL="INFO",
               POWERTOOLS_METRICS_DISABLED="true", TICKWORK_KEY_FILE=settings.key_file)
    done = subprocess.run([sys.executable, "-m", "tests.integration.run_handler", function, str(spec)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS)
    assert done.returncode == 0, done.stderr
    lines = []
    for line in done.stdout.splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            raise AssertionError(f"{function} printed a line that is not JSON: {line!r}") from None
    assert lines, f"{function} logged nothing"
    for record in lines:
        assert record["service"] == SERVICE and record["version"] == tickwork.__version__, record
        assert record["function_name"] == f"tickwork-{function}", record
        assert record["function_request_id"] in request_ids, record
        assert record["level"] in ("INFO", "WARNING", "ERROR") and record["message"], record
    return request_ids, lines, json.loads(results.read_text())


def test_migrations_poller_and_executor_lines_carry_the_ids(services: Services, target: Target, tmp_path: Path) -> None:
    job_id = insert_job(services, schedule="0 0 1 1 *", next_run_at=datetime.now(timezone.utc) - timedelta(seconds=1),
                        url=target.url + "/hook")
    migrate = load_event("migrations_create.json")
    # Not CloudFormation's URL: the deployed handler refuses it unanswered (tickwork.ops.response_url), and says so.
    migrate["ResponseURL"] = target.url + "/cloudformation"
    (migrate_id,), lines, _ = _run("migrations", [migrate], services, tmp_path)
    refused = next(line for line in lines if line["message"].startswith("custom resource request refused"))
    assert refused["function_request_id"] == migrate_id and refused["cold_start"] is True
    assert refused["level"] == "ERROR" and refused["error"].startswith("ResponseURL: ")
    assert not any(r["path"] == "/cloudformation" for r in target.requests)

    dispatches = tmp_path / "dispatches.json"
    ids, lines, results = _run("poller", [load_event("poller_tick.json"), load_event("poller_maintenance.json")],
                               services, tmp_path, dispatches)
    assert results[0]["dispatched"] == 1
    by_message = {line["message"]: line for line in lines}
    tick = by_message["tick dispatched runs"]
    assert tick["function_request_id"] == ids[0] and tick["dispatched"] == 1 and tick["cold_start"] is True
    assert by_message["maintenance finished"]["function_request_id"] == ids[1]

    (dispatch,) = json.loads(dispatches.read_text())
    event = load_event("executor_dispatch.json")
    event["dispatches"][0].update(dispatch)
    ids, lines, results = _run("executor", [event], services, tmp_path)
    assert results == [{"outcomes": ["succeeded"]}]
    (attempt,) = [line for line in lines if line["message"] == "attempt finished"]
    assert attempt["function_request_id"] == ids[0]
    assert attempt["job_id"] == job_id and attempt["execution_id"] == dispatch["execution_id"]
    assert attempt["attempt"] == 1 and attempt["status"] == "succeeded" and attempt["status_code"] == 200
    # The slot was a second before the insert: the lag is at least that, as a whole number of ms.
    assert isinstance(attempt["lag_ms"], int) and attempt["lag_ms"] >= 1000


def test_api_authorizer_and_admin_lines(services: Services, db: Any, tmp_path: Path) -> None:
    create_api_key(db, create_tenant(db, "tenant-a"), token=EVENT_TOKEN)
    http_events = sorted(p.name for p in (ROOT / "events").glob("api_*.json")
                         if p.name != "api_authorizer.json" and not p.name.startswith("api_admin_"))
    refused = load_event("api_authorizer.json")
    refused["headers"]["authorization"] = "Bearer tw_not_a_key_anyone_has"
    events = [load_event(name) for name in http_events] + [
        load_event("api_authorizer.json"), refused, load_event("api_admin_create_tenant.json")]
    ids, lines, results = _run("api", events, services, tmp_path)

    answered = {line["function_request_id"]: line for line in lines if line["message"] == "request answered"}
    for request_id, event, result in zip(ids, events, results):
        if "rawPath" in event and "routeArn" not in event:
            line = answered[request_id]
            assert line["path"] == event["rawPath"] and line["status"] == result["statusCode"], (line, result)
            assert line["method"] == event["requestContext"]["http"]["method"]
            assert EVENT_TOKEN not in json.dumps(line)
    assert len(answered) == len(http_events)
    assert results[-3]["isAuthorized"] is True and results[-2] == {"isAuthorized": False}
    (denied,) = [line for line in lines if line["message"] == "request not authorized"]
    assert denied["function_request_id"] == ids[-2] and denied["reason"] == "unknown or revoked key"
    (created,) = [line for line in lines if line["message"] == "tenant created"]
    assert created["function_request_id"] == ids[-1] and created["tenant_id"] == results[-1]["tenant_id"]
    assert results[-1]["api_key"] not in "".join(json.dumps(line) for line in lines)
