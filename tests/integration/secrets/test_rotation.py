"""Data key rotation while Tickwork works: re-encryption goes in short batches that hold no row while values
are opened and sealed, so the poller's and the API's writes to a job go on, and a rotation cut short (a
Lambda killed at its timeout) is finished by the maintenance pass with every value still opening.

Every time is pinned (NOW); the only waits are on events the rotation's keyring sets, with generous bounds.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.integration.helpers import insert_job
from tickwork.api.admin import handle_admin
from tickwork.dueindex.index import DueIndex
from tickwork.http import signing
from tickwork.ops.maintenance import run_maintenance
from tickwork.scope import Scope
from tickwork.secrets import vault
from tickwork.secrets.crypto import Keyring, LocalWrapper
from tickwork.store import secrets as store
from tickwork.store.secrets import PgKeyStore
from tickwork.store.tenants import create_tenant
from tickwork.tenant import secrets as tenant_secrets
from tickwork.wiring import Services

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
ROTATE = {"admin": "rotate-encryption-key"}
# Bounds on waits for the other thread: far beyond what a loaded machine needs, never reached when it works.
WAIT_SECONDS = 60


@dataclass
class PausingKeyring(Keyring):
    """Pauses the first time it seals a value whose context starts with `pause_on`, until released."""

    pause_on: str = "header/"
    paused: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def seal(self, store: Any, plaintext: str, context: str, *args: Any, **kwargs: Any) -> str:
        if context.startswith(self.pause_on) and not self.paused.is_set():
            self.paused.set()
            assert self.release.wait(WAIT_SECONDS)
        return super().seal(store, plaintext, context, *args, **kwargs)


@dataclass
class DyingKeyring(Keyring):
    """Raises (as a Lambda killed at its timeout stops) when it is asked for its `dies_at`-th seal."""

    dies_at: int = 4
    seals: int = 0

    def seal(self, store: Any, plaintext: str, context: str, *args: Any, **kwargs: Any) -> str:
        self.seals += 1
        if self.seals >= self.dies_at:
            raise TimeoutError("Task timed out")
        return super().seal(store, plaintext, context, *args, **kwargs)


@pytest.fixture
def tenant(db: Any) -> str:
    return create_tenant(db, "t")


def _scope(services: Services, tenant_id: str) -> Scope:
    return Scope(services.db, DueIndex(services.redis, services.settings.namespace), services.settings, tenant_id,
                 NOW, services.keyring)


def _sealed_job(services: Services, tenant: str, api_key: str) -> str:
    """A job as the API stores it: its X-Api-Key value sealed."""
    job_id = insert_job(services, schedule="0 0 1 1 *", next_run_at=NOW, tenant_id=tenant,
                        headers={"X-Api-Key": api_key})
    with services.db.connection() as conn:
        request = conn.execute("SELECT request FROM jobs WHERE id = %s", (job_id,)).fetchone()[0]
        sealed = vault.seal_request(services.keyring, conn, tenant, job_id, request)
        conn.execute("UPDATE jobs SET request = %s WHERE id = %s", (Jsonb(sealed), job_id))
    return job_id


def _stored(services: Services) -> list[str]:
    """Every sealed value in Postgres: secrets, signing secrets and sealed header values."""
    with services.db.connection() as conn:
        values = [r[0] for r in conn.execute("SELECT sealed FROM secrets UNION ALL SELECT sealed FROM signing_secrets")]
        for (request,) in conn.execute("SELECT request FROM jobs"):
            values += [v[len(vault.SEALED_MARK):] for v in request["headers"].values() if vault.is_sealed(v)]
    return values


def _key_file(services: Services) -> Path:
    assert services.settings.key_file
    return Path(services.settings.key_file)


def test_a_job_is_written_without_waiting_while_a_rotation_seals_its_headers(
    services: Services, tenant: str,
) -> None:
    job_id = _sealed_job(services, tenant, "key-one")
    keyring = PausingKeyring(LocalWrapper(_key_file(services)))
    rotation = threading.Thread(target=handle_admin, args=(replace(services, keyring=keyring), ROTATE))
    rotation.start()
    try:
        assert keyring.paused.wait(WAIT_SECONDS)
        # The poller's write of the job's next slot, as it claims it; it gives up if a lock holds it for 2 s.
        with psycopg.connect(services.settings.database_url, autocommit=True) as poller:
            poller.execute("SET lock_timeout = '2s'")
            written = poller.execute("UPDATE jobs SET next_run_at = %s WHERE id = %s",
                                     (NOW + timedelta(minutes=1), job_id)).rowcount
    finally:
        keyring.release.set()
        rotation.join(WAIT_SECONDS)
    assert written == 1
    with services.db.connection() as conn:
        request, next_run_at = conn.execute("SELECT request, next_run_at FROM jobs WHERE id = %s", (job_id,)).fetchone()
        assert request["headers"]["X-Api-Key"].startswith(vault.SEALED_MARK + "v2:")
        opened = vault.opened_headers(services.keyring, PgKeyStore(conn), tenant, job_id, request["headers"])
    assert next_run_at == NOW + timedelta(minutes=1)  # the rotation's write did not put the old row back
    assert opened["X-Api-Key"] == "key-one"


def test_a_rotation_killed_after_some_batches_is_finished_by_maintenance_and_every_value_opens(
    services: Services, tenant: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(vault, "RESEAL_BATCH", 1, raising=False)
    scope = _scope(services, tenant)
    values = {f"S{i}": f"secret-{i}" for i in range(4)}
    for name, value in values.items():
        tenant_secrets.put_secret(scope, name, value)
    secret = tenant_secrets.signing_secret(scope)
    jobs = {_sealed_job(services, tenant, f"key-{i}"): f"key-{i}" for i in range(3)}

    with pytest.raises(TimeoutError):
        handle_admin(replace(services, keyring=DyingKeyring(LocalWrapper(_key_file(services)))), ROTATE)
    assert sum(v.startswith("v2:") for v in _stored(services)) == 3  # three batches of one row were kept

    report = run_maintenance(services, NOW)
    assert all(v.startswith("v2:") for v in _stored(services))
    assert (report.resealed, report.reseal_remaining) == (len(values) + 1 + len(jobs) - 3, 0)

    fresh = Keyring(LocalWrapper(_key_file(services)))  # nothing cached from before the rotation
    with services.db.connection() as conn:
        keys = PgKeyStore(conn)
        sealed = dict(conn.execute("SELECT name, sealed FROM secrets").fetchall())
        assert {n: vault.open_secret(fresh, keys, tenant, n, s) for n, s in sealed.items()} == values
        assert vault.signing_keys(fresh, conn, tenant, NOW) == (signing.secret_key(secret),)
        for job_id, api_key in jobs.items():
            headers = conn.execute("SELECT request FROM jobs WHERE id = %s", (job_id,)).fetchone()[0]["headers"]
            assert vault.opened_headers(fresh, keys, tenant, job_id, headers)["X-Api-Key"] == api_key


def test_maintenance_stops_looking_once_nothing_older_is_left_and_the_key_has_settled(
    services: Services, tenant: str,
) -> None:
    tenant_secrets.put_secret(_scope(services, tenant), "S", "value")
    assert handle_admin(services, ROTATE)["remaining"]["secrets"] == 0
    with services.db.connection() as conn:
        assert store.unsettled_key(conn) == 2  # just made: an environment may still seal with version 1
        assert run_maintenance(services, NOW).reseal_remaining == 0
        assert store.unsettled_key(conn) == 2
        conn.execute("UPDATE encryption_keys SET created_at = created_at - make_interval(secs => %s)",
                     (vault.SETTLE_SECONDS + 1,))
        run_maintenance(services, NOW)
        assert store.unsettled_key(conn) is None


def test_a_secret_written_during_a_rotation_keeps_its_new_value_and_maintenance_moves_it(
    services: Services, tenant: str,
) -> None:
    scope = _scope(services, tenant)
    tenant_secrets.put_secret(scope, "TOKEN", "old value")
    keyring = PausingKeyring(LocalWrapper(_key_file(services)), pause_on="secret/")
    answers: list[dict[str, Any]] = []
    rotation = threading.Thread(target=lambda: answers.append(
        handle_admin(replace(services, keyring=keyring), ROTATE)))
    rotation.start()
    try:
        assert keyring.paused.wait(WAIT_SECONDS)  # the rotation has read TOKEN and is re-sealing it
        # The API, in an environment that has not yet seen the new key: it seals under version 1.
        tenant_secrets.put_secret(scope, "TOKEN", "new value")
    finally:
        keyring.release.set()
        rotation.join(WAIT_SECONDS)
    (answer,) = answers
    assert (answer["secrets"], answer["remaining"]["secrets"]) == (0, 1)  # the write won the compare-and-set
    assert run_maintenance(services, NOW).resealed == 1
    with services.db.connection() as conn:
        (sealed,) = [r[0] for r in conn.execute("SELECT sealed FROM secrets")]
        assert sealed.startswith("v2:")
        assert vault.open_secret(services.keyring, PgKeyStore(conn), tenant, "TOKEN", sealed) == "new value"
