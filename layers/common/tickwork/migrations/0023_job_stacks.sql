-- Tickwork schema, version 23: the CloudFormation stack that manages a job (Custom::TickworkJob).
--
-- A job's `source` (cfn:<stack name>/<logical id>) names a stack by its name, which another stack of the same
-- name (made again, in another account or region) shares. A Delete needs no API key (a stack can always be
-- deleted), so it is vouched for by the full StackId instead: the one recorded here by the last Create or
-- Update that put the job, with the API key that authorised it. A job without a row (made before this
-- version) is deleted by no stack until an Update with a key records one.
--
-- Written in the transaction of the job's own write. No foreign key: jobs are never deleted (a soft delete
-- keeps the row), and a key's check would add work to every update of the jobs table, the poller's included.
-- The table is new: the release before it never reads it, and nothing is rewritten.
CREATE TABLE job_stacks (
    job_id      uuid PRIMARY KEY,
    tenant_id   uuid NOT NULL,
    stack_id    text NOT NULL CHECK (length(stack_id) <= 256),
    key_id      uuid,
    updated_at  timestamptz NOT NULL
);
