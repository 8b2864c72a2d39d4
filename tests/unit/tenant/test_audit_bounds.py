"""What an audit entry keeps of its changes: long values as digests, the whole within ENTRY_BYTES."""
from __future__ import annotations

import hashlib
from typing import Any

from tickwork.store.storage import json_bytes
from tickwork.tenant.audit_bounds import ENTRY_BYTES, VALUE_BYTES, bound, digest


def change(field: str, before: Any, after: Any) -> dict[str, Any]:
    return {"field": field, "before": before, "after": after}


def test_a_value_up_to_the_threshold_is_kept_and_a_longer_one_is_digested() -> None:
    at = "x" * (VALUE_BYTES - 2)  # its JSON: the quotes make VALUE_BYTES
    over = at + "y"
    kept = bound([change("request.body", at, over)])
    assert kept.omitted == 0
    assert kept.changes == [{"field": "request.body", "before": at, "digested": ["after"],
                             "after": {"size": len(over), "sha256": hashlib.sha256(over.encode()).hexdigest()}}]


def test_a_string_is_digested_as_its_utf8_text_and_another_value_as_its_sorted_compact_json() -> None:
    assert digest("caf\u00e9") == {"size": 5, "sha256": hashlib.sha256("caf\u00e9".encode()).hexdigest()}
    assert digest({"b": 1, "a": [1, 2]}) == {"size": 17, "sha256": hashlib.sha256(b'{"a":[1,2],"b":1}').hexdigest()}


def test_short_values_and_nulls_are_kept_as_they_are() -> None:
    changes = [change("name", None, "n"), change("status", "active", "paused"), change("tags", ["a"], None)]
    assert bound(changes).changes == changes


def test_many_values_each_under_the_threshold_are_digested_largest_first_until_the_entry_fits() -> None:
    changes = [change(f"request.headers.X-{n}", "a" * 400, "b" * (100 + n)) for n in range(40)]
    kept = bound(changes)
    assert json_bytes(kept.changes) <= ENTRY_BYTES and kept.omitted == 0
    digested = [(c["field"], side) for c in kept.changes for side in c.get("digested", [])]
    assert digested and all(side == "before" for _, side in digested)  # the 400-byte sides go first
    assert all(c["after"] == "b" * (100 + n) for n, c in enumerate(kept.changes))


def test_the_widest_job_change_is_cut_to_the_entry_cap_and_says_how_many_changes_it_left_out() -> None:
    """50 headers of 256-character names and 8 KiB values, changed: digests alone do not fit in 16 KiB."""
    changes = [change(f"request.headers.{'h' * 250}{n:06d}", "v" * 8192, "w" * 8192) for n in range(50)]
    kept = bound(changes)
    assert json_bytes(kept.changes) <= ENTRY_BYTES
    assert kept.omitted > 0 and len(kept.changes) + kept.omitted == 50
    assert [c["field"] for c in kept.changes] == [c["field"] for c in changes[:len(kept.changes)]]
    assert all(c["digested"] == ["before", "after"] for c in kept.changes)
