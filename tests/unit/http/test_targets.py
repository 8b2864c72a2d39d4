"""The SSRF guard, with explicit cases: URLs judged on their own, and resolution through an injected resolver."""
from __future__ import annotations

import socket
from typing import Any

import pytest

from tickwork.errors import InvalidInputError, UnsafeTargetError
from tickwork.http.targets import MAX_URL_LENGTH, check_port, resolve_public_addresses, validate_target_url

PUBLIC_URLS = [
    "https://example.com/hook",
    "http://example.com:8080/path?q=1#frag",
    "https://93.184.216.34/",
    "https://[2606:2800:220:1:248:1893:25c8:1946]/x",
    "HTTPS://EXAMPLE.COM/",
]

PRIVATE_URLS = [
    "http://127.0.0.1/",
    "http://127.1/",  # legacy short form, read as 127.0.0.1 by getaddrinfo
    "http://2130706433/",  # 127.0.0.1 as one decimal number
    "http://0x7f000001/",
    "http://0/",
    "http://0.0.0.0:80/",
    "http://10.1.2.3/",
    "http://172.16.0.1/",
    "http://192.168.1.1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://100.64.0.1/",  # carrier-grade NAT, not globally routable
    "http://224.0.0.1/",
    "http://240.0.0.1/",
    "http://255.255.255.255/",
    "http://[::1]/",
    "http://[::]/",
    "http://[fc00::1]/",
    "http://[fd12:3456::1]/",
    "http://[fe80::1]/",
    "http://[ff02::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:169.254.169.254]/",
    "http://[64:ff9b::a00:1]/",  # NAT64 wrapping 10.0.0.1
    "http://[2002:a00:1::]/",  # 6to4 wrapping 10.0.0.1
    "http://localhost:8080/",
    "http://LOCALHOST./",
    "http://api.localhost/",
    # Spellings a resolver maps onto the ones above (IDNA: width, case and compatibility forms, ignored
    # characters such as the soft hyphen, ideographic full stops).
    "http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/",  # fullwidth 127.0.0.1
    "http://127\u30020\u30020\u30021/",  # ideographic full stops
    "http://\u2460\u2461\u2466.0.0.1/",  # circled digits 127
    "http://\u24dbocalhost/",  # circled l
    "http://local\u00adhost/",  # soft hyphen
    "http://loca\u200blhost:8080/",  # zero-width space
    "http://\uff2c\uff2f\uff23\uff21\uff2c\uff28\uff2f\uff33\uff34/",  # fullwidth LOCALHOST
    "http://api.\u2113ocalhost/",  # script small l
    "http://\u2070x7f.1/",  # superscript zero: 0x7f.1
]

MALFORMED_URLS = [
    ("ftp://example.com/file", "http or https"),
    ("file:///etc/passwd", "http or https"),
    ("gopher://example.com/", "http or https"),
    ("example.com/hook", "http or https"),
    ("https:///path-only", "host"),
    ("http://", "host"),
    ("https://user:pass@example.com/", "credentials"),
    ("https://token@example.com/", "credentials"),
    ("https://example.com:99999/", "not a valid URL"),
    ("http://[::1/", "not a valid URL"),
    ("https://exa mple.com/", "whitespace"),
    ("https://example.com/\r\nX-Injected: 1", "whitespace"),
    ("", "required"),
    ("https://" + "a" * 64 + ".example.com/", "not a valid host name"),
    ("https://a..b.example.com/", "not a valid host name"),
]


@pytest.mark.parametrize("url", PUBLIC_URLS)
def test_public_urls_pass(url: str) -> None:
    assert validate_target_url(url, allow_private=False) == url


@pytest.mark.parametrize("url", PRIVATE_URLS)
def test_private_literals_are_refused(url: str) -> None:
    with pytest.raises(UnsafeTargetError) as caught:
        validate_target_url(url, allow_private=False)
    assert caught.value.field == "request.url"
    assert caught.value.code == "unsafe_target"


@pytest.mark.parametrize("url", PRIVATE_URLS)
def test_private_literals_pass_when_allowed(url: str) -> None:
    assert validate_target_url(url, allow_private=True) == url


@pytest.mark.parametrize(("url", "reason"), MALFORMED_URLS)
@pytest.mark.parametrize("allow_private", [False, True])
def test_malformed_urls_are_rejected_whatever_the_setting(url: str, reason: str, allow_private: bool) -> None:
    with pytest.raises(InvalidInputError) as caught:
        validate_target_url(url, allow_private=allow_private)
    assert caught.value.field == "request.url"
    assert reason in caught.value.message


def test_length_limit() -> None:
    prefix = "https://example.com/"
    assert validate_target_url(prefix + "a" * (MAX_URL_LENGTH - len(prefix)), False)
    with pytest.raises(InvalidInputError, match="longer than"):
        validate_target_url(prefix + "a" * (MAX_URL_LENGTH - len(prefix) + 1), False)


def test_refusal_never_echoes_the_query_string() -> None:
    with pytest.raises(UnsafeTargetError) as caught:
        validate_target_url("http://169.254.169.254/?token=s3cr3t", allow_private=False)
    assert "s3cr3t" not in caught.value.message
    assert "link-local" in caught.value.message


@pytest.mark.parametrize("url", ["http://10.11.12.13/", "http://[fd12:3456::1]/", "http://zqxj.localhost/",
                                 "http://\uff11\uff10.0.0.1/"])
def test_refusal_never_echoes_the_host(url: str) -> None:
    with pytest.raises(UnsafeTargetError) as caught:
        validate_target_url(url, allow_private=False)
    assert not any(part in caught.value.message for part in ("10.", "11", "fd12", "zqxj", "\uff11"))


@pytest.mark.parametrize(("url", "port"), [
    ("http://example.com:8080/hook", 8080), ("https://example.com:8443/", 8443), ("http://example.com:443/", 443),
    ("https://example.com:80/", 80), ("http://127.0.0.1:9000/", 9000),
])
def test_a_port_the_deployment_cannot_reach_is_refused_naming_the_url_and_the_ports(url: str, port: int) -> None:
    """#22: the functions' security group lets only the deployment's target ports out."""
    ports = (443,) if port == 80 else (80,) if port == 443 else (80, 443)
    for check in (lambda: validate_target_url(url, True, ports), lambda: check_port(url, ports)):
        with pytest.raises(InvalidInputError) as raised:
            check()
        assert raised.value.field == "request.url"
        allowed = ", ".join(map(str, ports))
        assert raised.value.message == f"url port {port} cannot be reached: this deployment sends to ports {allowed} only"


@pytest.mark.parametrize("url", ["http://example.com/", "https://example.com/", "http://example.com:80/x",
                                 "https://example.com:443/", "HTTPS://example.com/"])
def test_the_schemes_default_ports_and_the_listed_ones_pass(url: str) -> None:
    assert validate_target_url(url, False, (80, 443)) == url
    check_port(url, (80, 443))


def test_no_target_ports_means_any_port() -> None:
    assert validate_target_url("http://127.0.0.1:54321/", True) == "http://127.0.0.1:54321/"
    check_port("http://127.0.0.1:54321/", ())


def test_unicode_public_names_pass() -> None:
    assert validate_target_url("https://b\u00fccher.example/", allow_private=False) == "https://b\u00fccher.example/"


class FakeResolver:
    """Stands in for socket.getaddrinfo: a fixed answer per host, and a record of what was asked."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, int, Any]] = []

    def __call__(self, host: str, port: int, family: int = 0, type: int = 0, proto: int = 0,
                 flags: int = 0) -> list[tuple[Any, ...]]:
        self.calls.append((host, port, type))
        if host not in self.answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        result = []
        for address in self.answers[host]:
            family_ = socket.AF_INET6 if ":" in address else socket.AF_INET
            sockaddr = (address, port, 0, 0) if family_ == socket.AF_INET6 else (address, port)
            result.append((family_, socket.SOCK_STREAM, 6, "", sockaddr))
        return result


def test_resolves_public_addresses_once_each_in_order() -> None:
    resolver = FakeResolver({"example.com": ["93.184.216.34", "2606:2800:220:1::1", "93.184.216.34"]})
    found = resolve_public_addresses("example.com", 443, allow_private=False, resolver=resolver)
    assert found == ["93.184.216.34", "2606:2800:220:1::1"]
    assert resolver.calls == [("example.com", 443, socket.SOCK_STREAM)]


@pytest.mark.parametrize("private", ["10.0.0.5", "127.0.0.1", "169.254.169.254", "::1", "fd00::1", "fe80::1%eth0",
                                     "::ffff:10.0.0.1", "0.0.0.0"])
def test_one_private_answer_refuses_the_host(private: str) -> None:
    resolver = FakeResolver({"rebind.example": ["93.184.216.34", private]})
    with pytest.raises(UnsafeTargetError, match="rebind.example resolves to"):
        resolve_public_addresses("rebind.example", 80, allow_private=False, resolver=resolver)


def test_private_answers_pass_when_allowed() -> None:
    resolver = FakeResolver({"internal.example": ["10.0.0.5"]})
    assert resolve_public_addresses("internal.example", 80, allow_private=True, resolver=resolver) == ["10.0.0.5"]


def test_resolution_failure_is_an_oserror() -> None:
    with pytest.raises(OSError):
        resolve_public_addresses("nowhere.invalid", 80, allow_private=False, resolver=FakeResolver({}))


@pytest.mark.parametrize("host", ["a" * 64 + ".example", "a..b.example"])
def test_a_host_with_no_idna_form_is_an_oserror(host: str) -> None:
    # The real getaddrinfo: it fails encoding the name (UnicodeError), before any DNS query is sent.
    with pytest.raises(OSError):
        resolve_public_addresses(host, 443, allow_private=False)


def test_empty_answer_is_an_oserror() -> None:
    with pytest.raises(OSError):
        resolve_public_addresses("empty.example", 80, allow_private=False, resolver=FakeResolver({"empty.example": []}))
