"""Every error Tickwork raises on purpose; `tickwork.api.errors` maps them to HTTP in one place."""
from __future__ import annotations


class TickworkError(Exception):
    """Base class: `code` is the stable machine-readable name clients can switch on."""

    code = "internal_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInputError(TickworkError):
    """Bad input from a user: names the field and the reason."""

    code = "invalid_request"

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field


class InvalidJsonError(InvalidInputError):
    """A request body that is not JSON Tickwork reads: malformed, not UTF-8, too deeply nested."""

    code = "invalid_json"

    def __init__(self, message: str) -> None:
        super().__init__("body", message)


class PayloadTooLargeError(TickworkError):
    """A request body over what its route takes, refused before it is read."""

    code = "payload_too_large"
    field = "body"


class ScheduleError(InvalidInputError):
    """A schedule expression, time zone or window that cannot be used."""

    code = "invalid_schedule"

    def __init__(self, message: str, field: str = "schedule") -> None:
        super().__init__(field, message)


class UnauthorizedError(TickworkError):
    code = "unauthorized"


class NotFoundError(TickworkError):
    code = "not_found"

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class ConflictError(TickworkError):
    code = "conflict"

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class QuotaExceededError(TickworkError):
    """A create, update or resume that would take the tenant past one of its quotas (`field` names it)."""

    code = "quota_exceeded"

    def __init__(self, field: str, limit: int, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.limit = limit


class MissingScopeError(TickworkError):
    """The API key lacks the scope the call needs (tickwork.tenant.access); the message names it."""

    code = "missing_scope"

    def __init__(self, message: str, scope: str, field: str | None = None) -> None:
        super().__init__(message)
        self.scope = scope
        self.field = field


class RateLimitedError(TickworkError):
    """The API key spent its request budget; `headers` say when to come back (Retry-After, RateLimit-*)."""

    code = "rate_limited"

    def __init__(self, message: str, headers: dict[str, str]) -> None:
        super().__init__(message)
        self.headers = headers


class StatementTimeoutError(TickworkError):
    """A query of the request ran past the API's statement timeout and PostgreSQL cancelled it."""

    code = "statement_timeout"


class IdempotencyKeyReusedError(TickworkError):
    """An Idempotency-Key sent again with another request than the one it was first used for."""

    code = "idempotency_key_reused"
    field = "Idempotency-Key"


class UnsafeTargetError(InvalidInputError):
    """The request URL points somewhere Tickwork refuses to send (SSRF guard)."""

    code = "unsafe_target"

    def __init__(self, message: str, field: str = "request.url") -> None:
        super().__init__(field, message)


class ConfigurationError(TickworkError):
    """The deployment is missing a setting; raised at cold start, never per request."""

    code = "configuration_error"


class MigrationLockError(TickworkError):
    """A schema migration waited longer than its lock timeout on every try (tickwork.store.migrate): a long
    transaction holds a table it alters, or another migration is running. What it applied before stays."""

    code = "migration_lock_timeout"


class UnknownSecretError(TickworkError):
    """A job's request references a secret the tenant does not have (tickwork.secrets.interpolation)."""

    code = "unknown_secret"

    def __init__(self, name: str) -> None:
        super().__init__(f"unknown secret {name}")
        self.name = name


class SecretHostError(TickworkError):
    """A secret's value would be sent to a host not among its allowed hosts (tickwork.secrets.hosts).
    `values`: the request's secret values, which its message must be redacted of (the host may hold one)."""

    code = "secret_host_not_allowed"

    def __init__(self, message: str, values: tuple[str, ...]) -> None:
        super().__init__(message)
        self.values = values


class SealError(TickworkError):
    """A sealed value that does not open: wrong row, wrong field, tampered, or its key is gone."""

    code = "sealed_value_unreadable"


class LateError(TimeoutError):
    """An attempt's time ran out before its request could be written: nothing was sent (tickwork.http)."""


class CalendarUnreadableError(TickworkError):
    """A calendar a job excludes by could not be read or compiled (its stored form is broken): the poller sets
    that job aside (tickwork.dispatch.quarantine). Never reaches the API."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(f"a calendar could not be read: {type(cause).__name__}")
        self.cause = cause
