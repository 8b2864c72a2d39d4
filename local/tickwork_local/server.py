"""API Gateway, locally: a threaded HTTP server that hands each request to the API Lambda as a 2.0 event."""
from __future__ import annotations

import base64
import json
import logging
import os
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tickwork.rules.completion import loggable_path
from tickwork_local import apigw
from tickwork_local.functions import LambdaFunction

logger = logging.getLogger(__name__)

# API Gateway's own request payload limit.
MAX_BODY_BYTES = 10 * 1024 * 1024
# An idle client connection is dropped after this long, so it cannot pin a handler thread.
IDLE_TIMEOUT_SECONDS = 30


def new_request_id() -> str:
    """Shaped like API Gateway's ids (`JKJaXmPLvHcESHA=`)."""
    return base64.b64encode(os.urandom(10)).decode("ascii")


class RejectedRequestError(Exception):
    """A request API Gateway itself would refuse before reaching the Lambda."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.response = apigw.HttpResponse(status, [("content-type", "application/json")],
                                           json.dumps({"message": message}).encode())


class _ProxyHandler(BaseHTTPRequestHandler):
    api: LambdaFunction  # set on the subclass ApiServer builds
    server_version = "tickwork-local"
    timeout = IDLE_TIMEOUT_SECONDS

    def _proxy(self) -> None:
        request_id = new_request_id()
        try:
            request = apigw.HttpRequest(self.command, self.path, self.headers.items(), self._read_body(),
                                        self.client_address[0], self.server.server_address[1], self.request_version)
        except RejectedRequestError as exc:
            self._write(exc.response, request_id)
            return
        self._write(self._call_api(apigw.build_event(request, time.time(), request_id)), request_id)

    def __getattr__(self, name: str) -> Any:
        # API Gateway hands every method to the $default route, and the API answers one it lacks with its
        # JSON 404/405; BaseHTTPRequestHandler would answer a method without a do_<METHOD> with an HTML 501.
        if name.startswith("do_"):
            return self._proxy
        raise AttributeError(name)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """A request line or headers the server cannot read: JSON, as API Gateway answers, with the status
        phrase only (http.server's messages quote the request)."""
        self.close_connection = True
        self._write(RejectedRequestError(code, HTTPStatus(code).phrase).response, new_request_id())

    def _call_api(self, event: dict[str, Any]) -> apigw.HttpResponse:
        try:
            return apigw.http_response(self.api.invoke(event))
        except apigw.MalformedResponseError as exc:
            logger.error("API handler returned a malformed response: %s", exc)
        except Exception:  # API Gateway answers 500 when the integration fails; so do we, after logging it
            logger.exception("API handler failed on %s %s", self.command, loggable_path(event["rawPath"]))
        return apigw.internal_error()

    def _read_body(self) -> bytes:
        try:
            if "chunked" in self.headers.get("transfer-encoding", "").lower():
                return self._read_chunked()
            length = int(self.headers.get("content-length") or 0)
        except ValueError:  # a chunk size or content-length that is not a number
            raise RejectedRequestError(400, "Bad Request") from None
        if length > MAX_BODY_BYTES:
            raise RejectedRequestError(413, "Request Entity Too Large")
        return self.rfile.read(length) if length > 0 else b""

    def _read_chunked(self) -> bytes:
        body = bytearray()
        while size := int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16):
            if len(body) + size > MAX_BODY_BYTES:
                raise RejectedRequestError(413, "Request Entity Too Large")
            body += self.rfile.read(size)
            self.rfile.readline()  # the CRLF after each chunk
        while self.rfile.readline().strip():  # trailers, up to the blank line
            pass
        return bytes(body)

    def _write(self, response: apigw.HttpResponse, request_id: str) -> None:
        self.send_response(response.status)
        for name, value in response.headers:
            self.send_header(name, value)
        self.send_header("apigw-requestid", request_id)
        self.send_header("content-length", str(len(response.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    def log_message(self, format: str, *args: Any) -> None:
        # The request line only (a callback's token masked), at DEBUG: never headers or bodies, which carry API keys.
        shown = (loggable_path(a) if isinstance(a, str) else a for a in args)
        logger.debug("%s " + format, self.address_string(), *shown)


class ApiServer:
    def __init__(self, host: str, port: int, api: LambdaFunction) -> None:
        handler = type("ProxyHandler", (_ProxyHandler,), {"api": api})
        self._httpd = ThreadingHTTPServer((host, port), handler)
        self._httpd.daemon_threads = True  # a stuck client must not hold up shutdown
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="tickwork-api", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float) -> None:
        if self._thread.is_alive():
            self._httpd.shutdown()
            self._thread.join(timeout)
        self._httpd.server_close()
