"""A jobs file's plan, from the server (`POST /jobs/by-key/{key}/plan`), and applying it (`PUT /jobs/by-key/{key}`).

The server knows the canonical schedule forms, the defaults and the sealed header values, so it decides
what a job's change is; the CLI only adds, with `--prune`, the keyed jobs of the file's source label that
the file no longer has.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tickwork_cli.client import Client, segment
from tickwork_cli.errors import ApiError, CliError
from tickwork_cli.jobfile import JobFile

CREATE, UPDATE, UNCHANGED, DELETE = "create", "update", "unchanged", "delete"
ACTIONS = (CREATE, UPDATE, DELETE, UNCHANGED)


@dataclass(frozen=True)
class Change:
    field: str
    old: Any
    new: Any
    compared: bool = True  # False: a sealed value the key may not compare (it lacks jobs:write)


@dataclass(frozen=True)
class Step:
    key: str
    action: str
    job_id: str | None
    changes: tuple[Change, ...] = ()
    name: str | None = None  # of a job to delete: the file no longer says what it is


@dataclass
class Plan:
    source: str
    steps: list[Step] = field(default_factory=list)

    @property
    def has_changes(self) -> bool:
        return any(step.action != UNCHANGED for step in self.steps)

    def count(self, action: str) -> int:
        return sum(step.action == action for step in self.steps)


class JobErrors(CliError):
    """One line per job the server refused, each naming the job's key and the field."""

    def __init__(self, failures: list[tuple[str, ApiError]]) -> None:
        self.failures = failures
        super().__init__("\n".join(describe(key, error) for key, error in failures))


def describe(key: str, error: ApiError) -> str:
    where = f"{error.field}: " if error.field else ""
    return f"job {key}: {where}{error.api_message} ({error.status} {error.code})"


def make_plan(client: Client, jobs: JobFile, prune: bool) -> Plan:
    plan = Plan(jobs.source)
    failures: list[tuple[str, ApiError]] = []
    for key, body in jobs.jobs.items():
        try:
            answer = client.request("POST", f"/jobs/by-key/{segment(key)}/plan", body)
        except ApiError as error:
            if error.status == 401 or error.status >= 500 or error.code == "gateway":
                raise  # not about this job: no other would fare better
            failures.append((key, error))
            continue
        plan.steps.append(_step(key, answer))
    if failures:
        raise JobErrors(failures)
    if prune:
        plan.steps.extend(_to_delete(client, jobs))
    return plan


def _step(key: str, answer: dict[str, Any]) -> Step:
    changes = tuple(Change(c["field"], c.get("old"), c.get("new"), c.get("compared", True))
                    for c in answer.get("changes") or ())
    return Step(key, answer["action"], answer.get("job_id"), changes)


def _to_delete(client: Client, jobs: JobFile) -> list[Step]:
    """The keyed jobs carrying the file's source label that the file does not have (unkeyed ones are left alone)."""
    return [Step(job["key"], DELETE, job["id"], name=job.get("name"))
            for job in client.pages("/jobs", {"source": jobs.source})
            if job.get("key") and job["key"] not in jobs.jobs]


@dataclass(frozen=True)
class Outcome:
    step: Step
    job: dict[str, Any] | None  # the job as the PUT answered it (None for a delete)


def apply_plan(client: Client, jobs: JobFile, plan: Plan) -> list[Outcome]:
    """Create and update first, delete last (nothing is deleted when a create failed); every step is tried."""
    done: list[Outcome] = []
    failures: list[tuple[str, ApiError]] = []
    for step in sorted(plan.steps, key=lambda s: s.action == DELETE):
        if step.action == UNCHANGED:
            continue
        if step.action == DELETE and failures:
            break
        try:
            done.append(_apply(client, jobs, step))
        except ApiError as error:
            failures.append((step.key, error))
    if failures:
        raise AppliedWithErrors(done, failures)
    return done


def _apply(client: Client, jobs: JobFile, step: Step) -> Outcome:
    path = f"/jobs/by-key/{segment(step.key)}"
    if step.action == DELETE:
        client.request("DELETE", path)
        return Outcome(step, None)
    return Outcome(step, client.request("PUT", path, jobs.jobs[step.key]))


class AppliedWithErrors(JobErrors):
    def __init__(self, done: list[Outcome], failures: list[tuple[str, ApiError]]) -> None:
        self.done = done
        super().__init__(failures)
