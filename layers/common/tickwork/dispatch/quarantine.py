"""The quarantine contract: one due-index entry whose handling raises never stops the others.

A tick handles many tenants' entries in batches: it reads the calendars they name (tickwork.dispatch.calendars),
plans them (tickwork.dispatch.planning), restores lost specs, claims, records the won slots in one statement
(tickwork.store.executions.record_claims) and admits the runs within their tenants' budgets
(tickwork.dispatch.budget). For every kind of entry this release knows (a job `j:`; a one-shot `e:`, which is a
retry, a manual run or a run held back; a notification `n:`; a completion check `c:`):

1. **Isolated.** An entry whose handling raises is set aside, and the rest of its batch is planned, claimed,
   recorded, admitted and dispatched in the same tick. Where one statement or script serves a whole batch (the
   calendars' read, the record, the admission, the specs' restore), a call that raises is split in halves
   until the items that fail on their own are found (`isolated`), and the others are written. A failure of
   the infrastructure itself (a lost connection, a timeout: SYSTEMIC) is nobody's entry: it fails the tick as
   before, and the next tick tries again. A calendar that cannot be read fails only the jobs naming it.
2. **Kept, moved out of reach.** The entry stays in the due set (principle 2: never taken out to be put back)
   and is re-scored to now + a backoff that doubles with each failure in a row (5 s to 1 h:
   tickwork.rules.quarantine), with the compare-and-set a claim uses: a claim or an API write that moved it
   meanwhile wins. A one-shot claimed away before it failed (its record or admission raised) is put back,
   unless something put it back already.
3. **Counted.** A job's failures in a row, reason, start and retry time are kept in Postgres (migration 0020),
   so a rebuild of the index from Postgres puts the job at its retry time, not back in the claimable range;
   other entries' failures are counted in their shard's failures hash.
4. **Shown.** One JSON log line per entry (member, job_id, tenant_id, reason, failures, retry_at); the
   QuarantinedEntries metric (its alarm goes to the operator topic); a job in quarantine shows
   `status: errored`, `error_reason` and `errored_at` in the API and the console (its stored status stays
   `active`). A reason is the step and the exception's type, never its message, which may quote what a tenant
   wrote.
5. **Released** by the entry's next successful handling (its slot recorded, or its claim won), by any change
   to the job through the API (PATCH, PUT, PUT by key, pause, resume), by a change to a calendar it names, or
   by the operator's `release-quarantine` action (tickwork.tenant.operator): the error is cleared and an active job
   goes back to its first slot from now.
6. **Unknown kinds are left alone.** A member of a kind this release does not know belongs to a newer release
   (tickwork.dueindex.entries): it is not claimed, not moved, not quarantined, and fetches go past it.
7. **Free while nothing fails.** No Redis or Postgres round trip is added to a tick in which nothing raised.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Iterable, Sequence, TypeVar

import psycopg
import redis
from aws_lambda_powertools import Logger

from tickwork.dueindex.entries import JOB_PREFIX, SetAside, Setting
from tickwork.dueindex.index import DueIndex
from tickwork.rules.quarantine import Failure, backoff_steps
from tickwork.store import quarantine as store
from tickwork.timeutil import from_ms, rfc3339

logger = Logger(child=True)

T = TypeVar("T")
R = TypeVar("R")
# The infrastructure failing, not an entry: the tick fails as it always did, and nothing is set aside. A
# failover makes a store refuse writes for a while (a replica being promoted): that too is nobody's entry.
SYSTEMIC: tuple[type[BaseException], ...] = (
    psycopg.OperationalError, psycopg.InterfaceError, psycopg.errors.ReadOnlySqlTransaction,
    redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, redis.exceptions.ReadOnlyError,
)
# Failed calls one bisection may make: k bad items among n cost about k * log2(n / k) of them (8 among 1,000:
# 56). Past it, the items of the parts still failing are set aside together, each to be tried on its own
# when its backoff ends: a bounded cost per tick, and progress however many items fail.
MAX_FAILED_CALLS = 64


@dataclass
class Isolated(Generic[T, R]):
    """What `isolated` got done: the results of the calls that succeeded, and each item that failed."""

    results: list[R] = field(default_factory=list)
    failed: list[tuple[T, Exception]] = field(default_factory=list)
    calls: int = 0


def isolated(items: Sequence[T], work: Callable[[Sequence[T]], R]) -> Isolated[T, R]:
    """`work(items)` in one call; when it raises (not SYSTEMIC), `work` on each half, down to the single items
    that fail on their own. `work` must be safe to repeat on the items of a call that raised."""
    done: Isolated[T, R] = Isolated()
    parts, failures = [list(items)], 0
    while parts:
        part = parts.pop()
        done.calls += 1
        try:
            done.results.append(work(part))
        except SYSTEMIC:
            raise
        except Exception as error:  # noqa: BLE001 - an item's failure, set aside below
            failures += 1
            if len(part) == 1 or failures >= MAX_FAILED_CALLS:
                done.failed += [(item, error) for item in part]
            else:
                parts += [part[len(part) // 2:], part[:len(part) // 2]]
    return done


class Quarantine:
    """Sets aside the entries whose handling raised (see the module docstring); shared by a tick's threads."""

    def __init__(self, db: Any, index: DueIndex) -> None:
        self.db = db  # psycopg_pool.ConnectionPool
        self.index = index
        self.steps = backoff_steps()

    def set_aside(self, failures: Sequence[Failure], now_ms: int) -> int:
        """Quarantine each entry: its job marked in Postgres (a job's), then its member moved out of the
        claimable range; one log line each. Returns how many."""
        if not failures:
            return 0
        counted = self._mark_jobs(failures, now_ms)
        settings = [Setting(f.member, f.score, counted.get(f.member, (None, None))[0]) for f in failures]
        placed = self.index.set_aside(settings, now_ms, self.steps)
        for failure, aside in zip(failures, placed):
            _log(failure, aside, counted.get(failure.member, (None, None))[1])
        return len(failures)

    def _mark_jobs(self, failures: Iterable[Failure], now_ms: int) -> dict[str, tuple[int, str]]:
        """The jobs' error state written (Postgres, the truth); by member, each job's failures and tenant."""
        reasons = {f.job_id: f.reason for f in failures
                   if f.job_id is not None and f.member.startswith(JOB_PREFIX) and _is_uuid(f.job_id)}
        if not reasons:
            return {}
        with self.db.connection() as conn:
            marked = store.set_aside(conn, reasons, from_ms(now_ms), self.steps)
        return {JOB_PREFIX + job_id: found for job_id, found in marked.items()}


def _log(failure: Failure, aside: SetAside, tenant_id: str | None) -> None:
    logger.warning("due-index entry quarantined: its handling raised; the rest of its batch went on", extra={
        "member": failure.member[:100], "job_id": failure.job_id, "tenant_id": failure.tenant_id or tenant_id,
        "reason": failure.reason, "failures": aside.failures, "retry_at": rfc3339(from_ms(aside.retry_ms)),
        "moved": aside.moved})


def _is_uuid(value: Any) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True
