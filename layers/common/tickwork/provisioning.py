"""Deploy-time work CloudFormation asks of the poller through a custom resource: migrating the schema.

CloudFormation waits for a PUT to the event's ResponseURL, so every request is answered, failures
included (a raised error would leave the deploy hanging until the resource's ServiceTimeout).
"""
from __future__ import annotations

import functools
import json
from typing import Any, Callable, Mapping

from aws_lambda_powertools import Logger

from tickwork.db import migrate

logger = Logger(child=True)

MIGRATION_RESOURCE_TYPE = "Custom::TickworkSchemaMigration"
# CloudFormation refuses responses over 4 KiB; the reason is the only part of ours that can grow.
MAX_REASON_CHARS = 1000
# Time kept back from the Lambda's remaining time to send the response after a slow database.
RESPONSE_MARGIN_SECONDS = 3.0
DEFAULT_CHECKOUT_SECONDS = 30.0

@functools.cache
def _http() -> Any:
    """Made on the first deploy-time event only: a tick never needs urllib3 (cold start)."""
    import urllib3

    return urllib3.PoolManager(retries=urllib3.Retry(total=3, backoff_factor=0.5), timeout=urllib3.Timeout(total=5.0))


def is_custom_resource_event(event: Mapping[str, Any]) -> bool:
    return "RequestType" in event and "ResponseURL" in event


def checkout_seconds(context: Any) -> float:
    """How long the migration may wait for a connection and still leave time to answer."""
    if context is None:
        return DEFAULT_CHECKOUT_SECONDS
    return max(1.0, context.get_remaining_time_in_millis() / 1000 - RESPONSE_MARGIN_SECONDS)


def migrate_schema(pool: Any, timeout: float) -> list[str]:
    with pool.connection(timeout=timeout) as conn:
        return migrate(conn)


def handle_custom_resource(event: Mapping[str, Any], migrate_now: Callable[[], list[str]],
                           http: Any = None) -> dict[str, Any]:
    """Run the request (Create/Update migrate, Delete keeps the data) and send CloudFormation the outcome."""
    physical_id = event.get("PhysicalResourceId") or f"{event['LogicalResourceId']}-schema"
    try:
        data = _run(event, migrate_now)
        response = _response(event, physical_id, "SUCCESS", "", data)
    except Exception as exc:  # every failure must reach CloudFormation, whatever raised it
        logger.exception("custom resource request failed", extra={"request_type": event.get("RequestType")})
        response = _response(event, physical_id, "FAILED", _reason(exc), {})
    _send(http or _http(), str(event["ResponseURL"]), response)
    return response


def _run(event: Mapping[str, Any], migrate_now: Callable[[], list[str]]) -> dict[str, str]:
    if event.get("ResourceType") != MIGRATION_RESOURCE_TYPE:
        raise ValueError(f"unknown custom resource type {event.get('ResourceType')!r}")
    if event["RequestType"] == "Delete":
        return {}  # the database outlives the migration resource
    applied = migrate_now()
    logger.info("schema migrated", extra={"applied": applied})
    return {"Applied": ",".join(applied)}


def _reason(exc: BaseException) -> str:
    return f"schema migration failed: {type(exc).__name__}: {exc}"[:MAX_REASON_CHARS]


def _response(event: Mapping[str, Any], physical_id: str, status: str, reason: str,
              data: dict[str, str]) -> dict[str, Any]:
    return {
        "Status": status,
        "Reason": reason or "see the poller's log",
        "PhysicalResourceId": physical_id,
        "StackId": event["StackId"],
        "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"],
        "Data": data,
    }


def _send(http: Any, url: str, response: dict[str, Any]) -> None:
    # The URL is a presigned S3 PUT signed without a content type: send none.
    reply = http.request("PUT", url, body=json.dumps(response).encode(), headers={"content-type": ""})
    if reply.status >= 300:
        logger.error("CloudFormation did not take the response", extra={"status": reply.status})
