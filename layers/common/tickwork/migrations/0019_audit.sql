-- Tickwork schema, version 19: the audit log (GET /audit).
--
-- One row per change made through the API (or by a stack's jobs, or another service acting for a tenant),
-- written in the transaction of the change itself: a change that rolls back leaves no entry, and none is
-- made without one. Who: the API key's id and name as they were (a key deleted or renamed later does not
-- rewrite history; no foreign key), the request id and the client's address. `changes` holds the fields
-- changed, before and after, as the API shows them (sensitive header values masked); never a secret value.
--
-- No foreign key to tenants (tenants are never deleted): its check would take the tenant's row FOR KEY SHARE
-- inside changes that otherwise never touch it (a job's update), behind the row lock a quota check holds
-- while it waits for that very update (concurrent PUTs of one key deadlocked so).
--
-- Kept as long as executions: the maintenance pass deletes rows older than the retention (oldest first,
-- along audit_events_at). The table is new: nothing to rewrite.
CREATE TABLE audit_events (
    id          uuid PRIMARY KEY,
    tenant_id   uuid NOT NULL,
    at          timestamptz NOT NULL,
    action      text NOT NULL,
    job_id      uuid,
    target      text,
    key_id      uuid,
    key_name    text,
    request_id  text,
    client_ip   text,
    changes     jsonb
);

-- GET /audit, newest first, and a job's own entries (the console's job page).
CREATE INDEX audit_events_tenant_at ON audit_events (tenant_id, at DESC, id DESC);
CREATE INDEX audit_events_tenant_job ON audit_events (tenant_id, job_id, at DESC, id DESC) WHERE job_id IS NOT NULL;
-- Retention, oldest first across tenants.
CREATE INDEX audit_events_at ON audit_events (at);
