"""The HTTP API's routes on the template SAM deploys (template.yaml transformed offline, as AWS receives it).

The local gateway hands every request to the function as `$default`, so this is where routes, authorizers and
throttles are tested: every operation of the OpenAPI document reaches a route of its own, behind the authorizer
unless the document says it needs no key; nothing falls to a `$default` route (there is none: API Gateway
answers a request no route matches with its own 404, invoking nothing, so no body is read before a key check);
the callback route has a throttle of its own, every other route the stage's default (docs/operations.md).
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.unit.test_template_operations import transformed

ROOT = Path(__file__).resolve().parents[2]
# The committed document, kept equal to what GET /openapi.json serves (test_api_health_docs.py).
OPENAPI = ROOT / "docs" / "openapi.json"
ANY = "ANY"
AUTHORIZER, PUBLIC = [{"ApiKeyAuthorizer": []}], [{"NONE": []}]
CALLBACK = ("POST", "/callbacks/{execution_id}/{attempt}/{token}")
# What the API serves outside its document, without a key: the document, its page, the console.
PAGES = [("GET", "/openapi.json"), ("GET", "/docs"), ("GET", "/docs/init.js"), ("GET", "/docs/swagger-ui-bundle.js"),
         ("GET", "/docs/swagger-ui.css"), ("GET", "/console"), ("GET", "/console/assets/0123456789abcdef/app.js")]

Route = tuple[str, str]  # (METHOD or ANY, path template)


@pytest.fixture(scope="module")
def stack() -> dict[str, Any]:
    return transformed()["Resources"]


@pytest.fixture(scope="module")
def routes(stack: dict[str, Any]) -> dict[Route, Any]:
    """Every route of the API, with its `security`, from the OpenAPI body SAM writes for it."""
    paths = stack["HttpApi"]["Properties"]["Body"]["paths"]
    return {(ANY if method == "x-amazon-apigateway-any-method" else method.upper(), path): op.get("security")
            for path, ops in paths.items() for method, op in ops.items()}


def operations() -> list[tuple[str, str, bool]]:
    """(METHOD, path, needs a key) of every operation of the OpenAPI document."""
    paths = json.loads(OPENAPI.read_text())["paths"]
    return [(method.upper(), path, op.get("security") != [{}])
            for path, ops in paths.items() for method, op in ops.items()]


def _segment_matches(want: str, got: str) -> bool:
    # A route's variable takes any segment; a request template's variable is matched only by a variable.
    return want.startswith("{") or (want == got and not got.startswith("{"))


def _specificity(route: Route) -> tuple[Any, ...]:
    # API Gateway prefers a full match to a greedy one, a literal segment to a variable, a method to ANY.
    segments = route[1].strip("/").split("/")
    return (tuple(2 if s.endswith("+}") else 1 if s.startswith("{") else 0 for s in segments), route[0] == ANY)


def chosen(routes: dict[Route, Any], method: str, path: str) -> Route | None:
    """The route API Gateway picks for `method path`; None: no route takes it."""
    wanted = path.strip("/").split("/")
    candidates = []
    for route in routes:
        if route[0] not in (method, ANY) or route[1] == "$default":
            continue
        segments = route[1].strip("/").split("/")
        if segments[-1].endswith("+}"):
            prefix = segments[:-1]
            if len(wanted) > len(prefix) and all(map(_segment_matches, prefix, wanted)):
                candidates.append(route)
        elif len(segments) == len(wanted) and all(map(_segment_matches, segments, wanted)):
            candidates.append(route)
    return min(candidates, key=_specificity, default=None)


def test_route_choice_follows_api_gateways_priorities() -> None:
    routes = {("ANY", "/a/{id}"): 1, ("GET", "/a/{id}"): 2, ("GET", "/a/b"): 3, ("ANY", "/a/{proxy+}"): 4}
    assert chosen(routes, "GET", "/a/b") == ("GET", "/a/b")
    assert chosen(routes, "GET", "/a/{x}") == ("GET", "/a/{id}")
    assert chosen(routes, "POST", "/a/{x}") == ("ANY", "/a/{id}")
    assert chosen(routes, "POST", "/a/{x}/c") == ("ANY", "/a/{proxy+}")
    assert chosen(routes, "POST", "/b") is None and chosen({("ANY", "/a/b"): 1}, "GET", "/a/{x}") is None


def test_every_operation_of_the_openapi_document_has_a_route_behind_the_authorizer_it_needs(
        routes: dict[Route, Any]) -> None:
    missing, wrong = [], []
    for method, path, keyed in operations():
        route = chosen(routes, method, path)
        if route is None:
            missing.append(f"{method} {path}")
        elif routes[route] != (AUTHORIZER if keyed else PUBLIC):
            wrong.append(f"{method} {path} -> {route}: {routes[route]}")
    assert not missing, f"no route (it would fall to $default, where no authorizer runs): {missing}"
    assert not wrong, wrong


def test_the_pages_outside_the_document_have_public_routes(routes: dict[Route, Any]) -> None:
    found = {page: chosen(routes, *page) for page in PAGES}
    assert all(found.values()), found
    assert {page: routes[route] for page, route in found.items() if routes[route] != PUBLIC} == {}


def test_there_is_no_default_route_and_no_route_nothing_needs(routes: dict[Route, Any]) -> None:
    assert not [route for route in routes if route[1] == "$default"]
    used = {chosen(routes, method, path) for method, path, _ in operations()} | {chosen(routes, *p) for p in PAGES}
    assert set(routes) - used == set()


def test_a_public_route_takes_only_its_own_method(routes: dict[Route, Any]) -> None:
    # Behind no authorizer an ANY route would hand any method's body to the function without a key.
    assert [route for route, security in routes.items() if security == PUBLIC and route[0] == ANY] == []
    assert routes[CALLBACK] == PUBLIC


def test_every_route_may_invoke_the_function(stack: dict[str, Any], routes: dict[Route, Any]) -> None:
    # Without a $default route SAM grants each route on its own; a route without a grant answers 500.
    grants = [res["Properties"] for res in stack.values() if res["Type"] == "AWS::Lambda::Permission"
              and res["Properties"]["FunctionName"] == {"Ref": "ApiFunction"}]
    granted = {grant["SourceArn"]["Fn::Sub"][0].split("${__Stage__}", 1)[1] for grant in grants
               if "${__Stage__}" in json.dumps(grant["SourceArn"])}
    wanted = {f"/{'*' if method == ANY else method}{re.sub(r'{[^}]+}', '*', path)}" for method, path in routes}
    assert wanted - granted == set()


def test_the_callback_route_has_a_throttle_of_its_own_and_every_other_route_the_stages(
        stack: dict[str, Any], routes: dict[Route, Any]) -> None:
    stage = stack["HttpApiApiGatewayDefaultStage"]["Properties"]
    assert stage["DefaultRouteSettings"] == {"ThrottlingRateLimit": {"Ref": "ApiThrottlingRateLimit"},
                                             "ThrottlingBurstLimit": {"Ref": "ApiThrottlingBurstLimit"}}
    assert stage["RouteSettings"] == {" ".join(CALLBACK): {
        "ThrottlingRateLimit": {"Ref": "CallbackThrottlingRateLimit"},
        "ThrottlingBurstLimit": {"Ref": "CallbackThrottlingBurstLimit"}}}
    # A RouteSettings key that names no route fails the deploy.
    assert {tuple(key.split(" ", 1)) for key in stage["RouteSettings"]} <= set(routes)
    params = transformed()["Parameters"]
    for prefix in ("Api", "Callback"):
        rate, burst = (params[f"{prefix}Throttling{kind}Limit"] for kind in ("Rate", "Burst"))
        assert 0 < int(rate["Default"]) <= int(burst["Default"]) <= int(burst["MaxValue"]) == 5000
        assert int(rate["MaxValue"]) == 10000  # the account's default regional limit; a route's cannot exceed it
