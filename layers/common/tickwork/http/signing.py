"""Standard Webhooks signatures (https://www.standardwebhooks.com): pure, no I/O.

`webhook-signature` is `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">` per signing secret, keyed
with the base64-decoded part after `whsec_`; during a rotation's overlap there are two, space-separated.

A key that may write jobs gets any body it chooses signed and sent where it chooses, so what is signed names
the job: `webhook-id` is `<job id>:<run id>` (`message_id`), the same on every attempt and replay of the run,
and a receiver checks that the job is one it expects. The spec asks that the id hold no `.`, the separator of
what is signed: ids are UUIDs.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32
# Receivers refuse a webhook-timestamp more than 5 minutes from their clock (the official libraries'
# tolerance). A planned instant older than this, with room left for the receivers' clock skew, is not
# what the request is signed with: it would fail their check, and a 4xx is not retried.
STALE_AFTER_SECONDS = 60


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def secret_key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


def webhook_timestamp(planned: datetime, now: float) -> int:
    """An attempt's webhook-timestamp: its planned instant's second, or `now`'s (the attempt is made ready
    at most seconds before it is sent) once the planned instant is stale (a run sent late: a catch-up, a
    backlog)."""
    at = planned.timestamp()
    return int(now if now - at > STALE_AFTER_SECONDS else at)


def message_id(job_id: str, run_id: str) -> str:
    """A run's webhook-id: its job's id and its own."""
    return f"{job_id}:{run_id}"


@dataclass(frozen=True)
class Signing:
    """What signs one attempt: the message id (`message_id`), its timestamp (seconds) and the keys."""

    message_id: str
    timestamp: int
    keys: tuple[bytes, ...]

    def headers(self, body: bytes | None) -> dict[str, str]:
        signed = b"%s.%d.%s" % (self.message_id.encode(), self.timestamp, body or b"")
        signatures = " ".join(
            "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode() for key in self.keys
        )
        return {"webhook-id": self.message_id, "webhook-timestamp": str(self.timestamp),
                "webhook-signature": signatures}
