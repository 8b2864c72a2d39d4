"""Transactions Postgres may end as a deadlock's victim, tried again.

Postgres breaks a cycle of row locks by aborting one of the transactions in it (`deadlock detected`), after
`deadlock_timeout`; the others go on. The victim's transaction was rolled back whole, so running it again
from the start is safe, and by then the others have usually committed.
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar

from aws_lambda_powertools import Logger
from psycopg import errors

logger = Logger(child=True)

T = TypeVar("T")

# A cycle needs another transaction holding what this one waits for: once or twice in a burst, never for long.
TRIES = 3


def in_transaction(conn: Any, work: Callable[[Any], T], what: str, tries: int = TRIES) -> T:
    """`work(conn)` in a transaction of its own, run again from the start (up to `tries` in all) when Postgres
    chose it as a deadlock's victim; the last deadlock is raised."""
    for left in reversed(range(tries)):
        try:
            with conn.transaction():
                return work(conn)
        except errors.DeadlockDetected:
            if not left:
                raise
            logger.warning("deadlock: the transaction is run again", extra={"work": what, "tries_left": left})
    raise AssertionError("unreachable: tries must be at least 1")
