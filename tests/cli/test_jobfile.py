"""The jobs file, checked before anything is sent: its shape, and no literal value in a sensitive header."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tickwork.http.redaction import is_sensitive_header as server_is_sensitive
from tickwork_cli.errors import CliError
from tickwork_cli.jobfile import JobFileError, is_sensitive_header, load, parse

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "jobs.yaml"


def job(key: str = "nightly-report", **fields: Any) -> dict[str, Any]:
    return {"key": key, "name": key, "schedule": "rate(1 hour)", "request": {"url": "https://example.com/"}, **fields}


def with_header(name: str, value: Any) -> dict[str, Any]:
    return {"source": "s", "jobs": [job(request={"url": "https://example.com/", "headers": {name: value}})]}


def test_the_example_file_has_its_jobs_in_order_each_carrying_the_source_label() -> None:
    jobs = load(EXAMPLE)

    assert jobs.source == "examples/jobs.yaml"
    assert list(jobs.jobs) == ["nightly-report", "cache-warmup", "weekly-cleanup"]
    assert {body["source"] for body in jobs.jobs.values()} == {"examples/jobs.yaml"}
    assert jobs.jobs["nightly-report"]["request"]["headers"]["Authorization"] == "Bearer ${secrets.REPORT_TOKEN}"


def test_json_is_yaml_too(tmp_path: Path) -> None:
    path = tmp_path / "jobs.json"
    path.write_text('{"source": "ci", "jobs": [{"key": "a", "name": "a", "schedule": "rate(1 hour)",'
                    ' "request": {"url": "https://example.com/"}}]}')

    assert list(load(path).jobs) == ["a"]


@pytest.mark.parametrize(("data", "message"), [
    ([], "file: must be a mapping with `source` and `jobs`"),
    ({"jobs": []}, "source: required"),
    ({"source": "  ", "jobs": []}, "source: required"),
    ({"source": "s"}, "jobs: required: a list of jobs"),
    ({"source": "s", "jobs": {"a": {}}}, "jobs: required: a list of jobs"),
    ({"source": "s", "jobs": [], "job": []}, "job: unknown top-level field"),
    ({"source": "s", "jobs": [job(), "x"]}, "jobs[1]: must be a mapping of job fields"),
    ({"source": "s", "jobs": [job(), {"name": "no key"}]}, "jobs[1]: key: required"),
    ({"source": "s", "jobs": [job("Nightly Report")]}, "jobs[0]: key: 1-128 characters of a-z 0-9 . _ -"),
    ({"source": "s", "jobs": [job("a"), job("b"), job("a")]}, "job a: key: appears twice in the file"),
    ({"source": "s", "jobs": [job(source="other")]}, "job nightly-report: source: set once for the whole file"),
])
def test_a_file_of_the_wrong_shape_is_refused_naming_the_job_and_field(data: Any, message: str) -> None:
    with pytest.raises(JobFileError) as refused:
        parse(data)

    assert refused.value.message.startswith(message)


def test_a_file_that_is_not_yaml_is_refused_with_its_name(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("source: s\njobs: [\n")

    with pytest.raises(CliError, match="broken.yaml is not valid YAML"):
        load(path)


@pytest.mark.parametrize(("name", "value"), [
    ("Authorization", "Bearer abc123"),
    ("Authorization", "abc123"),
    ("Authorization", "Bearer ${secrets.TOKEN}x"),
    ("Authorization", "Basic ${secrets.USER}:hunter2"),
    ("X-Api-Key", "k-123"),
    ("x-auth-token", "t"),
    ("Cookie", "session=abc"),
    ("X-Webhook-Signature", "***"),
    ("Authorization", "${secret.TOKEN}"),
])
def test_a_literal_value_in_a_sensitive_header_is_refused_with_the_way_to_a_secret(name: str, value: str) -> None:
    with pytest.raises(JobFileError) as refused:
        parse(with_header(name, value))

    assert refused.value.message == (
        f"job nightly-report: request.headers.{name} holds a literal value; store it as a secret "
        "(PUT /secrets/NAME) and write ${secrets.NAME}")


@pytest.mark.parametrize(("name", "value"), [
    ("Authorization", "Bearer ${secrets.TOKEN}"),
    ("Authorization", "${secrets.TOKEN}"),
    ("Proxy-Authorization", "Basic ${secrets.PROXY_CREDENTIALS}"),
    ("Cookie", "session=${secrets.SESSION}; theme=${secrets.THEME}"),
    ("X-Api-Key", "${secrets.A}:${secrets.B}"),
    ("X-Token", ""),
    ("Content-Type", "application/json"),
    ("X-Team", "payments"),
])
def test_references_and_values_of_plain_headers_are_accepted(name: str, value: str) -> None:
    headers = parse(with_header(name, value)).jobs["nightly-report"]["request"]["headers"]

    assert headers == {name: value}


def test_a_header_value_that_is_not_text_is_refused_naming_it() -> None:
    with pytest.raises(JobFileError, match=r"job nightly-report: request.headers.X-Count: must be a string"):
        parse(with_header("X-Count", 5))


@pytest.mark.parametrize("name", [
    "Authorization", "authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", "X-Api-Key", "x-api-key",
    "X-Auth-Token", "X-Secret", "Api-Key", "X-Password", "X-Passwd", "X-Credential", "X-Hub-Signature-256",
    "Monkey", "X-Authentication", "Content-Type", "Accept", "X-Team", "User-Agent", "X-Request-Id", "Token",
    "X-Cookie-Consent", "X-Tokenizer", "Webhook-Signature", "X-Keys", "Idempotency-Key", "Host", "X-Pass",
])
def test_the_cli_finds_the_same_headers_sensitive_as_the_server(name: str) -> None:
    assert is_sensitive_header(name) == server_is_sensitive(name)


def test_the_docs_show_the_example_file_as_committed() -> None:
    docs = (EXAMPLE.parents[1] / "jobs-as-code.md").read_text()
    jobs = EXAMPLE.read_text()

    assert jobs[jobs.index("source:"):] in docs
