"""The functions' logs: one JSON object per line on stdout (CloudWatch keeps each as one event).

Each handler module creates the parent Logger (`function_logger`) and wraps its handler in
`with_lambda_context`. The modules' `Logger(child=True)` records propagate to it, so every line carries
`service`, the release (`version`, tickwork.__version__) and the invocation's `function_name`,
`function_request_id` and `cold_start`, plus the ids the module passed in `extra` (`job_id`, `execution_id`,
`attempt`, `lag_ms`...): during an upgrade, two releases log side by side.
"""
from __future__ import annotations

import functools
import logging
import os
import sys
from typing import Any, Callable, TypeVar

from aws_lambda_powertools import Logger

from tickwork import __version__

Handler = TypeVar("Handler", bound=Callable[[Any, Any], Any])
# What Powertools reads from the context (logging/lambda_context.py).
_CONTEXT_ATTRIBUTES = ("function_name", "memory_limit_in_mb", "invoked_function_arn", "aws_request_id")


class _CurrentStdout(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to sys.stdout as it is at each record, not as it was when the handler module was imported
    (a test's capture, or an interpreter's, may replace it in between)."""

    def __init__(self) -> None:
        super().__init__(sys.stdout)

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stdout

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def function_logger(handler: logging.Handler | None = None, formatter: Any = None) -> Logger:
    """The parent Logger of the function's process, for the service POWERTOOLS_SERVICE_NAME names:
    JSON lines on stdout unless a `handler` (and a Powertools `formatter`) is given.

    A later call in the same process (the local runtime loads all three functions) returns a Logger on
    the one already set up, whatever it is given: a runtime that sets it up first (tickwork_local's
    console) keeps its own output.
    """
    service = os.environ["POWERTOOLS_SERVICE_NAME"]  # tickwork/__init__.py gives it a default
    if getattr(logging.getLogger(service), "init", False):
        return Logger(service=service)
    logger = Logger(service=service, logger_handler=handler or _CurrentStdout(), logger_formatter=formatter)
    # A key of the formatter, which every record of the process goes through: set once, not per call.
    logger.append_keys(version=__version__)
    return logger


def with_lambda_context(logger: Logger) -> Callable[[Handler], Handler]:
    """The handler, adding the Lambda context's fields (Powertools' inject_lambda_context) to every line
    logged during an invocation. Called without a Lambda context (None, or a test's stand-in that lacks
    the request id and function name), it just runs the handler."""

    def decorate(handler: Handler) -> Handler:
        injected = logger.inject_lambda_context(handler)

        @functools.wraps(handler)
        def run(event: Any, context: Any) -> Any:
            if not all(hasattr(context, name) for name in _CONTEXT_ATTRIBUTES):
                return handler(event, context)
            return injected(event, context)

        return run  # type: ignore[return-value]

    return decorate
