"""Sends one HTTP attempt with urllib3 and describes what happened, without leaking secrets.

Error texts are built from the failure's kind, never from the exception message: urllib3 puts the full
URL (query strings carry tokens) into its messages, and attempts are stored and shown to users.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Mapping
from urllib.parse import urlsplit

import urllib3
from urllib3 import exceptions as ux

from tickwork.retry import is_retryable_status

# Enough of a response to debug a failing target; history rows stay small.
MAX_STORED_BODY_BYTES = 4096
USER_AGENT = "Tickwork/0.1"
# Long enough for a slow webhook, well short of the executor's own cap (settings.max_request_timeout_seconds).
DEFAULT_TIMEOUT_SECONDS = 30


@dataclass(frozen=True)
class Outcome:
    status_code: int | None
    body: str | None
    error: str | None
    duration_ms: int
    retry_after_seconds: float | None = None

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300

    @property
    def retryable(self) -> bool:
        if self.status_code is None:
            return self.error is not None and not self.error.startswith("refused:")
        return is_retryable_status(self.status_code)


def _describe_error(exc: Exception, timeout: float) -> str:
    # Order matters: urllib3's NewConnectionError subclasses ConnectTimeoutError.
    if isinstance(exc, ux.NameResolutionError):
        return "connection failed: could not resolve host"
    if isinstance(exc, ux.NewConnectionError):
        return "connection failed: could not connect"
    if isinstance(exc, ux.SSLError):
        return "connection failed: TLS handshake error"
    if isinstance(exc, (ux.ConnectTimeoutError, ux.ReadTimeoutError, TimeoutError)):
        return f"timeout: no response within {timeout:g}s"
    if isinstance(exc, ux.ProtocolError):
        return "connection failed: connection dropped before a response"
    return f"connection failed: {type(exc).__name__}"


def _retry_after(headers: Mapping[str, str], now: float) -> float | None:
    raw = headers.get("retry-after")
    if not raw:
        return None
    if raw.strip().isdigit():
        return float(raw.strip())
    try:
        return max(0.0, parsedate_to_datetime(raw).timestamp() - now)
    except (TypeError, ValueError):
        return None


def _truncate(data: bytes) -> str:
    return data[:MAX_STORED_BODY_BYTES].decode("utf-8", errors="replace")


def send(
    http: urllib3.PoolManager, request: Mapping[str, Any], extra_headers: Mapping[str, str], timeout: float,
    pinned_address: str | None = None,
) -> Outcome:
    """One attempt: no redirects followed (a redirect could point inside the network), no urllib3 retries.

    With `pinned_address` the connection goes to that IP (the one the SSRF guard checked) while Host,
    TLS SNI and certificate checks keep using the URL's host name: a second DNS answer cannot redirect it.
    """
    headers = {"User-Agent": USER_AGENT, **request.get("headers", {}), **extra_headers}
    body = request.get("body")
    started = time.monotonic()
    try:
        pool, target = _pool_and_target(http, request["url"], pinned_address, headers)
        response = pool.urlopen(
            request.get("method", "GET"), target, body=body.encode() if isinstance(body, str) else body,
            headers=headers, timeout=urllib3.Timeout(total=timeout), retries=False, redirect=False,
            preload_content=False,
        )
        data = response.read(MAX_STORED_BODY_BYTES)
        if response.read(1):
            # A longer body is not worth downloading: drop the connection instead of draining it.
            response.close()
        response.release_conn()
    except Exception as exc:  # every transport failure becomes a recorded, classified attempt
        return Outcome(None, None, _describe_error(exc, timeout), int((time.monotonic() - started) * 1000))
    duration = int((time.monotonic() - started) * 1000)
    error = None
    if 300 <= response.status < 400:
        error = "redirect not followed"
    elif response.status >= 400:
        error = f"HTTP {response.status}"
    return Outcome(response.status, _truncate(data), error, duration, _retry_after(response.headers, time.time()))


def _pool_and_target(
    http: urllib3.PoolManager, url: str, pinned_address: str | None, headers: dict[str, str]
) -> tuple[Any, str]:
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if pinned_address is None:
        return http.connection_from_url(url), path
    host, port = host_and_port(url)
    headers["Host"] = parts.netloc.rsplit("@", 1)[-1]
    tls = {"server_hostname": host, "assert_hostname": host} if parts.scheme == "https" else None
    return http.connection_from_host(pinned_address, port, parts.scheme, pool_kwargs=tls), path


def request_timeout_seconds(request: Mapping[str, Any], ceiling: float) -> float:
    """The timeout the executor gives a job's request (the sweeper waits at least this long too)."""
    return min(float(request.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS)), ceiling)


def host_and_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
