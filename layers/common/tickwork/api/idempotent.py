"""The Idempotency-Key header of POST /jobs and POST /jobs/{id}/run, on top of `tickwork.tenant.idempotency`."""
from __future__ import annotations

from typing import Annotated, Callable

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import BaseRouter
from aws_lambda_powertools.event_handler.openapi.params import Header
from pydantic import BaseModel

from tickwork.scope import Scope
from tickwork.tenant import idempotency

IdempotencyKey = Annotated[str | None, Header(
    alias=idempotency.KEY_HEADER, min_length=1, max_length=idempotency.MAX_KEY_LENGTH, pattern=r"^[\x20-\x7e]+$",
    description=("Any client-chosen string (printable ASCII, up to 255 characters), e.g. a UUID: a retry with the "
                 "same key and body within 24 hours replays the first response (header Idempotent-Replayed: true) "
                 "and creates nothing."),
)]


def respond(scope: Scope, key: str | None, status: int, produce: Callable[[], BaseModel],
            reread: Callable[[str], BaseModel] | None = None) -> Response:
    """`produce()` answered with `status`; with a key, at most once per key (see tickwork.tenant.idempotency).
    `reread(id)`: the answer as of now, for a retry whose first answer was too large to keep."""
    if key is None:
        return _json(status, produce().model_dump(mode="json"))
    event = BaseRouter.current_event
    body = event.json_body if event.body else None
    request_print = idempotency.fingerprint(event.http_method, event.path, body)
    answer = idempotency.run_once(
        scope.db, scope.tenant_id, key, request_print, scope.now,
        lambda: idempotency.Answer(status, produce().model_dump(mode="json")),
        None if reread is None else lambda made: reread(made).model_dump(mode="json"),
    )
    return _json(answer.status, answer.body, {idempotency.REPLAYED_HEADER: "true"} if answer.replayed else None)


def _json(status: int, body: object, headers: dict[str, str] | None = None) -> Response:
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=body, headers=headers)
