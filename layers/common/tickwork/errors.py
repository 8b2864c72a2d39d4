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


class ScheduleError(InvalidInputError):
    """A schedule expression, time zone or window that cannot be used."""

    code = "invalid_schedule"

    def __init__(self, message: str, field: str = "schedule") -> None:
        super().__init__(field, message)


class UnauthorizedError(TickworkError):
    code = "unauthorized"


class NotFoundError(TickworkError):
    code = "not_found"


class ConflictError(TickworkError):
    code = "conflict"


class UnsafeTargetError(InvalidInputError):
    """The request URL points somewhere Tickwork refuses to send (SSRF guard)."""

    code = "unsafe_target"

    def __init__(self, message: str, field: str = "request.url") -> None:
        super().__init__(field, message)


class ConfigurationError(TickworkError):
    """The deployment is missing a setting; raised at cold start, never per request."""

    code = "configuration_error"
