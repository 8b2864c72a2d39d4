"""`${secrets.NAME}`: found per field, replaced in one pass, an unknown name refused by name, what a request
expands to bounded (at save time with every secret at its largest, at send time as it is built)."""
from __future__ import annotations

import pytest

from typing import Iterator, Mapping

from tickwork.errors import InvalidInputError, UnknownSecretError
from tickwork.secrets.interpolation import (
    MAX_EXPANDED_BODY_BYTES,
    MAX_EXPANDED_HEADER_BYTES,
    check_worst_case,
    expand,
    expand_request,
    references,
)
from tickwork.secrets.vault import MAX_VALUE_BYTES

BIG = "s" * MAX_VALUE_BYTES  # a secret of the largest size allowed
REF = "${secrets.BIG}"


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


class _Counted(Mapping[str, str]):
    """Secret values that count how often one is read: how much of an expansion was built."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values, self.reads = values, 0

    def __getitem__(self, name: str) -> str:
        self.reads += 1
        return self.values[name]

    def __contains__(self, name: object) -> bool:
        return name in self.values

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)


def test_the_issues_request_is_refused_at_send_time_before_its_body_is_built() -> None:
    """#22: a 64K body of references to 8 KiB secrets would be ~45 MB; the expansion stops at the bound."""
    body = REF * (64 * 1024 // len(REF))
    values = _Counted({"BIG": BIG})
    with pytest.raises(InvalidInputError) as raised:
        expand_request({"url": "https://h/", "headers": {}, "body": body}, values)
    assert raised.value.field == "request.body"
    assert raised.value.message == f"the body would be over {MAX_EXPANDED_BODY_BYTES} bytes with the secrets in"
    assert values.reads == MAX_EXPANDED_BODY_BYTES // MAX_VALUE_BYTES + 1  # not 4,681 secrets' worth


def test_the_headers_bound_counts_every_header_name_and_value_together() -> None:
    headers = {f"X-Key-{i}": REF for i in range(4)}  # 4 x 8 KiB: over 32 KiB only together
    with pytest.raises(InvalidInputError) as raised:
        expand_request({"url": "https://h/", "headers": headers}, {"BIG": BIG})
    assert raised.value.field == "request.headers" and BIG not in raised.value.message
    assert str(MAX_EXPANDED_HEADER_BYTES) in raised.value.message
    three = {f"X-Key-{i}": REF for i in range(3)}
    expanded, _ = expand_request({"url": "https://h/", "headers": three}, {"BIG": BIG})
    assert expanded["headers"] == {f"X-Key-{i}": BIG for i in range(3)}


def test_a_url_is_bounded_too() -> None:
    with pytest.raises(InvalidInputError) as raised:
        expand_request({"url": "https://h/" + REF * 5}, {"BIG": BIG})
    assert raised.value.field == "request.url"


@pytest.mark.parametrize(("request_fields", "field"), [
    ({"body": REF * 129}, "request.body"),  # 129 x 8 KiB > 1 MiB
    ({"headers": {"Authorization": REF * 5}}, "request.headers.Authorization"),  # one header alone
    ({"headers": {f"X-Key-{i}": REF for i in range(4)}}, "request.headers"),  # only together
    ({"headers": {f"X-Plain-{i}": "v" * 8192 for i in range(4)}}, "request.headers"),  # no secret at all
    ({"url": "https://h/" + REF * 5}, "request.url"),
    # The issue's job: 64K body and 50 headers of 8,192 characters, all references.
    ({"body": REF * 4681, "headers": {f"X-{i}": REF * 585 for i in range(50)}}, "request.headers.X-0"),
])
def test_a_request_that_could_be_over_a_bound_is_refused_when_saved_naming_the_field(
    request_fields: dict[str, object], field: str,
) -> None:
    with pytest.raises(InvalidInputError) as raised:
        check_worst_case({"url": "https://h/", **request_fields}, MAX_VALUE_BYTES)
    assert raised.value.field == field
    assert f"each reference counts as {MAX_VALUE_BYTES} bytes" in raised.value.message


def test_a_request_within_the_bounds_with_every_secret_at_its_largest_is_accepted() -> None:
    check_worst_case({"url": "https://h/" + REF, "headers": {"Authorization": "Bearer " + REF, "X-A": REF, "X-B": REF},
                      "body": REF * 127}, MAX_VALUE_BYTES)
