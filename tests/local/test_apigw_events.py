"""The local API Gateway: HTTP request -> payload format 2.0 event, Lambda result -> HTTP response."""
from __future__ import annotations

import base64
import json

import pytest

from tickwork_local.apigw import HttpRequest, MalformedResponseError, build_event, http_response

# 2024-03-12T19:03:58.390Z
NOW = 1710270238.390


def request(method: str = "GET", target: str = "/jobs", headers: list[tuple[str, str]] | None = None,
            body: bytes = b"") -> HttpRequest:
    return HttpRequest(method, target, headers or [("Host", "127.0.0.1:3000"), ("User-Agent", "curl/8.5.0")],
                       body, source_ip="127.0.0.1", server_port=3000)


def test_get_with_query_string_builds_a_v2_event() -> None:
    event = build_event(request(target="/jobs?limit=10&status=active&status=paused&empty="), NOW, "req-1")

    assert event["version"] == "2.0"
    assert event["routeKey"] == "$default"
    assert event["rawPath"] == "/jobs"
    assert event["rawQueryString"] == "limit=10&status=active&status=paused&empty="
    assert event["queryStringParameters"] == {"limit": "10", "status": "active,paused", "empty": ""}
    assert event["isBase64Encoded"] is False
    assert "body" not in event and "cookies" not in event
    assert event["requestContext"] == {
        "accountId": "123456789012",
        "apiId": "local",
        "domainName": "127.0.0.1",
        "domainPrefix": "127",
        "http": {"method": "GET", "path": "/jobs", "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1",
                 "userAgent": "curl/8.5.0"},
        "requestId": "req-1",
        "routeKey": "$default",
        "stage": "$default",
        "time": "12/Mar/2024:19:03:58 +0000",
        "timeEpoch": 1710270238390,
    }


def test_query_values_are_url_decoded_but_raw_query_string_is_not() -> None:
    event = build_event(request(target="/schedules/preview?tz=Europe%2FParis&q=a+b"), NOW, "r")

    assert event["rawQueryString"] == "tz=Europe%2FParis&q=a+b"
    assert event["queryStringParameters"] == {"tz": "Europe/Paris", "q": "a b"}


def test_post_with_json_body_keeps_the_body_as_text() -> None:
    body = json.dumps({"name": "ping", "schedule": "*/2 * * * * *"}).encode()
    headers = [("Host", "localhost:3000"), ("Content-Type", "application/json"),
               ("Authorization", "Bearer tw_secret"), ("Content-Length", str(len(body)))]

    event = build_event(request("POST", "/jobs", headers, body), NOW, "r")

    assert event["requestContext"]["http"]["method"] == "POST"
    assert event["body"] == body.decode()
    assert event["isBase64Encoded"] is False
    assert "queryStringParameters" not in event and event["rawQueryString"] == ""
    assert event["headers"]["content-type"] == "application/json"
    assert event["headers"]["authorization"] == "Bearer tw_secret"
    assert event["requestContext"]["domainName"] == "localhost"


def test_binary_body_is_base64_encoded() -> None:
    body = bytes([0x1F, 0x8B, 0x08, 0x00, 0xFF, 0xFE])

    event = build_event(request("PUT", "/blob", [("Content-Type", "application/octet-stream")], body), NOW, "r")

    assert event["isBase64Encoded"] is True
    assert base64.b64decode(event["body"]) == body


def test_header_names_are_lower_cased_and_duplicates_comma_joined() -> None:
    headers = [("Host", "h"), ("Accept", "text/plain"), ("ACCEPT", "application/json"), ("X-Forwarded-For", "10.0.0.1")]

    event = build_event(request(headers=headers), NOW, "r")

    assert event["headers"]["accept"] == "text/plain,application/json"
    assert event["headers"]["x-forwarded-for"] == "10.0.0.1, 127.0.0.1"
    assert event["headers"]["x-forwarded-proto"] == "http"
    assert event["headers"]["x-forwarded-port"] == "3000"
    assert all(name == name.lower() for name in event["headers"])


def test_cookies_move_out_of_the_headers() -> None:
    headers = [("Host", "h"), ("Cookie", "a=1; b=2"), ("Cookie", "c=3")]

    event = build_event(request(headers=headers), NOW, "r")

    assert event["cookies"] == ["a=1", "b=2", "c=3"]
    assert "cookie" not in event["headers"]


def test_response_with_status_headers_and_cookies() -> None:
    response = http_response({
        "statusCode": 201,
        "headers": {"Content-Type": "application/json", "Location": "/jobs/1", "Content-Length": "999"},
        "cookies": ["session=abc; HttpOnly", "theme=dark"],
        "body": '{"id": "1"}',
        "isBase64Encoded": False,
    })

    assert response.status == 201
    assert response.body == b'{"id": "1"}'
    assert ("Location", "/jobs/1") in response.headers
    assert [v for k, v in response.headers if k == "set-cookie"] == ["session=abc; HttpOnly", "theme=dark"]
    assert not any(k.lower() == "content-length" for k, _ in response.headers)  # the server frames the body


def test_response_base64_body_is_decoded() -> None:
    payload = bytes(range(256))

    response = http_response({"statusCode": 200, "body": base64.b64encode(payload).decode(), "isBase64Encoded": True})

    assert response.body == payload


def test_response_without_status_code_is_inferred_as_json() -> None:
    response = http_response({"hello": "world"})

    assert response.status == 200
    assert response.headers == [("content-type", "application/json")]
    assert json.loads(response.body) == {"hello": "world"}


def test_response_without_body_is_empty() -> None:
    assert http_response({"statusCode": 204}).body == b""


@pytest.mark.parametrize("result", [
    {"statusCode": "abc"},
    {"statusCode": 700},
    {"statusCode": 200, "body": {"not": "a string"}},
    {"statusCode": 200, "body": "%%%", "isBase64Encoded": True},
    {"statusCode": 200, "headers": {"x": ["a", "b"]}},
])
def test_malformed_responses_are_refused(result: dict) -> None:
    with pytest.raises(MalformedResponseError):
        http_response(result)
