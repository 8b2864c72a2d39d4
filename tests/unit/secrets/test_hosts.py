"""Which hosts a secret may be sent to: parsing allowed_hosts, matching a URL's host, and the checks at save
and at send time."""
from __future__ import annotations

import pytest

from tickwork.errors import InvalidInputError
from tickwork.secrets.hosts import allowed, check_request, literal_host, parse_allowed_hosts, refusal, url_host


def test_entries_are_stored_lowercase_once_without_a_trailing_dot() -> None:
    assert parse_allowed_hosts(["API.Example.com.", "api.example.com", "*.Hooks.example.com", "[::1]", "10.0.0.7"]) == [
        "api.example.com", "*.hooks.example.com", "::1", "10.0.0.7"]


@pytest.mark.parametrize(("given", "field"), [
    ([], "allowed_hosts"),
    (["ok.example.com"] * 21, "allowed_hosts"),
    (["https://api.example.com"], "allowed_hosts.0"),
    (["ok.example.com", "api.example.com/path"], "allowed_hosts.1"),
    (["api.example.com:443"], "allowed_hosts.0"),
    (["*"], "allowed_hosts.0"),
    (["*.com"], "allowed_hosts.0"),
    (["a.*.example.com"], "allowed_hosts.0"),
    (["**.example.com"], "allowed_hosts.0"),
    (["-bad.example.com"], "allowed_hosts.0"),
    (["bad_.example.com"], "allowed_hosts.0"),
    (["exämple.com"], "allowed_hosts.0"),
    ([""], "allowed_hosts.0"),
    (["a" * 64 + ".com"], "allowed_hosts.0"),
    (["*.10.0.0.1"], "allowed_hosts.0"),
])
def test_bad_entries_are_invalid_naming_the_field(given: list[str], field: str) -> None:
    with pytest.raises(InvalidInputError) as bad:
        parse_allowed_hosts(given)
    assert bad.value.field == field


@pytest.mark.parametrize(("host", "patterns", "expected"), [
    ("api.example.com", ["api.example.com"], True),
    ("api.example.com", ["other.example.com", "*.example.com"], True),
    ("example.com", ["*.example.com"], False),
    ("a.b.example.com", ["*.example.com"], False),
    ("evilexample.com", ["*.example.com"], False),
    ("api.example.com.evil.net", ["api.example.com"], False),
    ("api.example.co", ["api.example.com"], False),
    ("::1", ["::1"], True),
])
def test_a_host_matches_an_exact_name_or_one_label_under_a_wildcard(host: str, patterns: list[str],
                                                                     expected: bool) -> None:
    assert allowed(host, patterns) is expected


@pytest.mark.parametrize(("url", "host"), [
    ("https://API.Example.com./x", "api.example.com"),
    ("https://user:pw@api.example.com:8443/x?a=b", "api.example.com"),
    ("http://[::1]:8080/", "::1"),
    ("https://bücher.example/", "xn--bcher-kva.example"),
    ("not a url", None),
])
def test_the_url_host_is_normalised_as_allowed_hosts_are(url: str, host: str | None) -> None:
    assert url_host(url) == host


def test_a_host_built_from_a_secret_has_no_literal_host() -> None:
    assert literal_host("https://${secrets.HOST}/x") is None
    assert literal_host("https://api.example.com${secrets.PATH}") is None
    assert literal_host("https://api.example.com:${secrets.PORT}/") is None
    assert literal_host("https://${secrets.USER}@api.example.com/x") == "api.example.com"
    assert literal_host("https://api.example.com/${secrets.PATH}") == "api.example.com"


def _request(url: str, **headers: str) -> dict[str, object]:
    return {"method": "POST", "url": url, "headers": headers, "body": None}


def test_saving_names_the_field_of_a_reference_the_host_does_not_allow() -> None:
    only = {"TOKEN": ["api.example.com"], "FREE": None}
    check_request(_request("https://api.example.com/x", Authorization="Bearer ${secrets.TOKEN}"), only)
    check_request(_request("https://anywhere.net/${secrets.FREE}"), only)
    with pytest.raises(InvalidInputError) as bad:
        check_request(_request("https://evil.net/x", Authorization="Bearer ${secrets.TOKEN}"), only)
    assert bad.value.field == "request.headers.Authorization" and "secret TOKEN is not allowed" in bad.value.message
    assert "evil.net" not in bad.value.message
    with pytest.raises(InvalidInputError) as built:
        check_request(_request("https://${secrets.FREE}/x", Authorization="Bearer ${secrets.TOKEN}"), only)
    assert built.value.field == "request.headers.Authorization"


def test_sending_is_refused_for_a_host_the_secret_does_not_allow_as_sent() -> None:
    only = {"TOKEN": ["api.example.com"], "USER": None}
    assert refusal("https://api.example.com/x", ["TOKEN"], only) is None
    assert refusal("https://evil.net/x", ["USER"], only) is None
    assert refusal("https://evil.net/x", ["TOKEN", "USER"], only) == "secret TOKEN is not allowed for host evil.net"
    assert refusal("https:///x", ["TOKEN"], only) == "secret TOKEN is not allowed for host (none)"
