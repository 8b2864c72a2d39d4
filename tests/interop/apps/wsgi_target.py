"""A WSGI application for gunicorn: `gunicorn -k sync tests.interop.apps.wsgi_target:app` (arrivals go to
the file named by $INTEROP_ARRIVALS)."""
from __future__ import annotations

from typing import Any, Callable, Iterable

from tests.interop.shapes import BIG_BODY, BODY, log_arrival, shape_of


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    headers = {name[5:].replace("_", "-"): value for name, value in environ.items() if name.startswith("HTTP_")}
    log_arrival(environ["PATH_INFO"], int(environ["SERVER_PORT"]), headers)
    shape = shape_of(environ["PATH_INFO"])
    if shape == "nolength":  # the server decides how the body ends
        start_response("200 OK", [("Content-Type", "text/plain")])
        return iter([BODY[:1], BODY[1:]])
    body = BIG_BODY if shape == "big" else BODY
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
