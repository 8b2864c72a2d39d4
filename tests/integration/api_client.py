"""Calls the API Lambda's handler the way API Gateway does, with events derived from events/*.json."""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Callable
from urllib.parse import urlencode

from tests.conftest import load_event
from tickwork.dueindex.index import DueIndex
from tickwork.wiring import Services, configure
from tickwork.wiring import services as current_services

# The key the event files carry, so that they authenticate unmodified.
EVENT_TOKEN = "tw_example_key_do_not_use_in_production"
TARGET_SECRET = "target-secret-token"
BASE_EVENT = {
    "GET": "api_get_job.json",
    "POST": "api_create_job.json",
    "PATCH": "api_update_job.json",
    "DELETE": "api_delete_job.json",
    "PUT": "api_update_job.json",
}
DEFAULT = object()


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str]
    raw: str
    size: int = 0  # bytes of the whole Lambda response as JSON, the body escaped inside it (Lambda's limit: 6 MB)


class Api:
    """Calls the API Lambda's handler the way API Gateway does, with events derived from events/*.json."""

    def __init__(self, handler: Callable[[dict[str, Any], Any], Any], token: str, tenant_id: str,
                 index: DueIndex) -> None:
        self.handler = handler
        self.token = token
        self.tenant_id = tenant_id
        self.index = index

    def call(self, method: str, path: str, body: Any = None, *, query: dict[str, str] | None = None,
             token: Any = DEFAULT, raw_body: str | bytes | None = None,
             content_type: str = "application/json", headers: dict[str, str] | None = None) -> Reply:
        """`raw_body` as bytes arrives base64-encoded, as API Gateway sends a body that is not UTF-8."""
        event = load_event(BASE_EVENT.get(method, "api_get_job.json"))
        event["rawPath"] = event["requestContext"]["http"]["path"] = path
        event["requestContext"]["http"]["method"] = method
        event["routeKey"] = event["requestContext"]["routeKey"] = "$default"
        event.pop("pathParameters", None)
        event.pop("queryStringParameters", None)
        event["rawQueryString"] = urlencode(query or {})
        if query:
            event["queryStringParameters"] = query
        extra, headers = headers or {}, event["headers"]
        headers.pop("content-type", None)
        event.pop("body", None)
        if isinstance(raw_body, bytes):
            event["body"], event["isBase64Encoded"] = base64.b64encode(raw_body).decode(), True
            headers["content-type"] = content_type
            headers["content-length"] = str(len(raw_body))
        elif body is not None or raw_body is not None:
            event["body"] = raw_body if raw_body is not None else json.dumps(body)
            headers["content-type"] = content_type
            headers["content-length"] = str(len(event["body"].encode()))
        token = self.token if token is DEFAULT else token
        headers.pop("authorization", None)
        if token is not None:
            headers["authorization"] = f"Bearer {token}"
        headers.update({name.lower(): value for name, value in extra.items()})  # as API Gateway passes them
        return self._reply(self.handler(event, None))

    @staticmethod
    def _reply(result: dict[str, Any]) -> Reply:
        raw = result.get("body") or ""
        return Reply(result["statusCode"], json.loads(raw) if raw else None, result.get("headers") or {}, raw,
                     len(json.dumps(result).encode()))

    def create(self, **overrides: Any) -> dict[str, Any]:
        reply = self.call("POST", "/jobs", job_body(**overrides))
        assert reply.status == 201, reply.body
        return reply.body


def job_body(request: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """The body of events/api_create_job.json, with `fields` replaced and `request` merged in."""
    body = json.loads(load_event("api_create_job.json")["body"])
    body["request"].update(request or {})
    body.update(fields)
    return body


def use_settings(services: Services, **changes: Any) -> None:
    configure(Services(replace(services.settings, **changes), services.db, services.redis, services.invoker,
                       keyring=services.keyring))


def use_clock(clock: Callable[[], float]) -> None:
    """Pin the API's clock (epoch seconds): every request's `now` comes from it."""
    configure(replace(current_services(), clock=clock))


class Ticking:
    """An API clock a second later at each request (from `start`): entries of successive requests are
    ordered by time."""

    def __init__(self, start: datetime) -> None:
        self.at = start

    def __call__(self) -> float:
        self.at += timedelta(seconds=1)
        return self.at.timestamp()
