"""An independent AWS SigV4 check of a request as it arrived, written from AWS's description of the algorithm
(https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html), not from botocore: what a test holds
Tickwork's signatures (made with botocore) against. Checked itself against AWS's published `get-vanilla` example.
"""
from __future__ import annotations

import hashlib
import hmac
import re
from typing import Mapping
from urllib.parse import quote, unquote

_AUTHORIZATION = re.compile(r"^AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<scope>[^,]+), "
                            r"SignedHeaders=(?P<signed>[^,]+), Signature=(?P<signature>[0-9a-f]{64})$")


def expected_authorization(method: str, target: str, headers: Mapping[str, str], body: bytes, access_key: str,
                           secret_key: str, region: str, service: str, signed: list[str]) -> str:
    """The Authorization header AWS computes for the request (`target`: its path and query as sent), over the
    headers named in `signed` and the date of X-Amz-Date."""
    lower = {name.lower(): value for name, value in headers.items()}
    amz_date = lower["x-amz-date"]
    path, _, query = target.partition("?")
    canonical_uri = quote(quote(unquote(path), safe="/-_.~"), safe="/-_.~") if path != "/" else "/"
    pairs = sorted((quote(unquote(k), safe="-_.~"), quote(unquote(v), safe="-_.~"))
                   for k, _, v in (p.partition("=") for p in query.split("&") if p))
    canonical_headers = "".join(f"{name}:{' '.join(lower[name].split())}\n" for name in signed)
    canonical = "\n".join([method, canonical_uri, "&".join(f"{k}={v}" for k, v in pairs), canonical_headers,
                           ";".join(signed), hashlib.sha256(body).hexdigest()])
    scope = f"{amz_date[:8]}/{region}/{service}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = f"AWS4{secret_key}".encode()
    for part in (amz_date[:8], region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, SignedHeaders={';'.join(signed)}, Signature={signature}"


def verifies(method: str, target: str, headers: Mapping[str, str], body: bytes, access_key: str, secret_key: str,
             region: str, service: str) -> bool:
    """Whether the request's Authorization header is AWS's for it, with every header it names signed."""
    lower = {name.lower(): value for name, value in headers.items()}
    given = _AUTHORIZATION.match(lower.get("authorization", ""))
    if given is None:
        return False
    signed = given["signed"].split(";")
    if not set(signed) <= set(lower) or "host" not in signed:
        return False
    return hmac.compare_digest(lower["authorization"], expected_authorization(
        method, target, headers, body, access_key, secret_key, region, service, signed))
