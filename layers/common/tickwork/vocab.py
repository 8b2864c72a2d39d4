"""The words Tickwork stores, shows and returns, each vocabulary defined once. No imports from tickwork: every
layer may use them.

A member is its word: `RunStatus.RUNNING == "running"`, and it is written as "running" to Postgres, Redis, JSON,
logs and f-strings, so stored values and API output are the bare strings they always were. The schema's CHECK
constraints (migrations/) hold the same words; the API documents them from these classes
(tickwork.api.vocabulary).
"""
from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """Every state a run (an execution row) can be in: the executions_status_check constraint of the schema."""

    QUEUED = "queued"
    WAITING = "waiting"  # behind the run in progress (overlap queue_one)
    RUNNING = "running"
    RETRYING = "retrying"
    AWAITING_COMPLETION = "awaiting_completion"  # answered; its completion callback decides (tickwork.rules.completion)
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"
    MISSED = "missed"
    LOST = "lost"


# A run sent that ended: a run waiting behind it may go (overlap queue_one), and it counts in its job's history.
FINAL_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.LOST)
# A run not started yet: a pause skips those of the schedule.
PENDING_STATUSES = (RunStatus.QUEUED, RunStatus.WAITING, RunStatus.RETRYING)


class JobStatus(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    COMPLETED = "completed"  # its schedule has no slot left
    DELETED = "deleted"  # stored only, until maintenance removes it; never shown
    ERRORED = "errored"  # shown only: an active job in quarantine (tickwork.rules.quarantine)


class EndAction(StrEnum):
    """What becomes of a job once its last run ended (EventBridge Scheduler's ActionAfterCompletion)."""

    NONE = "none"  # kept, `completed`
    DELETE = "delete"  # deleted; its runs are kept


class Trigger(StrEnum):
    """What made a run: its job's schedule, or someone asking (POST /jobs/{id}/run)."""

    SCHEDULE = "schedule"
    MANUAL = "manual"


class DispatchKind(StrEnum):
    """What a dispatch to the executor is (tickwork.models.Dispatch)."""

    RUN = "run"
    NOTIFICATION = "notification"  # its execution_id is a notification's (tickwork.rules.notifications)
    COMPLETION = "completion"  # the check of a run awaiting its completion callback (tickwork.rules.completion)


class Overlap(StrEnum):
    """What a job's slot does while its previous run is still in progress (tickwork.rules.policy)."""

    ALLOW = "allow"
    SKIP = "skip"
    QUEUE_ONE = "queue_one"


class Catchup(StrEnum):
    """Which of the slots a job fell behind on still fire (tickwork.rules.policy)."""

    LATEST = "latest"
    ALL = "all"


class Jitter(StrEnum):
    """How a retry's delay is spread (tickwork.rules.retry)."""

    NONE = "none"
    FULL = "full"
    EQUAL = "equal"


class OnExcluded(StrEnum):
    """What a slot on a date one of the job's calendars excludes does (tickwork.schedule.excluded)."""

    SKIP = "skip"
    NEXT_DAY = "next_day"


class NotStarted(StrEnum):
    """Why a dispatched attempt did not start: the executor's outcome for it, counted in metrics."""

    DUPLICATE = "duplicate"  # another delivery started it, or it is over
    SKIPPED = "skipped"  # recorded skipped: its job's overlap policy, a pause or a deletion
    WAITING = "waiting"  # recorded waiting behind the run in progress (overlap queue_one)


class NotEnded(StrEnum):
    """The executor's outcome for an attempt it did not end."""

    SUPERSEDED = "superseded"  # no longer ours: marked lost, or ended by another path, meanwhile
    UNCHANGED = "unchanged"  # a completion check with nothing to settle (completed already, or its deadline moved)


class AuditAction(StrEnum):
    """What an audit entry records (tickwork.tenant.audit)."""

    JOB_CREATED = "job.created"
    JOB_UPDATED = "job.updated"
    JOB_PAUSED = "job.paused"
    JOB_RESUMED = "job.resumed"
    JOB_RUN = "job.run"
    JOB_REPLAYED = "job.replayed"
    JOB_DELETED = "job.deleted"
    SECRET_PUT = "secret.put"
    SECRET_DELETED = "secret.deleted"
    API_KEY_CREATED = "api_key.created"
    API_KEY_DELETED = "api_key.deleted"
    SIGNING_SECRET_ROTATED = "signing_secret.rotated"
    CALENDAR_PUT = "calendar.put"
    CALENDAR_DELETED = "calendar.deleted"


class TargetKind(StrEnum):
    """What a run calls (tickwork.targets): HTTP, or an AWS service's action, by its target's ARN."""

    HTTP = "http"
    AWS_LAMBDA = "aws_lambda"  # Invoke
    AWS_SQS = "aws_sqs"  # SendMessage
    AWS_SNS = "aws_sns"  # Publish
    AWS_EVENTBRIDGE = "aws_eventbridge"  # PutEvents
    AWS_STEP_FUNCTIONS = "aws_step_functions"  # StartExecution
