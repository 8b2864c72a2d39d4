"""What an attempt came to, whatever kind of target it called: an answer, or a failure of a named kind. Pure.

Whether a failed attempt may be retried is its failure's kind (`FailureKind.retried`), never its error text:
the text is what history stores and shows, written by the target kind (tickwork.http.attempt_errors for HTTP).
What an answer's status means by default is tickwork.rules.success's (`status_failure`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class FailureKind(StrEnum):
    """Why an attempt failed."""

    REFUSED = "refused"  # not sent: the target or its request is not allowed (or not trusted); it would be again
    UNKNOWN_SECRET = "unknown_secret"  # not sent: the request names a secret its tenant does not have
    CONNECTION = "connection"  # the target could not be reached, or the connection failed under the attempt
    TIMEOUT = "timeout"  # the attempt's time ran out: before the call, or waiting for its answer
    REDIRECT = "redirect"  # the target answered with a redirect, never followed
    REJECTED_STATUS = "rejected_status"  # the target answered no (a 4xx but 408 and 429; a 1xx): it would again
    TRANSIENT_STATUS = "transient_status"  # the target answered "not now" (408, 429, any 5xx)
    SUCCESS_RULE = "success_rule"  # the target answered, not as the job's success rules expect
    SERVICE_ERROR = "service_error"  # a call to a service (SNS) failed, its error code in the text
    CALLBACK = "callback"  # the completion callback reported failed, or none came in time
    LOST = "lost"  # its executor never reported

    @property
    def retried(self) -> bool:
        """Whether the job's retry policy may try again: not when a retry could only repeat the failure."""
        return self not in _NOT_RETRIED


_NOT_RETRIED = frozenset({FailureKind.REFUSED, FailureKind.UNKNOWN_SECRET, FailureKind.REDIRECT,
                          FailureKind.REJECTED_STATUS})


@dataclass(frozen=True)
class Failure:
    """A failure before any answer: its kind and the error history keeps (never a secret, never the URL)."""

    kind: FailureKind
    error: str


@dataclass(frozen=True)
class Outcome:
    """An attempt's result: the answer's status and what is kept of its body (None without an answer), the
    error history keeps, how long it took, when the target asked to be retried, and `failure`: None if it
    succeeded, else its kind (required, so that no outcome is a success by omission)."""

    status_code: int | None
    body: str | None
    error: str | None
    duration_ms: int
    retry_after_seconds: float | None = None
    failure: FailureKind | None = field(kw_only=True)

    @property
    def succeeded(self) -> bool:
        return self.failure is None

    @property
    def retryable(self) -> bool:
        return self.failure is not None and self.failure.retried

    @classmethod
    def failed(cls, failure: Failure, duration_ms: int = 0) -> Outcome:
        """No answer: the attempt failed as `failure` says."""
        return cls(None, None, failure.error, duration_ms, failure=failure.kind)

