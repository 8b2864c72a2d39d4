-- Tickwork schema, version 20: a job in quarantine (docs/operations.md, "Quarantine"). When the poller's handling
-- of an active job's due-index entry raises, the entry is moved out of the claimable range until
-- retry_errored_at, and the job shows `status: errored` with the reason in the API; any change to the job, to a
-- calendar it names, an operator's release or its next successful claim clears all four columns.
--
-- `status` keeps its values: the release before this one reads it and checks it against a fixed list, so the
-- state shown is derived (active with an error_reason). Every column is nullable with no default: adding them
-- rewrites nothing and takes the table's lock only for the catalogue change. No index: the poller writes these
-- columns by primary key, and the rebuild reads them with the rows it reads anyway.
ALTER TABLE jobs
    -- The exception's type and the step it stopped (never the tenant's text, never a secret), at most 200 chars.
    ADD COLUMN error_reason text,
    -- When its current streak of failures began.
    ADD COLUMN errored_at timestamptz,
    -- Failures in a row: the quarantine's backoff doubles with each (tickwork.rules.quarantine).
    ADD COLUMN error_count integer,
    -- The entry is claimable again from then on; a rebuild of the due index puts it there, not earlier.
    ADD COLUMN retry_errored_at timestamptz;
