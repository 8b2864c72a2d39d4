"""The pure rules of completion callbacks (tickwork.rules.completion), on pinned instants."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tickwork.rules import completion
from tickwork.rules.completion import Awaiting, Settled

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
RUN = "4db39318-1d2e-4c3b-9a8f-0e1d2c3b4a59"


def _waiting(reported: str | None = None, output: str | None = None) -> Awaiting:
    return Awaiting(RUN, 2, T0 + timedelta(seconds=600), 600, reported, output, T0, 12, 202)


def test_a_reported_completion_settles_at_once_whatever_the_deadline() -> None:
    assert completion.settle(_waiting("succeeded", "42"), T0) == Settled(True, None, "42")
    assert completion.settle(_waiting("failed", "boom"), T0) == Settled(False, completion.FAILED_NOTE, "boom")


def test_without_a_report_the_wait_ends_only_at_its_deadline() -> None:
    assert completion.settle(_waiting(), T0 + timedelta(seconds=599.999)) is None
    assert completion.settle(_waiting(), T0 + timedelta(seconds=600)) == Settled(
        False, "no completion within 600 s", None)


def test_stored_and_shown_forms() -> None:
    assert completion.stored(None) is None and completion.stored({"mode": "response"}) is None
    assert completion.stored({"mode": "callback"}) == {"mode": "callback", "timeout_seconds": 3600}
    assert completion.shown(None) == {"mode": "response", "timeout_seconds": None}
    assert completion.deadline(T0, {"mode": "callback", "timeout_seconds": 5}) == T0 + timedelta(seconds=5)


@pytest.mark.parametrize(("logged", "shown"), [
    (f"/callbacks/{RUN}/1/abcDEF-_123", f"/callbacks/{RUN}/1/***"),
    (f"POST /callbacks/{RUN}/3/abcDEF-_123 HTTP/1.1", f"POST /callbacks/{RUN}/3/*** HTTP/1.1"),
    (f"/callbacks/{RUN}/1/abc?x=1", f"/callbacks/{RUN}/1/***?x=1"),
    ("/jobs/123/executions", "/jobs/123/executions"),
    (None, None),
])
def test_a_callback_token_never_reaches_a_log(logged: str | None, shown: str | None) -> None:
    assert completion.loggable_path(logged) == shown


def test_tokens_are_long_random_and_stored_as_their_sha256() -> None:
    first, second = completion.new_token(), completion.new_token()
    assert first != second and len(first) >= 43
    assert len(completion.token_hash(first)) == 32 and completion.token_hash(first) != completion.token_hash(second)
    assert completion.callback_url("https://api.example/", RUN, 2, first) == f"https://api.example/callbacks/{RUN}/2/{first}"


def test_output_is_bounded_in_utf8_bytes() -> None:
    assert completion.output_error("x" * completion.MAX_OUTPUT_BYTES) is None
    assert completion.output_error("é" * (completion.MAX_OUTPUT_BYTES // 2 + 1)) is not None
    assert completion.output_error("a\x00b") == "must not contain NUL characters"
