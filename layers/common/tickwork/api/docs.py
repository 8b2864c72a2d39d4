"""GET /docs: Swagger UI over GET /openapi.json, where a user enters an API key and tries the calls.

The Swagger UI bundle is the one aws-lambda-powertools ships (its `enable_swagger` serves it offline), served
from this origin: no CDN at run time. Not `enable_swagger` itself: it inlines 1.7 MB of script and style
into every page, which a Content-Security-Policy can only allow with 'unsafe-inline', and it embeds its own
rendering of the document, 422s included, instead of /openapi.json. Here the page is a shell, the script
and its settings are files, so the policy allows scripts from this origin only.
"""
from __future__ import annotations

import functools
from importlib import resources

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

router = Router()

# No inline script or style at all (Swagger UI styles its elements through the DOM, which the policy does
# not restrict; test_a_user_can_authorize_and_try_a_call_in_a_real_browser checks there is no violation);
# icons are data: URIs; "Try it out" calls this origin. Nothing may frame the page or post elsewhere.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
       " connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
_ASSETS = resources.files("aws_lambda_powertools.event_handler.openapi") / "swagger_ui"
# The assets change only with the powertools version, i.e. with a deploy.
_CACHE = "public, max-age=3600"

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Tickwork API</title>
  <link rel="stylesheet" href="docs/swagger-ui.css">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="docs/swagger-ui-bundle.js"></script>
  <script src="docs/init.js"></script>
</body>
</html>
"""

# Paths are relative to the page (GET /docs), so the page also works under a stage or a base path.
# persistAuthorization stays off: the key lives in the page's memory only, never in localStorage.
# validatorUrl null: no call to the public validator at swagger.io.
INIT = """window.ui = SwaggerUIBundle({
  url: new URL("openapi.json", document.baseURI).href,
  dom_id: "#swagger-ui",
  deepLinking: true,
  docExpansion: "list",
  filter: true,
  tryItOutEnabled: false,
  persistAuthorization: false,
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout"
});
"""


def _page_headers(content_type: str, cache: str) -> dict[str, str]:
    return {"Content-Type": content_type, "Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer", "Cache-Control": cache}


@router.get("/docs", include_in_schema=False)
def docs_page() -> Response[str]:
    return Response(200, headers=_page_headers("text/html; charset=utf-8", "no-cache"), body=PAGE)


@router.get("/docs/init.js", include_in_schema=False)
def docs_init() -> Response[str]:
    return Response(200, headers=_page_headers("text/javascript; charset=utf-8", _CACHE), body=INIT)


@router.get("/docs/swagger-ui-bundle.js", include_in_schema=False, compress=True)
def docs_script() -> Response[str]:
    return Response(200, headers=_page_headers("text/javascript; charset=utf-8", _CACHE),
                    body=_asset("swagger-ui-bundle.min.js"))


@router.get("/docs/swagger-ui.css", include_in_schema=False, compress=True)
def docs_style() -> Response[str]:
    return Response(200, headers=_page_headers("text/css; charset=utf-8", _CACHE), body=_asset("swagger-ui.min.css"))


@functools.cache
def _asset(name: str) -> str:
    return (_ASSETS / name).read_text(encoding="utf-8")
