-- Tickwork schema, version 21: storage one tenant can fill, bounded (docs/operations.md, "Storage bounds").
--
-- Audit entries keep long values as their size and SHA-256 (tickwork.tenant.audit_bounds), stored
-- Idempotency-Key answers have a size cap, and both count in a per-tenant storage budget that the maintenance
-- pass holds (tickwork.ops.storage). Every new column is nullable with no default and every table is new:
-- nothing is rewritten, and a release that knows none of it writes and reads as before (the pass counts its
-- rows afresh).

-- A tenant's budget for audit entries and stored answers, in bytes; NULL: the deployment's default
-- (TICKWORK_MAX_STORAGE_BYTES).
ALTER TABLE tenants ADD COLUMN max_storage_bytes bigint CHECK (max_storage_bytes >= 0);

ALTER TABLE audit_events
    -- What the entry counts in its tenant's budget; NULL for an entry written before (measured the same way).
    ADD COLUMN stored_bytes integer,
    -- Changes left out at the entry's size cap (the last ones); NULL: none.
    ADD COLUMN changes_omitted integer;

-- An answer too large to keep: its size. `body` then holds only the id of what the request made, which a
-- retry reads afresh. NULL: the answer is kept whole.
ALTER TABLE idempotency_keys ADD COLUMN answer_bytes integer;
-- A tenant's keys oldest first: its count cap and its budget drop the oldest. Small table (24 hours of keys).
CREATE INDEX idempotency_keys_tenant_created ON idempotency_keys (tenant_id, created_at);

-- Each tenant's usage by kind ('audit', 'idempotency'), as of the maintenance pass's last fold, and when it
-- was last counted from the rows themselves. No foreign key to tenants, as audit_events (migration 19).
CREATE TABLE storage_usage (
    tenant_id      uuid NOT NULL,
    kind           text NOT NULL,
    bytes          bigint NOT NULL,
    entries        bigint NOT NULL,
    reconciled_at  timestamptz,
    PRIMARY KEY (tenant_id, kind)
);

-- What each write or delete of those rows changed, written in its statement; folded into storage_usage and
-- deleted by the maintenance pass. Append-only: concurrent changes of a tenant share no row.
CREATE TABLE storage_changes (
    tenant_id  uuid NOT NULL,
    kind       text NOT NULL,
    bytes      bigint NOT NULL,
    entries    integer NOT NULL
);

-- GET /audit in full (who made each change, from where, the values) needs the new scope audit:read; jobs:read
-- alone reads entries without them. A key that administers keys already sees their names and scopes: it gets
-- audit:read, as does every key made with all scopes from now on (the column's default: a tenant's first key,
-- the local runtime's). A small table; the release before ignores a scope it does not know.
ALTER TABLE api_keys ALTER COLUMN scopes
    SET DEFAULT ARRAY['jobs:read', 'jobs:write', 'runs:write', 'secrets:write', 'keys:admin', 'audit:read'];
UPDATE api_keys SET scopes = array_append(scopes, 'audit:read')
 WHERE 'keys:admin' = ANY(scopes) AND NOT 'audit:read' = ANY(scopes);
