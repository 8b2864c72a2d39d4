-- Runs in flight per tenant: the quota's per-tenant override, and when the quota first held a run back.

-- NULL means the deployment's default (TICKWORK_MAX_RUNS_IN_FLIGHT).
ALTER TABLE tenants ADD COLUMN max_runs_in_flight integer CHECK (max_runs_in_flight >= 1);

-- Set the first time a run is held back because its tenant had max_runs_in_flight runs in flight (the
-- reason is in last_error while it waits): such a run that becomes too late for its job's catch-up policy
-- is recorded missed instead of firing late (tickwork.dispatch.budget).
ALTER TABLE executions ADD COLUMN delayed_at timestamptz;
