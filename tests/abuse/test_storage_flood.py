"""Storage one tenant can fill (issue 31, item 3): the hostile tenant PATCHes its job with the largest body a job
takes, each time under a new Idempotency-Key. Every audit entry and stored answer stays within its cap, at its
budget the tenant's own oldest entries go first (never another tenant's, and its writes are never refused), and
the benign job keeps its second meanwhile."""
from __future__ import annotations

import random
import time
import uuid
from datetime import datetime, timezone

import pytest

from tests.abuse.conftest import Arena
from tickwork.tenant import operator
from tickwork.ops.maintenance import run_maintenance
from tickwork.tenant.audit_bounds import ENTRY_BYTES
from tickwork.tenant.idempotency import MAX_ANSWER_BYTES

pytestmark = [pytest.mark.slow, pytest.mark.realtime]

PATCHES = 30
# Under the per-key rate limit (20 a second): the flood is the largest the API lets one key send.
PACE_SECONDS = 0.06


def _wide_body(seed: int) -> str:
    """64K characters of 4 UTF-8 bytes each, in a pinned random order (compression hides nothing)."""
    rng = random.Random(seed)
    return "".join(chr(rng.randrange(0x1F300, 0x1F600)) for _ in range(64 * 1024))


def _largest(arena: Arena, sql: str, tenant_id: str) -> tuple[int, int]:
    assert arena.runtime._services is not None
    with arena.runtime._services.db.connection() as conn:
        count, largest = conn.execute(sql, (tenant_id,)).fetchone()
    return int(count), int(largest or 0)


AUDIT_BYTES = "SELECT count(*), max(octet_length(row_to_json(a)::text)) FROM audit_events a WHERE tenant_id = %s"
ANSWER_BYTES = "SELECT count(*), max(octet_length(body::text)) FROM idempotency_keys WHERE tenant_id = %s"


def test_a_flood_of_the_largest_changes_stays_within_its_caps_and_its_own_budget(arena: Arena) -> None:
    started = time.time()
    create = {"name": "filler", "schedule": "0 0 1 1 *",
              "request": {"method": "POST", "url": arena.target.url + "/filler", "body": _wide_body(0)}}
    idempotency = {"Idempotency-Key": uuid.uuid4().hex}
    status, job = arena.hostile("POST", "/jobs", create, headers=idempotency)
    assert status == 201, job
    # Its answer (over the cap) is kept as the job's id: the retry answers the job, made once.
    status, again = arena.hostile("POST", "/jobs", create, headers=idempotency)
    assert status == 201 and again["id"] == job["id"], again
    for seed in range(1, PATCHES + 1):
        status, answer = arena.hostile("PATCH", f"/jobs/{job['id']}", {"request": {"body": _wide_body(seed)}},
                                       headers={"Idempotency-Key": uuid.uuid4().hex})
        assert status == 200, answer
        time.sleep(PACE_SECONDS)

    entries, largest_entry = _largest(arena, AUDIT_BYTES, arena.hostile_tenant)
    answers, largest_answer = _largest(arena, ANSWER_BYTES, arena.hostile_tenant)
    print(f"\n{entries} audit entries, the largest {largest_entry} bytes; {answers} stored answers, the largest "
          f"{largest_answer} bytes")
    assert entries >= PATCHES + 1 and largest_entry <= ENTRY_BYTES
    assert answers >= 1 and largest_answer <= MAX_ANSWER_BYTES
    arena.assert_benign_on_time(started)

    # At a budget of a tenth of what it holds, the maintenance pass deletes its oldest entries, only its own.
    benign_before = _largest(arena, AUDIT_BYTES, arena.runtime.tenant_id)
    assert arena.runtime._services is not None
    svc = arena.runtime._services
    operator.set_quotas(svc.db, svc.settings, {"tenant": arena.hostile_tenant,
                                            "max_storage_bytes": (entries * largest_entry) // 10})
    run_maintenance(svc, datetime.now(timezone.utc))
    left, _ = _largest(arena, AUDIT_BYTES, arena.hostile_tenant)
    assert left < entries, "the pass deleted none of the tenant's entries past its budget"
    assert _largest(arena, AUDIT_BYTES, arena.runtime.tenant_id) == benign_before
    # A change past the budget is still made, and recorded.
    status, _ = arena.hostile("PATCH", f"/jobs/{job['id']}", {"description": "still writable"})
    assert status == 200
    assert _largest(arena, AUDIT_BYTES, arena.hostile_tenant)[0] == left + 1
    arena.assert_benign_on_time(started)
