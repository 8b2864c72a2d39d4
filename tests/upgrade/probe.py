"""Run by another release's interpreter (tests/upgrade/test_payloads.py): what that release makes of, and
makes for, what crosses between releases. A request on stdin, the answer on stdout, both JSON. Only the
functions every release since the baseline has are used; it imports nothing from this tree but itself.

  {"parse_events": [event, ...]}              -> each executor event as that release's dispatches read it
  {"make_events": [[dispatch fields], ...]}   -> that release's executor event for those dispatches
  {"members": {"job": id, "run": [id, n], "notification": [id, n], "completion": [id, n]}} -> its members
  {"next_slots": {"specs": [spec, ...], "after_ms": t, "count": n}} -> each encoded index spec's next slots
  {"make_specs": [schedule args, ...]}         -> its encoded index spec for each schedule
"""
from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from typing import Any


def parse_events(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    from tickwork.models import dispatches_from_event

    return [[d.to_dict() for d in dispatches_from_event(event)] for event in events]


def make_events(dispatches: list[dict[str, Any]]) -> dict[str, Any]:
    from tickwork.models import Dispatch, executor_event

    return executor_event([Dispatch.from_dict(raw) for raw in dispatches])


def members(ids: dict[str, Any]) -> dict[str, str]:
    from tickwork.dueindex import entries

    return {"job": entries.job_member(ids["job"]), "run": entries.execution_member(*ids["run"]),
            "notification": entries.notification_member(*ids["notification"]),
            "completion": entries.completion_member(*ids["completion"])}


def next_slots(request: dict[str, Any]) -> list[list[int | None]]:
    from tickwork.schedule.specs import schedule_of

    found = []
    for encoded in request["specs"]:
        schedule, cursor, slots = schedule_of(json.loads(encoded)), request["after_ms"], []
        for _ in range(request["count"]):
            cursor = schedule.next_after_ms(cursor)
            slots.append(cursor)
            if cursor is None:
                break
        found.append(slots)
    return found


def make_specs(schedules: list[dict[str, Any]]) -> list[str]:
    from tickwork.dueindex.entries import encode_spec
    from tickwork.schedule.engine import parse_schedule
    from tickwork.schedule.specs import index_spec

    def at(raw: str | None) -> datetime | None:
        return None if raw is None else datetime.fromisoformat(raw).astimezone(timezone.utc)

    return [encode_spec(index_spec(parse_schedule(s["schedule"], s["timezone"], anchor=at(s["anchor"]),
                                                  start_at=at(s["start_at"]), end_at=at(s["end_at"]),
                                                  hash_key=s["id"], spread_seconds=s["spread_seconds"]),
                                   s["version"], s["catchup_window_seconds"], s["catchup"], s["tenant_id"]))
            for s in schedules]


def main() -> None:
    request = json.load(sys.stdin)
    handlers = {"parse_events": parse_events, "make_events": make_events, "members": members,
                "next_slots": next_slots, "make_specs": make_specs}
    json.dump({name: handlers[name](value) for name, value in request.items()}, sys.stdout)


if __name__ == "__main__":
    main()
