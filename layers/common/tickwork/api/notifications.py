"""The notification history route (tickwork.rules.notifications), its own Router included by tickwork.api.app."""
from __future__ import annotations

from typing import Any, cast

from aws_lambda_powertools.event_handler.api_gateway import Router

from tickwork.api.responses import NotificationList, NotificationOut
from tickwork.api.routes import JobsReader, needs, openapi_responses
from tickwork.store.notifications import NotificationRow
from tickwork.tenant import history
from tickwork.tenant.access import JOBS_READ
from tickwork.timeutil import rfc3339

router = Router()


@router.get("/jobs/<job_id>/notifications", summary="A job's last 100 notifications, newest first",
            tags=["notifications"], security=needs(JOBS_READ), responses=openapi_responses(200, 404))
def list_notifications(job_id: str, scope: JobsReader) -> NotificationList:
    return NotificationList(items=[notification_out(row) for row in history.job_notifications(scope, job_id)])


def notification_out(row: NotificationRow) -> NotificationOut:
    return NotificationOut(
        id=row.id, type=cast(Any, row.type), execution_id=row.execution_id,
        status=cast(Any, row.status), attempts=row.attempt_count,
        next_attempt_at=rfc3339(row.next_attempt_at) if row.status == "pending" else None,
        last_status_code=row.last_status_code, last_error=row.last_error, created_at=rfc3339(row.created_at) or "",
        finished_at=rfc3339(row.finished_at), event=row.payload,
    )
