"""Opaque list cursors: a keyset position (sort time, id), tagged with the list it belongs to.

Clients must treat a cursor as an opaque string; the encoding may change. It carries no tenant: every query
is scoped by the caller's key anyway, so a cursor copied between tenants only positions, never reveals.
"""
from __future__ import annotations

import base64
import binascii
import uuid
from datetime import datetime

from tickwork.errors import InvalidInputError

CURSOR_FIELD = "cursor"
DEFAULT_LIMIT = 50
MAX_LIMIT = 200


def encode_cursor(kind: str, key: tuple[datetime, str] | None) -> str | None:
    if key is None:
        return None
    # Full microseconds: a millisecond-rounded position would skip or repeat rows created in the same ms.
    raw = f"{kind}|{key[0].isoformat()}|{key[1]}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(kind: str, cursor: str | None) -> tuple[datetime, str] | None:
    """The position a cursor from the same kind of list encodes; InvalidInputError(field=cursor) otherwise."""
    if not cursor:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        tag, when, ident = raw.split("|")
        moment = datetime.fromisoformat(when)
        if tag != kind or moment.tzinfo is None:
            raise ValueError(raw)
        return moment, str(uuid.UUID(ident))
    except (ValueError, UnicodeDecodeError, binascii.Error):
        raise InvalidInputError(CURSOR_FIELD, "cursor is not valid for this list") from None
