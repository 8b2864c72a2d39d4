"""The SSRF guard: which URLs a job may call, checked when the job is saved and again before each send.

The API check looks at the URL alone (an IP literal or localhost is judged on the spot); the executor's
check resolves the host, because a public name can point at a private address.
"""
from __future__ import annotations

import ipaddress
import socket
from typing import Any, Callable, Collection
from urllib.parse import SplitResult, urlsplit

from tickwork.errors import InvalidInputError, UnsafeTargetError

URL_FIELD = "request.url"
MAX_URL_LENGTH = 2048
ALLOWED_SCHEMES = ("http", "https")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[..., list[tuple[Any, ...]]]

# NAT64 (RFC 6052) embeds an IPv4 address in its last 32 bits; a private one is reachable through it.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def validate_target_url(url: str, allow_private: bool, ports: Collection[int] = ()) -> str:
    """The URL if Tickwork may send to it; InvalidInputError / UnsafeTargetError (field request.url) if not.
    `ports`: the only ports it may use (check_port); empty: any.

    Messages never name the host: a URL may carry a secret, and error bodies end up in client logs.
    """
    parts = _split(url)
    _check_port(parts, ports)
    host = resolver_host(_host(parts))
    if not allow_private:
        address = literal_address(host)
        if address is not None and not is_public(address):
            raise UnsafeTargetError(f"{_kind(address)} addresses are not allowed as targets")
        if address is None and _is_localhost(host):
            raise UnsafeTargetError("loopback addresses are not allowed as targets")
    return url


def check_port(url: str, ports: Collection[int]) -> None:
    """InvalidInputError (field request.url) unless the URL's port is one of `ports` (empty: any): the
    functions' security group lets only those out, and a request to another would hang until its timeout."""
    if ports:
        _check_port(_split(url), ports)


def _check_port(parts: SplitResult, ports: Collection[int]) -> None:
    port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    if ports and port not in ports:
        allowed = ", ".join(str(p) for p in sorted(ports))
        raise InvalidInputError(URL_FIELD, f"url port {port} cannot be reached: this deployment sends to ports "
                                           f"{allowed} only")


def resolver_host(host: str) -> str:
    """The name the resolver is asked for: socket.getaddrinfo and ssl encode a str host with the `idna`
    codec (IDNA 2003 nameprep), which maps `１２７.０.０.１` to 127.0.0.1 and `ⓛocalhost` or a soft-hyphened
    `local\u00adhost` to localhost. Judging any other spelling would let those past the check."""
    try:
        return host.encode("idna").decode("ascii").rstrip(".")
    except UnicodeError:
        raise InvalidInputError(URL_FIELD, "url host is not a valid host name") from None


def resolve_public_addresses(
    host: str, port: int, allow_private: bool, resolver: Resolver = socket.getaddrinfo
) -> list[str]:
    """Every address `host` resolves to, refusing the lot if any is non-public (unless allow_private).

    Refusing on ANY bad address defeats a name that answers with one public and one private record.
    Resolution failures surface as OSError (socket.gaierror), as from getaddrinfo itself.
    """
    try:
        infos = resolver(host, port, type=socket.SOCK_STREAM)
    except UnicodeError as exc:  # getaddrinfo's IDNA encoding: a label empty or over 63 characters
        raise OSError("the host name has no IDNA form") from exc
    addresses = list(dict.fromkeys(info[4][0] for info in infos))
    if not addresses:
        raise OSError(f"no addresses found for {host}")
    if allow_private:
        return addresses
    for raw in addresses:
        address = ipaddress.ip_address(raw.split("%", 1)[0])
        if not is_public(address):
            raise UnsafeTargetError(f"{host} resolves to a {_kind(address)} address")
    return addresses


def is_public(address: IPAddress) -> bool:
    """True only for globally routable unicast addresses, looking through IPv4-in-IPv6 wrappers."""
    embedded = _embedded_ipv4(address)
    if embedded is not None:
        return is_public(embedded)
    return address.is_global and not (
        address.is_multicast or address.is_reserved or address.is_loopback or address.is_link_local
        or address.is_unspecified or address.is_private
    )


def literal_address(host: str) -> IPAddress | None:
    """The address an IP-literal host denotes, including the legacy IPv4 forms resolvers accept.

    getaddrinfo reads `2130706433`, `0x7f.1` and `127.1` as 127.0.0.1, so `ipaddress` alone is not enough.
    """
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        pass
    if not host or not all(c in "0123456789abcdefx." for c in host):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def _split(url: str) -> SplitResult:
    if not isinstance(url, str) or not url:
        raise InvalidInputError(URL_FIELD, "url is required")
    if len(url) > MAX_URL_LENGTH:
        raise InvalidInputError(URL_FIELD, f"url is longer than {MAX_URL_LENGTH} characters")
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        raise InvalidInputError(URL_FIELD, "url contains whitespace or control characters")
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises ValueError for a port that is not a number in range
    except ValueError as exc:
        raise InvalidInputError(URL_FIELD, "url is not a valid URL") from exc
    if parts.scheme.lower() not in ALLOWED_SCHEMES:
        raise InvalidInputError(URL_FIELD, "url must use http or https")
    return parts


def _host(parts: SplitResult) -> str:
    if parts.username is not None or parts.password is not None:
        # Credentials in a URL end up in logs and history; they belong in a header, which is redacted.
        raise InvalidInputError(URL_FIELD, "url must not contain credentials; use the Authorization header")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise InvalidInputError(URL_FIELD, "url must include a host")
    return host


def _is_localhost(host: str) -> bool:
    # RFC 6761: every name under .localhost is loopback, whatever DNS says.
    return host == "localhost" or host.endswith(".localhost")


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address.sixtofour


def _kind(address: IPAddress) -> str:
    address = _embedded_ipv4(address) or address
    for kind in ("loopback", "link_local", "unspecified", "multicast", "private", "reserved"):
        if getattr(address, f"is_{kind}"):
            return kind.replace("_", "-")
    return "non-public"
