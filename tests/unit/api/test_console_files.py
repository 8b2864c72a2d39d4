"""The console's static files as the API function serves them: no key needed, strict CSP, cache headers by kind."""
from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest

from tickwork.api.app import app
from tickwork.api.console import ASSETS_PATH, CONSOLE_PATH, bundle
from tickwork_local import apigw
from tickwork_local.lambda_context import LocalContext

CONSOLE_FILES = ("app.js", "api.js", "calendars.js", "chart.js", "dom.js", "form.js", "format.js", "job.js", "jobs.js",
                 "replay.js", "run.js", "signin.js", "style.css")


def get(path: str, headers: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    request = apigw.HttpRequest("GET", path, [("host", "127.0.0.1:3000"), *headers], b"", "127.0.0.1", 3000)
    return app.resolve(apigw.build_event(request, 1_800_000_000.0, "req"), LocalContext("api", 29))


def header(response: dict[str, Any], name: str) -> str:
    return next(v for k, v in response["headers"].items() if k.lower() == name.lower())


def test_the_page_needs_no_key_names_its_versioned_assets_and_is_revalidated() -> None:
    response = get(CONSOLE_PATH)

    assert response["statusCode"] == 200
    assert header(response, "Content-Type") == "text/html; charset=utf-8"
    assert header(response, "Cache-Control") == "no-cache"
    assets = re.findall(r'(?:src|href)="(/console/[^"]+)"', response["body"])
    assert assets == [f"{ASSETS_PATH}/{bundle().version}/style.css", f"{ASSETS_PATH}/{bundle().version}/app.js"]


def test_every_console_response_has_a_strict_content_security_policy() -> None:
    for path in (CONSOLE_PATH, f"{ASSETS_PATH}/{bundle().version}/app.js"):
        response = get(path)
        policy = {d.split()[0]: d.split()[1:] for d in header(response, "Content-Security-Policy").split("; ")}
        assert policy["default-src"] == ["'self'"] and policy["connect-src"] == ["'self'"]
        assert policy["script-src"] == ["'self'"] and policy["style-src"] == ["'self'"]  # no 'unsafe-inline'
        assert policy["frame-ancestors"] == ["'none'"]
        assert header(response, "X-Content-Type-Options") == "nosniff"


@pytest.mark.parametrize("name", CONSOLE_FILES)
def test_assets_are_served_with_their_type_and_cached_for_good(name: str) -> None:
    response = get(f"{ASSETS_PATH}/{bundle().version}/{name}")

    assert response["statusCode"] == 200
    kind = "text/css" if name.endswith(".css") else "text/javascript"
    assert header(response, "Content-Type") == f"{kind}; charset=utf-8"
    assert header(response, "Cache-Control") == "public, max-age=31536000, immutable"
    assert response["body"].encode() == bundle().assets[name]


def test_the_version_is_a_hash_of_the_assets_contents() -> None:
    digest = hashlib.sha256()
    for name, content in sorted(bundle().assets.items()):
        digest.update(name.encode() + b"\0" + hashlib.sha256(content).digest())

    assert bundle().version == digest.hexdigest()[:16]
    assert sorted(bundle().assets) == sorted(CONSOLE_FILES)


@pytest.mark.parametrize("path", [
    f"{ASSETS_PATH}/0000000000000000/app.js",  # an older release's asset
    "{assets}/missing.js",
    "{assets}/index.html",  # only through /console, where it names the current version
])
def test_an_unknown_asset_is_a_404_in_the_api_error_shape(path: str) -> None:
    response = get(path.format(assets=f"{ASSETS_PATH}/{bundle().version}"))

    assert response["statusCode"] == 404
    assert json.loads(response["body"]) == {"error": {"code": "not_found", "message": "no such console file", "field": None}}


def test_no_inline_script_or_style_in_the_page() -> None:
    body = get(CONSOLE_PATH)["body"]

    assert "<style" not in body and " style=" not in body
    assert re.findall(r"<script[^>]*>", body) == [f'<script type="module" src="{ASSETS_PATH}/{bundle().version}/app.js">']
    assert not re.search(r"\son[a-z]+=", body)


def test_a_trailing_slash_is_redirected_to_the_page() -> None:
    response = get(f"{CONSOLE_PATH}/")

    assert response["statusCode"] == 308
    assert header(response, "Location") == CONSOLE_PATH
