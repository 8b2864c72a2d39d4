"""Where a secret may be sent: parsing allowed_hosts (scheme, host and port), matching a URL, and the checks at
save and at send time."""
from __future__ import annotations

import pytest

from tickwork.errors import InvalidInputError
from tickwork.rules.origins import allowed, bare_hosts, in_force, literal_origin, url_host, url_origin
from tickwork.secrets.hosts import check_request, parse_allowed_hosts, refusal


def test_entries_are_stored_lowercase_once_without_a_trailing_dot() -> None:
    assert parse_allowed_hosts(["API.Example.com.", "api.example.com", "*.Hooks.example.com", "[::1]", "10.0.0.7"]) == [
        "api.example.com", "*.hooks.example.com", "::1", "10.0.0.7"]


def test_an_entry_may_name_a_scheme_and_port_and_https_on_443_is_written_bare() -> None:
    assert parse_allowed_hosts([
        "https://API.example.com", "https://api.example.com:443/", "http://api.example.com", "HTTP://api.example.com:80",
        "https://api.example.com:8443", "http://[::1]:8080", "https://*.hooks.example.com:8443", "http://10.0.0.7:8080",
    ]) == ["api.example.com", "http://api.example.com", "https://api.example.com:8443", "http://[::1]:8080",
           "https://*.hooks.example.com:8443", "http://10.0.0.7:8080"]


def test_the_old_release_reads_the_bare_hosts_of_the_entries() -> None:
    entries = ["api.example.com", "http://api.example.com", "https://*.hooks.example.com:8443", "http://[::1]:8080"]
    assert bare_hosts(entries) == ["api.example.com", "*.hooks.example.com", "::1"]


def test_the_entries_in_force_are_the_origins_unless_an_older_release_rewrote_the_hosts_since() -> None:
    origins = ["http://api.example.com:8080", "other.example.com"]
    assert in_force(["api.example.com", "other.example.com"], origins) == origins
    assert in_force(["api.example.com"], None) == ["api.example.com"]  # written before origins: https on 443
    assert in_force(["elsewhere.example.com"], origins) == ["elsewhere.example.com"]  # replaced by an older release
    assert in_force(None, origins) is None  # cleared by an older release: any host


@pytest.mark.parametrize(("given", "field"), [
    ([], "allowed_hosts"),
    (["ok.example.com"] * 21, "allowed_hosts"),
    (["ftp://api.example.com"], "allowed_hosts.0"),
    (["https://api.example.com/path"], "allowed_hosts.0"),
    (["https://api.example.com?a=b"], "allowed_hosts.0"),
    (["https://user@api.example.com"], "allowed_hosts.0"),
    (["https://api.example.com:0"], "allowed_hosts.0"),
    (["https://api.example.com:99999"], "allowed_hosts.0"),
    (["https://"], "allowed_hosts.0"),
    (["https://*"], "allowed_hosts.0"),
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
    assert allowed(url_origin(f"https://{'[::1]' if host == '::1' else host}/x"), patterns) is expected


@pytest.mark.parametrize(("url", "entries", "expected"), [
    ("https://api.example.com/x", ["api.example.com"], True),
    ("https://api.example.com:443/x", ["https://api.example.com"], True),
    ("http://api.example.com/x", ["api.example.com"], False),  # a bare host is https on 443 only
    ("https://api.example.com:8443/x", ["api.example.com"], False),
    ("http://api.example.com:443/x", ["api.example.com"], False),
    ("http://api.example.com/x", ["http://api.example.com"], True),
    ("http://api.example.com:80/x", ["http://api.example.com"], True),
    ("http://api.example.com:8080/x", ["http://api.example.com"], False),
    ("https://api.example.com/x", ["http://api.example.com"], False),
    ("https://api.example.com:8443/x", ["https://api.example.com:8443"], True),
    ("https://hooks.example.com:8443/x", ["https://*.example.com:8443"], True),
    ("https://hooks.example.com/x", ["https://*.example.com:8443"], False),
    ("http://[::1]:8080/x", ["http://[::1]:8080"], True),
    ("http://[::1]:8081/x", ["http://[::1]:8080"], False),
])
def test_a_url_matches_an_entry_by_scheme_host_and_port(url: str, entries: list[str], expected: bool) -> None:
    assert allowed(url_origin(url), entries) is expected


@pytest.mark.parametrize(("url", "host"), [
    ("https://API.Example.com./x", "api.example.com"),
    ("https://user:pw@api.example.com:8443/x?a=b", "api.example.com"),
    ("http://[::1]:8080/", "::1"),
    ("https://bücher.example/", "xn--bcher-kva.example"),
    ("not a url", None),
])
def test_the_url_host_is_normalised_as_allowed_hosts_are(url: str, host: str | None) -> None:
    assert url_host(url) == host


def test_a_scheme_host_or_port_built_from_a_secret_has_no_literal_origin() -> None:
    assert literal_origin("https://${secrets.HOST}/x") is None
    assert literal_origin("https://api.example.com${secrets.PATH}") is None
    assert literal_origin("https://api.example.com:${secrets.PORT}/") is None
    assert literal_origin("${secrets.SCHEME}://api.example.com/") is None
    assert literal_origin("https://${secrets.USER}@api.example.com/x") == url_origin("https://api.example.com")
    assert literal_origin("http://api.example.com:8080/${secrets.PATH}") == url_origin("http://api.example.com:8080")


def _request(url: str, **headers: str) -> dict[str, object]:
    return {"method": "POST", "url": url, "headers": headers, "body": None}


def test_saving_names_the_field_of_a_reference_the_host_does_not_allow() -> None:
    only = {"TOKEN": ["api.example.com"], "FREE": None}
    check_request(_request("https://api.example.com/x", Authorization="Bearer ${secrets.TOKEN}"), only)
    check_request(_request("https://anywhere.net/${secrets.FREE}"), only)
    for elsewhere in ("https://evil.net/x", "http://api.example.com/x", "https://api.example.com:8443/x"):
        with pytest.raises(InvalidInputError) as bad:
            check_request(_request(elsewhere, Authorization="Bearer ${secrets.TOKEN}"), only)
        assert bad.value.field == "request.headers.Authorization" and "secret TOKEN is not allowed" in bad.value.message
        assert "evil.net" not in bad.value.message
    with pytest.raises(InvalidInputError) as built:
        check_request(_request("https://${secrets.FREE}/x", Authorization="Bearer ${secrets.TOKEN}"), only)
    assert built.value.field == "request.headers.Authorization"


def test_sending_is_refused_for_a_host_the_secret_does_not_allow_as_sent() -> None:
    only = {"TOKEN": ["api.example.com"], "USER": None}
    assert refusal("https://api.example.com/x", ["TOKEN"], only) is None
    assert refusal("https://evil.net/x", ["USER"], only) is None
    assert refusal("https://evil.net/x", ["TOKEN", "USER"], only) == "secret TOKEN is not allowed for https://evil.net"
    assert refusal("http://api.example.com/x", ["TOKEN"], only) == (
        "secret TOKEN is not allowed for http://api.example.com")
    assert refusal("https://api.example.com:8443/x", ["TOKEN"], only) == (
        "secret TOKEN is not allowed for https://api.example.com:8443")
    assert refusal("https:///x", ["TOKEN"], only) == "secret TOKEN is not allowed for (no host)"
