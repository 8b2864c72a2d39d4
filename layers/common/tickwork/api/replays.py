"""POST /executions/{id}/replay and POST /jobs/{id}/replay: send ended runs again as the same runs
(tickwork.tenant.replays)."""
from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from tickwork.api import views
from tickwork.api.idempotent import IdempotencyKey, respond
from tickwork.api.models import ReplayRequest
from tickwork.api.responses import ExecutionOut, ReplayOut
from tickwork.api.routes import RunsWriter, needs, openapi_responses
from tickwork.tenant import replays
from tickwork.tenant.access import RUNS_WRITE

router = Router()


@router.post("/executions/<execution_id>/replay", status_code=202, summary="Send a failed or lost run again",
             tags=["executions"], security=needs(RUNS_WRITE), responses=openapi_responses(202, 400, 404, 409, 422))
def replay_execution(execution_id: str, scope: RunsWriter, idempotency_key: IdempotencyKey = None,
                     ) -> Response[ExecutionOut]:
    return respond(scope, idempotency_key, 202,
                   lambda: views.execution_out(replays.replay_execution(scope, execution_id)))


@router.post("/jobs/<job_id>/replay", status_code=202, summary="Replay a job's failed, lost or missed runs of a window",
             tags=["jobs"], security=needs(RUNS_WRITE), responses=openapi_responses(202, 400, 404, 409, 422))
def replay_job(job_id: str, ask: ReplayRequest, scope: RunsWriter, idempotency_key: IdempotencyKey = None,
               ) -> Response[ReplayOut]:
    request = replays.ReplayAsk(ask.since, ask.until, tuple(dict.fromkeys(ask.statuses)), ask.dry_run)
    return respond(scope, idempotency_key, 202, lambda: views.replay_out(replays.replay_job(scope, job_id, request)))

