"""AWS Signature Version 4 for a job's request (`request.auth` of type `aws_iam`): Lambda Function URLs and API
Gateway routes with IAM auth.

botocore's signer (SigV4Auth over an AWSRequest) signs the request exactly as it is sent: its method, URL, every
header (Host and Content-Length included; botocore leaves out User-Agent and hop-by-hop ones) and its body, whose
SHA-256 also goes in X-Amz-Content-SHA256 (signed, and what some services ask for). X-Amz-Date is botocore's
clock at signing: an attempt is signed when made ready, seconds before it is sent, well within the 5 minutes of
skew AWS accepts. The headers it adds are credentials (the role session's token) or made from them: what is kept
of an answer is redacted of them, and botocore's debug logging, which would print them, is off
(tickwork.targets.aws.credentials, where the sessions come from).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Mapping

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

AUTH_TYPE = "aws_iam"
CONTENT_SHA256 = "X-Amz-Content-SHA256"
# What signing sets: a job's own headers of these names are refused (tickwork.tenant.job_edits).
SIGNED_BY_TICKWORK = frozenset({"authorization", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256"})


@dataclass(frozen=True)
class SigV4:
    """What signs one attempt: the role session's credentials, and the service and region the request is for."""

    access_key_id: str
    secret_access_key: str
    session_token: str
    service: str
    region: str

    def headers(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None) -> dict[str, str]:
        """`headers` with the signature's: Authorization, X-Amz-Date, X-Amz-Security-Token and the body's
        SHA-256. `url` is the one sent (scheme, Host header's value, path and query)."""
        kept = {n: v for n, v in headers.items() if n.lower() not in SIGNED_BY_TICKWORK}
        kept[CONTENT_SHA256] = hashlib.sha256(body or b"").hexdigest()
        request = AWSRequest(method=method, url=url, headers=kept, data=body or b"")
        credentials = Credentials(self.access_key_id, self.secret_access_key, self.session_token)
        SigV4Auth(credentials, self.service, self.region).add_auth(request)
        return dict(request.headers.items())

    def secrets(self, signed: Mapping[str, str]) -> tuple[str, ...]:
        """The values of `signed` (headers) that what is kept of an answer must not hold."""
        return tuple(v for n, v in signed.items() if n.lower() in ("authorization", "x-amz-security-token"))
