"""POST /callbacks/{execution_id}/{attempt}/{token}: a target in callback mode reports its run's completion
(tickwork.rules.completion). No API key: the token in the URL, made for that run's attempt alone, is the
credential. A wrong token, another run's or an older attempt's is a 404 whichever part is wrong; the right
one once its completion is in, or its run over, a 409. Neither changes anything.

Anyone can call the route, so the token is checked, and the body's size, before the body is read (`GATE`,
tickwork.api.body.BodyGate): a wrong token with 6 MB of JSON costs one indexed read, never a parse."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Mapping

from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from tickwork.api.body import BodyGate
from tickwork.api.responses import ErrorBody
from tickwork.api.vocabulary import OneOf
from tickwork.rules import completion
from tickwork.runs import awaiting
from tickwork.vocab import RunStatus
from tickwork.wiring import services

router = Router()

PATH = "/callbacks/<execution_id>/<attempt>/<token>"
# The largest report a callback can need is about 24 KB (4,096 bytes of output, each byte a control character
# JSON escapes as \u00XX, and its status); 64 KiB takes that in any client's formatting and refuses the rest
# unread (413), a hundredth of the 6 MB Lambda would otherwise be handed.
MAX_BODY_BYTES = 64 * 1024


def _storable_output(value: str) -> str:
    problem = completion.output_error(value)
    if problem is not None:
        raise ValueError(problem)
    return value


Output = Annotated[str, AfterValidator(_storable_output),
                   Field(json_schema_extra={"maxLength": completion.MAX_OUTPUT_BYTES})]


class CompletionReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Annotated[RunStatus, OneOf(*completion.STATUSES)] = Field(description=(
        "failed is a failed attempt: retried per the job's retry policy, as a 5xx answer would be."))
    output: Output | None = Field(None, description=(
        "Up to 4096 bytes (UTF-8), stored with the attempt like a response body (the request's secrets redacted)."))


class CompletionAnswer(BaseModel):
    execution_id: str
    attempt: int
    status: str = Field(description=(
        "The run's status after the call: succeeded, failed or retrying; running when the target's own answer "
        "is not recorded yet (the completion is applied once it is, if that answer was accepted)."))


_ERRORS = {400: "Invalid body", 404: "No such callback (unknown run, attempt or token)",
           409: "This attempt's completion was reported already, or its run is over",
           413: f"The body is over {MAX_BODY_BYTES} bytes (checked after the token, before the body is read)"}


def _admit(parameters: Mapping[str, str]) -> None:
    awaiting.check_token(services(), parameters["execution_id"], parameters["attempt"], parameters["token"])


GATE = BodyGate("POST", PATH, MAX_BODY_BYTES, _admit)


@router.post(PATH, summary="Report a run's completion (callback mode)",
             tags=["callbacks"], security=[{}],
             responses={200: {"description": "Completion recorded"},
                        **{status: {"description": text, "content": {"application/json": {"model": ErrorBody}}}
                           for status, text in _ERRORS.items()}})
def report_completion(execution_id: str, attempt: str, token: str, report: CompletionReport) -> CompletionAnswer:
    svc = services()
    now = datetime.fromtimestamp(svc.clock(), timezone.utc)
    answer = awaiting.take_callback(svc, execution_id, attempt, token, report.status, report.output, now)
    return CompletionAnswer(execution_id=answer.execution_id, attempt=answer.attempt, status=answer.status)
