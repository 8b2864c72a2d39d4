"""The maintenance pass's part for notifications: dispatches the index lost are put back, and attempts
whose executor died are ended (retried like a run's lost attempt)."""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from aws_lambda_powertools import Logger

from tickwork.dueindex.index import DueIndex
from tickwork.notifications.deliver import STATUS_AFTER
from tickwork.rules import notifications as events
from tickwork.rules import retry
from tickwork.settings import Settings
from tickwork.store import notifications as store
from tickwork.timeutil import to_ms

logger = Logger(child=True)


def sweep(conn: Any, index: DueIndex, now: datetime, settings: Settings, limit: int) -> tuple[int, int]:
    """Put back notification dispatches the index lost and end attempts whose executor died; returns
    (re-dispatched, ended)."""
    stale = now - timedelta(seconds=settings.sweep_after_seconds)
    ahead = now + timedelta(milliseconds=settings.lookahead_ms + 1000)
    restored = index.restore_notifications(
        [(i, attempt, to_ms(now if due < stale else due)) for i, attempt, due in
         store.awaiting(conn, stale, ahead, limit)])
    limit_s = events.DELIVERY_TIMEOUT_SECONDS + settings.lost_margin_seconds
    ended = 0
    for notification_id, attempt, _ in store.sending_since(conn, now - timedelta(seconds=limit_s), limit):
        decision = retry.decide(events.DELIVERY_RETRY, attempt, False, True, now)
        error = f"lost: executor did not report within {limit_s:g} s"
        status = STATUS_AFTER[decision.status]
        if store.finish(conn, notification_id, attempt, status, decision.next_attempt_at, None, error):
            ended += 1
            if decision.next_attempt_at is not None:
                index.schedule_notification(notification_id, attempt + 1, to_ms(decision.next_attempt_at))
    if restored or ended:
        logger.warning("swept notifications", extra={"redispatched": restored, "ended": ended})
    return restored, ended
