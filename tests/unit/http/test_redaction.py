"""Which values count as a request's secrets, and how they are hidden in what a target answered."""
from __future__ import annotations

from tickwork.http.redaction import REDACTED, is_sensitive_header, redact, secret_values


def test_sensitive_header_values_and_query_parameters_are_secrets_with_their_encodings() -> None:
    secrets = secret_values({"Authorization": "Bearer a/b\"c", "X-Trace": "visible", "Cookie": "id=1"},
                            "api_key=k%2Fey1&page=2&token=short")
    assert "Bearer a/b\"c" in secrets and "a/b\"c" in secrets  # the credentials without their scheme too
    assert 'a/b\\"c' in secrets and "a%2Fb%22c" in secrets  # as JSON and as a URL would spell them
    assert "k%2Fey1" in secrets and "k/ey1" in secrets  # the query value as sent and decoded
    assert "visible" not in secrets and "2" not in secrets
    assert "id=1" in secrets and "short" in secrets
    assert [len(s) for s in secrets] == sorted((len(s) for s in secrets), reverse=True)


def test_values_too_short_to_be_secrets_are_left_alone() -> None:
    assert secret_values({"X-Auth-Enabled": "1", "Authorization": "Basic"}, "") == ("Basic",)


def test_every_occurrence_is_replaced_and_a_secret_cut_at_the_end_of_a_truncated_body_too() -> None:
    secrets = secret_values({"X-Api-Key": "abcdef123"}, "")
    assert redact("k=abcdef123, again abcdef123", secrets) == f"k={REDACTED}, again {REDACTED}"
    assert redact("the key is abcd", secrets, cut=True) == f"the key is {REDACTED}"
    assert redact("the key is abcd", secrets) == "the key is abcd"  # a whole body: no secret was cut
    assert redact(None, secrets) is None and redact("text", ()) == "text"


def test_the_api_and_the_history_share_one_definition_of_a_sensitive_header() -> None:
    from tickwork.tenant import job_edits

    assert job_edits.is_sensitive_header is is_sensitive_header and job_edits.REDACTED == REDACTED
    assert is_sensitive_header("X-Signature") and not is_sensitive_header("X-Trace")
