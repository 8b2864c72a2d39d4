"""Where a secret may be sent: its `allowed_hosts`. No I/O.

A key that may edit jobs could otherwise point a job using `${secrets.X}` at its own host and read the
value there, or at the same host over plain http, where anyone on the path reads it. A secret with allowed
hosts is expanded only into a request whose URL's scheme, host and port are one of its entries: checked when
a job is saved (`check_request`, on the URL as written) and again before each attempt (`refusal`, on the URL
as sent, which a secret in the URL could have changed). What an entry is, and how a URL's origin is read, is
tickwork.rules.origins.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from tickwork.errors import InvalidInputError
from tickwork.rules.origins import Origin, allowed, literal_origin, parse_entry, url_origin
from tickwork.secrets import interpolation

MAX_ALLOWED_HOSTS = 20

def parse_allowed_hosts(given: Sequence[str]) -> list[str]:
    """The list as stored (lowercase, each once, in the order given); InvalidInputError naming
    `allowed_hosts.<i>` for an entry that is no host name, IP address or `*.` and a host name, optionally
    after `http://` or `https://` and before `:port`."""
    if not given:
        raise InvalidInputError("allowed_hosts", "give at least one host, or null to allow any host")
    if len(given) > MAX_ALLOWED_HOSTS:
        raise InvalidInputError("allowed_hosts", f"at most {MAX_ALLOWED_HOSTS} hosts")
    parsed = []
    for index, entry in enumerate(given):
        origin = parse_entry(entry)
        if origin is None:
            raise InvalidInputError(f"allowed_hosts.{index}", (
                "must be a host name (api.example.com: https on port 443), an IP address, or *. and a host name of "
                "two labels or more, or one of those as http://host, https://host or either with :port"))
        parsed.append(origin.entry)
    return list(dict.fromkeys(parsed))


def check_request(request: Mapping[str, Any], restrictions: Mapping[str, Sequence[str] | None]) -> None:
    """InvalidInputError naming the field of the first reference to a secret with allowed hosts that the
    request's URL, as written, is not sent to. `restrictions`: each secret's allowed hosts (None: any)."""
    origin: Origin | None = None
    for field, name in interpolation.references(request):
        patterns = restrictions.get(name)
        if patterns is None:
            continue
        origin = origin or literal_origin(request.get("url") or "")
        if origin is None:
            raise InvalidInputError(field, f"secret {name} may only be sent to its allowed_hosts, and the URL's "
                                           "scheme, host or port is built from a secret: write them in request.url")
        if not allowed(origin, patterns):
            raise InvalidInputError(field, f"secret {name} is not allowed for the scheme, host and port of "
                                           "request.url (see the secret's allowed_hosts)")


def refusal(url: str, used: Sequence[str], restrictions: Mapping[str, Sequence[str] | None]) -> str | None:
    """Why a request to `url` (as sent) may not carry the secrets `used`, or None if it may."""
    origin = url_origin(url)
    for name in sorted(used):
        patterns = restrictions.get(name)
        if patterns is not None and not allowed(origin, patterns):
            return f"secret {name} is not allowed for {origin.url if origin else '(no host)'}"
    return None

