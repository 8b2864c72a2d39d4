"""Where a secret may be sent: its `allowed_hosts`, exact host names or `*.example.com`. No I/O.

A key that may edit jobs could otherwise point a job using `${secrets.X}` at its own host and read the
value there. A secret with allowed hosts is expanded only into a request whose URL's host is one of them:
checked when a job is saved (`check_request`, on the URL as written) and again before each attempt
(`refusal`, on the URL as sent, which a secret in the URL could have changed).

`*.example.com` stands for exactly one more label, as in a TLS certificate: `api.example.com`, not
`example.com` nor `a.b.example.com`. Host names are compared lowercase, without a trailing dot; an IP
address is written as it is (`127.0.0.1`, `::1`).
"""
from __future__ import annotations

import ipaddress
import re
from typing import Any, Mapping, Sequence
from urllib.parse import urlsplit

from tickwork.errors import InvalidInputError
from tickwork.secrets import interpolation

MAX_ALLOWED_HOSTS = 20
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
_WILDCARD = "*."
MAX_HOST_CHARS = 253


def parse_allowed_hosts(given: Sequence[str]) -> list[str]:
    """The list as stored (lowercase, each once, in the order given); InvalidInputError naming
    `allowed_hosts.<i>` for an entry that is no host name, IP address or `*.` and a host name."""
    if not given:
        raise InvalidInputError("allowed_hosts", "give at least one host, or null to allow any host")
    if len(given) > MAX_ALLOWED_HOSTS:
        raise InvalidInputError("allowed_hosts", f"at most {MAX_ALLOWED_HOSTS} hosts")
    parsed = []
    for index, entry in enumerate(given):
        host = _normal(entry)
        if not _valid(host):
            raise InvalidInputError(f"allowed_hosts.{index}", "must be a host name (api.example.com), an IP address, "
                                                               "or *. and a host name of two labels or more")
        parsed.append(host)
    return list(dict.fromkeys(parsed))


def allowed(host: str, patterns: Sequence[str]) -> bool:
    """Whether `host` (as `url_host` gives it) matches one of `patterns` (as stored)."""
    for pattern in patterns:
        if pattern.startswith(_WILDCARD):
            label, dot, rest = host.partition(".")
            if label and dot and rest == pattern[len(_WILDCARD):]:
                return True
        elif host == pattern:
            return True
    return False


def url_host(url: str) -> str | None:
    """The host a URL is sent to, normalised as allowed_hosts are; None if it has none."""
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None
    if not host:
        return None
    host = host.rstrip(".")
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return None
    return host.lower()


def literal_host(url_template: str) -> str | None:
    """The host of a URL as written in a job, or None when a `${secrets.X}` reference sits in its host or
    port: then the host is only known once the secret is in."""
    try:
        netloc = urlsplit(url_template).netloc
    except ValueError:
        return None
    if "${" in netloc.rpartition("@")[2]:
        return None
    return url_host(url_template)


def check_request(request: Mapping[str, Any], restrictions: Mapping[str, Sequence[str] | None]) -> None:
    """InvalidInputError naming the field of the first reference to a secret with allowed hosts that the
    request's URL, as written, is not sent to. `restrictions`: each secret's allowed hosts (None: any)."""
    host: str | None = None
    for field, name in interpolation.references(request):
        patterns = restrictions.get(name)
        if patterns is None:
            continue
        host = host or literal_host(request.get("url") or "")
        if host is None:
            raise InvalidInputError(field, f"secret {name} may only be sent to its allowed_hosts, and the URL's host "
                                           "is built from a secret: write the host itself in request.url")
        if not allowed(host, patterns):
            raise InvalidInputError(field, f"secret {name} is not allowed for the host of request.url "
                                           "(see the secret's allowed_hosts)")


def refusal(url: str, used: Sequence[str], restrictions: Mapping[str, Sequence[str] | None]) -> str | None:
    """Why a request to `url` (as sent) may not carry the secrets `used`, or None if it may."""
    host = url_host(url)
    for name in sorted(used):
        patterns = restrictions.get(name)
        if patterns is not None and (host is None or not allowed(host, patterns)):
            return f"secret {name} is not allowed for host {host or '(none)'}"
    return None


def _normal(entry: str) -> str:
    host = entry.strip().lower().rstrip(".")
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
