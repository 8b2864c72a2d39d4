-- Tickwork schema, version 1. Postgres is the source of truth; the Redis due index is rebuilt from it.

CREATE TABLE tenants (
    id          uuid PRIMARY KEY,
    name        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Keys are high-entropy random tokens, so a SHA-256 digest is enough; the token itself is never stored.
CREATE TABLE api_keys (
    id          uuid PRIMARY KEY,
    tenant_id   uuid NOT NULL REFERENCES tenants(id),
    key_hash    bytea NOT NULL UNIQUE,
    prefix      text NOT NULL,
    name        text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

CREATE TABLE jobs (
    id            uuid PRIMARY KEY,
    tenant_id     uuid NOT NULL REFERENCES tenants(id),
    name          text NOT NULL,
    schedule      text NOT NULL,
    timezone      text NOT NULL DEFAULT 'UTC',
    start_at      timestamptz,
    end_at        timestamptz,
    request       jsonb NOT NULL,
    retry         jsonb NOT NULL,
    status        text NOT NULL CHECK (status IN ('active', 'paused', 'completed', 'deleted')),
    -- The slot the due index should hold for this job; advanced in the same statement that inserts a run.
    next_run_at   timestamptz,
    -- Bumped on every schedule change, so a poller holding an old spec cannot advance a new schedule.
    version       integer NOT NULL DEFAULT 1,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz
);
CREATE INDEX jobs_tenant_created ON jobs (tenant_id, created_at DESC, id DESC) WHERE status <> 'deleted';
CREATE INDEX jobs_active_next ON jobs (next_run_at) WHERE status = 'active';

CREATE TABLE executions (
    id               uuid PRIMARY KEY,
    tenant_id        uuid NOT NULL REFERENCES tenants(id),
    job_id           uuid NOT NULL REFERENCES jobs(id),
    scheduled_for    timestamptz NOT NULL,
    trigger          text NOT NULL CHECK (trigger IN ('schedule', 'manual')),
    status           text NOT NULL CHECK (status IN
                        ('queued', 'running', 'retrying', 'succeeded', 'failed', 'skipped', 'missed', 'lost')),
    attempt_count    integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz,
    last_error       text,
    -- The barrier against double runs: whoever inserts the row for a slot is the only one to dispatch it.
    CONSTRAINT executions_one_per_slot UNIQUE (job_id, scheduled_for)
);
CREATE INDEX executions_job_newest ON executions (job_id, scheduled_for DESC, id DESC);
CREATE INDEX executions_unfinished ON executions (status, next_attempt_at)
    WHERE status IN ('queued', 'running', 'retrying');

CREATE TABLE attempts (
    execution_id   uuid NOT NULL REFERENCES executions(id) ON DELETE CASCADE,
    number         integer NOT NULL,
    started_at     timestamptz NOT NULL,
    duration_ms    integer NOT NULL,
    status_code    integer,
    response_body  text,
    error          text,
    PRIMARY KEY (execution_id, number)
);
