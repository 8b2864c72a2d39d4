"""SQL over job_stacks: the CloudFormation stack (its full StackId) that manages a job, and the API key that
last authorised it (tickwork.ops.job_resource)."""
from __future__ import annotations

from datetime import datetime
from typing import Any


def record_stack(conn: Any, tenant_id: str, job_id: str, stack_id: str, key_id: str | None, at: datetime) -> None:
    """The job is the stack's from now on (written only when the stack or the key differs)."""
    conn.execute(
        "INSERT INTO job_stacks (job_id, tenant_id, stack_id, key_id, updated_at)"
        " VALUES (%(job)s, %(tenant)s, %(stack)s, %(key)s, %(at)s)"
        " ON CONFLICT (job_id) DO UPDATE SET stack_id = EXCLUDED.stack_id, key_id = EXCLUDED.key_id,"
        " updated_at = EXCLUDED.updated_at"
        " WHERE (job_stacks.stack_id, job_stacks.key_id) IS DISTINCT FROM (EXCLUDED.stack_id, EXCLUDED.key_id)",
        {"job": job_id, "tenant": tenant_id, "stack": stack_id, "key": key_id, "at": at},
    )


def stack_of(conn: Any, tenant_id: str, job_id: str) -> str | None:
    """The StackId recorded for the job; None for a job no stack has put since stacks were recorded."""
    row = conn.execute("SELECT stack_id FROM job_stacks WHERE job_id = %s AND tenant_id = %s",
                       (job_id, tenant_id)).fetchone()
    return None if row is None else str(row[0])
