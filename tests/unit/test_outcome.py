"""Outcomes and their failure kinds (tickwork.outcome): what is retried is the kind's to say. Pure."""
from __future__ import annotations

import pytest

from tickwork.outcome import Failure, FailureKind, Outcome

NOT_RETRIED = {FailureKind.REFUSED, FailureKind.UNKNOWN_SECRET, FailureKind.REDIRECT, FailureKind.REJECTED_STATUS}


@pytest.mark.parametrize("kind", list(FailureKind))
def test_each_kind_says_whether_it_is_retried(kind: FailureKind) -> None:
    outcome = Outcome.failed(Failure(kind, "an error"), 12)
    assert not outcome.succeeded and outcome.retryable is (kind not in NOT_RETRIED)
    assert (outcome.status_code, outcome.body, outcome.error, outcome.duration_ms) == (None, None, "an error", 12)


def test_the_kind_decides_never_the_text() -> None:
    assert Outcome(None, None, "refused: spelled like a refusal", 5, failure=FailureKind.CONNECTION).retryable
    assert not Outcome(None, None, "timeout: spelled like a timeout", 5, failure=FailureKind.REFUSED).retryable


def test_an_outcome_without_a_failure_succeeded_and_is_not_retried() -> None:
    outcome = Outcome(204, "", None, 3, failure=None)
    assert outcome.succeeded and not outcome.retryable


def test_an_outcome_must_say_whether_it_failed() -> None:
    with pytest.raises(TypeError):
        Outcome(200, "ok", None, 1)  # type: ignore[call-arg]
