-- Tickwork schema, version 17: replaying runs (POST /executions/{id}/replay, POST /jobs/{id}/replay).
--
-- A replay sends a run again as the same run: its execution row is reused (one row per job and slot still
-- holds), going from failed, lost, missed or skipped back to queued (never attempted) or retrying, with
-- new attempts numbered after the old ones. `replay_base` is the attempt count the latest replay started
-- from, so the retry policy gives the replay attempts of its own (attempt - replay_base); `replay_count`
-- and `replayed_at` are shown with the run.
--
-- replay_pace holds each tenant's next free replay instant: replays of a tenant are sent at most
-- TICKWORK_REPLAY_PER_SECOND a second, each batch reserving its instants by advancing it under the row's lock.
--
-- Cheap on a populated table: columns with a constant default (or none) rewrite nothing; the table is new.
ALTER TABLE executions
    ADD COLUMN replay_count integer NOT NULL DEFAULT 0,
    ADD COLUMN replay_base integer NOT NULL DEFAULT 0,
    ADD COLUMN replayed_at timestamptz;

CREATE TABLE replay_pace (
    tenant_id uuid PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
    next_at   timestamptz NOT NULL
);
