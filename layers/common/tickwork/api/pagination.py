"""Opaque list cursors: a keyset position (sort time, id), tagged with the list it belongs to; and pages bounded
by bytes as well as by count.

Clients must treat a cursor as an opaque string; the encoding may change. It carries no tenant: every query
is scoped by the caller's key anyway, so a cursor copied between tenants only positions, never reveals.

Lambda answers an invocation with at most 6 MB of JSON, the body in it as a string escaped a second time: 200
jobs with 64K bodies are far more (a character JSON escapes takes up to 14 bytes there). So a page stops
early once its items, as they are written in that answer, would pass MAX_PAGE_BYTES (`fitted`); its
next_cursor goes on from the last item it holds. One item is always shown, so a list always moves on; the
largest item of any list (a job: a 64K body and 32 KiB of headers, or an audit entry with two of them) stays
under the limit on its own.
"""
from __future__ import annotations

import base64
import binascii
import json
import uuid
from datetime import datetime
from typing import Callable, TypeVar

from pydantic import BaseModel

from tickwork.errors import InvalidInputError
from tickwork.models import Key, Page

CURSOR_FIELD = "cursor"
DEFAULT_LIMIT = 50
MAX_LIMIT = 200
# The items of a page, as written in the Lambda response: 1 MiB under its 6 MB for the page's envelope, its
# headers and the escaping of the rest.
MAX_PAGE_BYTES = 5 * 1024 * 1024

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


def fitted(page: Page[T], shown: Callable[[T], M], budget: int = MAX_PAGE_BYTES) -> tuple[list[M], Key | None]:
    """The page's items as shown, the leading ones that fit in `budget` bytes of the Lambda response (at least
    one), and the position the next page starts after (None on the last)."""
    items: list[M] = []
    used = 0
    for row in page.items:
        item = shown(row)
        used += response_bytes(item)
        if items and used > budget:
            break
        items.append(item)
    return items, page.first(len(items)).next_key


def response_bytes(item: BaseModel) -> int:
    """What `item` takes in the Lambda response: its JSON as the resolver writes a body (compact, ASCII), escaped
    again as a string of the response's JSON, and the comma after it."""
    body = json.dumps(item.model_dump(mode="json"), separators=(",", ":"))
    return len(json.dumps(body)) - 1


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
