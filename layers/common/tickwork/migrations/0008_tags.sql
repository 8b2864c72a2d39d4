-- Finding things: job tags and descriptions, and the indexes the filtered lists need.

ALTER TABLE jobs
    ADD COLUMN tags text[] NOT NULL DEFAULT '{}',
    ADD COLUMN description text NOT NULL DEFAULT '';

-- GET /jobs?tag=a&tag=b is `tags @> ARRAY[a, b]`; the planner ANDs this bitmap with the tenant's index.
CREATE INDEX jobs_tags ON jobs USING gin (tags) WHERE status <> 'deleted';
-- GET /jobs?name_prefix=: LIKE 'prefix%' is an index range under text_pattern_ops, whatever the collation.
CREATE INDEX jobs_tenant_name ON jobs (tenant_id, name text_pattern_ops) WHERE status <> 'deleted';

-- GET /executions and GET /stats: a tenant's runs newest slot first, and a window of them by slot.
CREATE INDEX executions_tenant_newest ON executions (tenant_id, scheduled_for DESC, id DESC);
