-- Tickwork schema, version 13: jobs as code. A job may carry a key, its stable name for PUT /jobs/by-key/{key}
-- (a file applied by the CLI, a CloudFormation resource), and the label of what manages it (`source`: the
-- file's label, a stack), so pruning a file's jobs never touches another's.
--
-- Both columns are nullable with no default: adding them rewrites nothing. The indexes are built in the
-- migration's transaction; no row has a key yet, so the partial ones are empty.
ALTER TABLE jobs
    ADD COLUMN key text,
    ADD COLUMN source text;

-- One live job per (tenant, key); a deleted job frees its key.
CREATE UNIQUE INDEX jobs_tenant_key ON jobs (tenant_id, key) WHERE key IS NOT NULL AND status <> 'deleted';
-- GET /jobs?source=: the jobs one file or stack manages.
CREATE INDEX jobs_tenant_source ON jobs (tenant_id, source) WHERE source IS NOT NULL AND status <> 'deleted';
