"""Jobs by key: PUT creates or replaces a job's whole definition, the plan says what a PUT would change."""
from __future__ import annotations

from typing import Any, Literal

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import BaseModel, Field

from tickwork.api import views
from tickwork.api.models import JobCreate
from tickwork.api.responses import JobDetail
from tickwork.api.routes import JobsReader, JobsWriter, needs, openapi_responses
from tickwork.tenant import bykey
from tickwork.tenant.access import JOBS_READ, JOBS_WRITE
from tickwork.models import JobDraft

router = Router()


class FieldChangeOut(BaseModel):
    field: str = Field(description="The field's dotted path: `schedule`, `request.url`, `request.headers.X-Team`.")
    old: Any = Field(description="Its value now (sensitive header values as ***); null when absent.")
    new: Any = Field(description="Its value after the PUT; null when removed.")
    compared: bool = Field(True, description=(
        "false: a sealed header value that only a key with jobs:write may compare with the one given; it is listed "
        "whether it differs or not (a PUT keeps it if it is the same)."))


class JobPlanOut(BaseModel):
    key: str
    action: Literal["create", "update", "unchanged"]
    job_id: str | None = Field(description="The job with this key; null when it would be created.")
    changes: list[FieldChangeOut] = Field(description="What an update changes; empty for create and unchanged.")


def _put_responses() -> dict[int, Any]:
    responses = openapi_responses(200, 400, 403, 409)
    responses[200]["description"] = "Replaced, or unchanged when the definition is the same"
    responses[201] = {"description": "Created", "headers": dict(responses[200].get("headers", {})),
                      "content": {"application/json": {"model": JobDetail}}}
    return responses


@router.put("/jobs/by-key/<key>", summary="Create or replace the job with this key", tags=["jobs"],
            security=needs(JOBS_WRITE), responses=_put_responses())
def put_job(key: str, job: JobCreate, scope: JobsWriter) -> Response[JobDetail]:
    """The body is a whole definition, as for POST /jobs: a field left out takes its default. The same body
    twice changes nothing (no new version). A paused job stays paused."""
    shown, created = bykey.put_job_by_key(scope, key, JobDraft.from_dict(job.model_dump()))
    return Response(status_code=201 if created else 200, content_type=content_types.APPLICATION_JSON,
                    body=views.job_detail(shown).model_dump(mode="json"))  # type: ignore[arg-type]  # Response[Model] names the model for the OpenAPI document; the body is it dumped


@router.post("/jobs/by-key/<key>/plan", summary="What a PUT of this body would change (nothing is written)",
             tags=["jobs"], security=needs(JOBS_READ), responses=openapi_responses(200, 400, 403))
def plan_job(key: str, job: JobCreate, scope: JobsReader) -> JobPlanOut:
    plan = bykey.plan_job_by_key(scope, key, JobDraft.from_dict(job.model_dump()))
    changes = [FieldChangeOut(field=c.field, old=c.old, new=c.new, compared=c.field not in plan.uncompared)
               for c in plan.changes]
    return JobPlanOut(key=plan.key, action=plan.action, job_id=plan.job_id, changes=changes)


@router.get("/jobs/by-key/<key>", summary="Get the job with this key and its next 5 runs", tags=["jobs"],
            security=needs(JOBS_READ), responses=openapi_responses(200, 404))
def get_job(key: str, scope: JobsReader) -> JobDetail:
    return views.job_detail(bykey.get_job_by_key(scope, key))


@router.delete("/jobs/by-key/<key>", status_code=204, summary="Delete the job with this key (its history is kept)",
               tags=["jobs"], security=needs(JOBS_WRITE), responses=openapi_responses(204, 404))
def delete_job(key: str, scope: JobsWriter) -> Response[None]:
    bykey.delete_job_by_key(scope, key)
    return Response(status_code=204)
