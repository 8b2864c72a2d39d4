-- Tickwork schema, version 18: completion callbacks for long jobs (docs/api.md, "Completion callbacks").
-- A job in callback mode sends each attempt with a single-use URL; the target's 2xx leaves the run
-- `awaiting_completion` until the target calls that URL or the job's completion timeout passes.
--
-- Every column is nullable with no default: adding them rewrites nothing. The status constraint is checked
-- against the whole table (a read, under the ALTER's lock); the new index is partial over awaiting runs,
-- which no row is yet, so it is built at once.

-- NULL: completion by the response (the default, what every job did before).
ALTER TABLE jobs ADD COLUMN completion jsonb;

ALTER TABLE executions
    -- SHA-256 of the callback token of attempt `callback_attempt`; the token itself is never stored.
    ADD COLUMN callback_token_hash bytea,
    ADD COLUMN callback_attempt integer,
    -- When a run awaiting its completion fails with `no completion within N s`.
    ADD COLUMN completion_deadline timestamptz,
    -- A completion that came in for attempt `completion_attempt` (a callback that beat the recording of the
    -- target's own answer is kept here and applied once that answer is recorded).
    ADD COLUMN completion_status text CHECK (completion_status IN ('succeeded', 'failed')),
    ADD COLUMN completion_output text,
    ADD COLUMN completion_attempt integer;

-- The output a callback reported, stored as a response body is (redacted, at most 4 KB).
ALTER TABLE attempts ADD COLUMN output text;

ALTER TABLE executions DROP CONSTRAINT executions_status_check;
ALTER TABLE executions ADD CONSTRAINT executions_status_check CHECK (status IN
    ('queued', 'waiting', 'running', 'retrying', 'awaiting_completion', 'succeeded', 'failed', 'skipped', 'missed',
     'lost'));

-- Overlap checks (a job's run awaiting its completion counts as running) and the maintenance sweep of
-- overdue ones: both read only the few rows awaiting.
CREATE INDEX executions_awaiting_completion ON executions (job_id, completion_deadline)
    WHERE status = 'awaiting_completion';
