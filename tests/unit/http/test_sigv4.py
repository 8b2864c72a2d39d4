"""SigV4 signing of a job's request (tickwork.http.sigv4), held against an independent check (tests/sigv4.py) that is
itself held against AWS's published example; and the save-time rules of `request.auth`."""
from __future__ import annotations

import hashlib

import pytest

from tests.sigv4 import expected_authorization, verifies
from tickwork.errors import InvalidInputError
from tickwork.http.sigv4 import SigV4
from tickwork.models import HttpRequest, RequestAuth
from tickwork.settings import Settings
from tickwork.tenant.job_edits import checked_request

KEY, SECRET, TOKEN = "ASIAEXAMPLEKEY12", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY", "FwoGZXIvYXdzEXAMPLE//token=="
SIGNER = SigV4(KEY, SECRET, TOKEN, "lambda", "eu-west-1")
URL = "https://abc123.lambda-url.eu-west-1.on.aws/run?b=2&a=1"
HEADERS = {"User-Agent": "Tickwork/0.1", "Content-Type": "application/json", "Tickwork-Run-Id": "run-1",
           "Host": "abc123.lambda-url.eu-west-1.on.aws", "Content-Length": "9"}
BODY = b'{"at": 1}'


def _verifies(signed: dict[str, str], body: bytes = BODY, secret: str = SECRET, method: str = "POST") -> bool:
    return verifies(method, "/run?b=2&a=1", signed, body, KEY, secret, "eu-west-1", "lambda")


def test_the_independent_check_gives_aws_published_get_vanilla_signature() -> None:
    # AWS's SigV4 test suite, get-vanilla: its credentials, date, scope and signature.
    headers = {"Host": "example.amazonaws.com", "X-Amz-Date": "20150830T123600Z"}
    assert expected_authorization("GET", "/", headers, b"", "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                                  "us-east-1", "service", ["host", "x-amz-date"]) == (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
        "SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")


def test_a_signed_request_verifies_over_its_method_url_headers_and_body() -> None:
    signed = SIGNER.headers("POST", URL, HEADERS, BODY)
    assert _verifies(signed)
    assert signed["X-Amz-Security-Token"] == TOKEN
    assert signed["X-Amz-Content-SHA256"] == hashlib.sha256(BODY).hexdigest()
    names = signed["Authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
    assert {"host", "content-length", "content-type", "tickwork-run-id", "x-amz-date", "x-amz-security-token",
            "x-amz-content-sha256"} <= set(names)


@pytest.mark.parametrize("change", ["body", "header", "secret", "method"])
def test_a_request_changed_after_signing_or_checked_with_another_key_does_not_verify(change: str) -> None:
    signed = SIGNER.headers("POST", URL, HEADERS, BODY)
    if change == "header":
        signed["Tickwork-Run-Id"] = "run-2"
    assert not _verifies(signed, body=b'{"at": 2}' if change == "body" else BODY, method="PUT" if change == "method"
                         else "POST", secret="another" if change == "secret" else SECRET)


def test_a_request_without_a_body_signs_the_empty_bodys_hash() -> None:
    signed = SIGNER.headers("GET", URL, {"Host": HEADERS["Host"]}, None)
    assert verifies("GET", "/run?b=2&a=1", signed, b"", KEY, SECRET, "eu-west-1", "lambda")
    assert signed["X-Amz-Content-SHA256"] == hashlib.sha256(b"").hexdigest()


def test_the_signature_headers_are_the_secrets_kept_out_of_history() -> None:
    signed = SIGNER.headers("POST", URL, HEADERS, BODY)
    assert set(SIGNER.secrets(signed)) == {signed["Authorization"], TOKEN}


AUTH = RequestAuth("aws_iam", "arn:aws:iam::123456789012:role/tickwork-target-fn", "lambda", "eu-west-1")
SETTINGS = Settings(database_url="", redis_url="")


def test_a_signed_request_is_stored_with_its_auth() -> None:
    request = checked_request(SETTINGS, HttpRequest(url=URL, auth=AUTH))
    assert request.auth == AUTH and HttpRequest.from_dict(request.to_dict()) == request
    assert "auth" not in checked_request(SETTINGS, HttpRequest(url=URL)).to_dict()  # older rows read the same


@pytest.mark.parametrize(("role", "why"), [("arn:aws:iam::123456789012:role/admin", "target role pattern"),
                                           ("arn:aws:sqs:us-east-1:123456789012:q", "not an IAM role")])
def test_a_role_outside_the_deployments_pattern_is_refused_naming_the_field(role: str, why: str) -> None:
    auth = RequestAuth("aws_iam", role, "lambda", "eu-west-1")
    with pytest.raises(InvalidInputError) as raised:
        checked_request(SETTINGS, HttpRequest(url=URL, auth=auth))
    assert raised.value.field == "request.auth.role_arn" and why in raised.value.message


def test_a_header_the_signature_sets_cannot_be_given_with_it() -> None:
    with pytest.raises(InvalidInputError) as raised:
        checked_request(SETTINGS, HttpRequest(url=URL, headers={"Authorization": "Bearer x"}, auth=AUTH))
    assert raised.value.field == "request.headers.Authorization"
    assert checked_request(SETTINGS, HttpRequest(url=URL, headers={"Authorization": "Bearer x"})).auth is None
