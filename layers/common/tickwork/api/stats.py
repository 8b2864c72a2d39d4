"""GET /stats: how the tenant's runs of the last window ended, and how punctually they fired."""
from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from tickwork.api.responses import FireLag, RunCounts, StatsOut
from tickwork.api.routes import JobsReader, needs, openapi_responses
from tickwork.tenant import stats
from tickwork.tenant.access import JOBS_READ
from tickwork.timeutil import rfc3339

router = Router()

Window = Annotated[int, Query(ge=1, le=stats.MAX_WINDOW_SECONDS, description="Seconds back from now.")]


@router.get("/stats", summary="Run counts and fire lag over a recent window", tags=["stats"],
            security=needs(JOBS_READ), responses=openapi_responses(200, 400))
def get_stats(scope: JobsReader, window: Window = stats.DEFAULT_WINDOW_SECONDS) -> StatsOut:
    result = stats.run_stats(scope, window)
    p50, p95, p99 = result.lag_ms or (None, None, None)
    return StatsOut(
        window_seconds=window, since=rfc3339(result.since) or "", until=rfc3339(result.until) or "",
        runs=RunCounts(**result.runs),
        fire_lag=FireLag(samples=result.lag_samples, p50_ms=p50, p95_ms=p95, p99_ms=p99), truncated=result.truncated,
    )
