"""A request parses its job's schedule once: the create's check, its quota, its calendars, its index entry and
the view all use that one parse (tickwork.schedule.specs.job_schedule), and so do a PATCH's and a PUT's."""
from __future__ import annotations

from typing import Any, Callable

import pytest

from tests.integration.api_client import Api, job_body
from tickwork.schedule import engine


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The schedule texts parsed (every parse reads its text into its canonical form first)."""
    seen: list[str] = []
    canonical: Callable[[str], str] = engine.schedule_text.canonical

    def counted(expression: str) -> str:
        seen.append(expression)
        return canonical(expression)

    monkeypatch.setattr(engine.schedule_text, "canonical", counted)
    return seen


def _created(api: Api, **fields: Any) -> dict[str, Any]:
    reply = api.call("POST", "/jobs", job_body(**fields))
    assert reply.status == 201, reply.body
    return reply.body


@pytest.mark.parametrize("schedule", ["every weekday at 17:00", "H */5 * * * *", "rate(90 seconds)"])
def test_a_create_parses_its_schedule_once(api: Api, parses: list[str], schedule: str) -> None:
    _created(api, schedule=schedule)  # the tenant's quota has counted this schedule's runs a minute (cached)
    parses.clear()
    created = _created(api, schedule=schedule, spread_seconds=3)
    assert parses == [schedule] and created["next_fire_times"]


def test_an_update_parses_its_new_schedule_once_and_a_read_not_again(api: Api, parses: list[str]) -> None:
    _created(api, schedule="*/20 * * * * *")  # the quota's count of the new schedule (cached)
    job = _created(api, schedule="*/10 * * * * *")
    parses.clear()
    assert api.call("PATCH", f"/jobs/{job['id']}", {"schedule": "*/20 * * * * *"}).status == 200
    assert parses == ["*/20 * * * * *"]
    assert api.call("GET", f"/jobs/{job['id']}").status == 200
    assert parses == ["*/20 * * * * *"]
