-- Tickwork schema, version 7: tenants manage their own API keys, quotas per tenant, idempotent POSTs.

-- Written at most once a minute per key (tickwork.api.auth), not on every request.
ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;
CREATE INDEX api_keys_tenant_live ON api_keys (tenant_id, created_at) WHERE revoked_at IS NULL;

-- Per-tenant overrides set by the admin operation; NULL means the deployment's default (settings).
ALTER TABLE tenants
    ADD COLUMN max_jobs integer CHECK (max_jobs >= 0),
    ADD COLUMN min_interval_seconds integer CHECK (min_interval_seconds >= 1),
    ADD COLUMN max_runs_per_minute integer CHECK (max_runs_per_minute >= 0);

-- The active jobs of a tenant grouped by schedule, for the runs-per-minute quota.
CREATE INDEX jobs_tenant_active ON jobs (tenant_id) WHERE status = 'active';

-- One row per (tenant, Idempotency-Key): claimed before the request runs (status_code NULL while it is in
-- flight), then holding the response it got, replayed for 24 hours; the maintenance task prunes older rows.
CREATE TABLE idempotency_keys (
    tenant_id    uuid NOT NULL REFERENCES tenants(id),
    key          text NOT NULL,
    fingerprint  bytea NOT NULL,
    created_at   timestamptz NOT NULL,
    status_code  integer,
    body         text,
    PRIMARY KEY (tenant_id, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
