-- Tickwork schema, version 12: a manual run is not a slot. One row per (job, scheduled_for) now holds for
-- scheduled runs only: a manual run asked for at a slot's very instant used to share that key, so the
-- slot was silently not recorded (manual run first) or the manual run failed (slot first).
--
-- Safe on a populated table: the scheduled rows already satisfy the new index (they were unique under
-- the old constraint, a superset). Cost: the build reads and sorts the whole table, holding a SHARE lock:
-- reads go on, writes to executions (the poller's inserts, the executors' starts and ends) wait until the
-- migration commits, and runs are late by that long (docs/deploy.md has the measured rate). A large table
-- can get the index first, without blocking writes, from psql:
--   CREATE UNIQUE INDEX CONCURRENTLY executions_one_per_slot_scheduled
--       ON executions (job_id, scheduled_for) WHERE trigger = 'schedule';
-- and then this migration only drops the old constraint (a moment under an exclusive lock).
DO $$
BEGIN
    -- A concurrent build that failed leaves an invalid index under the name: it enforces nothing.
    IF EXISTS (SELECT 1 FROM pg_index WHERE indexrelid = to_regclass('executions_one_per_slot_scheduled')
                                         AND NOT indisvalid) THEN
        RAISE EXCEPTION 'index executions_one_per_slot_scheduled is invalid (a failed CREATE INDEX CONCURRENTLY): drop it and deploy again';
    END IF;
END $$;
CREATE UNIQUE INDEX IF NOT EXISTS executions_one_per_slot_scheduled
    ON executions (job_id, scheduled_for) WHERE trigger = 'schedule';
-- Dropped last: its exclusive lock is held only from here to the commit.
ALTER TABLE executions DROP CONSTRAINT executions_one_per_slot;
