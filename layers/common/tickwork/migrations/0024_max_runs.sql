-- Tickwork schema, version 24: a job that ends after a number of runs (`max_runs`), and what becomes of a job
-- whose last run ended (`end_action`: `none` keeps it, `completed`; `delete` deletes it, its runs kept).
-- `runs_sent` counts the scheduled slots the poller recorded to send, in the statement that records them
-- (tickwork.store.executions.record_claims): Postgres holds the count, so a poller crash neither loses nor
-- doubles one. Constant defaults add the columns without rewriting the table: existing jobs keep running
-- unbounded and are kept when they end. The release before this one never reads them.
ALTER TABLE jobs
    ADD COLUMN max_runs integer CHECK (max_runs >= 1),
    ADD COLUMN end_action text NOT NULL DEFAULT 'none' CHECK (end_action IN ('none', 'delete')),
    ADD COLUMN runs_sent integer NOT NULL DEFAULT 0;
