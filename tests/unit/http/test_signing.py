"""Standard Webhooks signatures, checked with the official `standardwebhooks` verifier as a receiver would.

The verifier judges a timestamp against its clock (5 minutes of tolerance): its clock is pinned to NOW, the
one clock of every test here, so none reads the wall clock."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import standardwebhooks.webhooks
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from tickwork.http.signing import (
    SECRET_PREFIX,
    STALE_AFTER_SECONDS,
    Signing,
    message_id,
    new_secret,
    secret_key,
    webhook_timestamp,
)


NOW = datetime(2026, 3, 29, 1, 0, 0, tzinfo=timezone.utc)
NOW_S = int(NOW.timestamp())


class _PinnedDatetime(datetime):
    @classmethod
    def now(cls, tz: Any = None) -> Any:
        return NOW if tz is None else NOW.astimezone(tz)


@pytest.fixture(autouse=True)
def verifier_at_now(monkeypatch: pytest.MonkeyPatch) -> None:
    """The verifier module reads `datetime.now`: it reads NOW instead."""
    monkeypatch.setattr(standardwebhooks.webhooks, "datetime", _PinnedDatetime)


def test_a_new_secret_is_whsec_and_base64_of_32_random_bytes() -> None:
    secret = new_secret()
    assert secret.startswith(SECRET_PREFIX) and len(secret_key(secret)) == 32
    assert new_secret() != secret


def test_the_signature_verifies_and_a_tampered_body_does_not() -> None:
    secret = new_secret()
    headers = Signing("run-1", NOW_S, (secret_key(secret),)).headers(b'{"a":1}')
    assert headers["webhook-id"] == "run-1" and headers["webhook-timestamp"] == str(NOW_S)
    assert Webhook(secret).verify(b'{"a":1}', headers) == {"a": 1}
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(b'{"a":2}', headers)


def test_an_empty_body_is_signed_as_empty() -> None:
    secret = new_secret()
    headers = Signing("run-2", NOW_S, (secret_key(secret),)).headers(None)
    Webhook(secret).verify(b"", headers, json_parse=False)


def test_two_keys_give_two_signatures_each_verifying_alone() -> None:
    old, new = new_secret(), new_secret()
    headers = Signing("run-3", NOW_S, (secret_key(new), secret_key(old))).headers(b"{}")
    assert len(headers["webhook-signature"].split(" ")) == 2
    Webhook(old).verify(b"{}", headers)
    Webhook(new).verify(b"{}", headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(b"{}", headers)


def test_a_stale_timestamp_fails() -> None:
    secret = new_secret()
    headers = Signing("run-4", NOW_S - 600, (secret_key(secret),)).headers(b"{}")
    with pytest.raises(WebhookVerificationError, match="too old"):
        Webhook(secret).verify(b"{}", headers)


def test_an_attempt_sent_on_time_keeps_its_planned_second() -> None:
    planned = NOW - timedelta(seconds=1)
    for late in (0.0, 0.999, 30.0, STALE_AFTER_SECONDS):
        assert webhook_timestamp(planned, planned.timestamp() + late) == int(planned.timestamp())
    assert webhook_timestamp(planned, planned.timestamp() - 10) == int(planned.timestamp())  # made ready ahead


def test_an_attempt_sent_late_is_signed_with_its_send_time_and_verifies() -> None:
    secret = new_secret()
    planned = NOW - timedelta(minutes=10)
    stamp = webhook_timestamp(planned, NOW.timestamp())
    assert stamp == NOW_S
    Webhook(secret).verify(b"{}", Signing("run-5", stamp, (secret_key(secret),)).headers(b"{}"))


def test_the_message_id_names_the_job_and_the_run_and_holds_no_dot() -> None:
    """Standard Webhooks signs `{id}.{timestamp}.{body}`: an id with a `.` could shift where the body begins."""
    job_id, run_id = "0868a564-6c94-44a9-a42f-e7c0634b2ab6", "82e71150-837a-4ed8-9eaa-32f1f7c94e6d"
    assert message_id(job_id, run_id) == f"{job_id}:{run_id}" and "." not in message_id(job_id, run_id)
    secret = new_secret()
    headers = Signing(message_id(job_id, run_id), NOW_S, (secret_key(secret),)).headers(b"{}")
    assert headers["webhook-id"] == f"{job_id}:{run_id}"
    Webhook(secret).verify(b"{}", headers)
