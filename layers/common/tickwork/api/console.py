"""The console: static HTML, CSS and JavaScript modules shipped in the package, served at GET /console.

The files are read once per execution environment. Assets are addressed by a hash of all of them
(`/console/assets/<version>/app.js`), so the JavaScript modules' relative imports stay consistent and every
asset URL can be cached for good; the HTML names the current version and is revalidated on every load.
No key is needed: the files hold no tenant's data, and the page calls the public API with the user's key.
"""
from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from importlib import resources

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from tickwork.errors import NotFoundError

router = Router()

CONSOLE_PATH = "/console"
ASSETS_PATH = f"{CONSOLE_PATH}/assets"
# index.html names its assets under this placeholder, replaced by the versioned asset path.
ASSETS_PLACEHOLDER = "%ASSETS%"
_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
          ".svg": "image/svg+xml", ".html": "text/html; charset=utf-8"}
# No inline script or style anywhere: the page's behaviour and looks come only from its own files.
CONTENT_SECURITY_POLICY = "; ".join((
    "default-src 'self'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:", "connect-src 'self'",
    "object-src 'none'", "base-uri 'none'", "form-action 'self'", "frame-ancestors 'none'",
))
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
# A versioned URL's content never changes; a new release gets a new version.
IMMUTABLE = "public, max-age=31536000, immutable"
# The page is small and names the current version: always revalidate it.
NO_CACHE = "no-cache"


@dataclass(frozen=True)
class Bundle:
    version: str
    index_html: str
    assets: dict[str, bytes]


@functools.cache
def bundle() -> Bundle:
    """The console's files and their version: the first 16 hex digits of a SHA-256 over every asset."""
    root = resources.files("tickwork") / "console"
    assets = {entry.name: entry.read_bytes() for entry in sorted(root.iterdir(), key=lambda e: e.name)
              if entry.is_file() and entry.name != "index.html" and _suffix(entry.name) in _TYPES}
    digest = hashlib.sha256()
    for name, content in assets.items():
        digest.update(name.encode() + b"\0" + hashlib.sha256(content).digest())
    version = digest.hexdigest()[:16]
    html = (root / "index.html").read_text("utf-8").replace(ASSETS_PLACEHOLDER, f"{ASSETS_PATH}/{version}")
    return Bundle(version, html, assets)


def _suffix(name: str) -> str:
    return name[name.rfind("."):] if "." in name else ""


def _static(body: str | bytes, content_type: str, cache: str) -> Response[str]:
    text = body.decode("utf-8") if isinstance(body, bytes) else body
    return Response(status_code=200, content_type=content_type, body=text,
                    headers={**SECURITY_HEADERS, "Cache-Control": cache})


@router.get(CONSOLE_PATH, include_in_schema=False)
def console_page() -> Response[str]:
    return _static(bundle().index_html, _TYPES[".html"], NO_CACHE)


@router.get(f"{ASSETS_PATH}/<version>/<name>", include_in_schema=False)
def console_asset(version: str, name: str) -> Response[str]:
    current = bundle()
    content = current.assets.get(name)
    if version != current.version or content is None:
        # An old version's asset cannot be served: the page that asked for it must be reloaded.
        raise NotFoundError("no such console file")
    return _static(content, _TYPES[_suffix(name)], IMMUTABLE)


@router.get(f"{CONSOLE_PATH}/", include_in_schema=False)
def console_slash() -> Response[str]:
    # One address for the page: a trailing slash, as typed by hand, is sent there rather than answered 404.
    return Response(status_code=308, body="", headers={**SECURITY_HEADERS, "Location": CONSOLE_PATH})
