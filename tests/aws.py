"""AWS for the tests of the AWS kinds of target: moto's server (ThreadedMotoServer, real HTTP on a free loopback
port, run in a thread of the test process), clients pointed at it with boto3's `endpoint_url`, and a recording
forwarder in front of it for what moto cannot do on demand (answer a 503, never answer).

moto accepts any credentials, does not enforce trust policies nor external ids (a refusal is injected at the STS
client instead: tests/unit/targets), and runs no Lambda code without Docker: its `/moto-api/config` turns Docker
off, and an invocation then echoes its payload.
"""
from __future__ import annotations

import http.client
import json
import logging
import re
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator
from urllib.parse import unquote_plus

import boto3
from moto.server import ThreadedMotoServer

from tickwork.targets.aws.clients import Clients
from tickwork.targets.aws.credentials import RoleSessions

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's default account: what the test credentials and the roles below act in
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/tickwork-target-tests"
OTHER_ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/someone-elses-role"  # not of the deployment's pattern
ROLE_PATTERN = "arn:aws:iam::*:role/tickwork-target-*"
_KEYS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def moto_server() -> Iterator[str]:
    """moto's server on a free loopback port, Lambda without Docker; yields its endpoint URL."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    _post(endpoint, "/moto-api/config", {"lambda": {"use_docker": False}})
    yield endpoint
    server.stop()


def admin(endpoint: str, service: str) -> Any:
    """A client with the test account's own credentials, to make and read what the targets call."""
    return boto3.client(service, region_name=REGION, endpoint_url=endpoint, **_KEYS)


def clients(endpoint: str, sts_endpoint: str | None = None, read_timeout: float = 30.0) -> Clients:
    """The executor's clients of target roles: targets at `endpoint`, AssumeRole at `sts_endpoint` (or there)."""
    sessions = RoleSessions(lambda: admin(sts_endpoint or endpoint, "sts"), ROLE_PATTERN)
    return Clients(sessions, read_timeout=read_timeout, endpoint_url=endpoint)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def make_lambda(endpoint: str) -> str:
    """A function (its code never runs: moto without Docker echoes the payload); returns its ARN."""
    role = admin(endpoint, "iam").create_role(RoleName=unique("lambda"), AssumeRolePolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                 "Principal": {"Service": "lambda.amazonaws.com"}}]}))
    made = admin(endpoint, "lambda").create_function(
        FunctionName=unique("fn"), Runtime="python3.13", Role=role["Role"]["Arn"], Handler="app.handler",
        Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18})
    return str(made["FunctionArn"])


def make_state_machine(endpoint: str) -> str:
    definition = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}})
    made = admin(endpoint, "stepfunctions").create_state_machine(
        name=unique("sm"), definition=definition, roleArn=f"arn:aws:iam::{ACCOUNT}:role/sfn")
    return str(made["stateMachineArn"])


def _post(endpoint: str, path: str, body: dict[str, Any]) -> None:
    host, port = endpoint.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("POST", path, json.dumps(body), {"content-type": "application/json"})
    assert conn.getresponse().status < 300
    conn.close()


# The input each harness run sends: its case and run id, found again in any protocol's encoding of it.
PROBE_INPUT = '{"probe": "%s/<aws.scheduler.execution-id>"}'
_PROBE = re.compile(r"probe\W+(\w+)/([0-9a-f-]{36})")


# A 503 as the JSON protocols (SQS, EventBridge, Step Functions, Lambda) and the query protocol (SNS) answer it.
_JSON_UNAVAILABLE = ({"x-amzn-ErrorType": "ServiceUnavailable", "content-type": "application/x-amz-json-1.0"},
                     b'{"__type": "ServiceUnavailable", "message": "injected by the test"}')
_QUERY_UNAVAILABLE = ({"content-type": "text/xml"},
                      b"<ErrorResponse><Error><Type>Receiver</Type><Code>ServiceUnavailable</Code><Message>injected by "
                      b"the test</Message></Error><RequestId>test</RequestId></ErrorResponse>")
# What Lambda answers for a function that does not exist (moto without Docker invokes any name).
NO_SUCH_FUNCTION = (404, {"x-amzn-ErrorType": "ResourceNotFoundException", "content-type": "application/json"},
                    b'{"Type": "User", "message": "Function not found"}')


@dataclass
class Forwarder:
    """An endpoint in front of moto's server: forwards each request and notes the run id its probe names (in
    order); a `transient` probe is answered 503 (as AWS answers when unavailable, in the protocol's shape), a
    `silent` one held, unanswered, until closed, and a probe in `canned` answered so."""

    moto: str
    canned: dict[str, tuple[int, dict[str, str], bytes]] = field(default_factory=dict)
    run_ids: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)  # of each request, in order
    release: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        forwarder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                forwarder.headers.append(dict(self.headers))
                probe = _PROBE.search(unquote_plus(body.decode(errors="replace")).replace("\\", ""))
                if probe is not None:
                    forwarder.run_ids.append(probe.group(2))
                case = probe.group(1) if probe else ""
                if case == "silent":
                    forwarder.release.wait(30)
                    self.close_connection = True
                    return
                if case == "transient":
                    query = "x-www-form-urlencoded" in self.headers.get("content-type", "")
                    self._answer(503, *(_QUERY_UNAVAILABLE if query else _JSON_UNAVAILABLE))
                    return
                if case in forwarder.canned:
                    self._answer(*forwarder.canned[case])
                    return
                self._answer(*forwarder.forward(self.command, self.path, dict(self.headers), body))

            def _answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    if name.lower() not in {"content-length", "transfer-encoding", "connection", "date", "server"}:
                        self.send_header(name, value)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def forward(self, method: str, path: str, headers: dict[str, str], body: bytes
                ) -> tuple[int, dict[str, str], bytes]:
        host, port = self.moto.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request(method, path, body, headers)
        response = conn.getresponse()
        answer = response.status, dict(response.getheaders()), response.read()
        conn.close()
        return answer

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
