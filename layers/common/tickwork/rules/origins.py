"""The entries of a secret's `allowed_hosts`, each a scheme, a host and a port, and the origin a URL is sent to.
Pure: no I/O. What the entries restrict is tickwork.secrets.hosts; store/ reads a secret's two host columns
(`in_force`) and writes the older one (`bare_hosts`) through the same parser.

An entry is `scheme://host[:port]` (http or https; the scheme's port when none is written) or a bare host,
which means https on 443: what every entry meant before schemes and ports were bound, and how such entries
are shown (`https://api.example.com` is stored and shown as `api.example.com`). `*.example.com` stands for
exactly one more label, as in a TLS certificate: `api.example.com`, not `example.com` nor
`a.b.example.com`. Host names are compared lowercase, without a trailing dot; an IP address is written as it
is (`127.0.0.1`, `::1`; `http://[::1]:8080` with a port).

A release before this one reads only the bare hosts (`bare_hosts`, kept in a column of their own) and may
rewrite them; `in_force` says which entries hold.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Sequence
from urllib.parse import SplitResult, urlsplit

_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
_WILDCARD = "*."
MAX_HOST_CHARS = 253
DEFAULT_PORTS = {"https": 443, "http": 80}
BARE_SCHEME = "https"  # what an entry without a scheme means, on its default port

@dataclass(frozen=True)
class Origin:
    """Where a request goes (or, in an entry, may go): `host` may be a `*.` pattern in an entry."""

    scheme: str
    host: str
    port: int

    @property
    def url(self) -> str:
        """`scheme://host[:port]`, the port left out when it is the scheme's."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = "" if DEFAULT_PORTS[self.scheme] == self.port else f":{self.port}"
        return f"{self.scheme}://{host}{port}"

    @property
    def entry(self) -> str:
        """As an entry is stored and shown: bare for https on 443."""
        return self.host if (self.scheme, self.port) == (BARE_SCHEME, DEFAULT_PORTS[BARE_SCHEME]) else self.url


def parse_entry(entry: str) -> Origin | None:
    """An entry as given or stored; None if it is not one."""
    text = entry.strip().lower()
    if "://" not in text:
        host = _normal(text)
        return Origin(BARE_SCHEME, host, DEFAULT_PORTS[BARE_SCHEME]) if _valid(host) else None
    parts = _split(text)
    if parts is None or parts.path not in ("", "/") or parts.query or parts.fragment or "@" in parts.netloc:
        return None
    origin = _origin(parts)
    return origin if origin is not None and _valid(origin.host) else None


def bare_hosts(entries: Sequence[str]) -> list[str]:
    """The hosts of `entries` (stored entries), each once: what a release that binds hosts alone reads."""
    return list(dict.fromkeys(origin.host for origin in map(parse_entry, entries) if origin is not None))


def in_force(allowed_hosts: Sequence[str] | None, allowed_origins: Sequence[str] | None) -> list[str] | None:
    """A secret's entries from its two columns: `allowed_origins` as this release wrote them, unless a release
    that knows only `allowed_hosts` has changed those since (then they hold, each https on 443); None (any host)
    when `allowed_hosts` is null."""
    if allowed_hosts is None:
        return None
    if allowed_origins is not None and bare_hosts(allowed_origins) == list(allowed_hosts):
        return list(allowed_origins)
    return list(allowed_hosts)


def allowed(origin: Origin | None, entries: Sequence[str]) -> bool:
    """Whether a request to `origin` (as `url_origin` gives it) may carry a secret with these entries."""
    if origin is None:
        return False
    for pattern in map(parse_entry, entries):
        if pattern is not None and (pattern.scheme, pattern.port) == (origin.scheme, origin.port) and \
                _host_matches(origin.host, pattern.host):
            return True
    return False


def _host_matches(host: str, pattern: str) -> bool:
    if pattern.startswith(_WILDCARD):
        label, dot, rest = host.partition(".")
        return bool(label and dot) and rest == pattern[len(_WILDCARD):]
    return host == pattern


def url_host(url: str) -> str | None:
    """The host a URL is sent to, normalised as allowed_hosts are; None if it has none."""
    parts = _split(url)
    return None if parts is None else _host(parts)


def url_origin(url: str) -> Origin | None:
    """The scheme, host (normalised as allowed_hosts are) and port a URL is sent to; None without them."""
    parts = _split(url)
    return None if parts is None else _origin(parts)


def literal_origin(url_template: str) -> Origin | None:
    """The origin of a URL as written in a job, or None when a `${secrets.X}` reference sits in its scheme,
    host or port: then it is only known once the secret is in."""
    parts = _split(url_template)
    if parts is None or not parts.scheme or "${" in parts.netloc.rpartition("@")[2]:
        return None
    return _origin(parts)


def _split(url: str) -> SplitResult | None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError:
        return None
    return parts


def _origin(parts: SplitResult) -> Origin | None:
    scheme, host = parts.scheme.lower(), _host(parts)
    if scheme not in DEFAULT_PORTS or host is None or parts.port == 0:
        return None
    return Origin(scheme, host, parts.port or DEFAULT_PORTS[scheme])


def _host(parts: SplitResult) -> str | None:
    host = (parts.hostname or "").rstrip(".")
    if not host:
        return None
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return None
    return host.lower()


def _normal(entry: str) -> str:
    host = entry.rstrip(".")
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def _valid(host: str) -> bool:
    if host.startswith(_WILDCARD):
        rest = host[len(_WILDCARD):]
        return rest.count(".") >= 1 and _is_name(rest) and not _is_ip(rest)
    return _is_ip(host) or _is_name(host)


def _is_name(host: str) -> bool:
    return 0 < len(host) <= MAX_HOST_CHARS and all(_LABEL.match(label) for label in host.split("."))


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
