-- Tickwork schema, version 22: a tenant's replays waiting to be sent are bounded (tickwork.tenant.quotas).
--
-- max_replays_queued overrides, per tenant, the deployment's TICKWORK_MAX_REPLAYS_QUEUED: how many replayed
-- runs may wait for their instant of the tenant's replay pace (tickwork.rules.replay). NULL means the
-- deployment's default. The admin action set-quotas checks the value; a release that does not know the
-- column reads none of it and writes none of it.
--
-- Cheap on a populated table: a nullable column without a default rewrites nothing.
ALTER TABLE tenants ADD COLUMN max_replays_queued integer;
