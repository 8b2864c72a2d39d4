"""SQL over executions: the database barrier that makes every slot run at most once, and every attempt start at
most once (tickwork.store.attempts writes their ends)."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Sequence

from tickwork.models import StartedExecution
from tickwork.vocab import PENDING_STATUSES, NotStarted, Overlap, RunStatus

# A claim is recorded only if the job is still active, still at the version whose schedule produced
# it, and not already past the claimed slot; the same statement advances next_run_at (so Postgres can
# rebuild Redis) and inserts the claim's rows: the run to fire and/or one `missed` row for a gap.
# If Postgres expected an earlier slot than the one claimed, an earlier claim was lost between Redis and
# Postgres (a poller crash): that slot gets a `missed` row too, so it is accounted for, not silently gone.
# A slot recorded is the job's handling succeeding: a quarantine it was in ends (tickwork.dispatch.quarantine).
# A slot recorded to send counts in the job's runs_sent, in the same statement: once it reaches max_runs the job
# has no next slot (it stays active until that run ends: tickwork.runs.ending) and no later claim is recorded.
_RECORD_CLAIMS = """
WITH claimed AS (
    SELECT * FROM unnest(%(job_ids)s::uuid[], %(claimed)s::timestamptz[], %(nexts)s::timestamptz[],
                         %(versions)s::int[], %(sends)s::int[])
        AS c(job_id, claimed_slot, next_run_at, version, sends)
), expected AS (
    SELECT j.id, date_trunc('milliseconds', j.next_run_at) AS slot FROM jobs j JOIN claimed c ON c.job_id = j.id
), advanced AS (
    UPDATE jobs j
       SET next_run_at = CASE WHEN j.runs_sent + c.sends >= j.max_runs THEN NULL ELSE c.next_run_at END,
           runs_sent = j.runs_sent + c.sends,
           status = CASE WHEN c.next_run_at IS NULL THEN 'completed' ELSE j.status END,
           error_reason = NULL, errored_at = NULL, error_count = NULL, retry_errored_at = NULL
      FROM claimed c
     WHERE j.id = c.job_id AND j.status = 'active' AND j.version = c.version
       AND (j.next_run_at IS NULL OR date_trunc('milliseconds', j.next_run_at) <= c.claimed_slot)
       AND (j.max_runs IS NULL OR j.runs_sent < j.max_runs)
 RETURNING j.id, j.tenant_id
), runs AS (
    SELECT * FROM unnest(%(run_ids)s::uuid[], %(run_jobs)s::uuid[], %(run_slots)s::timestamptz[],
                         %(run_statuses)s::text[], %(run_missed)s::int[], %(run_notes)s::text[])
        AS r(id, job_id, scheduled_for, status, missed_count, note)
    UNION ALL
    SELECT gen_random_uuid(), e.id, e.slot, 'missed', NULL, %(lost_note)s
      FROM expected e JOIN claimed c ON c.job_id = e.id
     WHERE e.slot < c.claimed_slot
), inserted AS (
    INSERT INTO executions (id, tenant_id, job_id, scheduled_for, trigger, status, missed_count, last_error,
                            finished_at)
    SELECT r.id, a.tenant_id, r.job_id, r.scheduled_for, 'schedule', r.status, r.missed_count, r.note,
           CASE WHEN r.status IN ('missed', 'skipped') THEN now() END
      FROM runs r JOIN advanced a ON a.id = r.job_id
    ON CONFLICT (job_id, scheduled_for) WHERE trigger = 'schedule' DO NOTHING
    RETURNING id, job_id, scheduled_for, status, missed_count, tenant_id
)
SELECT i.id::text, i.job_id::text, i.scheduled_for, i.status, coalesce(i.missed_count, 1), i.tenant_id::text,
       t.max_runs_in_flight
  FROM inserted i JOIN tenants t ON t.id = i.tenant_id
"""
LOST_CLAIM_NOTE = (
    "missed from this slot on: its claim was lost between Redis and Postgres (a poller stopped mid-tick) "
    "and a later slot was claimed before maintenance could restore it"
)


@dataclass(frozen=True)
class Slot:
    """One won claim: the job moves from `claimed` to `next_run_at`, running `fire` (if any) now.

    When catch-up skipped slots, `missed_count` > 0 and one `missed` row at `claimed` stands for them.
    """

    job_id: str
    claimed: datetime
    next_run_at: datetime | None
    version: int
    fire: datetime | None
    missed_count: int = 0
    missed_note: str | None = None
    # The fire slot's date is excluded by one of the job's calendars: recorded skipped with this note, not run.
    skipped_note: str | None = None

    @property
    def sends(self) -> bool:
        """Whether the claim sends a scheduled run (what a job's max_runs counts)."""
        return self.fire is not None and self.skipped_note is None

    def rows(self) -> list[NewRun]:
        """Each execution row this claim creates."""
        rows: list[NewRun] = []
        if self.missed_count:
            rows.append(NewRun(str(uuid.uuid4()), self.job_id, self.claimed, RunStatus.MISSED, self.missed_count,
                               self.missed_note))
        if self.fire is not None:
            status = RunStatus.QUEUED if self.skipped_note is None else RunStatus.SKIPPED
            rows.append(NewRun(str(uuid.uuid4()), self.job_id, self.fire, status, None, self.skipped_note))
        return rows


@dataclass(frozen=True)
class NewRun:
    """An execution row a claim creates: its run, or the one row that stands for the slots it missed."""

    id: str
    job_id: str
    scheduled_for: datetime
    status: RunStatus
    missed_count: int | None
    note: str | None


@dataclass(frozen=True)
class RecordedRun:
    """A run a claim recorded, to dispatch: only the claim that inserted it may."""

    execution_id: str
    job_id: str
    slot: datetime


@dataclass(frozen=True)
class RunTenant:
    """A run's tenant and that tenant's max_runs_in_flight override (None: the default)."""

    tenant_id: str
    max_runs_in_flight: int | None


@dataclass(frozen=True)
class Recorded:
    runs: list[RecordedRun]
    missed: int  # slots recorded missed
    # Each run's tenant, as written with it: the dispatch step's budget needs no read of its own for them
    # (tickwork.dispatch.budget).
    tenants: dict[str, RunTenant] = field(default_factory=dict)


# A claim recorded after a later claim of the same job (two ticks overlapped: the first outlived its tick
# lock under load) finds its slot already accounted as lost by that later claim. Its run goes ahead after
# all: the lost row becomes the queued run it is, at most once (the row's status is the guard), and only
# for a claim that fires its own slot, of the job's current version. A slot skipped by the catch-up
# policy, or run already, is never a LOST_CLAIM_NOTE row, so a stale claim cannot revive it.
# A revived run is sent, so it counts in runs_sent as a recorded claim does, in this statement: the job's row is
# locked first (its latest runs_sent read), a revival past max_runs stays missed, and the last one leaves no
# next slot.
_RECORD_LATE_CLAIMS = """
WITH claimed AS (
    SELECT * FROM unnest(%(job_ids)s::uuid[], %(slots)s::timestamptz[], %(versions)s::int[]) AS c(job_id, slot, version)
), locked AS (
    SELECT j.id, j.runs_sent, j.max_runs FROM jobs j JOIN claimed c ON c.job_id = j.id
     WHERE j.status = 'active' AND j.version = c.version AND (j.max_runs IS NULL OR j.runs_sent < j.max_runs)
       FOR UPDATE OF j
), lost AS (
    SELECT x.id, row_number() OVER (PARTITION BY x.job_id ORDER BY x.scheduled_for) AS n
      FROM executions x JOIN claimed c ON x.job_id = c.job_id AND x.scheduled_for = c.slot
     WHERE x.trigger = 'schedule' AND x.status = 'missed' AND x.last_error = %(lost_note)s
), revived AS (
    UPDATE executions x
       SET status = 'queued', last_error = NULL, finished_at = NULL, missed_count = NULL
      FROM lost l, locked k
     WHERE x.id = l.id AND k.id = x.job_id AND x.status = 'missed'
       AND (k.max_runs IS NULL OR k.runs_sent + l.n <= k.max_runs)
    RETURNING x.id, x.job_id, x.scheduled_for, x.tenant_id
), counted AS (
    UPDATE jobs j
       SET runs_sent = j.runs_sent + r.sends,
           next_run_at = CASE WHEN j.runs_sent + r.sends >= j.max_runs THEN NULL ELSE j.next_run_at END
      FROM (SELECT job_id, count(*)::int AS sends FROM revived GROUP BY job_id) r
     WHERE j.id = r.job_id
)
SELECT r.id::text, r.job_id::text, r.scheduled_for, 'queued', 1, r.tenant_id::text, t.max_runs_in_flight
  FROM revived r JOIN tenants t ON t.id = r.tenant_id
"""


def record_claims(conn: Any, slots: list[Slot]) -> Recorded:
    """Record won claims in one statement (a second only when some were refused: see
    _RECORD_LATE_CLAIMS)."""
    if not slots:
        return Recorded([], 0)
    rows = [row for s in slots for row in s.rows()]
    params = {
        "job_ids": [s.job_id for s in slots],
        "claimed": [s.claimed for s in slots],
        "nexts": [s.next_run_at for s in slots],
        "versions": [s.version for s in slots],
        "sends": [int(s.sends) for s in slots],
        "run_ids": [r.id for r in rows],
        "run_jobs": [r.job_id for r in rows],
        "run_slots": [r.scheduled_for for r in rows],
        "run_statuses": [r.status for r in rows],
        "run_missed": [r.missed_count for r in rows],
        "run_notes": [r.note for r in rows],
        "lost_note": LOST_CLAIM_NOTE,
    }
    inserted = conn.execute(_RECORD_CLAIMS, params).fetchall()
    queued = [r for r in inserted if r[3] == RunStatus.QUEUED]
    recorded = {(r[1], r[2]) for r in queued}
    refused = [s for s in slots if s.fire is not None and s.fire == s.claimed and not s.missed_count
               and s.skipped_note is None and (s.job_id, s.fire) not in recorded]
    if refused:
        # A statement of its own, so its snapshot sees a later claim that committed while the first waited.
        queued += conn.execute(_RECORD_LATE_CLAIMS, {
            "job_ids": [s.job_id for s in refused], "slots": [s.claimed for s in refused],
            "versions": [s.version for s in refused], "lost_note": LOST_CLAIM_NOTE,
        }).fetchall()
    missed = sum(r[4] for r in inserted if r[3] == RunStatus.MISSED)
    tenants = {r[0]: RunTenant(r[5], r[6]) for r in queued}
    return Recorded([RecordedRun(r[0], r[1], r[2]) for r in queued], missed, tenants)


def insert_manual(conn: Any, tenant_id: str, job_id: str, at: datetime) -> str:
    """A manual run at `at`: outside the schedule, so unlike a slot it is not unique per (job, instant)
    (migration 0012): one asked for at a slot's very instant is a run of its own, beside the slot's."""
    execution_id = str(uuid.uuid4())
    conn.execute(
        "INSERT INTO executions (id, tenant_id, job_id, scheduled_for, trigger, status)"
        " VALUES (%s, %s, %s, %s, 'manual', 'queued')",
        (execution_id, tenant_id, job_id, at),
    )
    return execution_id


# The runs a job no longer makes (executions e of jobs j): every run of a deleted job, and the scheduled
# runs of a paused one. A manual run is outside the schedule: it goes ahead paused or not, retries included;
# so does a replayed run (tickwork.rules.replay), asked for by hand as a manual run is.
STOPPED = "(j.status = 'deleted' OR (j.status = 'paused' AND e.trigger = 'schedule' AND e.replay_count = 0))"

_STOPPED_NOTE = "skipped: the job was "


# Jobs whose last run just ended: no next slot, no scheduled run left to end, and max_runs reached (active) or
# end_action delete (completed too: end_at or a single at() passed). Completed, or deleted as the API deletes.
# Run after the run's end is written: of two ends at once, the later statement sees both.
_FINISH_JOBS = """
UPDATE jobs j
   SET status = CASE WHEN j.end_action = 'delete' THEN 'deleted' ELSE 'completed' END,
       deleted_at = CASE WHEN j.end_action = 'delete' THEN %(at)s END, updated_at = %(at)s
 WHERE j.id = ANY(%(ids)s::uuid[]) AND j.next_run_at IS NULL
   AND ((j.status = 'active' AND j.runs_sent >= j.max_runs) OR (j.status = 'completed' AND j.end_action = 'delete'))
   AND NOT EXISTS (SELECT 1 FROM executions x WHERE x.job_id = j.id AND x.trigger = 'schedule'
                   AND x.status IN ('queued', 'waiting', 'running', 'retrying', 'awaiting_completion'))
RETURNING j.id::text, j.status
"""


def finish_jobs(conn: Any, job_ids: Sequence[str], at: datetime) -> dict[str, str]:
    """Complete or delete the jobs whose last run ended (of these); returns each one's new status."""
    if not job_ids:
        return {}
    return dict(conn.execute(_FINISH_JOBS, {"ids": sorted(set(job_ids)), "at": at}).fetchall())


def stopped_note(job_status: str) -> str:
    """Why a run that had not started was skipped: its job was paused or deleted."""
    return _STOPPED_NOTE + job_status


# Each StartedExecution field and its SQL over `executions e JOIN jobs j`: the one list both the columns selected
# and the row's mapping to the object (by field name) come from.
_STARTED = {
    "id": "e.id::text", "job_id": "e.job_id::text", "tenant_id": "e.tenant_id::text",
    "scheduled_for": "e.scheduled_for", "attempt": "e.attempt_count", "request": "j.request", "retry": "j.retry",
    "overlap": "j.overlap", "attempt_started_at": "e.attempt_started_at", "success": "j.success",
    "notify": "j.notify", "pause_after_failures": "j.pause_after_failures", "replay_base": "e.replay_base",
    "replay_count": "e.replay_count", "completion": "j.completion", "target": "j.target",
}
STARTED_COLUMNS = ", ".join(f"{sql} AS {name}" for name, sql in _STARTED.items())


def started_execution(row: Sequence[Any]) -> StartedExecution:
    """The run a row selected with STARTED_COLUMNS first describes (columns after them are the caller's)."""
    return StartedExecution(**dict(zip(_STARTED, row[:len(_STARTED)])))

# `guarded` is true once the caller holds the job's overlap lock; without it only jobs that allow
# overlapping runs (and retries, which continue a run already started, and replays, which send an ended
# run again outside the schedule) start here. The executor may
# start a run up to the lookahead before its instant: the times recorded are when it is sent, not earlier.
# A run its job no longer makes (a retry queued before a pause, say) is skipped instead, in the same statement.
_START = f"""
WITH asked AS (
    SELECT * FROM unnest(%(ids)s::uuid[], %(attempts)s::int[]) AS r(id, attempt)
), stopped AS (
    UPDATE executions e
       SET status = 'skipped', last_error = %(note)s || j.status, next_attempt_at = NULL, finished_at = now()
      FROM asked r, jobs j
     WHERE e.id = r.id AND j.id = e.job_id
       AND e.status IN ('queued', 'retrying') AND e.attempt_count = r.attempt - 1 AND {STOPPED}
)
UPDATE executions e
   SET status = 'running', attempt_count = e.attempt_count + 1,
       started_at = coalesce(e.started_at, greatest(now(), e.scheduled_for)),
       attempt_started_at = greatest(now(), coalesce(e.next_attempt_at, e.scheduled_for)),
       next_attempt_at = NULL
  FROM asked r, jobs j
 WHERE e.id = r.id AND j.id = e.job_id
   AND e.status IN ('queued', 'retrying') AND e.attempt_count = r.attempt - 1
   AND (%(guarded)s OR j.overlap = 'allow' OR r.attempt > 1 OR e.replay_count > 0) AND NOT {STOPPED}
RETURNING {STARTED_COLUMNS}
"""


def skip_scheduled(conn: Any, job_id: str, at: datetime) -> None:
    """A job being paused: its scheduled runs not started yet (retries included) are skipped with the reason;
    replayed ones go ahead, as manual runs do. Call in the transaction that pauses it (its row locked): the
    poller records no new run meanwhile."""
    conn.execute(
        "UPDATE executions SET status = 'skipped', last_error = %s, next_attempt_at = NULL, finished_at = %s"
        " WHERE job_id = %s AND trigger = 'schedule' AND replay_count = 0 AND status = ANY(%s)",
        (stopped_note("paused"), at, job_id, list(PENDING_STATUSES)),
    )


def stopped_runs(conn: Any, execution_ids: Sequence[str]) -> dict[str, str]:
    """Of these runs, those their job no longer makes, with its status ('paused' or 'deleted')."""
    if not execution_ids:
        return {}
    rows = conn.execute(
        f"SELECT e.id::text, j.status FROM executions e JOIN jobs j ON j.id = e.job_id"
        f" WHERE e.id = ANY(%s::uuid[]) AND {STOPPED}", (list(execution_ids),),
    ).fetchall()
    return dict(rows)


# A replayed run holds the job's overlap only while its attempt is in flight: one waiting for its turn in
# the tenant's replay pace (maybe many minutes ahead) or for its retry does not hold back the schedule.
_IN_PROGRESS = """
SELECT EXISTS (SELECT 1 FROM executions WHERE job_id = %(job)s AND id <> %(id)s
                  AND (status = 'running' OR (status = 'retrying' AND replay_count = 0)))
    OR EXISTS (SELECT 1 FROM executions WHERE job_id = %(job)s AND id <> %(id)s AND status = 'awaiting_completion')
"""

_SKIPPED_BUSY = "skipped: the previous run was still in progress (overlap skip)"
_SKIPPED_QUEUE_FULL = "skipped: a run was already waiting for the one in progress (overlap queue_one)"


def start_attempt(conn: Any, execution_id: str, attempt: int) -> StartedExecution | NotStarted:
    """Conditionally move the execution to running.

    Returns the started run, or why it did not start: 'duplicate' (another delivery already started
    it, or it is over), 'skipped' or 'waiting' (the job's overlap policy and a run still in progress).
    """
    return start_unguarded(conn, execution_id, attempt) or start_guarded(conn, execution_id, attempt)


def start_unguarded(conn: Any, execution_id: str, attempt: int) -> StartedExecution | None:
    """One statement for jobs that allow overlap and for retries; None for everything else (including a
    duplicate delivery), which then goes through start_guarded."""
    started = _start(conn, [(execution_id, attempt)], guarded=False)
    return started[0] if started else None


def start_unguarded_many(conn: Any, runs: Sequence[tuple[str, int]]) -> dict[str, StartedExecution]:
    """start_unguarded for many (execution_id, attempt) in one statement: the runs started, by their id
    as Postgres spells a uuid (lowercase, with hyphens).

    A run absent from the result was not started here; it goes through start_guarded as above."""
    return {run.id: run for run in _start(conn, runs, guarded=False)}


def _start(conn: Any, runs: Sequence[tuple[str, int]], guarded: bool) -> list[StartedExecution]:
    if not runs:
        return []
    params = {"ids": [r[0] for r in runs], "attempts": [r[1] for r in runs], "guarded": guarded,
              "note": _STOPPED_NOTE}
    return [started_execution(row) for row in conn.execute(_START, params).fetchall()]


def start_guarded(conn: Any, execution_id: str, attempt: int) -> StartedExecution | NotStarted:
    """First attempt of a job that forbids overlap: decide under a per-job lock, so two runs starting
    at once cannot both see the other as not running."""
    with conn.transaction():
        info = conn.execute(
            "SELECT e.job_id::text, j.overlap FROM executions e JOIN jobs j ON j.id = e.job_id"
            " WHERE e.id = %s AND e.status = 'queued' AND e.attempt_count = 0 AND %s = 1",
            (execution_id, attempt),
        ).fetchone()
        if info is None or info[1] == Overlap.ALLOW:
            return NotStarted.DUPLICATE
        job_id, overlap = info
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (job_id,))
        if not conn.execute(_IN_PROGRESS, {"job": job_id, "id": execution_id}).fetchone()[0]:
            started = _start(conn, [(execution_id, attempt)], guarded=True)
            return started[0] if started else NotStarted.DUPLICATE
        status = NotStarted.SKIPPED
        note_or_none: str | None = _SKIPPED_BUSY
        if overlap == Overlap.QUEUE_ONE:
            waiting = conn.execute(
                "SELECT 1 FROM executions WHERE job_id = %s AND status = 'waiting' LIMIT 1", (job_id,)
            ).fetchone()
            status, note_or_none = (NotStarted.SKIPPED, _SKIPPED_QUEUE_FULL) if waiting else (NotStarted.WAITING, None)
        conn.execute(
            "UPDATE executions SET status = %s, last_error = %s,"
            " finished_at = CASE WHEN %s = 'skipped' THEN now() END WHERE id = %s",
            (status, note_or_none, status, execution_id),
        )
        return status
