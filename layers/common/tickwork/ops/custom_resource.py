"""Answering a CloudFormation custom-resource request: the work runs within a budget, and the outcome,
failures included, is PUT to the event's ResponseURL before the function's own timeout.

CloudFormation waits for that PUT: a raised error, or a Lambda killed at its timeout, would leave the
deploy hanging until the resource's ServiceTimeout (an hour by default). So the work runs in a thread of
its own, and when the budget is spent CloudFormation is answered FAILED whatever the work is still doing.

An event whose ResponseURL is not CloudFormation's (tickwork.ops.response_url) was not sent by
CloudFormation: it is refused before any work, and nothing is sent anywhere (there is no one to answer).
"""
from __future__ import annotations

import functools
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from aws_lambda_powertools import Logger

from tickwork.ops.response_url import ResponseHosts
from tickwork.settings import function_region

logger = Logger(child=True)

# CloudFormation refuses responses over 4 KiB; the reason is the only part of ours that can grow.
MAX_REASON_CHARS = 1000
# Kept back from the Lambda's remaining time: to send the response after the work's own time limits,
# and for the PUT itself (three tries of up to 5 s would be more than a healthy network needs).
RESPONSE_MARGIN_SECONDS = 10.0
# Without a Lambda context (tests, a manual run): the time the work may take.
DEFAULT_BUDGET_SECONDS = 60.0
# The PUT's tries, all of them within this (inside the margin, so the Lambda is never killed mid-answer);
# each try waits at most SEND_TRY_SECONDS, after these pauses.
SEND_SECONDS = RESPONSE_MARGIN_SECONDS - 2.0
SEND_TRY_SECONDS = 5.0
SEND_PAUSES = (0.0, 0.5, 1.0, 2.0)


@dataclass(frozen=True)
class Answer:
    """What a request that succeeded tells CloudFormation: the resource's id, and what Fn::GetAtt reads."""

    physical_id: str
    data: dict[str, str] = field(default_factory=dict)


@functools.cache
def _http() -> Any:
    """Made on the first deploy-time event only."""
    import urllib3

    return urllib3.PoolManager(retries=False)


def budget_seconds(context: Any) -> float:
    """How long the work may take and still leave time to answer before the Lambda's timeout."""
    if context is None:
        return DEFAULT_BUDGET_SECONDS
    return max(1.0, context.get_remaining_time_in_millis() / 1000 - RESPONSE_MARGIN_SECONDS)


def answer(event: Mapping[str, Any], work: Callable[[], Answer], budget: float, failed_physical_id: str,
           reason: Callable[[BaseException], str], http: Any = None,
           hosts: ResponseHosts | None = None) -> dict[str, Any]:
    """Run `work` and send CloudFormation its outcome within `budget` seconds. A failure (an error, or work
    still running when the budget is spent) is answered FAILED under `failed_physical_id`, with
    `reason(error)` as the reason CloudFormation shows. `hosts`: where an answer may go (None: CloudFormation's
    response bucket of this function's region); an event whose ResponseURL is elsewhere is refused unanswered."""
    refused = (hosts or ResponseHosts(function_region())).refusal(str(event.get("ResponseURL") or ""))
    if refused is not None:
        logger.error("custom resource request refused, unanswered: not sent by CloudFormation",
                     extra={"request_type": event.get("RequestType"), "resource_type": event.get("ResourceType"),
                            "error": refused})
        return {"Status": "FAILED", "Reason": refused}
    outcome: dict[str, Any] = {}
    worker = threading.Thread(target=_run_into, args=(work, outcome), name="custom-resource", daemon=True)
    worker.start()
    worker.join(budget)
    done: Answer | None = outcome.get("answer")
    if done is not None:
        response = _response(event, done.physical_id, "SUCCESS", "", done.data)
    else:
        error = outcome.get("error") or TimeoutError(f"did not finish within {budget:g} s")
        text = reason(error)[:MAX_REASON_CHARS]
        logger.error("custom resource request failed", extra={"request_type": event.get("RequestType"),
                                                               "resource_type": event.get("ResourceType"),
                                                               "error": text})
        response = _response(event, failed_physical_id, "FAILED", text, {})
    send(http or _http(), str(event["ResponseURL"]), response)
    return response


def _run_into(work: Callable[[], Answer], outcome: dict[str, Any]) -> None:
    try:
        outcome["answer"] = work()
    except Exception as exc:  # every failure must reach CloudFormation, whatever raised it
        outcome["error"] = exc


def _response(event: Mapping[str, Any], physical_id: str, status: str, reason: str,
              data: dict[str, str]) -> dict[str, Any]:
    return {
        "Status": status,
        "Reason": reason or "see the function's log",
        "PhysicalResourceId": physical_id,
        "StackId": event["StackId"],
        "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"],
        "Data": data,
    }


def send(http: Any, url: str, response: dict[str, Any], within: float = SEND_SECONDS) -> bool:
    """PUT the response, tried again after a failure or a 5xx while `within` seconds last; False when it
    never got through (CloudFormation then fails the resource at its ServiceTimeout)."""
    from urllib3.exceptions import HTTPError

    body = json.dumps(response).encode()
    ends = time.monotonic() + within
    for pause in SEND_PAUSES:
        if ends - time.monotonic() - pause <= 0:
            break
        time.sleep(pause)
        try:
            # The URL is a presigned S3 PUT signed without a content type: send none.
            reply = http.request("PUT", url, body=body, headers={"content-type": ""},
                                 timeout=min(SEND_TRY_SECONDS, max(0.1, ends - time.monotonic())))
        except HTTPError as exc:
            logger.warning("the response did not reach CloudFormation", extra={"error": type(exc).__name__})
            continue
        if reply.status < 500:
            if reply.status >= 300:
                logger.error("CloudFormation did not take the response", extra={"status": reply.status})
            return reply.status < 300
        logger.warning("CloudFormation's response URL failed", extra={"status": reply.status})
    logger.error("no response reached CloudFormation", extra={"within_seconds": within})
    return False
