"""CloudFormation as the custom-resource tests play it: its events (from events/*.json) with a ResponseURL on a
local Target, the responses that Target received, and a Lambda context with a chosen remaining time."""
from __future__ import annotations

import json
import uuid
from typing import Any

from tests.conftest import Target, load_event


def cfn_event(name: str, target: Target, request_type: str, physical_id: str | None = None) -> dict[str, Any]:
    """events/<name> as CloudFormation sends a `request_type`, with a request id of its own, answered to `target`."""
    event = load_event(name)
    event.update(RequestType=request_type, RequestId=str(uuid.uuid4()),
                 ResponseURL=f"{target.url}/response?X-Amz-Signature=0000")
    if physical_id:
        event["PhysicalResourceId"] = physical_id
    return event


def cfn_responses(target: Target) -> list[dict[str, Any]]:
    """Every response PUT to the ResponseURL, in order."""
    assert all(r["method"] == "PUT" and r["path"].startswith("/response?") for r in target.requests)
    # S3 presigned URLs are signed without a content type: the PUT must not send one.
    assert all(r["headers"].get("content-type", "") == "" for r in target.requests)
    return [json.loads(r["body"]) for r in target.requests]


class FakeContext:
    def __init__(self, remaining_ms: int) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms
