-- Tickwork schema, version 24: a job that ends after a number of runs (`max_runs`), and what becomes of a job
-- whose last run ended (`end_action`: `none` keeps it, `completed`; `delete` deletes it, its runs kept).
-- `runs_sent` counts the scheduled slots the poller recorded to send, in the statement that records them
-- (tickwork.store.executions.record_claims): Postgres holds the count, so a poller crash neither loses nor
-- doubles one. Constant defaults add the columns without rewriting the table: existing jobs keep running
-- unbounded and are kept when they end. The release before this one never reads them. The checks are added
-- NOT VALID: every existing row satisfies them (NULL, 'none'), and validating would read the whole table under
-- the ALTER's lock, blocking writers (tests/integration/store/test_migration_locks.py); new writes are checked.
ALTER TABLE jobs
    ADD COLUMN max_runs integer,
    ADD COLUMN end_action text NOT NULL DEFAULT 'none',
    ADD COLUMN runs_sent integer NOT NULL DEFAULT 0,
    ADD CONSTRAINT jobs_max_runs_check CHECK (max_runs >= 1) NOT VALID,
    ADD CONSTRAINT jobs_end_action_check CHECK (end_action IN ('none', 'delete')) NOT VALID;
