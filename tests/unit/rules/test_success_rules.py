"""A job's success rules judged on outcomes: pure."""
from __future__ import annotations

import pytest

from tickwork.outcome import FailureKind, Outcome
from tickwork.rules import success


def _answer(status: int, body: str = "ok") -> Outcome:
    error = "redirect not followed" if 300 <= status < 400 else (f"HTTP {status}" if status >= 400 else None)
    return Outcome(status, body, error, 12, failure=success.status_failure(status))


@pytest.mark.parametrize(("entries", "stored"), [
    ([200], [200]), (["2xx", 301], ["2xx", 301]), (["3XX"], ["3xx"]), (["204"], [204]),
])
def test_entries_are_normalized(entries: list[object], stored: list[object]) -> None:
    assert success.normalized_codes(entries) == stored


@pytest.mark.parametrize("entry", [99, 600, "6xx", "2xxx", "abc", True, 2.5, None])
def test_invalid_entries_are_refused(entry: object) -> None:
    with pytest.raises(ValueError):
        success.normalized_codes([entry])


def test_without_rules_the_outcome_is_unchanged() -> None:
    outcome = _answer(302)
    assert success.judge(None, outcome) is outcome and not outcome.succeeded


def test_an_accepted_redirect_succeeds() -> None:
    judged = success.judge({"status_codes": ["3xx"]}, _answer(302))
    assert judged.succeeded and judged.error is None


def test_a_2xx_not_listed_fails_and_is_retryable() -> None:
    judged = success.judge({"status_codes": [200]}, _answer(204))
    assert not judged.succeeded and judged.retryable
    assert judged.error == "HTTP 204 not accepted (success.status_codes: 200)"


def test_a_4xx_not_listed_keeps_its_classification() -> None:
    judged = success.judge({"status_codes": [200]}, _answer(404))
    assert not judged.succeeded and not judged.retryable


def test_a_5xx_not_listed_keeps_its_classification() -> None:
    judged = success.judge({"status_codes": [200]}, _answer(503))
    assert judged.failure is FailureKind.TRANSIENT_STATUS and judged.retryable
    assert judged.error == "HTTP 503 not accepted (success.status_codes: 200)"


def test_a_redirect_not_listed_fails_and_is_retryable() -> None:
    judged = success.judge({"body_contains": "done"}, _answer(302))
    assert judged.failure is FailureKind.SUCCESS_RULE and judged.retryable


def test_an_accepted_4xx_succeeds() -> None:
    assert success.judge({"status_codes": [404, "2xx"]}, _answer(404)).succeeded


def test_body_contains_must_match() -> None:
    rules = {"status_codes": ["2xx"], "body_contains": '"status":"done"'}
    assert success.judge(rules, _answer(200, '{"status":"done"}')).succeeded
    missed = success.judge(rules, _answer(200, '{"status":"queued"}'))
    assert not missed.succeeded and missed.retryable
    assert missed.error == "HTTP 200: the response body does not contain success.body_contains"


def test_a_transport_failure_is_untouched() -> None:
    failure = Outcome(None, None, "timeout: no response within 5s", 5000, failure=FailureKind.TIMEOUT)
    assert success.judge({"status_codes": [200]}, failure) is failure


@pytest.mark.parametrize(("status", "kind"), [
    (200, None), (204, None), (299, None), (101, FailureKind.REJECTED_STATUS), (301, FailureKind.REDIRECT),
    (304, FailureKind.REDIRECT), (400, FailureKind.REJECTED_STATUS), (404, FailureKind.REJECTED_STATUS),
    (408, FailureKind.TRANSIENT_STATUS), (429, FailureKind.TRANSIENT_STATUS), (500, FailureKind.TRANSIENT_STATUS),
    (503, FailureKind.TRANSIENT_STATUS), (599, FailureKind.TRANSIENT_STATUS),
])
def test_an_answers_status_has_a_kind(status: int, kind: FailureKind | None) -> None:
    assert success.status_failure(status) is kind
