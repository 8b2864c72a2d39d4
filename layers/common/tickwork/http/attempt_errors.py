"""What an attempt's error says: built from the failure's kind and the stage it happened at, never from
the exception's message (urllib3 puts the full URL, whose query may carry a token, into its messages, and
attempts are stored and shown to users).

The stage tells the operator what the target may have seen (docs/operations.md, "What an error means"):
- nothing was sent: could not resolve, could not connect, a certificate not trusted, the attempt's time
  gone before the write, a connection closed by the target before the request was written;
- the request, or part of it, was sent and no whole answer came back: the target may have acted on it.
Errors starting with "refused:" are not retried (tickwork.http.delivery.NOT_RETRIED).
"""
from __future__ import annotations

import http.client
import ssl

from urllib3 import exceptions as ux
from urllib3.util.ssl_match_hostname import CertificateError as HostnameMismatchError

from tickwork.errors import LateError

CONNECTING = "connecting"  # opening the connection (ahead of the instant, or at it)
WRITING = "writing"  # writing the request
AWAITING = "awaiting"  # the request was written; no status line yet
READING = "reading"  # the status line arrived; reading the rest of the answer

# OpenSSL's verify results, said without the host name some of their messages carry.
_CERTIFICATE_PROBLEMS = {
    9: "not yet valid",
    10: "expired",
    18: "self-signed",
    19: "issued by an unknown CA",
    20: "issued by an unknown CA",
    21: "issued by an unknown CA",
    62: "issued for another host name",
    64: "issued for another IP address",
}
AFTER_WRITE = "the target may have acted on it"


def describe(
    exc: BaseException, timeout: float, stage: str, status: int | None = None, written: bool = False,
    unread: bool = False,
) -> str:
    """The error of an attempt that failed with `exc` at `stage` (`written`: some of the request left;
    `unread`: the connection was reset before any answer, so the target never read the request)."""
    connecting = _connecting(exc, timeout)
    if connecting is not None:
        return connecting
    if stage == CONNECTING:
        if isinstance(exc, (TimeoutError, ux.ConnectTimeoutError)):
            return f"timeout: could not connect within {timeout:g}s"
        if isinstance(exc, (ssl.SSLError, ux.SSLError)):
            return "connection failed: TLS handshake failed"
        if isinstance(exc, ConnectionError):
            return "connection failed: closed by the target while connecting"
    elif stage == WRITING:
        return _writing(exc, timeout, written)
    elif stage == AWAITING:
        if unread:
            # Seen here when the new connection it was moved to (tickwork.http.delivery) was reset as well.
            return "connection failed: reset by the target before it read the request (nothing was acted on)"
        return _awaiting(exc, timeout)
    elif stage == READING:
        return _reading(exc, timeout, status)
    return f"connection failed: {type(exc).__name__}"


def _connecting(exc: BaseException, timeout: float) -> str | None:
    """Failures that only opening a connection has (also when it opens at the write): nothing was sent."""
    # Order matters: urllib3's NewConnectionError subclasses ConnectTimeoutError.
    if isinstance(exc, ux.NameResolutionError):
        return "connection failed: could not resolve host"
    if isinstance(exc, ux.NewConnectionError):
        return "connection failed: could not connect"
    if isinstance(exc, ux.ConnectTimeoutError):
        return f"timeout: could not connect within {timeout:g}s"
    if isinstance(exc, LateError):
        return f"timeout: not sent, the attempt's {timeout:g}s had run out before its request could be written"
    if isinstance(exc, ssl.SSLCertVerificationError):
        problem = _CERTIFICATE_PROBLEMS.get(exc.verify_code, "not trusted")
        return f"refused: the target's TLS certificate is {problem}"
    if isinstance(exc, HostnameMismatchError):
        return "refused: the target's TLS certificate is issued for another host name"
    return None


def _writing(exc: BaseException, timeout: float, written: bool) -> str:
    if not written:
        # The one case retried at once on a new connection (tickwork.http.delivery): seen here when that failed too.
        return "connection failed: closed by the target before the request was written (nothing was sent)"
    if isinstance(exc, TimeoutError):
        return f"timeout: the request could not be written within {timeout:g}s (the target stopped reading it)"
    return f"connection failed: closed while the request was written ({AFTER_WRITE})"


def _awaiting(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, TimeoutError):
        return f"timeout: no response within {timeout:g}s"
    if isinstance(exc, (ConnectionError, ssl.SSLEOFError)):  # http.client.RemoteDisconnected included
        return f"connection failed: closed after the request was written, before any response ({AFTER_WRITE})"
    if isinstance(exc, ssl.SSLError):
        return f"connection failed: TLS error after the request was written ({AFTER_WRITE})"
    if isinstance(exc, http.client.HTTPException):
        return f"connection failed: the answer is not HTTP ({AFTER_WRITE})"
    return f"connection failed: {type(exc).__name__} after the request was written ({AFTER_WRITE})"


def _reading(exc: BaseException, timeout: float, status: int | None) -> str:
    answer = f"the response (HTTP {status})"
    if isinstance(exc, TimeoutError):
        return f"timeout: {answer} did not finish within {timeout:g}s"
    if isinstance(exc, (http.client.IncompleteRead, ConnectionError, ssl.SSLError)):
        return f"connection failed: {answer} was cut off ({AFTER_WRITE})"
    if isinstance(exc, http.client.HTTPException):
        return f"connection failed: {answer} is not valid HTTP ({AFTER_WRITE})"
    return f"connection failed: {type(exc).__name__} while reading {answer} ({AFTER_WRITE})"
