-- Tickwork schema, version 14: scoped API keys and per-secret allowed hosts (tickwork.tenant.access,
-- tickwork.secrets.hosts).
--
-- Both are metadata changes only: a column with a constant default is added without rewriting the table.

-- What a key may do. Keys made before scopes existed, the local runtime's dev key and every tenant's first
-- key (ops.admin) get all of them: the default. The API never stores an empty list.
ALTER TABLE api_keys
    ADD COLUMN scopes text[] NOT NULL
        DEFAULT ARRAY['jobs:read', 'jobs:write', 'runs:write', 'secrets:write', 'keys:admin']
        CHECK (cardinality(scopes) > 0);

-- The hosts a secret may be sent to (exact names or `*.example.com`); NULL: any host.
ALTER TABLE secrets ADD COLUMN allowed_hosts text[];
