"""What arrived, against what was due: delivered, dropped, duplicated, and how late.

Two lags per run. The send lag (what the issue asks for) runs from the scheduled time to the moment the
executor sends the request: Tickwork stores that moment as attempts.started_at (taken right before
delivery's prepare, fire, complete), the baseline in its own runs table. The arrival lag runs to the moment the target read
the request, which adds the loopback hop and the target's own queueing.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from bench.harness import lag_summary, parse_when
from bench.target import Arrival


@dataclass
class Deliveries:
    expected: int
    delivered: int  # distinct (job, slot) pairs that reached the target
    duplicates: int  # arrivals beyond the first of a (job, slot)
    dropped: int  # expected pairs that never arrived
    arrival_lag_ms: dict[str, Any]
    send_lag_ms: dict[str, Any]
    first_arrival: float | None
    last_arrival: float | None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def summarize(
    arrivals: Iterable[Arrival], job_ids: set[str], window: tuple[float, float], per_job: int,
    send_lags_ms: Sequence[float],
) -> Deliveries:
    """Arrivals of `job_ids` for slots in [window[0], window[1]] (epoch seconds), `per_job` slots each."""
    seen: Counter[tuple[str, float]] = Counter()
    lags: list[float] = []
    times: list[float] = []
    for arrival in arrivals:
        if arrival.job_id not in job_ids:
            continue
        slot = parse_when(arrival.scheduled_for)
        if not window[0] - 1e-3 <= slot <= window[1] + 1e-3:
            continue
        seen[(arrival.job_id, round(slot, 3))] += 1
        lags.append((arrival.at - slot) * 1000)
        times.append(arrival.at)
    expected = len(job_ids) * per_job
    delivered = len(seen)
    return Deliveries(
        expected=expected, delivered=delivered, duplicates=sum(seen.values()) - delivered,
        dropped=max(0, expected - delivered), arrival_lag_ms=lag_summary(lags), send_lag_ms=lag_summary(send_lags_ms),
        first_arrival=min(times) if times else None, last_arrival=max(times) if times else None,
    )


_TICKWORK_SEND_LAGS = """
SELECT extract(epoch FROM a.started_at - e.scheduled_for) * 1000
  FROM executions e
  JOIN jobs j ON j.id = e.job_id
  JOIN attempts a ON a.execution_id = e.id AND a.number = 1
 WHERE j.name LIKE %(prefix)s AND e.scheduled_for BETWEEN to_timestamp(%(lo)s) AND to_timestamp(%(hi)s)
"""

# A `missed` row stands for missed_count slots from its scheduled_for on (the catch-up policy records a
# gap in one row); only those inside the window count. The benchmarks' schedules have at most one slot
# per second in a window, so a gap is clipped to the window's remaining seconds.
_TICKWORK_STATUSES = """
SELECT e.status,
       sum(CASE WHEN e.status = 'missed'
                THEN least(coalesce(e.missed_count, 1),
                           floor(extract(epoch FROM to_timestamp(%(hi)s) - e.scheduled_for))::int + 1)
                ELSE 1 END)
  FROM executions e JOIN jobs j ON j.id = e.job_id
 WHERE j.name LIKE %(prefix)s AND e.scheduled_for BETWEEN to_timestamp(%(lo)s) AND to_timestamp(%(hi)s)
 GROUP BY e.status
"""


def tickwork_send_lags(conn: Any, name: str, window: tuple[float, float]) -> list[float]:
    params = {"prefix": f"{name}-%", "lo": window[0], "hi": window[1]}
    return [float(row[0]) for row in conn.execute(_TICKWORK_SEND_LAGS, params)]


def tickwork_statuses(conn: Any, name: str, window: tuple[float, float]) -> dict[str, int]:
    """Slots per execution status, a `missed` row counted as the slots it stands for."""
    params = {"prefix": f"{name}-%", "lo": window[0], "hi": window[1]}
    return {row[0]: int(row[1]) for row in conn.execute(_TICKWORK_STATUSES, params)}
