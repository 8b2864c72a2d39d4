-- Tickwork schema, version 10: history that cannot fill the database (pruned oldest first, under a time budget).

-- Retention takes the oldest finished runs first, a batch at a time, straight from a b-tree. The BRIN
-- index it replaces stopped helping once pruned pages were filled again with new runs: every range then
-- spans old and new, and each batch read the whole table.
DROP INDEX executions_created_brin;
CREATE INDEX executions_final_created ON executions (created_at)
    WHERE status IN ('succeeded', 'failed', 'skipped', 'missed', 'lost');
CREATE INDEX notifications_final_created ON notifications (created_at) WHERE status IN ('delivered', 'failed');

-- A tenant's history quota (tickwork.tenant.quotas): maintenance prunes its oldest finished runs past this
-- many. NULL means the deployment's default (TICKWORK_MAX_HISTORY_ROWS).
ALTER TABLE tenants ADD COLUMN max_history_rows integer CHECK (max_history_rows >= 0);
