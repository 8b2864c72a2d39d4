"""`${secrets.NAME}`: found per field, replaced in one pass, an unknown name refused by name."""
from __future__ import annotations

import pytest

from tickwork.errors import UnknownSecretError
from tickwork.secrets.interpolation import expand, expand_request, references


def test_references_name_the_field_they_are_in() -> None:
    request = {"url": "https://h/${secrets.PATH}?k=${secrets.KEY}", "body": "{\"t\": \"${secrets.TOKEN}\"}",
               "headers": {"Authorization": "Bearer ${secrets.TOKEN}", "X-Plain": "no ${secret.X} ${secrets.9X}"}}
    assert list(references(request)) == [
        ("request.url", "PATH"), ("request.url", "KEY"), ("request.headers.Authorization", "TOKEN"),
        ("request.body", "TOKEN"),
    ]


def test_one_pass_never_expands_a_value_again() -> None:
    values = {"A": "${secrets.B}", "B": "bee"}
    assert expand("x${secrets.A}y${secrets.B}", values) == "x${secrets.B}ybee"


def test_an_unknown_name_is_refused_with_its_name() -> None:
    with pytest.raises(UnknownSecretError) as raised:
        expand("${secrets.KNOWN}${secrets.MISSING}", {"KNOWN": "k"})
    assert raised.value.message == "unknown secret MISSING"


def test_a_request_expands_url_headers_and_body_and_reports_what_it_used() -> None:
    request = {"method": "POST", "url": "https://h/${secrets.P}", "headers": {"A": "Bearer ${secrets.T}"},
               "body": "${secrets.T}", "timeout_seconds": 5}
    expanded, used = expand_request(request, {"P": "path", "T": "tok", "U": "unused"})
    assert expanded == {"method": "POST", "url": "https://h/path", "headers": {"A": "Bearer tok"}, "body": "tok",
                        "timeout_seconds": 5}
    assert used == {"P", "T"}
    assert request["url"] == "https://h/${secrets.P}"  # the template is left as it was
