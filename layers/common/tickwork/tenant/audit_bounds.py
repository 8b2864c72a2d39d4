"""What an audit entry keeps of its changes (tickwork.tenant.audit): each value as the API shows it, a long one
as its digest, and the whole within ENTRY_BYTES, so that no request can make an entry large. Pure: no I/O.

A digest stands for a value: `{"size": n, "sha256": hex}` of its UTF-8 text (a string) or of its compact JSON
(anything else, keys sorted); the change lists the sides kept so in `digested`. A reader can tell that a value
changed, and check one they hold against it. Values arrive masked (a sensitive header's is REDACTED, three
characters), so a digest is never of a sealed value.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Sequence

from tickwork.store.storage import json_bytes

# A value whose JSON is longer is kept as its digest (~90 bytes): a URL, a header, a schedule or a short body
# stay readable, a long body does not fill the log.
VALUE_BYTES = 512
# An entry's changes past this: the largest values left are digested too, then the last changes left out
# (counted in `omitted`). 16 KiB holds every field of a job with its values digested but its 50 headers' names.
ENTRY_BYTES = 16_384
SIDES = ("before", "after")


@dataclass(frozen=True)
class Bounded:
    changes: list[dict[str, Any]]
    omitted: int  # changes left out at ENTRY_BYTES, the last ones


def digest(value: Any) -> dict[str, Any]:
    data = value.encode() if isinstance(value, str) else json.dumps(
        value, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def bound(changes: Sequence[dict[str, Any]]) -> Bounded:
    """`changes` ({"field", "before", "after"} each) as an entry keeps them."""
    kept = [_digested(change, [side for side in SIDES if json_bytes(change[side]) > VALUE_BYTES])
            for change in changes]
    if _size(kept) > ENTRY_BYTES:
        _digest_largest(kept)
    omitted = 0
    while len(kept) > 1 and _size(kept) > ENTRY_BYTES:
        kept.pop()
        omitted += 1
    return Bounded(kept, omitted)


def _digested(change: dict[str, Any], sides: Sequence[str]) -> dict[str, Any]:
    """`change` with these sides (those not null nor digested already) kept as digests."""
    done = change.get("digested", [])
    kept = {**change, **{side: digest(change[side]) for side in sides
                         if change[side] is not None and side not in done}}
    digested = [side for side in SIDES if side in done or (side in sides and change[side] is not None)]
    if digested:
        kept["digested"] = digested
    return kept


def _digest_largest(changes: list[dict[str, Any]]) -> None:
    """Digest the values left, largest first, until the changes fit (or none left is worth a digest)."""
    sides = sorted(((json_bytes(c[side]), i, side) for i, c in enumerate(changes) for side in SIDES
                    if side not in c.get("digested", ()) and c[side] is not None), reverse=True)
    for size, i, side in sides:
        if size <= _DIGEST_BYTES or _size(changes) <= ENTRY_BYTES:
            return
        changes[i] = _digested(changes[i], [side])


def _size(changes: list[dict[str, Any]]) -> int:
    return json_bytes(changes)


_DIGEST_BYTES = json_bytes(digest(""))
