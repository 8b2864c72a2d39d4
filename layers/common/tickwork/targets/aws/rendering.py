"""An AWS target's input as one attempt sends it, and what identifies its run to the service. Pure.

The input is rendered per attempt: EventBridge Scheduler's context placeholders first, then `${secrets.NAME}`
(tickwork.secrets.interpolation), each in one pass, so a secret whose value reads like a placeholder, or like a
reference, is sent as it is. Scheduler's execution id is per invocation; here it is the run's id, the same on every
attempt of a run, as the `Tickwork-Run-Id` header of an HTTP run: a target dedupes retries by it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Mapping

from tickwork.errors import InvalidInputError
from tickwork.models import StartedExecution
from tickwork.secrets import interpolation
from tickwork.targetspec.aws import AwsTargetSpec
from tickwork.timeutil import rfc3339

SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"  # the run's scheduled second, RFC 3339 (2026-01-29T09:00:00.000Z)
EXECUTION_ID = "<aws.scheduler.execution-id>"  # the run's id
ATTEMPT_NUMBER = "<aws.scheduler.attempt-number>"  # 1, 2, ... counted over the run's replays too
SCHEDULE_ARN = "<aws.scheduler.schedule-arn>"  # the job's id
_PLACEHOLDER = re.compile("|".join(re.escape(p) for p in (SCHEDULED_TIME, EXECUTION_ID, ATTEMPT_NUMBER, SCHEDULE_ARN)))
# The longest each placeholder's value can be, for the size a saved input may reach (an id is a UUID; an attempt
# number is bounded by the retry policy's attempts, far below ten digits).
_LONGEST = {SCHEDULED_TIME: len("2026-01-29T09:00:00.000Z"), EXECUTION_ID: 36, ATTEMPT_NUMBER: 10, SCHEDULE_ARN: 36}


@dataclass(frozen=True)
class Context:
    """What the placeholders stand for at one attempt."""

    scheduled_time: datetime
    execution_id: str
    attempt_number: int
    schedule_arn: str

    @classmethod
    def of(cls, run: StartedExecution) -> Context:
        return cls(run.scheduled_for, run.id, run.attempt, run.job_id)

    def values(self) -> dict[str, str]:
        return {SCHEDULED_TIME: rfc3339(self.scheduled_time) or "", EXECUTION_ID: self.execution_id,
                ATTEMPT_NUMBER: str(self.attempt_number), SCHEDULE_ARN: self.schedule_arn}


def render(template: str, context: Context, secrets: Mapping[str, str]) -> tuple[str, set[str]]:
    """The input as sent, and the names of the secrets in it; UnknownSecretError for a name not in `secrets`."""
    values = context.values()
    placed = _PLACEHOLDER.sub(lambda match: values[match.group(0)], template)
    used: set[str] = set()
    return interpolation.expand(placed, secrets, used), used


def secret_names(template: str) -> set[str]:
    return interpolation.names_in(template)


def run_key(run: StartedExecution) -> str:
    """What names the run to a service that dedupes (an SQS FIFO queue's MessageDeduplicationId, a Step Functions
    execution's name): its id and replay generation, so every attempt of a run is one call to the service, and a
    replay (a new generation) is another."""
    return f"{run.id}-{run.replay_count}"


def check_saved_input(spec: AwsTargetSpec, secret_bytes: int, path: str = "target.input") -> None:
    """InvalidInputError naming the input if, rendered, it could be over its service's limit: each placeholder at
    its longest value, each secret at `secret_bytes` (the largest a secret may be). The executor checks each attempt
    again, as sent (tickwork.targets.aws.services)."""
    size = interpolation.worst_case_bytes(spec.input, secret_bytes)
    size += sum((_LONGEST[match.group(0)] - len(match.group(0))) for match in _PLACEHOLDER.finditer(spec.input))
    if size > spec.payload_limit:
        raise InvalidInputError(path, f"could be {size} bytes once rendered (placeholders and secrets at their "
                                      f"longest), over the {spec.payload_limit} this target takes")
