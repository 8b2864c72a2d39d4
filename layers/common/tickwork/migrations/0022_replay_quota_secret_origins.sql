-- Tickwork schema, version 22: a tenant's replays waiting to be sent are bounded, and a secret's allowed hosts
-- bind a scheme and a port as well.
--
-- max_replays_queued overrides, per tenant, the deployment's TICKWORK_MAX_REPLAYS_QUEUED: how many replayed
-- runs may wait for their instant of the tenant's replay pace (tickwork.rules.replay). NULL means the
-- deployment's default. The admin action set-quotas checks the value.
--
-- allowed_origins holds a secret's allowed hosts as entries with a scheme and a port where they name one
-- (`http://api.example.com:8080`; a bare host is https on 443: tickwork.secrets.hosts). allowed_hosts keeps
-- the bare hosts of the same entries, which is all a release before this one reads: it goes on binding the
-- host alone, as it did, and never meets an entry it cannot read. A row whose allowed_hosts such a release
-- changed since is read from allowed_hosts again (tickwork.secrets.hosts.in_force).
--
-- A release that does not know these columns reads none of them and writes none of them. Cheap on a populated
-- table: nullable columns without a default rewrite nothing.
ALTER TABLE tenants ADD COLUMN max_replays_queued integer;
ALTER TABLE secrets ADD COLUMN allowed_origins text[];
