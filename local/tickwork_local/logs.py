"""Console logging for `make dev`: the Lambda code's own log lines, structured fields included."""
from __future__ import annotations

import logging
import sys

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD_ATTRIBUTES = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}
_FORMAT = "%(asctime)s %(levelname)-7s %(module)s: %(message)s"


class ConsoleFormatter(logging.Formatter):
    """One line per record, with the `extra` fields (execution_id, status, lag_ms...) appended as key=value.

    The module name stands in for the logger name, which Powertools prefixes with its service name.
    """

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        extras = [f"{key}={value}" for key, value in record.__dict__.items()
                  if key not in _STANDARD_ATTRIBUTES and not key.startswith("_")]
        return " ".join([line, *extras])


def configure_console(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(ConsoleFormatter(_FORMAT))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    # pgserver narrates initdb and pg_ctl at INFO; its warnings and errors are still shown.
    logging.getLogger("pgserver").setLevel(logging.WARNING)
