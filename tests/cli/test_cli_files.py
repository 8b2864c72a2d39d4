"""Jobs kept in a file, end to end: `tickwork plan` and `tickwork apply` against the local runtime's API."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from tests.cli.conftest import EXAMPLE, Tickwork

SOURCE = "examples/jobs.yaml"
KEYS = ["nightly-report", "cache-warmup", "weekly-cleanup"]


def edited(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> str:
    """A copy of the example file with `edit` applied to its data, as a user editing it would."""
    data = yaml.safe_load(EXAMPLE.read_text())
    edit(data)
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def job_of(data: dict[str, Any], key: str) -> dict[str, Any]:
    return next(job for job in data["jobs"] if job["key"] == key)


def file_with(tmp_path: Path, *jobs: dict[str, Any], source: str = "tests") -> str:
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump({"source": source, "jobs": list(jobs)}))
    return str(path)


def test_apply_creates_the_example_jobs_and_a_second_apply_changes_nothing(tickwork: Tickwork) -> None:
    first = tickwork.json("apply", "-f", str(EXAMPLE), "--yes")

    assert first["summary"] == {"create": 3, "update": 0, "delete": 0, "unchanged": 0}
    assert [(j["key"], j["action"]) for j in first["applied"]] == [(key, "create") for key in KEYS]
    jobs = tickwork.jobs(source=SOURCE)
    assert sorted(jobs) == sorted(KEYS)
    report = jobs["nightly-report"]
    assert (report["name"], report["schedule"], report["timezone"], report["source"]) == (
        "Nightly sales report", "0 30 2 * * *", "Europe/Paris", SOURCE)
    assert report["request"]["headers"] == {"Authorization": "***", "Content-Type": "application/json"}
    assert jobs["cache-warmup"]["schedule"] == "0 15 * * * *"

    second = tickwork.json("apply", "-f", str(EXAMPLE), "--yes")

    assert second["changed"] is False and second["applied"] == []
    assert second["summary"] == {"create": 0, "update": 0, "delete": 0, "unchanged": 3}
    assert {key: (job["version"], job["updated_at"]) for key, job in tickwork.jobs(source=SOURCE).items()} == {
        key: (job["version"], job["updated_at"]) for key, job in jobs.items()}
    assert tickwork("plan", "-f", str(EXAMPLE), "--detailed-exitcode").exit_code == 0


def test_an_edited_file_changes_exactly_the_edited_fields(tickwork: Tickwork, tmp_path: Path) -> None:
    assert tickwork("apply", "-f", str(EXAMPLE), "--yes").exit_code == 0
    before = tickwork.jobs(source=SOURCE)

    def edit(data: dict[str, Any]) -> None:
        job_of(data, "nightly-report")["schedule"] = "every day at 03:15"
        job_of(data, "cache-warmup")["tags"] = ["env:prod", "team=web"]
    path = edited(tmp_path, edit)

    planned = tickwork("plan", "-f", path, "--detailed-exitcode", "--json")
    assert planned.exit_code == 2, planned.output
    applied = tickwork.json("apply", "-f", path, "--yes")

    plan = {job["key"]: (job["action"], job["changes"]) for job in json.loads(planned.stdout)["jobs"]}
    assert plan == {
        "nightly-report": ("update", [{"field": "schedule", "old": "0 30 2 * * *", "new": "0 15 3 * * *"}]),
        "cache-warmup": ("update", [{"field": "tags", "old": ["env:prod"], "new": ["env:prod", "team=web"]}]),
        "weekly-cleanup": ("unchanged", []),
    }
    assert sorted(j["key"] for j in applied["applied"]) == ["cache-warmup", "nightly-report"]
    after = tickwork.jobs(source=SOURCE)
    assert after["nightly-report"]["schedule"] == "0 15 3 * * *"
    assert after["nightly-report"]["version"] == before["nightly-report"]["version"] + 1
    assert after["cache-warmup"]["tags"] == ["env:prod", "team=web"]
    assert after["cache-warmup"]["version"] == before["cache-warmup"]["version"]  # tags are not timing
    assert after["weekly-cleanup"] == before["weekly-cleanup"]
    for key in ("nightly-report", "cache-warmup"):  # everything but the edited field as it was
        changed = {"schedule", "tags", "version", "updated_at", "next_run_at"}
        assert {k: v for k, v in after[key].items() if k not in changed} == {
            k: v for k, v in before[key].items() if k not in changed}
    assert tickwork("plan", "-f", path, "--detailed-exitcode").exit_code == 0


def test_prune_deletes_the_removed_keyed_job_of_the_files_source_and_nothing_else(
        tickwork: Tickwork, tmp_path: Path) -> None:
    assert tickwork("apply", "-f", str(EXAMPLE), "--yes").exit_code == 0
    request = {"url": "https://example.com/other"}
    other = {"name": "other", "schedule": "0 0 0 1 1 *", "request": request}
    assert tickwork.api("PUT", "/jobs/by-key/other-source", {**other, "source": "another-file"})[0] == 201
    status, unkeyed = tickwork.api("POST", "/jobs", {**other, "source": SOURCE})
    assert status == 201, unkeyed
    assert tickwork.api("POST", "/jobs", other)[0] == 201
    path = edited(tmp_path, lambda data: data["jobs"].pop(KEYS.index("weekly-cleanup")))

    without_prune = tickwork.json("plan", "-f", path)
    pruned_plan = tickwork.json("plan", "-f", path, "--prune")
    result = tickwork.json("apply", "-f", path, "--prune", "--yes")

    assert without_prune["changed"] is False
    assert [(j["key"], j["action"]) for j in pruned_plan["jobs"] if j["action"] != "unchanged"] == [
        ("weekly-cleanup", "delete")]
    assert [(j["key"], j["action"]) for j in result["applied"]] == [("weekly-cleanup", "delete")]
    assert tickwork.api("GET", "/jobs/by-key/weekly-cleanup")[0] == 404
    remaining = tickwork.jobs()
    assert {"nightly-report", "cache-warmup", "other-source", unkeyed["id"]} < set(remaining)
    assert len(remaining) == 5
    assert tickwork.json("apply", "-f", path, "--prune", "--yes")["changed"] is False


def test_apply_asks_first_and_a_no_changes_nothing(tickwork: Tickwork) -> None:
    refused = tickwork("apply", "-f", str(EXAMPLE), input="n\n")

    assert refused.exit_code == 1
    assert "Plan: 3 to create, 0 to update, 0 to delete, 0 unchanged." in refused.output
    assert tickwork.jobs() == {}

    accepted = tickwork("apply", "-f", str(EXAMPLE), input="y\n")

    assert accepted.exit_code == 0, accepted.output
    assert "Applied: 3 changes." in accepted.output
    assert sorted(tickwork.jobs()) == sorted(KEYS)


def test_plan_detailed_exitcode_is_2_with_changes(tickwork: Tickwork) -> None:
    result = tickwork("plan", "-f", str(EXAMPLE), "--detailed-exitcode")

    assert result.exit_code == 2, result.output
    assert "  + create    nightly-report" in result.stdout
    assert tickwork.jobs() == {}  # a plan writes nothing


def test_the_servers_400s_are_shown_naming_each_jobs_key_and_field(tickwork: Tickwork, tmp_path: Path) -> None:
    path = file_with(tmp_path,
                     {"key": "ok", "name": "ok", "schedule": "rate(1 hour)", "request": {"url": "https://example.com/"}},
                     {"key": "moon", "name": "moon", "schedule": "every blue moon", "request": {"url": "https://example.com/"}},
                     {"key": "typo", "name": "typo", "schedule": "rate(1 hour)",
                      "request": {"url": "https://example.com/", "follow_redirects": True}})

    result = tickwork("apply", "-f", path, "--yes")

    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert any(line.startswith("Error: job moon: schedule: could not understand the schedule") for line in lines), lines
    assert any(line.startswith("job typo: request.follow_redirects: ") and "400 invalid_request" in line
               for line in lines), lines
    assert tickwork.jobs() == {}  # nothing is applied when the plan has errors


def test_a_literal_secret_is_refused_before_anything_is_sent(tickwork: Tickwork, tmp_path: Path) -> None:
    path = file_with(tmp_path, {"key": "nightly-report", "name": "n", "schedule": "rate(1 hour)",
                                "request": {"url": "https://example.com/", "headers": {"Authorization": "Bearer s3cr3t-v4lue"}}})

    result = tickwork("plan", "-f", path)

    assert result.exit_code == 1
    assert result.stderr == ("Error: job nightly-report: request.headers.Authorization holds a literal value; "
                             "store it as a secret (PUT /secrets/NAME) and write ${secrets.NAME}\n")
    assert "s3cr3t" not in result.output


@pytest.mark.parametrize("args", [["plan", "--detailed-exitcode"], ["apply", "--yes"]])
def test_a_missing_file_is_an_error_not_a_change(tickwork: Tickwork, tmp_path: Path, args: list[str]) -> None:
    result = tickwork(*args, "-f", str(tmp_path / "none.yaml"))

    assert result.exit_code == 1
    assert "cannot read" in result.stderr


def test_a_files_max_runs_and_end_action_are_applied_planned_when_edited_and_reset_when_removed(
        tickwork: Tickwork, tmp_path: Path) -> None:
    job = {"key": "three-reports", "name": "three", "schedule": "0 0 0 1 1 *",
           "request": {"url": "https://example.com/r"}, "max_runs": 3, "end_action": "delete"}
    assert tickwork.json("apply", "-f", file_with(tmp_path, job), "--yes")["summary"]["create"] == 1
    stored = tickwork.jobs()["three-reports"]
    assert (stored["max_runs"], stored["end_action"], stored["runs_sent"]) == (3, "delete", 0)
    assert tickwork("plan", "-f", file_with(tmp_path, job), "--detailed-exitcode").exit_code == 0

    edited_job = {k: v for k, v in job.items() if k != "end_action"} | {"max_runs": 5}
    planned = tickwork.json("plan", "-f", file_with(tmp_path, edited_job))
    applied = tickwork.json("apply", "-f", file_with(tmp_path, edited_job), "--yes")

    assert [(j["action"], j["changes"]) for j in planned["jobs"]] == [("update", [
        {"field": "max_runs", "old": 3, "new": 5}, {"field": "end_action", "old": "delete", "new": "none"}])]
    assert [j["key"] for j in applied["applied"]] == ["three-reports"]
    stored = tickwork.jobs()["three-reports"]
    assert (stored["max_runs"], stored["end_action"]) == (5, "none")
