"""What the CLI prints for people: tables, times in a zone, the plan; and which runs a tail reports."""
from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from tickwork_cli import tables
from tickwork_cli.errors import CliError
from tickwork_cli.follow import Follower
from tickwork_cli.output import plan_json, plan_text
from tickwork_cli.plan import Change, Plan, Step
from tickwork_cli.times import show, since_value

NOW = datetime(2026, 3, 29, 12, 0, tzinfo=timezone.utc)


def test_a_table_pads_each_column_to_its_widest_cell_and_shows_none_as_a_dash() -> None:
    text = tables.render(("KEY", "STATUS"), [("nightly-report", "active"), (None, "paused")])

    assert text.splitlines() == ["KEY             STATUS", "nightly-report  active", "-               paused"]


def test_a_long_or_multiline_cell_is_cut_to_one_line() -> None:
    cell = tables.cell("line one\nline two " + "x" * 100)

    assert "\n" not in cell and len(cell) == tables.MAX_CELL and cell.endswith("…")


def test_fields_align_names_and_keep_a_multiline_value_in_its_column() -> None:
    text = tables.fields([("id", "j1"), ("next runs", "a\nb"), ("key", None)])

    assert text.splitlines() == ["id:        j1", "next runs: a", "           b", "key:       -"]


@pytest.mark.parametrize(("instant", "zone", "shown"), [
    ("2026-03-29T00:30:00.000Z", timezone.utc, "2026-03-29 00:30:00 UTC"),
    ("2026-03-29T00:30:00.000Z", ZoneInfo("Europe/Paris"), "2026-03-29 01:30:00+01:00"),  # before the DST change
    ("2026-03-29T01:30:00.000Z", ZoneInfo("Europe/Paris"), "2026-03-29 03:30:00+02:00"),  # after it
    ("2026-03-29T01:30:00.000Z", ZoneInfo("America/New_York"), "2026-03-28 21:30:00-04:00"),
    (None, timezone.utc, "-"),
])
def test_api_times_are_shown_in_the_chosen_zone(instant: str | None, zone: timezone, shown: str) -> None:
    assert show(instant, zone) == shown


@pytest.mark.parametrize(("given", "sent"), [
    ("30m", "2026-03-29T11:30:00.000Z"),
    ("2h", "2026-03-29T10:00:00.000Z"),
    ("7d", "2026-03-22T12:00:00.000Z"),
    ("2026-03-01T10:00:00+02:00", "2026-03-01T08:00:00.000Z"),
    ("2026-03-01T10:00:00Z", "2026-03-01T10:00:00.000Z"),
])
def test_since_takes_an_age_or_a_time_with_an_offset(given: str, sent: str) -> None:
    assert since_value(given, NOW) == sent


@pytest.mark.parametrize(("given", "message"), [("yesterday", "neither a time"), ("2026-03-01T10:00:00", "offset")])
def test_since_refuses_what_it_cannot_read(given: str, message: str) -> None:
    with pytest.raises(CliError, match=message):
        since_value(given, NOW)


def plan_with_every_action() -> Plan:
    return Plan("examples/jobs.yaml", [
        Step("new-job", "create", None),
        Step("report", "update", "j1", (Change("schedule", "0 0 2 * * *", "0 30 2 * * *"),
                                        Change("request.headers.Authorization", "***", "***"),
                                        Change("request.headers.X-Api-Key", "***", "***", compared=False),
                                        Change("tags", ["a"], ["a", "b"]))),
        Step("same", "unchanged", "j2"),
        Step("old-job", "delete", "j3", name="Old job"),
    ])


def test_the_plan_text_shows_each_job_and_each_changed_field_old_to_new() -> None:
    assert plan_text(plan_with_every_action()).splitlines() == [
        "Jobs of source examples/jobs.yaml:",
        "  + create    new-job",
        "  ~ update    report",
        '      schedule: "0 0 2 * * *" → "0 30 2 * * *"',
        "      request.headers.Authorization: *** → ***",
        "      request.headers.X-Api-Key: *** → ***  (sealed: not compared, the key lacks jobs:write)",
        '      tags: ["a"] → ["a", "b"]',
        "  = unchanged same",
        "  - delete    old-job  (Old job)",
        "Plan: 1 to create, 1 to update, 1 to delete, 1 unchanged.",
    ]


def test_the_plan_json_counts_the_actions_and_says_whether_anything_changes() -> None:
    data = plan_json(plan_with_every_action())

    assert data["summary"] == {"create": 1, "update": 1, "delete": 1, "unchanged": 1}
    assert data["changed"] is True
    assert [(j["key"], j["action"]) for j in data["jobs"]] == [
        ("new-job", "create"), ("report", "update"), ("same", "unchanged"), ("old-job", "delete")]
    assert data["jobs"][1]["changes"][0] == {"field": "schedule", "old": "0 0 2 * * *", "new": "0 30 2 * * *"}
    assert data["jobs"][1]["changes"][2] == {"field": "request.headers.X-Api-Key", "old": "***", "new": "***",
                                             "compared": False}


def test_a_plan_without_changes_says_so() -> None:
    plan = Plan("s", [Step("same", "unchanged", "j2")])

    assert not plan.has_changes
    assert plan_text(plan).splitlines()[-1] == "No changes: the jobs match the file."


def run(run_id: str, status: str, finished_at: str | None = None) -> dict[str, object]:
    return {"id": run_id, "status": status, "finished_at": finished_at}


def test_a_tail_reports_each_run_once_when_it_ends_and_not_the_runs_ended_before_it_started() -> None:
    follower = Follower()
    follower.start([run("old", "succeeded", "t0"), run("r1", "running")])

    first = follower.ended([run("r2", "failed", "t2"), run("r1", "succeeded", "t1"), run("old", "succeeded", "t0"),
                            run("r3", "queued")])
    second = follower.ended([run("r3", "skipped", "t3"), run("r2", "failed", "t2"), run("r1", "succeeded", "t1")])

    assert [r["id"] for r in first] == ["r1", "r2"]  # in the order they ended
    assert [r["id"] for r in second] == ["r3"]
