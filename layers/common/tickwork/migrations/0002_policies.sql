-- Per-job overlap and catch-up policies, and the execution states they need.

ALTER TABLE jobs
    ADD COLUMN overlap text NOT NULL DEFAULT 'allow' CHECK (overlap IN ('allow', 'skip', 'queue_one')),
    ADD COLUMN catchup text NOT NULL DEFAULT 'latest' CHECK (catchup IN ('latest', 'all')),
    ADD COLUMN catchup_window_seconds integer NOT NULL DEFAULT 300 CHECK (catchup_window_seconds >= 0);

-- 'waiting': queued behind a run still in progress (overlap queue_one), promoted when that run ends.
ALTER TABLE executions DROP CONSTRAINT executions_status_check;
ALTER TABLE executions ADD CONSTRAINT executions_status_check CHECK (status IN
    ('queued', 'waiting', 'running', 'retrying', 'succeeded', 'failed', 'skipped', 'missed', 'lost'));

-- A `missed` row stands for a whole gap of slots after an outage: this many, from scheduled_for on.
ALTER TABLE executions ADD COLUMN missed_count integer;

CREATE INDEX executions_job_in_progress ON executions (job_id)
    WHERE status IN ('queued', 'waiting', 'running', 'retrying');
