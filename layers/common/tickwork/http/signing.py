"""Standard Webhooks signatures (https://www.standardwebhooks.com): pure, no I/O.

`webhook-signature` is `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">` per signing secret, keyed
with the base64-decoded part after `whsec_`; during a rotation's overlap there are two, space-separated.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def secret_key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


@dataclass(frozen=True)
class Signing:
    """What signs one attempt: the message id (the run id), its timestamp (seconds) and the keys."""

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
