"""Tickwork's HTTPS API over urllib3: JSON in and out, errors as ApiError, lists read page by page."""
from __future__ import annotations

import json
from typing import Any, Iterator, Mapping, Sequence
from urllib.parse import quote, urlencode

import urllib3

from tickwork_cli import __version__
from tickwork_cli.errors import ApiError, CliError

TIMEOUT_SECONDS = 30.0
PAGE_SIZE = 200  # the API's largest page
# A 429 (rate limited) changed nothing: it is retried, any method, after the server's Retry-After. A request
# that may have reached the server (a read error) is never retried: a POST could then run twice.
RETRIES = urllib3.Retry(total=6, connect=2, read=0, status=5, status_forcelist={429}, allowed_methods=None,
                        respect_retry_after_header=True, backoff_factor=0.5, raise_on_status=False)

Query = Mapping[str, str | int | Sequence[str] | None]


def segment(value: str) -> str:
    """`value` as one path segment (a key or id a user typed cannot reach another route)."""
    return quote(value, safe="")


class Client:
    def __init__(self, api_url: str, api_key: str, pool: urllib3.PoolManager | None = None) -> None:
        self.api_url = api_url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {api_key}", "Accept": "application/json",
                         "User-Agent": f"tickwork-cli/{__version__}"}
        self._pool = pool or urllib3.PoolManager(retries=RETRIES, timeout=TIMEOUT_SECONDS)

    def get(self, path: str, query: Query | None = None) -> Any:
        return self.request("GET", path, query=query)

    def request(self, method: str, path: str, body: Any = None, query: Query | None = None) -> Any:
        """The answer's JSON (None for an empty one); ApiError for any status from 400 up."""
        url = self.api_url + path + _query_string(query)
        headers = dict(self._headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            response = self._pool.request(method, url, body=data, headers=headers)
        except urllib3.exceptions.HTTPError as error:
            raise CliError(f"cannot reach the API at {self.api_url}: {_reason(error)}") from None
        return _answer(response)

    def pages(self, path: str, query: Query | None = None, limit: int | None = None) -> Iterator[dict[str, Any]]:
        """The items of a list, following `next_cursor`, at most `limit` of them."""
        params = {**(query or {}), "limit": min(limit or PAGE_SIZE, PAGE_SIZE)}
        count = 0
        while True:
            page = self.get(path, params)
            for item in page["items"]:
                yield item
                count += 1
                if limit is not None and count >= limit:
                    return
            if not page.get("next_cursor"):
                return
            params["cursor"] = page["next_cursor"]


def _query_string(query: Query | None) -> str:
    pairs: list[tuple[str, str]] = []
    for name, value in (query or {}).items():
        if value is None:
            continue
        values = [value] if isinstance(value, (str, int)) else list(value)
        pairs.extend((name, str(v)) for v in values)
    return "?" + urlencode(pairs) if pairs else ""


def _answer(response: urllib3.BaseHTTPResponse) -> Any:
    text = response.data.decode("utf-8", "replace")
    try:
        data = json.loads(text) if text.strip() else None
    except ValueError:
        data = None
    if response.status < 400:
        return data
    raise _error(response.status, data, text)


def _error(status: int, data: Any, text: str) -> ApiError:
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        error = data["error"]
        return ApiError(status, str(error.get("code")), str(error.get("message")), error.get("field"))
    if isinstance(data, dict) and "message" in data:  # API Gateway's own answers (its authorizer's 401 and 403)
        return ApiError(status, "gateway", str(data["message"]))
    return ApiError(status, "http_error", text.strip()[:200] or "no body")


def _reason(error: Exception) -> str:
    reason = getattr(error, "reason", None)
    return str(reason or error)
