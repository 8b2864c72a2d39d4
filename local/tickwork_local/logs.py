"""Console logging for `make dev`: the Lambda code's own log lines, structured fields included."""
from __future__ import annotations

import logging
import sys
from typing import Any

from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

from tickwork.logs import function_logger

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD_ATTRIBUTES = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}
_FORMAT = "%(asctime)s %(levelname)-7s %(module)s: %(message)s"
# Keys of a Powertools line the console leaves out: the same on every line, or noise on one machine.
_POWERTOOLS_KEYS = frozenset({
    "level", "location", "message", "timestamp", "service", "sampling_rate", "cold_start", "xray_trace_id",
    "function_name", "function_memory_size", "function_arn", "function_request_id", "exception", "exception_name",
    "exception_notes", "stack_trace", "version",
})


class ConsoleFormatter(logging.Formatter):
    """One line per record, with the `extra` fields (execution_id, status, lag_ms...) appended as key=value.

    The module name stands in for the logger name, which Powertools prefixes with its service name.
    """

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        extras = [f"{key}={value}" for key, value in record.__dict__.items()
                  if key not in _STANDARD_ATTRIBUTES and not key.startswith("_")]
        return " ".join([line, *extras])


class PowertoolsConsoleFormatter(LambdaPowertoolsFormatter):
    """The functions' Powertools lines (tickwork.logs) in the console's shape instead of JSON."""

    _module = ""

    def format(self, record: logging.LogRecord) -> str:
        self._module = record.module  # the handler formats one record at a time, under its lock
        return super().format(record)

    def serialize(self, log: dict[str, Any]) -> str:  # type: ignore[override]
        extras = [f"{key}={value}" for key, value in log.items() if key not in _POWERTOOLS_KEYS]
        line = " ".join([f"{log['timestamp']} {log['level']:<7} {self._module}: {log['message']}", *extras])
        return line + ("\n" + log["exception"] if log.get("exception") else "")


def configure_console(level: int = logging.INFO) -> None:
    # The functions' parent Logger first, on the console (the handler modules then reuse it): set up
    # before the root handler, so Powertools' filter, which drops every logger whose name contains the
    # service's (tickwork_local's too), lands on no handler of ours; not propagating, so no line shows twice.
    functions = function_logger(logging.StreamHandler(sys.stderr), PowertoolsConsoleFormatter())
    logging.getLogger(functions.service).propagate = False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(ConsoleFormatter(_FORMAT))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    # pgserver narrates initdb and pg_ctl at INFO; its warnings and errors are still shown.
    logging.getLogger("pgserver").setLevel(logging.WARNING)
