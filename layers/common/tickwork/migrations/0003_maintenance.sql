-- Tickwork schema, version 3: what the maintenance task (reconciler, sweeper, retention) needs.

-- When the current attempt started (started_at keeps the first one): the sweeper declares an attempt
-- lost once its executor could no longer be running, measured from here.
ALTER TABLE executions ADD COLUMN attempt_started_at timestamptz;

-- Retention deletes by age. Rows are appended in created_at order, so a BRIN index finds the oldest
-- pages for almost nothing on the insert path the poller writes. autosummarize: a page range is only
-- skipped once summarized, so summarize each range as it fills instead of waiting for a VACUUM.
CREATE INDEX executions_created_brin ON executions USING brin (created_at) WITH (autosummarize = on);
