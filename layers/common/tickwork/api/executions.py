"""GET /executions: the tenant's runs across its jobs, to find what failed, when, wherever it ran."""
from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from tickwork.api import views
from tickwork.api.pagination import DEFAULT_LIMIT, decode_cursor
from tickwork.api.queries import ExecutionStatuses, JobId, Since, Until, execution_filter
from tickwork.api.responses import ExecutionList
from tickwork.api.routes import Cursor, JobsReader, Limit, needs, openapi_responses
from tickwork.tenant import history
from tickwork.tenant.access import JOBS_READ

router = Router()


@router.get("/executions", summary="All your executions, newest slot first", tags=["executions"],
            security=needs(JOBS_READ), responses=openapi_responses(200, 400))
def list_all_executions(
    scope: JobsReader, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None, status: ExecutionStatuses = None,
    job_id: JobId = None, since: Since = None, until: Until = None,
) -> ExecutionList:
    filters = execution_filter(status, job_id, since, until)
    # One cursor kind with GET /jobs/{id}/executions: both lists are keyed by (scheduled_for, id).
    page = history.list_tenant_executions(scope, filters, limit, decode_cursor("executions", cursor))
    return views.execution_list(page)
