"""Secrets and signatures on the wire: the executor sends real values that nothing stores, signs exactly
the bytes sent, and a receiver using the official `standardwebhooks` verifier accepts every attempt.

The verifier checks timestamps against the wall clock (5 minutes either way), so these runs are
scheduled at the current second and the executors' FakeClock starts there: every time in a test derives
from that one reading.
"""
from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from tests.conftest import Target
from tests.integration.api.test_api_scopes import key_with
from tests.integration.api_client import Api, job_body, use_clock, use_settings
from tests.integration.helpers import attempts, executions, executor_at, insert_job
from tests.support import FakeClock
from tickwork.api.admin import handle_admin
from tickwork.dispatch.poller import Poller
from tickwork.dueindex.index import DueIndex
from tickwork.models import Dispatch
from tickwork.scope import Scope
from tickwork.secrets import vault
from tickwork.store.tenants import create_api_key, create_tenant
from tickwork.tenant import secrets as tenant_secrets
from tickwork.tenant.access import JOBS_READ, JOBS_WRITE, RUNS_WRITE
from tickwork.timeutil import rfc3339, to_ms
from tickwork.wiring import Services

TOKEN = "tok-3f9a1c77-never-stored"
API_KEY = "key-b2d4e6f8-never-stored"


@pytest.fixture
def now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


@pytest.fixture
def tenant(db: Any) -> str:
    return create_tenant(db, "t")


def _scope(services: Services, tenant_id: str, now: datetime) -> Scope:
    return Scope(services.db, DueIndex(services.redis, services.settings.namespace), services.settings, tenant_id,
                 now, services.keyring)


def _run(services: Services, job_id: str, clock: FakeClock) -> list[str]:
    """Tick the poller at the clock's second and run what it dispatched."""
    invoker = services.invoker
    invoker.dispatches.clear()  # type: ignore[union-attr]
    Poller(services).tick(to_ms(clock.at))
    dispatches: list[Dispatch] = list(invoker.dispatches)  # type: ignore[union-attr]
    return executor_at(services, clock).run(dispatches)


def _job(services: Services, tenant: str, now: datetime, target: Target, **fields: Any) -> str:
    """A job as the API stores it: references checked, sensitive header values sealed."""
    job_id = insert_job(services, schedule="0 0 1 1 *", next_run_at=now, tenant_id=tenant,
                        url=fields.pop("url", target.url + "/hook"), **fields)
    with services.db.connection() as conn:
        request = conn.execute("SELECT request FROM jobs WHERE id = %s", (job_id,)).fetchone()[0]
        sealed = vault.seal_request(services.keyring, conn, tenant, job_id, request)  # type: ignore[arg-type]
        conn.execute("UPDATE jobs SET request = %s WHERE id = %s", (json.dumps(sealed), job_id))
    return job_id


def test_a_secret_in_a_header_url_and_body_is_sent_and_the_request_verifies(
    services: Services, target: Target, tenant: str, now: datetime,
) -> None:
    scope = _scope(services, tenant, now)
    tenant_secrets.put_secret(scope, "TOKEN", TOKEN)
    tenant_secrets.put_secret(scope, "WHERE", "inbox")
    job_id = _job(services, tenant, now, target, url=target.url + "/${secrets.WHERE}",
                  headers={"Authorization": "Bearer ${secrets.TOKEN}", "X-Api-Key": API_KEY},
                  body='{"token": "${secrets.TOKEN}"}')
    assert _run(services, job_id, FakeClock(now)) == ["succeeded"]
    (sent,) = target.requests
    assert sent["path"] == "/inbox"
    assert sent["headers"]["Authorization"] == f"Bearer {TOKEN}" and sent["headers"]["X-Api-Key"] == API_KEY
    assert sent["body"] == json.dumps({"token": TOKEN})
    secret = tenant_secrets.signing_secret(scope)
    assert Webhook(secret).verify(sent["body"], sent["headers"]) == {"token": TOKEN}
    (run,) = executions(services, job_id)
    assert sent["headers"]["webhook-id"] == f"{job_id}:{run[0]}" and sent["headers"]["Tickwork-Run-Id"] == run[0]
    assert sent["headers"]["webhook-timestamp"] == str(int(now.timestamp()))
    tampered = sent["body"].replace(TOKEN, "other")
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(tampered, sent["headers"])


def test_nothing_stored_or_logged_holds_a_secret_or_a_sensitive_header_value(
    api: Api, services: Services, target: Target, now: datetime, capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The acceptance check, through the API as a user would: a secret, a job using it and a plain sensitive
    header, two attempts at a target that echoes them; then every table, key and log line is searched."""
    caplog.set_level(logging.DEBUG)
    use_settings(services, allow_private_targets=True)  # the target is on loopback
    use_clock(now.timestamp)  # one clock: the manual run is due at the instant the executor's clock reads
    assert api.call("PUT", "/secrets/TOKEN", {"value": TOKEN}).status == 201
    job = api.create(request={"url": target.url + "/hook", "body": '{"t": "${secrets.TOKEN}"}', "headers": {
        "Authorization": "Bearer ${secrets.TOKEN}", "X-Api-Key": API_KEY, "X-Echo": "${secrets.TOKEN}"}},
        retry={"strategy": "fixed", "max_attempts": 2, "delay_seconds": 1})
    assert api.call("POST", f"/jobs/{job['id']}/run").status == 202
    target.response_body = f"echo: Bearer {TOKEN} {API_KEY} {json.dumps(TOKEN)}".encode()
    target.statuses = [500, 500]
    clock = FakeClock(now)
    assert _run(services, job["id"], clock) == ["retrying"]
    clock.sleep(1)
    assert _run(services, job["id"], clock) == ["failed"]
    assert [r["headers"]["Authorization"] for r in target.requests] == [f"Bearer {TOKEN}"] * 2
    assert target.requests[1]["headers"]["X-Api-Key"] == API_KEY and target.requests[1]["body"] == f'{{"t": "{TOKEN}"}}'

    # Log records with every field they carry (the JSON formatter prints these), and whatever reached stdout.
    logs = "\n".join(json.dumps(vars(record), default=str) for record in caplog.records) + capsys.readouterr().out
    dump = _postgres_dump(services) + _redis_dump(services) + logs
    assert TOKEN not in dump and API_KEY not in dump
    assert '"action":"secret.put"' in dump and '"action":"job.created"' in dump  # the audit log was searched too
    (run,) = executions(services, job["id"])
    with services.db.connection() as conn:
        bodies = [r[0] for r in conn.execute("SELECT response_body FROM attempts WHERE execution_id = %s", (run[0],))]
    assert bodies == ["echo: *** *** \"***\""] * 2
    assert "attempt finished" in logs and '"status_code": 500' in logs  # the logs were captured


def test_a_key_that_may_write_jobs_cannot_forge_another_jobs_signed_request(
    api: Api, db: Any, services: Services, target: Target, now: datetime,
) -> None:
    """A jobs:write key cannot read the signing secret, yet its job's requests are signed with it: it can make
    one carrying any body to any URL, a tenant's receiver included. What is signed names the job
    (webhook-id is `<job id>:<run id>`), so a receiver that checks the job tells the forgery from the real one.
    Another tenant's job, whatever it sends, does not verify with this tenant's secret at all."""
    use_settings(services, allow_private_targets=True)  # the receiver is on loopback
    use_clock(now.timestamp)
    secret = api.call("GET", "/signing-secret").body["secret"]
    payroll = api.create(request={"url": target.url + "/receiver", "body": '{"pay": "alice"}'})
    forger = key_with(api, JOBS_READ, JOBS_WRITE, RUNS_WRITE)
    assert api.call("GET", "/signing-secret", token=forger).status == 403
    forged = api.call("POST", "/jobs", job_body(request={"url": target.url + "/receiver", "body": '{"pay": "mallory"}'}),
                      token=forger).body
    other_tenant = create_tenant(db, "tenant-b")
    other = Api(api.handler, create_api_key(db, other_tenant), other_tenant, api.index)
    theirs = other.create(request={"url": target.url + "/receiver", "body": '{"pay": "mallory"}'})
    for job, caller in ((payroll, api), (forged, api), (theirs, other)):
        assert caller.call("POST", f"/jobs/{job['id']}/run").status == 202
    invoker = services.invoker
    invoker.dispatches.clear()  # type: ignore[union-attr]
    Poller(services).tick(to_ms(now))
    executor_at(services, FakeClock(now)).run(list(invoker.dispatches))  # type: ignore[union-attr]

    received = {r["body"]: r["headers"] for r in target.requests}
    assert len(target.requests) == 3 and set(received) == {'{"pay": "alice"}', '{"pay": "mallory"}'}

    def accepted(body: str, headers: dict[str, str]) -> bool:
        """The receiver of docs/api.md: a valid signature, from the job it expects."""
        try:
            Webhook(secret).verify(body, headers)
        except WebhookVerificationError:
            return False
        return headers["webhook-id"].split(":")[0] == payroll["id"]

    by_job = {r["headers"]["Tickwork-Job-Id"]: r for r in target.requests}
    assert accepted(by_job[payroll["id"]]["body"], by_job[payroll["id"]]["headers"])
    assert not accepted(by_job[forged["id"]]["body"], by_job[forged["id"]]["headers"])
    Webhook(secret).verify(by_job[forged["id"]]["body"], by_job[forged["id"]]["headers"])  # signed: jobs:write signs
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(by_job[theirs["id"]]["body"], by_job[theirs["id"]]["headers"])
    # Nor can the forger put the real job's id in front of its run's: the id is part of what is signed.
    headers = dict(by_job[forged["id"]]["headers"])
    headers["webhook-id"] = payroll["id"] + ":" + headers["webhook-id"].split(":")[1]
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(by_job[forged["id"]]["body"], headers)


def test_an_unknown_secret_fails_the_attempt_without_retrying(
    services: Services, target: Target, tenant: str, now: datetime,
) -> None:
    scope = _scope(services, tenant, now)
    tenant_secrets.put_secret(scope, "TOKEN", TOKEN)
    job_id = _job(services, tenant, now, target, headers={"Authorization": "Bearer ${secrets.TOKEN}"},
                  retry={"strategy": "fixed", "max_attempts": 3, "delay_seconds": 1})
    tenant_secrets.delete_secret(scope, "TOKEN")
    assert _run(services, job_id, FakeClock(now)) == ["failed"]
    assert target.requests == []
    (run,) = executions(services, job_id)
    assert [(a[0], a[4]) for a in attempts(services, run[0])] == [(1, "unknown secret TOKEN")]


def test_a_job_saved_before_the_bounds_fails_its_attempt_without_building_or_retrying_it(
    services: Services, target: Target, tenant: str, now: datetime,
) -> None:
    """#22: the job of the issue (8 KiB secrets, a 64K body of references: ~45 MB) stored before the API
    refused it; the executor stops at the bound and records why, without the value, and does not retry."""
    big = "v" * vault.MAX_VALUE_BYTES
    tenant_secrets.put_secret(_scope(services, tenant, now), "BIG", big)
    body = "${secrets.BIG}" * (64 * 1024 // len("${secrets.BIG}"))
    job_id = _job(services, tenant, now, target, body=body,
                  retry={"strategy": "fixed", "max_attempts": 3, "delay_seconds": 1})
    assert _run(services, job_id, FakeClock(now)) == ["failed"]
    assert target.requests == []
    (run,) = executions(services, job_id)
    ((number, _, _, _, error),) = attempts(services, run[0])
    assert (number, error) == (1, "refused: the body would be over 1048576 bytes with the secrets in")


def test_a_secret_in_the_url_goes_through_the_ssrf_guard_after_interpolation(
    services: Services, target: Target, tenant: str, now: datetime,
) -> None:
    from dataclasses import replace

    from tickwork.wiring import Services as Svc

    guarded = Svc(replace(services.settings, allow_private_targets=False), services.db, services.redis,
                  services.invoker, keyring=services.keyring)
    tenant_secrets.put_secret(_scope(guarded, tenant, now), "HOST", "127.0.0.1")
    port = target.url.rsplit(":", 1)[1]
    job_id = _job(guarded, tenant, now, target, url=f"http://${{secrets.HOST}}:{port}/x")
    assert _run(guarded, job_id, FakeClock(now)) == ["failed"]
    assert target.requests == []
    (run,) = executions(guarded, job_id)
    ((_, _, _, _, error),) = attempts(guarded, run[0])
    assert error.startswith("refused: ") and "127.0.0.1" not in error


def test_every_attempt_of_a_run_carries_its_id_and_planned_instant(
    services: Services, target: Target, tenant: str, now: datetime,
) -> None:
    target.statuses = [503, 200]
    job_id = _job(services, tenant, now, target, retry={"strategy": "fixed", "max_attempts": 2, "delay_seconds": 2})
    clock = FakeClock(now)
    assert _run(services, job_id, clock) == ["retrying"]
    clock.sleep(2)
    assert _run(services, job_id, clock) == ["succeeded"]
    first, second = target.requests
    assert first["headers"]["webhook-id"] == second["headers"]["webhook-id"]
    assert [r["headers"]["webhook-timestamp"] for r in (first, second)] == [
        str(int(now.timestamp())), str(int(now.timestamp()) + 2)]
    secret = tenant_secrets.signing_secret(_scope(services, tenant, now))
    for request in (first, second):
        Webhook(secret).verify(request["body"], request["headers"])


def _rotated(services: Services, tenant: str, now: datetime, created: timedelta, rotated: timedelta) -> tuple[str, str]:
    """The tenant's first signing secret, made `created` ago, and the one a rotation `rotated` ago made."""
    old = tenant_secrets.signing_secret(_scope(services, tenant, now - created))
    return old, tenant_secrets.rotate_signing_secret(_scope(services, tenant, now - rotated))


def _one_run_sent(services: Services, tenant: str, now: datetime, target: Target) -> dict[str, Any]:
    """A new job's run at `now`, succeeded: the request the target received."""
    job_id = _job(services, tenant, now, target)
    assert _run(services, job_id, FakeClock(now)) == ["succeeded"]
    return target.requests[-1]


def _signed_by(sent: dict[str, Any], valid: list[str], invalid: tuple[str, ...] = ()) -> None:
    """The request carries one signature per `valid` secret, each verifies, and none of `invalid` does."""
    assert len(sent["headers"]["webhook-signature"].split(" ")) == len(valid)
    for secret in valid:
        Webhook(secret).verify(sent["body"], sent["headers"])
    for secret in invalid:
        with pytest.raises(WebhookVerificationError):
            Webhook(secret).verify(sent["body"], sent["headers"])


def test_after_a_rotation_both_secrets_verify_and_a_second_rotation_drops_the_oldest(
    services: Services, target: Target, tenant: str, now: datetime,
) -> None:
    old, new = _rotated(services, tenant, now, timedelta(days=2), timedelta(hours=1))
    _signed_by(_one_run_sent(services, tenant, now, target), [old, new])

    newest = tenant_secrets.rotate_signing_secret(_scope(services, tenant, now - timedelta(minutes=30)))
    # `new` signs for 24 h more; `old`, retired by the first rotation, stops: at most two signatures.
    _signed_by(_one_run_sent(services, tenant, now, target), [newest, new], invalid=(old,))


def test_a_secret_rotated_out_more_than_a_day_ago_no_longer_signs(
    services: Services, target: Target, tenant: str, now: datetime,
) -> None:
    old, new = _rotated(services, tenant, now, timedelta(days=3), timedelta(hours=25))
    _signed_by(_one_run_sent(services, tenant, now, target), [new], invalid=(old,))


def test_a_stale_request_fails_verification(services: Services, target: Target, tenant: str, now: datetime) -> None:
    job_id = _job(services, tenant, now - timedelta(minutes=10), target)
    assert _run(services, job_id, FakeClock(now - timedelta(minutes=10))) == ["succeeded"]
    sent = target.requests[-1]
    with pytest.raises(WebhookVerificationError, match="too old"):
        Webhook(tenant_secrets.signing_secret(_scope(services, tenant, now))).verify(sent["body"], sent["headers"])


def test_a_first_attempt_sent_late_is_signed_when_sent_and_verifies(
    services: Services, target: Target, tenant: str, now: datetime,
) -> None:
    # Dispatched at its second, run ten minutes later (a backlog): past the receivers' 5-minute tolerance.
    planned = now - timedelta(minutes=10)
    job_id = _job(services, tenant, planned, target)
    Poller(services).tick(to_ms(planned))
    dispatches: list[Dispatch] = list(services.invoker.dispatches)  # type: ignore[union-attr]
    assert executor_at(services, FakeClock(now)).run(dispatches) == ["succeeded"]
    sent = target.requests[-1]
    assert sent["headers"]["Tickwork-Scheduled-For"] == rfc3339(planned)
    assert sent["headers"]["webhook-timestamp"] == str(int(now.timestamp()))
    Webhook(tenant_secrets.signing_secret(_scope(services, tenant, now))).verify(sent["body"], sent["headers"])


def test_plain_header_values_of_older_rows_are_still_sent(
    services: Services, target: Target, tenant: str, now: datetime,
) -> None:
    job_id = insert_job(services, schedule="0 0 1 1 *", next_run_at=now, tenant_id=tenant, url=target.url + "/h",
                        headers={"Authorization": "Bearer plain-from-before"})
    assert _run(services, job_id, FakeClock(now)) == ["succeeded"]
    assert target.requests[0]["headers"]["Authorization"] == "Bearer plain-from-before"


def test_reencrypting_everything_moves_values_to_a_new_key_and_runs_still_send_them(
    services: Services, target: Target, tenant: str, now: datetime,
) -> None:
    scope = _scope(services, tenant, now)
    tenant_secrets.put_secret(scope, "TOKEN", TOKEN)
    secret = tenant_secrets.signing_secret(scope)
    job_id = _job(services, tenant, now, target, headers={"Authorization": "Bearer ${secrets.TOKEN}",
                                                         "X-Api-Key": API_KEY})
    result = handle_admin(services, {"admin": "rotate-encryption-key"})
    assert result == {"key_version": 2, "secrets": 1, "signing_secrets": 1, "jobs": 1,
                      "remaining": {"secrets": 0, "signing_secrets": 0, "jobs": 0}}
    with services.db.connection() as conn:
        sealed = [r[0] for r in conn.execute("SELECT sealed FROM secrets UNION ALL SELECT sealed FROM signing_secrets")]
        headers = conn.execute("SELECT request FROM jobs WHERE id = %s", (job_id,)).fetchone()[0]["headers"]
    assert all(s.startswith("v2:") for s in sealed)
    assert headers["X-Api-Key"].startswith(vault.SEALED_MARK + "v2:")
    assert _run(services, job_id, FakeClock(now)) == ["succeeded"]
    sent = target.requests[0]
    assert (sent["headers"]["Authorization"], sent["headers"]["X-Api-Key"]) == (f"Bearer {TOKEN}", API_KEY)
    Webhook(secret).verify(sent["body"], sent["headers"])


def _postgres_dump(services: Services) -> str:
    """Every row of every table of the test schema, as JSON text."""
    with services.db.connection() as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")]
        return "\n".join(row[0] for table in tables
                         for row in conn.execute(f'SELECT row_to_json(t)::text FROM "{table}" t'))


def _redis_dump(services: Services) -> str:
    """Every key of the test namespace with its value, whatever its type."""
    redis = services.redis
    out = []
    for key in redis.scan_iter(match="{" + services.settings.namespace + "}:*"):
        kind = redis.type(key)
        value: Any = {"string": redis.get, "hash": redis.hgetall, "list": lambda k: redis.lrange(k, 0, -1),
                      "set": redis.smembers, "zset": lambda k: redis.zrange(k, 0, -1, withscores=True),
                      "stream": lambda k: redis.xrange(k)}[kind](key)
        out.append(f"{key} {value}")
    assert out, "the namespace holds the due index"
    return "\n".join(out)
