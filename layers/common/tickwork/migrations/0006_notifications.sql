-- Failure notifications, auto-pause and per-job success rules.

-- notify: {"url", "on": [...]} or NULL; success: {"status_codes": [...], "body_contains"} or NULL (2xx).
-- consecutive_failures and failing are kept only for jobs with notify or pause_after_failures: the
-- finally-failed runs since the last success (reset on resume too), and whether the last run failed.
ALTER TABLE jobs
    ADD COLUMN notify jsonb,
    ADD COLUMN pause_after_failures integer CHECK (pause_after_failures >= 1),
    ADD COLUMN paused_reason text,
    ADD COLUMN success jsonb,
    ADD COLUMN consecutive_failures integer NOT NULL DEFAULT 0,
    ADD COLUMN failing boolean NOT NULL DEFAULT false;

-- One row per event, written in the transaction that ended the run; delivered by its own dispatch
-- (due index member n:<id>:<attempt>), retried, and put back by the sweeper like a run. The id is
-- derived from (execution, type): an event recorded twice is one row. No foreign key to executions:
-- retention prunes runs, a tenant's notification history stays until its own pruning.
CREATE TABLE notifications (
    id                 uuid PRIMARY KEY,
    tenant_id          uuid NOT NULL REFERENCES tenants(id),
    job_id             uuid NOT NULL REFERENCES jobs(id),
    execution_id       uuid NOT NULL,
    channel            text NOT NULL CHECK (channel IN ('webhook', 'operator')),
    type               text NOT NULL CHECK (type IN ('run.failed', 'job.recovered', 'job.paused')),
    url                text,
    payload            jsonb NOT NULL,
    status             text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sending', 'delivered', 'failed')),
    attempt_count      integer NOT NULL DEFAULT 0,
    next_attempt_at    timestamptz NOT NULL,
    attempt_started_at timestamptz,
    last_status_code   integer,
    last_error         text,
    created_at         timestamptz NOT NULL DEFAULT now(),
    finished_at        timestamptz
);
CREATE INDEX notifications_job_newest ON notifications (job_id, created_at DESC, id DESC);
CREATE INDEX notifications_unfinished ON notifications (status, next_attempt_at)
    WHERE status IN ('pending', 'sending');
