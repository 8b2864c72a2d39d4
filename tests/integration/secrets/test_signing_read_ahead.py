"""An invocation reads all its tenants' signing keys in one statement (TenantSecrets.read_ahead, ahead of the
runs' preparation): the keys each tenant's own read gives, rotations included; a tenant without a secret, or whose
secret does not open, is left to that read, at its first run. The requests of a group of several tenants' runs
are each signed with their own tenant's keys.

Signed requests are checked with the official verifier, which compares timestamps with the wall clock: those
runs are at the current second (as in test_secret_delivery). The reads alone are at a pinned NOW.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from tests.conftest import Target
from tests.integration.helpers import executor_at, insert_job
from tests.support import FakeClock
from tickwork.dispatch.poller import Poller
from tickwork.dueindex.index import DueIndex
from tickwork.models import Dispatch
from tickwork.scope import Scope
from tickwork.secrets import vault
from tickwork.secrets.outgoing import TenantSecrets
from tickwork.store.tenants import create_tenant
from tickwork.tenant import secrets as tenant_secrets
from tickwork.timeutil import to_ms
from tickwork.wiring import Services

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)


def _scope(services: Services, tenant_id: str, now: datetime) -> Scope:
    return Scope(services.db, DueIndex(services.redis, services.settings.namespace), services.settings, tenant_id,
                 now, services.keyring)


@pytest.fixture
def tenants(services: Services, db: Any) -> dict[str, str]:
    """`rotated` (two secrets: one made two days ago, rotated an hour ago), `one` (one secret), `none`."""
    made = {name: create_tenant(db, name) for name in ("rotated", "one", "none")}
    tenant_secrets.signing_secret(_scope(services, made["rotated"], NOW - timedelta(days=2)))
    tenant_secrets.rotate_signing_secret(_scope(services, made["rotated"], NOW - timedelta(hours=1)))
    tenant_secrets.signing_secret(_scope(services, made["one"], NOW - timedelta(days=1)))
    return made


def test_one_statement_reads_what_each_tenants_own_read_does(services: Services, tenants: dict[str, str]) -> None:
    keyring = services.keyring
    assert keyring is not None
    with services.db.connection() as conn:
        for at in (NOW, NOW + timedelta(hours=24)):  # within the rotation's overlap, and past it
            read = vault.signing_keys_of(keyring, conn, list(tenants.values()), at)
            assert read == {tenants[name]: vault.signing_keys(keyring, conn, tenants[name], at)
                            for name in ("rotated", "one")}
            assert len(read[tenants["rotated"]]) == (2 if at == NOW else 1)
        # The tenant without a secret is left out: the read made none (its own read, at its first run, does).
        assert conn.execute("SELECT count(*) FROM signing_secrets WHERE tenant_id = %s",
                            (tenants["none"],)).fetchone()[0] == 0


def test_a_secret_that_does_not_open_is_left_to_the_tenants_own_read(
    services: Services, tenants: dict[str, str],
) -> None:
    keyring = services.keyring
    assert keyring is not None
    rotated, one = tenants["rotated"], tenants["one"]
    with services.db.connection() as conn:
        # `one`'s row now holds a value sealed for another tenant's secret: it does not open as its own.
        conn.execute("UPDATE signing_secrets SET sealed = (SELECT sealed FROM signing_secrets WHERE tenant_id = %s"
                     " LIMIT 1) WHERE tenant_id = %s", (rotated, one))
        read = vault.signing_keys_of(keyring, conn, [rotated, one], NOW)
    assert set(read) == {rotated}


def test_after_reading_ahead_the_invocation_reads_no_tenants_keys_again(
    services: Services, tenants: dict[str, str],
) -> None:
    secrets = TenantSecrets(services, clock=NOW.timestamp)
    with services.db.connection() as conn:
        secrets.read_ahead(conn, tenants.values())
        before = {name: vault.signing_keys(services.keyring, conn, tenant, NOW)  # type: ignore[arg-type]
                  for name, tenant in tenants.items()}
        conn.execute("DELETE FROM signing_secrets WHERE tenant_id = ANY(%s::uuid[])",
                     ([tenants["rotated"], tenants["one"]],))
    # Read once per invocation, as before: a read now would find no secret and make a new one.
    assert secrets.signing_keys(tenants["rotated"]) == before["rotated"]
    assert secrets.signing_keys(tenants["one"]) == before["one"]
    # The tenant without a secret at the read ahead got its own read (which made the secret) at its first use.
    assert secrets.signing_keys(tenants["none"]) == before["none"]


def test_a_group_of_several_tenants_runs_signs_each_with_its_own_tenants_keys(
    services: Services, db: Any, target: Target,
) -> None:
    now = datetime.now(timezone.utc).replace(microsecond=0)
    tenants = [create_tenant(db, f"t{i}") for i in range(3)]
    secrets = {tenant: tenant_secrets.signing_secret(_scope(services, tenant, now)) for tenant in tenants}
    jobs = {insert_job(services, schedule="0 0 1 1 *", next_run_at=now, tenant_id=tenant,
                       url=f"{target.url}/{tenant}"): tenant for tenant in tenants for _ in range(2)}
    services.invoker.dispatches.clear()  # type: ignore[union-attr]
    Poller(services).tick(to_ms(now))
    dispatches: list[Dispatch] = list(services.invoker.dispatches)  # type: ignore[union-attr]
    assert len(dispatches) == len(jobs)
    assert executor_at(services, FakeClock(now)).run(dispatches) == ["succeeded"] * len(jobs)
    for request in target.requests:
        tenant = jobs[request["headers"]["Tickwork-Job-Id"]]
        Webhook(secrets[tenant]).verify(request["body"], request["headers"])
        for other in set(tenants) - {tenant}:
            with pytest.raises(WebhookVerificationError):
                Webhook(secrets[other]).verify(request["body"], request["headers"])
