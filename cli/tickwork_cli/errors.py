"""The CLI's errors: each becomes one `Error: ...` line on stderr and exit code 1."""
from __future__ import annotations

import click

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_CHANGES = 2  # `plan --detailed-exitcode` with changes, as Terraform's


class CliError(click.ClickException):
    exit_code = EXIT_ERROR


class ApiError(CliError):
    """An error answer of the API: `{"error": {"code", "message", "field"}}` (docs/api.md#errors)."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        self.status, self.code, self.api_message, self.field = status, code, message, field
        where = f"{field}: " if field else ""
        super().__init__(f"{where}{message} ({status} {code})")
