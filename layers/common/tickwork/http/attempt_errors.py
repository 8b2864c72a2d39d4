"""What an attempt's error says: built from the failure's kind and the stage it happened at, never from
the exception's message (urllib3 puts the full URL, whose query may carry a token, into its messages, and
attempts are stored and shown to users).

The stage tells the operator what the target may have seen (docs/operations.md, "What an error means"):
- nothing was sent: could not resolve, could not connect, a certificate not trusted, the attempt's time
  gone before the write, a connection closed by the target before the request was written;
- the request, or part of it, was sent and no whole answer came back: the target may have acted on it.
Each error comes with its failure's kind (tickwork.outcome), which says whether it is retried; the
text is for people.
"""
from __future__ import annotations

import http.client
import ssl

from urllib3 import exceptions as ux
from urllib3.util.ssl_match_hostname import CertificateError as HostnameMismatchError

from tickwork.errors import LateError
from tickwork.outcome import Failure, FailureKind

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
) -> Failure:
    """The failure of an attempt that failed with `exc` at `stage` (`written`: some of the request left;
    `unread`: the connection was reset before any answer, so the target never read the request)."""
    connecting = _connecting(exc, timeout)
    if connecting is not None:
        return connecting
    if stage == CONNECTING:
        if isinstance(exc, (TimeoutError, ux.ConnectTimeoutError)):
            return _timeout(f"could not connect within {timeout:g}s")
        if isinstance(exc, (ssl.SSLError, ux.SSLError)):
            return _connection("TLS handshake failed")
        if isinstance(exc, ConnectionError):
            return _connection("closed by the target while connecting")
    elif stage == WRITING:
        return _writing(exc, timeout, written)
    elif stage == AWAITING:
        if unread:
            # Seen here when the new connection it was moved to (tickwork.http.delivery) was reset as well.
            return _connection("reset by the target before it read the request (nothing was acted on)")
        return _awaiting(exc, timeout)
    elif stage == READING:
        return _reading(exc, timeout, status)
    return _connection(type(exc).__name__)


def _connecting(exc: BaseException, timeout: float) -> Failure | None:
    """Failures that only opening a connection has (also when it opens at the write): nothing was sent."""
    # Order matters: urllib3's NewConnectionError subclasses ConnectTimeoutError.
    if isinstance(exc, ux.NameResolutionError):
        return _connection("could not resolve host")
    if isinstance(exc, ux.NewConnectionError):
        return _connection("could not connect")
    if isinstance(exc, ux.ConnectTimeoutError):
        return _timeout(f"could not connect within {timeout:g}s")
    if isinstance(exc, LateError):
        return _timeout(f"not sent, the attempt's {timeout:g}s had run out before its request could be written")
    if isinstance(exc, ssl.SSLCertVerificationError):
        problem = _CERTIFICATE_PROBLEMS.get(exc.verify_code, "not trusted")
        return _refused(f"the target's TLS certificate is {problem}")
    if isinstance(exc, HostnameMismatchError):
        return _refused("the target's TLS certificate is issued for another host name")
    return None


def _writing(exc: BaseException, timeout: float, written: bool) -> Failure:
    if not written:
        # The one case retried at once on a new connection (tickwork.http.delivery): seen here when that failed too.
        return _connection("closed by the target before the request was written (nothing was sent)")
    if isinstance(exc, TimeoutError):
        return _timeout(f"the request could not be written within {timeout:g}s (the target stopped reading it)")
    return _connection(f"closed while the request was written ({AFTER_WRITE})")


def _awaiting(exc: BaseException, timeout: float) -> Failure:
    if isinstance(exc, TimeoutError):
        return _timeout(f"no response within {timeout:g}s")
    if isinstance(exc, (ConnectionError, ssl.SSLEOFError)):  # http.client.RemoteDisconnected included
        return _connection(f"closed after the request was written, before any response ({AFTER_WRITE})")
    if isinstance(exc, ssl.SSLError):
        return _connection(f"TLS error after the request was written ({AFTER_WRITE})")
    if isinstance(exc, http.client.HTTPException):
        return _connection(f"the answer is not HTTP ({AFTER_WRITE})")
    return _connection(f"{type(exc).__name__} after the request was written ({AFTER_WRITE})")


def _reading(exc: BaseException, timeout: float, status: int | None) -> Failure:
    answer = f"the response (HTTP {status})"
    if isinstance(exc, TimeoutError):
        return _timeout(f"{answer} did not finish within {timeout:g}s")
    if isinstance(exc, (http.client.IncompleteRead, ConnectionError, ssl.SSLError)):
        return _connection(f"{answer} was cut off ({AFTER_WRITE})")
    if isinstance(exc, http.client.HTTPException):
        return _connection(f"{answer} is not valid HTTP ({AFTER_WRITE})")
    return _connection(f"{type(exc).__name__} while reading {answer} ({AFTER_WRITE})")


# Each kind's error begins with its word, as operators read them (docs/operations.md, "What an error means").

def _timeout(what: str) -> Failure:
    return Failure(FailureKind.TIMEOUT, f"timeout: {what}")


def _refused(what: str) -> Failure:
    return Failure(FailureKind.REFUSED, f"refused: {what}")


def _connection(what: str) -> Failure:
    return Failure(FailureKind.CONNECTION, f"connection failed: {what}")
